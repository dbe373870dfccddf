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
    // Its spans are `tracing` spans: exporting them is weft-telemetry's business.
    assert_absent("weft-agent", &["opentelemetry", "opentelemetry_sdk", "tracing-opentelemetry"]);
    assert_absent("weft-llm", &["weft-agent", "sqlx", "rusqlite", "axum"]);
}

/// The Weft crates each crate may build on directly: the layers of ARCHITECTURE.md, lower
/// crates first. What a crate may have in its whole tree is these and, in turn, theirs
/// ([`allowed`]). A crate missing here fails the test, so a new crate states its place.
const ALLOWED: &[(&str, &[&str])] = &[
    ("weft-cancel", &[]),
    // The workspace's own tests' helpers (a dev-dependency only).
    ("weft-test-support", &[]),
    ("weft-core", &[]),
    ("weft-tool-api", &["weft-cancel", "weft-core"]),
    ("weft-llm", &["weft-cancel", "weft-core"]),
    ("weft-store", &["weft-core"]),
    ("weft-protocol", &["weft-core"]),
    ("weft-loop", &["weft-core"]),
    ("weft-agent", &["weft-llm", "weft-loop", "weft-tool-api"]),
    // `ToolsConfig::apply` fills an `AgentBuilder`; the tools themselves need only the contract.
    ("weft-tools", &["weft-agent"]),
    ("weft-client", &["weft-llm", "weft-protocol", "weft-tool-api"]),
    ("weft-conformance", &["weft-agent", "weft-protocol"]),
    ("weft-sim", &["weft-agent", "weft-store"]),
    // Exports weft-agent's GenAI spans (it knows their target) over OTLP.
    ("weft-telemetry", &["weft-agent"]),
    ("weft-server", &["weft-agent", "weft-protocol", "weft-store", "weft-tools", "weft-telemetry"]),
    ("weft-fuzz", &["weft-server"]),
    ("weft-cli", &["weft-client", "weft-server"]),
    ("weft-examples", &["weft-client", "weft-server"]),
];

/// Every Weft crate `krate` may have in its whole tree: the crates [`ALLOWED`] lets it build
/// on, and theirs.
fn allowed(krate: &str) -> std::collections::BTreeSet<&'static str> {
    let mut found = std::collections::BTreeSet::new();
    let mut todo = vec![krate];
    while let Some(next) = todo.pop() {
        let (_, below) = ALLOWED.iter().find(|(name, _)| *name == next).unwrap();
        for dep in *below {
            if found.insert(*dep) {
                todo.push(dep);
            }
        }
    }
    found
}

#[test]
fn every_crate_depends_only_on_the_weft_crates_below_it() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut members: Vec<String> = std::fs::read_dir(format!("{root}/crates"))
        .unwrap()
        .filter_map(|e| {
            let manifest = std::fs::read_to_string(e.ok()?.path().join("Cargo.toml")).ok()?;
            manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = ").map(|n| n.trim_matches('"').to_string()))
        })
        .collect();
    members.push("weft-examples".into());
    for member in &members {
        assert!(
            ALLOWED.iter().any(|(name, _)| name == member),
            "{member} has no entry in ALLOWED: say which Weft crates it may depend on"
        );
    }
    for (krate, _) in ALLOWED {
        let allowed = allowed(krate);
        let deps = dependencies(krate);
        assert!(deps.iter().any(|d| d == krate), "{krate} not found in its own tree: {deps:?}");
        let mut weft: Vec<&String> =
            deps.iter().filter(|d| d.starts_with("weft-") && d != krate).collect();
        weft.sort();
        weft.dedup();
        let extra: Vec<&&String> = weft.iter().filter(|d| !allowed.contains(d.as_str())).collect();
        assert!(extra.is_empty(), "{krate} must not depend on {extra:?}");
    }
}
