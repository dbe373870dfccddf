//! [`LoomReceiver`]: reads Loom frames (either form, with or without the envelope) and merges
//! interleaved sessions and runs into a [`LoomTranscript`]; [`decode`] turns one session's frames
//! back into a [`Transcript`].

use std::collections::HashMap;

use serde_json::{Map, Value};
use weft_core::SessionStatus;

use super::export::{known_type, type_of_key};
use super::records::*;
use crate::Frame;
use crate::transcript::{CallRecord, ResultRecord, Transcript};

/// Reads a Loom stream line by line and merges it per session, run and node run.
///
/// - Frames: `type` + payload (§4) or single-key export form (§6), each with or without the
///   envelope; `{"reply": …}` lines end runs.
/// - Sessions are keyed by `session_id` (frames without one form an anonymous session). A
///   `run_start` starts a new run of its session; a `reply` ends it; frames after a reply with no
///   `run_start` start a run of their own.
/// - Node runs are keyed by the envelope `node_id` among the session's open node runs; a
///   `node_id` seen again after its `node_exit` (or a second `node_enter` with it) starts a new
///   node run. Frames without `node_id` go to the session's most recently opened node run that is
///   still open, by line order; with none open, `values`, `updates` (whose `id` names it) and
///   `checkpoint` go to the node run that exited last, and other frames to a node run of frames
///   outside nodes.
/// - Unknown types are kept (`other`); unreadable lines are reported in
///   [`LoomTranscript::errors`] and skipped.
#[derive(Debug, Default)]
pub struct LoomReceiver {
    line: usize,
    sessions: Vec<SessionState>,
    by_id: HashMap<Option<String>, usize>,
    errors: Vec<LoomLineError>,
}

#[derive(Debug, Default)]
struct SessionState {
    session: LoomSession,
    /// Whether the last run is still going (no reply yet).
    run_open: bool,
    /// Indices (in the last run's `node_runs`) of open node runs, oldest first.
    open: Vec<usize>,
    /// Index of the last run's current node run of frames outside nodes.
    loose: Option<usize>,
    /// Index of the last run's node run that exited last (the `values`, `updates` and
    /// `checkpoint` after a node run are about it).
    exited: Option<usize>,
}

#[derive(Debug, Default)]
struct Envelope {
    session_id: Option<String>,
    node_id: Option<String>,
    event_id: Option<u64>,
}

/// A frame's payload, checked.
#[derive(Debug)]
enum Body {
    RunStart { run_id: Option<String>, message: Option<String>, agent: Option<String> },
    NodeEnter { id: String },
    NodeExit { id: String, result: LoomNodeResult, tool_results: Vec<String> },
    Chunk { thought: bool, content: String, block: Option<u64>, text: Option<String> },
    Usage { prompt: u64, completion: u64, total: u64 },
    ToolCallChunk { call_id: Option<String>, name: Option<String>, delta: String },
    ToolCall { call_id: Option<String>, name: String, arguments: Value },
    ToolStart { call_id: Option<String>, name: String },
    ToolOutput { call_id: Option<String>, name: String, content: String },
    ToolEnd { call_id: Option<String>, name: String, result: String, is_error: bool },
    ToolApproval { call_id: Option<String>, name: String, arguments: Value },
    Custom { value: Value },
    Event { kind: String, payload: Map<String, Value> },
    Other { kind: String, payload: Map<String, Value> },
    Reply { text: String, status: Option<String> },
}

impl LoomReceiver {
    /// A receiver that has read nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads one line (one frame). Blank lines are counted and ignored; an unreadable line is
    /// recorded as an error and skipped.
    pub fn push_line(&mut self, line: &str) {
        self.line += 1;
        if line.trim().is_empty() {
            return;
        }
        match parse(line) {
            Ok((envelope, body)) => self.apply(envelope, body),
            Err(message) => self.errors.push(LoomLineError { line: self.line, message }),
        }
    }

    /// Reads a whole NDJSON text, line by line.
    pub fn push_text(&mut self, text: &str) {
        let text = text.strip_suffix('\n').unwrap_or(text);
        for line in text.split('\n') {
            self.push_line(line.strip_suffix('\r').unwrap_or(line));
        }
    }

