//! [`LoomEncoder`]: the canonical events as Loom frames (see the module documentation for the
//! mapping and the extensions).

use std::collections::HashMap;
use std::sync::Arc;

use std::hash::Hasher;

use fnv::FnvHasher;
use serde::Serialize;
use weft_core::{AgentEvent, CheckpointTaken, Message, ModeProgress, Role, ToolCall};

use super::export::{Fields, export_key, json};
use crate::framing::write_u64;
use crate::{Encoder, Frame, Framing, write_str};

/// The FNV-1a hash `state` goes on to after the bytes of `text`.
fn fnv(state: u64, text: &str) -> u64 {
    let mut hasher = FnvHasher::with_key(state);
    hasher.write(text.as_bytes());
    hasher.finish()
}

/// Renders canonical [`AgentEvent`]s as Loom stream-protocol frames, with the envelope
/// (`session_id`, `node_id`, `event_id`) on every frame and the `reply` frame closing each run.
///
/// [`LoomEncoder::new`] writes the `type` + payload form (§4), [`LoomEncoder::export`] the
/// single-key export form (§6). One encoder serves one session's stream: one run, or several
/// runs in sequence (`event_id` keeps increasing across them). Call [`Encoder::finish`] at the
/// end of the stream: a `run_start` still waiting for the user's message is sent then.
#[derive(Debug, Default)]
pub struct LoomEncoder {
    /// Single-key export form instead of `type` + payload.
    export: bool,
    /// The last `event_id` given.
    event_id: u64,
    /// The session, from `session_start`.
    session_id: Option<String>,
    /// A `run_start` waiting for the run's user message.
    pending_run: Option<PendingRun>,
    /// Node runs entered and not exited, innermost last.
    nodes: Vec<OpenNode>,
    /// Open text (`false`) and thinking (`true`) blocks with their canonical block index (a
    /// message has a few open at most: a list is quicker to search than a map to hash).
    blocks: Vec<(bool, u32, Block)>,
    /// The next block number (stream-wide).
    next_block: u64,
    /// Open tool-call blocks by canonical block index: (call id, tool name).
    calls: HashMap<u32, (String, String)>,
    /// Tool names by call id, for `tool_output` (whose canonical event has no name).
    tool_names: HashMap<String, String>,
    /// Results sent as `tool_end` from a local execution, not yet handed to the model.
    executed: Vec<Executed>,
    /// Each assistant message of the current run with its node run, in order (scratch calls
    /// of a reasoning mode included: they are not among the run's messages).
    assistant_nodes: Vec<(Arc<Message>, Option<String>)>,
    /// The node run of the event being encoded, as its record says ([`Encoder::set_node`]);
    /// `None` until a caller gives records' nodes: then the innermost open node run.
    record_node: Option<Option<Arc<str>>>,
    /// The envelope of delta frames as written, while nothing it depends on changes (see
    /// [`DeltaEnvelope`]); `None` once something may have.
    delta_envelope: Option<DeltaEnvelope>,
}

/// What every delta frame of a run of deltas repeats, escaped once: `{"session_id":…,
/// "node_id":…,"event_id":` before the frame's numbers and text, `,"id":…` after them. Made
/// again after any event that is not a delta (a node run entered or left, a new session) and
/// when the record's node run changes.
#[derive(Debug)]
struct DeltaEnvelope {
    head: Vec<u8>,
    node_name: Vec<u8>,
}

#[derive(Debug)]
struct PendingRun {
    run_id: String,
    agent: String,
}

#[derive(Debug)]
struct OpenNode {
    name: String,
    node_id: String,
    /// Call ids whose results this node run handed to the model, in order.
    delivered: Vec<String>,
}

#[derive(Debug)]
struct Block {
    number: u64,
    /// How many bytes of text the chunks sent so far.
    sent_len: usize,
    /// A hash of that text (FNV-1a, which reads bytes as one stream: the chunks' hash is the
    /// whole text's), to check the block's end against it without keeping a second copy.
    sent_hash: u64,
    /// Chunks sent.
    chunks: usize,
}

