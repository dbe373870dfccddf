//! The TypeScript client and the web playground (`clients/typescript`): `npm test` there
//! type-checks the package, checks that the committed build the server embeds is current, and
//! runs its Node tests and its browser tests (headless Chromium) against this `weft` binary.
//!
//! Without Node or the package's `node_modules` (`npm ci` in clients/typescript, which
//! `scripts/test.sh` does) the test fails, unless `WEFT_ALLOW_SKIP` has `node`.
mod node;

#[test]
fn typescript_client_and_playground() {
    node::run_package_tests(
        "typescript",
        "TypeScript client and playground tests",
        &["typescript"],
    );
}
