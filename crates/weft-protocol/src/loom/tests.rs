#![allow(clippy::unwrap_used)]

use serde_json::{Value, json};
use weft_core::{
    AgentEvent, AgentStep, AssistantContent, AssistantMessage, Message, Role, SessionStatus,
    StepAnnotations, StopReason, TextContent, ThinkingContent, ToolCall, ToolResultMessage, Usage,
    UserMessage,
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
    ToolCall { id: id.into(), name: name.into(), arguments }
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
        });
        if let Some(text) = user {
            let mut m = UserMessage::text(text);
            m.timestamp = 1;
            let m = Message::User(m);
            self.messages.push(m.clone());
            self.push(AgentEvent::MessageStart { role: Role::User });
            self.push(AgentEvent::MessageEnd { message: Box::new(m) });
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
            error_message: error.map(str::to_string),
            usage,
            cost: None,
            provider: "faux".into(),
            model: "faux".into(),
            timestamp: 2,
        };
        self.messages.push(Message::Assistant(message.clone()));
        self.push(AgentEvent::MessageEnd {
            message: Box::new(Message::Assistant(message.clone())),
        });
        if let Some(e) = error {
            self.push(AgentEvent::Error {
                error: e.into(),
                message: Some(Box::new(Message::Assistant(message.clone()))),
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
            self.push(AgentEvent::MessageEnd { message: Box::new(m) });
        }
        self.push(AgentEvent::NodeExit { name: "observe".into(), node_id, error: None });
        self.step_end(step, message);
    }

    fn step_end(&mut self, step: u32, message: AssistantMessage) {
        self.push(AgentEvent::StepEnd {
            step: Box::new(AgentStep {
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
            messages,
            usage,
            cost: Default::default(),
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
                browse.arguments.clone(),
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
            Blk::Call("d1", "delete", vec!["{\"path\":\"a\"}"], d1.arguments.clone()),
            Blk::Call("d2", "delete", vec!["{\"path\":\"b\"}"], d2.arguments.clone()),
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
    s.push(AgentEvent::GotPlan {
        node_count: 2,
        edge_count: 1,
        node_ids: vec!["g1".into(), "g2".into()],
    });
    s.push(AgentEvent::GotNodeStart { id: "g1".into() });
    s.push(AgentEvent::GotNodeComplete { id: "g1".into(), result_summary: "done".into() });
    s.push(AgentEvent::GotNodeFailed { id: "g2".into(), error: "no".into() });
    s.push(AgentEvent::GotExpand { node_id: "g2".into(), nodes_added: 3, edges_added: 2 });
    s.push(AgentEvent::TotExpand { candidates: vec!["a".into(), "b".into()] });
    s.push(AgentEvent::TotEvaluate { chosen: 1, scores: vec![0.25, 0.75] });
    s.push(AgentEvent::TotBacktrack { reason: "dead end".into(), to_depth: 0 });
    s.push(AgentEvent::StateUpdate { name: "plan_graph".into(), state: json!({"n": 2}) });
    s.push(AgentEvent::Checkpoint {
        checkpoint_id: "ck1".into(),
        thread_id: "s7".into(),
        checkpoint_ns: "".into(),
        step: 0,
        timestamp: 99,
        state: json!({"n": 2}),
    });
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

/// §4.3 (with envelope, verbatim), then §5's reply line (verbatim).
const SPEC_WITH_ENVELOPE: &str = r#"{"session_id":"sess-001","event_id":0,"type":"run_start","run_id":"run-1","message":"Hello","agent":"react"}
{"session_id":"sess-001","node_id":"run-think-1","event_id":1,"type":"node_enter","id":"think"}
{"session_id":"sess-001","node_id":"run-think-1","event_id":2,"type":"message_chunk","content":"I","id":"think"}
{"session_id":"sess-001","node_id":"run-think-1","event_id":3,"type":"message_chunk","content":" don't","id":"think"}
{"session_id":"sess-001","node_id":"run-think-1","event_id":4,"type":"usage","prompt_tokens":100,"completion_tokens":62,"total_tokens":162}
{"session_id":"sess-001","node_id":"run-think-1","event_id":5,"type":"node_exit","id":"think","result":"Ok"}
{"session_id":"sess-001","node_id":"run-think-1","event_id":8,"reply":"I don't have access to your device's clock ..."}
"#;

/// §4.3's variant without envelope (verbatim).
const SPEC_WITHOUT_ENVELOPE: &str = r#"{"type":"run_start","run_id":"run-1","agent":"react"}
{"type":"node_enter","id":"think"}
{"type":"message_chunk","content":"Hello","id":"think"}
{"type":"node_exit","id":"think","result":"Ok"}
"#;

#[test]
fn the_specs_example_with_envelope_and_reply() {
    let mut r = LoomReceiver::new();
    r.push_text(SPEC_WITH_ENVELOPE);
    let t = r.finish();
    assert_eq!(t.errors, vec![]);
    assert_eq!(t.sessions.len(), 1);
    let session = t.session(Some("sess-001")).unwrap();
    assert_eq!(session.runs.len(), 1);
    let run = &session.runs[0];
    assert!(run.started);
    assert_eq!(run.run_id.as_deref(), Some("run-1"));
    assert_eq!(run.message.as_deref(), Some("Hello"));
    assert_eq!(run.agent.as_deref(), Some("react"));
    assert_eq!(run.node_runs.len(), 1);
    let node = &run.node_runs[0];
    assert_eq!(node.node_id.as_deref(), Some("run-think-1"));
    assert_eq!(node.name.as_deref(), Some("think"));
    assert!(node.entered);
    assert_eq!(node.text, "I don't");
    assert_eq!(node.text_blocks.len(), 1);
    assert_eq!(node.result, Some(LoomNodeResult::Ok));
    assert_eq!((node.first_event_id, node.last_event_id), (Some(1), Some(5)));
    let expected_usage =
        LoomUsage { prompt_tokens: 100, completion_tokens: 62, total_tokens: 162, line: 5 };
    assert_eq!(node.usage, vec![expected_usage.clone()]);
    assert_eq!(run.usage, vec![expected_usage]);
    let reply = run.reply.as_ref().unwrap();
    assert_eq!(reply.text, "I don't have access to your device's clock ...");
    assert_eq!(reply.node_id.as_deref(), Some("run-think-1"));
    assert_eq!(reply.event_id, Some(8));
    assert_eq!(reply.status, None);

    // As a transcript: one text block, no status (the spec's reply has none).
    let frames: Vec<Frame> = SPEC_WITH_ENVELOPE.lines().map(Frame::raw).collect();
    let transcript = decode(&frames).unwrap();
    assert_eq!(transcript.texts, vec!["I don't".to_string()]);
    assert_eq!(transcript.status, None);
}

#[test]
fn the_specs_example_without_envelope() {
    let mut r = LoomReceiver::new();
    r.push_text(SPEC_WITHOUT_ENVELOPE);
    let t = r.finish();
    assert_eq!(t.errors, vec![]);
    let session = t.session(None).unwrap();
    assert_eq!(session.runs.len(), 1);
    let run = &session.runs[0];
    assert_eq!(run.run_id.as_deref(), Some("run-1"));
    assert_eq!(run.message, None);
    assert_eq!(run.reply, None);
    let [node] = run.node_runs.as_slice() else { panic!("{:?}", run.node_runs) };
    assert_eq!((node.node_id.as_deref(), node.name.as_deref()), (None, Some("think")));
    assert_eq!(node.text, "Hello");
    assert_eq!(node.result, Some(LoomNodeResult::Ok));
}

// ---------------------------------------------------------------------------------------------
// Merging.

#[test]
fn interleaved_sessions_and_runs_merge() {
    // Session A: two runs, both with node run id "think-0"; in run 2, "act-0" opens twice.
    let a = [
        r#"{"session_id":"A","event_id":1,"type":"run_start","run_id":"a1","message":"one"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":2,"type":"node_enter","id":"think"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":3,"type":"message_chunk","content":"A","id":"think"}"#,
        r#"{"session_id":"A","event_id":4,"type":"message_chunk","content":"1","id":"think"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":5,"type":"node_exit","id":"think","result":"Ok"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":6,"reply":"A1"}"#,
        r#"{"session_id":"A","event_id":7,"type":"run_start","run_id":"a2","message":"two"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":8,"type":"node_enter","id":"think"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":9,"type":"tool_call","call_id":"k","name":"t","arguments":{}}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":10,"type":"node_exit","id":"think","result":{"Err":"x"}}"#,
        r#"{"session_id":"A","node_id":"act-0","event_id":11,"type":"node_enter","id":"act"}"#,
        r#"{"session_id":"A","node_id":"act-0","event_id":12,"type":"node_exit","id":"act","result":"Ok"}"#,
        r#"{"session_id":"A","node_id":"act-0","event_id":13,"type":"tool_output","call_id":"k","name":"t","content":"late"}"#,
        r#"{"session_id":"A","node_id":"act-0","event_id":14,"type":"node_exit","id":"act","result":"Ok"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":15,"reply":"A2"}"#,
    ];
    // Session B: two runs, node run "think-0" in each, usage on each.
    let b = [
        r#"{"session_id":"B","event_id":1,"type":"run_start","run_id":"b1"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":2,"type":"node_enter","id":"think"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":3,"type":"thought_chunk","content":"hm","id":"think"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":4,"type":"usage","prompt_tokens":1,"completion_tokens":2,"total_tokens":3}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":5,"type":"node_exit","id":"think","result":"Ok"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":6,"reply":"B1","status":"completed"}"#,
        r#"{"session_id":"B","event_id":7,"type":"run_start","run_id":"b2"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":8,"type":"node_enter","id":"think"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":9,"type":"message_chunk","content":"B","id":"think"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":10,"type":"usage","prompt_tokens":4,"completion_tokens":5,"total_tokens":9}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":11,"type":"node_exit","id":"think","result":"Ok"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":12,"reply":"B2"}"#,
    ];
    let mut mixed = Vec::new();
    for i in 0..a.len().max(b.len()) {
        mixed.extend(a.get(i));
        mixed.extend(b.get(i));
    }
    let t = receive(&mixed);
    assert_eq!(t.errors, vec![]);
    assert_eq!(t.sessions.len(), 2);
    assert_eq!(t.sessions[0].session_id.as_deref(), Some("A"));

    let a = t.session(Some("A")).unwrap();
    assert_eq!(a.runs.len(), 2);
    let (a1, a2) = (&a.runs[0], &a.runs[1]);
    assert_eq!((a1.run_id.as_deref(), a1.message.as_deref()), (Some("a1"), Some("one")));
    assert_eq!(a1.node_runs.len(), 1);
    assert_eq!(a1.node_runs[0].text, "A1", "a frame without node_id joins the open node run");
    assert_eq!(a1.reply.as_ref().unwrap().text, "A1");
    assert_eq!(a2.run_id.as_deref(), Some("a2"));
    let names: Vec<_> = a2.node_runs.iter().map(|n| (n.name.as_deref(), n.entered)).collect();
    assert_eq!(names, vec![(Some("think"), true), (Some("act"), true), (Some("act"), false)]);
    assert_eq!(a2.node_runs[0].text, "", "run 2's think-0 is a new node run");
    assert_eq!(a2.node_runs[0].tool_calls[0].call_id.as_deref(), Some("k"));
    assert_eq!(a2.node_runs[0].result, Some(LoomNodeResult::Err("x".into())));
    // act-0 re-opened after its node_exit: a new node run.
    assert_eq!(a2.node_runs[2].node_id.as_deref(), Some("act-0"));
    assert_eq!(a2.node_runs[2].tool_outputs[0].content, "late");
    assert_eq!(a2.node_runs[2].result, Some(LoomNodeResult::Ok));
    assert_eq!(a2.reply.as_ref().unwrap().text, "A2");

    let b = t.session(Some("B")).unwrap();
    assert_eq!(b.runs.len(), 2);
    assert_eq!(b.runs[0].node_runs[0].thought, "hm");
    assert_eq!(b.runs[0].usage.iter().map(|u| u.total_tokens).collect::<Vec<_>>(), vec![3]);
    assert_eq!(b.runs[0].reply.as_ref().unwrap().status.as_deref(), Some("completed"));
    assert_eq!(b.runs[1].node_runs.len(), 1);
    assert_eq!(b.runs[1].node_runs[0].text, "B");
    assert_eq!(b.runs[1].usage.iter().map(|u| u.total_tokens).collect::<Vec<_>>(), vec![9]);
    assert_eq!(b.runs[1].reply.as_ref().unwrap().text, "B2");

    // decode() wants one session.
    let frames: Vec<Frame> = mixed.iter().map(|l| Frame::raw(*l)).collect();
    assert!(matches!(decode(&frames), Err(LoomDecodeError::SeveralSessions(s)) if s.len() == 2));
}

#[test]
fn malformed_lines_are_reported_and_the_rest_is_read() {
    let t = receive(&[
        r#"{"type":"run_start","run_id":"r"}"#,
        r#"{"type":"node_enter","id":"think"}"#,
        r#"{"type":"message_chunk","content":"a","id":"think"}"#,
        "this is not json",
        "",
        r#"[1, 2]"#,
        r#"{"type":"usage","prompt_tokens":"many","completion_tokens":1,"total_tokens":1}"#,
        r#"{"type":"node_exit","id":"think","result":"Fine"}"#,
        r#"{"type":"mystery","x":1}"#,
        r#"{"Mystery":{"y":2}}"#,
        r#"{"session_id":7,"type":"custom","value":1}"#,
        r#"{"no_type":true,"other":1}"#,
        r#"{"type":"message_chunk","content":"b","id":"think"}"#,
        r#"{"type":"node_exit","id":"think","result":"Ok"}"#,
        r#"{"reply":"ab"}"#,
    ]);
    let errors: Vec<_> = t.errors.iter().map(|e| e.line).collect();
    assert_eq!(errors, vec![4, 6, 7, 8, 11, 12]);
    assert!(t.errors[0].message.starts_with("not JSON"), "{}", t.errors[0]);
    assert_eq!(t.errors[1].message, "not a JSON object");
    assert!(t.errors[2].to_string().contains("line 7: usage: `prompt_tokens`"), "{}", t.errors[2]);
    assert!(t.errors[4].message.contains("session_id"), "{}", t.errors[4]);
    let run = &t.session(None).unwrap().runs[0];
    let node = &run.node_runs[0];
    assert_eq!(node.text, "ab");
    assert_eq!(node.result, Some(LoomNodeResult::Ok));
    let other: Vec<_> = node.other.iter().map(|o| (o.kind.as_str(), o.line)).collect();
    assert_eq!(other, vec![("mystery", 9), ("Mystery", 10)]);
    assert_eq!(node.other[0].payload["x"], json!(1));
    assert_eq!(run.reply.as_ref().unwrap().text, "ab");

    let frames = vec![Frame::raw(r#"{"type":"node_enter"}"#)];
    let err = decode(&frames).unwrap_err();
    assert_eq!(err.to_string(), "line 1: node_enter: missing `id`");
}

#[test]
fn export_form_frames_read_like_type_form_frames() {
    for events in [tool_round(), graph_events(), [remote().0, remote().1].concat()] {
        let [plain, export] = both_forms(&events);
        let a = receive(&lines(&plain));
        let b = receive(&lines(&export));
        assert_eq!(a.errors, vec![]);
        assert_eq!(a, b);
    }
}

// ---------------------------------------------------------------------------------------------
// The encoder.

#[test]
fn exact_frames_of_a_small_run_in_both_forms() {
    let [plain, export] = both_forms(&text_and_thinking());
    assert_eq!(
        lines(&plain),
        vec![
            r#"{"session_id":"s1","event_id":1,"type":"run_start","run_id":"r1","message":"hi","agent":"react"}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":2,"type":"node_enter","id":"think"}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":3,"type":"thought_chunk","content":"Hm","id":"think","block":0}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":4,"type":"message_chunk","content":"Hel","id":"think","block":1}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":5,"type":"message_chunk","content":"lo","id":"think","block":1}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":6,"type":"usage","prompt_tokens":12,"completion_tokens":5,"total_tokens":17}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":7,"type":"node_exit","id":"think","result":"Ok"}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":8,"reply":"Hello","status":"completed"}"#,
        ]
    );
    assert_eq!(
        lines(&export),
        vec![
            r#"{"RunStart":{"run_id":"r1","message":"hi","agent":"react","session_id":"s1","event_id":1}}"#,
            r#"{"TaskStart":{"id":"think","session_id":"s1","node_id":"think-0","event_id":2}}"#,
            r#"{"ThoughtChunk":{"content":"Hm","id":"think","block":0,"session_id":"s1","node_id":"think-0","event_id":3}}"#,
            r#"{"Messages":{"content":"Hel","id":"think","block":1,"session_id":"s1","node_id":"think-0","event_id":4}}"#,
            r#"{"Messages":{"content":"lo","id":"think","block":1,"session_id":"s1","node_id":"think-0","event_id":5}}"#,
            r#"{"Usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"session_id":"s1","node_id":"think-0","event_id":6}}"#,
            r#"{"TaskEnd":{"id":"think","result":"Ok","session_id":"s1","node_id":"think-0","event_id":7}}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":8,"reply":"Hello","status":"completed"}"#,
        ]
    );
    // The frame ids are the canonical sequence numbers: run_start renders events 1-3.
    let ids: Vec<_> = plain.iter().map(|f| f.id).collect();
    assert_eq!(
        ids,
        vec![Some(3), Some(4), Some(8), Some(11), Some(12), Some(14), Some(15), Some(17)]
    );
}

#[test]
fn tool_frames_results_and_their_order() {
    let events = tool_round();
    let [plain, _] = both_forms(&events);
    let frames: Vec<_> = plain.iter().map(normalize).collect();
    let of = |kind: &str| -> Vec<&serde_json::Map<String, Value>> {
        frames.iter().filter(|(t, _)| t == kind).map(|(_, m)| m).collect()
    };
    let chunks = of("tool_call_chunk");
    let c1: Vec<_> = chunks
        .iter()
        .filter(|m| m["call_id"] == "c1")
        .map(|m| (m["name"].as_str().unwrap(), m["arguments_delta"].as_str().unwrap()))
        .collect();
    assert_eq!(c1, vec![("echo", ""), ("echo", "{\"te"), ("echo", "xt\":\"sunny\"}")]);
    let calls = of("tool_call");
    assert_eq!(calls[0]["arguments"], json!({"text": "sunny"}));
    assert_eq!(calls.len(), 3);
    let outputs: Vec<_> = of("tool_output").iter().map(|m| m["content"].clone()).collect();
    assert_eq!(outputs, vec![json!("sun"), json!("ny")]);
    assert_eq!(of("tool_output")[0]["name"], "echo");
    // Executions end in completion order (c2, c1); the unknown tool's result comes from the
    // observe node; nothing is sent twice.
    let ends: Vec<_> = of("tool_end")
        .iter()
        .map(|m| {
            (m["call_id"].as_str().unwrap(), m["node_id"].as_str().unwrap(), m["is_error"].clone())
        })
        .collect();
    assert_eq!(
        ends,
        vec![
            ("c2", "act-0", json!(false)),
            ("c1", "act-0", json!(false)),
            ("c3", "observe-0", json!(true))
        ]
    );
    let exits = of("node_exit");
    assert_eq!(exits[2]["node_id"], "observe-0");
    assert_eq!(exits[2]["tool_results"], json!(["c1", "c2", "c3"]));
    assert!(exits[0].get("tool_results").is_none());
    // The reply is the last think node's text; usage per model call.
    let reply = &frames.last().unwrap().1;
    assert_eq!(
        (reply["reply"].as_str(), reply["node_id"].as_str()),
        (Some("It is sunny."), Some("think-1"))
    );
    let totals: Vec<_> = of("usage").iter().map(|m| m["total_tokens"].clone()).collect();
    assert_eq!(totals, vec![json!(168), json!(221)]);

    let t = decode(&plain).unwrap();
    let ids: Vec<_> = t.tool_results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, vec!["c1", "c2", "c3"], "the model's order, not the completion order");
    check_round_trip(&events);
}

#[test]
fn remote_suspension_and_resume() {
    let (first, second) = remote();
    let [plain, _] = both_forms(&first);
    let frames: Vec<_> = plain.iter().map(normalize).collect();
    let (kind, custom) = &frames[frames.len() - 2];
    assert_eq!(kind, "custom");
    assert!(custom.get("node_id").is_none());
    assert_eq!(
        custom["value"],
        json!({"kind": "awaiting_tool_execution", "tool_calls": [
            {"id": "b1", "name": "browser", "arguments": {"url": "https://example.org"}}]})
    );
    let reply = &frames.last().unwrap().1;
    assert_eq!(
        (reply["reply"].as_str(), reply["status"].as_str()),
        (Some("Opening."), Some("awaiting_tool_execution"))
    );
    let t = decode(&plain).unwrap();
    assert_eq!(t.pending, vec!["b1".to_string()]);
    assert_eq!(t.tool_results, vec![], "c1 ran but the model has not received it yet");

    // The resumed run alone (a fresh encoder), and both runs through one encoder.
    let [plain, _] = both_forms(&second);
    let frames: Vec<_> = plain.iter().map(normalize).collect();
    assert_eq!(frames[0].1.get("message"), None, "a resumed run has no user message");
    assert_eq!(frames[0].1["run_id"], "r2");
    let ends: Vec<_> =
        frames.iter().filter(|(t, _)| t == "tool_end").map(|(_, m)| m["call_id"].clone()).collect();
    assert_eq!(ends, vec![json!("b1"), json!("c1")], "a fresh encoder sends every result");
    check_round_trip(&second);
    let both = [first, second].concat();
    check_round_trip(&both);
    let [plain, _] = both_forms(&both);
    let ends = plain.iter().map(normalize).filter(|(t, _)| t == "tool_end").count();
    assert_eq!(ends, 2, "c1's result is sent once, when it ran");
    let t = decode(&plain).unwrap();
    assert_eq!(t.pending, Vec::<String>::new());
    assert_eq!(t.status, Some(SessionStatus::Completed));
}

#[test]
fn approval_frames() {
    let (first, second) = approval();
    let [plain, export] = both_forms(&first);
    let approvals: Vec<_> = plain
        .iter()
        .map(normalize)
        .filter(|(t, _)| t == "tool_approval")
        .map(|(_, m)| (m["call_id"].clone(), m["name"].clone(), m["arguments"].clone()))
        .collect();
    assert_eq!(
        approvals,
        vec![
            (json!("d1"), json!("delete"), json!({"path": "a"})),
            (json!("d2"), json!("delete"), json!({"path": "b"}))
        ]
    );
    assert!(lines(&export).iter().any(|l| l.starts_with(r#"{"ToolApproval":{"call_id":"d1""#)));
    let reply = normalize(plain.last().unwrap()).1;
    assert_eq!(reply["reply"], "", "no text in the run");
    assert_eq!(reply["node_id"], "think-0");
    assert_eq!(decode(&plain).unwrap().pending, vec!["d1".to_string(), "d2".to_string()]);
    check_round_trip(&first);
    check_round_trip(&second);
    let both = [first, second].concat();
    check_round_trip(&both);
    let t = decode(&both_forms(&both)[0]).unwrap();
    assert_eq!(t.tool_results.iter().map(|r| r.is_error).collect::<Vec<_>>(), vec![false, true]);
}

#[test]
fn provider_error_frames() {
    let events = provider_error();
    let [plain, _] = both_forms(&events);
    let tail: Vec<_> = lines(&plain).into_iter().rev().take(4).collect();
    assert_eq!(
        tail,
        vec![
            r#"{"session_id":"s5","node_id":"think-0","event_id":7,"reply":"Par","status":"error"}"#,
            r#"{"session_id":"s5","node_id":"think-0","event_id":6,"type":"node_exit","id":"think","result":{"Err":"500 from provider"}}"#,
            r#"{"session_id":"s5","node_id":"think-0","event_id":5,"type":"custom","value":{"kind":"error","error":"500 from provider"}}"#,
            r#"{"session_id":"s5","node_id":"think-0","event_id":4,"type":"usage","prompt_tokens":9,"completion_tokens":1,"total_tokens":10}"#,
        ]
    );
    check_round_trip(&events);
}

#[test]
fn multi_step_blocks_and_corrections() {
    let events = multi_step();
    let [plain, _] = both_forms(&events);
    let chunks: Vec<_> = plain
        .iter()
        .map(normalize)
        .filter(|(t, _)| t == "message_chunk")
        .map(|(_, m)| (m["block"].clone(), m["content"].clone(), m.get("text").cloned()))
        .collect();
    assert_eq!(
        chunks,
        vec![
            (json!(0), json!(""), None),
            (json!(1), json!("Retr"), None),
            (json!(1), json!("ying"), None),
            (json!(2), json!("Got "), None),
            (json!(2), json!("1"), None),
            (json!(3), json!("x"), None),
            (json!(3), json!(""), Some(json!("yz"))),
        ]
    );
    let t = decode(&plain).unwrap();
    assert_eq!(t.texts, vec!["", "Retrying", "Got 1", "yz"]);
    let reply = normalize(plain.last().unwrap()).1;
    assert_eq!(
        (reply["reply"].as_str(), reply["node_id"].as_str()),
        (Some("Got 1yz"), Some("think-2"))
    );
    check_round_trip(&events);
}

#[test]
fn state_tot_got_and_custom_frames() {
    let events = graph_events();
    let [plain, export] = both_forms(&events);
    let got: Vec<&str> = lines(&plain)[2..14].to_vec();
    assert_eq!(
        got,
        vec![
            r#"{"session_id":"s7","node_id":"plan-0","event_id":3,"type":"values","state":{"n":1}}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":4,"type":"got_plan","node_count":2,"edge_count":1,"node_ids":["g1","g2"]}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":5,"type":"got_node_start","id":"g1"}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":6,"type":"got_node_complete","id":"g1","result_summary":"done"}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":7,"type":"got_node_failed","id":"g2","error":"no"}"#,
            r#"{"session_id":"s7","event_id":8,"type":"got_expand","node_id":"g2","nodes_added":3,"edges_added":2}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":9,"type":"tot_expand","candidates":["a","b"]}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":10,"type":"tot_evaluate","chosen":1,"scores":[0.25,0.75]}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":11,"type":"tot_backtrack","reason":"dead end","to_depth":0}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":12,"type":"updates","id":"plan_graph","state":{"n":2}}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":13,"type":"checkpoint","checkpoint_id":"ck1","timestamp":99,"step":0,"state":{"n":2},"thread_id":"s7","checkpoint_ns":""}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":14,"type":"custom","value":{"anything":[1,2]}}"#,
        ]
    );
    assert_eq!(
        lines(&export)[7],
        r#"{"GotExpand":{"node_id":"g2","nodes_added":3,"edges_added":2,"session_id":"s7","event_id":8}}"#
    );
    let t = receive(&lines(&export));
    assert_eq!(t.errors, vec![]);
    let node = &t.sessions[0].runs[0].node_runs[0];
    assert_eq!(node.node_id.as_deref(), Some("plan-0"));
    let kinds: Vec<_> = node.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            "values",
            "got_plan",
            "got_node_start",
            "got_node_complete",
            "got_node_failed",
            "got_expand",
            "tot_expand",
            "tot_evaluate",
            "tot_backtrack",
            "updates",
            "checkpoint"
        ]
    );
    assert_eq!(node.events[5].payload["node_id"], "g2", "got_expand keeps its own node_id");
    assert_eq!(node.customs[0].value, json!({"anything": [1, 2]}));
    check_round_trip(&events);
}

#[test]
fn several_runs_through_one_encoder_keep_counting() {
    let (a, b) = approval();
    let events = [text_and_thinking(), a, b].concat();
    // One encoder sees runs of different sessions here only to count; the ids keep growing.
    let frames = encode_with(LoomEncoder::new(), &events);
    let ids: Vec<u64> =
        frames.iter().map(|f| normalize(f).1["event_id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (1..=frames.len() as u64).collect::<Vec<_>>());
    let kinds: Vec<String> = frames.iter().map(|f| normalize(f).0).collect();
    assert_eq!(kinds.iter().filter(|k| *k == "run_start").count(), 3);
    assert_eq!(kinds.iter().filter(|k| *k == "reply").count(), 3);
}

#[test]
fn a_run_start_without_anything_after_it_is_sent_by_finish() {
    let start = AgentEvent::SessionStart {
        session_id: "s".into(),
        run_id: "r".into(),
        agent: "react".into(),
    };
    let mut encoder = LoomEncoder::new();
    let mut out = Vec::new();
    encoder.encode(&start, &mut out);
    assert!(out.is_empty(), "run_start waits for the user's message");
    encoder.finish(&mut out);
    assert_eq!(
        lines(&out),
        vec![r#"{"session_id":"s","event_id":1,"type":"run_start","run_id":"r","agent":"react"}"#]
    );
}

#[test]
fn every_scenario_round_trips_and_keeps_the_invariants() {
    let (r1, r2) = remote();
    let (a1, a2) = approval();
    let scenarios = vec![
        text_and_thinking(),
        tool_round(),
        r1.clone(),
        r2.clone(),
        [r1, r2].concat(),
        a1.clone(),
        a2.clone(),
        [a1, a2].concat(),
        provider_error(),
        multi_step(),
        graph_events(),
    ];
    for events in &scenarios {
        check_round_trip(events);
    }
}

// ---------------------------------------------------------------------------------------------
// Random runs: a small model of the agent's machine (react mode) driving the builder above.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

const PIECES: [&str; 8] = ["a", "bc", "", "déf ", "g\nh", "\"q\"", "🙂", " "];

fn deltas(rng: &mut Rng) -> Vec<&'static str> {
    (0..rng.below(4)).map(|_| rng.pick(&PIECES)).collect()
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// What a call of the open turn waits for.
enum Slot {
    Done(ToolResultMessage),
    Run(Vec<&'static str>, &'static str, bool),
    Remote(&'static str, bool),
    Approval,
}

/// One random session, as the runs it took.
fn random_session(rng: &mut Rng, session: &str) -> Vec<Vec<AgentEvent>> {
    let mut s = Stream::new(session);
    let mut runs = Vec::new();
    let mut step = 0u32;
    for _ in 0..1 + rng.below(2) {
        s.start(leak(format!("run{}", runs.len())), Some(rng.pick(&["hi", "", "do it"])));
        loop {
            let mut blocks = Vec::new();
            if rng.chance(40) {
                blocks.push(Blk::Thinking(deltas(rng)));
            }
            for _ in 0..rng.below(3) {
                blocks.push(if rng.chance(10) {
                    Blk::TextFinal(deltas(rng), "final")
                } else {
                    Blk::Text(deltas(rng))
                });
            }
            let n_calls = if step >= 3 { 0 } else { rng.below(4) };
            let mut calls = Vec::new();
            for i in 0..n_calls {
                let name = rng.pick(&["echo", "clock", "remote_x", "danger", "nope"]);
                let id = leak(format!("call_{step}_{i}"));
                let args = format!("{{\"i\":{i},\"s\":\"x y\"}}");
                let cut = rng.below(args.len() as u64) as usize;
                let pieces = vec![leak(args[..cut].to_string()), leak(args[cut..].to_string())];
                blocks.push(Blk::Call(id, name, pieces, json!({"i": i, "s": "x y"})));
                calls.push(call(id, name, json!({"i": i, "s": "x y"})));
            }
            let fails = rng.chance(8);
            let (stop, error) = match (fails, calls.is_empty()) {
                (true, _) => (StopReason::Error, Some("boom")),
                (false, true) => (StopReason::Stop, None),
                (false, false) => (StopReason::ToolUse, None),
            };
            let m =
                s.think(step, blocks, stop, Usage::new(rng.below(50), rng.below(20), 1, 0), error);
            if fails || calls.is_empty() {
                s.step_end(step, m);
                s.end(if fails { SessionStatus::Error } else { SessionStatus::Completed });
                runs.push(std::mem::take(&mut s.events));
                step += 1;
                break;
            }
            let mut slots: Vec<(ToolCall, Slot)> = calls
                .into_iter()
                .map(|c| {
                    let slot = match c.name.as_str() {
                        "nope" => Slot::Done(result(&c.id, &c.name, "Tool nope not found", true)),
                        _ if rng.chance(10) => {
                            Slot::Done(result(&c.id, &c.name, "invalid arguments", true))
                        }
                        "remote_x" => {
                            Slot::Remote(rng.pick(&["remote ok", "remote failed"]), rng.chance(30))
                        }
                        "danger" => Slot::Approval,
                        _ => Slot::Run(deltas(rng), rng.pick(&["out", "", "x\ny"]), rng.chance(20)),
                    };
                    (c, slot)
                })
                .collect();
            loop {
                // Local calls run, ending in a random order.
                let mut execs = Vec::new();
                let mut order = Vec::new();
                for (c, slot) in &mut slots {
                    if let Slot::Run(d, output, is_error) = slot {
                        execs.push(Exec(c.clone(), d.clone(), output, *is_error));
                        order.push(leak(c.id.clone()));
                        let r = result(&c.id, &c.name, output, *is_error);
                        *slot = Slot::Done(r);
                    }
                }
                if !execs.is_empty() {
                    for i in (1..execs.len()).rev() {
                        execs.swap(i, rng.below(i as u64 + 1) as usize);
                    }
                    s.act(step, execs, &order);
                }
                let approvals: Vec<ToolCall> = slots
                    .iter()
                    .filter(|(_, st)| matches!(st, Slot::Approval))
                    .map(|(c, _)| c.clone())
                    .collect();
                let remote: Vec<ToolCall> = slots
                    .iter()
                    .filter(|(_, st)| matches!(st, Slot::Remote(..)))
                    .map(|(c, _)| c.clone())
                    .collect();
                if !approvals.is_empty() || !remote.is_empty() {
                    let status = if approvals.is_empty() {
                        SessionStatus::AwaitingToolExecution
                    } else {
                        s.approval(approvals);
                        SessionStatus::AwaitingApproval
                    };
                    if !remote.is_empty() {
                        s.awaiting(remote);
                    }
                    s.end(status);
                    runs.push(std::mem::take(&mut s.events));
                    s.start(leak(format!("run{}", runs.len())), None);
                    let approving = status == SessionStatus::AwaitingApproval;
                    for (c, slot) in &mut slots {
                        match slot {
                            Slot::Approval if rng.chance(60) => {
                                *slot = Slot::Run(deltas(rng), "done", false);
                            }
                            Slot::Approval => {
                                let text = "Tool call denied by the user";
                                *slot = Slot::Done(result(&c.id, &c.name, text, true));
                            }
                            Slot::Remote(text, is_error) if !approving => {
                                *slot = Slot::Done(result(&c.id, &c.name, text, *is_error));
                            }
                            _ => {}
                        }
                    }
                    continue;
                }
                let results = slots
                    .drain(..)
                    .map(|(_, slot)| match slot {
                        Slot::Done(r) => r,
                        _ => unreachable!("every call is done"),
                    })
                    .collect();
                s.observe(step, results, m);
                break;
            }
            step += 1;
        }
    }
    runs
}

#[test]
fn random_runs_round_trip() {
    for seed in 1..=600u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let runs = random_session(&mut rng, "sess");
        let all = runs.concat();
        let expected = Transcript::from_events(&all);
        for frames in both_forms(&all) {
            check_invariants(&all, &frames);
            let got = decode(&frames).unwrap();
            assert_eq!(got, expected, "seed {seed}: {:#?}", lines(&frames));
        }
        // Each run through an encoder of its own, as a server serving each request does.
        for run in &runs {
            for frames in both_forms(run) {
                assert_eq!(decode(&frames).unwrap(), Transcript::from_events(run), "seed {seed}");
            }
        }
    }
}

#[test]
fn random_sessions_interleaved_line_by_line_merge_back() {
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
        let a = random_session(&mut rng, "A").concat();
        let b = random_session(&mut rng, "B").concat();
        let fa = encode_with(LoomEncoder::new(), &a);
        let fb = encode_with(LoomEncoder::export(), &b);
        let (mut i, mut j, mut receiver) = (0, 0, LoomReceiver::new());
        while i < fa.len() || j < fb.len() {
            if j >= fb.len() || (i < fa.len() && rng.chance(50)) {
                receiver.push_line(&fa[i].data);
                i += 1;
            } else {
                receiver.push_line(&fb[j].data);
                j += 1;
            }
        }
        let t = receiver.finish();
        assert_eq!(t.errors, vec![]);
        assert_eq!(t.sessions.len(), 2);
        let runs = a.iter().filter(|e| matches!(e, AgentEvent::SessionStart { .. })).count();
        assert_eq!(t.session(Some("A")).unwrap().runs.len(), runs);
        assert_eq!(
            t.session(Some("A")).unwrap().transcript().unwrap(),
            Transcript::from_events(&a)
        );
        assert_eq!(
            t.session(Some("B")).unwrap().transcript().unwrap(),
            Transcript::from_events(&b)
        );
    }
}

#[test]
fn content_outside_node_runs() {
    let mut s = Stream::new("s8");
    s.start("r1", Some("x"));
    s.text_block(0, &["out", "side"], "outside");
    let r = result("z", "remote", "late", false);
    s.push(AgentEvent::MessageEnd { message: Box::new(Message::ToolResult(r)) });
    s.end(SessionStatus::Completed);
    let events = s.events;
    let [plain, _] = both_forms(&events);
    assert_eq!(
        lines(&plain)[1..5].to_vec(),
        vec![
            r#"{"session_id":"s8","event_id":2,"type":"message_chunk","content":"out","block":0}"#,
            r#"{"session_id":"s8","event_id":3,"type":"message_chunk","content":"side","block":0}"#,
            r#"{"session_id":"s8","event_id":4,"type":"tool_end","call_id":"z","name":"remote","result":"late","is_error":false}"#,
            r#"{"session_id":"s8","event_id":5,"type":"custom","value":{"kind":"tool_results","tool_call_ids":["z"]}}"#,
        ]
    );
    let t = receive(&lines(&plain));
    let node = &t.sessions[0].runs[0].node_runs[0];
    assert_eq!(
        (node.entered, node.node_id.as_deref(), node.text.as_str()),
        (false, None, "outside")
    );
    for frames in both_forms(&events) {
        assert_eq!(decode(&frames).unwrap(), Transcript::from_events(&events));
    }
}
