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
