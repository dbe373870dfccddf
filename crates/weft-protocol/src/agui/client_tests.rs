//! The AG-UI encoder per client: what a 0.0.x and a 1.0 client get (the outcomes each
//! accepts), the client's state and history snapshots, and the refusal and empty runs.

#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use weft_core::{AgentEvent, SessionStatus, StopReason};

use super::fixtures::{Block, Script, lines, of_type, real_weather_run, weather};
use super::tests::{check, encode, encode_with, values};
use super::{AgUiEncoder, AgUiVersion, StateView};
use crate::{Encoder, Frame};

/// The outcome of a `RUN_FINISHED` as `@ag-ui/core` 0.0.x validates it: absent, or one of its
/// two `.strict()` objects — `{type: "success"}` or `{type: "interrupt", interrupts: [≥ 1]}`
/// with no other key. Whatever else it is, 0.0.x fails the run.
fn v0_accepts_outcome(finished: &Value) -> bool {
    let Some(outcome) = finished.get("outcome") else { return true };
    let Some(outcome) = outcome.as_object() else { return false };
    match outcome.get("type").and_then(Value::as_str) {
        Some("success") => outcome.len() == 1,
        Some("interrupt") => {
            outcome.len() == 2
                && outcome
                    .get("interrupts")
                    .and_then(Value::as_array)
                    .is_some_and(|interrupts| !interrupts.is_empty())
        }
        _ => false,
    }
}

/// Every scenario's frames for a 0.0.x client and for a 1.0 client.
fn both_versions(events: &[AgentEvent]) -> (Vec<Frame>, Vec<Frame>) {
    let mut v0 = AgUiEncoder::new().version(AgUiVersion::V0);
    let mut old = encode_with(&mut v0, events);
    v0.finish(&mut old);
    (old, encode(events))
}

fn scenarios() -> Vec<(&'static str, Vec<AgentEvent>)> {
    vec![
        (
            "remote",
            Script::new("s1", "r1", 0)
                .user("Read the headline")
                .model(
                    &[Block::Text("Reading."), Block::Call("c1", "read_page", json!({}))],
                    StopReason::ToolUse,
                )
                .awaiting(&[("c1", "read_page", json!({}))])
                .end(SessionStatus::AwaitingToolExecution),
        ),
        (
            "approval",
            Script::new("s1", "r1", 0)
                .user("Send it")
                .model(&[Block::Call("c1", "send_email", json!({"to": "a"}))], StopReason::ToolUse)
                .approval(&[("c1", "send_email", json!({"to": "a"}))])
                .end(SessionStatus::AwaitingApproval),
        ),
        (
            "aborted",
            Script::new("s1", "r1", 0)
                .user("hi")
                .model(&[Block::Text("Thinking about")], StopReason::Aborted)
                .end(SessionStatus::Aborted),
        ),
        (
            "max_turns",
            Script::new("s1", "r1", 0)
                .model(&[Block::Call("c1", "echo", json!({}))], StopReason::ToolUse)
                .act(&[("c1", "echo", &["x"], false)])
                .observe(&[("c1", "echo", "x", false)])
                .end(SessionStatus::MaxTurns),
        ),
        (
            "error",
            Script::new("s1", "r1", 0)
                .user("hi")
                .model(&[Block::Text("Partial")], StopReason::Error)
                .end(SessionStatus::Error),
        ),
        ("completed", weather("r1")),
        ("recorded", real_weather_run()),
    ]
}

#[test]
fn the_version_comes_from_the_declared_protocol_version() {
    for (declared, version) in [
        (None, AgUiVersion::V0),
        (Some("0.0.59"), AgUiVersion::V0),
        (Some("0.1"), AgUiVersion::V0),
        (Some(" 0 "), AgUiVersion::V0),
        (Some("1.0"), AgUiVersion::V1),
        (Some("1.1"), AgUiVersion::V1),
        (Some("2.0"), AgUiVersion::V1),
        (Some(""), AgUiVersion::V1),
        (Some("next"), AgUiVersion::V1),
        (Some("-1"), AgUiVersion::V1),
    ] {
        assert_eq!(AgUiVersion::from_protocol_version(declared), version, "{declared:?}");
    }
    assert_eq!(AgUiVersion::default(), AgUiVersion::V1);
}

#[test]
fn a_v1_client_gets_exactly_the_default_frames() {
    for (name, events) in scenarios() {
        let mut v1 = AgUiEncoder::new().version(AgUiVersion::V1);
        let mut frames = encode_with(&mut v1, &events);
        v1.finish(&mut frames);
        assert_eq!(lines(&frames), lines(&encode(&events)), "{name}");
    }
}

