//! Detects what the library and the software runtime in this tree offer, so
//! the harness builds against both the original library and the one with
//! storage tiers:
//!
//! - `kr_storage`: the library has storage policies (`kr_set_storage_policy`,
//!   `kr_trim_retained`, the executable registry); the harness then also
//!   fuzzes the arena policies and executable unloads.
//! - `sim_copy_faults`: the runtime can fail copies into / out of an address
//!   in any direction (`hsa_sim_fail_copies_into` / `_from`).

use std::path::Path;

fn has(path: &str, needle: &str) -> bool {
    println!("cargo:rerun-if-changed={path}");
    std::fs::read_to_string(Path::new(path)).is_ok_and(|text| text.contains(needle))
}

fn main() {
    println!("cargo:rustc-check-cfg=cfg(kr_storage)");
    println!("cargo:rustc-check-cfg=cfg(sim_copy_faults)");
    println!("cargo:rerun-if-changed=build.rs");
    if has("../include/kernel_replay.h", "kr_set_storage_policy") {
        println!("cargo:rustc-cfg=kr_storage");
    }
    if has("../c_tests/sim/hsa_sim.h", "hsa_sim_fail_copies_from") {
        println!("cargo:rustc-cfg=sim_copy_faults");
    }
}
