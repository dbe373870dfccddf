#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use std::sync::Arc;
use weft_core::{
    AgentEvent, AgentStep, AssistantContent, AssistantMessage, Message, ModeProgress, Role,
    SessionStatus, StepAnnotations, StopReason, TextContent, ThinkingContent, ToolCall,
    ToolResultMessage, Usage, UserMessage,
};

use super::export::type_of_key;
use super::*;
use crate::transcript::Transcript;
use crate::{Encoder, Frame};

// ---------------------------------------------------------------------------------------------
// Canonical streams, in the order the agent emits them (weft-agent/src/run.rs).

/// A block of an assistant message, with the deltas it streams in.
enum Blk {
    Thinking(Vec<&'static str>),
    Text(Vec<&'static str>),
    /// A text block whose `text_end` says something else than its deltas.
    TextFinal(Vec<&'static str>, &'static str),
    Call(&'static str, &'static str, Vec<&'static str>, Value),
}

/// A local execution: the call, its output deltas, its output and whether it failed.
struct Exec(ToolCall, Vec<&'static str>, &'static str, bool);

struct Stream {
    session: String,
    events: Vec<AgentEvent>,
    /// The current run's messages.
    messages: Vec<Message>,
}

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), arguments: arguments.into() }
}

fn result(id: &str, name: &str, text: &str, is_error: bool) -> ToolResultMessage {
    let mut r = ToolResultMessage::new(id, name, text, is_error);
    r.timestamp = 7;
    r
}

impl Stream {
    fn new(session: &str) -> Self {
        Self { session: session.into(), events: Vec::new(), messages: Vec::new() }
    }

    fn push(&mut self, e: AgentEvent) {
        self.events.push(e);
    }

    fn start(&mut self, run_id: &str, user: Option<&str>) -> &mut Self {
        self.messages.clear();
        self.push(AgentEvent::SessionStart {
            session_id: self.session.clone(),
            run_id: run_id.into(),
            agent: "react".into(),
            recovers: None,
        });
        if let Some(text) = user {
            let mut m = UserMessage::text(text);
            m.timestamp = 1;
            let m = Message::User(m);
            self.messages.push(m.clone());
            self.push(AgentEvent::MessageStart { role: Role::User });
            self.push(AgentEvent::MessageEnd { message: Arc::new(m) });
        }
        self
    }

    /// A think node: one model call streaming `blocks`.
    fn think(
        &mut self,
        step: u32,
        blocks: Vec<Blk>,
        stop: StopReason,
        usage: Usage,
        error: Option<&str>,
    ) -> AssistantMessage {
        let node_id = format!("think-{step}");
        self.push(AgentEvent::NodeEnter { name: "think".into(), node_id: node_id.clone() });
        self.push(AgentEvent::StepStart { step_id: format!("step-{step}"), step_index: step });
        self.push(AgentEvent::MessageStart { role: Role::Assistant });
        let mut content = Vec::new();
        for (i, block) in blocks.into_iter().enumerate() {
            let index = i as u32;
            match block {
                Blk::Thinking(deltas) => {
                    self.push(AgentEvent::ThinkingStart { index });
                    for d in &deltas {
                        self.push(AgentEvent::ThinkingDelta { index, delta: d.to_string() });
                    }
                    let thinking = deltas.concat();
                    self.push(AgentEvent::ThinkingEnd {
                        index,
                        thinking: thinking.clone(),
                        signature: Some("sig".into()),
                    });
                    content.push(AssistantContent::Thinking(ThinkingContent {
                        thinking,
                        signature: Some("sig".into()),
                    }));
                }
                Blk::Text(deltas) => {
                    let text = deltas.concat();
                    self.text_block(index, &deltas, &text);
                    content.push(AssistantContent::Text(TextContent { text }));
                }
                Blk::TextFinal(deltas, text) => {
                    self.text_block(index, &deltas, text);
                    content.push(AssistantContent::Text(TextContent { text: text.into() }));
                }
                Blk::Call(id, name, deltas, arguments) => {
                    self.push(AgentEvent::ToolcallStart {
                        index,
                        id: id.into(),
                        name: name.into(),
                    });
                    for d in deltas {
                        self.push(AgentEvent::ToolcallDelta { index, delta: d.into() });
                    }
                    let c = call(id, name, arguments);
                    self.push(AgentEvent::ToolcallEnd { index, tool_call: c.clone() });
                    content.push(AssistantContent::ToolCall(c));
                }
            }
        }
        let message = AssistantMessage {
            content,
            stop_reason: stop,
            error_message: error.map(Box::from),
            usage,
            cost: None,
            provider: "faux".into(),
            model: "faux".into(),
            timestamp: 2,
        };
        self.messages.push(Message::Assistant(message.clone()));
        self.push(AgentEvent::MessageEnd {
            message: Arc::new(Message::Assistant(message.clone())),
        });
        if let Some(e) = error {
            self.push(AgentEvent::Error {
                error: e.into(),
                message: Some(Arc::new(Message::Assistant(message.clone()))),
            });
        }
        self.push(AgentEvent::NodeExit {
            name: "think".into(),
            node_id,
            error: error.map(str::to_string),
        });
        message
    }

