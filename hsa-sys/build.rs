//! Generates Rust bindings for the HSA types and API tables from the headers
//! the project's one finder chooses (`buildtools/hsa_include.rs`: an
//! installed ROCm, `HSA_INCLUDE_DIR`, the project's header cache, newest ROCm
//! first, then /usr/include).
//!
//! The table layout (`CoreApiTable`, `AmdExtTable`) changes between ROCm
//! releases, so it is always taken from the headers built against, never
//! written by hand; kernel-replay's run-time guard then checks the tables a
//! runtime hands over against this layout.

use std::env;
use std::path::PathBuf;

include!("../buildtools/hsa_include.rs");

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../buildtools/hsa_include.rs");

    let crate_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let include = hsa_include_dir(&crate_dir.join("..")).unwrap_or_else(|why| {
        panic!("HSA headers not found: {why}\n(run scripts/setup.sh, install libhsa-runtime-dev or ROCm, or set HSA_INCLUDE_DIR)")
    });
    let hsa_dir = include.join("hsa");
    println!("cargo:rerun-if-changed={}", hsa_dir.display());

    // hsa_api_trace.h declares its tables with decltype, so it is parsed as
    // C++; AMD_INTERNAL_BUILD makes it include its siblings from the same
    // directory instead of an "inc/" subdirectory that installs do not have.
    let bindings = bindgen::Builder::default()
        .header_contents(
            "kernel_replay_hsa.hpp",
            "#include <hsa.h>\n#include <hsa_ext_amd.h>\n#include <hsa_ven_amd_loader.h>\n\
             #include <hsa_api_trace.h>\n",
        )
        .clang_args(["-x", "c++", "-std=c++14", "-DAMD_INTERNAL_BUILD"])
        .clang_arg(format!("-I{}", hsa_dir.display()))
        .clang_arg(format!("-I{}", include.display()))
        // Types and constants only: nothing links the runtime, every call
        // goes through a function pointer taken from a table.
        .allowlist_type("hsa_.*")
        .allowlist_type("CoreApiTable")
        .allowlist_type("AmdExtTable")
        .allowlist_type("ApiTableVersion")
        .allowlist_var("HSA_.*")
        .prepend_enum_name(false)
        .default_enum_style(bindgen::EnumVariation::Consts)
        .derive_default(true)
        .derive_debug(true)
        .derive_partialeq(true)
        .derive_eq(true)
        .layout_tests(true)
        .generate_comments(false)
        .generate()
        .unwrap_or_else(|e| panic!("bindgen failed on {}: {e}", hsa_dir.display()));

    // The virtual-memory API (ROCm 6.0 and later headers): said to this
    // crate (cfg) and to dependents' build scripts (DEP_..._VMEM), so code
    // naming the vmem entries is compiled only where the tables have them.
    println!("cargo:rustc-check-cfg=cfg(hsa_vmem)");
    let vmem = bindings.to_string().contains("hsa_amd_vmem_map_fn");
    if vmem {
        println!("cargo:rustc-cfg=hsa_vmem");
    }
    println!("cargo:vmem={}", u8::from(vmem));
    println!("cargo:include={}", include.display());

    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    bindings
        .write_to_file(out.join("hsa_bindings.rs"))
        .expect("write hsa_bindings.rs");
}