    /// What the stream said.
    pub fn finish(self) -> LoomTranscript {
        let mut sessions: Vec<LoomSession> = self.sessions.into_iter().map(|s| s.session).collect();
        for node in sessions.iter_mut().flat_map(|s| &mut s.runs).flat_map(|r| &mut r.node_runs) {
            node.text = node.text_blocks.iter().map(|b| b.text.as_str()).collect();
            node.thought = node.thought_blocks.iter().map(|b| b.text.as_str()).collect();
            for call in node.tool_calls.iter_mut().filter(|c| !c.complete) {
                call.arguments = if call.arguments_text.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_str(&call.arguments_text)
                        .unwrap_or_else(|_| Value::String(call.arguments_text.clone()))
                };
            }
        }
        LoomTranscript { sessions, errors: self.errors }
    }

    fn apply(&mut self, envelope: Envelope, body: Body) {
        let line = self.line;
        let index = *self.by_id.entry(envelope.session_id.clone()).or_insert_with(|| {
            self.sessions.push(SessionState {
                session: LoomSession { session_id: envelope.session_id.clone(), runs: Vec::new() },
                ..SessionState::default()
            });
            self.sessions.len() - 1
        });
        let state = &mut self.sessions[index];
        match body {
            Body::RunStart { run_id, message, agent } => {
                state.session.runs.push(LoomRun {
                    started: true,
                    run_id,
                    agent,
                    message,
                    first_line: line,
                    ..LoomRun::default()
                });
                state.run_open = true;
                state.open.clear();
                state.loose = None;
                // `exited` named a node run of the previous run.
                state.exited = None;
            }
            Body::Reply { text, status } => {
                let run = state.run(line);
                run.reply = Some(LoomReply {
                    text,
                    status,
                    node_id: envelope.node_id,
                    event_id: envelope.event_id,
                    line,
                });
                state.run_open = false;
                state.open.clear();
                state.loose = None;
                state.exited = None;
            }
            body => state.node_frame(envelope, body, line),
        }
    }
}

impl SessionState {
    /// The run a frame belongs to: the current one, or a new one after a reply.
    fn run(&mut self, line: usize) -> &mut LoomRun {
        if !self.run_open || self.session.runs.is_empty() {
            self.session.runs.push(LoomRun { first_line: line, ..LoomRun::default() });
            self.run_open = true;
            self.open.clear();
            self.loose = None;
            self.exited = None;
        }
        let last = self.session.runs.len() - 1;
        &mut self.session.runs[last]
    }

    fn new_node(&mut self, line: usize, node: LoomNodeRun) -> usize {
        let run = self.run(line);
        run.node_runs.push(LoomNodeRun { first_line: line, ..node });
        run.node_runs.len() - 1
    }

    /// The node run a frame goes to.
    fn target(&mut self, node_id: Option<&str>, body: &Body, line: usize) -> usize {
        self.run(line);
        let last = self.session.runs.len() - 1;
        let nodes = &self.session.runs[last].node_runs;
        if let Body::NodeEnter { id } = body {
            if let Some(node_id) = node_id {
                self.open.retain(|&i| nodes[i].node_id.as_deref() != Some(node_id));
            }
            let node = LoomNodeRun {
                node_id: node_id.map(str::to_string),
                name: Some(id.clone()),
                entered: true,
                ..LoomNodeRun::default()
            };
            let i = self.new_node(line, node);
            self.open.push(i);
            self.loose = None;
            return i;
        }
        let found = match node_id {
            Some(node_id) => self
                .open
                .iter()
                .rev()
                .copied()
                .find(|&i| nodes[i].node_id.as_deref() == Some(node_id)),
            None => match body {
                Body::NodeExit { id, .. } => self
                    .open
                    .iter()
                    .rev()
                    .copied()
                    .find(|&i| nodes[i].name.as_deref() == Some(id.as_str()))
                    .or_else(|| self.open.last().copied()),
                // The state after a node run, sent outside it: it belongs to that node run
                // (`updates` names it), unless another one is open.
                Body::Event { kind, payload } if is_after_node(kind) => {
                    let named = payload.get("id").and_then(Value::as_str);
                    self.open.last().copied().or_else(|| {
                        self.exited.filter(|&i| {
                            named.is_none_or(|name| nodes[i].name.as_deref() == Some(name))
                        })
                    })
                }
                _ => self.open.last().copied().or(self.loose),
            },
        };
        if let Some(i) = found {
            return i;
        }
        // A node run whose node_enter was not seen, or frames outside every node run.
        let node = LoomNodeRun { node_id: node_id.map(str::to_string), ..LoomNodeRun::default() };
        let i = self.new_node(line, node);
        if node_id.is_some() {
            self.open.push(i);
            self.loose = None;
        } else if !matches!(body, Body::NodeExit { .. }) {
            self.loose = Some(i);
        }
        i
    }

