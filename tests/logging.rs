//! Where log messages go when the program installed no `log` logger of its
//! own (a C or C++ tool): stderr by default (WARN and above), the level from
//! KERNEL_REPLAY_LOG, or the callback of `kr_set_log_callback`. (A Rust
//! program's own logger receives them instead: every other test binary
//! captures them that way, see `common::capture_logs`.)

mod common;

use std::ffi::{c_char, c_void, CStr};
use std::process::Command;
use std::sync::{Mutex, PoisonError};

use common::*;
use kernel_replay::ffi::*;
use kernel_replay::LogLevel;

static C_LOGS: Mutex<Vec<(LogLevel, String)>> = Mutex::new(Vec::new());

/// The C callback: collects what the library's own backend hands it.
unsafe extern "C" fn c_capture(level: LogLevel, message: *const c_char, _: *mut c_void) {
    // SAFETY: the library passes a NUL-terminated message valid for the call.
    let text = unsafe { CStr::from_ptr(message) }
        .to_string_lossy()
        .into_owned();
    C_LOGS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((level, text));
}

fn c_logs() -> Vec<(LogLevel, String)> {
    C_LOGS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
}

fn c_logs_clear() {
    C_LOGS
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
}

fn capture_through_c(level: LogLevel) {
    kr_set_log_callback(Some(c_capture), std::ptr::null_mut());
    kr_set_log_level(level.code());
}

/// Declines a snapshot (no iterator) and installs nothing else: one WARN.
fn provoke_a_warning() {
    kernel_replay::set_executable_iterator(None);
    // SAFETY: the snapshot is freed right away.
    unsafe { kr_snapshot_free(kr_snap(kernel_replay::hsa::hsa_agent_t { handle: 1 })) };
}

#[test]
fn the_callback_receives_messages_at_or_above_the_level() {
    if !in_child("the_callback_receives_messages_at_or_above_the_level") {
        return;
    }
    capture_through_c(LogLevel::Warn);
    provoke_a_warning();
    let got = c_logs();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0, LogLevel::Warn);
    assert!(
        got[0].1.contains("declined (not initialized)"),
        "{}",
        got[0].1
    );

    c_logs_clear();
    kr_set_log_level(LogLevel::Error.code());
    provoke_a_warning();
    assert!(c_logs().is_empty(), "WARN is filtered at ERROR");

    // Off (0) and out-of-range levels are handled, not undefined.
    kr_set_log_level(0);
    provoke_a_warning();
    assert!(c_logs().is_empty());
    kr_set_log_level(77);
    // SAFETY: NULL tables are accepted (an INVALID_ARGUMENT, logged nowhere).
    let _ = unsafe { kr_memory_tracker_init(std::ptr::null_mut(), std::ptr::null_mut(), 3) };
    provoke_a_warning();
    assert_eq!(c_logs().len(), 1, "77 clamps to TRACE: {:?}", c_logs());
}

#[test]
fn messages_go_to_stderr_by_default_and_back_after_a_null_callback() {
    if !in_child("messages_go_to_stderr_by_default_and_back_after_a_null_callback") {
        return;
    }
    // The parent checks this process's stderr below.
    provoke_a_warning();
    kr_set_log_callback(Some(c_capture), std::ptr::null_mut());
    kr_set_log_callback(None, std::ptr::null_mut());
    provoke_a_warning();
    assert!(c_logs().is_empty(), "NULL callback: back to stderr");
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
    kr_set_log_callback(Some(c_capture), std::ptr::null_mut());
    // SAFETY: the runtime's tables.
    unsafe { kr_memory_tracker_init(core_table(), amd_table(), 0) };
    drop(sim);
    assert!(
        c_logs()
            .iter()
            .any(|(l, m)| *l == LogLevel::Info && m.contains("wrappers installed")),
        "{:?}",
        c_logs()
    );
}