impl Block {
    /// A chunk of `delta` was sent.
    fn note(&mut self, delta: &str) {
        self.sent_len += delta.len();
        self.sent_hash = fnv(self.sent_hash, delta);
        self.chunks += 1;
    }
    /// Whether `text` starts with what the chunks sent; the rest of it if so.
    fn rest<'t>(&self, text: &'t str) -> Option<&'t str> {
        let said = text.get(..self.sent_len)?;
        (fnv(FnvHasher::default().finish(), said) == self.sent_hash).then(|| &text[self.sent_len..])
    }
}

#[derive(Debug)]
struct Executed {
    call_id: String,
    output: String,
    is_error: bool,
}

/// Whose `node_id` a frame's envelope carries.
enum Node<'a> {
    /// The innermost open node run's, if any.
    Current,
    /// This one.
    Id(Option<&'a str>),
}

impl LoomEncoder {
    /// An encoder of the `type` + payload form (§4), with the envelope.
    pub fn new() -> Self {
        Self::default()
    }

    /// An encoder of the single-key export form (§6): each event frame is
    /// `{"<Key>": {payload…, session_id, node_id, event_id}}`; the reply frame is the same as in
    /// the `type` + payload form.
    pub fn export() -> Self {
        Self { export: true, ..Self::default() }
    }

    /// The open node run the current event belongs to: the one its record names when the
    /// caller gives records' nodes, else the innermost.
    fn current_index(&self) -> Option<usize> {
        match &self.record_node {
            Some(Some(id)) => self.nodes.iter().rposition(|n| *n.node_id == **id),
            Some(None) => None,
            None => self.nodes.len().checked_sub(1),
        }
    }

    /// The `node_id` of the current event's node run (even one whose `node_enter` this encoder
    /// did not see).
    fn current_id(&self) -> Option<&str> {
        match &self.record_node {
            Some(id) => id.as_deref(),
            None => self.nodes.last().map(|n| n.node_id.as_str()),
        }
    }

    /// Appends one frame of type `kind`.
    fn frame(&mut self, kind: &str, payload: Fields, node: Node<'_>, out: &mut Vec<Frame>) {
        self.event_id += 1;
        let node_id = match node {
            Node::Current => self.current_id(),
            Node::Id(id) => id,
        };
        let envelope = Fields::new()
            .put_opt("session_id", self.session_id.as_deref())
            .put_opt("node_id", node_id)
            .put("event_id", &self.event_id);
        let data = if self.export {
            let key = export_key(kind).unwrap_or(kind);
            format!("{{{}:{}}}", json(key), payload.extend(envelope).object())
        } else {
            envelope.put("type", kind).extend(payload).object()
        };
        out.push(Frame::raw(data));
    }

    /// The innermost open node run's name (the payload `id` of content frames).
    fn node_name(&self) -> Option<&str> {
        self.current_index().map(|i| self.nodes[i].name.as_str())
    }

    /// Sends the buffered `run_start`, with the user's message when there is one.
    fn flush_run(&mut self, message: Option<String>, out: &mut Vec<Frame>) {
        if let Some(run) = self.pending_run.take() {
            let payload = Fields::new()
                .put("run_id", &run.run_id)
                .put_opt("message", message.as_deref())
                .put("agent", &run.agent);
            self.frame("run_start", payload, Node::Id(None), out);
        }
    }

    /// Handles the start of a run and its user message; `true` when `event` is done with.
    fn run_start(&mut self, event: &AgentEvent, out: &mut Vec<Frame>) -> bool {
        match event {
            AgentEvent::SessionStart { session_id, run_id, agent, .. } => {
                self.flush_run(None, out);
                self.session_id = Some(session_id.clone());
                self.pending_run =
                    Some(PendingRun { run_id: run_id.clone(), agent: agent.clone() });
                self.assistant_nodes.clear();
                true
            }
            AgentEvent::MessageStart { role: Role::User } if self.pending_run.is_some() => true,
            AgentEvent::MessageEnd { message } if self.pending_run.is_some() => match &**message {
                Message::User(m) => {
                    self.flush_run(Some(m.text_content()), out);
                    true
                }
                _ => {
                    self.flush_run(None, out);
                    false
                }
            },
            _ => {
                self.flush_run(None, out);
                false
            }
        }
    }

