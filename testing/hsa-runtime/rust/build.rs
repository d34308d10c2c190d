//! Builds the test runtime with its host backend (C++17) into a static
//! library linked into this crate, and generates the crate's bindings of the
//! control interface, `include/hsa_rt.h`, with bindgen: every function, and
//! its enums as Rust enums (`hsa_rt_pool_kind_t` -> `PoolKind`,
//! `HSA_RT_POOL_DEVICE_COARSE` -> `PoolKind::DeviceCoarse`, and so on).
//!
//! The runtime includes `<hsa/hsa_api_trace.h>` (C++); `AMD_INTERNAL_BUILD`
//! makes it include its siblings from its own directory. The headers are
//! found by the project's one finder (`buildtools/hsa_include.rs`). The
//! application trampolines (common/app.cpp) are left out: the Rust tests
//! drive the tables.

use std::env;
use std::path::{Path, PathBuf};

/// The runtime's translation units, relative to this crate (the CMake
/// library of testing/hsa-runtime/CMakeLists.txt adds common/app.cpp).
const SOURCES: [&str; 9] = [
    "../common/runtime.cpp",
    "../common/memory.cpp",
    "../common/signals.cpp",
    "../common/vmem.cpp",
    "../common/svm.cpp",
    "../common/loader.cpp",
    "../common/queues.cpp",
    "../host/backend.cpp",
    "../host/elf.cpp",
];
const INCLUDES: [&str; 5] = [
    "../include",
    "../common",
    "../host",
    "../../../hsa-sys",
    "../../../kernels",
];
/// The library's kernels, built for the CPU (`kr_host_dispatch`, `KR_HOST`):
/// the host backend runs a dispatch of them.
const KERNELS: &str = "../../../kernels/replay_kernels.cu";

include!("../../../buildtools/hsa_include.rs");

fn main() {
    let crate_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../../../buildtools/hsa_include.rs");
    for dir in [
        "../include",
        "../common",
        "../host",
        "../../../hsa-sys",
        "../../../kernels",
    ] {
        println!("cargo:rerun-if-changed={dir}");
    }
    let include = hsa_include_dir(&crate_dir.join("../../..")).unwrap_or_else(|why| {
        panic!("HSA headers not found: {why}\n(run scripts/setup.sh, install libhsa-runtime-dev or ROCm, or set HSA_INCLUDE_DIR)")
    });

    let mut build = cc::Build::new();
    // System headers: ROCm 6.4 and later use anonymous structs and flexible
    // array members that -Wpedantic would reject. /usr/include is one
    // already (naming it again would reorder the compiler's own search).
    for dir in [include.join("hsa"), include.clone()] {
        if dir != Path::new("/usr/include") {
            build.flag(format!("-isystem{}", dir.display()));
        }
    }
    build
        .cpp(true)
        .std("c++17")
        .define("AMD_INTERNAL_BUILD", None)
        .warnings(true)
        .extra_warnings(true)
        .flag("-Wpedantic")
        .warnings_into_errors(true)
        .cpp_link_stdlib("stdc++");
    for dir in INCLUDES {
        build.include(crate_dir.join(dir));
    }
    for source in SOURCES {
        build.file(crate_dir.join(source));
    }
    build.compile("hsa_rt_host");

    // The source is CUDA/HIP by name and plain C++ under KR_HOST: a library
    // of its own, told the language (cc's per-file flags cannot).
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .warnings(true)
        .extra_warnings(true)
        .warnings_into_errors(true)
        .cpp_link_stdlib("stdc++")
        .flag("-xc++")
        .define("KR_HOST", None)
        .file(crate_dir.join(KERNELS))
        .compile("kr_host_kernels");
    println!("cargo:rustc-link-lib=pthread"); // the engines and queues are threads

    bindgen::Builder::default()
        .header(crate_dir.join("../include/hsa_rt.h").display().to_string())
        .clang_arg(format!("-I{}", include.display()))
        .clang_arg(format!("-I{}", include.join("hsa").display()))
        .allowlist_function("hsa_rt_.*")
        .allowlist_type("hsa_rt_.*")
        .allowlist_type("hsa_executable_symbol_info_t")
        .allowlist_var("HSA_RT_(POISON_BYTE|AGENT_INFO_MEMORY_AVAIL)")
        .rustified_enum("hsa_rt_.*")
        .prepend_enum_name(false)
        .derive_default(true)
        .derive_eq(true)
        .derive_hash(true)
        .parse_callbacks(Box::new(Names))
        .generate_comments(true)
        .generate()
        .expect("bindgen of hsa_rt.h")
        .write_to_file(
            PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets it")).join("hsa_rt.rs"),
        )
        .expect("write hsa_rt.rs");
}

/// The control interface's enums under Rust names: the enum without its
/// `hsa_rt_` prefix and `_t` suffix, its variants without the common prefix,
/// both in CamelCase.
#[derive(Debug)]
struct Names;

const ENUMS: [(&str, &str, &str); 6] = [
    ("hsa_rt_pool_kind_t", "PoolKind", "HSA_RT_POOL_"),
    ("hsa_rt_fault_t", "Fault", "HSA_RT_FAULT_"),
    ("hsa_rt_counter_t", "Counter", "HSA_RT_COUNT_"),
    ("hsa_rt_mode_t", "Mode", "HSA_RT_MODE_"),
    ("hsa_rt_backend_t", "Backend", "HSA_RT_BACKEND_"),
    ("hsa_rt_init_status_t", "InitStatus", "HSA_RT_INIT_"),
];

fn camel_case(name: &str) -> String {
    name.split('_')
        .map(|word| {
            let mut chars = word.chars();
            chars.next().map_or(String::new(), |first| {
                first.to_string() + &chars.as_str().to_ascii_lowercase()
            })
        })
        .collect()
}

impl bindgen::callbacks::ParseCallbacks for Names {
    fn item_name(&self, item: bindgen::callbacks::ItemInfo) -> Option<String> {
        ENUMS
            .iter()
            .find(|(c_name, _, _)| item.name == *c_name)
            .map(|(_, rust_name, _)| rust_name.to_string())
    }

    fn enum_variant_name(
        &self,
        enum_name: Option<&str>,
        variant: &str,
        _value: bindgen::callbacks::EnumVariantValue,
    ) -> Option<String> {
        let enum_name = enum_name?;
        ENUMS
            .iter()
            .find(|(c_name, _, _)| enum_name.ends_with(c_name))
            .and_then(|(_, _, prefix)| variant.strip_prefix(prefix))
            .map(camel_case)
    }
}
