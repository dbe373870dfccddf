#![allow(clippy::unwrap_used)]
use serde_json::{Value, json};
use weft_core::{AgentEvent, Message, SessionStatus, StopReason};

use super::*;
use crate::native::fixtures::{self, assistant, call, step, text, thinking};

fn render(events: &[AgentEvent]) -> Vec<Frame> {
    let mut encoder = AceaiEncoder::new();
    let mut frames = Vec::new();
    for (i, event) in events.iter().enumerate() {
        crate::encode(&mut encoder, i as u64 + 1, event, &mut frames);
    }
    encoder.finish(&mut frames);
    frames
}

fn values(events: &[AgentEvent]) -> Vec<Value> {
    render(events).iter().map(|f| serde_json::from_str(&f.data).unwrap()).collect()
}

fn types(values: &[Value]) -> Vec<&str> {
    values.iter().map(|v| v["event_type"].as_str().unwrap()).collect()
}

#[test]
fn text_and_thinking_exact_frames() {
    let frames = render(&fixtures::text_and_thinking());
    let data: Vec<&str> = frames.iter().map(|f| f.data.as_str()).collect();
    let message = concat!(
        r#"{"content":[{"type":"thinking","thinking":"Greet them.","signature":"sig"},"#,
        r#"{"type":"text","text":"Hello!"}],"stopReason":"stop","#,
        r#""usage":{"input":10,"output":5,"cacheRead":0,"cacheWrite":0,"total":15},"#,
        r#""provider":"faux","model":"faux-1","timestamp":1700000000000}"#
    );
    let head = r#"{"event_type":"#;
    let expected = [
        format!(r#"{head}"agent.llm.started","step_index":0,"step_id":"st0"}}"#),
        format!(
            r#"{head}"agent.llm.reasoning","step_index":0,"step_id":"st0","llm_delta":"Greet"}}"#
        ),
        format!(
            r#"{head}"agent.llm.reasoning","step_index":0,"step_id":"st0","llm_delta":" them."}}"#
        ),
        format!(
            r#"{head}"agent.llm.output_text.delta","step_index":0,"step_id":"st0","llm_delta":"Hel"}}"#
        ),
        format!(
            r#"{head}"agent.llm.output_text.delta","step_index":0,"step_id":"st0","llm_delta":"lo!"}}"#
        ),
        format!(
            r#"{head}"agent.llm.completed","step_index":0,"step_id":"st0","step":{{"step_id":"st0","step_index":0,"timestamp":"2023-11-14T22:13:20.000Z","llm_response":{message},"tool_results":[]}}}}"#
        ),
        format!(
            r#"{head}"agent.step.completed","step_index":0,"step_id":"st0","step":{{"step_id":"st0","step_index":0,"timestamp":"2023-11-14T22:13:20.000Z","llm_response":{message},"latency_ms":42,"tool_results":[]}}}}"#
        ),
        format!(
            r#"{head}"agent.run.completed","step_index":0,"step_id":"st0","step":{{"step_id":"st0","step_index":0,"timestamp":"2023-11-14T22:13:20.000Z","llm_response":{message},"latency_ms":42,"tool_results":[]}},"annotations":{{"status":"completed","usage":{{"input":0,"output":0,"cacheRead":0,"cacheWrite":0,"total":0}},"cost":{{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}}}}}}"#
        ),
    ];
    assert_eq!(data, expected);
}

#[test]
fn tool_frames_name_their_call_and_carry_increments() {
    let v = values(&fixtures::tools_two_steps());
    assert_eq!(
        types(&v),
        [
            "agent.llm.started",
            "agent.llm.output_text.delta",
            "agent.llm.output_text.delta",
            // echo: start, two argument deltas
            "agent.llm.tool_call.delta",
            "agent.llm.tool_call.delta",
            "agent.llm.tool_call.delta",
            // fail: start, "{" and "}"
            "agent.llm.tool_call.delta",
            "agent.llm.tool_call.delta",
            "agent.llm.tool_call.delta",
            // nope
            "agent.llm.tool_call.delta",
            "agent.llm.tool_call.delta",
            "agent.llm.tool_call.delta",
            "agent.llm.completed",
            "agent.tool.started",
            "agent.tool.output",
            "agent.tool.output",
            "agent.tool.completed",
            "agent.tool.started",
            "agent.tool.failed",
            // nope never ran: its error result, before the step ends
            "agent.tool.failed",
            "agent.step.completed",
            "agent.llm.started",
            "agent.llm.output_text.delta",
            "agent.llm.output_text.delta",
            "agent.llm.completed",
            "agent.step.completed",
            "agent.run.completed",
        ]
    );
    assert_eq!(v[3]["tool_call"], json!({"id": "c1", "name": "echo", "arguments_delta": ""}));
    assert_eq!(v[4]["tool_call"]["id"], "c1");
    assert_eq!(v[4]["tool_call"]["name"], "echo");
    let args: String = [&v[3], &v[4], &v[5]]
        .iter()
        .map(|f| f["tool_call"]["arguments_delta"].as_str().unwrap())
        .collect();
    assert_eq!(args, r#"{"text":"Paris \"sunny\""}"#);
    assert_eq!(v[6]["tool_call"]["name"], "fail");
    // The completed response: the whole message (every call whole), no tool results yet.
    assert_eq!(v[12]["step"]["llm_response"]["stopReason"], "toolUse");
    assert_eq!(
        v[12]["step"]["llm_response"]["content"][1],
        json!({"type": "toolCall", "id": "c1", "name": "echo", "arguments": {"text": "Paris \"sunny\""}})
    );
    assert_eq!(v[12]["step"]["tool_results"], json!([]));
    assert_eq!(
        v[13]["tool_call"],
        json!({"id": "c1", "name": "echo", "arguments": {"text": "Paris \"sunny\""}})
    );
    assert_eq!(
        v[14]["tool_result"],
        json!({"call": {"id": "c1", "name": "echo"}, "output": "Paris "})
    );
    assert_eq!(v[15]["tool_result"]["output"], "\"sunny\"");
    assert_eq!(
        v[16]["tool_result"],
        json!({"call": {"id": "c1", "name": "echo", "arguments": {"text": "Paris \"sunny\""}}, "output": "Paris \"sunny\""})
    );
    assert_eq!(
        v[18]["tool_result"],
        json!({"call": {"id": "c2", "name": "fail", "arguments": {}}, "output": "failed on {}", "error": "failed on {}"})
    );
    // The unknown tool's error result: the whole ToolExecutionResult.
    let unknown = json!({
        "call": {"id": "c3", "name": "nope", "arguments": {"x": 1}},
        "output": "Tool nope not found",
        "error": "Tool nope not found",
        "started_at": "2023-11-14T22:13:20.100Z",
        "latency_ms": 7
    });
    assert_eq!(v[19]["tool_result"], unknown);
    // The step holds every result in the model's order, including the unknown tool's.
    let results = &v[20]["step"]["tool_results"];
    assert_eq!(results.as_array().unwrap().len(), 3);
    assert_eq!(results[2], unknown);
    // The second step's frames name it.
    assert!(v[21..26].iter().all(|f| f["step_index"] == 1 && f["step_id"] == "st1"));
    assert!(v[..21].iter().all(|f| f["step_index"] == 0 && f["step_id"] == "st0"));
    assert_eq!(v[26]["step"]["step_id"], "st1");
}

#[test]
fn every_frame_is_a_spec_step_event() {
    let allowed = [
        "event_type",
        "step_index",
        "step_id",
        "step",
        "llm_delta",
        "tool_call",
        "tool_result",
        "error",
        "annotations",
    ];
    for (name, events) in fixtures::all() {
        for f in values(&events) {
            let object = f.as_object().unwrap();
            assert!(object.keys().all(|k| allowed.contains(&k.as_str())), "{name}: {f}");
            assert!(f["step_index"].is_i64() && f["step_id"].is_string(), "{name}: {f}");
            assert!(EVENT_TYPES.contains(&f["event_type"].as_str().unwrap()), "{name}: {f}");
            // `step` only on completed/failed/run-completed events.
            if f.get("step").is_some() {
                assert!(
                    [LLM_COMPLETED, STEP_COMPLETED, STEP_FAILED, RUN_COMPLETED]
                        .contains(&f["event_type"].as_str().unwrap()),
                    "{name}: {f}"
                );
            }
        }
    }
}

#[test]
fn remote_suspension_and_resumed_step() {
    let v = values(&fixtures::remote_suspend_and_resume());
    let t = types(&v);
    let suspended = t.iter().position(|k| *k == RUN_SUSPENDED).unwrap();
    assert_eq!(
        v[suspended]["annotations"],
        json!({
            "status": "awaiting_tool_execution",
            "tool_calls": [{"id": "r1", "name": "browser_click", "arguments": {"selector": "#go"}}]
        })
    );
    assert_eq!(v[suspended]["step_id"], "st0");
    // The suspended run's end: status, no error, and no step (the open step has not ended).
    let first_end = &v[suspended + 1];
    assert_eq!(first_end["event_type"], RUN_COMPLETED);
    assert_eq!(first_end["annotations"]["status"], "awaiting_tool_execution");
    assert!(first_end.get("step").is_none() && first_end.get("error").is_none());
    // The resumed run completes step 0 with the client's result, then runs step 1.
    let resumed = &v[suspended + 2];
    assert_eq!(resumed["event_type"], STEP_COMPLETED);
    assert_eq!(resumed["step"]["tool_results"][0]["output"], "clicked");
    assert_eq!(resumed["step_index"], 0);
    assert_eq!(*t.last().unwrap(), RUN_COMPLETED);
    assert_eq!(v.last().unwrap()["step"]["step_id"], "st1");
}

#[test]
fn a_stream_starting_with_a_resumed_run_knows_the_step_at_its_end() {
    let events = fixtures::approval_and_denial();
    let second = events.iter().rposition(|e| matches!(e, AgentEvent::SessionStart { .. })).unwrap();
    let v = values(&events[second..]);
    // The approved call runs before the step's id is known.
    assert_eq!(v[0]["event_type"], TOOL_STARTED);
    assert_eq!((v[0]["step_index"].clone(), v[0]["step_id"].clone()), (json!(-1), json!("")));
    assert_eq!(v[1]["event_type"], TOOL_COMPLETED);
    assert_eq!(v[1]["step_index"], -1);
    // The denied call never ran: its error result, named by the step that holds it.
    assert_eq!(v[2]["event_type"], TOOL_FAILED);
    assert_eq!(v[2]["tool_result"]["call"]["id"], "a2");
    assert_eq!(v[3]["event_type"], STEP_COMPLETED);
    for f in &v[2..4] {
        assert_eq!((f["step_index"].clone(), f["step_id"].clone()), (json!(0), json!("st0")));
    }
    // Decoding it alone still finds both results, the denied one included.
    let t = decode(&render(&events[second..])).unwrap();
    assert_eq!(t, Transcript::from_events(&events[second..]));
    assert_eq!(t.tool_results.len(), 2);
    assert!(t.tool_results[1].is_error);
    // In the whole stream the encoder knows the step the resumed run continues.
    let v = values(&events);
    let started = v.iter().position(|f| f["event_type"] == TOOL_STARTED).unwrap();
    assert_eq!(v[started]["step_id"], "st0");
}

#[test]
fn approval_requests_one_per_call() {
    let v = values(&fixtures::approval_and_denial());
    let requests: Vec<&Value> =
        v.iter().filter(|f| f["event_type"] == TOOL_APPROVAL_REQUESTED).collect();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0]["tool_call"],
        json!({"id": "a1", "name": "delete", "arguments": {"path": "/tmp/x"}})
    );
    assert_eq!(requests[1]["tool_call"]["id"], "a2");
    let ends: Vec<&Value> = v.iter().filter(|f| f["event_type"] == RUN_COMPLETED).collect();
    assert_eq!(ends[0]["annotations"]["status"], "awaiting_approval");
    assert_eq!(ends[1]["annotations"]["status"], "completed");
    let t = decode(&render(&fixtures::approval_and_denial()[..])).unwrap();
    assert!(t.pending.is_empty(), "the second run starts with nothing pending");
    let pending = fixtures::all().into_iter().find(|(n, _)| *n == "approval_pending").unwrap().1;
    assert_eq!(decode(&render(&pending)).unwrap().pending, ["a1", "a2"]);
}

