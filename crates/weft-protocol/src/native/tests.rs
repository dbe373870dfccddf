#![allow(clippy::unwrap_used)]
use serde_json::{Value, json};
use weft_core::{AgentEvent, SessionStatus};

use super::fixtures::{self, call};
use super::*;

fn render(events: &[AgentEvent]) -> Vec<Frame> {
    let mut encoder = NativeEncoder::new();
    let mut frames = Vec::new();
    for (i, event) in events.iter().enumerate() {
        crate::encode(&mut encoder, i as u64 + 1, event, &mut frames);
    }
    encoder.finish(&mut frames);
    frames
}

fn frames_of(texts: &[&str]) -> Vec<Frame> {
    texts.iter().map(|t| Frame::raw(*t)).collect()
}

#[test]
fn small_run_exact_frames() {
    let events = [
        AgentEvent::SessionStart {
            session_id: "s".into(),
            run_id: "r".into(),
            agent: "react".into(),
            recovers: None,
        },
        AgentEvent::NodeEnter { name: "think".into(), node_id: "think-0".into() },
        AgentEvent::StepStart { step_id: "st0".into(), step_index: 0 },
        AgentEvent::TextStart { index: 0 },
        AgentEvent::TextDelta { index: 0, delta: "Hi \"you\"\n".into() },
        AgentEvent::TextEnd { index: 0, text: "Hi \"you\"\n".into() },
        AgentEvent::Checkpoint(Box::new(weft_core::CheckpointTaken {
            checkpoint_id: "k".into(),
            thread_id: "s".into(),
            checkpoint_ns: "".into(),
            step: 0,
            timestamp: 0,
            state: json!({}),
        })),
        AgentEvent::SessionEnd {
            session_id: "s".into(),
            status: SessionStatus::Completed,
            messages: vec![],
            usage: Box::default(),
            cost: Box::default(),
        },
    ];
    let frames = render(&events);
    let data: Vec<&str> = frames.iter().map(|f| f.data.as_str()).collect();
    assert_eq!(
        data,
        [
            r#"{"type":"session_start","sessionId":"s","runId":"r","agent":"react"}"#,
            r#"{"type":"text_start","index":0}"#,
            r#"{"type":"text_delta","index":0,"delta":"Hi \"you\"\n"}"#,
            r#"{"type":"text_end","index":0,"text":"Hi \"you\"\n"}"#,
            concat!(
                r#"{"type":"session_end","sessionId":"s","status":"completed","messages":[],"#,
                r#""usage":{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0},"#,
                r#""cost":{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}}"#
            ),
            r#"{"type":"execute_complete","status":"completed","pendingToolCalls":[],"pendingApprovals":[]}"#,
        ]
    );
    // Each frame carries the sequence number of its event; execute_complete shares
    // session_end's (it is the last frame that event produced).
    let ids: Vec<Option<u64>> = frames.iter().map(|f| f.id).collect();
    assert_eq!(ids, [Some(1), Some(4), Some(5), Some(6), None, Some(8)]);
}

#[test]
fn plan_events_are_sent_as_is_and_the_rest_dropped() {
    for event in fixtures::one_of_each() {
        let mut frames = Vec::new();
        NativeEncoder::new().encode(&event, &mut frames);
        if event.is_plan_event() {
            assert_eq!(frames[0].data, serde_json::to_string(&event).unwrap());
            assert_eq!(decode_frame(&frames[0].data).unwrap(), NativeMessage::Event(event));
        } else {
            assert!(frames.is_empty(), "{} should be dropped", event.kind());
            let json = serde_json::to_value(&event).unwrap();
            let err = decode_frame(&json.to_string()).unwrap_err();
            let tag = json["type"].as_str().unwrap();
            assert!(err.reason.contains(tag), "{err}");
        }
    }
}

#[test]
fn approval_required_is_kept() {
    let events = fixtures::approval_and_denial();
    let frames = render(&events);
    let kinds: Vec<String> = frames
        .iter()
        .map(|f| serde_json::from_str::<Value>(&f.data).unwrap()["type"].as_str().unwrap().into())
        .collect();
    assert!(kinds.contains(&"approval_required".to_string()));
    assert!(!kinds.iter().any(|k| k.starts_with("node_") || k.starts_with("step_")));
}

