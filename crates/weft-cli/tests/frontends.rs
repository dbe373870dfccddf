//! The front ends people already use, against this `weft` binary (`clients/frontends`): the
//! official AG-UI client (`@ag-ui/client`'s `HttpAgent`) on `POST /api/ag-ui`, and the Vercel AI
//! SDK's own client code (`DefaultChatTransport`, `readUIMessageStream`; majors 6 and 7) on
//! `POST /api/chat` and `GET /api/chat/{id}/stream`, with Node's test runner.
//!
//! Without Node or the folder's `node_modules` (`npm ci` in clients/frontends, which `.ci/run`
//! does) the test says loudly that it skipped; under `CI=true` it fails instead.
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

fn skip(reason: &str) {
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "CI=true but the front-end tests cannot run: {reason}"
    );
    eprintln!("\n!!! SKIPPED the AG-UI and AI SDK front-end tests: {reason}\n");
}

#[test]
fn agui_and_ai_sdk_clients() {
    let package = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/frontends");
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
    for module in ["@ag-ui/client", "ai6", "ai7"] {
        if !package.join("node_modules").join(module).exists() {
            return skip(&format!(
                "clients/frontends/node_modules/{module} is missing: run `npm ci` there"
            ));
        }
    }
    let status = Command::new("node")
        .arg("scripts/test.mjs")
        .current_dir(&package)
        .env("WEFT_BIN", env!("CARGO_BIN_EXE_weft"))
        .status()
        .unwrap();
    assert!(status.success(), "npm test in clients/frontends failed ({status})");
}
