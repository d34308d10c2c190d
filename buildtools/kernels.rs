//! The device kernels at library build time (the root crate's build.rs):
//! from the one source, `kernels/replay_kernels.cu`, and its ABI header,
//! `kernels/replay_kernels.h`, into `OUT_DIR`:
//!
//! - `kernel_abi.rs`: bindgen's `#[repr(C)]` mirrors of the header's records
//!   and argument structs and its constants, so their layout is written once
//!   (`src/memory_snapshot/device/abi.rs` includes it);
//! - `code_objects.rs`: one AMD code object per target the found clang
//!   knows, embedded with `include_bytes!` (`.../kernels/code_objects.rs`
//!   includes it); empty, with one `cargo:warning`, without such a clang;
//! - `libkernel_replay_kernels_host.a`: the source as plain C++ (`KR_HOST`,
//!   `kr_host_dispatch`), linked only by the tests that run the kernels on
//!   the CPU (the library itself never calls it, and must not export it).
//!
//! Where clang knows NVPTX too, the source is also compiled as CUDA (to PTX,
//! thrown away): nvcc builds the cubin on the GPU machine, and this catches
//! a CUDA-path mistake where no nvcc is installed.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The kernel source and its ABI header, relative to the root crate.
const SOURCE: &str = "kernels/replay_kernels.cu";
const HEADER: &str = "kernels/replay_kernels.h";

/// The AMD targets built when the compiler knows them: CDNA 2 and 3
/// (MI200, MI300, MI350) and RDNA 2, 3 and 4. Built without target-id
/// features (xnack, sramecc "any"), so one code object loads on an agent
/// whatever those settings are (the library matches on the processor).
const AMD_TARGETS: [&str; 7] = [
    "gfx90a", "gfx942", "gfx950", "gfx1030", "gfx1100", "gfx1200", "gfx1201",
];

/// Overrides the search for clang (a path or a command name).
const CLANG_ENV: &str = "KERNEL_REPLAY_CLANG";

/// Compilers tried in order when `KERNEL_REPLAY_CLANG` is not set: the newest
/// versioned clang first (Debian 12's default `clang` is 14, which stops at
/// gfx90a; its `clang-19` knows up to gfx1201).
const CLANG_CANDIDATES: [&str; 4] = ["clang-20", "clang-19", "clang-18", "clang"];

/// Every kernel artefact; see the module comment.
pub fn build(root: &Path, out: &Path) {
    println!("cargo:rerun-if-changed={SOURCE}");
    println!("cargo:rerun-if-changed={HEADER}");
    println!("cargo:rerun-if-changed=buildtools/kernels.rs");
    println!("cargo:rerun-if-env-changed={CLANG_ENV}");
    let source = root.join(SOURCE);
    let header = root.join(HEADER);

    abi_bindings(&header, out);
    host_library(&source, out);
    let built = amd_code_objects(&source, out);
    write_code_objects(out, built.as_ref());
}

/// bindgen over the header: its types and `KR_` constants, with the
/// header's comments as documentation (`-fparse-all-comments`: the header
/// uses plain C comments). `kr_host_dispatch` is left out: only the tests
/// declare it.
fn abi_bindings(header: &Path, out: &Path) {
    let bindings = bindgen::Builder::default()
        .header(header.display().to_string())
        .clang_args(["-x", "c", "-fparse-all-comments"])
        .allowlist_type("kr_.*")
        .allowlist_var("KR_.*")
        .derive_default(false)
        .derive_debug(true)
        .derive_copy(true)
        .layout_tests(true)
        .generate_comments(true)
        .generate()
        .unwrap_or_else(|e| panic!("bindgen failed on {}: {e}", header.display()));
    bindings
        .write_to_file(out.join("kernel_abi.rs"))
        .expect("write kernel_abi.rs");
}

/// The host build (see the module comment). Optimised whatever the profile:
/// the software HSA runtime runs every test's kernels through it.
fn host_library(source: &Path, out: &Path) {
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .flag("-x")
        .flag("c++")
        .define("KR_HOST", None)
        .opt_level(2)
        .warnings(true)
        .extra_warnings(true)
        .flag("-Wpedantic")
        .warnings_into_errors(true)
        .flag("-fno-exceptions")
        .flag("-fno-rtti")
        // Linked only where a test names it (#[link]): not into the library.
        .cargo_metadata(false)
        .file(source)
        .out_dir(out)
        .compile("kernel_replay_kernels_host");
    println!("cargo:rustc-link-search=native={}", out.display());
}

