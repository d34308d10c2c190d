//! Compiles the software HSA runtime (C++17) into a static library linked
//! into this crate.
//!
//! The runtime includes `<hsa/hsa_api_trace.h>`, which is C++ (its tables are
//! declared with `decltype`); `AMD_INTERNAL_BUILD` makes it include its
//! siblings from its own directory instead of an `inc/` subdirectory that
//! installed headers do not have. The headers are found the same way the
//! main crate's build script finds them.
//!
//! The HSA semantics the sim shares with HSA-on-CUDA (gpu/hsa_cuda) live in
//! `../hsa_common`, compiled in from there (without hsa_common_app.cpp: the
//! application trampolines are only part of the CMake build, as
//! hsa_sim_app.cpp is).

use std::env;
use std::path::{Path, PathBuf};

/// The runtime's translation units, relative to this crate (keep in step
/// with the hsa_sim library in c_tests/CMakeLists.txt).
const SOURCES: [&str; 7] = [
    "hsa_sim.cpp",
    "hsa_sim_memory.cpp",
    "hsa_sim_signals.cpp",
    "hsa_sim_loader.cpp",
    "hsa_sim_tables.cpp",
    "../hsa_common/hsa_common.cpp",
    "../hsa_common/hsa_common_signals.cpp",
];

const HEADERS: [&str; 5] = [
    "hsa_sim.h",
    "hsa_sim_internal.h",
    "../hsa_common/hsa_common.h",
    "../hsa_common/hsa_common_signals.h",
    "../hsa_common/hsa_common_tables.h",
];

/// Where the shared headers are, relative to this crate.
const COMMON_DIR: &str = "../hsa_common";

/// The first directory holding `hsa/hsa_api_trace.h`: `$HSA_INCLUDE_DIR`,
/// `$ROCM_PATH/include`, `/opt/rocm/include`, then `/usr/include`.
fn hsa_include_dir() -> Option<PathBuf> {
    let mut candidates = env::var_os("HSA_INCLUDE_DIR")
        .map(PathBuf::from)
        .into_iter()
        .chain(env::var_os("ROCM_PATH").map(|p| Path::new(&p).join("include")))
        .chain(["/opt/rocm/include", "/usr/include"].map(PathBuf::from));
    candidates.find(|dir| dir.join("hsa/hsa_api_trace.h").is_file())
}

fn main() {
    println!("cargo:rerun-if-env-changed=HSA_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=ROCM_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    for file in SOURCES.iter().chain(HEADERS.iter()) {
        println!("cargo:rerun-if-changed={file}");
    }

    let Some(include) = hsa_include_dir() else {
        panic!(
            "HSA headers not found: install libhsa-runtime-dev (Debian) or set HSA_INCLUDE_DIR \
             to the directory that holds hsa/hsa_api_trace.h"
        );
    };
    let crate_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));

    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .include(include.join("hsa"))
        .include(&include)
        .include(&crate_dir)
        .include(crate_dir.join(COMMON_DIR))
        .define("AMD_INTERNAL_BUILD", None)
        .warnings(true)
        .extra_warnings(true)
        .flag("-Wpedantic")
        .warnings_into_errors(true)
        .cpp_link_stdlib("stdc++");
    for source in SOURCES {
        build.file(crate_dir.join(source));
    }
    build.compile("hsa_sim");

    // The async copy worker is a std::thread.
    println!("cargo:rustc-link-lib=pthread");
    // Lets dependents' build scripts find hsa_sim.h (as DEP_HSA_SIM_INCLUDE).
    println!("cargo:include={}", crate_dir.display());
}
