//! Running an npm package's tests (`node scripts/test.mjs`) against this `weft` binary: Node 20
//! or newer and the package's `node_modules` are needed; without them the test fails, unless
//! `WEFT_ALLOW_SKIP` has `node` (see `weft_test_support::skip`).

use std::path::Path;
use std::process::Command;

/// Runs `clients/{package}`'s tests (`what` names them in messages) once `modules` are installed
/// in its `node_modules`.
pub(crate) fn run_package_tests(package: &str, what: &str, modules: &[&str]) {
    let skip = |reason: &str| weft_test_support::skip("node", &format!("the {what}"), reason);
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients").join(package);
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
    for module in modules {
        if !dir.join("node_modules").join(module).exists() {
            return skip(&format!(
                "clients/{package}/node_modules/{module} is missing: run `npm ci` there"
            ));
        }
    }
    let status = Command::new("node")
        .arg("scripts/test.mjs")
        .current_dir(&dir)
        .env("WEFT_BIN", env!("CARGO_BIN_EXE_weft"))
        .status()
        .expect("node runs");
    assert!(status.success(), "npm test in clients/{package} failed ({status})");
}
