//! Every function `hsa_sim.h` declares has a raw declaration in this crate.

use std::collections::BTreeSet;

const HEADER: &str = include_str!("../../host/hsa_sim.h");
const BINDINGS: &str = include_str!("../src/lib.rs");

/// The header's text without its /* ... */ comments.
fn header_code() -> String {
    let mut code = String::new();
    let mut rest = HEADER;
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("unterminated comment");
        rest = &rest[start + end + 2..];
    }
    code.push_str(rest);
    code
}

/// Names `hsa_sim_*` immediately followed by `(`: the declared functions.
fn declared_functions() -> BTreeSet<String> {
    let code = header_code();
    let mut names = BTreeSet::new();
    for (start, _) in code.match_indices("hsa_sim_") {
        let tail = &code[start..];
        let len = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        if tail[len..].starts_with('(') {
            names.insert(tail[..len].to_string());
        }
    }
    names
}

#[test]
fn every_header_function_is_declared() {
    let functions = declared_functions();
    assert!(
        functions.len() > 30,
        "parsed too few functions: {functions:?}"
    );
    let missing: Vec<_> = functions
        .iter()
        .filter(|name| !BINDINGS.contains(&format!("pub fn {name}(")))
        .collect();
    assert!(missing.is_empty(), "no raw declaration for {missing:?}");
}
