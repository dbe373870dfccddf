#![allow(clippy::unwrap_used)]

mod check;

use std::collections::BTreeMap;

use serde_json::{Value, json};
use weft_core::{AgentEvent, ModeProgress, SessionStatus, StopReason};

use super::{HEADER, VercelEncoder};
use crate::agui::fixtures::{Block, Script, lines, of_type, real_weather_run, texts, weather};
use crate::{Encoder, Frame};
use check::check;

fn encode_with(encoder: &mut VercelEncoder, events: &[AgentEvent]) -> Vec<Frame> {
    let mut out = Vec::new();
    for event in events {
        encoder.encode(event, &mut out);
    }
    encoder.finish(&mut out);
    out
}

fn encode(events: &[AgentEvent]) -> Vec<Frame> {
    encode_with(&mut VercelEncoder::new(), events)
}

fn parts(frames: &[Frame]) -> Vec<Value> {
    frames.iter().filter(|f| f.is_json()).map(|f| serde_json::from_str(&f.data).unwrap()).collect()
}

#[test]
fn the_header_is_v1() {
    assert_eq!(HEADER, ("x-vercel-ai-ui-message-stream", "v1"));
}

#[test]
fn a_text_answer_gives_exact_frames() {
    let events = Script::new("s1", "r1", 0)
        .user("hi")
        .model(&[Block::Text("Hello")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed);
    let frames = encode(&events);
    assert_eq!(
        lines(&frames),
        [
            r#"{"type":"start","messageId":"r1"}"#,
            r#"{"type":"start-step"}"#,
            r#"{"type":"text-start","id":"r1-0-0"}"#,
            r#"{"type":"text-delta","id":"r1-0-0","delta":"Hell"}"#,
            r#"{"type":"text-delta","id":"r1-0-0","delta":"o"}"#,
            r#"{"type":"text-end","id":"r1-0-0"}"#,
            r#"{"type":"finish-step"}"#,
            r#"{"type":"finish","finishReason":"stop"}"#,
            "[DONE]",
        ]
    );
    check(&frames, &[]);
}

#[test]
fn thinking_then_text_gives_exact_frames() {
    let events = Script::new("s1", "r1", 3)
        .user("hi")
        .model(&[Block::Think("Hmm.", Some("sig-1")), Block::Text("Hi")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed);
    let frames = encode(&events);
    assert_eq!(
        lines(&frames)[1..9],
        [
            r#"{"type":"start-step"}"#,
            r#"{"type":"reasoning-start","id":"r1-3-0"}"#,
            r#"{"type":"reasoning-delta","id":"r1-3-0","delta":"Hmm."}"#,
            r#"{"type":"reasoning-end","id":"r1-3-0","providerMetadata":{"weft":{"signature":"sig-1"}}}"#,
            r#"{"type":"text-start","id":"r1-3-1"}"#,
            r#"{"type":"text-delta","id":"r1-3-1","delta":"Hi"}"#,
            r#"{"type":"text-end","id":"r1-3-1"}"#,
            r#"{"type":"finish-step"}"#,
        ]
    );
    let seen = check(&frames, &[]);
    assert_eq!(seen.reasoning, ["Hmm."]);
}

#[test]
fn tool_calls_stream_their_input_output_and_results_inside_the_step() {
    let events = weather("r1");
    let frames = encode(&events);
    let seen = check(&frames, &[]);
    let p = parts(&frames);

    let contents: Vec<String> = seen.texts.iter().map(|(_, t)| t.clone()).collect();
    assert_eq!(contents, texts(&events));
    assert_eq!(seen.reasoning, ["Use the tools."]);
    assert_eq!(
        *of_type(&p, "tool-input-start")[0],
        json!({"type": "tool-input-start", "toolCallId": "c1", "toolName": "echo"})
    );
    assert_eq!(seen.input_text["c1"], r#"{"text":"Paris"}"#);
    assert!(of_type(&p, "tool-input-delta").len() > 2, "input is streamed in pieces");
    assert_eq!(
        *of_type(&p, "tool-input-available")[0],
        json!({"type": "tool-input-available", "toolCallId": "c1", "toolName": "echo",
               "input": {"text": "Paris"}})
    );
    assert_eq!(seen.inputs["c2"], json!({}));

    // Local output streams as transient data parts, then the outputs.
    let data = of_type(&p, "data-tool-output");
    assert!(data.iter().all(|d| d["transient"] == true));
    let streamed: String = data
        .iter()
        .filter(|d| d["data"]["toolCallId"] == "c1")
        .map(|d| d["data"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(streamed, "Paris");
    assert_eq!(seen.outputs["c1"], "Paris");
    assert_eq!(seen.outputs["c2"], "12:00");

    // The outputs belong to the first step, before the second model call's step.
    let kinds: Vec<&str> = p.iter().map(|v| v["type"].as_str().unwrap()).collect();
    let last_output = kinds.iter().rposition(|k| *k == "tool-output-available").unwrap();
    let second_step =
        kinds.iter().enumerate().filter(|(_, k)| **k == "start-step").nth(1).unwrap().0;
    assert!(last_output < second_step);
    assert_eq!(kinds.iter().filter(|k| **k == "finish-step").count(), 2);
    assert_eq!(seen.finishes, [json!({"type": "finish", "finishReason": "stop"})]);
}

#[test]
fn a_remote_suspension_leaves_the_tool_part_waiting_and_the_resume_continues_the_message() {
    let run1 = Script::new("s1", "r1", 0)
        .user("Read the headline")
        .model(
            &[Block::Text("Reading."), Block::Call("c1", "read_page", json!({"selector": "h1"}))],
            StopReason::ToolUse,
        )
        .awaiting(&[("c1", "read_page", json!({"selector": "h1"}))])
        .end(SessionStatus::AwaitingToolExecution);
    let frames = encode(&run1);
    let seen = check(&frames, &[]);
    assert_eq!(seen.inputs["c1"], json!({"selector": "h1"}));
    assert!(seen.outputs.is_empty(), "the client runs the call");
    assert_eq!(
        lines(&frames)[frames.len() - 4..],
        [
            r#"{"type":"tool-input-available","toolCallId":"c1","toolName":"read_page","input":{"selector":"h1"}}"#,
            r#"{"type":"finish-step"}"#,
            r#"{"type":"finish","finishReason":"tool-calls"}"#,
            "[DONE]",
        ]
    );

    // The next request (the client's result) continues the same assistant message.
    let run2 = Script::new("s1", "r2", 1)
        .observe(&[("c1", "read_page", "Weft 0.1", false)])
        .model(&[Block::Text("The headline is Weft 0.1.")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed);
    let frames = encode(&run2);
    assert_eq!(
        lines(&frames)[..2],
        [
            r#"{"type":"start"}"#,
            r#"{"type":"tool-output-available","toolCallId":"c1","output":"Weft 0.1"}"#
        ]
    );
    let seen = check(&frames, &["c1"]);
    assert_eq!(seen.texts, [("r2-1-0".to_string(), "The headline is Weft 0.1.".to_string())]);

    // The server can name the message explicitly.
    let frames = encode_with(&mut VercelEncoder::new().with_message_id("msg-7"), &run2);
    assert_eq!(frames[0].data, r#"{"type":"start","messageId":"msg-7"}"#);
}

#[test]
fn an_approval_request_names_the_call_and_a_denial_is_an_output_error() {
    let run1 = Script::new("s1", "r1", 0)
        .user("Send it")
        .model(&[Block::Call("c1", "send_email", json!({"to": "a@b.c"}))], StopReason::ToolUse)
        .approval(&[("c1", "send_email", json!({"to": "a@b.c"}))])
        .end(SessionStatus::AwaitingApproval);
    let frames = encode(&run1);
    check(&frames, &[]);
    assert_eq!(
        lines(&frames)[frames.len() - 5..],
        [
            r#"{"type":"tool-input-available","toolCallId":"c1","toolName":"send_email","input":{"to":"a@b.c"}}"#,
            r#"{"type":"tool-approval-request","approvalId":"c1","toolCallId":"c1"}"#,
            r#"{"type":"finish-step"}"#,
            r#"{"type":"finish","finishReason":"tool-calls"}"#,
            "[DONE]",
        ]
    );

    let run2 = Script::new("s1", "r2", 1)
        .observe(&[("c1", "send_email", "Tool call denied by the user: no", true)])
        .model(&[Block::Text("Understood.")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed);
    let seen = check(&encode(&run2), &["c1"]);
    assert_eq!(seen.outputs["c1"], json!({"error": "Tool call denied by the user: no"}));
}

#[test]
fn a_provider_error_is_reported_once_and_the_stream_still_ends_properly() {
    let events = Script::new("s1", "r1", 0)
        .user("hi")
        .model(
            &[Block::Text("Partial answ"), Block::Call("c1", "echo", json!({"t": 1}))],
            StopReason::Error,
        )
        .end(SessionStatus::Error);
    let frames = encode(&events);
    let seen = check(&frames, &[]);
    assert_eq!(seen.texts[0].1, "Partial answ", "the partial text is kept");
    assert_eq!(
        seen.outputs["c1"],
        json!({"error": "The tool call was not run: the model call failed (upstream 500)"})
    );
    let p = parts(&frames);
    assert_eq!(of_type(&p, "error"), [&json!({"type": "error", "errorText": "upstream 500"})]);
    assert_eq!(
        lines(&frames)[frames.len() - 3..],
        [r#"{"type":"finish-step"}"#, r#"{"type":"finish","finishReason":"error"}"#, "[DONE]"]
    );
}

#[test]
fn an_abort_is_an_abort_part_not_an_error() {
    let events = Script::new("s1", "r1", 0)
        .user("hi")
        .model(&[Block::Text("Thinking about")], StopReason::Aborted)
        .end(SessionStatus::Aborted);
    let frames = encode(&events);
    check(&frames, &[]);
    assert!(of_type(&parts(&frames), "error").is_empty());
    assert_eq!(
        lines(&frames)[frames.len() - 5..],
        [
            r#"{"type":"text-end","id":"r1-0-0"}"#,
            r#"{"type":"finish-step"}"#,
            r#"{"type":"abort"}"#,
            r#"{"type":"finish","finishReason":"other"}"#,
            "[DONE]",
        ]
    );
}

#[test]
fn a_multi_step_run_balances_its_steps_and_keeps_texts_whole() {
    let mut script = Script::new("s1", "r1", 0).user("Count to three");
    for (i, word) in ["one", "two", "three"].iter().enumerate() {
        let id = format!("c{i}");
        script = script
            .model(
                &[
                    Block::Text(&format!("Saying {word}, a longer text than four characters.")),
                    Block::Call(&id, "say", json!({ "word": word })),
                ],
                StopReason::ToolUse,
            )
            .act(&[(&id, "say", &[word], false)])
            .observe(&[(&id, "say", word, false)]);
    }
    let events = script
        .model(&[Block::Text("Done.")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed);
    let frames = encode(&events);
    let seen = check(&frames, &[]);
    let ids: Vec<&str> = seen.texts.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["r1-0-0", "r1-1-0", "r1-2-0", "r1-3-0"]);
    let contents: Vec<String> = seen.texts.iter().map(|(_, t)| t.clone()).collect();
    assert_eq!(contents, texts(&events));
    assert_eq!(seen.outputs.len(), 3);
    assert_eq!(of_type(&parts(&frames), "start-step").len(), 4);
}

#[test]
fn a_recorded_run_keeps_every_rule() {
    let events = real_weather_run();
    let frames = encode(&events);
    let seen = check(&frames, &[]);
    let contents: Vec<String> = seen.texts.iter().map(|(_, t)| t.clone()).collect();
    assert_eq!(contents, texts(&events));
    assert_eq!(seen.reasoning, ["The user wants the weather."]);
    assert_eq!(seen.input_text["call_0_0"], r#"{"text":"Paris: sunny"}"#);
    assert_eq!(seen.outputs["call_0_1"], "2026-11-22T00:09:02Z");
    assert_eq!(
        frames[0].data,
        r#"{"type":"start","messageId":"d1d1f092-f35a-47b4-8010-888be12201dc"}"#
    );
}

#[test]
fn a_stream_cut_inside_a_run_is_closed_by_finish() {
    let mut events = Script::new("s1", "r1", 0).user("hi").events;
    events.push(AgentEvent::MessageStart { role: weft_core::Role::Assistant });
    events.push(AgentEvent::TextStart { index: 0 });
    events.push(AgentEvent::TextDelta { index: 0, delta: "Hal".into() });
    let mut encoder = VercelEncoder::new();
    let mut frames = encode_with(&mut encoder, &events);
    encoder.finish(&mut frames);
    check(&frames, &[]);
    assert_eq!(
        lines(&frames)[frames.len() - 5..],
        [
            r#"{"type":"text-end","id":"r1-m0-0"}"#,
            r#"{"type":"finish-step"}"#,
            r#"{"type":"error","errorText":"the event stream ended before the run finished"}"#,
            r#"{"type":"finish","finishReason":"error"}"#,
            "[DONE]",
        ]
    );

    // Taken up mid-run, without `session_start`: still one well-formed message.
    let frames = encode(&[
        AgentEvent::TextDelta { index: 0, delta: "lo".into() },
        AgentEvent::TextEnd { index: 0, text: "Hallo".into() },
    ]);
    check(&frames, &[]);
    assert_eq!(frames[0].data, r#"{"type":"start"}"#);
}

/// A run whose process died, then its recovery, in one stream (a watcher on another replica):
/// one message, the dead run's open parts closed, no error or finish between the two runs.
#[test]
fn a_recovered_run_continues_the_dead_runs_message() {
    let mut events = Script::new("s1", "r1", 0).user("hi").events;
    events.push(AgentEvent::MessageStart { role: weft_core::Role::Assistant });
    events.push(AgentEvent::TextStart { index: 0 });
    events.push(AgentEvent::TextDelta { index: 0, delta: "Hal".into() });
    events.extend(
        Script::new("s1", "r2", 0)
            .model(&[Block::Text("Hallo!")], StopReason::Stop)
            .step_end()
            .end(SessionStatus::Completed),
    );
    let frames = encode(&events);
    check(&frames, &[]);
    let parts = parts(&frames);
    let kinds: Vec<&str> = parts.iter().map(|p| p["type"].as_str().unwrap_or("")).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "start").count(), 1, "{kinds:?}");
    assert_eq!(kinds.iter().filter(|k| **k == "finish").count(), 1, "{kinds:?}");
    assert!(!kinds.contains(&"error"), "{kinds:?}");
    assert_eq!(parts[0], json!({"type": "start", "messageId": "r1"}));
    let dead_end = kinds.iter().position(|k| *k == "text-end").unwrap();
    assert_eq!(kinds[dead_end + 1], "finish-step", "the dead run's step is closed: {kinds:?}");
    assert_eq!(kinds[dead_end + 2], "start-step", "the recovery's step follows: {kinds:?}");
    let text: String = parts
        .iter()
        .filter(|p| p["type"] == "text-delta")
        .map(|p| p["delta"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(text, "HalHallo!");
}

/// A recovery streamed on its own (a client resuming after the restart; the dead run's events
/// are not sent): its `start` names the dead run's message, so that a page holding the partial
/// answer has it replaced by the whole one instead of showing both.
#[test]
fn a_recovery_streamed_alone_replays_the_dead_runs_message() {
    let mut events: Vec<AgentEvent> = Script::new("s1", "r2", 0)
        .model(&[Block::Text("Hallo!")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed);
    let AgentEvent::SessionStart { recovers, .. } = &mut events[0] else {
        panic!("a script starts with session_start: {:?}", events[0]);
    };
    *recovers = Some(Box::new("r1".into()));
    let frames = encode(&events);
    check(&frames, &[]);
    assert_eq!(parts(&frames)[0], json!({"type": "start", "messageId": "r1"}));
    // An id the server sets explicitly still wins.
    let mut encoder = VercelEncoder::new().with_message_id("m-7");
    let frames = encode_with(&mut encoder, &events);
    assert_eq!(parts(&frames)[0], json!({"type": "start", "messageId": "m-7"}));
}

#[test]
fn state_and_progress_events_become_data_parts() {
    let events = Script::new("s1", "r1", 0)
        .user("plan")
        .event(AgentEvent::StateSnapshot { state: json!({"n": 1}) })
        .event(AgentEvent::StateUpdate { name: "plan".into(), state: json!({"n": 2}) })
        .event(AgentEvent::Progress(ModeProgress::TotEvaluate {
            chosen: 1,
            scores: vec![0.5, 0.75],
            rule_based: false,
        }))
        .event(AgentEvent::Checkpoint(Box::new(weft_core::CheckpointTaken {
            checkpoint_id: "k1".into(),
            thread_id: "s1".into(),
            checkpoint_ns: "".into(),
            step: 0,
            timestamp: 5,
            state: json!({}),
        })))
        .event(AgentEvent::Custom { value: json!({"kind": "ping"}) })
        .end(SessionStatus::Completed);
    let frames = encode(&events);
    check(&frames, &[]);
    let p = parts(&frames);
    assert_eq!(
        p[1..6],
        [
            json!({"type": "data-state", "id": "state", "data": {"n": 1}, "transient": true}),
            json!({"type": "data-updates", "data": {"name": "plan", "state": {"n": 2}}, "transient": true}),
            json!({"type": "data-tot_evaluate", "data": {"chosen": 1, "scores": [0.5, 0.75]}, "transient": true}),
            json!({"type": "data-checkpoint", "transient": true, "data": {
                "checkpointId": "k1", "threadId": "s1", "checkpointNs": "", "step": 0,
                "timestamp": 5, "state": {}}}),
            json!({"type": "data-custom", "data": {"kind": "ping"}, "transient": true}),
        ]
    );
}

#[test]
fn done_is_sent_once() {
    let mut encoder = VercelEncoder::new();
    let mut out =
        encode_with(&mut encoder, &Script::new("s1", "r1", 0).end(SessionStatus::Completed));
    encoder.finish(&mut out);
    assert_eq!(
        lines(&out),
        [r#"{"type":"start"}"#, r#"{"type":"finish","finishReason":"stop"}"#, "[DONE]"]
    );
}

/// A resumed run (no user message) with these tool results, then a text answer.
fn resumed_with(results: &[(&str, &str, &str, bool)]) -> Vec<AgentEvent> {
    Script::new("s1", "r2", 1)
        .observe(results)
        .model(&[Block::Text("Done.")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed)
}

#[test]
fn results_the_client_answered_are_not_echoed() {
    let events = resumed_with(&[
        ("c1", "read_page", "Weft 0.1", false),
        ("c2", "read_page", "no page", true),
        ("c3", "clock", "noon", false),
    ]);
    let mut encoder = VercelEncoder::new().client_answered(["c1", "c2"]);
    let frames = encode_with(&mut encoder, &events);
    let seen = check(&frames, &["c1", "c2", "c3"]);
    assert_eq!(seen.outputs, BTreeMap::from([("c3".to_string(), json!("noon"))]));
    assert_eq!(
        lines(&frames)[..2],
        [
            r#"{"type":"start"}"#,
            r#"{"type":"tool-output-available","toolCallId":"c3","output":"noon"}"#
        ]
    );
    // Without the option every result is sent.
    assert_eq!(check(&encode(&events), &["c1", "c2", "c3"]).outputs.len(), 3);
}

#[test]
fn a_call_the_client_denied_ends_as_output_denied() {
    let events = resumed_with(&[
        ("c1", "send_email", "Tool call denied by the user: no", true),
        ("c2", "send_email", "sent", false),
        ("c3", "send_email", "Tool call denied by the user", true),
    ]);
    let mut encoder =
        VercelEncoder::new().client_denied(["c1", "c2", "c3"]).client_answered(["c3"]);
    let frames = encode_with(&mut encoder, &events);
    check(&frames, &["c1", "c2", "c3"]);
    assert_eq!(
        lines(&frames)[..3],
        [
            r#"{"type":"start"}"#,
            r#"{"type":"tool-output-denied","toolCallId":"c1"}"#,
            // Only an error result is a denial; a result the client answered is never sent.
            r#"{"type":"tool-output-available","toolCallId":"c2","output":"sent"}"#,
        ]
    );
    assert!(!lines(&frames).iter().any(|l| l.contains(r#""c3""#)));
    // Without the option a denial is the error result the model sees.
    let seen = check(&encode(&events), &["c1", "c2", "c3"]);
    assert_eq!(seen.outputs["c1"], json!({"error": "Tool call denied by the user: no"}));
}

#[test]
fn an_approved_client_call_is_handed_back_when_the_run_waits_for_it() {
    let events = Script::new("s1", "r2", 1)
        .awaiting(&[
            ("c1", "pick_color", json!({"palette": "warm"})),
            ("c2", "read_page", json!({"selector": "h1"})),
        ])
        .end(SessionStatus::AwaitingToolExecution);
    let mut encoder = VercelEncoder::new().client_approved(["c1"]);
    let frames = encode_with(&mut encoder, &events);
    check(&frames, &["c1", "c2"]);
    assert_eq!(
        lines(&frames),
        [
            r#"{"type":"start"}"#,
            r#"{"type":"tool-input-available","toolCallId":"c1","toolName":"pick_color","input":{"palette":"warm"}}"#,
            r#"{"type":"finish","finishReason":"tool-calls"}"#,
            "[DONE]",
        ]
    );
    // Without the option the waiting call's part already has its input.
    assert!(!lines(&encode(&events)).iter().any(|l| l.contains("tool-input-available")));
}

#[test]
fn a_call_waiting_for_approval_gets_no_input_available_when_inputs_are_held() {
    let events = Script::new("s1", "r1", 0)
        .user("Send it and look")
        .model(
            &[
                Block::Call("c1", "send_email", json!({"to": "a@b.c"})),
                Block::Call("c2", "read_page", json!({"selector": "h1"})),
            ],
            StopReason::ToolUse,
        )
        .approval(&[("c1", "send_email", json!({"to": "a@b.c"}))])
        .end(SessionStatus::AwaitingApproval);
    let mut encoder = VercelEncoder::new().hold_inputs_until_approval_known(true);
    let frames = encode_with(&mut encoder, &events);
    let seen = check(&frames, &[]);
    assert_eq!(seen.inputs.keys().collect::<Vec<_>>(), ["c2"], "c1 waits for approval");
    assert_eq!(
        lines(&frames)[frames.len() - 5..],
        [
            r#"{"type":"tool-input-available","toolCallId":"c2","toolName":"read_page","input":{"selector":"h1"}}"#,
            r#"{"type":"tool-approval-request","approvalId":"c1","toolCallId":"c1"}"#,
            r#"{"type":"finish-step"}"#,
            r#"{"type":"finish","finishReason":"tool-calls"}"#,
            "[DONE]",
        ]
    );
    // Not held, both inputs go out as the calls end.
    let seen = check(&encode(&events), &[]);
    assert_eq!(seen.inputs.keys().collect::<Vec<_>>(), ["c1", "c2"]);
}

#[test]
fn held_inputs_go_out_once_the_run_shows_no_approval_is_needed() {
    // A client-side call: the wait for its result releases its input, where it would have been.
    let suspended = Script::new("s1", "r1", 0)
        .user("Read the headline")
        .model(
            &[Block::Text("Reading."), Block::Call("c1", "read_page", json!({"selector": "h1"}))],
            StopReason::ToolUse,
        )
        .awaiting(&[("c1", "read_page", json!({"selector": "h1"}))])
        .end(SessionStatus::AwaitingToolExecution);
    let mut encoder = VercelEncoder::new().hold_inputs_until_approval_known(true);
    assert_eq!(encode_with(&mut encoder, &suspended), encode(&suspended));

    // A server-side call: released before its execution's output.
    let local = Script::new("s1", "r1", 0)
        .user("What time is it?")
        .model(&[Block::Call("c1", "clock", json!({}))], StopReason::ToolUse)
        .act(&[("c1", "clock", &["noon"], false)])
        .observe(&[("c1", "clock", "noon", false)])
        .model(&[Block::Text("Noon.")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed);
    let mut encoder = VercelEncoder::new().hold_inputs_until_approval_known(true);
    let frames = encode_with(&mut encoder, &local);
    check(&frames, &[]);
    let kinds: Vec<String> =
        parts(&frames).iter().map(|p| p["type"].as_str().unwrap().to_string()).collect();
    let at = |kind: &str| kinds.iter().position(|k| k == kind).unwrap();
    assert!(at("tool-input-available") < at("data-tool-output"), "{kinds:?}");

    // A stream cut after the call: `finish` sends the held input before closing the message.
    let end = suspended.iter().position(|e| matches!(e, AgentEvent::ToolcallEnd { .. })).unwrap();
    let mut encoder = VercelEncoder::new().hold_inputs_until_approval_known(true);
    let frames = encode_with(&mut encoder, &suspended[..=end]);
    check(&frames, &[]);
    assert_eq!(
        lines(&frames)[frames.len() - 5..],
        [
            r#"{"type":"tool-input-available","toolCallId":"c1","toolName":"read_page","input":{"selector":"h1"}}"#,
            r#"{"type":"finish-step"}"#,
            r#"{"type":"error","errorText":"the event stream ended before the run finished"}"#,
            r#"{"type":"finish","finishReason":"error"}"#,
            "[DONE]",
        ]
    );
}

#[test]
fn a_refusal_is_one_error_part_and_an_empty_stream_is_done_alone() {
    assert_eq!(
        lines(&super::refusal("chat \"c\" is new")),
        [r#"{"type":"error","errorText":"chat \"c\" is new"}"#, "[DONE]"]
    );
    assert_eq!(lines(&super::empty_stream()), ["[DONE]"]);
}