#[test]
fn provider_error_fails_the_step_and_the_run() {
    let v = values(&fixtures::provider_error());
    assert_eq!(
        types(&v),
        // The text streamed ("Hel" in two deltas), but the response is not complete: no
        // `agent.llm.completed`; the failed step carries the partial.
        [LLM_STARTED, LLM_OUTPUT_TEXT_DELTA, LLM_OUTPUT_TEXT_DELTA, STEP_FAILED, RUN_COMPLETED]
    );
    assert_eq!(v[3]["error"], "429 rate limited");
    assert_eq!(v[3]["step"]["llm_response"]["stopReason"], "error");
    assert_eq!(v[3]["step"]["llm_response"]["content"][0]["text"], "Hel");
    assert_eq!(v[4]["error"], "429 rate limited");
    assert_eq!(v[4]["annotations"]["status"], "error");
    assert_eq!(v[4]["step"]["step_id"], "st0");
    let t = decode(&render(&fixtures::provider_error())).unwrap();
    assert_eq!(t.texts, ["Hel"]);
    assert_eq!(t.status, Some(SessionStatus::Error));
}

#[test]
fn errors_that_are_not_a_model_failure_are_sent_and_aborts_say_so() {
    let mut enc = AceaiEncoder::new();
    let mut frames = Vec::new();
    enc.encode(
        &AgentEvent::Error { error: "store unavailable".into(), message: None },
        &mut frames,
    );
    let v: Value = serde_json::from_str(&frames[0].data).unwrap();
    assert_eq!(
        v,
        json!({"event_type": STEP_FAILED, "step_index": -1, "step_id": "", "error": "store unavailable"})
    );
    // An abort with no error event still says why the run did not complete.
    frames.clear();
    let mut enc = AceaiEncoder::new();
    let mut ev = Vec::new();
    fixtures::end(&mut ev, SessionStatus::Aborted, vec![]);
    enc.encode(&ev[0], &mut frames);
    let v: Value = serde_json::from_str(&frames[0].data).unwrap();
    assert_eq!(v["error"], "the run was aborted");
    assert!(v.get("step").is_none());
}