    /// A text (`thinking == false`) or thinking delta.
    fn delta(&mut self, thinking: bool, index: u32, delta: &str, out: &mut Vec<Frame>) {
        if let Some(number) = self.take_delta(thinking, index, delta) {
            self.chunk(thinking, number, delta, None, out);
        }
    }

    /// Opens the block at `index` if needed and, for a non-empty `delta`, records it as a chunk
    /// of that block: the block's number when a chunk is to be sent.
    fn take_delta(&mut self, thinking: bool, index: u32, delta: &str) -> Option<u64> {
        let block = self.open_block(thinking, index);
        if delta.is_empty() {
            return None;
        }
        block.note(delta);
        Some(block.number)
    }

    /// A text or thinking delta written straight into `out` (the hot path of
    /// [`Encoder::encode_to`]): the same bytes as [`Self::chunk`]'s frame, without building it.
    fn delta_to(
        &mut self,
        thinking: bool,
        index: u32,
        delta: &str,
        seq: u64,
        framing: Framing,
        out: &mut Vec<u8>,
    ) {
        let Some(number) = self.take_delta(thinking, index, delta) else { return };
        self.delta_frame_to(seq, framing, out, |_, envelope, out| {
            out.extend_from_slice(if thinking {
                b",\"type\":\"thought_chunk\",\"content\":"
            } else {
                b",\"type\":\"message_chunk\",\"content\":"
            });
            write_str(delta, out);
            out.extend_from_slice(&envelope.node_name);
            out.extend_from_slice(b",\"block\":");
            write_u64(number, out);
        });
    }

    /// A tool call's arguments delta written straight into `out` (the hot path of
    /// [`Encoder::encode_to`]): the same bytes as [`Self::toolcall_delta`]'s frame.
    fn toolcall_delta_to(
        &mut self,
        index: u32,
        delta: &str,
        seq: u64,
        framing: Framing,
        out: &mut Vec<u8>,
    ) {
        if delta.is_empty() {
            return;
        }
        self.delta_frame_to(seq, framing, out, |this, _, out| {
            out.extend_from_slice(b",\"type\":\"tool_call_chunk\"");
            if let Some((call_id, name)) = this.calls.get(&index) {
                out.extend_from_slice(b",\"call_id\":");
                write_str(call_id, out);
                out.extend_from_slice(b",\"name\":");
                write_str(name, out);
            }
            out.extend_from_slice(b",\"arguments_delta\":");
            write_str(delta, out);
        });
    }

    /// One delta frame written into `out`: the framing, the envelope as things stand (kept for
    /// the next delta), the next `event_id`, then what `payload` writes, and the closing brace.
    fn delta_frame_to(
        &mut self,
        seq: u64,
        framing: Framing,
        out: &mut Vec<u8>,
        payload: impl FnOnce(&Self, &DeltaEnvelope, &mut Vec<u8>),
    ) {
        self.event_id += 1;
        let envelope = match self.delta_envelope.take() {
            Some(envelope) => envelope,
            None => self.make_delta_envelope(),
        };
        framing.open(Some(seq), out);
        out.extend_from_slice(&envelope.head);
        write_u64(self.event_id, out);
        payload(self, &envelope, out);
        out.push(b'}');
        framing.close(out);
        self.delta_envelope = Some(envelope);
    }