#[test]
fn a_v0_client_gets_the_same_run_with_outcomes_it_accepts() {
    for (name, events) in scenarios() {
        let (old, new) = both_versions(&events);
        check(&old);
        let (old_v, new_v) = (values(&old), values(&new));
        // Everything but the run's last event is the same, byte for byte.
        assert_eq!(old.len(), new.len(), "{name}");
        assert_eq!(lines(&old)[..old.len() - 1], lines(&new)[..new.len() - 1], "{name}");
        let (last_old, last_new) = (old_v.last().unwrap(), new_v.last().unwrap());
        assert_eq!(last_old["type"], last_new["type"], "{name}");
        for finished in of_type(&old_v, "RUN_FINISHED") {
            assert!(v0_accepts_outcome(finished), "{name}: 0.0.x rejects {finished}");
        }
        // Apart from the outcome, the last event is the same too (ids, usage).
        let strip = |v: &Value| {
            let mut v = v.clone();
            v.as_object_mut().unwrap().remove("outcome");
            v
        };
        assert_eq!(strip(last_old), strip(last_new), "{name}");
    }
}

#[test]
fn a_v0_client_is_told_each_ending_in_its_own_terms() {
    let outcome_of = |name: &str| {
        let events = scenarios().into_iter().find(|(n, _)| *n == name).unwrap().1;
        let (old, new) = both_versions(&events);
        let last = |frames: &[Frame]| values(frames).last().unwrap().clone();
        (last(&old).get("outcome").cloned(), last(&new).get("outcome").cloned())
    };
    // Client calls: 1.0 names them; 0.0.x finds them among the streamed calls.
    assert_eq!(
        outcome_of("remote"),
        (
            Some(json!({"type": "success"})),
            Some(json!({"type": "success", "pendingToolCallIds": ["c1"]}))
        )
    );
    // Stopped: 0.0.x has no `cancelled`, so no outcome (a finished run).
    assert_eq!(outcome_of("aborted"), (None, Some(json!({"type": "cancelled"}))));
    assert_eq!(outcome_of("max_turns"), (None, Some(json!({"type": "cancelled"}))));
    // Interrupts and plain success are the same in both.
    let (old, new) = outcome_of("approval");
    assert_eq!(old, new);
    assert_eq!(old.unwrap()["interrupts"][0]["id"], "c1");
    assert_eq!(
        outcome_of("completed"),
        (Some(json!({"type": "success"})), Some(json!({"type": "success"})))
    );
    // A failed run ends with RUN_ERROR in both, no outcome.
    assert_eq!(outcome_of("error"), (None, None));
}

#[test]
fn the_v1_outcomes_that_v0_rejects_are_the_ones_the_v0_check_refuses() {
    // The check above must be able to fail: 1.0's own endings break it.
    for name in ["remote", "aborted", "max_turns"] {
        let events = scenarios().into_iter().find(|(n, _)| *n == name).unwrap().1;
        let v = values(&encode(&events));
        let finished = of_type(&v, "RUN_FINISHED");
        assert!(finished.iter().any(|f| !v0_accepts_outcome(f)), "{name}");
    }
}

/// A run that reports its state: a snapshot, then a node's change.
fn stateful_run() -> Vec<AgentEvent> {
    Script::new("s1", "r1", 0)
        .event(AgentEvent::StateSnapshot { state: json!({"n": 1}) })
        .event(AgentEvent::StateUpdate { name: "plan".into(), state: json!({"n": 2}) })
        .end(SessionStatus::Completed)
}

fn encode_as(encoder: AgUiEncoder, events: &[AgentEvent]) -> Vec<Value> {
    let mut encoder = encoder;
    let mut out = encode_with(&mut encoder, events);
    encoder.finish(&mut out);
    check(&out);
    values(&out)
}

#[test]
fn a_hidden_state_sends_no_state_events() {
    let v = encode_as(AgUiEncoder::new().state_view(StateView::Hidden), &stateful_run());
    let kinds: Vec<&str> = v.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds, ["RUN_STARTED", "RUN_FINISHED"]);
}

