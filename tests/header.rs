//! The checked-in C header must be exactly what cbindgen generates from the
//! sources. Run with `KR_BLESS=1` to rewrite it after an API change.

use std::path::Path;

#[test]
fn checked_in_header_matches_a_fresh_generation() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml parses");
    let mut fresh = Vec::new();
    cbindgen::Builder::new()
        .with_crate(crate_dir)
        .with_config(config)
        .generate()
        .expect("cbindgen generates the header")
        .write(&mut fresh);
    let path = crate_dir.join("include/kernel_replay.h");
    if std::env::var_os("KR_BLESS").is_some() {
        std::fs::write(&path, &fresh).expect("write include/kernel_replay.h");
        return;
    }
    let checked_in = std::fs::read(&path).unwrap_or_default();
    assert!(
        checked_in == fresh,
        "include/kernel_replay.h is stale: regenerate it with `KR_BLESS=1 cargo test --test header`"
    );
}
