//! Installing the wrappers: argument checks, the table-size guard, install
//! once per table kind, never chaining a wrapper to itself, and one copy of
//! the library per process. Every test runs in its own process, since
//! installation is once per process.

mod common;

use std::mem::offset_of;

use common::*;
use hsa_sim::{fresh_amd_ext_table, fresh_core_table, PoolKind, TableCopy};
use kernel_replay::hsa::sys::ApiTableVersion;
use kernel_replay::hsa::{AmdExtTable, CoreApiTable};
use kernel_replay::testing::process_marker::{self, Owner};
use kernel_replay::testing::required_entries;

fn core(t: &mut TableCopy) -> *mut CoreApiTable {
    t.as_mut_ptr().cast()
}

fn amd(t: &mut TableCopy) -> *mut AmdExtTable {
    t.as_mut_ptr().cast()
}

fn version(t: &mut TableCopy) -> &mut ApiTableVersion {
    // SAFETY: every table starts with its ApiTableVersion.
    unsafe { &mut *t.as_mut_ptr().cast::<ApiTableVersion>() }
}

/// The size a table must declare to cover every entry the library uses.
fn size_needed(offsets: impl Iterator<Item = usize>) -> u32 {
    (offsets.max().unwrap() + std::mem::size_of::<usize>()) as u32
}

#[test]
fn both_tables_null_is_invalid_argument_and_latches_nothing() {
    if !in_child("both_tables_null_is_invalid_argument_and_latches_nothing") {
        return;
    }
    // SAFETY: NULL tables are accepted.
    let status = unsafe { kernel_replay::install(std::ptr::null_mut(), std::ptr::null_mut(), 0) };
    assert_eq!(status, Err(kernel_replay::InstallError::NoTables));
    let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
    assert_eq!(
        // SAFETY: complete table copies.
        unsafe { kernel_replay::install(core(&mut c), amd(&mut a), 0) },
        Ok(kernel_replay::Installed::Installed)
    );
}

#[test]
fn a_later_library_instance_is_skipped_and_tables_are_untouched() {
    if !in_child("a_later_library_instance_is_skipped_and_tables_are_untouched") {
        return;
    }
    let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
    let (before_c, before_a) = (c.as_bytes().to_vec(), a.as_bytes().to_vec());
    for instance in [1, 2, u64::MAX] {
        // SAFETY: complete table copies.
        let status = unsafe { kernel_replay::install(core(&mut c), amd(&mut a), instance) };
        assert_eq!(status, Ok(kernel_replay::Installed::Skipped));
    }
    assert_eq!(c.as_bytes(), &before_c[..]);
    assert_eq!(a.as_bytes(), &before_a[..]);
    assert_eq!(
        // SAFETY: complete table copies.
        unsafe { kernel_replay::install(core(&mut c), amd(&mut a), 0) },
        Ok(kernel_replay::Installed::Installed)
    );
    assert_ne!(c.as_bytes(), &before_c[..], "instance 0 installs");
}

#[test]
fn a_wrong_major_version_installs_nothing() {
    if !in_child("a_wrong_major_version_installs_nothing") {
        return;
    }
    for bad_core in [true, false] {
        let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
        if bad_core {
            version(&mut c).major_id += 1;
        } else {
            version(&mut a).major_id = 0;
        }
        let (before_c, before_a) = (c.as_bytes().to_vec(), a.as_bytes().to_vec());
        // SAFETY: table copies of full size.
        let status = unsafe { kernel_replay::install(core(&mut c), amd(&mut a), 0) };
        assert!(matches!(
            status,
            Err(kernel_replay::InstallError::IncompatibleTable(_))
        ));
        assert_eq!(
            c.as_bytes(),
            &before_c[..],
            "the valid table is untouched too"
        );
        assert_eq!(a.as_bytes(), &before_a[..]);
    }
    let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
    assert_eq!(
        // SAFETY: complete table copies.
        unsafe { kernel_replay::install(core(&mut c), amd(&mut a), 0) },
        Ok(kernel_replay::Installed::Installed)
    );
}

