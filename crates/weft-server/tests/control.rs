//! Runs belong to the server: abort (seen by every watcher), `multitask`, `onDisconnect`.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use common::*;
use futures::StreamExt;
use serde_json::json;
use weft_agent::tool_fn;
use weft_llm::faux::{FauxScript, FauxTurn};
use weft_protocol::framing::parse_sse;

async fn execute_stream(server: &TestServer, body: serde_json::Value) -> reqwest::Response {
    let response = server.post("/api/agent/execute", None).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    response
}

async fn wait_status(server: &TestServer, id: &str, status: &str) {
    for _ in 0..500 {
        if server.session(id).await["status"] == status {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("session {id} never reached {status}");
}

#[tokio::test]
async fn abort_ends_every_attached_stream() {
    let server = start(stall_script()).await;
    let response = execute_stream(&server, json!({"input": user("Go"), "context": {}})).await;
    let id = session_header(&response);
    wait_status(&server, &id, "running").await;
    let watcher =
        server.get(&format!("/api/agent/session/{id}/stream"), None).send().await.unwrap();
    // Nothing to abort elsewhere; an unknown session is 404.
    let missing = server.post("/api/agent/session/nope/abort", None).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    let abort = server.post(&format!("/api/agent/session/{id}/abort"), None).send().await.unwrap();
    assert_eq!(abort.status(), 200);
    let own = parse_sse(&response.text().await.unwrap());
    let watched = parse_sse(&watcher.text().await.unwrap());
    assert_eq!(last_json(&own)["status"], "aborted");
    assert_eq!(own, watched);
    assert_eq!(server.settled(&id).await["status"], "aborted");
    let again = server.post(&format!("/api/agent/session/{id}/abort"), None).send().await.unwrap();
    assert_eq!(again.status(), 409);
}

#[tokio::test]
async fn abort_during_a_local_tool() {
    let slow = tool_fn("slow", "Sleeps a long time", |_args: serde_json::Value| async {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok::<_, String>("done".to_string())
    });
    let script = FauxScript::new([
        FauxTurn::text("Calling").with_tool_call_id("c1", "slow", json!({})),
        FauxTurn::text("never"),
    ]);
    let server = start_with(script, |b| b.tool(slow), |_| {}).await;
    let response = execute_stream(&server, json!({"input": user("Go"), "context": {}})).await;
    let id = session_header(&response);
    // Watch the live run until the tool is running.
    let watcher =
        server.get(&format!("/api/agent/session/{id}/stream"), None).send().await.unwrap();
    let mut body = watcher.bytes_stream();
    let mut seen = String::new();
    while !seen.contains("tool_execution_start") {
        let chunk = tokio::time::timeout(Duration::from_secs(10), body.next()).await;
        seen.push_str(std::str::from_utf8(&chunk.unwrap().unwrap().unwrap()).unwrap());
    }
    let abort = server.post(&format!("/api/agent/session/{id}/abort"), None).send().await.unwrap();
    assert_eq!(abort.status(), 200);
    let frames = parse_sse(&response.text().await.unwrap());
    assert!(frames.iter().any(|f| json_of(f)["type"] == "tool_execution_start"));
    assert_eq!(last_json(&frames)["status"], "aborted");
    let session = server.settled(&id).await;
    // The conversation stays valid: the call got an error result.
    let last = session["messages"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(last["role"], "toolResult");
    assert_eq!(last["isError"], true);
}

#[tokio::test]
async fn multitask_reject_enqueue_and_interrupt() {
    let script = FauxScript::new([
        // ~1.4 s: the refused request must land while this run is still going.
        FauxTurn::text("one two three four five six").with_chunk_size(2).with_delay_ms(100),
        FauxTurn::text("second answer"),
        FauxTurn::text("third answer"),
    ]);
    let server = start(script).await;
    let first = execute_stream(&server, json!({"input": user("First"), "context": {}})).await;
    let id = session_header(&first);
    let run_id = first.headers()["x-run-id"].to_str().unwrap().to_string();

    // reject (the default): 409 with the running run's id.
    let rejected = server
        .post("/api/agent/execute", None)
        .json(&json!({"sessionId": id, "input": user("Second")}))
        .send()
        .await
        .unwrap();
    assert_eq!(rejected.status(), 409);
    let body: serde_json::Value = rejected.json().await.unwrap();
    assert_eq!(body["error"]["code"], "session_running");
    assert_eq!(body["error"]["runId"], run_id.as_str());

    // enqueue: starts after the first run's end.
    let second = execute_stream(
        &server,
        json!({"sessionId": id, "input": user("Second"), "options": {"multitask": "enqueue"}}),
    )
    .await;
    let first_frames = parse_sse(&first.text().await.unwrap());
    assert_eq!(last_json(&first_frames)["status"], "completed");
    let second_frames = parse_sse(&second.text().await.unwrap());
    assert_eq!(last_json(&second_frames)["status"], "completed");
    let first_last = first_frames.iter().filter_map(|f| f.id).max().unwrap();
    let second_first = second_frames.iter().filter_map(|f| f.id).min().unwrap();
    assert!(second_first > first_last, "the enqueued run starts after the first one ends");

    // interrupt: the running run is aborted, then the new one runs.
    let server = start(FauxScript::new([
        FauxTurn::text("stuck").stalled(),
        FauxTurn::text("after the interrupt"),
    ]))
    .await;
    let stuck = execute_stream(&server, json!({"input": user("First"), "context": {}})).await;
    let id = session_header(&stuck);
    wait_status(&server, &id, "running").await;
    let next = execute_stream(
        &server,
        json!({"sessionId": id, "input": user("Now"), "options": {"multitask": "interrupt"}}),
    )
    .await;
    assert_eq!(last_json(&parse_sse(&stuck.text().await.unwrap()))["status"], "aborted");
    let frames = parse_sse(&next.text().await.unwrap());
    assert_eq!(last_json(&frames)["status"], "completed");
    let transcript = weft_protocol::native::decode(&frames).unwrap();
    assert_eq!(transcript.texts, vec!["after the interrupt".to_string()]);
}

#[tokio::test]
async fn a_client_that_goes_away_leaves_its_run_unless_it_asked_to_cancel() {
    let server = start(slow_script(10)).await;
    let response = execute_stream(&server, json!({"input": user("Foxes"), "context": {}})).await;
    let id = session_header(&response);
    drop(read_some(response, 2).await);
    assert_eq!(server.settled(&id).await["status"], "completed");

    // A model that never finishes: only the client going away can end this run.
    let server = start(stall_script()).await;
    let response = execute_stream(
        &server,
        json!({"input": user("Foxes"), "context": {}, "options": {"onDisconnect": "cancel"}}),
    )
    .await;
    let id = session_header(&response);
    drop(read_some(response, 2).await);
    assert_eq!(server.settled(&id).await["status"], "aborted");
}

#[tokio::test]
async fn graceful_shutdown_ends_streams_and_lets_runs_rest() {
    let mut server = start_with(
        stall_script(),
        |b| b,
        |s| {
            s.shutdown_grace = Duration::from_millis(200);
        },
    )
    .await;
    let response = execute_stream(&server, json!({"input": user("Go"), "context": {}})).await;
    let id = session_header(&response);
    wait_status(&server, &id, "running").await;
    let reading = tokio::spawn(async move { response.text().await });
    server.stop().await.unwrap();
    // The stream ended (the server closed it) and the run was aborted and saved.
    assert!(reading.await.unwrap().is_ok());
    let store =
        weft_store::connect(&format!("sqlite:{}", server.dir.path().join("weft.db").display()))
            .await
            .unwrap();
    let head = store.head(&id).await.unwrap().unwrap();
    assert_eq!(head.status, weft_core::SessionStatus::Aborted);
}
