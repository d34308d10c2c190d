//! Compiles the software HSA runtime (C++17) into a static library linked
//! into this crate.
//!
//! The runtime includes `<hsa/hsa_api_trace.h>`, which is C++ (its tables are
//! declared with `decltype`); `AMD_INTERNAL_BUILD` makes it include its
//! siblings from its own directory instead of an `inc/` subdirectory that
//! installed headers do not have. The headers are found by the project's one
//! finder (`buildtools/hsa_include.rs`), as for the main crate.
//!
//! The HSA semantics the sim shares with HSA-on-CUDA (testing/hsa-runtime/cuda) live in
//! `../hsa_common`, compiled in from there (without hsa_common_app.cpp: the
//! application trampolines are only part of the CMake build, as
//! hsa_sim_app.cpp is).

use std::env;
use std::path::PathBuf;

/// The runtime's translation units, relative to this crate (keep in step
/// with the hsa_sim library in c_tests/CMakeLists.txt).
const SOURCES: [&str; 10] = [
    "../host/hsa_sim.cpp",
    "../host/hsa_sim_memory.cpp",
    "../host/hsa_sim_signals.cpp",
    "../host/hsa_sim_vmem.cpp",
    "../host/hsa_sim_loader.cpp",
    "../host/hsa_sim_elf.cpp",
    "../host/hsa_sim_queues.cpp",
    "../host/hsa_sim_tables.cpp",
    "../common/hsa_common.cpp",
    "../common/hsa_common_signals.cpp",
];

const HEADERS: [&str; 7] = [
    "../host/hsa_sim.h",
    "../host/hsa_sim_internal.h",
    "../common/hsa_common.h",
    "../common/hsa_common_signals.h",
    "../common/hsa_common_tables.h",
    "../../../kernels/replay_kernels.h",
    "../common/hsa_common_vmem.h",
];

/// The library's kernels, built for the CPU (`kr_host_dispatch`, with
/// `KR_HOST`): the sim runs a dispatch of them on the CPU.
const KERNELS: &str = "../../../kernels/replay_kernels.cu";

/// Where the shared headers are, relative to this crate.
const COMMON_DIR: &str = "../common";

include!("../../../buildtools/hsa_include.rs");

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={KERNELS}");
    println!("cargo:rerun-if-changed=../../../buildtools/hsa_include.rs");
    for file in SOURCES.iter().chain(HEADERS.iter()) {
        println!("cargo:rerun-if-changed={file}");
    }

    let crate_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let include = hsa_include_dir(&crate_dir.join("../../..")).unwrap_or_else(|why| {
        panic!("HSA headers not found: {why}\n(run scripts/setup.sh, install libhsa-runtime-dev or ROCm, or set HSA_INCLUDE_DIR)")
    });

    let mut build = cc::Build::new();
    // System headers: ROCm 6.4 and later use anonymous structs and flexible
    // array members that -Wpedantic would reject. /usr/include is one
    // already (naming it again would reorder the compiler's own search and
    // break <cstdlib>'s #include_next).
    for dir in [include.join("hsa"), include.clone()] {
        if dir != std::path::Path::new("/usr/include") {
            build.flag(format!("-isystem{}", dir.display()));
        }
    }
    build
        .cpp(true)
        .std("c++17")
        .include(crate_dir.join("../host"))
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
    compile_kernels(&crate_dir);

    // The async copy worker is a std::thread.
    println!("cargo:rustc-link-lib=pthread");
    // Lets dependents' build scripts find hsa_sim.h (as DEP_HSA_SIM_INCLUDE).
    println!("cargo:include={}", crate_dir.join("../host").display());
}

/// The kernels' host build, a library of its own: the source is CUDA/HIP by
/// name and plain C++ under `KR_HOST`, so the compiler is told the language
/// (`-x c++`), which cc's per-file flags cannot do for one file among others.
fn compile_kernels(crate_dir: &std::path::Path) {
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++17")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .cpp_link_stdlib("stdc++");
    build
        .flag("-xc++")
        .define("KR_HOST", None)
        .file(crate_dir.join(KERNELS));
    build.compile("kr_host_kernels");
}
