//! `POST /api/ag-ui` and `POST /api/chat` / `GET /api/chat/{id}/stream` at the HTTP level: what
//! they refuse and say, owners, and the headers. (The official clients run against them in
//! weft-cli's `frontends` test.)
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-key-0001";
const BOB: &str = "bob-key-000002";

async fn keyed() -> TestServer {
    start_with(
        weather_script(),
        |b| b,
        |s| {
            s.api_keys = weft_server::parse_api_keys(&format!("{ALICE}=alice,{BOB}=bob")).unwrap();
        },
    )
    .await
}

async fn error_of(response: reqwest::Response) -> (u16, String, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    let code = body["error"]["code"].as_str().unwrap_or("").to_string();
    let message = body["error"]["message"].as_str().unwrap_or("").to_string();
    (status, code, message)
}

fn agui_input(thread: &str) -> Value {
    json!({"threadId": thread, "runId": "r1",
           "messages": [{"id": "u1", "role": "user", "content": "Weather in Paris?"}],
           "tools": [{"name": "get_weather", "description": "w",
                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]})
}

fn chat_request(id: &str) -> Value {
    json!({"id": id, "trigger": "submit-message",
           "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather?"}]}],
           "tools": [remote_weather_tool()]})
}

#[tokio::test]
async fn bad_bodies_are_400_saying_where() {
    let server = start(weather_script()).await;
    for (path, body, needle) in [
        ("/api/ag-ui", json!({"runId": "r", "messages": []}), "threadId"),
        (
            "/api/ag-ui",
            json!({"threadId": "t", "messages": [{"role": "user", "content": 5}]}),
            "messages[0]",
        ),
        (
            "/api/ag-ui",
            json!({"threadId": "t", "messages": [], "tools": [{"description": "x"}]}),
            "tools[0]",
        ),
        (
            "/api/ag-ui",
            json!({"threadId": "t", "messages": [], "resume": [{"interruptId": "c", "status": "maybe"}]}),
            "resume[0].status",
        ),
        (
            "/api/ag-ui",
            json!({"threadId": "t", "messages": [{"role": "user", "content": "hi"}],
                   "forwardedProps": {"weft": {"multitask": "later"}}}),
            "forwardedProps.weft.multitask",
        ),
        (
            "/api/ag-ui",
            json!({"threadId": "t", "messages": [{"role": "assistant", "content": "hi"}]}),
            "must end with a user message",
        ),
        ("/api/chat", json!({"messages": []}), "id"),
        (
            "/api/chat",
            json!({"id": "c", "messages": [{"role": "robot", "parts": []}]}),
            "messages[0].role",
        ),
        (
            "/api/chat",
            json!({"id": "c", "messages": [], "trigger": "regenerate-message"}),
            "regenerate",
        ),
        ("/api/chat", json!({"id": "c", "messages": []}), "must end with a user message"),
        (
            "/api/chat",
            json!({"id": "c", "messages": [{"role": "user", "parts": [{"type": "text", "text": 5}]}]}),
            "messages[0].parts[0].text: expected a string, got a number",
        ),
        (
            "/api/chat",
            json!({"id": "c", "messages": [{"role": "user", "parts": [{"text": "hi"}]}]}),
            "messages[0].parts[0]: missing field `type`",
        ),
        (
            "/api/chat",
            json!({"id": "c", "messages": [
                {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "parts": [{"type": "tool-get_weather", "toolCallId": 7}]},
                {"role": "user", "parts": [{"type": "text", "text": "and?"}]}]}),
            "messages[1].parts[0].toolCallId: expected a string",
        ),
        (
            "/api/chat",
            json!({"id": "bad id!", "messages": [{"role": "user", "parts": []}]}),
            "invalid session id",
        ),
    ] {
        let response = server.post(path, None).body(body.to_string()).send().await.unwrap();
        let (status, _, message) = error_of(response).await;
        assert_eq!(status, 400, "{path} {body}: {message}");
        assert!(message.contains(needle), "{path} {body}: {message:?} should name {needle:?}");
    }
    let response = server.post("/api/chat", None).body("{\"id\": ").send().await.unwrap();
    let (status, _, message) = error_of(response).await;
    assert_eq!(status, 400);
    assert!(message.starts_with("malformed JSON at line 1"), "{message}");
}

#[tokio::test]
async fn owners_have_their_own_threads_and_chats() {
    let server = keyed().await;
    let response =
        server.client.post(server.url("/api/ag-ui")).json(&agui_input("t-1")).send().await.unwrap();
    assert_eq!(response.status(), 401);

    let response =
        server.post("/api/ag-ui", Some(ALICE)).json(&agui_input("t-1")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    assert!(text.contains("\"RUN_FINISHED\""), "{text}");
    let response =
        server.post("/api/chat", Some(ALICE)).json(&chat_request("c-1")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-vercel-ai-ui-message-stream"], "v1");
    assert!(response.text().await.unwrap().ends_with("data: [DONE]\n\n"));

    // Bob has no chat c-1: nothing of Alice's is found under it.
    let request = server.get("/api/chat/c-1/stream", Some(BOB));
    let (status, code, _) = error_of(request.send().await.unwrap()).await;
    assert_eq!((status, code.as_str()), (404, "session_not_found"));
    // Bob may choose the same ids: each is a thread or chat of his own, shown by his id.
    let response =
        server.post("/api/ag-ui", Some(BOB)).json(&agui_input("t-1")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-session-id"], "t-1");
    let text = response.text().await.unwrap();
    assert!(text.contains("\"threadId\":\"t-1\""), "{text}");
    assert!(!text.contains('~'), "a stored id leaked: {text}");
    let response =
        server.post("/api/chat", Some(BOB)).json(&chat_request("c-1")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-session-id"], "c-1");
    let _ = response.text().await.unwrap();
    for (key, owner) in [(ALICE, "alice"), (BOB, "bob")] {
        let list: Value = server
            .get("/api/agent/sessions", Some(key))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let mut ids: Vec<&str> = list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, ["c-1", "t-1"], "{owner}: {list}");
        assert!(list["sessions"].as_array().unwrap().iter().all(|s| s["owner"] == owner));
    }
    // Alice's chat is not running: nothing to resume.
    let response = server.get("/api/chat/c-1/stream", Some(ALICE)).send().await.unwrap();
    assert_eq!(response.status(), 204);
}