#[test]
fn a_table_too_small_for_any_used_entry_installs_nothing() {
    if !in_child("a_table_too_small_for_any_used_entry_installs_nothing") {
        return;
    }
    let core_needed = size_needed(required_entries::<CoreApiTable>().map(|e| e.offset));
    let amd_needed = size_needed(required_entries::<AmdExtTable>().map(|e| e.offset));
    // The guard must cover the last entry actually used, not the whole struct.
    assert!(core_needed as usize <= std::mem::size_of::<CoreApiTable>());
    assert_eq!(
        core_needed as usize,
        offset_of!(CoreApiTable, hsa_executable_iterate_agent_symbols_fn) + 8
    );
    assert_eq!(
        amd_needed as usize,
        offset_of!(AmdExtTable, hsa_amd_pointer_info_fn) + 8
    );

    // One byte short, on either table, is refused with nothing installed.
    for short_core in [true, false] {
        let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
        if short_core {
            version(&mut c).minor_id = core_needed - 1;
        } else {
            version(&mut a).minor_id = amd_needed - 1;
        }
        let (before_c, before_a) = (c.as_bytes().to_vec(), a.as_bytes().to_vec());
        // SAFETY: the copies are full size; only minor_id claims less.
        let status = unsafe { kernel_replay::install(core(&mut c), amd(&mut a), 0) };
        assert!(matches!(
            status,
            Err(kernel_replay::InstallError::IncompatibleTable(_))
        ));
        assert_eq!(c.as_bytes(), &before_c[..]);
        assert_eq!(a.as_bytes(), &before_a[..]);
    }
    // Exactly enough: a runtime older than these headers. From major 2 on
    // (ROCm 6.0), tables only grow at the end, so that is accepted; a major-1
    // (ROCm 5.x) table must be exactly the size built against.
    let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
    version(&mut c).minor_id = core_needed;
    version(&mut a).minor_id = amd_needed;
    let accepted = version(&mut a).major_id >= 2 && version(&mut c).major_id >= 2;
    // SAFETY: as above.
    let installed = unsafe { kernel_replay::install(core(&mut c), amd(&mut a), 0) };
    if accepted {
        assert_eq!(installed, Ok(kernel_replay::Installed::Installed));
    } else {
        assert!(matches!(
            installed,
            Err(kernel_replay::InstallError::IncompatibleTable(_))
        ));
    }
}

/// The AMD table sizes of ROCm 5.x (major 1): 5.5 inserted three entries
/// and 5.6 two more, each without a new major version.
const ROCM_5_5_AMD_TABLE_SIZE: u32 = 424;
const ROCM_5_6_AMD_TABLE_SIZE: u32 = 456;

#[test]
fn the_guard_follows_each_rocm_generations_rules() {
    if !in_child("the_guard_follows_each_rocm_generations_rules") {
        return;
    }
    let built_major = version(&mut fresh_amd_ext_table()).major_id;
    let install = |c: &mut TableCopy, a: &mut TableCopy| {
        // SAFETY: table copies at least as long as their minor_id says.
        unsafe { kernel_replay::install(core(c), amd(a), 0) }
    };
    if built_major == 1 {
        // Built against ROCm 5.x headers: a 5.5- or 5.6-shaped table has
        // the same major and other offsets, and is refused.
        for size in [ROCM_5_5_AMD_TABLE_SIZE, ROCM_5_6_AMD_TABLE_SIZE] {
            let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
            a.grow(64);
            version(&mut a).minor_id = size;
            assert!(matches!(
                install(&mut c, &mut a),
                Err(kernel_replay::InstallError::IncompatibleTable(_))
            ));
        }
        // A table of ROCm 6.0 or later: another major.
        let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
        version(&mut c).major_id = 2;
        version(&mut a).major_id = 2;
        assert!(matches!(
            install(&mut c, &mut a),
            Err(kernel_replay::InstallError::IncompatibleTable(_))
        ));
    } else {
        // Built against ROCm 6.0 or later headers: a 5.x runtime's tables
        // (major 1, a 5.6-shaped AMD table among them) and a future major
        // are refused.
        for major in [1, built_major + 1] {
            let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
            version(&mut c).major_id = major;
            version(&mut a).major_id = major;
            if major == 1 {
                version(&mut a).minor_id = ROCM_5_6_AMD_TABLE_SIZE;
            }
            assert!(matches!(
                install(&mut c, &mut a),
                Err(kernel_replay::InstallError::IncompatibleTable(_))
            ));
        }
        // A newer runtime's longer tables, same major: accepted.
        let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
        c.grow(64);
        a.grow(128);
        assert_eq!(
            install(&mut c, &mut a),
            Ok(kernel_replay::Installed::Installed)
        );
    }
    // Exactly the headers' tables always install (here: already installed).
    let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
    let status = install(&mut c, &mut a);
    assert!(
        status == Ok(kernel_replay::Installed::Installed)
            || status == Ok(kernel_replay::Installed::AlreadyInstalled),
        "{status:?}"
    );
}

