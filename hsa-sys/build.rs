//! Generates Rust bindings for the HSA types and API tables from the headers
//! the project's one finder chooses (`buildtools/hsa_include.rs`: an
//! installed ROCm, `HSA_INCLUDE_DIR`, the project's header cache, newest ROCm
//! first, then /usr/include).
//!
//! The table layout (`CoreApiTable`, `AmdExtTable`) changes between ROCm
//! releases, so it is always taken from the headers built against, never
//! written by hand; kernel-replay's run-time guard then checks the tables a
//! runtime hands over against this layout.
//!
//! It also reads the project's one list of HSA entries (`hsa_entries.def`)
//! and exports the entries the library wraps or calls as the
//! `library_entries!` macro, checking that the list's `since` column agrees
//! with what these headers carry.

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
    let bindings = bindings.to_string();
    let list = crate_dir.join(ENTRY_LIST);
    println!("cargo:rerun-if-changed={}", list.display());
    let text = std::fs::read_to_string(&list)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", list.display()));
    let entries = entry_list::parse(&text).unwrap_or_else(|e| panic!("{ENTRY_LIST}: {e}"));
    let library = entry_list::library_macro(&entries, &bindings)
        .unwrap_or_else(|e| panic!("{ENTRY_LIST}: {e}"));
    std::fs::write(out.join("hsa_bindings.rs"), &bindings).expect("write hsa_bindings.rs");
    std::fs::write(out.join("library_entries.rs"), library).expect("write library_entries.rs");
}

/// The one list of HSA entries (see its header comment).
const ENTRY_LIST: &str = "hsa_entries.def";

/// Reads `hsa_entries.def` for the Rust side: the entries the library wraps
/// or calls, as a macro the library expands into its entry tables.
mod entry_list {
    /// One `HSA_ENTRY(...)` line; the runtime and signature columns are the
    /// C++ side's.
    pub struct Entry {
        pub table: String,
        pub name: String,
        pub since: (u32, u32),
        /// `None`, or `(wrap | call, need)`.
        pub library: Option<(String, String)>,
    }

    pub fn parse(text: &str) -> Result<Vec<Entry>, String> {
        let text = strip_comments(text);
        let mut entries = Vec::new();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("HSA_ENTRY(") {
            let body = &rest[at + "HSA_ENTRY(".len()..];
            let (args, after) = balanced(body).ok_or("unbalanced HSA_ENTRY(")?;
            entries.push(entry(&split_top_level(args))?);
            rest = after;
        }
        Ok(entries)
    }

    fn entry(fields: &[&str]) -> Result<Entry, String> {
        let [table, name, since, library, _runtime, _signature] = fields else {
            return Err(format!("an entry needs 6 fields: {fields:?}"));
        };
        if !matches!(*table, "core" | "amd") {
            return Err(format!("{name}: unknown table {table}"));
        }
        let (major, minor) = since
            .split_once('_')
            .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)))
            .ok_or_else(|| format!("{name}: since must be MAJOR_MINOR, not {since}"))?;
        let library = match *library {
            "NONE" => None,
            other => {
                let (role, need) = other
                    .strip_suffix(')')
                    .and_then(|s| s.split_once('('))
                    .ok_or_else(|| {
                        format!("{name}: library must be NONE, WRAP(need) or CALL(need)")
                    })?;
                let role = match role {
                    "WRAP" => "wrap",
                    "CALL" => "call",
                    _ => return Err(format!("{name}: unknown library use {role}")),
                };
                Some((role.to_string(), need.trim().to_string()))
            }
        };
        Ok(Entry {
            table: table.to_string(),
            name: name.to_string(),
            since: (major, minor),
            library,
        })
    }

    /// `macro_rules! library_entries`: calls `$visit!` with one
    /// `table field name role need;` line per entry the library uses and
    /// the headers carry. The `since` column must agree with the headers.
    pub fn library_macro(entries: &[Entry], bindings: &str) -> Result<String, String> {
        let interface = (
            constant(bindings, "HSA_AMD_INTERFACE_VERSION_MAJOR")?,
            constant(bindings, "HSA_AMD_INTERFACE_VERSION_MINOR")?,
        );
        let mut lines = String::new();
        for e in entries {
            let field = format!("hsa_{}_fn", e.name);
            let present = bindings.contains(&format!("pub {field}:"));
            if present != (e.since <= interface) {
                return Err(format!(
                    "hsa_{} is listed since interface {}.{}, but headers of interface {}.{} {} {field}",
                    e.name,
                    e.since.0,
                    e.since.1,
                    interface.0,
                    interface.1,
                    if present { "have" } else { "lack" }
                ));
            }
            if let (true, Some((role, need))) = (present, &e.library) {
                lines.push_str(&format!(
                    "            {} {field} {} {role} {need};\n",
                    e.table, e.name
                ));
            }
        }
        Ok(format!(
            "/// Calls `$visit!` with one `table field name role need;` line per entry of\n\
             /// `hsa_entries.def` that kernel-replay wraps or calls and these headers\n\
             /// carry (generated by build.rs from the list).\n\
             #[macro_export]\n\
             macro_rules! library_entries {{\n    ($visit:ident) => {{\n        $visit! {{\n{lines}        }}\n    }};\n}}\n"
        ))
    }

    fn constant(bindings: &str, name: &str) -> Result<u32, String> {
        let at = bindings
            .find(&format!("pub const {name}: u32 = "))
            .ok_or_else(|| format!("the headers do not define {name}"))?;
        let value = &bindings[at..];
        let value = &value[value.find('=').unwrap_or(0) + 1..];
        value[..value.find(';').unwrap_or(value.len())]
            .trim()
            .parse()
            .map_err(|e| format!("{name}: {e}"))
    }

    fn strip_comments(text: &str) -> String {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        loop {
            let block = rest.find("/*");
            let line = rest.find("//");
            match (block, line) {
                (Some(b), l) if l.is_none_or(|l| b < l) => {
                    out.push_str(&rest[..b]);
                    rest = rest[b..].find("*/").map_or("", |end| &rest[b + end + 2..]);
                }
                (_, Some(l)) => {
                    out.push_str(&rest[..l]);
                    rest = rest[l..].find('\n').map_or("", |end| &rest[l + end..]);
                }
                _ => {
                    out.push_str(rest);
                    return out;
                }
            }
        }
    }

    /// The text up to the parenthesis closing an already opened one, and
    /// what follows it.
    fn balanced(text: &str) -> Option<(&str, &str)> {
        let mut depth = 1;
        for (i, c) in text.char_indices() {
            depth += match c {
                '(' => 1,
                ')' => -1,
                _ => 0,
            };
            if depth == 0 {
                return Some((&text[..i], &text[i + 1..]));
            }
        }
        None
    }

    fn split_top_level(text: &str) -> Vec<&str> {
        let (mut fields, mut depth, mut start) = (Vec::new(), 0, 0);
        for (i, c) in text.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    fields.push(text[start..i].trim());
                    start = i + 1;
                }
                _ => {}
            }
        }
        fields.push(text[start..].trim());
        fields
    }
}
