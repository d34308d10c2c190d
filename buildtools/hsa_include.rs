// The HSA include directory for the Rust build scripts (build.rs and
// testing/hsa-runtime/rust/build.rs include this file): `HSA_INCLUDE_DIR` when set (the
// CMake build and the test command set it), else what the project's one
// finder, cmake/kernel_replay_find_hsa.cmake, chooses through
// `cmake -P cmake/print_hsa_include.cmake` (an installed ROCm, then the
// project's header cache, newest ROCm first, then /usr/include).

/// The directory holding `hsa/hsa_api_trace.h`, or why there is none.
fn hsa_include_dir(project_root: &std::path::Path) -> Result<std::path::PathBuf, String> {
    use std::path::PathBuf;
    const MARKER: &str = "hsa/hsa_api_trace.h";
    println!("cargo:rerun-if-env-changed=HSA_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=ROCM_PATH");
    for watched in ["cmake/kernel_replay_find_hsa.cmake", "cmake/kernel_replay_hsa_cache.cmake", ".cache/hsa"] {
        let path = project_root.join(watched);
        // A missing path would make cargo rerun the script on every build.
        if path.exists() {
            println!("cargo:rerun-if-changed={}", path.display());
        }
    }
    if let Some(dir) = std::env::var_os("HSA_INCLUDE_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        return if dir.join(MARKER).is_file() {
            Ok(dir)
        } else {
            Err(format!("HSA_INCLUDE_DIR={} does not contain {MARKER}", dir.display()))
        };
    }
    let finder = project_root.join("cmake/print_hsa_include.cmake");
    let output = std::process::Command::new(std::env::var_os("CMAKE").unwrap_or_else(|| "cmake".into()))
        .arg("-P")
        .arg(&finder)
        .output()
        .map_err(|e| format!("running cmake -P {} (set HSA_INCLUDE_DIR instead): {e}", finder.display()))?;
    let stdout = String::from_utf8_lossy(&output.stdout);
    if !output.status.success() {
        return Err(format!(
            "{}{}",
            stdout,
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let dir = PathBuf::from(stdout.lines().last().unwrap_or("").trim());
    if dir.join(MARKER).is_file() {
        Ok(dir)
    } else {
        Err(format!("the HSA finder chose '{}', which lacks {MARKER}", dir.display()))
    }
}