    fn node_frame(&mut self, envelope: Envelope, body: Body, line: usize) {
        let i = self.target(envelope.node_id.as_deref(), &body, line);
        let last = self.session.runs.len() - 1;
        let run = &mut self.session.runs[last];
        if let Body::Usage { prompt, completion, total } = &body {
            run.usage.push(LoomUsage {
                prompt_tokens: *prompt,
                completion_tokens: *completion,
                total_tokens: *total,
                line,
            });
        }
        let node = &mut run.node_runs[i];
        node.first_event_id = node.first_event_id.or(envelope.event_id);
        node.last_event_id = envelope.event_id.or(node.last_event_id);
        match body {
            Body::RunStart { .. } | Body::Reply { .. } | Body::NodeEnter { .. } => {}
            Body::NodeExit { id, result, tool_results } => {
                node.name.get_or_insert(id);
                node.result = Some(result);
                node.tool_results = tool_results;
                node.exit_line = Some(line);
                self.exited = Some(i);
                self.open.retain(|&j| j != i);
                if self.loose == Some(i) {
                    self.loose = None;
                }
            }
            Body::Chunk { thought, content, block, text } => {
                let blocks = if thought { &mut node.thought_blocks } else { &mut node.text_blocks };
                let existing = match block {
                    Some(_) => blocks.iter().rposition(|b| b.block == block),
                    None => blocks.len().checked_sub(1).filter(|&j| blocks[j].block.is_none()),
                };
                let j = existing.unwrap_or_else(|| {
                    blocks.push(LoomBlock { block, text: String::new(), line });
                    blocks.len() - 1
                });
                let b = &mut blocks[j];
                b.text.push_str(&content);
                if let Some(text) = text {
                    b.text = text;
                }
                b.line = line;
            }
            Body::Usage { prompt, completion, total } => node.usage.push(LoomUsage {
                prompt_tokens: prompt,
                completion_tokens: completion,
                total_tokens: total,
                line,
            }),
            Body::ToolCallChunk { call_id, name, delta } => {
                let existing = node.tool_calls.iter().rposition(|c| {
                    !c.complete
                        && match (&call_id, &c.call_id) {
                            (Some(a), Some(b)) => a == b,
                            (None, _) => name.is_none() || c.name == name,
                            (Some(_), None) => false,
                        }
                });
                let call = call_slot(&mut node.tool_calls, existing, call_id, line);
                call.arguments_text.push_str(&delta);
                if call.name.is_none() {
                    call.name = name;
                }
                call.line = line;
            }
            Body::ToolCall { call_id, name, arguments } => {
                let existing = node
                    .tool_calls
                    .iter()
                    .rposition(|c| !c.complete && c.call_id == call_id)
                    .filter(|&j| call_id.is_some() || node.tool_calls[j].call_id.is_none());
                let call = call_slot(&mut node.tool_calls, existing, call_id, line);
                call.name = Some(name);
                call.arguments = arguments;
                call.complete = true;
                call.line = line;
            }
            Body::ToolStart { call_id, name } => {
                node.tool_starts.push(LoomToolStart { call_id, name, line });
            }
            Body::ToolOutput { call_id, name, content } => {
                node.tool_outputs.push(LoomToolOutput { call_id, name, content, line });
            }
            Body::ToolEnd { call_id, name, result, is_error } => {
                node.tool_ends.push(LoomToolEnd { call_id, name, result, is_error, line });
            }
            Body::ToolApproval { call_id, name, arguments } => {
                node.approvals.push(LoomToolApproval { call_id, name, arguments, line });
            }
            Body::Custom { value } => node.customs.push(LoomCustom { value, line }),
            Body::Event { kind, payload } => {
                node.events.push(LoomEvent { kind, payload, event_id: envelope.event_id, line });
            }
            Body::Other { kind, payload } => {
                node.other.push(LoomEvent { kind, payload, event_id: envelope.event_id, line });
            }
        }
    }
}

/// Whether frames of `kind` report the state after a node run (§4.2: `values`, `updates`,
/// `checkpoint`).
fn is_after_node(kind: &str) -> bool {
    matches!(kind, "values" | "updates" | "checkpoint")
}

