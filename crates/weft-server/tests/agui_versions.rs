//! `POST /api/ag-ui` renders for the client's AG-UI version: a request without
//! `protocolVersion` (what `@ag-ui/client` 0.0.x, the one CopilotKit 1.x bundles, sends) gets only
//! the `RUN_FINISHED` outcomes 0.0.x accepts; a 1.0 request (`protocolVersion: "1.0"`) gets 1.0.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use weft_protocol::framing::parse_sse;

/// A `RunAgentInput` as `HttpAgent` 0.0.59 builds it (`prepareRunAgentInput`): no
/// `protocolVersion`; `version` adds one.
fn input(thread: &str, run: &str, messages: Value, version: Option<&str>) -> Value {
    let mut input = json!({
        "threadId": thread, "runId": run, "state": {}, "messages": messages,
        "tools": [{"name": "get_weather", "description": "The weather in a city",
                   "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        "context": [], "forwardedProps": {}
    });
    if let Some(version) = version {
        input["protocolVersion"] = json!(version);
    }
    input
}

fn ask() -> Value {
    json!([{"id": "u1", "role": "user", "content": "Weather in Paris?"}])
}

async fn run(server: &TestServer, body: &Value) -> Vec<Value> {
    let response = server.post("/api/ag-ui", None).json(body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    parse_sse(&response.text().await.unwrap()).iter().map(json_of).collect()
}

fn finished(events: &[Value]) -> &Value {
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED", "{events:?}");
    last
}

/// The events of a stream without the ids of its runs and messages and the clock.
fn shape(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .map(|e| {
            let mut e = e.clone();
            let map = e.as_object_mut().unwrap();
            for key in ["threadId", "runId", "messageId", "parentMessageId"] {
                map.remove(key);
            }
            if let Some(snapshot) = map.get_mut("snapshot").and_then(Value::as_object_mut) {
                snapshot.remove("weft");
            }
            if let Some(value) = map.get_mut("value").and_then(Value::as_object_mut) {
                value.remove("timestamp");
            }
            e
        })
        .collect()
}

#[tokio::test]
async fn a_0_0_x_client_gets_a_success_it_accepts_and_resumes_with_its_tool_message() {
    let server = start(weather_script()).await;
    let events = run(&server, &input("old", "r1", ask(), None)).await;
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(types.contains(&"TOOL_CALL_END"), "{types:?}");
    assert_eq!(finished(&events)["outcome"], json!({"type": "success"}));
    let call = events.iter().find(|e| e["type"] == "TOOL_CALL_START").unwrap();
    assert_eq!(call["toolCallId"], "call-1");
    assert_eq!(server.settled("old").await["status"], "awaiting_tool_execution");

    // The client finds the call among the streamed ones, runs it and sends the conversation
    // back with its `tool` message, as 0.0.x's `HttpAgent` does.
    let messages = json!([
        {"id": "u1", "role": "user", "content": "Weather in Paris?"},
        {"id": call["parentMessageId"], "role": "assistant", "content": "Let me look that up.",
         "toolCalls": [{"id": "call-1", "type": "function",
                        "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
        {"id": "t1", "role": "tool", "toolCallId": "call-1", "content": "sunny"}
    ]);
    let events = run(&server, &input("old", "r2", messages, None)).await;
    assert_eq!(finished(&events)["outcome"], json!({"type": "success"}));
    let text: String = events
        .iter()
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, "It is sunny in Paris.");
    assert!(events.iter().all(|e| e["type"] != "TOOL_CALL_RESULT"), "the client's own result");
    let session = server.settled("old").await;
    assert_eq!(session["status"], "completed");
    let stored = session.to_string();
    assert!(stored.contains("sunny") && stored.contains("It is sunny in Paris."), "{session}");
}

#[tokio::test]
async fn a_1_0_client_gets_pending_calls_and_otherwise_the_same_stream() {
    let server = start(weather_script()).await;
    let new = run(&server, &input("t", "r1", ask(), Some("1.0"))).await;
    assert_eq!(
        finished(&new)["outcome"],
        json!({"type": "success", "pendingToolCallIds": ["call-1"]})
    );
    let server = start(weather_script()).await;
    let old = run(&server, &input("t", "r1", ask(), None)).await;
    // The same run for both, but for the outcome.
    let (mut old, mut new) = (shape(&old), shape(&new));
    for last in [old.last_mut().unwrap(), new.last_mut().unwrap()] {
        last.as_object_mut().unwrap().remove("outcome");
    }
    assert_eq!(old, new);

    // A declared 0.x is 0.0.x; a newer one than 1.0 gets 1.0's.
    for (version, pending) in [("0.0.59", false), ("1.1", true), ("2.0", true)] {
        let server = start(weather_script()).await;
        let events = run(&server, &input("t", "r1", ask(), Some(version))).await;
        let outcome = &finished(&events)["outcome"];
        assert_eq!(outcome.get("pendingToolCallIds").is_some(), pending, "{version}: {outcome}");
    }
}

#[tokio::test]
async fn a_stopped_run_has_no_outcome_for_0_0_x_and_is_cancelled_for_1_0() {
    for (version, outcome) in [(None, None), (Some("1.0"), Some(json!({"type": "cancelled"})))] {
        let server = start(stall_script()).await;
        let thread = if version.is_some() { "new" } else { "old" };
        let response = server
            .post("/api/ag-ui", None)
            .json(&input(thread, "r1", ask(), version))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let body = tokio::spawn(response.text());
        // The run is live (the model never finishes): stop it.
        for _ in 0..400 {
            if server.session(thread).await["status"] == "running" {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let abort = server.post(&format!("/api/agent/session/{thread}/abort"), None);
        assert_eq!(abort.send().await.unwrap().status(), 200);
        let events: Vec<Value> =
            parse_sse(&body.await.unwrap().unwrap()).iter().map(json_of).collect();
        let last = finished(&events);
        assert_eq!(last.get("outcome").cloned(), outcome, "{version:?}: {last}");
        assert_eq!(server.settled(thread).await["status"], "aborted");
    }
}

#[tokio::test]
async fn a_protocol_version_that_is_not_a_string_is_a_400_saying_where() {
    let server = start(weather_script()).await;
    let mut body = input("t", "r1", ask(), None);
    body["protocolVersion"] = json!(1);
    let response = server.post("/api/ag-ui", None).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 400);
    let error: Value = response.json().await.unwrap();
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("protocolVersion"), "{message}");
}
