//! The AG-UI encoder's frames for each kind of run, checked against the protocol's sequencing
//! rules ([`check`], shared with `client_tests`).

#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, HashSet};

use serde_json::{Value, json};
use weft_core::{AgentEvent, ModeProgress, SessionStatus, StopReason};

use super::AgUiEncoder;
use super::fixtures::{Block, Script, lines, of_type, real_weather_run, texts, weather};
use crate::{Encoder, Frame};

pub(super) fn encode_with(encoder: &mut AgUiEncoder, events: &[AgentEvent]) -> Vec<Frame> {
    let mut out = Vec::new();
    for event in events {
        encoder.encode(event, &mut out);
    }
    out
}

/// A whole stream through a fresh encoder, `finish` included.
pub(super) fn encode(events: &[AgentEvent]) -> Vec<Frame> {
    let mut encoder = AgUiEncoder::new();
    let mut out = encode_with(&mut encoder, events);
    encoder.finish(&mut out);
    out
}

pub(super) fn values(frames: &[Frame]) -> Vec<Value> {
    frames.iter().map(|f| serde_json::from_str(&f.data).unwrap()).collect()
}

/// What an AG-UI stream says, after checking the protocol's sequencing rules.
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// Text messages: (id, concatenated content), in start order.
    texts: Vec<(String, String)>,
    /// Reasoning messages' content, in start order.
    reasoning: Vec<String>,
    /// Tool call arguments by call id.
    args: BTreeMap<String, String>,
    /// Step names in start order.
    steps: Vec<String>,
    /// Runs closed: the terminal frames.
    ends: Vec<Value>,
}

/// Checks the AG-UI rules this encoder promises: a run opens with RUN_STARTED and closes with
/// RUN_FINISHED or RUN_ERROR and nothing else is sent outside a run; every START has its END
/// with the same id and its CONTENT / ARGS in between; ids are not reused; steps balance;
/// nothing is open when a run closes; the stream ends with a closed run.
pub(super) fn check(frames: &[Frame]) -> Seen {
    let mut checker = Checker::default();
    for (i, frame) in frames.iter().enumerate() {
        assert!(frame.is_json(), "frame {i} is not JSON: {}", frame.data);
        let v: Value = serde_json::from_str(&frame.data).unwrap();
        checker.frame(i, &v);
    }
    assert!(!checker.run_open, "the stream ended inside a run");
    checker.seen
}

/// What [`check`] keeps while it reads a stream.
#[derive(Default)]
struct Checker {
    seen: Seen,
    run_open: bool,
    open_texts: HashSet<String>,
    open_reasoning: HashSet<String>,
    open_spans: HashSet<String>,
    open_calls: HashSet<String>,
    open_steps: Vec<String>,
    ids: HashSet<String>,
    reasoning_index: BTreeMap<String, usize>,
}

impl Checker {
    fn frame(&mut self, i: usize, v: &Value) {
        let kind = v["type"].as_str().unwrap();
        if !self.run_open {
            assert!(
                kind == "RUN_STARTED" || kind == "RUN_ERROR",
                "frame {i} ({kind}) is outside a run"
            );
        }
        if kind.starts_with("TEXT_") || kind.starts_with("REASONING_") {
            return self.content(kind, v);
        }
        if kind.starts_with("TOOL_") {
            return self.tool(kind, v);
        }
        let id = |field: &str| v[field].as_str().unwrap().to_string();
        match kind {
            "RUN_STARTED" => {
                assert!(!self.run_open, "nested RUN_STARTED at {i}");
                assert!(v["threadId"].is_string() && v["runId"].is_string());
                self.run_open = true;
            }
            "RUN_FINISHED" | "RUN_ERROR" => {
                assert!(self.open_texts.is_empty(), "text open at {kind}: {:?}", self.open_texts);
                assert!(self.open_reasoning.is_empty() && self.open_spans.is_empty());
                assert!(
                    self.open_calls.is_empty(),
                    "tool calls open at {kind}: {:?}",
                    self.open_calls
                );
                assert!(self.open_steps.is_empty(), "steps open at {kind}: {:?}", self.open_steps);
                if kind == "RUN_ERROR" {
                    assert!(v["message"].is_string());
                }
                self.run_open = false;
                self.seen.ends.push(v.clone());
            }
            "STEP_STARTED" => {
                let name = id("stepName");
                assert!(!self.open_steps.contains(&name), "step {name} opened twice");
                self.open_steps.push(name.clone());
                self.seen.steps.push(name);
            }
            "STEP_FINISHED" => {
                let name = id("stepName");
                let at = self.open_steps.iter().position(|s| *s == name).expect("step not open");
                self.open_steps.remove(at);
            }
            "STATE_SNAPSHOT" => assert!(v.get("snapshot").is_some()),
            "MESSAGES_SNAPSHOT" => assert!(v["messages"].is_array()),
            "STATE_DELTA" => assert!(v["delta"].as_array().is_some_and(|d| !d.is_empty())),
            "CUSTOM" => assert!(v["name"].is_string() && v.get("value").is_some()),
            other => panic!("unexpected event type {other}"),
        }
    }