/// Reads one line into its envelope and checked payload.
/// The call at `existing`, or a new open call for `call_id` appended to `calls`.
fn call_slot(
    calls: &mut Vec<LoomToolCall>,
    existing: Option<usize>,
    call_id: Option<String>,
    line: usize,
) -> &mut LoomToolCall {
    let j = existing.unwrap_or_else(|| {
        calls.push(LoomToolCall {
            call_id,
            name: None,
            arguments: Value::Null,
            arguments_text: String::new(),
            complete: false,
            line,
        });
        calls.len() - 1
    });
    &mut calls[j]
}

fn parse(line: &str) -> Result<(Envelope, Body), String> {
    let value: Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let Value::Object(mut map) = value else {
        return Err("not a JSON object".to_string());
    };
    let kind: String = if let Some(kind) = map.remove("type") {
        match kind {
            Value::String(kind) => kind,
            _ => return Err("`type` must be a string".to_string()),
        }
    } else if map.contains_key("reply") {
        "reply".to_string()
    } else if map.len() == 1 && map.values().all(Value::is_object) {
        // The single-key export form: {"TaskStart": {...}}.
        let Some((key, Value::Object(inner))) = map.into_iter().next() else {
            return Err("not a JSON object".to_string());
        };
        map = inner;
        type_of_key(&key).map_or(key, str::to_string)
    } else {
        return Err("no `type`, no `reply`, and not a single-key export event".to_string());
    };
    // got_expand's payload has its own `node_id` (the graph node): never the envelope's.
    let envelope = Envelope {
        session_id: take_opt_str(&mut map, "session_id").map_err(|e| format!("envelope: {e}"))?,
        node_id: if kind == "got_expand" {
            None
        } else {
            take_opt_str(&mut map, "node_id").map_err(|e| format!("envelope: {e}"))?
        },
        event_id: match map.remove("event_id") {
            None | Some(Value::Null) => None,
            Some(v) => {
                Some(v.as_u64().ok_or("envelope: `event_id` must be a non-negative integer")?)
            }
        },
    };
    let body = body(&kind, map).map_err(|e| format!("{kind}: {e}"))?;
    Ok((envelope, body))
}

fn body(kind: &str, mut p: Map<String, Value>) -> Result<Body, String> {
    let p = &mut p;
    Ok(match kind {
        "reply" => Body::Reply { text: take_str(p, "reply")?, status: take_opt_str(p, "status")? },
        "run_start" => Body::RunStart {
            run_id: take_opt_str(p, "run_id")?,
            message: take_opt_str(p, "message")?,
            agent: take_opt_str(p, "agent")?,
        },
        "node_enter" => Body::NodeEnter { id: take_str(p, "id")? },
        "node_exit" => Body::NodeExit {
            id: take_str(p, "id")?,
            result: serde_json::from_value(take(p, "result")?)
                .map_err(|_| "`result` must be \"Ok\" or {\"Err\": string}".to_string())?,
            tool_results: match p.remove("tool_results") {
                None | Some(Value::Null) => Vec::new(),
                Some(v) => strings(v, "tool_results")?,
            },
        },
        "message_chunk" | "thought_chunk" => {
            take_opt_str(p, "id")?;
            Body::Chunk {
                thought: kind == "thought_chunk",
                content: take_str(p, "content")?,
                block: take_opt_u64(p, "block")?,
                text: take_opt_str(p, "text")?,
            }
        }
        "usage" => Body::Usage {
            prompt: take_u64(p, "prompt_tokens")?,
            completion: take_u64(p, "completion_tokens")?,
            total: take_u64(p, "total_tokens")?,
        },
        "tool_call_chunk" => Body::ToolCallChunk {
            call_id: take_opt_str(p, "call_id")?,
            name: take_opt_str(p, "name")?,
            delta: take_str(p, "arguments_delta")?,
        },
        "tool_call" => Body::ToolCall {
            call_id: take_opt_str(p, "call_id")?,
            name: take_str(p, "name")?,
            arguments: take(p, "arguments")?,
        },
        "tool_start" => {
            Body::ToolStart { call_id: take_opt_str(p, "call_id")?, name: take_str(p, "name")? }
        }
        "tool_output" => Body::ToolOutput {
            call_id: take_opt_str(p, "call_id")?,
            name: take_str(p, "name")?,
            content: take_str(p, "content")?,
        },
        "tool_end" => Body::ToolEnd {
            call_id: take_opt_str(p, "call_id")?,
            name: take_str(p, "name")?,
            result: take_str(p, "result")?,
            is_error: match take(p, "is_error")? {
                Value::Bool(b) => b,
                _ => return Err("`is_error` must be a boolean".to_string()),
            },
        },
        "tool_approval" => Body::ToolApproval {
            call_id: take_opt_str(p, "call_id")?,
            name: take_str(p, "name")?,
            arguments: take(p, "arguments")?,
        },
        "custom" => Body::Custom { value: take(p, "value")? },
        _ => match known_type(kind) {
            Some(known) => {
                check_event(known, p)?;
                Body::Event { kind: known.to_string(), payload: std::mem::take(p) }
            }
            None => Body::Other { kind: kind.to_string(), payload: std::mem::take(p) },
        },
    })
}

