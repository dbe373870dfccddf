//! Dropped connections: a client that reconnects with `Last-Event-ID` gets exactly the events
//! it missed (no gap, no duplicate), in every SSE format, at every cut point; the run goes on
//! meanwhile; several watchers see the same; attaching after the end replays the run.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::json;
use weft_protocol::Frame;

const FORMATS: [&str; 3] = ["native", "loom", "ag-ui"];

/// Cuts a live stream every few events and reconnects with the last id seen, to the end.
async fn cut_and_resume(
    server: &TestServer,
    id: &str,
    query: &str,
    first: reqwest::Response,
) -> Vec<Frame> {
    let mut frames = read_some(first, 3).await;
    // The cut happened while the run was under way.
    assert_eq!(server.session(id).await["status"], "running");
    for round in 0..200 {
        let last = frames.iter().rev().find_map(|f| f.id).unwrap();
        let response = server
            .get(&format!("/api/agent/session/{id}/stream{query}"), None)
            .header("Last-Event-ID", last.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let more = read_some(response, 2 + round % 3).await;
        if more.is_empty() {
            return frames;
        }
        frames.extend(more);
    }
    panic!("the stream never ended");
}

#[tokio::test]
async fn reconnecting_mid_run_gets_exactly_the_missed_events_in_every_format() {
    // ~1.3 s a run: long enough that the first reconnection lands mid-run on a busy machine.
    let server = start(slow_script(40)).await;
    for format in FORMATS {
        let query = format!("?protocol={format}");
        let response = server
            .post(&format!("/api/agent/execute{query}"), None)
            .json(&json!({"input": user("Tell me about foxes"), "context": {}}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let id = session_header(&response);
        let pieced = cut_and_resume(&server, &id, &query, response).await;
        // The run was never aborted by the cuts.
        let session = server.settled(&id).await;
        assert_eq!(session["status"], "completed", "{format}");
        // The replay of the finished run is the reference: the pieces are exactly it.
        let replay = server.attach(&id, &query, None).await;
        assert!(replay.len() > 20, "{format}: {}", replay.len());
        assert_eq!(pieced, replay, "{format}: pieced-together stream differs from the replay");
    }
}

#[tokio::test]
async fn every_cut_point_of_a_finished_run_resumes_exactly() {
    let server = start(weather_script()).await;
    let (id, _) = server
        .execute(json!({"input": user("Weather?"), "context": {"tools": [remote_weather_tool()]}}))
        .await;
    let (_, _) = server
        .execute(json!({"sessionId": id, "input": [{"role": "toolResult", "toolCallId": "call-1",
            "toolName": "get_weather", "content": "Sunny"}]}))
        .await;
    for format in FORMATS {
        let query = format!("?protocol={format}");
        // Without a cursor: the last run (the resumed one), from its start.
        let replay = server.attach(&id, &query, None).await;
        assert!(!replay.is_empty());
        for (index, frame) in replay.iter().enumerate() {
            let Some(seq) = frame.id else { continue };
            let resumed = server.attach(&id, &query, Some(seq)).await;
            assert_eq!(resumed, replay[index + 1..], "{format}: resumed after {seq}");
            // `?after=` is the same cursor.
            let after = server.attach(&id, &format!("{query}&after={seq}"), None).await;
            assert_eq!(after, resumed, "{format}: ?after={seq}");
        }
    }
    // A cursor inside the first run resumes that run (its native end says it was suspended).
    let first_run = server.attach(&id, "", Some(1)).await;
    assert_eq!(last_json(&first_run)["status"], "awaiting_tool_execution");
    assert_eq!(last_json(&first_run)["pendingToolCalls"][0]["id"], "call-1");
}

#[tokio::test]
async fn watchers_see_the_same_run_and_a_late_one_gets_a_replay() {
    let server = start(slow_script(2)).await;
    let response = server
        .post("/api/agent/execute", None)
        .json(&json!({"input": user("Foxes?"), "context": {}}))
        .send()
        .await
        .unwrap();
    let id = session_header(&response);
    let watcher = {
        let request = server.get(&format!("/api/agent/session/{id}/stream"), None);
        tokio::spawn(async move { request.send().await.unwrap().text().await.unwrap() })
    };
    let own = weft_protocol::framing::parse_sse(&response.text().await.unwrap());
    let watched = weft_protocol::framing::parse_sse(&watcher.await.unwrap());
    assert_eq!(own, watched);
    assert_eq!(last_json(&own)["status"], "completed");
    let late = server.attach(&id, "", None).await;
    assert_eq!(late, own);
}

#[tokio::test]
async fn bad_cursors_are_400_and_ndjson_is_served_on_request() {
    let server = start(weather_script()).await;
    let (id, _) = server.execute(json!({"input": user("Weather?"), "context": {}})).await;
    let response = server
        .get(&format!("/api/agent/session/{id}/stream"), None)
        .header("Last-Event-ID", "abc")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let response = server
        .get(&format!("/api/agent/session/{id}/stream?protocol=nope"), None)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let response = server
        .get(&format!("/api/agent/session/{id}/stream"), None)
        .header("Accept", "application/x-ndjson")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let text = response.text().await.unwrap();
    let frames: Vec<Frame> = text.lines().map(Frame::raw).collect();
    let transcript = weft_protocol::loom::decode(&frames).unwrap();
    assert!(transcript.texts.iter().any(|t| t.contains("Let me look that up.")), "{transcript:?}");
}