#[test]
fn aborted_model_call_is_a_failed_step() {
    let mut ev = Vec::new();
    fixtures::start(&mut ev, Some("hi"));
    let m = assistant(vec![text("Par")], StopReason::Aborted);
    fixtures::model_call(&mut ev, "st0", 0, &m);
    fixtures::end_step(&mut ev, step("st0", 0, &m, vec![]), &[]);
    fixtures::end(&mut ev, SessionStatus::Aborted, vec![]);
    let v = values(&ev);
    let failed: Vec<&Value> = v.iter().filter(|f| f["event_type"] == STEP_FAILED).collect();
    assert_eq!(failed.len(), 1, "the error event does not repeat the step's failure");
    assert_eq!(failed[0]["error"], "the model call failed");
    assert_eq!(v.last().unwrap()["error"], "the model call failed");
    assert_eq!(v.last().unwrap()["annotations"]["status"], "aborted");
}

#[test]
fn extras_become_custom_and_checkpoints_nodes_and_messages_are_not_sent() {
    let v = values(&fixtures::tot_with_extras());
    let custom: Vec<&Value> = v.iter().filter(|f| f["event_type"] == CUSTOM).collect();
    assert_eq!(custom.len(), 4);
    assert_eq!(
        custom[0]["annotations"]["event"],
        json!({"type": "progress", "kind": "tot_expand", "candidates": ["a", "b"]})
    );
    assert_eq!(custom[2]["annotations"]["event"]["type"], "state_update");
    assert_eq!(
        custom[3]["annotations"]["event"],
        json!({"type": "custom", "value": {"kind": "note"}})
    );
    // Before the first step: -1 and "".
    assert_eq!(custom[0]["step_index"], -1);
    assert_eq!(custom[0]["step_id"], "");
    // After the step: the step it follows.
    assert_eq!(custom[3]["step_id"], "st0");
    for event in fixtures::one_of_each() {
        let mut frames = Vec::new();
        AceaiEncoder::new().encode(&event, &mut frames);
        let silent = matches!(
            event,
            AgentEvent::SessionStart { .. }
                | AgentEvent::NodeEnter { .. }
                | AgentEvent::NodeExit { .. }
                | AgentEvent::MessageStart { .. }
                | AgentEvent::TextStart { .. }
                | AgentEvent::TextEnd { .. }
                | AgentEvent::ThinkingStart { .. }
                | AgentEvent::ThinkingEnd { .. }
                | AgentEvent::ToolcallEnd { .. }
                | AgentEvent::Checkpoint { .. }
        );
        assert_eq!(frames.is_empty(), silent, "{}", event.kind());
    }
    // User and tool-result messages are not sent either.
    let mut frames = Vec::new();
    let user = Message::User(weft_core::UserMessage::text("hi"));
    AceaiEncoder::new().encode(&AgentEvent::MessageEnd { message: Arc::new(user) }, &mut frames);
    let r = Message::ToolResult(fixtures::result(&call("c", "t", json!({})), "o", false));
    AceaiEncoder::new().encode(&AgentEvent::MessageEnd { message: Arc::new(r) }, &mut frames);
    assert!(frames.is_empty());
}