/// Checks the payload of a state, checkpoint, ToT or GoT frame (the fields §4.2 lists, with
/// their types; more fields are allowed).
fn check_event(kind: &str, p: &Map<String, Value>) -> Result<(), String> {
    use Shape::{Any, Int, Nums, Str, Strs};
    let fields: &[(&str, Shape)] = match kind {
        "values" => &[("state", Any)],
        "updates" => &[("id", Str), ("state", Any)],
        "checkpoint" => &[("checkpoint_id", Str), ("state", Any)],
        "tot_expand" => &[("candidates", Strs)],
        "tot_evaluate" => &[("chosen", Int), ("scores", Nums)],
        "tot_backtrack" => &[("reason", Str), ("to_depth", Int)],
        "got_plan" => &[("node_count", Int), ("edge_count", Int), ("node_ids", Strs)],
        "got_node_start" => &[("id", Str)],
        "got_node_complete" => &[("id", Str), ("result_summary", Str)],
        "got_node_failed" => &[("id", Str), ("error", Str)],
        "got_expand" => &[("node_id", Str), ("nodes_added", Int), ("edges_added", Int)],
        _ => &[],
    };
    for (key, shape) in fields {
        let v = p.get(*key).ok_or_else(|| format!("missing `{key}`"))?;
        let ok = match shape {
            Any => true,
            Str => v.is_string(),
            Int => v.is_u64(),
            Strs => v.as_array().is_some_and(|a| a.iter().all(Value::is_string)),
            Nums => v.as_array().is_some_and(|a| a.iter().all(|x| x.is_number() || x.is_null())),
        };
        if !ok {
            return Err(format!("`{key}` must be {}", shape.name()));
        }
    }
    if kind == "checkpoint" {
        for key in ["thread_id", "checkpoint_ns"] {
            if p.get(key).is_some_and(|v| !v.is_string() && !v.is_null()) {
                return Err(format!("`{key}` must be a string"));
            }
        }
        for key in ["timestamp", "step"] {
            if p.get(key).is_some_and(|v| !v.is_number() && !v.is_string() && !v.is_null()) {
                return Err(format!("`{key}` must be a number"));
            }
        }
    }
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Shape {
    Any,
    Str,
    Int,
    Strs,
    Nums,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::Any => "present",
            Shape::Str => "a string",
            Shape::Int => "a non-negative integer",
            Shape::Strs => "an array of strings",
            Shape::Nums => "an array of numbers",
        }
    }
}

fn take(p: &mut Map<String, Value>, key: &str) -> Result<Value, String> {
    p.remove(key).ok_or_else(|| format!("missing `{key}`"))
}

fn take_str(p: &mut Map<String, Value>, key: &str) -> Result<String, String> {
    match take(p, key)? {
        Value::String(s) => Ok(s),
        _ => Err(format!("`{key}` must be a string")),
    }
}

fn take_opt_str(p: &mut Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match p.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("`{key}` must be a string")),
    }
}

fn take_u64(p: &mut Map<String, Value>, key: &str) -> Result<u64, String> {
    take(p, key)?.as_u64().ok_or_else(|| format!("`{key}` must be a non-negative integer"))
}

fn take_opt_u64(p: &mut Map<String, Value>, key: &str) -> Result<Option<u64>, String> {
    match p.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => {
            v.as_u64().map(Some).ok_or_else(|| format!("`{key}` must be a non-negative integer"))
        }
    }
}

