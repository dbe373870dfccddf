//! The loop is sans-IO: its dependency tree holds no async runtime and no IO crate, and its
//! code reads no clock, no file, no socket and no randomness. Times and ids come in as
//! arguments, so a run's decisions replay exactly from what the runtime recorded.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

/// Every package in weft-loop's normal (non-dev, non-build) dependency tree.
fn dependencies() -> Vec<String> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/../../Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args(["tree", "--offline", "--manifest-path", manifest, "-p", "weft-loop"])
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

/// Crates that bring an async runtime, IO, a clock of their own or randomness.
const FORBIDDEN_CRATES: &[&str] = &[
    "tokio",
    "tokio-util",
    "futures",
    "futures-util",
    "futures-core",
    "async-std",
    "smol",
    "mio",
    "reqwest",
    "hyper",
    "axum",
    "sqlx",
    "rusqlite",
    "tokio-postgres",
    "uuid",
    "rand",
    "fastrand",
    "getrandom",
    "chrono",
    "time",
    "weft-llm",
    "weft-agent",
    "weft-store",
    "weft-cancel",
];

#[test]
fn no_async_runtime_no_io_no_clock_crate_in_the_tree() {
    let deps = dependencies();
    assert!(deps.iter().any(|d| d == "weft-loop"), "weft-loop not in its own tree: {deps:?}");
    let found: Vec<&String> =
        deps.iter().filter(|d| FORBIDDEN_CRATES.contains(&d.as_str())).collect();
    assert!(found.is_empty(), "weft-loop must stay sans-IO, but depends on {found:?}");
}

/// What the loop's code must not call: the standard library's clocks, files, sockets, threads
/// and processes, and weft-core's helpers that stamp a value with the time now.
const FORBIDDEN_CALLS: &[&str] = &[
    "std::time",
    "SystemTime",
    "Instant",
    "std::fs",
    "std::net",
    "std::io",
    "std::thread",
    "std::process",
    "std::env",
    "now_ms",
    "UserMessage::text(",
    "AssistantMessage::empty(",
    "ToolResultMessage::ok(",
    "ToolResultMessage::error(",
    "ToolResultMessage::new(",
    "Session::new(",
];

/// The forbidden names `code` uses, outside its unit tests (a `#[cfg(test)]` module ends each
/// file of the crate).
fn forbidden_in(code: &str) -> Vec<&'static str> {
    let code = code.split("#[cfg(test)]").next().unwrap_or(code);
    let code: String =
        code.lines().filter(|l| !l.trim_start().starts_with("//")).collect::<Vec<_>>().join("\n");
    FORBIDDEN_CALLS.iter().copied().filter(|name| code.contains(name)).collect()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn the_code_reads_no_clock_and_does_no_io() {
    let mut files = Vec::new();
    rust_files(&Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
    assert!(files.len() >= 3, "sources not found: {files:?}");
    for file in files {
        let code = std::fs::read_to_string(&file).unwrap();
        let found = forbidden_in(&code);
        assert!(found.is_empty(), "{} uses {found:?}: pass times and ids in", file.display());
    }
}

#[test]
fn the_scan_sees_a_clock_and_skips_tests_and_comments() {
    let code = "fn f() -> u64 { weft_core::now_ms() }\n";
    assert_eq!(forbidden_in(code), ["now_ms"]);
    let code = "// now_ms is not called\nfn f() {}\n#[cfg(test)]\nmod tests { fn g() { std::time::Instant::now(); } }\n";
    assert!(forbidden_in(code).is_empty());
}