    /// Text and reasoning messages.
    fn content(&mut self, kind: &str, v: &Value) {
        let id = |field: &str| v[field].as_str().unwrap().to_string();
        match kind {
            "TEXT_MESSAGE_START" => {
                let id = id("messageId");
                assert_eq!(v["role"], "assistant");
                assert!(self.ids.insert(id.clone()), "message id {id} reused");
                self.open_texts.insert(id.clone());
                self.seen.texts.push((id, String::new()));
            }
            "TEXT_MESSAGE_CONTENT" => {
                let id = id("messageId");
                assert!(self.open_texts.contains(&id), "content for closed message {id}");
                let delta = v["delta"].as_str().unwrap();
                assert!(!delta.is_empty(), "empty delta");
                let text = self.seen.texts.iter_mut().find(|(t, _)| *t == id).unwrap();
                text.1.push_str(delta);
            }
            "TEXT_MESSAGE_END" => assert!(self.open_texts.remove(&id("messageId"))),
            "REASONING_START" => {
                let id = id("messageId");
                assert!(self.ids.insert(id.clone()), "span id {id} reused");
                self.open_spans.insert(id);
            }
            "REASONING_END" => assert!(self.open_spans.remove(&id("messageId"))),
            "REASONING_MESSAGE_START" => {
                let id = id("messageId");
                assert_eq!(v["role"], "reasoning");
                assert!(!self.open_spans.is_empty(), "reasoning message outside a span");
                assert!(self.ids.insert(id.clone()), "message id {id} reused");
                self.reasoning_index.insert(id.clone(), self.seen.reasoning.len());
                self.seen.reasoning.push(String::new());
                self.open_reasoning.insert(id);
            }
            "REASONING_MESSAGE_CONTENT" => {
                let id = id("messageId");
                assert!(self.open_reasoning.contains(&id));
                self.seen.reasoning[self.reasoning_index[&id]]
                    .push_str(v["delta"].as_str().unwrap());
            }
            "REASONING_MESSAGE_END" => assert!(self.open_reasoning.remove(&id("messageId"))),
            "REASONING_ENCRYPTED_VALUE" => {
                assert!(self.reasoning_index.contains_key(&id("entityId")));
            }
            other => panic!("unexpected event type {other}"),
        }
    }