    /// The envelope of the next delta frames, as things stand.
    fn make_delta_envelope(&self) -> DeltaEnvelope {
        let mut head = b"{".to_vec();
        if let Some(session_id) = &self.session_id {
            head.extend_from_slice(b"\"session_id\":");
            write_str(session_id, &mut head);
            head.push(b',');
        }
        if let Some(node_id) = self.current_id() {
            head.extend_from_slice(b"\"node_id\":");
            write_str(node_id, &mut head);
            head.push(b',');
        }
        head.extend_from_slice(b"\"event_id\":");
        let mut node_name = Vec::new();
        if let Some(name) = self.node_name() {
            node_name.extend_from_slice(b",\"id\":");
            write_str(name, &mut node_name);
        }
        DeltaEnvelope { head, node_name }
    }

    /// The end of a text or thinking block: whatever its chunks did not say yet.
    fn block_end(&mut self, thinking: bool, index: u32, text: &str, out: &mut Vec<Frame>) {
        let at = self.block_at(thinking, index);
        let (_, _, block) = self.blocks.swap_remove(at);
        match block.rest(text) {
            Some(rest) if !rest.is_empty() || block.chunks == 0 => {
                self.chunk(thinking, block.number, rest, None, out);
            }
            Some(_) => {}
            // The block's text is not what its deltas said: the chunk restates it whole.
            None => self.chunk(thinking, block.number, "", Some(text), out),
        }
    }

    /// The number of the open block at `index`, opening one if needed.
    fn block(&mut self, thinking: bool, index: u32) -> u64 {
        self.open_block(thinking, index).number
    }

    /// The open block at `index`, opened if needed.
    fn open_block(&mut self, thinking: bool, index: u32) -> &mut Block {
        let at = self.block_at(thinking, index);
        &mut self.blocks[at].2
    }

    /// Where the open block at `index` is in `blocks`, opened if needed.
    fn block_at(&mut self, thinking: bool, index: u32) -> usize {
        if let Some(at) = self.blocks.iter().position(|(t, i, _)| (*t, *i) == (thinking, index)) {
            return at;
        }
        let number = self.next_block;
        self.next_block += 1;
        let sent_hash = FnvHasher::default().finish();
        self.blocks.push((thinking, index, Block { number, sent_len: 0, sent_hash, chunks: 0 }));
        self.blocks.len() - 1
    }

    fn chunk(
        &mut self,
        thinking: bool,
        block: u64,
        content: &str,
        whole: Option<&str>,
        out: &mut Vec<Frame>,
    ) {
        let payload = Fields::new()
            .put("content", content)
            .put_opt("id", self.node_name())
            .put("block", &block)
            .put_opt("text", whole);
        let kind = if thinking { "thought_chunk" } else { "message_chunk" };
        self.frame(kind, payload, Node::Current, out);
    }

    /// A result the model receives (a `toolResult` message): a `tool_end` unless the same result
    /// was already sent from its execution; recorded as delivered by the current node run.
    fn tool_result(&mut self, r: &weft_core::ToolResultMessage, out: &mut Vec<Frame>) {
        let text = r.text_content();
        let sent = self
            .executed
            .iter()
            .position(|e| e.call_id == r.tool_call_id)
            .map(|i| self.executed.remove(i))
            .is_some_and(|e| e.output == text && e.is_error == r.is_error);
        if !sent {
            let payload = Fields::new()
                .put("call_id", &r.tool_call_id)
                .put("name", &r.tool_name)
                .put("result", &text)
                .put("is_error", &r.is_error);
            self.frame("tool_end", payload, Node::Current, out);
        }
        match self.current_index() {
            Some(i) => self.nodes[i].delivered.push(r.tool_call_id.clone()),
            None => {
                let value = Fields::new()
                    .put("kind", "tool_results")
                    .put("tool_call_ids", &[&r.tool_call_id]);
                let payload = Fields::new().raw("value", &value.object());
                self.frame("custom", payload, Node::Current, out);
            }
        }
    }