fn strings(v: Value, key: &str) -> Result<Vec<String>, String> {
    let error = || format!("`{key}` must be an array of strings");
    let Value::Array(items) = v else { return Err(error()) };
    items
        .into_iter()
        .map(|x| match x {
            Value::String(s) => Ok(s),
            _ => Err(error()),
        })
        .collect()
}

/// Turns one session's Loom frames (either form) into a [`Transcript`]: the inverse of
/// [`LoomEncoder`](super::LoomEncoder) for the facts a transcript keeps, so that
/// `decode(encode(events)) == Transcript::from_events(events)`.
///
/// - texts and thinking: one per block (the chunks' `block` number; chunks without one form one
///   block per node run), ordered by each block's last chunk;
/// - tool calls: the `tool_call` frames (and calls seen only as chunks), in order;
/// - tool results: the results the model received, in its order: when the stream carries Weft's
///   extensions, each node run's `node_exit` `tool_results` (and `custom`
///   `{"kind":"tool_results"}`) hands over the named results; otherwise every `tool_end`, in
///   order;
/// - pending: the calls of the last run's `tool_approval` frames and
///   `custom {"kind":"awaiting_tool_execution"}` (cleared by each `run_start`);
/// - status: the last reply's `status`.
pub fn decode(frames: &[Frame]) -> Result<Transcript, LoomDecodeError> {
    let mut receiver = LoomReceiver::new();
    for frame in frames {
        receiver.push_line(&frame.data);
    }
    let transcript = receiver.finish();
    if let Some(error) = transcript.errors.first() {
        return Err(LoomDecodeError::Line(error.clone()));
    }
    match transcript.sessions.as_slice() {
        [] => Ok(Transcript::default()),
        [session] => session.transcript(),
        sessions => Err(LoomDecodeError::SeveralSessions(
            sessions.iter().map(|s| s.session_id.clone()).collect(),
        )),
    }
}

impl LoomSession {
    /// This session as a [`Transcript`] (see [`decode`]).
    pub fn transcript(&self) -> Result<Transcript, LoomDecodeError> {
        let mut t = Transcript::default();
        let nodes: Vec<&LoomNodeRun> = self.runs.iter().flat_map(|r| &r.node_runs).collect();

        let mut texts: Vec<&LoomBlock> = nodes.iter().flat_map(|n| &n.text_blocks).collect();
        texts.sort_by_key(|b| b.line);
        t.texts = texts.into_iter().map(|b| b.text.clone()).collect();
        let mut thinking: Vec<&LoomBlock> = nodes.iter().flat_map(|n| &n.thought_blocks).collect();
        thinking.sort_by_key(|b| b.line);
        t.thinking = thinking.into_iter().map(|b| b.text.clone()).collect();

        let mut calls: Vec<&LoomToolCall> = nodes.iter().flat_map(|n| &n.tool_calls).collect();
        calls.sort_by_key(|c| c.line);
        t.tool_calls = calls
            .into_iter()
            .map(|c| CallRecord {
                id: c.call_id.clone().unwrap_or_default(),
                name: c.name.clone().unwrap_or_default(),
                arguments: c.arguments.clone(),
            })
            .collect();

        t.tool_results = delivered_results(&nodes, self.uses_weft_extensions(&nodes));

        for run in &self.runs {
            if run.started {
                t.pending.clear();
            }
            let mut pending: Vec<(usize, Vec<String>)> = Vec::new();
            for node in &run.node_runs {
                for a in &node.approvals {
                    pending.push((a.line, vec![a.call_id.clone().unwrap_or_default()]));
                }
                for c in &node.customs {
                    if c.value.get("kind").and_then(Value::as_str)
                        == Some("awaiting_tool_execution")
                    {
                        let ids = c
                            .value
                            .get("tool_calls")
                            .and_then(Value::as_array)
                            .map(|calls| {
                                calls
                                    .iter()
                                    .filter_map(|c| c.get("id").and_then(Value::as_str))
                                    .map(str::to_string)
                                    .collect()
                            })
                            .unwrap_or_default();
                        pending.push((c.line, ids));
                    }
                }
            }
            pending.sort_by_key(|(line, _)| *line);
            t.pending.extend(pending.into_iter().flat_map(|(_, ids)| ids));
            if let Some(LoomReply { status: Some(status), line, .. }) = &run.reply {
                let parsed = serde_json::from_value::<SessionStatus>(Value::String(status.clone()))
                    .map_err(|_| LoomDecodeError::UnknownStatus {
                        line: *line,
                        status: status.clone(),
                    })?;
                t.status = Some(parsed);
            }
        }
        Ok(t)
    }

