//! The layers of DESIGN.md, enforced: each crate's normal dependency tree is checked with
//! `cargo tree`, so a forbidden dependency fails CI instead of creeping in.

#![allow(clippy::unwrap_used)]

use std::process::Command;

/// Every package in `krate`'s normal (non-dev, non-build) dependency tree.
fn dependencies(krate: &str) -> Vec<String> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--manifest-path", manifest, "-p", krate])
        .args(["-e", "normal", "--prefix", "none", "--format", "{p}"])
        .output()
        .expect("cargo runs");
    assert!(out.status.success(), "cargo tree failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect()
}

fn assert_absent(krate: &str, forbidden: &[&str]) {
    let deps = dependencies(krate);
    assert!(deps.iter().any(|d| d == krate), "{krate} not found in its own tree: {deps:?}");
    for f in forbidden {
        assert!(!deps.iter().any(|d| d == f), "{krate} must not depend on {f}, but does");
    }
}

const RUNTIMES: &[&str] = &["tokio", "async-std", "smol", "futures", "futures-util"];
const IO: &[&str] = &["reqwest", "hyper", "axum", "sqlx", "rusqlite", "tokio-postgres"];

#[test]
fn core_is_plain_data_without_io_or_runtime() {
    assert_absent("weft-core", RUNTIMES);
    assert_absent("weft-core", IO);
    assert_absent("weft-core", &["weft-llm", "weft-agent"]);
}

#[test]
fn the_agent_sees_no_database_and_the_model_layer_no_agent() {
    assert_absent("weft-agent", &["sqlx", "rusqlite", "tokio-postgres", "axum"]);
    assert_absent("weft-llm", &["weft-agent", "sqlx", "rusqlite", "axum"]);
}

/// The modules of weft-core whose code (not comments) names `crate::module`, by module.
fn module_imports() -> Vec<(String, Vec<String>)> {
    let src = concat!(env!("CARGO_MANIFEST_DIR"), "/src");
    let mut files: Vec<_> = std::fs::read_dir(src)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .collect();
    files.sort();
    let modules: Vec<String> =
        files.iter().map(|p| p.file_stem().unwrap().to_string_lossy().into_owned()).collect();
    files
        .iter()
        .zip(&modules)
        .filter(|(_, m)| *m != "lib")
        .map(|(path, module)| {
            let text = std::fs::read_to_string(path).unwrap();
            let mut named: Vec<String> = modules
                .iter()
                .filter(|other| *other != module && *other != "lib")
                .filter(|other| {
                    let needle = format!("crate::{other}");
                    text.lines().filter(|l| !l.trim_start().starts_with("//")).any(|l| {
                        l.match_indices(&needle).any(|(at, _)| {
                            let after = l[at + needle.len()..].chars().next();
                            !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
                        })
                    })
                })
                .cloned()
                .collect();
            named.sort();
            (module.clone(), named)
        })
        .collect()
}

/// weft-core's modules depend on each other one way (no module reaches, through the modules it
/// names, back to itself): `state` below `event` and `session`, `store` on top.
#[test]
fn core_modules_import_one_way() {
    let graph = module_imports();
    let names = |m: &str| graph.iter().find(|(n, _)| n == m).map(|(_, d)| d.clone());
    for (module, _) in &graph {
        // Depth-first from `module`, looking for a way back to it.
        let mut stack = names(module).unwrap_or_default();
        let mut seen: Vec<String> = Vec::new();
        while let Some(next) = stack.pop() {
            assert_ne!(&next, module, "weft-core's module {module} reaches itself: {graph:?}");
            if !seen.contains(&next) {
                stack.extend(names(&next).unwrap_or_default());
                seen.push(next);
            }
        }
    }
    let state = names("state").unwrap();
    assert!(
        !state.iter().any(|m| ["event", "session", "store"].contains(&m.as_str())),
        "{state:?}"
    );
}
