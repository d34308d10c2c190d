//! The library's build script: the SONAME of the shared library, what
//! the HSA headers declare (from `kernel-replay-hsa-sys`, which generates the
//! bindings): `cfg(hsa_vmem)` where the tables have the virtual-memory API,
//! and the device kernels (`buildtools/kernels.rs`: their ABI bindings, the
//! AMD code objects embedded in the library, the host build for the tests).

#[path = "buildtools/kernels.rs"]
mod kernels;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");

    // Give the shared library a versioned SONAME, `libkernel_replay.so.<major>`
    // (the major version of Cargo.toml, the one place the version is
    // written), so programs linked against it record that name rather than
    // the path it was linked from, and a later incompatible major version
    // can be installed beside it. Cargo names the file `libkernel_replay.so`
    // regardless; CMake installs it as `libkernel_replay.so.<version>` with
    // the links `.so.<major>` and `.so` (CMakeLists.txt).
    let major = std::env::var("CARGO_PKG_VERSION_MAJOR").expect("cargo sets it");
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libkernel_replay.so.{major}");

    // The virtual-memory API (ROCm 6.0 and later headers): the vmem
    // wrappers are compiled only where the tables have its entries.
    println!("cargo:rustc-check-cfg=cfg(hsa_vmem)");
    if std::env::var("DEP_KERNEL_REPLAY_HSA_VMEM").as_deref() == Ok("1") {
        println!("cargo:rustc-cfg=hsa_vmem");
    }

    let root =
        std::path::PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets it"));
    let out = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("cargo sets it"));
    kernels::build(&root, &out);
}
