//! Settings from the environment, as a new user meets them: a value the
//! library does not understand, or a misspelt variable, is named once in a
//! warning with what it accepts, and the default is used; a code-object
//! file that is not a small regular file is refused without reading it.
//! Each test runs in a child process with its own environment.

mod common;

use common::*;
use kernel_replay::{LogLevel, StoragePolicy, Strategy};

/// Installs the library over the runtime with warnings captured.
fn install_with_warnings_captured() -> hsa_sim::SimSession {
    let sim = hsa_sim::session(1);
    capture_logs(LogLevel::Warn);
    logs_clear();
    // SAFETY: the runtime's own tables.
    let installed = unsafe { kernel_replay::install(core_table(), amd_table(), 0) };
    assert_eq!(installed, Ok(kernel_replay::Installed::Installed));
    sim
}

#[test]
fn every_setting_not_understood_is_named_once_with_what_it_accepts() {
    let wrong = [
        (
            "KERNEL_REPLAY_STORAGE",
            "garbage",
            "auto, device, pinned, pageable, baseline",
        ),
        (
            "KERNEL_REPLAY_STRATEGY",
            "fastest",
            "auto, copies, scatter, dirty",
        ),
        ("KERNEL_REPLAY_COPY", "sometimes", "batched, blocking"),
        ("KERNEL_REPLAY_VERIFY", "maybe", "1, on, true, yes, 0, off"),
    ];
    let mut envs: Vec<(&str, &str)> = wrong
        .iter()
        .map(|&(name, value, _)| (name, value))
        .collect();
    envs.push(("KERNEL_REPLAY_STORGE", "device"));
    if !in_child_with(
        "every_setting_not_understood_is_named_once_with_what_it_accepts",
        &envs,
    ) {
        return;
    }
    let _sim = install_with_warnings_captured();
    // The defaults are in force.
    assert_eq!(kernel_replay::storage_policy(), StoragePolicy::Auto);
    assert_eq!(kernel_replay::strategy(), Strategy::Auto);
    assert!(!kernel_replay::verify());
    for (name, value, accepted) in wrong {
        let named = logs_containing(&format!("{name}=\"{value}\""));
        assert_eq!(named.len(), 1, "{name}: {:?}", logs());
        assert!(named[0].contains(accepted), "{}", named[0]);
    }
    let misspelt = logs_containing("KERNEL_REPLAY_STORGE");
    assert_eq!(misspelt.len(), 1, "{:?}", logs());
    assert!(
        misspelt[0].contains("KERNEL_REPLAY_STORAGE"),
        "the known names are listed"
    );
    // Read once: a snapshot and a second install warn again about nothing.
    logs_clear();
    assert!(kernel_replay::set_tracking(true));
    let _ = kernel_replay::snap(agent(_sim.gpu(0)));
    // SAFETY: the runtime's own tables.
    let _ = unsafe { kernel_replay::install(core_table(), amd_table(), 0) };
    assert!(logs_containing("KERNEL_REPLAY_").is_empty(), "{:?}", logs());
}

#[test]
fn a_setting_the_environment_gets_right_is_used() {
    if !in_child_with(
        "a_setting_the_environment_gets_right_is_used",
        &[
            ("KERNEL_REPLAY_STORAGE", " Pinned "),
            ("KERNEL_REPLAY_STRATEGY", "dirty-blocks"),
            ("KERNEL_REPLAY_VERIFY", "ON"),
        ],
    ) {
        return;
    }
    let _sim = install_with_warnings_captured();
    assert_eq!(kernel_replay::storage_policy(), StoragePolicy::Pinned);
    assert_eq!(kernel_replay::strategy(), Strategy::DirtyBlocks);
    assert!(kernel_replay::verify());
    assert!(logs_containing("KERNEL_REPLAY_").is_empty(), "{:?}", logs());
}

/// A code-object file that is a device node: refused unread (reading
/// `/dev/zero` would grow the process without bound), with a warning, and
/// the embedded code object runs the kernels instead.
#[test]
fn a_code_object_that_is_no_regular_file_is_refused_and_the_embedded_one_used() {
    if !in_child_with(
        "a_code_object_that_is_no_regular_file_is_refused_and_the_embedded_one_used",
        &[
            ("KERNEL_REPLAY_CODE_OBJECT", "/dev/zero"),
            ("KERNEL_REPLAY_STRATEGY", "dirty"),
        ],
    ) {
        return;
    }
    let sim = install_with_warnings_captured();
    assert!(kernel_replay::set_tracking(true));
    kernel_replay::set_batched_copies(true);
    kernel_replay::set_storage_policy(StoragePolicy::Device);
    let buffer = device_buffer(&sim, sim.gpu(0), 8192, 3);
    let snap = Snap::of(sim.gpu(0));
    assert!(snap.ok());
    let method = snap.0.as_ref().map(kernel_replay::Snapshot::copy_method);
    assert_eq!(method, Ok(kernel_replay::CopyMethod::DirtyBlocks));
    let refused = logs_containing("KERNEL_REPLAY_CODE_OBJECT=/dev/zero");
    assert_eq!(refused.len(), 1, "{:?}", logs());
    assert!(refused[0].contains("not a regular file"), "{}", refused[0]);
    fill(buffer, 8192, 9);
    assert!(snap.restore_all());
    assert!(all(buffer, 8192, 3));
}

/// A code-object file over the size limit is refused the same way.
#[test]
fn a_code_object_file_over_the_limit_is_refused() {
    let path = std::env::temp_dir().join(format!("kr-large-object-{}", std::process::id()));
    if std::env::var("KR_TEST_CHILD").is_err() {
        let file = std::fs::File::create(&path).expect("a temporary file");
        // Past the 64 MiB the library reads at most; sparse, so no disk is
        // used for it.
        file.set_len(1 << 30).expect("a sparse file");
    }
    let path_text = path.to_string_lossy().into_owned();
    let in_child = in_child_with(
        "a_code_object_file_over_the_limit_is_refused",
        &[
            ("KERNEL_REPLAY_CODE_OBJECT", &path_text),
            ("KERNEL_REPLAY_STRATEGY", "scatter"),
        ],
    );
    if !in_child {
        let _ = std::fs::remove_file(&path);
        return;
    }
    let sim = install_with_warnings_captured();
    assert!(kernel_replay::set_tracking(true));
    kernel_replay::set_batched_copies(true);
    kernel_replay::set_storage_policy(StoragePolicy::Device);
    let _buffer = device_buffer(&sim, sim.gpu(0), 4096, 1);
    let snap = Snap::of(sim.gpu(0));
    assert!(snap.ok());
    let refused = logs_containing("KERNEL_REPLAY_CODE_OBJECT=");
    assert_eq!(refused.len(), 1, "{:?}", logs());
    assert!(refused[0].contains("more than"), "{}", refused[0]);
}