#[test]
fn decode_of_encode_is_the_canonical_transcript() {
    for (name, events) in fixtures::all() {
        let expected = Transcript::from_events(&events);
        let decoded = decode(&render(&events)).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(decoded, expected, "{name}");
    }
    let t = decode(&render(&fixtures::tools_two_steps())).unwrap();
    assert_eq!(t.texts, ["Let me check.", "Sunny in Paris."]);
    assert_eq!(t.tool_calls.len(), 3);
    assert_eq!(
        t.tool_results.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        ["c1", "c2", "c3"]
    );
    let t = decode(&render(&fixtures::remote_suspended())).unwrap();
    assert_eq!(t.pending, ["r1"]);
    assert_eq!(t.status, Some(SessionStatus::AwaitingToolExecution));
}

#[test]
fn empty_and_repeated_blocks_stay_separate() {
    // Two text blocks around a thinking block, one of them empty (no delta at all).
    let mut ev = Vec::new();
    fixtures::start(&mut ev, Some("hi"));
    let m = assistant(vec![text(""), thinking("hm", None), text("b"), text("b")], StopReason::Stop);
    fixtures::model_call(&mut ev, "st0", 0, &m);
    fixtures::end_step(&mut ev, step("st0", 0, &m, vec![]), &[]);
    fixtures::end(&mut ev, SessionStatus::Completed, vec![]);
    let t = decode(&render(&ev)).unwrap();
    assert_eq!(t.texts, ["", "b", "b"]);
    assert_eq!(t.thinking, ["hm"]);
    assert_eq!(t, Transcript::from_events(&ev));
}