#[test]
fn execute_complete_lists_remote_and_approval_calls_and_resets_per_run() {
    let mut encoder = NativeEncoder::new();
    let mut frames = Vec::new();
    let remote = call("r1", "browser", json!({"q": 1}));
    let gated = call("a1", "delete", json!({}));
    for event in [
        AgentEvent::SessionStart {
            session_id: "s".into(),
            run_id: "r".into(),
            agent: "react".into(),
            recovers: None,
        },
        AgentEvent::ApprovalRequired { session_id: "s".into(), tool_calls: vec![gated.clone()] },
        AgentEvent::AwaitingToolExecution {
            session_id: "s".into(),
            tool_calls: vec![remote.clone()],
        },
        AgentEvent::SessionEnd {
            session_id: "s".into(),
            status: SessionStatus::AwaitingApproval,
            messages: vec![],
            usage: Box::default(),
            cost: Box::default(),
        },
    ] {
        encoder.encode(&event, &mut frames);
    }
    let last: Value = serde_json::from_str(&frames.last().unwrap().data).unwrap();
    assert_eq!(
        last,
        json!({
            "type": "execute_complete",
            "status": "awaiting_approval",
            "pendingToolCalls": [
                {"id": "a1", "name": "delete", "arguments": {}},
                {"id": "r1", "name": "browser", "arguments": {"q": 1}}
            ],
            "pendingApprovals": [{"id": "a1", "name": "delete", "arguments": {}}]
        })
    );
    assert_eq!(
        decode_frame(&frames.last().unwrap().data).unwrap(),
        NativeMessage::Complete {
            status: SessionStatus::AwaitingApproval,
            pending_tool_calls: vec![gated, remote],
        }
    );
    // The next run starts with nothing pending.
    frames.clear();
    for event in [
        AgentEvent::SessionStart {
            session_id: "s".into(),
            run_id: "r2".into(),
            agent: "react".into(),
            recovers: None,
        },
        AgentEvent::SessionEnd {
            session_id: "s".into(),
            status: SessionStatus::Completed,
            messages: vec![],
            usage: Box::default(),
            cost: Box::default(),
        },
    ] {
        encoder.encode(&event, &mut frames);
    }
    assert_eq!(
        frames.last().unwrap().data,
        r#"{"type":"execute_complete","status":"completed","pendingToolCalls":[],"pendingApprovals":[]}"#
    );
}

#[test]
fn decode_of_encode_is_the_canonical_transcript() {
    for (name, events) in fixtures::all() {
        let expected = Transcript::from_events(&events);
        let decoded = decode(&render(&events)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(decoded, expected, "{name}");
    }
    // The fixtures exercise what they claim to.
    let t = decode(&render(&fixtures::remote_suspended())).unwrap();
    assert_eq!(t.pending, ["r1"]);
    assert_eq!(t.status, Some(SessionStatus::AwaitingToolExecution));
    let t = decode(&render(&fixtures::tools_two_steps())).unwrap();
    assert_eq!(t.tool_results.len(), 3);
    assert!(t.tool_results[2].is_error);
}

#[test]
fn pending_comes_from_execute_complete() {
    // A client that only kept the closing frame still knows what is pending.
    let frames = frames_of(&[
        r#"{"type":"session_start","sessionId":"s","runId":"r","agent":"react"}"#,
        r#"{"type":"execute_complete","status":"awaiting_tool_execution","pendingToolCalls":[{"id":"x","name":"t","arguments":{}}]}"#,
    ]);
    let t = decode(&frames).unwrap();
    assert_eq!(t.pending, ["x"]);
    assert_eq!(t.status, Some(SessionStatus::AwaitingToolExecution));
    // A run started after it has not closed: its events decide.
    let mut frames = frames;
    frames.push(Frame::raw(
        r#"{"type":"session_start","sessionId":"s","runId":"r2","agent":"react"}"#,
    ));
    let t = decode(&frames).unwrap();
    assert!(t.pending.is_empty());
    assert_eq!(t.status, None);
}

#[test]
fn decode_errors_name_the_frame_and_the_problem() {
    let ok = r#"{"type":"text_start","index":0}"#;
    let cases = [
        (r#"{"type":"text_start","index":0"#, "invalid JSON"),
        ("[DONE]", "invalid JSON"),
        ("[1,2]", "expected a JSON object, got an array"),
        (r#"{"index":0}"#, "missing \"type\""),
        (r#"{"type":7}"#, "\"type\" must be a string"),
        (r#"{"type":"text_shout","index":0}"#, "unknown event type \"text_shout\""),
        (
            r#"{"type":"node_enter","name":"think","nodeId":"n"}"#,
            "event type \"node_enter\" is not part of the native format",
        ),
        (r#"{"type":"text_delta","index":0}"#, "invalid \"text_delta\" event"),
        (r#"{"type":"execute_complete","status":"sleeping"}"#, "invalid execute_complete"),
    ];
    for (bad, expected) in cases {
        let err = decode(&frames_of(&[ok, ok, bad, ok])).unwrap_err();
        assert_eq!(err.index, 2, "{bad}");
        assert!(err.reason.contains(expected), "{bad}: {err}");
        assert!(err.to_string().starts_with("frame 2: "), "{err}");
    }
}