    fn session_end(&mut self, status: &str, messages: &[Arc<Message>], out: &mut Vec<Frame>) {
        // The run's final answer: its last assistant message that has text.
        let mut reply: Option<(&Arc<Message>, String)> = None;
        for message in messages {
            if let Message::Assistant(m) = &**message {
                let text = m.text();
                if !text.is_empty() {
                    reply = Some((message, text));
                }
            }
        }
        let last_node = || self.assistant_nodes.last().and_then(|(_, n)| n.clone());
        let (text, node_id) = match reply {
            Some((message, text)) => {
                let node = self
                    .assistant_nodes
                    .iter()
                    .rev()
                    .find(|(m, _)| Arc::ptr_eq(m, message) || m == message)
                    .map(|(_, n)| n.clone());
                (text, node.unwrap_or_else(last_node))
            }
            None => (String::new(), last_node()),
        };
        self.event_id += 1;
        let data = Fields::new()
            .put_opt("session_id", self.session_id.as_deref())
            .put_opt("node_id", node_id.as_deref())
            .put("event_id", &self.event_id)
            .put("reply", &text)
            .put("status", status)
            .object();
        out.push(Frame::raw(data));
        self.nodes.clear();
        self.blocks.clear();
        self.calls.clear();
        self.assistant_nodes.clear();
    }

    fn tool_calls(&mut self, kind: &str, calls: &[ToolCall], out: &mut Vec<Frame>) {
        for call in calls {
            let payload = Fields::new()
                .put("call_id", &call.id)
                .put("name", &call.name)
                .put("arguments", &call.arguments);
            self.frame(kind, payload, Node::Current, out);
        }
    }

    fn simple(&mut self, kind: &str, payload: Fields, out: &mut Vec<Frame>) {
        self.frame(kind, payload, Node::Current, out);
    }

    /// `node_enter`: a node run opens.
    fn node_enter(&mut self, name: &str, node_id: &str, out: &mut Vec<Frame>) {
        self.nodes.push(OpenNode {
            name: name.to_owned(),
            node_id: node_id.to_owned(),
            delivered: Vec::new(),
        });
        self.simple("node_enter", Fields::new().put("id", name), out);
    }

    /// `node_exit`: a node run closes, with the results it handed to the model.
    fn node_exit(&mut self, name: &str, node_id: &str, error: Option<&str>, out: &mut Vec<Frame>) {
        let delivered = match self.nodes.iter().rposition(|n| n.node_id == *node_id) {
            Some(i) => self.nodes.remove(i).delivered,
            None => Vec::new(),
        };
        let result = match error {
            None => json("Ok"),
            Some(e) => Fields::new().put("Err", e).object(),
        };
        let mut payload = Fields::new().put("id", name).raw("result", &result);
        if !delivered.is_empty() {
            payload = payload.put("tool_results", &delivered);
        }
        self.frame("node_exit", payload, Node::Id(Some(node_id)), out);
    }

    /// `usage` for an assistant message (noted with its node run, for the reply), the result
    /// frames for a tool result; nothing for a user message.
    fn message_end(&mut self, shared: &Arc<Message>, out: &mut Vec<Frame>) {
        match &**shared {
            Message::User(_) => {}
            Message::Assistant(m) => {
                let u = &m.usage;
                let prompt = u.total_input();
                let completion = u.output;
                let payload = Fields::new()
                    .put("prompt_tokens", &prompt)
                    .put("completion_tokens", &completion)
                    .put("total_tokens", &prompt.saturating_add(completion));
                self.simple("usage", payload, out);
                let node = self.current_id().map(str::to_string);
                self.assistant_nodes.push((Arc::clone(shared), node));
            }
            Message::ToolResult(r) => self.tool_result(r, out),
        }
    }

    /// A `tool_call_chunk` of a call's arguments (none for an empty delta).
    fn toolcall_delta(&mut self, index: u32, delta: &str, out: &mut Vec<Frame>) {
        if delta.is_empty() {
            return;
        }
        let call = self.calls.get(&index);
        let payload = Fields::new()
            .put_opt("call_id", call.map(|c| c.0.as_str()))
            .put_opt("name", call.map(|c| c.1.as_str()))
            .put("arguments_delta", delta);
        self.simple("tool_call_chunk", payload, out);
    }