#[test]
fn a_null_entry_the_library_needs_is_incompatible() {
    if !in_child("a_null_entry_the_library_needs_is_incompatible") {
        return;
    }
    let mut c = fresh_core_table();
    // SAFETY: a full-size table copy.
    unsafe { (*core(&mut c)).hsa_memory_copy_fn = None };
    // SAFETY: as above.
    let status = unsafe { kernel_replay::install(core(&mut c), std::ptr::null_mut(), 0) };
    assert!(matches!(
        status,
        Err(kernel_replay::InstallError::IncompatibleTable(_))
    ));
    let mut a = fresh_amd_ext_table();
    // SAFETY: a full-size table copy.
    unsafe { (*amd(&mut a)).hsa_amd_pointer_info_fn = None };
    // SAFETY: as above.
    let status = unsafe { kernel_replay::install(std::ptr::null_mut(), amd(&mut a), 0) };
    assert!(matches!(
        status,
        Err(kernel_replay::InstallError::IncompatibleTable(_))
    ));
}

#[test]
fn each_table_kind_is_installed_once_per_process() {
    if !in_child("each_table_kind_is_installed_once_per_process") {
        return;
    }
    let (mut c1, mut c2, mut c3) = (fresh_core_table(), fresh_core_table(), fresh_core_table());
    let (mut a1, mut a2) = (fresh_amd_ext_table(), fresh_amd_ext_table());
    let pristine_core = c1.as_bytes().to_vec();
    let pristine_amd = a1.as_bytes().to_vec();

    assert_eq!(
        // SAFETY: full-size table copies.
        unsafe { kernel_replay::install(core(&mut c1), std::ptr::null_mut(), 0) },
        Ok(kernel_replay::Installed::Installed)
    );
    assert_ne!(c1.as_bytes(), &pristine_core[..], "core wrappers went in");
    // SAFETY: the copy is full size.
    let (allocate, free, copy) = unsafe {
        let t = core(&mut c1);
        (
            (*t).hsa_memory_allocate_fn,
            (*t).hsa_memory_free_fn,
            (*t).hsa_memory_copy_fn,
        )
    };
    assert!(allocate.is_some() && free.is_some());
    // SAFETY: as above.
    let pristine_copy = unsafe { (*core(&mut c2)).hsa_memory_copy_fn };
    assert_eq!(
        copy.map(|f| f as usize),
        pristine_copy.map(|f| f as usize),
        "only allocate/free are replaced"
    );

    // A second core table is left alone; the AMD table is new, so SUCCESS.
    assert_eq!(
        // SAFETY: full-size table copies.
        unsafe { kernel_replay::install(core(&mut c2), amd(&mut a1), 0) },
        Ok(kernel_replay::Installed::Installed)
    );
    assert_eq!(c2.as_bytes(), &pristine_core[..]);
    assert_ne!(a1.as_bytes(), &pristine_amd[..]);

    // Nothing new: ALREADY_INSTALLED, both untouched.
    assert_eq!(
        // SAFETY: full-size table copies.
        unsafe { kernel_replay::install(core(&mut c3), amd(&mut a2), 0) },
        Ok(kernel_replay::Installed::AlreadyInstalled)
    );
    assert_eq!(c3.as_bytes(), &pristine_core[..]);
    assert_eq!(a2.as_bytes(), &pristine_amd[..]);
    assert_eq!(
        // SAFETY: a full-size table copy.
        unsafe { kernel_replay::install(core(&mut c1), std::ptr::null_mut(), 0) },
        Ok(kernel_replay::Installed::AlreadyInstalled)
    );
}