    fn text_block(&mut self, index: u32, deltas: &[&str], text: &str) {
        self.push(AgentEvent::TextStart { index });
        for d in deltas {
            self.push(AgentEvent::TextDelta { index, delta: d.to_string() });
        }
        self.push(AgentEvent::TextEnd { index, text: text.into() });
    }

    /// An act node: every call starts (in the model's order), then they end in `execs`' order.
    fn act(&mut self, step: u32, execs: Vec<Exec>, model_order: &[&str]) {
        let node_id = format!("act-{step}");
        self.push(AgentEvent::NodeEnter { name: "act".into(), node_id: node_id.clone() });
        for id in model_order {
            let Exec(c, ..) = execs.iter().find(|e| e.0.id == *id).unwrap();
            self.push(AgentEvent::ToolExecutionStart {
                tool_call_id: c.id.clone(),
                tool_name: c.name.clone(),
                args: c.arguments.clone(),
            });
        }
        for Exec(c, deltas, output, is_error) in execs {
            for d in deltas {
                self.push(AgentEvent::ToolExecutionDelta {
                    tool_call_id: c.id.clone(),
                    delta: d.into(),
                });
            }
            self.push(AgentEvent::ToolExecutionEnd {
                tool_call_id: c.id.clone(),
                tool_name: c.name.clone(),
                output: output.into(),
                details: None,
                is_error,
            });
        }
        self.push(AgentEvent::NodeExit { name: "act".into(), node_id, error: None });
    }

    /// An observe node (the results the model receives, in its order), then the step's end.
    fn observe(&mut self, step: u32, results: Vec<ToolResultMessage>, message: AssistantMessage) {
        let node_id = format!("observe-{step}");
        self.push(AgentEvent::NodeEnter { name: "observe".into(), node_id: node_id.clone() });
        for r in results {
            let m = Message::ToolResult(r);
            self.messages.push(m.clone());
            self.push(AgentEvent::MessageStart { role: Role::ToolResult });
            self.push(AgentEvent::MessageEnd { message: Arc::new(m) });
        }
        self.push(AgentEvent::NodeExit { name: "observe".into(), node_id, error: None });
        self.step_end(step, message);
    }

    fn step_end(&mut self, step: u32, message: AssistantMessage) {
        self.push(AgentEvent::StepEnd {
            step: Arc::new(AgentStep {
                step_id: format!("step-{step}"),
                step_index: step,
                timestamp: 2,
                llm_response: message,
                latency_ms: 1,
                tool_results: Vec::new(),
                annotations: StepAnnotations::default(),
            }),
        });
    }

    fn awaiting(&mut self, calls: Vec<ToolCall>) {
        let session_id = self.session.clone();
        self.push(AgentEvent::AwaitingToolExecution { session_id, tool_calls: calls });
    }

    fn approval(&mut self, calls: Vec<ToolCall>) {
        let session_id = self.session.clone();
        self.push(AgentEvent::ApprovalRequired { session_id, tool_calls: calls });
    }

    fn end(&mut self, status: SessionStatus) {
        let mut usage = Usage::default();
        for m in &self.messages {
            if let Message::Assistant(a) = m {
                usage += a.usage;
            }
        }
        let messages = std::mem::take(&mut self.messages);
        self.push(AgentEvent::SessionEnd {
            session_id: self.session.clone(),
            status,
            messages: messages.into_iter().map(Arc::new).collect(),
            usage: Box::new(usage),
            cost: Box::default(),
        });
    }
}

fn usage(input: u64, output: u64) -> Usage {
    Usage::new(input, output, 0, 0)
}