    /// A `tool_output` chunk of a local execution (none for an empty delta).
    fn tool_execution_delta(&mut self, tool_call_id: &str, delta: &str, out: &mut Vec<Frame>) {
        if delta.is_empty() {
            return;
        }
        let name = self.tool_names.get(tool_call_id).map_or("", String::as_str);
        let payload =
            Fields::new().put("call_id", tool_call_id).put("name", name).put("content", delta);
        self.simple("tool_output", payload, out);
    }

    /// `tool_end` for a local execution, whose result is kept until the model is handed it.
    fn tool_execution_end(
        &mut self,
        tool_call_id: &str,
        tool_name: &str,
        output: &str,
        is_error: bool,
        out: &mut Vec<Frame>,
    ) {
        let payload = Fields::new()
            .put("call_id", tool_call_id)
            .put("name", tool_name)
            .put("result", output)
            .put("is_error", &is_error);
        self.simple("tool_end", payload, out);
        self.executed.push(Executed {
            call_id: tool_call_id.to_owned(),
            output: output.to_owned(),
            is_error,
        });
    }

    /// A `checkpoint` frame.
    fn checkpoint(&mut self, taken: &CheckpointTaken, out: &mut Vec<Frame>) {
        let CheckpointTaken { checkpoint_id, thread_id, checkpoint_ns, step, timestamp, state } =
            taken;
        let payload = Fields::new()
            .put("checkpoint_id", checkpoint_id)
            .put("timestamp", timestamp)
            .put("step", step)
            .put("state", state)
            .put("thread_id", thread_id)
            .put("checkpoint_ns", checkpoint_ns);
        self.simple("checkpoint", payload, out);
    }

    /// A reasoning mode's progress frame, of the kind the progress names.
    fn progress(&mut self, progress: &ModeProgress, out: &mut Vec<Frame>) {
        let payload = Fields::members(progress.fields());
        // `got_expand`'s payload has a `node_id` (the expanded graph node), which would
        // collide with the envelope's: that frame goes without the envelope `node_id`.
        let node = match progress {
            ModeProgress::GotExpand { .. } => Node::Id(None),
            _ => Node::Current,
        };
        self.frame(progress.kind(), payload, node, out);
    }
}

/// `{"kind": kind, key: value}`, in that order.
fn kind_value(kind: &str, key: &str, value: &(impl Serialize + ?Sized)) -> String {
    Fields::new().put("kind", kind).put(key, value).object()
}

impl Encoder for LoomEncoder {
    fn set_node(&mut self, node: Option<&Arc<str>>) {
        match &mut self.record_node {
            // The same node run as the last event's (deltas): nothing to change.
            Some(Some(current)) if node.is_some_and(|n| Arc::ptr_eq(n, current)) => {}
            slot => {
                *slot = Some(node.cloned());
                self.delta_envelope = None;
            }
        }
    }

    /// Text, thinking and tool-argument deltas (one per token) are written in place; other
    /// events go through their frames.
    fn encode_to(&mut self, seq: u64, event: &AgentEvent, framing: Framing, out: &mut Vec<u8>) {
        let hot = !self.export && self.pending_run.is_none();
        match event {
            AgentEvent::TextDelta { index, delta } if hot => {
                self.delta_to(false, *index, delta, seq, framing, out);
            }
            AgentEvent::ThinkingDelta { index, delta } if hot => {
                self.delta_to(true, *index, delta, seq, framing, out);
            }
            AgentEvent::ToolcallDelta { index, delta } if hot => {
                self.toolcall_delta_to(*index, delta, seq, framing, out);
            }
            _ => crate::encode_via_frames(self, seq, event, framing, out),
        }
    }