#[test]
fn a_wrapper_never_becomes_its_own_next_pointer() {
    if !in_child("a_wrapper_never_becomes_its_own_next_pointer") {
        return;
    }
    let sim = hsa_sim::session(1);
    assert_eq!(
        // SAFETY: the runtime's own tables.
        unsafe { kernel_replay::install(core_table(), amd_table(), 0) },
        Ok(kernel_replay::Installed::Installed)
    );
    kernel_replay::set_tracking(true);

    // A tool that copies the wrapped table and hands the copy over again.
    let mut copy = fresh_amd_ext_table();
    // SAFETY: both are full AmdExtTables.
    unsafe { std::ptr::copy_nonoverlapping(amd_table(), amd(&mut copy), 1) };
    let before = copy.as_bytes().to_vec();
    assert_eq!(
        // SAFETY: a full-size table.
        unsafe { kernel_replay::install(std::ptr::null_mut(), amd(&mut copy), 0) },
        Ok(kernel_replay::Installed::AlreadyInstalled)
    );
    assert_eq!(copy.as_bytes(), &before[..]);

    // Allocating through the copy chains to the runtime (a self-chained
    // wrapper would recurse until the stack overflows) and is recorded once.
    let pool = sim.pool(sim.gpu(0), PoolKind::DeviceCoarse);
    // SAFETY: a complete copy of the runtime's table.
    let ptr = unsafe { pool_allocate_via(amd(&mut copy), pool, 4096, 0) }
        .expect("allocation through the copy");
    assert_eq!(kernel_replay::tracked(agent(sim.gpu(0))).regions, 1);
    assert_eq!(pool_free(ptr), SUCCESS);
    assert_eq!(kernel_replay::tracked(agent(sim.gpu(0))).regions, 0);
}

#[test]
fn wrappers_chain_to_the_runtime_with_its_answers() {
    if !in_child("wrappers_chain_to_the_runtime_with_its_answers") {
        return;
    }
    let sim = hsa_sim::session(1);
    assert_eq!(
        // SAFETY: the runtime's own tables.
        unsafe { kernel_replay::install(core_table(), amd_table(), 0) },
        Ok(kernel_replay::Installed::Installed)
    );
    let pool = sim.pool(sim.gpu(0), PoolKind::DeviceCoarse);
    // Errors pass through unchanged, tracking on or off.
    for tracking in [false, true] {
        kernel_replay::set_tracking(tracking);
        sim.inject(hsa_sim::Fault::NextAllocations, 0, 1);
        assert_eq!(
            pool_allocate(pool, 4096, 0),
            Err(kernel_replay::hsa::sys::HSA_STATUS_ERROR_OUT_OF_RESOURCES)
        );
        assert!(
            pool_allocate(pool, 0, 0).is_err(),
            "size 0 is the runtime's error"
        );
        assert_eq!(kernel_replay::tracked(agent(sim.gpu(0))).regions, 0);
        let p = pool_allocate(pool, 100, 0).unwrap();
        assert_eq!(sim.count(hsa_sim::Counter::LiveAllocations), 1);
        assert_eq!(pool_free(p), SUCCESS);
        assert_eq!(sim.count(hsa_sim::Counter::LiveAllocations), 0);
        assert_ne!(pool_free(p), SUCCESS, "double free is the runtime's error");
    }
}

// ---- one copy per process -------------------------------------------------------