/// One step that thinks and answers.
fn text_and_thinking() -> Vec<AgentEvent> {
    let mut s = Stream::new("s1");
    s.start("r1", Some("hi"));
    let m = s.think(
        0,
        vec![Blk::Thinking(vec!["Hm"]), Blk::Text(vec!["Hel", "lo"])],
        StopReason::Stop,
        Usage::new(10, 5, 1, 1),
        None,
    );
    s.step_end(0, m);
    s.end(SessionStatus::Completed);
    s.events
}

/// Tool calls with streamed arguments, local executions ending out of the model's order with
/// streamed output, an unknown tool answered without running, then the answer.
fn tool_round() -> Vec<AgentEvent> {
    let mut s = Stream::new("s2");
    s.start("r1", Some("weather in Paris?"));
    let m = s.think(
        0,
        vec![
            Blk::Thinking(vec!["Use ", "echo."]),
            Blk::Text(vec!["Checking."]),
            Blk::Call("c1", "echo", vec!["{\"te", "xt\":\"sunny\"}"], json!({"text": "sunny"})),
            Blk::Call("c2", "clock", vec!["{}"], json!({})),
            Blk::Call("c3", "nope", vec!["{}"], json!({})),
        ],
        StopReason::ToolUse,
        usage(120, 48),
        None,
    );
    s.act(
        0,
        vec![
            Exec(call("c2", "clock", json!({})), vec![], "12:00", false),
            Exec(call("c1", "echo", json!({"text": "sunny"})), vec!["sun", "ny"], "sunny", false),
        ],
        &["c1", "c2"],
    );
    s.observe(
        0,
        vec![
            result("c1", "echo", "sunny", false),
            result("c2", "clock", "12:00", false),
            result("c3", "nope", "Tool nope not found", true),
        ],
        m,
    );
    let m = s.think(
        1,
        vec![Blk::Text(vec!["It is ", "sunny."])],
        StopReason::Stop,
        usage(190, 31),
        None,
    );
    s.step_end(1, m);
    s.end(SessionStatus::Completed);
    s.events
}

/// A remote call suspends the run (a local call of the same turn runs first); a second run
/// resumes with the remote result.
fn remote() -> (Vec<AgentEvent>, Vec<AgentEvent>) {
    let mut s = Stream::new("s3");
    s.start("r1", Some("open the page"));
    let browse = call("b1", "browser", json!({"url": "https://example.org"}));
    let m = s.think(
        0,
        vec![
            Blk::Text(vec!["Opening."]),
            Blk::Call(
                "b1",
                "browser",
                vec!["{\"url\":", "\"https://example.org\"}"],
                (*browse.arguments).clone(),
            ),
            Blk::Call("c1", "echo", vec!["{\"text\":\"x\"}"], json!({"text": "x"})),
        ],
        StopReason::ToolUse,
        usage(50, 20),
        None,
    );
    s.act(0, vec![Exec(call("c1", "echo", json!({"text": "x"})), vec!["x"], "x", false)], &["c1"]);
    s.awaiting(vec![browse]);
    s.end(SessionStatus::AwaitingToolExecution);
    let first = std::mem::take(&mut s.events);
    s.start("r2", None);
    s.observe(
        0,
        vec![result("b1", "browser", "<html>ok</html>", false), result("c1", "echo", "x", false)],
        m,
    );
    let m = s.think(
        1,
        vec![Blk::Text(vec!["The page says ok."])],
        StopReason::Stop,
        usage(80, 9),
        None,
    );
    s.step_end(1, m);
    s.end(SessionStatus::Completed);
    (first, s.events)
}

/// Two calls wait for approval; a second run approves one (it runs) and denies the other.
fn approval() -> (Vec<AgentEvent>, Vec<AgentEvent>) {
    let mut s = Stream::new("s4");
    s.start("r1", Some("clean up"));
    let d1 = call("d1", "delete", json!({"path": "a"}));
    let d2 = call("d2", "delete", json!({"path": "b"}));
    let m = s.think(
        0,
        vec![
            Blk::Call("d1", "delete", vec!["{\"path\":\"a\"}"], (*d1.arguments).clone()),
            Blk::Call("d2", "delete", vec!["{\"path\":\"b\"}"], (*d2.arguments).clone()),
        ],
        StopReason::ToolUse,
        usage(30, 12),
        None,
    );
    s.approval(vec![d1.clone(), d2]);
    s.end(SessionStatus::AwaitingApproval);
    let first = std::mem::take(&mut s.events);
    s.start("r2", None);
    s.act(0, vec![Exec(d1, vec![], "deleted a", false)], &["d1"]);
    s.observe(
        0,
        vec![
            result("d1", "delete", "deleted a", false),
            result("d2", "delete", "Tool call denied by the user: no", true),
        ],
        m,
    );
    let m =
        s.think(1, vec![Blk::Text(vec!["Deleted a only."])], StopReason::Stop, usage(40, 6), None);
    s.step_end(1, m);
    s.end(SessionStatus::Completed);
    (first, s.events)
}

