//! The TypeScript client and the web playground (`clients/typescript`): `npm test` there
//! type-checks the package, checks that the committed build the server embeds is current, and
//! runs its Node tests and its browser tests (headless Chromium) against this `weft` binary.
//!
//! Without Node or the package's `node_modules` (`npm ci` in clients/typescript, which
//! `.ci/run` does) the test says loudly that it skipped; under `CI=true` it fails instead.
mod node;

#[test]
fn typescript_client_and_playground() {
    node::run_package_tests(
        "typescript",
        "TypeScript client and playground tests",
        &["typescript"],
    );
}
