//! The server's request bodies, through [`weft_server::fuzzing::Bodies`]: a server on a faux
//! model without a store, so nothing is kept from one body to the next.

use weft_agent::Agent;
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_server::fuzzing::Bodies;
use weft_server::{ApiError, Server, Settings};

thread_local! {
    static BODIES: Bodies = bodies();
}

fn bodies() -> Bodies {
    let provider = FauxProvider::new(FauxScript::new([FauxTurn::text("ok")]));
    // No store, and no session kept open once its handle is dropped.
    let agent = match Agent::builder(provider).keep_open(0).build() {
        Ok(agent) => agent,
        Err(e) => panic!("the fuzzing agent: {e}"),
    };
    Bodies::new(&Server::new(agent, Settings::new("faux")))
}

/// A refusal must be the client's mistake (4xx), never the server's.
fn check(result: Result<(), ApiError>) {
    if let Err(e) = result {
        assert!(e.status.is_client_error(), "{} for a request body: {:?}", e.status, e.detail);
    }
}

/// `POST /api/agent/execute`'s body.
pub fn execute(data: &[u8]) {
    BODIES.with(|b| check(b.execute(data)));
}

/// `POST /api/ag-ui`'s body (`RunAgentInput`).
pub fn ag_ui(data: &[u8]) {
    BODIES.with(|b| check(b.ag_ui(data)));
}

/// `POST /api/chat`'s body.
pub fn chat(data: &[u8]) {
    BODIES.with(|b| check(b.chat(data)));
}

/// A WebSocket text frame of `GET /api/agent/ws` (the socket takes text frames only: bytes that
/// are not UTF-8 never reach the handler).
pub fn websocket(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        BODIES.with(|b| check(b.websocket(text)));
    }
}
