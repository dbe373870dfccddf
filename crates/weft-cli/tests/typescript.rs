//! The TypeScript client and the web playground (`clients/typescript`): `npm test` there
//! type-checks the package, checks that the committed build the server embeds is current, and
//! runs its Node tests and its browser tests (headless Chromium) against this `weft` binary.
//!
//! Without Node or the package's `node_modules` (`npm ci` in clients/typescript, which
//! `.ci/run` does) the test says loudly that it skipped; under `CI=true` it fails instead.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

fn skip(reason: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true but the TypeScript tests cannot run: {reason}"
    );
    eprintln!("\n!!! SKIPPED the TypeScript client and playground tests: {reason}\n");
}

#[test]
fn typescript_client_and_playground() {
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/typescript");
    let node = Command::new("node").arg("--version").output().ok();
    let Some(node) = node.filter(|o| o.status.success()) else {
        return skip("node is not installed (Node 20 or newer is needed)");
    };
    let version = String::from_utf8_lossy(&node.stdout).trim().to_string();
    let major: u32 =
        version.trim_start_matches('v').split('.').next().unwrap_or("0").parse().unwrap_or(0);
    if major < 20 {
        return skip(&format!("node {version} is too old (Node 20 or newer is needed)"));
    }
    if !package.join("node_modules/typescript").exists() {
        return skip("clients/typescript/node_modules is missing: run `npm ci` there");
    }
    let status = Command::new("node")
        .arg("scripts/test.mjs")
        .current_dir(&package)
        .env("WEFT_BIN", env!("CARGO_BIN_EXE_weft"))
        .status()
        .unwrap();
    assert!(status.success(), "npm test in clients/typescript failed ({status})");
}
