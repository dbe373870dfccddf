//! The Python client (`clients/python`) against this `weft` binary: `mypy --strict` over the
//! package, its tests and example, then its pytest suite (which starts `weft serve` with faux
//! scripts, and compares `Agent.handle()` with `weft run --response`).
//!
//! Needs the package's environment, `clients/python/.venv` (`bash clients/python/scripts/setup.sh`,
//! which `scripts/test.sh` runs); without it the test fails, unless `WEFT_ALLOW_SKIP` has
//! `python`.

use std::path::Path;
use std::process::Command;

#[test]
fn python_client() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/python");
    let python = dir.join(".venv/bin/python");
    if !python.is_file() {
        return weft_test_support::skip(
            "python",
            "the Python client's tests",
            "clients/python/.venv is missing: run `bash clients/python/scripts/setup.sh`",
        );
    }
    let run = |what: &str, args: &[&str]| {
        let status = Command::new(&python)
            .args(args)
            .current_dir(&dir)
            .env("WEFT_BIN", env!("CARGO_BIN_EXE_weft"))
            .status()
            .unwrap_or_else(|e| panic!("{} cannot run: {e}", python.display()));
        assert!(status.success(), "{what} in clients/python failed ({status})");
    };
    run("mypy --strict", &["-m", "mypy"]);
    run("pytest", &["-m", "pytest", "-q", "-p", "no:cacheprovider"]);
}
