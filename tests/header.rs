//! The checked-in C header must be exactly what cbindgen generates from the
//! sources. Run with `KR_BLESS=1` to rewrite it after an API change.
//!
//! The enums are rendered from their one Rust definition (`c_enum!`, listed
//! in `ffi::types::C_ENUMS`), and the Rust API structs the C ABI passes as
//! they are take their C names from `ffi::types::C_STRUCT_NAMES`: nothing
//! about them is repeated in `cbindgen.toml`.

use std::path::Path;

use kernel_replay::ffi::types::{C_ENUMS, C_STRUCT_NAMES};

/// The generator's configuration: `cbindgen.toml` plus what the sources say.
fn config(crate_dir: &Path) -> cbindgen::Config {
    let mut config =
        cbindgen::Config::from_file(crate_dir.join("cbindgen.toml")).expect("cbindgen.toml parses");
    let mut enums = String::new();
    for decl in C_ENUMS {
        // Declared by us; every mention of the Rust enum, or of the integer a
        // code from C travels as, is spelled with the C name.
        let arg = format!("{}_arg", decl.c_name.trim_end_matches("_t"));
        for rust_name in [decl.rust_name.to_string(), arg] {
            config.export.exclude.push(rust_name.clone());
            config
                .export
                .rename
                .insert(rust_name, decl.c_name.to_string());
        }
        enums.push('\n');
        enums.push_str(&decl.render());
    }
    for (rust_name, c_name) in C_STRUCT_NAMES {
        config
            .export
            .rename
            .insert(rust_name.to_string(), c_name.to_string());
    }
    let after = config.after_includes.get_or_insert_with(String::new);
    after.push_str(&enums);
    config
}

#[test]
fn checked_in_header_matches_a_fresh_generation() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let config = config(crate_dir);
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
