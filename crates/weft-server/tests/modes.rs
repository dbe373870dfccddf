//! `options.mode` end to end: a graph-of-thoughts session over HTTP, streamed as Loom NDJSON.

#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod common;

use serde_json::{Value, json};
use weft_llm::faux::FauxScript;

use common::{start, user};

fn script(name: &str) -> FauxScript {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripts").join(name);
    FauxScript::from_file(path).unwrap()
}

#[tokio::test]
async fn options_mode_runs_a_graph_of_thoughts_and_the_session_keeps_it() {
    let server = start(script("got-adaptive.json")).await;
    let response = server
        .post("/api/agent/execute?protocol=loom", None)
        .json(&json!({
            "input": user("Write a haiku about rain"),
            "context": {},
            "options": {"mode": "got", "modeOptions": {"adaptive": true, "nodeBudget": 5}},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = response.headers()["x-session-id"].to_str().unwrap().to_string();
    let text = response.text().await.unwrap();
    let frames: Vec<Value> = weft_protocol::framing::parse_sse(&text)
        .iter()
        .filter(|f| f.is_json())
        .map(|f| serde_json::from_str(&f.data).unwrap())
        .collect();
    assert_eq!(frames[0]["agent"], "got");
    let kinds: Vec<&str> = frames.iter().filter_map(|f| f["type"].as_str()).collect();
    for kind in ["got_plan", "got_node_start", "got_node_complete", "got_expand", "checkpoint"] {
        assert!(kinds.contains(&kind), "{kind} missing: {kinds:?}");
    }
    let last = frames.last().unwrap();
    assert_eq!(last["status"], "completed");
    assert!(last["reply"].as_str().unwrap().starts_with("Rain on the tin roof"));
    let session = server.settled(&id).await;
    assert_eq!(session["status"], "completed");
    // The session keeps its mode: another mode for it is refused.
    let again = server
        .post("/api/agent/execute", None)
        .json(&json!({"sessionId": id, "input": user("Again"), "options": {"mode": "tot"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 400);
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["error"]["code"], "session_option_fixed", "{body}");
}