    /// Whether the frames carry the extensions a [`LoomEncoder`](super::LoomEncoder) adds (chunk
    /// `block`s, `node_exit` `tool_results`, reply `status`).
    fn uses_weft_extensions(&self, nodes: &[&LoomNodeRun]) -> bool {
        self.runs.iter().any(|r| r.reply.as_ref().is_some_and(|reply| reply.status.is_some()))
            || nodes.iter().any(|n| {
                !n.tool_results.is_empty()
                    || n.text_blocks.iter().chain(&n.thought_blocks).any(|b| b.block.is_some())
                    || n.customs.iter().any(|c| tool_results_custom(&c.value).is_some())
            })
    }
}

/// The call ids of a `custom {"kind":"tool_results","tool_call_ids":[…]}` value.
fn tool_results_custom(value: &Value) -> Option<Vec<String>> {
    if value.get("kind").and_then(Value::as_str) != Some("tool_results") {
        return None;
    }
    let ids = value.get("tool_call_ids")?.as_array()?;
    Some(ids.iter().filter_map(Value::as_str).map(str::to_string).collect())
}

/// The results the model received, in its order.
///
/// With Weft's extensions: a `tool_end` is a result sent when it is known (on a local
/// execution's end, or as the model receives it); a node run's `tool_results` (on its
/// `node_exit`, or a `custom` `tool_results` outside nodes) says which results it handed to the
/// model, in order. For each id handed over, the result is the node run's own `tool_end` for it
/// if it has one (the last), which then supersedes the earliest earlier one for that id;
/// otherwise the earliest earlier `tool_end` for it not handed over yet.
fn delivered_results(nodes: &[&LoomNodeRun], extensions: bool) -> Vec<ResultRecord> {
    let record = |e: &LoomToolEnd| ResultRecord {
        id: e.call_id.clone().unwrap_or_default(),
        output: e.result.clone(),
        is_error: e.is_error,
    };
    if !extensions {
        let mut ends: Vec<&LoomToolEnd> = nodes.iter().flat_map(|n| &n.tool_ends).collect();
        ends.sort_by_key(|e| e.line);
        return ends.into_iter().map(record).collect();
    }
    enum Item<'a> {
        End(usize, &'a LoomToolEnd),
        Deliver(usize, &'a [String]),
        DeliverOwned(usize, Vec<String>),
    }
    let mut items: Vec<(usize, Item<'_>)> = Vec::new();
    for (k, node) in nodes.iter().enumerate() {
        items.extend(node.tool_ends.iter().map(|e| (e.line, Item::End(k, e))));
        if let Some(line) = node.exit_line
            && !node.tool_results.is_empty()
        {
            items.push((line, Item::Deliver(k, &node.tool_results)));
        }
        for c in &node.customs {
            if let Some(ids) = tool_results_custom(&c.value) {
                items.push((c.line, Item::DeliverOwned(k, ids)));
            }
        }
    }
    items.sort_by_key(|(line, _)| *line);
    let mut pool: Vec<(usize, &LoomToolEnd)> = Vec::new();
    let mut out = Vec::new();
    let mut deliver = |pool: &mut Vec<(usize, &LoomToolEnd)>, k: usize, ids: &[String]| {
        for id in ids {
            let same = |e: &LoomToolEnd| e.call_id.as_deref() == Some(id.as_str());
            let own = pool.iter().rposition(|(n, e)| *n == k && same(e));
            let taken = match own {
                Some(i) => {
                    let taken = pool.remove(i);
                    if let Some(j) = pool.iter().position(|(n, e)| *n != k && same(e)) {
                        pool.remove(j);
                    }
                    Some(taken)
                }
                None => pool.iter().position(|(_, e)| same(e)).map(|i| pool.remove(i)),
            };
            if let Some((_, e)) = taken {
                out.push(record(e));
            }
        }
    };
    for (_, item) in items {
        match item {
            Item::End(k, e) => pool.push((k, e)),
            Item::Deliver(k, ids) => deliver(&mut pool, k, ids),
            Item::DeliverOwned(k, ids) => deliver(&mut pool, k, &ids),
        }
    }
    out
}