#[test]
fn decode_takes_blocks_from_the_model_responses_not_the_deltas() {
    let frames: Vec<Frame> = [
        // Deltas alone say nothing about blocks.
        r#"{"event_type":"agent.llm.output_text.delta","step_index":0,"step_id":"a","llm_delta":"He"}"#,
        r#"{"event_type":"agent.llm.completed","step_index":0,"step_id":"a","step":{"llm_response":{"content":[{"type":"text","text":"H"},{"type":"text","text":"e"},{"type":"image","data":"","mimeType":"image/png"},{"type":"toolCall","id":"c","name":"t","arguments":{"k":1}}],"stopReason":"toolUse"},"tool_results":[]}}"#,
        // A completed step repeats its response: not read again.
        r#"{"event_type":"agent.step.completed","step_index":0,"step_id":"a","step":{"llm_response":{"content":[{"type":"text","text":"H"}],"stopReason":"toolUse"},"tool_results":[{"call":{"id":"c","name":"t"},"output":"x","error":"x"}]}}"#,
        // A failed model call's partial is on its failed step.
        r#"{"event_type":"agent.step.failed","step_index":1,"step_id":"b","step":{"llm_response":{"content":[{"type":"thinking","thinking":"hm"},{"type":"text","text":"Pa"}],"stopReason":"aborted"},"tool_results":[]},"error":"aborted"}"#,
    ]
    .into_iter()
    .map(Frame::raw)
    .collect();
    let t = decode(&frames).unwrap();
    assert_eq!(t.texts, ["H", "e", "Pa"]);
    assert_eq!(t.thinking, ["hm"]);
    assert_eq!(
        t.tool_calls,
        [CallRecord { id: "c".into(), name: "t".into(), arguments: json!({"k": 1}) }]
    );
    assert_eq!(
        t.tool_results,
        [ResultRecord { id: "c".into(), output: "x".into(), is_error: true }]
    );
}

