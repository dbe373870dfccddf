//! The front ends people already use, against this `weft` binary (`clients/frontends`): the
//! official AG-UI client (`@ag-ui/client`'s `HttpAgent`) on `POST /api/ag-ui`, and the Vercel AI
//! SDK's own client code (`DefaultChatTransport`, `readUIMessageStream`; majors 6 and 7) on
//! `POST /api/chat` and `GET /api/chat/{id}/stream`, with Node's test runner.
//!
//! Without Node or the folder's `node_modules` (`npm ci` in clients/frontends, which
//! `scripts/test.sh` does) the test fails, unless `WEFT_ALLOW_SKIP` has `node`.
mod node;

#[test]
fn agui_and_ai_sdk_clients() {
    node::run_package_tests(
        "frontends",
        "AG-UI and AI SDK front-end tests",
        &["@ag-ui/client", "ai6", "ai7"],
    );
}