/// The marker another copy of the library in this process leaves when it
/// installs first (c_tests/two_copies_test.c loads two real copies).
fn another_copys_marker() -> String {
    process_marker::value(std::process::id(), 0x1000, "9.8.7")
}

#[test]
fn a_second_copy_installs_nothing_and_says_so() {
    if !in_child("a_second_copy_installs_nothing_and_says_so") {
        return;
    }
    capture_logs(kernel_replay::LogLevel::Warn);
    logs_clear();
    std::env::set_var(process_marker::VAR, another_copys_marker());
    let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
    let (before_c, before_a) = (c.as_bytes().to_vec(), a.as_bytes().to_vec());
    for _ in 0..2 {
        // SAFETY: complete table copies.
        let status = unsafe { kernel_replay::install(core(&mut c), amd(&mut a), 0) };
        assert_eq!(status, Ok(kernel_replay::Installed::AlreadyInstalled));
    }
    assert_eq!(c.as_bytes(), &before_c[..]);
    assert_eq!(a.as_bytes(), &before_a[..]);
    let warnings = logs_containing("another copy of kernel-replay (version 9.8.7)");
    assert_eq!(warnings.len(), 2, "one warning per call: {:?}", logs());
    assert_eq!(
        std::env::var(process_marker::VAR).unwrap(),
        another_copys_marker(),
        "the first copy's marker is left alone"
    );
}

#[test]
fn a_marker_inherited_from_the_parent_process_is_ignored() {
    // Passed by the parent, with the parent's pid: what a child started with
    // fork and exec inherits from a process where a copy installed.
    if !in_child_with(
        "a_marker_inherited_from_the_parent_process_is_ignored",
        &[(process_marker::VAR, &another_copys_marker())],
    ) {
        return;
    }
    let inherited = std::env::var(process_marker::VAR).unwrap();
    assert!(
        inherited.ends_with(":1000:9.8.7")
            && !inherited.starts_with(&format!("{}:", std::process::id())),
        "{inherited}"
    );
    assert_eq!(process_marker::owner(), Owner::Nobody);
    let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
    assert_eq!(
        // SAFETY: complete table copies.
        unsafe { kernel_replay::install(core(&mut c), amd(&mut a), 0) },
        Ok(kernel_replay::Installed::Installed)
    );
    assert_eq!(process_marker::owner(), Owner::This, "the child's own now");
}

#[test]
fn the_first_install_sets_the_marker_and_finalize_keeps_it() {
    if !in_child("the_first_install_sets_the_marker_and_finalize_keeps_it") {
        return;
    }
    std::env::remove_var(process_marker::VAR);
    let (mut c, mut a) = (fresh_core_table(), fresh_amd_ext_table());
    // SAFETY: NULL tables are accepted; an invalid call claims nothing.
    let status = unsafe { kernel_replay::install(std::ptr::null_mut(), std::ptr::null_mut(), 0) };
    assert_eq!(status, Err(kernel_replay::InstallError::NoTables));
    assert_eq!(process_marker::owner(), Owner::Nobody);
    assert_eq!(
        // SAFETY: complete table copies.
        unsafe { kernel_replay::install(core(&mut c), amd(&mut a), 0) },
        Ok(kernel_replay::Installed::Installed)
    );
    assert_eq!(process_marker::owner(), Owner::This);
    let marker = std::env::var(process_marker::VAR).unwrap();
    assert!(
        marker.starts_with(&format!("{}:", std::process::id()))
            && marker.ends_with(&format!(":{}", env!("CARGO_PKG_VERSION"))),
        "{marker}"
    );
    kernel_replay::finalize();
    assert_eq!(std::env::var(process_marker::VAR).unwrap(), marker);
    // This copy's own marker never refuses it: a repeated call is answered
    // from its own state, as before.
    assert_eq!(
        // SAFETY: as above.
        unsafe { kernel_replay::install(core(&mut c), amd(&mut a), 0) },
        Ok(kernel_replay::Installed::AlreadyInstalled)
    );
    assert_eq!(std::env::var(process_marker::VAR).unwrap(), marker);
}
