//! `options.durability` of an execute request, and the server's default (`Settings::durability`),
//! through HTTP: the run is stored as asked (the session's stored options say so while it is the
//! session's last run), the front-end endpoints get the server's default, and a value that is
//! not one of `sync`, `async`, `exit` is refused, naming them.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use common::{start, start_with, user};
use serde_json::{Value, json};
use weft_core::Durability;

/// What the store keeps of session `id`'s options.
async fn stored_options(server: &common::TestServer, id: &str) -> Value {
    let path = server.dir.path().join("weft.db");
    let store = weft_store::connect(&format!("sqlite:{}", path.display())).await.unwrap();
    store.load(id).await.unwrap().unwrap().head.options
}

#[tokio::test]
async fn a_request_names_its_runs_durability() {
    let server = start(common::slow_script(0)).await;
    for (durability, stored) in [("sync", json!("sync")), ("exit", json!("exit"))] {
        let (id, frames) = server
            .execute(json!({
                "input": user("hi"),
                "context": {"messages": [], "tools": []},
                "options": {"durability": durability},
            }))
            .await;
        let end = common::last_json(&frames);
        assert_eq!(end["status"], "completed", "{end}");
        assert_eq!(server.settled(&id).await["status"], "completed");
        assert_eq!(stored_options(&server, &id).await["durability"], stored);
    }
    // Named `async`, or not at all, it is the default: nothing is recorded.
    for options in [json!({"durability": "async"}), json!({}), json!({"durability": null})] {
        let (id, _) = server
            .execute(json!({
                "input": user("hi"),
                "context": {"messages": [], "tools": []},
                "options": options,
            }))
            .await;
        server.settled(&id).await;
        assert!(stored_options(&server, &id).await.get("durability").is_none());
    }
}

#[tokio::test]
async fn an_unknown_durability_is_refused_naming_the_known_ones() {
    let server = start(common::slow_script(0)).await;
    let response = server
        .post("/api/agent/execute", None)
        .json(&json!({
            "input": user("hi"),
            "context": {"messages": [], "tools": []},
            "options": {"durability": "later"},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap_or_default().to_string();
    for name in ["sync", "async", "exit"] {
        assert!(message.contains(name), "{body}");
    }
}

#[tokio::test]
async fn the_servers_default_applies_to_requests_that_name_none_and_to_the_front_ends() {
    let server =
        start_with(common::slow_script(0), |b| b, |s| s.durability = Durability::Sync).await;
    let (id, _) = server
        .execute(json!({"input": user("hi"), "context": {"messages": [], "tools": []}}))
        .await;
    server.settled(&id).await;
    assert_eq!(stored_options(&server, &id).await["durability"], "sync");
    // A request's own choice wins over the default.
    let (id, _) = server
        .execute(json!({
            "input": user("hi"),
            "context": {"messages": [], "tools": []},
            "options": {"durability": "async"},
        }))
        .await;
    server.settled(&id).await;
    assert!(stored_options(&server, &id).await.get("durability").is_none());
    // The AI SDK endpoint: the server's default.
    let chat = json!({
        "id": "chat-durable",
        "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
    });
    let response = server.post("/api/chat", None).json(&chat).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let text = response.text().await.unwrap();
    assert!(text.contains("[DONE]"), "{text}");
    // Without API keys, a chat's session has the chat's id.
    assert_eq!(stored_options(&server, "chat-durable").await["durability"], "sync");
}
