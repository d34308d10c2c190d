//! Where log messages go: stderr by default (WARN and above), the level from
//! KERNEL_REPLAY_LOG, or a callback.

mod common;

use std::process::Command;

use common::*;
use kernel_replay::ffi::types::kr_log_level_t::*;
use kernel_replay::ffi::*;

/// Declines a snapshot (no iterator) and installs nothing else: one WARN.
fn provoke_a_warning() {
    kr_set_executable_iterator(None);
    // SAFETY: the snapshot is freed right away.
    unsafe { kr_snapshot_free(kr_snap(kernel_replay::hsa::hsa_agent_t { handle: 1 })) };
}

#[test]
fn the_callback_receives_messages_at_or_above_the_level() {
    if !in_child("the_callback_receives_messages_at_or_above_the_level") {
        return;
    }
    capture_logs(KR_LOG_WARN);
    provoke_a_warning();
    let got = logs();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, KR_LOG_WARN);
    assert!(
        got[0].1.contains("declined (not initialized)"),
        "{}",
        got[0].1
    );

    logs_clear();
    kr_set_log_level(KR_LOG_ERROR as u32);
    provoke_a_warning();
    assert!(logs().is_empty(), "WARN is filtered at ERROR");

    // Off (0) and out-of-range levels are handled, not undefined.
    kr_set_log_level(0);
    provoke_a_warning();
    assert!(logs().is_empty());
    kr_set_log_level(77);
    // SAFETY: NULL tables are accepted (an INVALID_ARGUMENT, logged nowhere).
    let _ = unsafe { kr_memory_tracker_init(std::ptr::null_mut(), std::ptr::null_mut(), 3) };
    provoke_a_warning();
    assert_eq!(logs().len(), 1, "77 clamps to TRACE: {:?}", logs());
}

#[test]
fn messages_go_to_stderr_by_default_and_back_after_a_null_callback() {
    if !in_child("messages_go_to_stderr_by_default_and_back_after_a_null_callback") {
        return;
    }
    // The parent checks this process's stderr below.
    provoke_a_warning();
    kr_set_log_callback(Some(capture_log), std::ptr::null_mut());
    kr_set_log_callback(None, std::ptr::null_mut());
    provoke_a_warning();
    assert!(logs().is_empty(), "NULL callback: back to stderr");
}

#[test]
fn stderr_carries_warnings_and_the_environment_sets_the_level() {
    let run = |test: &str, level: Option<&str>| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
            .env("KR_TEST_CHILD", test);
        match level {
            Some(l) => cmd.env("KERNEL_REPLAY_LOG", l),
            None => cmd.env_remove("KERNEL_REPLAY_LOG"),
        };
        let out = cmd.output().unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let test = "messages_go_to_stderr_by_default_and_back_after_a_null_callback";
    let default = run(test, None);
    assert_eq!(
        default.matches("[kernel-replay] WARN").count(),
        2,
        "{default}"
    );
    let quiet = run(test, Some("error"));
    assert_eq!(quiet.matches("[kernel-replay]").count(), 0, "{quiet}");
    let off = run(test, Some("off"));
    assert_eq!(off.matches("[kernel-replay]").count(), 0, "{off}");
}

#[test]
fn info_level_from_the_environment_reaches_the_callback() {
    if !in_child_with(
        "info_level_from_the_environment_reaches_the_callback",
        &[("KERNEL_REPLAY_LOG", "info")],
    ) {
        return;
    }
    let sim = hsa_sim::session(1);
    kr_set_log_callback(Some(capture_log), std::ptr::null_mut());
    // SAFETY: the runtime's tables.
    unsafe { kr_memory_tracker_init(core_table(), amd_table(), 0) };
    drop(sim);
    assert!(
        logs()
            .iter()
            .any(|(l, m)| *l == KR_LOG_INFO && m.contains("wrappers installed")),
        "{:?}",
        logs()
    );
}