#[test]
fn the_clients_state_carries_weft_state_under_weft_and_the_final_status_last() {
    let client = json!({"theme": "dark", "weft": "the client's, replaced"});
    let view = StateView::ClientWithWeft(Some(client));
    let v = encode_as(AgUiEncoder::new().state_view(view), &stateful_run());
    assert_eq!(
        v[1..4],
        [
            json!({"type": "STATE_SNAPSHOT", "snapshot": {"theme": "dark",
                "weft": {"sessionId": "s1", "status": "running", "state": {"n": 1}}}}),
            json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/weft/state/n", "value": 2}]}),
            json!({"type": "STATE_SNAPSHOT", "snapshot": {"theme": "dark",
                "weft": {"sessionId": "s1", "status": "completed"}}}),
        ]
    );
    assert_eq!(v[4]["type"], "RUN_FINISHED");
    assert_eq!(v.len(), 5);

    // A client state that is not an object counts as `{}`; a failed run's last snapshot comes
    // just before its RUN_ERROR.
    let failed = Script::new("s1", "r1", 0)
        .model(&[Block::Text("Hal")], StopReason::Error)
        .end(SessionStatus::Error);
    let view = StateView::ClientWithWeft(Some(json!([1, 2])));
    let v = encode_as(AgUiEncoder::new().state_view(view), &failed);
    let n = v.len();
    assert_eq!(
        v[n - 2],
        json!({"type": "STATE_SNAPSHOT", "snapshot": {"weft": {"sessionId": "s1", "status": "error"}}})
    );
    assert_eq!(v[n - 1]["type"], "RUN_ERROR");
}

#[test]
fn the_history_snapshot_follows_run_started_once() {
    let mut user = weft_core::UserMessage::text("Hi");
    user.id = Some("u1".into());
    let mut answer = weft_core::AssistantMessage::empty("faux", "faux-1");
    answer.content = vec![
        weft_core::AssistantContent::Text(weft_core::TextContent { text: "Let me ".into() }),
        weft_core::AssistantContent::Text(weft_core::TextContent { text: "look.".into() }),
        weft_core::AssistantContent::ToolCall(weft_core::ToolCall {
            id: "c1".into(),
            name: "read_page".into(),
            arguments: json!({"selector": "h1"}).into(),
        }),
    ];
    let result = weft_core::ToolResultMessage::new("c1", "read_page", "Weft 0.1", false);
    let history = [
        weft_core::Message::User(user),
        weft_core::Message::Assistant(answer),
        weft_core::Message::ToolResult(result),
    ];
    let next = weft_core::Message::User(weft_core::UserMessage::text("And?"));
    let encoder = AgUiEncoder::new()
        .messages_snapshot("t1", &history)
        .messages_snapshot("new", std::iter::once(&next));
    let mut events = Script::new("s1", "r1", 0).end(SessionStatus::Completed);
    events.extend(Script::new("s1", "r2", 0).end(SessionStatus::Completed));
    let v = encode_as(encoder, &events);
    assert_eq!(
        v[1],
        json!({"type": "MESSAGES_SNAPSHOT", "messages": [
            {"role": "user", "id": "u1", "content": "Hi"},
            {"role": "assistant", "id": "t1-m1", "content": "Let me look.", "toolCalls": [
                {"id": "c1", "type": "function",
                 "function": {"name": "read_page", "arguments": "{\"selector\":\"h1\"}"}}]},
            {"role": "tool", "id": "t1-m2", "toolCallId": "c1", "content": "Weft 0.1"},
            {"role": "user", "id": "new-m0", "content": "And?"},
        ]})
    );
    let snapshots = v.iter().filter(|e| e["type"] == "MESSAGES_SNAPSHOT").count();
    assert_eq!(snapshots, 1, "once, for the first run");

    // An empty history is still a snapshot: the client's list is replaced by none.
    let no_messages: [weft_core::Message; 0] = [];
    let encoder = AgUiEncoder::new().messages_snapshot("t1", &no_messages);
    let v = encode_as(encoder, &Script::new("s1", "r1", 0).end(SessionStatus::Completed));
    assert_eq!(v[1], json!({"type": "MESSAGES_SNAPSHOT", "messages": []}));
}

#[test]
fn a_refusal_and_an_empty_run_open_and_close_the_clients_run() {
    let frames = super::refusal("t1", "run-9", "chat \"t1\" is new", "user_message_required");
    check(&frames);
    assert_eq!(
        lines(&frames),
        [
            r#"{"type":"RUN_STARTED","threadId":"t1","runId":"run-9"}"#,
            r#"{"type":"RUN_ERROR","message":"chat \"t1\" is new","code":"user_message_required"}"#,
        ]
    );
    let frames = super::empty_run("t1", "run-9");
    check(&frames);
    assert_eq!(
        lines(&frames),
        [
            r#"{"type":"RUN_STARTED","threadId":"t1","runId":"run-9"}"#,
            r#"{"type":"RUN_FINISHED","threadId":"t1","runId":"run-9"}"#,
        ]
    );
}
