//! The agent plan's client flow over real HTTP: execute with a remote tool, the run suspends,
//! the client posts the result, the run completes; the session shows it all.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::json;
use weft_protocol::native::{NativeMessage, decode_frame};

#[tokio::test]
async fn remote_tool_flow_suspends_resumes_and_completes() {
    let server = start(weather_script()).await;
    let (id, frames) = server
        .execute(json!({
            "input": user("What's the weather in Paris?"),
            "context": {"messages": [], "tools": [remote_weather_tool()]},
            "options": {"model": "faux"}
        }))
        .await;
    // Every event carries its seq as the SSE id, increasing.
    let ids: Vec<u64> = frames.iter().filter_map(|f| f.id).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
    let complete = last_json(&frames);
    assert_eq!(complete["type"], "execute_complete");
    assert_eq!(complete["status"], "awaiting_tool_execution");
    assert_eq!(complete["pendingToolCalls"][0]["id"], "call-1");
    assert_eq!(complete["pendingToolCalls"][0]["arguments"], json!({"city": "Paris"}));
    assert!(frames.iter().any(|f| json_of(f)["type"] == "text_delta"));
    for frame in &frames {
        decode_frame(&frame.data).unwrap();
    }

    let session = server.session(&id).await;
    assert_eq!(session["status"], "awaiting_tool_execution");
    assert_eq!(session["pendingToolCalls"][0]["id"], "call-1");

    // A result for a call that does not exist: 422, nothing changes.
    let wrong = server
        .post("/api/agent/execute", None)
        .json(&json!({"sessionId": id, "input": [{"role": "toolResult", "toolCallId": "nope",
            "toolName": "get_weather", "content": "x"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 422);
    let body: serde_json::Value = wrong.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_tool_call");
    assert_eq!(server.session(&id).await["status"], "awaiting_tool_execution");

    let result = json!({"sessionId": id, "input": [{"role": "toolResult", "toolCallId": "call-1",
        "toolName": "get_weather", "content": "Sunny, 21°C"}]});
    let (same_id, frames) = server.execute(result.clone()).await;
    assert_eq!(same_id, id);
    let complete = last_json(&frames);
    assert_eq!(complete["status"], "completed");
    assert_eq!(complete["pendingToolCalls"], json!([]));
    let transcript = weft_protocol::native::decode(&frames).unwrap();
    assert_eq!(transcript.texts.last().map(String::as_str), Some("It is sunny in Paris."));

    // The same result again is refused, and never applied twice.
    let again = server.post("/api/agent/execute", None).json(&result).send().await.unwrap();
    assert_eq!(again.status(), 409);
    let session = server.session(&id).await;
    assert_eq!(session["status"], "completed");
    let roles: Vec<&str> = session["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "toolResult", "assistant"]);
    assert_eq!(session["messages"][2]["content"][0]["text"], "Sunny, 21°C");
    assert_eq!(session["usage"]["input"], 100);
    assert_eq!(session["usage"]["output"], 19);
    assert!(session["cost"]["total"].is_number());
    assert_eq!(session["pendingToolCalls"], json!([]));
}

#[tokio::test]
async fn a_new_session_needs_a_context_and_an_unknown_one_is_404() {
    let server = start(weather_script()).await;
    let response = server
        .post("/api/agent/execute", None)
        .json(&json!({"input": user("hi")}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "context_required");

    let response = server
        .post("/api/agent/execute", None)
        .json(&json!({"sessionId": "missing", "input": user("hi")}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 404);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "session_not_found");

    // With a context, a client-chosen id creates the session (the plan's server does).
    let (id, frames) = server
        .execute(json!({"sessionId": "my-session-1", "input": user("hi"),
                        "context": {"messages": [], "tools": [remote_weather_tool()]}}))
        .await;
    assert_eq!(id, "my-session-1");
    assert_eq!(last_json(&frames)["status"], "awaiting_tool_execution");

    // Tool results cannot start a new session.
    let response = server
        .post("/api/agent/execute", None)
        .json(&json!({"input": [], "context": {}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
}

#[tokio::test]
async fn options_are_checked_and_approvals_resume() {
    let server = start(weather_script()).await;
    for (options, code) in [
        (json!({"provider": "openai"}), "unknown_provider"),
        (json!({"mode": "mcts"}), "unknown_mode"),
        (json!({"mode": "tot", "modeOptions": {"search": "sideways"}}), "invalid_mode_options"),
        (json!({"maxTurns": 0}), "invalid_max_turns"),
        (json!({"maxTurns": 51}), "invalid_max_turns"),
    ] {
        let response = server
            .post("/api/agent/execute", None)
            .json(&json!({"input": user("hi"), "context": {}, "options": options}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
        let body: serde_json::Value = response.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{body}");
        if code == "unknown_provider" {
            assert!(body["error"]["message"].as_str().unwrap().contains("allowed: faux"));
        }
    }
    // A tool that needs approval: the run waits for the decision, which resumes it.
    let mut tool = remote_weather_tool();
    tool["requiresApproval"] = json!(true);
    let (id, frames) =
        server.execute(json!({"input": user("Weather?"), "context": {"tools": [tool]}})).await;
    let complete = last_json(&frames);
    assert_eq!(complete["status"], "awaiting_approval");
    assert_eq!(complete["pendingApprovals"][0]["id"], "call-1");
    let (_, frames) = server
        .execute(json!({"sessionId": id, "input": {"approvals": [
            {"toolCallId": "call-1", "approved": false, "reason": "not now"}]}}))
        .await;
    assert_eq!(last_json(&frames)["status"], "completed");
    let decoded: Vec<NativeMessage> =
        frames.iter().map(|f| decode_frame(&f.data).unwrap()).collect();
    assert!(matches!(decoded.last(), Some(NativeMessage::Complete { .. })));
    let session = server.session(&id).await;
    assert_eq!(session["messages"][2]["isError"], true);
}