/// The provider fails mid-answer: the partial text is kept, the think node fails.
fn provider_error() -> Vec<AgentEvent> {
    let mut s = Stream::new("s5");
    s.start("r1", Some("tell me"));
    let m = s.think(
        0,
        vec![Blk::Text(vec!["Par"])],
        StopReason::Error,
        usage(9, 1),
        Some("500 from provider"),
    );
    s.step_end(0, m);
    s.end(SessionStatus::Error);
    s.events
}

/// Two tool rounds, an empty text block, a text block whose end differs from its deltas, a
/// failing tool, and an answer spread over two text blocks.
fn multi_step() -> Vec<AgentEvent> {
    let mut s = Stream::new("s6");
    s.start("r1", Some("twice"));
    let m = s.think(
        0,
        vec![Blk::Text(vec![]), Blk::Call("a", "echo", vec!["{\"text\":1}"], json!({"text": 1}))],
        StopReason::ToolUse,
        usage(10, 2),
        None,
    );
    s.act(0, vec![Exec(call("a", "echo", json!({"text": 1})), vec![], "bad type", true)], &["a"]);
    s.observe(0, vec![result("a", "echo", "bad type", true)], m);
    let m = s.think(
        1,
        vec![
            Blk::TextFinal(vec!["Retr"], "Retrying"),
            Blk::Call("b", "echo", vec!["{\"text\":", "\"1\"}"], json!({"text": "1"})),
        ],
        StopReason::ToolUse,
        usage(20, 4),
        None,
    );
    s.act(1, vec![Exec(call("b", "echo", json!({"text": "1"})), vec!["1"], "1", false)], &["b"]);
    s.observe(1, vec![result("b", "echo", "1", false)], m);
    let m = s.think(
        2,
        vec![Blk::Text(vec!["Got ", "1"]), Blk::TextFinal(vec!["x"], "yz")],
        StopReason::Stop,
        usage(30, 3),
        None,
    );
    s.step_end(2, m);
    s.end(SessionStatus::Completed);
    s.events
}

/// State, checkpoint, ToT, GoT and custom events inside nodes.
fn graph_events() -> Vec<AgentEvent> {
    let mut s = Stream::new("s7");
    s.start("r1", Some("plan"));
    s.push(AgentEvent::NodeEnter { name: "plan_graph".into(), node_id: "plan-0".into() });
    s.push(AgentEvent::StateSnapshot { state: json!({"n": 1}) });
    s.push(AgentEvent::Progress(ModeProgress::GotPlan {
        node_count: 2,
        edge_count: 1,
        node_ids: vec!["g1".into(), "g2".into()],
    }));
    s.push(AgentEvent::Progress(ModeProgress::GotNodeStart { id: "g1".into() }));
    s.push(AgentEvent::Progress(ModeProgress::GotNodeComplete {
        id: "g1".into(),
        result_summary: "done".into(),
    }));
    s.push(AgentEvent::Progress(ModeProgress::GotNodeFailed {
        id: "g2".into(),
        error: "no".into(),
    }));
    s.push(AgentEvent::Progress(ModeProgress::GotExpand {
        node_id: "g2".into(),
        nodes_added: 3,
        edges_added: 2,
    }));
    s.push(AgentEvent::Progress(ModeProgress::TotExpand {
        candidates: vec!["a".into(), "b".into()],
    }));
    s.push(AgentEvent::Progress(ModeProgress::TotEvaluate {
        chosen: 1,
        scores: vec![0.25, 0.75],
        rule_based: false,
    }));
    s.push(AgentEvent::Progress(ModeProgress::TotBacktrack {
        reason: "dead end".into(),
        to_depth: 0,
    }));
    s.push(AgentEvent::StateUpdate { name: "plan_graph".into(), state: json!({"n": 2}) });
    s.push(AgentEvent::Checkpoint(Box::new(weft_core::CheckpointTaken {
        checkpoint_id: "ck1".into(),
        thread_id: "s7".into(),
        checkpoint_ns: "".into(),
        step: 0,
        timestamp: 99,
        state: json!({"n": 2}),
    })));
    s.push(AgentEvent::Custom { value: json!({"anything": [1, 2]}) });
    s.push(AgentEvent::NodeExit {
        name: "plan_graph".into(),
        node_id: "plan-0".into(),
        error: None,
    });
    let m = s.think(1, vec![Blk::Text(vec!["ok"])], StopReason::Stop, usage(1, 1), None);
    s.step_end(1, m);
    s.end(SessionStatus::Completed);
    s.events
}