    fn encode(&mut self, event: &AgentEvent, out: &mut Vec<Frame>) {
        // Any other event may change what the delta frames' envelope says.
        self.delta_envelope = None;
        if self.run_start(event, out) {
            return;
        }
        match event {
            AgentEvent::SessionStart { .. } => {}
            AgentEvent::SessionEnd { session_id, status, messages, .. } => {
                self.session_id.get_or_insert_with(|| session_id.clone());
                self.session_end(status.as_str(), messages, out);
            }
            AgentEvent::AwaitingToolExecution { session_id, tool_calls } => {
                self.session_id.get_or_insert_with(|| session_id.clone());
                let value = kind_value("awaiting_tool_execution", "tool_calls", tool_calls);
                self.simple("custom", Fields::new().raw("value", &value), out);
            }
            AgentEvent::ApprovalRequired { session_id, tool_calls } => {
                self.session_id.get_or_insert_with(|| session_id.clone());
                self.tool_calls("tool_approval", tool_calls, out);
            }
            AgentEvent::NodeEnter { name, node_id } => self.node_enter(name, node_id, out),
            AgentEvent::NodeExit { name, node_id, error } => {
                self.node_exit(name, node_id, error.as_deref(), out);
            }
            AgentEvent::StepStart { .. }
            | AgentEvent::StepEnd { .. }
            | AgentEvent::MessageStart { .. } => {}
            AgentEvent::MessageEnd { message: shared } => self.message_end(shared, out),
            AgentEvent::TextStart { index } => {
                self.block(false, *index);
            }
            AgentEvent::TextDelta { index, delta } => self.delta(false, *index, delta, out),
            AgentEvent::TextEnd { index, text } => self.block_end(false, *index, text, out),
            AgentEvent::ThinkingStart { index } => {
                self.block(true, *index);
            }
            AgentEvent::ThinkingDelta { index, delta } => self.delta(true, *index, delta, out),
            AgentEvent::ThinkingEnd { index, thinking, .. } => {
                self.block_end(true, *index, thinking, out);
            }
            AgentEvent::ToolcallStart { index, id, name } => {
                self.calls.insert(*index, (id.clone(), name.clone()));
                let payload =
                    Fields::new().put("call_id", id).put("name", name).put("arguments_delta", "");
                self.simple("tool_call_chunk", payload, out);
            }
            AgentEvent::ToolcallDelta { index, delta } => self.toolcall_delta(*index, delta, out),
            AgentEvent::ToolcallEnd { index, tool_call } => {
                self.calls.remove(index);
                self.tool_names.insert(tool_call.id.clone(), tool_call.name.clone());
                self.tool_calls("tool_call", std::slice::from_ref(tool_call), out);
            }
            AgentEvent::ToolExecutionStart { tool_call_id, tool_name, .. } => {
                self.tool_names.insert(tool_call_id.clone(), tool_name.clone());
                let payload = Fields::new().put("call_id", tool_call_id).put("name", tool_name);
                self.simple("tool_start", payload, out);
            }
            AgentEvent::ToolExecutionDelta { tool_call_id, delta } => {
                self.tool_execution_delta(tool_call_id, delta, out);
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, tool_name, output, is_error, .. } => {
                self.tool_execution_end(tool_call_id, tool_name, output, *is_error, out);
            }
            AgentEvent::StateSnapshot { state } => {
                self.simple("values", Fields::new().put("state", state), out);
            }
            AgentEvent::StateUpdate { name, state } => {
                self.simple("updates", Fields::new().put("id", name).put("state", state), out);
            }
            AgentEvent::Checkpoint(taken) => self.checkpoint(taken, out),
            AgentEvent::Progress(progress) => self.progress(progress, out),
            AgentEvent::Custom { value } => {
                self.simple("custom", Fields::new().put("value", value), out);
            }
            AgentEvent::Error { error, .. } => {
                let value = kind_value("error", "error", error);
                self.simple("custom", Fields::new().raw("value", &value), out);
            }
        }
    }

    fn finish(&mut self, out: &mut Vec<Frame>) {
        self.flush_run(None, out);
    }
}