    /// Tool calls and their results.
    fn tool(&mut self, kind: &str, v: &Value) {
        let id = |field: &str| v[field].as_str().unwrap().to_string();
        match kind {
            "TOOL_CALL_START" => {
                let id = id("toolCallId");
                assert!(v["toolCallName"].is_string() && v["parentMessageId"].is_string());
                assert!(!self.seen.args.contains_key(&id), "tool call {id} started twice");
                self.open_calls.insert(id.clone());
                self.seen.args.insert(id, String::new());
            }
            "TOOL_CALL_ARGS" => {
                let id = id("toolCallId");
                assert!(self.open_calls.contains(&id), "args for closed call {id}");
                self.seen.args.get_mut(&id).unwrap().push_str(v["delta"].as_str().unwrap());
            }
            "TOOL_CALL_END" => {
                let id = id("toolCallId");
                assert!(self.open_calls.remove(&id), "end of a call not open: {id}");
                assert!(!self.seen.args[&id].is_empty(), "call {id} ended without ARGS");
            }
            "TOOL_CALL_RESULT" => {
                assert_eq!(v["role"], "tool");
                assert!(v["content"].is_string() && v["messageId"].is_string());
            }
            other => panic!("unexpected event type {other}"),
        }
    }
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
            r#"{"type":"RUN_STARTED","threadId":"s1","runId":"r1"}"#,
            r#"{"type":"STEP_STARTED","stepName":"think"}"#,
            r#"{"type":"TEXT_MESSAGE_START","messageId":"r1-0","role":"assistant"}"#,
            r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"r1-0","delta":"Hell"}"#,
            r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"r1-0","delta":"o"}"#,
            r#"{"type":"TEXT_MESSAGE_END","messageId":"r1-0"}"#,
            r#"{"type":"STEP_FINISHED","stepName":"think"}"#,
            concat!(
                r#"{"type":"RUN_FINISHED","threadId":"s1","runId":"r1","outcome":{"type":"success"},"#,
                r#""usage":[{"provider":"faux","model":"faux-1","inputTokens":12,"outputTokens":5,"#,
                r#""totalTokens":17,"cachedInputTokens":2,"cacheWriteInputTokens":0}]}"#
            ),
        ]
    );
    check(&frames);
}

