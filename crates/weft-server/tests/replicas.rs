//! Sessions that outlive a request: dense event ids from run to run, a session's own turn limit
//! and provider, remote calls past their deadline, and two servers (replicas) on one store:
//! read, attach, abort and one run at a time across them.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use serde_json::{Value, json};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

fn weather_result(id: &str) -> Value {
    json!({"sessionId": id, "input": [{"role": "toolResult", "toolCallId": "call-1",
        "toolName": "get_weather", "content": "Sunny, 21°C"}]})
}

fn ids(frames: &[weft_protocol::Frame]) -> Vec<u64> {
    frames.iter().filter_map(|f| f.id).collect()
}

#[tokio::test]
async fn event_ids_stay_dense_from_request_to_request() {
    let server = start(weather_script()).await;
    let (id, first) = server
        .execute(json!({"input": user("Weather in Paris?"),
                        "context": {"tools": [remote_weather_tool()]}}))
        .await;
    let (_, second) = server.execute(weather_result(&id)).await;
    let (first, second) = (ids(&first), ids(&second));
    assert_eq!(first[0], 1);
    assert_eq!(second[0], first.last().unwrap() + 1, "no gap: {first:?} then {second:?}");
    // Attaching after the end replays the last run only (found from the head, not a scan).
    let replay = ids(&server.attach(&id, "", None).await);
    assert_eq!(replay, second);
    // A cursor in the earlier run resumes there.
    let resumed = ids(&server.attach(&id, "", Some(first[2])).await);
    assert_eq!(resumed, first[3..].to_vec());
}

#[tokio::test]
async fn a_sessions_own_max_turns_holds_across_a_resume() {
    let server = start(weather_script()).await;
    let (id, frames) = server
        .execute(json!({"input": user("Weather in Paris?"),
                        "context": {"tools": [remote_weather_tool()]},
                        "options": {"maxTurns": 1}}))
        .await;
    assert_eq!(last_json(&frames)["status"], "awaiting_tool_execution");
    // The limit is the session's: another value on a later request is refused.
    let mut refused = weather_result(&id);
    refused["options"] = json!({"maxTurns": 2});
    let response = server.post("/api/agent/execute", None).json(&refused).send().await.unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "session_option_fixed", "{body}");
    // The resume would be the second model call: the run stops at its limit instead.
    let (_, frames) = server.execute(weather_result(&id)).await;
    assert_eq!(last_json(&frames)["status"], "max_turns");
    let session = server.session(&id).await;
    assert_eq!(session["status"], "max_turns");
    assert_eq!(session["stepCount"], 1);
}

#[tokio::test]
async fn sessions_pick_a_provider_from_the_servers_registry() {
    let other = FauxProvider::new(FauxScript::new([FauxTurn::text("Hello from the other one")]));
    let server = start_with(
        weather_script(),
        |b| b.with_provider("other", Arc::new(other), "other-model"),
        |_| {},
    )
    .await;
    let (id, frames) = server
        .execute(json!({"input": user("hi"), "context": {}, "options": {"provider": "other"}}))
        .await;
    assert_eq!(last_json(&frames)["status"], "completed");
    let transcript = weft_protocol::native::decode(&frames).unwrap();
    assert_eq!(transcript.texts.last().map(String::as_str), Some("Hello from the other one"));
    let session = server.session(&id).await;
    assert_eq!(
        (session["provider"].as_str(), session["model"].as_str()),
        (Some("other"), Some("other-model"))
    );
    let response = server
        .post("/api/agent/execute", None)
        .json(&json!({"input": user("hi"), "context": {}, "options": {"provider": "nope"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_provider");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("allowed: faux, other"), "{message}");
}

#[tokio::test]
async fn a_remote_call_past_its_deadline_gets_an_error_result_and_the_run_goes_on() {
    let server = start_with(
        weather_script(),
        |b| {
            b.remote_tool_timeout(Duration::from_millis(300))
                .sweep_interval(Duration::from_millis(100))
        },
        |_| {},
    )
    .await;
    let (id, frames) = server
        .execute(json!({"input": user("Weather in Paris?"),
                        "context": {"tools": [remote_weather_tool()]}}))
        .await;
    assert_eq!(last_json(&frames)["status"], "awaiting_tool_execution");
    let mut session = server.session(&id).await;
    for _ in 0..100 {
        if session["status"] == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        session = server.session(&id).await;
    }
    assert_eq!(session["status"], "completed", "{session}");
    assert_eq!(session["messages"][2]["isError"], true);
    let text = session["messages"][2]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("before its deadline"), "{text}");
    // The server's own resume is a run like any other: attach replays it.
    let replay = server.attach(&id, "", None).await;
    assert_eq!(last_json(&replay)["status"], "completed");
    let transcript = weft_protocol::native::decode(&replay).unwrap();
    assert_eq!(transcript.texts.last().map(String::as_str), Some("It is sunny in Paris."));
    // A late result is refused: the call was answered.
    let late =
        server.post("/api/agent/execute", None).json(&weather_result(&id)).send().await.unwrap();
    assert_eq!(late.status(), 409);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_store_read_attach_and_abort_each_others_runs() {
    let a = start_with(stall_script(), |b| b.abort_poll(Duration::from_millis(50)), |_| {}).await;
    let b = replica_of(&a, FauxScript::new([FauxTurn::text("From B")]), |b| b).await;
    let request = a
        .post("/api/agent/execute", None)
        .json(&json!({"sessionId": "shared-1", "input": user("Go"), "context": {}}))
        .send();
    let on_a = tokio::spawn(async move { parse_frames(request.await.unwrap()).await });
    // B sees the run A executes.
    let mut seen = Value::Null;
    for _ in 0..200 {
        let response = b.get("/api/agent/session/shared-1", None).send().await.unwrap();
        if response.status() == 200 {
            seen = response.json().await.unwrap();
            if seen["status"] == "running" {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen["status"], "running", "{seen}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    // One run at a time: B refuses a second input.
    let response = b
        .post("/api/agent/execute", None)
        .json(&json!({"sessionId": "shared-1", "input": user("Me too")}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 409);
    // B attaches to the live run, then aborts it; both streams end with the abort.
    let attached = b.get("/api/agent/session/shared-1/stream", None).send().await.unwrap();
    assert_eq!(attached.status(), 200);
    let watcher = tokio::spawn(parse_frames(attached));
    let response = b.post("/api/agent/session/shared-1/abort", None).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let frames = tokio::time::timeout(Duration::from_secs(10), on_a).await.unwrap().unwrap();
    assert_eq!(last_json(&frames)["status"], "aborted");
    let watched = tokio::time::timeout(Duration::from_secs(20), watcher).await.unwrap().unwrap();
    assert_eq!(last_json(&watched)["status"], "aborted");
    assert_eq!(ids(&watched), ids(&frames), "the watcher on B saw A's run");
    // Both replicas now say so, and B runs the next input.
    assert_eq!(a.settled("shared-1").await["status"], "aborted");
    assert_eq!(b.settled("shared-1").await["status"], "aborted");
    let (_, frames) = b.execute(json!({"sessionId": "shared-1", "input": user("Again")})).await;
    assert_eq!(last_json(&frames)["status"], "completed");
    assert_eq!(a.session("shared-1").await["status"], "completed");
}

async fn parse_frames(response: reqwest::Response) -> Vec<weft_protocol::Frame> {
    weft_protocol::framing::parse_sse(&response.text().await.unwrap())
}