/// What the AMD build produced.
struct Built {
    /// The clang that built them.
    clang: String,
    /// (target, code object path) for each target built.
    objects: Vec<(&'static str, PathBuf)>,
}

/// One code object per target the found clang knows, or None (with one
/// warning) when no clang with the AMDGPU target is found. A target the
/// compiler knows must build: a failure there is the source's, and fails
/// the build.
fn amd_code_objects(source: &Path, out: &Path) -> Option<Built> {
    let probe = out.join("kr_probe.hip");
    std::fs::write(
        &probe,
        "extern \"C\" __attribute__((global)) void kr_probe(int* p) { *p = 1; }\n",
    )
    .expect("write the probe source");

    let candidates: Vec<String> = match std::env::var(CLANG_ENV) {
        Ok(clang) if !clang.is_empty() => vec![clang],
        _ => CLANG_CANDIDATES.iter().map(|c| c.to_string()).collect(),
    };
    // The first candidate that knows any of the targets; its list of them.
    let found = candidates.iter().find_map(|clang| {
        let known: Vec<&'static str> = AMD_TARGETS
            .iter()
            .copied()
            .filter(|target| {
                amd_compile(clang, target, &probe, &out.join("kr_probe.hsaco"), &[])
                    .is_ok_and(|status| status.success())
            })
            .collect();
        (!known.is_empty()).then(|| (clang.clone(), known))
    });
    let Some((clang, known)) = found else {
        println!(
            "cargo:warning=kernel-replay: no clang with the AMDGPU target (tried {}; set {CLANG_ENV}, \
             or run scripts/setup.sh for clang-19): the library embeds no AMD code objects and \
             falls back to its copies without kernels",
            candidates.join(", ")
        );
        return None;
    };

    let warnings = ["-Wall", "-Wextra", "-Werror"];
    let objects = known
        .into_iter()
        .map(|target| {
            let object = out.join(format!("replay_kernels-{target}.hsaco"));
            let status = amd_compile(&clang, target, source, &object, &warnings)
                .unwrap_or_else(|e| panic!("running {clang}: {e}"));
            assert!(
                status.success(),
                "{clang} failed to build {} for {target}",
                source.display()
            );
            (target, object)
        })
        .collect();
    cuda_check(&clang, source, out);
    Some(Built { clang, objects })
}

/// Compiles `source` as HIP for one AMD target, device code only, into a
/// bare code object (no HIP headers or device libraries: the source
/// declares what it uses).
fn amd_compile(
    clang: &str,
    target: &str,
    source: &Path,
    object: &Path,
    extra: &[&str],
) -> std::io::Result<std::process::ExitStatus> {
    Command::new(clang)
        .args([
            "-x",
            "hip",
            "--cuda-device-only",
            "--no-gpu-bundle-output",
            "-nogpuinc",
            "-nogpulib",
        ])
        .args(["-O3", &format!("--offload-arch={target}")])
        .args(extra)
        .arg("-o")
        .arg(object)
        .arg(source)
        .stderr(if extra.is_empty() {
            std::process::Stdio::null()
        } else {
            std::process::Stdio::inherit()
        })
        .status()
}

/// The CUDA path, compiled to PTX where this clang has the NVPTX target
/// (probed first: a clang without it is not an error).
fn cuda_check(clang: &str, source: &Path, out: &Path) {
    let cuda = |src: &Path, extra: &[&str]| {
        Command::new(clang)
            .args([
                "-x",
                "cuda",
                "--cuda-device-only",
                "-nocudainc",
                "-nocudalib",
                "--cuda-gpu-arch=sm_90",
            ])
            .args(["-O3", "-S", "-o"])
            .arg(out.join("kr_check.ptx"))
            .args(extra)
            .arg(src)
            .stderr(if extra.is_empty() {
                std::process::Stdio::null()
            } else {
                std::process::Stdio::inherit()
            })
            .status()
            .is_ok_and(|status| status.success())
    };
    let probe = out.join("kr_probe.cu");
    std::fs::write(
        &probe,
        "extern \"C\" __attribute__((global)) void kr_probe(int* p) { *p = 1; }\n",
    )
    .expect("write the probe source");
    if cuda(&probe, &[]) {
        assert!(
            cuda(source, &["-Wall", "-Wextra", "-Werror"]),
            "{clang} failed to compile {} as CUDA",
            source.display()
        );
    }
}

/// `code_objects.rs`: the embedded list and the clang that built it.
fn write_code_objects(out: &Path, built: Option<&Built>) {
    let mut code =
        String::from("// Generated by buildtools/kernels.rs: the embedded AMD code objects.\n\n");
    match built {
        Some(built) => {
            writeln!(code, "/// The clang that built the code objects.").unwrap();
            writeln!(
                code,
                "#[cfg(test)]\npub(crate) const BUILT_BY: Option<&str> = Some({:?});\n",
                built.clang
            )
            .unwrap();
            let mut list = String::new();
            for (target, object) in &built.objects {
                let name = format!("CODE_OBJECT_{}", target.to_uppercase());
                writeln!(code, "/// The code object for {target}.").unwrap();
                writeln!(
                    code,
                    "static {name}: &Aligned<[u8]> = &Aligned(*include_bytes!({:?}));",
                    object.display().to_string()
                )
                .unwrap();
                writeln!(
                    list,
                    "    CodeObject {{ isa: \"amdgcn-amd-amdhsa--{target}\", bytes: &{name}.0 }},"
                )
                .unwrap();
            }
            writeln!(code, "\n/// Every code object built, one per target.").unwrap();
            writeln!(
                code,
                "pub(crate) static EMBEDDED: &[CodeObject] = &[\n{list}];"
            )
            .unwrap();
        }
        None => {
            writeln!(code, "/// No clang with the AMDGPU target was found.").unwrap();
            writeln!(
                code,
                "#[cfg(test)]\npub(crate) const BUILT_BY: Option<&str> = None;\n"
            )
            .unwrap();
            writeln!(code, "/// No code objects: none could be built.").unwrap();
            writeln!(code, "pub(crate) static EMBEDDED: &[CodeObject] = &[];").unwrap();
        }
    }
    std::fs::write(out.join("code_objects.rs"), code).expect("write code_objects.rs");
}