#[test]
fn thinking_then_text_gives_exact_frames() {
    let events = Script::new("s1", "r1", 3)
        .model(&[Block::Think("Hmm.", Some("sig-1")), Block::Text("Hi")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed);
    let frames = encode(&events);
    assert_eq!(
        lines(&frames)[1..12],
        [
            r#"{"type":"STEP_STARTED","stepName":"think"}"#,
            r#"{"type":"REASONING_START","messageId":"r1-3-reasoning-0"}"#,
            r#"{"type":"REASONING_MESSAGE_START","messageId":"r1-3-0","role":"reasoning"}"#,
            r#"{"type":"REASONING_MESSAGE_CONTENT","messageId":"r1-3-0","delta":"Hmm."}"#,
            r#"{"type":"REASONING_MESSAGE_END","messageId":"r1-3-0"}"#,
            r#"{"type":"REASONING_ENCRYPTED_VALUE","subtype":"message","entityId":"r1-3-0","encryptedValue":"sig-1"}"#,
            r#"{"type":"REASONING_END","messageId":"r1-3-reasoning-0"}"#,
            r#"{"type":"TEXT_MESSAGE_START","messageId":"r1-3","role":"assistant"}"#,
            r#"{"type":"TEXT_MESSAGE_CONTENT","messageId":"r1-3","delta":"Hi"}"#,
            r#"{"type":"TEXT_MESSAGE_END","messageId":"r1-3"}"#,
            r#"{"type":"STEP_FINISHED","stepName":"think"}"#,
        ]
    );
    let seen = check(&frames);
    assert_eq!(seen.reasoning, ["Hmm."]);
}

#[test]
fn tool_calls_stream_their_arguments_output_and_results() {
    let events = weather("r1");
    let frames = encode(&events);
    let seen = check(&frames);
    let v = values(&frames);

    // Texts arrive whole, each in its own message.
    let contents: Vec<String> = seen.texts.iter().map(|(_, t)| t.clone()).collect();
    assert_eq!(contents, texts(&events));
    assert_eq!(seen.texts[0].0, "r1-0");
    assert_eq!(seen.texts[1].0, "r1-1");
    assert_eq!(seen.reasoning, ["Use the tools."]);

    // The calls hang off the text message before them; arguments are the model's JSON.
    let starts = of_type(&v, "TOOL_CALL_START");
    assert_eq!(starts.len(), 2);
    assert_eq!(
        *starts[0],
        json!({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "echo",
               "parentMessageId": "r1-0"})
    );
    assert_eq!(starts[1]["parentMessageId"], "r1-0");
    assert_eq!(seen.args["c1"], r#"{"text":"Paris"}"#);
    assert_eq!(seen.args["c2"], "{}");
    assert!(of_type(&v, "TOOL_CALL_ARGS").len() > 2, "arguments are streamed in pieces");

    // Local output streams as CUSTOM tool_output, then the results.
    let output: String = of_type(&v, "CUSTOM")
        .iter()
        .filter(|c| c["name"] == "tool_output" && c["value"]["toolCallId"] == "c1")
        .map(|c| c["value"]["delta"].as_str().unwrap())
        .collect();
    assert_eq!(output, "Paris");
    let results = of_type(&v, "TOOL_CALL_RESULT");
    assert_eq!(
        *results[0],
        json!({"type": "TOOL_CALL_RESULT", "messageId": "r1-result-c1", "toolCallId": "c1",
               "content": "Paris", "role": "tool"})
    );
    assert_eq!(results[1]["content"], "12:00");

    assert_eq!(seen.steps, ["think", "act", "observe", "think"]);
    assert_eq!(seen.ends.len(), 1);
    assert_eq!(seen.ends[0]["outcome"], json!({"type": "success"}));
    assert_eq!(seen.ends[0]["usage"][0]["inputTokens"], 24);
}

#[test]
fn a_call_before_any_text_is_parented_to_the_message_and_later_text_gets_its_own_id() {
    let events = Script::new("s1", "r1", 0)
        .model(
            &[Block::Call("c1", "echo", json!({"a": 1})), Block::Text("Done.")],
            StopReason::ToolUse,
        )
        .act(&[("c1", "echo", &["1"], false)])
        .observe(&[("c1", "echo", "1", false)])
        .model(&[Block::Text("Fine.")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed);
    let frames = encode(&events);
    let seen = check(&frames);
    let v = values(&frames);
    assert_eq!(of_type(&v, "TOOL_CALL_START")[0]["parentMessageId"], "r1-0");
    assert_eq!(seen.texts[0], ("r1-0-1".to_string(), "Done.".to_string()));
    assert_eq!(seen.texts[1], ("r1-1".to_string(), "Fine.".to_string()));
}

#[test]
fn a_remote_suspension_finishes_with_the_pending_calls_and_the_resume_does_not_echo_them() {
    let run1 = Script::new("s1", "r1", 0)
        .user("Read the headline")
        .model(
            &[Block::Text("Reading."), Block::Call("c1", "read_page", json!({"selector": "h1"}))],
            StopReason::ToolUse,
        )
        .awaiting(&[("c1", "read_page", json!({"selector": "h1"}))])
        .end(SessionStatus::AwaitingToolExecution);
    let run2 = Script::new("s1", "r2", 1)
        .observe(&[("c1", "read_page", "Weft 0.1", false)])
        .model(&[Block::Text("The headline is Weft 0.1.")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed);

    // One encoder for both runs (a session stream).
    let mut encoder = AgUiEncoder::new();
    let first = encode_with(&mut encoder, &run1);
    let v1 = values(&first);
    assert_eq!(of_type(&v1, "TOOL_CALL_END").len(), 1);
    assert!(of_type(&v1, "TOOL_CALL_RESULT").is_empty(), "the client runs the call");
    let last = v1.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED");
    assert_eq!(last["outcome"], json!({"type": "success", "pendingToolCallIds": ["c1"]}));
    let mut all = first.clone();
    let second = encode_with(&mut encoder, &run2);
    let v2 = values(&second);
    assert_eq!(v2[0], json!({"type": "RUN_STARTED", "threadId": "s1", "runId": "r2"}));
    assert!(of_type(&v2, "TOOL_CALL_RESULT").is_empty(), "the client's own result is not echoed");
    assert_eq!(v2.last().unwrap()["outcome"], json!({"type": "success"}));
    all.extend(second);
    encoder.finish(&mut all);
    let seen = check(&all);
    assert_eq!(seen.ends.len(), 2);
    assert_eq!(seen.steps, ["think", "observe", "think"]);

    // One encoder per request, as the server runs it: told which calls the client answered.
    let told = encode_with(&mut AgUiEncoder::new().client_answered(["c1"]), &run2);
    assert!(of_type(&values(&told), "TOOL_CALL_RESULT").is_empty());
    let untold = encode(&run2);
    let results = of_type(&values(&untold), "TOOL_CALL_RESULT").len();
    assert_eq!(results, 1, "without being told, the result is sent");
    check(&untold);
}

#[test]
fn an_approval_request_finishes_with_an_interrupt_and_a_denial_is_a_result() {
    let run1 = Script::new("s1", "r1", 0)
        .user("Send it")
        .model(&[Block::Call("c1", "send_email", json!({"to": "a@b.c"}))], StopReason::ToolUse)
        .approval(&[("c1", "send_email", json!({"to": "a@b.c"}))])
        .end(SessionStatus::AwaitingApproval);
    let frames = encode(&run1);
    check(&frames);
    let v = values(&frames);
    let last = v.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED");
    assert_eq!(
        last["outcome"],
        json!({"type": "interrupt", "interrupts": [{
            "id": "c1",
            "reason": "tool_call",
            "message": "Approve the call to send_email?",
            "toolCallId": "c1",
            "responseSchema": {
                "type": "object",
                "properties": {
                    "approved": {"type": "boolean"},
                    "reason": {"type": "string", "description": "Why, shown to the model on a denial"}
                },
                "required": ["approved"]
            },
            "metadata": {"toolName": "send_email", "arguments": {"to": "a@b.c"}}
        }]})
    );
    assert!(of_type(&v, "TOOL_CALL_RESULT").is_empty());

    // Resumed with a denial: the denial is the server's answer, sent as the call's result.
    let run2 = Script::new("s1", "r2", 1)
        .observe(&[("c1", "send_email", "Tool call denied by the user: no", true)])
        .model(&[Block::Text("Understood.")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed);
    let frames = encode(&run2);
    check(&frames);
    let v = values(&frames);
    assert_eq!(of_type(&v, "TOOL_CALL_RESULT")[0]["content"], "Tool call denied by the user: no");
}

#[test]
fn a_provider_error_closes_what_is_open_then_ends_with_run_error_only() {
    let events = Script::new("s1", "r1", 0)
        .user("hi")
        .model(&[Block::Text("Partial answ")], StopReason::Error)
        .end(SessionStatus::Error);
    let frames = encode(&events);
    let seen = check(&frames);
    assert_eq!(seen.texts[0].1, "Partial answ", "the partial text is kept");
    let v = values(&frames);
    let kinds: Vec<&str> = v.iter().map(|f| f["type"].as_str().unwrap()).collect();
    assert_eq!(kinds[kinds.len() - 3..], ["TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_ERROR"]);
    let last = v.last().unwrap();
    assert_eq!(last["message"], "upstream 500");
    assert_eq!(last["code"], "error");
    assert!(of_type(&v, "RUN_FINISHED").is_empty(), "RUN_ERROR is terminal");
}

#[test]
fn an_aborted_run_finishes_cancelled() {
    let events = Script::new("s1", "r1", 0)
        .user("hi")
        .model(&[Block::Text("Thinking about")], StopReason::Aborted)
        .end(SessionStatus::Aborted);
    let frames = encode(&events);
    check(&frames);
    let v = values(&frames);
    assert_eq!(v.last().unwrap()["outcome"], json!({"type": "cancelled"}));
    assert!(of_type(&v, "RUN_ERROR").is_empty(), "a stop the user asked for is no error");

    // Aborted while tools run: the calls are answered with errors, then the run stops.
    let events = Script::new("s1", "r1", 0)
        .model(&[Block::Call("c1", "slow", json!({}))], StopReason::ToolUse)
        .act(&[("c1", "slow", &["Tool call aborted: the run was aborted"], true)])
        .observe(&[("c1", "slow", "Tool call aborted: the run was aborted", true)])
        .end(SessionStatus::Aborted);
    let frames = encode(&events);
    check(&frames);
    let v = values(&frames);
    assert_eq!(
        of_type(&v, "TOOL_CALL_RESULT")[0]["content"],
        "Tool call aborted: the run was aborted"
    );
    assert_eq!(v.last().unwrap()["outcome"], json!({"type": "cancelled"}));

    // A run stopped by its turn limit is cancelled too (a limit the producer enforces).
    let events = Script::new("s1", "r1", 0)
        .model(&[Block::Call("c1", "echo", json!({}))], StopReason::ToolUse)
        .act(&[("c1", "echo", &["x"], false)])
        .observe(&[("c1", "echo", "x", false)])
        .end(SessionStatus::MaxTurns);
    let v = values(&encode(&events));
    assert_eq!(v.last().unwrap()["outcome"], json!({"type": "cancelled"}));
}

#[test]
fn a_multi_step_run_keeps_ids_distinct_and_texts_whole() {
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
    let seen = check(&frames);
    let ids: Vec<&str> = seen.texts.iter().map(|(id, _)| id.as_str()).collect();
    assert_eq!(ids, ["r1-0", "r1-1", "r1-2", "r1-3"]);
    let contents: Vec<String> = seen.texts.iter().map(|(_, t)| t.clone()).collect();
    assert_eq!(contents, texts(&events));
    assert_eq!(seen.args.len(), 3);
    assert_eq!(seen.steps.iter().filter(|s| *s == "think").count(), 4);
    assert_eq!(seen.ends[0]["usage"][0]["outputTokens"], 20);
}

#[test]
fn a_recorded_run_keeps_every_rule() {
    let events = real_weather_run();
    let frames = encode(&events);
    let seen = check(&frames);
    let contents: Vec<String> = seen.texts.iter().map(|(_, t)| t.clone()).collect();
    assert_eq!(contents, texts(&events));
    assert_eq!(seen.reasoning, ["The user wants the weather."]);
    assert_eq!(seen.args["call_0_0"], r#"{"text":"Paris: sunny"}"#);
    let v = values(&frames);
    assert_eq!(of_type(&v, "TOOL_CALL_RESULT").len(), 2);
    assert_eq!(of_type(&v, "CUSTOM").len(), 2);
    let usage = &seen.ends[0]["usage"][0];
    assert_eq!(
        (usage["inputTokens"].as_u64(), usage["outputTokens"].as_u64()),
        (Some(310), Some(79))
    );
    assert_eq!(v[0]["threadId"], "5f03c57a-2c77-4c2d-bfa8-5580ea0e3911");
}

#[test]
fn a_stream_cut_inside_a_run_is_closed_by_finish() {
    let events = Script::new("s1", "r1", 0).user("hi").events;
    let mut events = events;
    events.push(AgentEvent::NodeEnter { name: "think".into(), node_id: "think-0".into() });
    events.push(AgentEvent::MessageStart { role: weft_core::Role::Assistant });
    events.push(AgentEvent::TextStart { index: 0 });
    events.push(AgentEvent::TextDelta { index: 0, delta: "Hal".into() });
    let frames = encode(&events);
    check(&frames);
    let tail: Vec<&str> = lines(&frames)[frames.len() - 3..].to_vec();
    assert_eq!(
        tail,
        [
            r#"{"type":"TEXT_MESSAGE_END","messageId":"r1-m0"}"#,
            r#"{"type":"STEP_FINISHED","stepName":"think"}"#,
            r#"{"type":"RUN_ERROR","message":"the event stream ended before the run finished","code":"incomplete"}"#,
        ]
    );

    // After a complete run, finish adds nothing.
    let mut encoder = AgUiEncoder::new();
    let events = Script::new("s1", "r1", 0).end(SessionStatus::Completed);
    let mut out = encode_with(&mut encoder, &events);
    let n = out.len();
    encoder.finish(&mut out);
    assert_eq!(out.len(), n);
}

#[test]
fn events_outside_a_run_are_not_sent() {
    let mut encoder = AgUiEncoder::new();
    let out = encode_with(
        &mut encoder,
        &[
            AgentEvent::TextDelta { index: 0, delta: "x".into() },
            AgentEvent::StateSnapshot { state: json!({}) },
        ],
    );
    assert!(out.is_empty());
}

#[test]
fn blocks_taken_up_midway_are_sent_whole() {
    // An encoder that starts mid-message (a stream resumed from a cursor) still sends
    // well-formed messages: an `*_end` without its start carries the whole content.
    let events = Script::new("s1", "r1", 0)
        .event(AgentEvent::TextEnd { index: 0, text: "whole".into() })
        .event(AgentEvent::ToolcallEnd {
            index: 1,
            tool_call: weft_core::ToolCall {
                id: "c9".into(),
                name: "echo".into(),
                arguments: json!({"a": 1}).into(),
            },
        })
        .end(SessionStatus::Completed);
    let frames = encode(&events);
    let seen = check(&frames);
    assert_eq!(seen.texts, [("r1-m0".to_string(), "whole".to_string())]);
    assert_eq!(seen.args["c9"], r#"{"a":1}"#);
}

#[test]
fn a_nodes_changes_are_a_json_patch_with_escaped_keys() {
    let patch = super::state_patch("/weft/state", &json!({"a/b": 1, "c~d": [2], "e": null}));
    assert_eq!(
        patch,
        [
            json!({"op": "add", "path": "/weft/state/a~1b", "value": 1}),
            json!({"op": "add", "path": "/weft/state/c~0d", "value": [2]}),
            json!({"op": "add", "path": "/weft/state/e", "value": null}),
        ]
    );
    assert!(super::state_patch("", &json!([1])).is_empty());
    // Nothing changed: no event.
    let frames = encode(
        &Script::new("s1", "r1", 0)
            .event(AgentEvent::StateUpdate { name: "observe".into(), state: json!({}) })
            .end(SessionStatus::Completed),
    );
    assert!(!values(&frames).iter().any(|v| v["type"] == "STATE_DELTA"));
}

#[test]
fn state_and_progress_events_become_snapshots_and_custom_events() {
    let events = Script::new("s1", "r1", 0)
        .event(AgentEvent::StateSnapshot { state: json!({"n": 1}) })
        .event(AgentEvent::StateUpdate { name: "plan".into(), state: json!({"n": 2}) })
        .event(AgentEvent::Progress(ModeProgress::TotExpand {
            candidates: vec!["a".into(), "b".into()],
        }))
        .event(AgentEvent::Progress(ModeProgress::GotNodeFailed {
            id: "g1".into(),
            error: "boom".into(),
        }))
        .event(AgentEvent::Custom { value: json!({"kind": "ping"}) })
        .end(SessionStatus::Completed);
    let frames = encode(&events);
    check(&frames);
    let v = values(&frames);
    assert_eq!(
        v[1..6],
        [
            json!({"type": "STATE_SNAPSHOT", "snapshot": {"n": 1}}),
            json!({"type": "STATE_DELTA", "delta": [{"op": "add", "path": "/n", "value": 2}]}),
            json!({"type": "CUSTOM", "name": "tot_expand", "value": {"candidates": ["a", "b"]}}),
            json!({"type": "CUSTOM", "name": "got_node_failed", "value": {"id": "g1", "error": "boom"}}),
            json!({"type": "CUSTOM", "name": "custom", "value": {"kind": "ping"}}),
        ]
    );
}

#[test]
fn concurrent_nodes_of_one_name_get_distinct_step_names() {
    let events = Script::new("s1", "r1", 0)
        .event(AgentEvent::NodeEnter { name: "got_node".into(), node_id: "n1".into() })
        .event(AgentEvent::NodeEnter { name: "got_node".into(), node_id: "n2".into() })
        .event(AgentEvent::NodeExit { name: "got_node".into(), node_id: "n1".into(), error: None })
        .event(AgentEvent::NodeExit { name: "got_node".into(), node_id: "n2".into(), error: None })
        .end(SessionStatus::Completed);
    let frames = encode(&events);
    let seen = check(&frames);
    assert_eq!(seen.steps, ["got_node", "got_node:n2"]);
}