fn encode_with(mut encoder: LoomEncoder, events: &[AgentEvent]) -> Vec<Frame> {
    let mut out = Vec::new();
    for (seq, e) in events.iter().enumerate() {
        crate::encode(&mut encoder, seq as u64 + 1, e, &mut out);
    }
    encoder.finish(&mut out);
    out
}

fn both_forms(events: &[AgentEvent]) -> [Vec<Frame>; 2] {
    [encode_with(LoomEncoder::new(), events), encode_with(LoomEncoder::export(), events)]
}

fn lines(frames: &[Frame]) -> Vec<&str> {
    frames.iter().map(|f| f.data.as_str()).collect()
}

/// A frame as (type, payload + envelope), whichever form it is in.
fn normalize(frame: &Frame) -> (String, serde_json::Map<String, Value>) {
    let Value::Object(mut map) = serde_json::from_str(&frame.data).unwrap() else {
        panic!("not an object: {}", frame.data)
    };
    if let Some(Value::String(t)) = map.remove("type") {
        return (t, map);
    }
    if map.contains_key("reply") {
        return ("reply".into(), map);
    }
    assert_eq!(map.len(), 1, "{}", frame.data);
    let (key, inner) = map.into_iter().next().unwrap();
    let Value::Object(inner) = inner else { panic!("{}", frame.data) };
    (type_of_key(&key).unwrap_or_else(|| panic!("unknown key {key}")).to_string(), inner)
}

/// The protocol's invariants on one encoded stream.
fn check_invariants(events: &[AgentEvent], frames: &[Frame]) {
    let runs = events.iter().filter(|e| matches!(e, AgentEvent::SessionEnd { .. })).count();
    let frames: Vec<_> = frames.iter().map(normalize).collect();
    assert_eq!(frames.iter().filter(|(t, _)| t == "reply").count(), runs);
    assert_eq!(frames.first().unwrap().0, "run_start");
    assert_eq!(frames.last().unwrap().0, "reply");
    let mut inside: Option<String> = None;
    for (i, (kind, map)) in frames.iter().enumerate() {
        assert_eq!(map["event_id"], json!(i + 1), "event_id of frame {i}");
        assert!(map["session_id"].is_string());
        let node_id = map.get("node_id").and_then(Value::as_str).map(str::to_string);
        match kind.as_str() {
            "node_enter" => {
                assert!(inside.is_none(), "nested node at frame {i}");
                assert!(node_id.is_some());
                inside = node_id;
            }
            "node_exit" => assert_eq!(inside.take(), node_id, "node_exit {i}"),
            "reply" => {
                assert!(inside.is_none());
                if let Some((next, _)) = frames.get(i + 1) {
                    assert_eq!(next, "run_start", "frame after a reply");
                }
            }
            "got_expand" => assert!(inside.is_some()),
            _ => assert_eq!(node_id, inside, "node_id of frame {i} ({kind})"),
        }
        if kind == "run_start" && i > 0 {
            assert_eq!(frames[i - 1].0, "reply", "run_start after a reply");
        }
    }
}

fn check_round_trip(events: &[AgentEvent]) {
    let expected = Transcript::from_events(events);
    for frames in both_forms(events) {
        check_invariants(events, &frames);
        assert_eq!(decode(&frames).unwrap(), expected, "{:#?}", lines(&frames));
    }
}

fn receive(lines: &[&str]) -> LoomTranscript {
    let mut r = LoomReceiver::new();
    for line in lines {
        r.push_line(line);
    }
    r.finish()
}

// ---------------------------------------------------------------------------------------------
// The spec's own examples.

mod encoder;
mod random;
mod receiver;