#[test]
fn decode_errors_name_the_frame_and_the_problem() {
    let ok = r#"{"event_type":"agent.llm.started","step_index":0,"step_id":"a"}"#;
    let cases = [
        (r#"{"event_type":"agent.llm.started""#, "invalid JSON"),
        ("[DONE]", "invalid JSON"),
        ("3", "expected a JSON object, got a number"),
        (r#"{"step_index":0}"#, "missing \"event_type\""),
        (r#"{"event_type":["x"]}"#, "\"event_type\" must be a string, got an array"),
        (r#"{"event_type":"agent.llm.exploded"}"#, "unknown event type \"agent.llm.exploded\""),
        (
            r#"{"event_type":"agent.run.completed","annotations":{}}"#,
            "without \"annotations.status\"",
        ),
        (
            r#"{"event_type":"agent.run.completed","annotations":{"status":"napping"}}"#,
            "invalid \"agent.run.completed\" frame",
        ),
        (r#"{"event_type":"agent.tool.approval_requested"}"#, "approval request without"),
        (r#"{"event_type":"agent.llm.completed"}"#, "without \"step.llm_response\""),
        (
            r#"{"event_type":"agent.llm.completed","step":{"llm_response":{"content":[{"type":"text"}]}}}"#,
            "invalid \"agent.llm.completed\" frame",
        ),
        (
            r#"{"event_type":"agent.step.completed","step":{"tool_results":[{"output":"x"}]}}"#,
            "invalid \"agent.step.completed\" frame",
        ),
    ];
    for (bad, expected) in cases {
        let frames: Vec<Frame> = [ok, bad, ok].into_iter().map(Frame::raw).collect();
        let err = decode(&frames).unwrap_err();
        assert_eq!(err.index, 1, "{bad}");
        assert!(err.reason.contains(expected), "{bad}: {err}");
        assert!(err.to_string().starts_with("frame 1: "), "{err}");
    }
}

#[test]
fn timestamps_are_rfc3339_utc() {
    assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
    assert_eq!(rfc3339(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    assert_eq!(rfc3339(951_782_400_000), "2000-02-29T00:00:00.000Z");
    assert_eq!(rfc3339(4_102_444_799_999), "2099-12-31T23:59:59.999Z");
    // Never panics, even at the end of time.
    assert!(rfc3339(u64::MAX).ends_with('Z'));
}

#[test]
fn step_annotations_use_snake_case() {
    let m = assistant(vec![text("x")], StopReason::Stop);
    let mut s = step("st0", 0, &m, vec![]);
    s.annotations.citations.push(weft_core::CitationRef {
        label: "doc".into(),
        url: None,
        provider_ref: Some(json!({"id": 1})),
    });
    s.annotations.safety.push(weft_core::SafetyNote {
        verdict: weft_core::SafetyVerdict::Review,
        category: "pii".into(),
    });
    let mut frames = Vec::new();
    AceaiEncoder::new().encode(&AgentEvent::StepEnd { step: Arc::new(s) }, &mut frames);
    let v: Value = serde_json::from_str(&frames[0].data).unwrap();
    assert_eq!(
        v["step"]["annotations"],
        json!({
            "safety": [{"verdict": "review", "category": "pii"}],
            "citations": [{"label": "doc", "provider_ref": {"id": 1}}],
            "extra": {}
        })
    );
}

/// The frames of `events` with the canonical event each came from.
fn frames_with_events(events: &[AgentEvent]) -> Vec<(Value, AgentEvent)> {
    let mut encoder = AceaiEncoder::new();
    let mut out = Vec::new();
    for event in events {
        let mut frames = Vec::new();
        encoder.encode(event, &mut frames);
        for f in frames {
            out.push((serde_json::from_str(&f.data).unwrap(), event.clone()));
        }
    }
    out
}

#[test]
fn every_text_and_reasoning_frame_carries_its_fragment() {
    for (name, events) in fixtures::all() {
        // Per step id: the text and thinking the canonical stream streamed.
        let (mut text, mut thinking) = (Vec::<String>::new(), Vec::<String>::new());
        for event in &events {
            match event {
                AgentEvent::StepStart { .. } => {
                    text.push(String::new());
                    thinking.push(String::new());
                }
                AgentEvent::TextDelta { delta, .. } => text.last_mut().unwrap().push_str(delta),
                AgentEvent::ThinkingDelta { delta, .. } => {
                    thinking.last_mut().unwrap().push_str(delta);
                }
                _ => {}
            }
        }
        let (mut got_text, mut got_thinking) = (Vec::<String>::new(), Vec::<String>::new());
        for f in values(&events) {
            let kind = f["event_type"].as_str().unwrap();
            if kind == LLM_STARTED {
                got_text.push(String::new());
                got_thinking.push(String::new());
            }
            if kind == LLM_OUTPUT_TEXT_DELTA || kind == LLM_REASONING {
                // `text += llm_delta` over every frame: each has one, and nothing else says
                // "this block ended" in a delta frame.
                let delta = f["llm_delta"].as_str();
                assert!(delta.is_some(), "{name}: {kind} without llm_delta: {f}");
                assert!(f.get("annotations").is_none(), "{name}: {f}");
                let target = if kind == LLM_REASONING { &mut got_thinking } else { &mut got_text };
                target.last_mut().unwrap().push_str(delta.unwrap());
            }
        }
        assert_eq!(got_text, text, "{name}");
        assert_eq!(got_thinking, thinking, "{name}");
    }
}

#[test]
fn every_tool_call_delta_carries_an_arguments_fragment() {
    for (name, events) in fixtures::all() {
        let mut streamed: Vec<(String, String)> = Vec::new();
        let mut open: Vec<(u32, String)> = Vec::new();
        for event in &events {
            match event {
                AgentEvent::ToolcallStart { index, id, .. } => {
                    open.push((*index, id.clone()));
                    streamed.push((id.clone(), String::new()));
                }
                AgentEvent::ToolcallDelta { index, delta } => {
                    let id = &open.iter().find(|(i, _)| i == index).unwrap().1;
                    streamed.iter_mut().rfind(|(c, _)| c == id).unwrap().1.push_str(delta);
                }
                AgentEvent::MessageStart { .. } => open.clear(),
                _ => {}
            }
        }
        let mut got: Vec<(String, String)> = Vec::new();
        for f in values(&events).into_iter().filter(|f| f["event_type"] == LLM_TOOL_CALL_DELTA) {
            let call = &f["tool_call"];
            let id = call["id"].as_str().unwrap().to_string();
            assert!(call["name"].is_string(), "{name}: {f}");
            let delta = call["arguments_delta"].as_str();
            assert!(delta.is_some(), "{name}: tool-call delta without arguments_delta: {f}");
            match got.last_mut() {
                Some((last, args)) if *last == id => args.push_str(delta.unwrap()),
                _ => got.push((id, delta.unwrap().to_string())),
            }
        }
        assert_eq!(got, streamed, "{name}");
    }
}

#[test]
fn every_error_result_gets_a_tool_failed_before_its_step_ends() {
    for (name, events) in fixtures::all() {
        // Every error result the model receives, in order.
        let errors: Vec<(String, String)> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::MessageEnd { message } => match &**message {
                    Message::ToolResult(r) if r.is_error => {
                        Some((r.tool_call_id.clone(), r.text_content()))
                    }
                    _ => None,
                },
                _ => None,
            })
            .collect();
        let frames = frames_with_events(&events);
        let failed: Vec<(String, String)> = frames
            .iter()
            .filter(|(f, _)| f["event_type"] == TOOL_FAILED)
            .map(|(f, _)| {
                let r = &f["tool_result"];
                assert_eq!(r["error"], r["output"], "{name}: {f}");
                (r["call"]["id"].as_str().unwrap().into(), r["error"].as_str().unwrap().into())
            })
            .collect();
        assert_eq!(failed, errors, "{name}: one agent.tool.failed per error result");
        // Each before the end of the step whose results hold it.
        for (id, _) in &errors {
            let at = frames
                .iter()
                .position(|(f, _)| {
                    f["event_type"] == TOOL_FAILED && f["tool_result"]["call"]["id"] == **id
                })
                .unwrap();
            let end = frames
                .iter()
                .position(|(f, _)| {
                    [STEP_COMPLETED, STEP_FAILED].contains(&f["event_type"].as_str().unwrap())
                        && f["step"]["tool_results"]
                            .as_array()
                            .is_some_and(|rs| rs.iter().any(|r| r["call"]["id"] == **id))
                })
                .unwrap();
            assert!(at < end, "{name}: {id}");
        }
    }
    // The calls that never ran: the unknown tool and the denied one, with their arguments.
    let v = values(&fixtures::tools_two_steps());
    let unknown = v
        .iter()
        .find(|f| f["event_type"] == TOOL_FAILED && f["tool_result"]["call"]["id"] == "c3")
        .unwrap();
    assert_eq!(unknown["step_id"], "st0");
    assert_eq!(
        unknown["tool_result"]["call"],
        json!({"id": "c3", "name": "nope", "arguments": {"x": 1}})
    );
    assert_eq!(unknown["tool_result"]["error"], "Tool nope not found");
    let v = values(&fixtures::approval_and_denial());
    let denied = v
        .iter()
        .find(|f| f["event_type"] == TOOL_FAILED && f["tool_result"]["call"]["id"] == "a2")
        .unwrap();
    assert_eq!(denied["tool_result"]["error"], "Tool call denied by the user: not now");
}

#[test]
fn a_failed_model_call_is_never_a_completed_response() {
    let mut aborted = Vec::new();
    fixtures::start(&mut aborted, Some("hi"));
    let m = assistant(vec![text("Par")], StopReason::Aborted);
    fixtures::model_call(&mut aborted, "st0", 0, &m);
    fixtures::end_step(&mut aborted, step("st0", 0, &m, vec![]), &[]);
    fixtures::end(&mut aborted, SessionStatus::Aborted, vec![]);
    for events in [fixtures::provider_error(), aborted] {
        let v = values(&events);
        assert!(!types(&v).contains(&LLM_COMPLETED), "{:?}", types(&v));
        let failed: Vec<&Value> = v.iter().filter(|f| f["event_type"] == STEP_FAILED).collect();
        assert_eq!(failed.len(), 1);
        // The partial response is on the failed step.
        assert_eq!(failed[0]["step"]["llm_response"]["content"][0]["type"], "text");
        assert_eq!(decode(&render(&events)).unwrap(), Transcript::from_events(&events));
    }
    // A complete response that stopped at its length limit is still a completed response.
    let mut ev = Vec::new();
    fixtures::start(&mut ev, Some("hi"));
    let m = assistant(vec![text("long")], StopReason::Length);
    fixtures::model_call(&mut ev, "st0", 0, &m);
    fixtures::end_step(&mut ev, step("st0", 0, &m, vec![]), &[]);
    fixtures::end(&mut ev, SessionStatus::Completed, vec![]);
    assert_eq!(
        types(&values(&ev)),
        [
            LLM_STARTED,
            LLM_OUTPUT_TEXT_DELTA,
            LLM_OUTPUT_TEXT_DELTA,
            LLM_COMPLETED,
            STEP_COMPLETED,
            RUN_COMPLETED
        ]
    );
}
