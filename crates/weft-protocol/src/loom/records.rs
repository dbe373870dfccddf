//! What [`LoomReceiver`](super::LoomReceiver) builds: sessions, runs, node runs and the
//! records inside them, each with the line it came from.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// A line the receiver could not read: not JSON, not an object, or a known type whose payload
/// has the wrong shape. The rest of the stream is still read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct LoomLineError {
    /// The line's number, from 1 (blank lines count).
    pub line: usize,
    /// What is wrong with it.
    pub message: String,
}

/// Why [`decode`](super::decode) could not turn frames into a
/// [`Transcript`](crate::transcript::Transcript).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoomDecodeError {
    /// A frame could not be read.
    #[error(transparent)]
    Line(#[from] LoomLineError),
    /// The frames belong to more than one session (their `session_id`s; `None`: no envelope).
    #[error("the frames belong to {} sessions, not one", .0.len())]
    SeveralSessions(Vec<Option<String>>),
    /// A reply's `status` is not a session status.
    #[error("line {line}: unknown run status {status:?}")]
    UnknownStatus {
        /// The reply's line.
        line: usize,
        /// The status it gave.
        status: String,
    },
}

/// How a node run ended: `"Ok"` or `{"Err": "…"}`, as on the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum LoomNodeResult {
    /// It succeeded.
    Ok,
    /// It failed, saying why.
    Err(String),
}

/// One text or thinking block: the chunks of one block joined.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoomBlock {
    /// The chunks' `block` number (a Weft extension); `None` for chunks without one (all such
    /// consecutive chunks of a node run form one block).
    pub block: Option<u64>,
    /// The block's text.
    pub text: String,
    /// The line of its last chunk.
    pub line: usize,
}

/// A tool call: from a `tool_call` frame, or assembled from `tool_call_chunk` frames.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoomToolCall {
    /// The call id, if the frames gave one.
    pub call_id: Option<String>,
    /// The tool, if the frames gave it.
    pub name: Option<String>,
    /// The arguments: the `tool_call`'s; for a call seen only in chunks, the joined deltas
    /// parsed as JSON (the raw text as a JSON string if they do not parse, `null` if empty).
    pub arguments: Value,
    /// The joined `arguments_delta`s of its chunks.
    pub arguments_text: String,
    /// Whether a `tool_call` frame completed it.
    pub complete: bool,
    /// The line of its `tool_call` frame (or of its last chunk).
    pub line: usize,
}

/// A `tool_start` frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoomToolStart {
    /// The call.
    pub call_id: Option<String>,
    /// The tool.
    pub name: String,
    /// Its line.
    pub line: usize,
}

/// A `tool_output` frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoomToolOutput {
    /// The call.
    pub call_id: Option<String>,
    /// The tool.
    pub name: String,
    /// The output.
    pub content: String,
    /// Its line.
    pub line: usize,
}

/// A `tool_end` frame: a tool result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoomToolEnd {
    /// The call.
    pub call_id: Option<String>,
    /// The tool.
    pub name: String,
    /// The result text.
    pub result: String,
    /// Whether it is an error.
    pub is_error: bool,
    /// Its line.
    pub line: usize,
}

/// A `tool_approval` frame: a call waiting for the user's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoomToolApproval {
    /// The call.
    pub call_id: Option<String>,
    /// The tool.
    pub name: String,
    /// Its arguments.
    pub arguments: Value,
    /// Its line.
    pub line: usize,
}

/// A `usage` frame.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoomUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Their total.
    pub total_tokens: u64,
    /// Its line.
    pub line: usize,
}

/// A `custom` frame.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoomCustom {
    /// Its value.
    pub value: Value,
    /// Its line.
    pub line: usize,
}

/// Any other frame: state (`values`, `updates`, `checkpoint`), tree/graph-of-thought progress,
/// or a type this protocol does not define.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoomEvent {
    /// Its type (for an unknown export-form frame, its key).
    pub kind: String,
    /// Its payload (without `type` and the envelope).
    pub payload: Map<String, Value>,
    /// Its `event_id`.
    pub event_id: Option<u64>,
    /// Its line.
    pub line: usize,
}

/// One node run: the frames from a `node_enter` to its `node_exit`. Frames outside every node run
/// are kept in node runs of their own (`entered == false`, no `node_id`, no `name`), in order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LoomNodeRun {
    /// The envelope's `node_id` (the node run id), if the frames carried one.
    pub node_id: Option<String>,
    /// The node's name (`think`, `act` …): the `node_enter`'s or `node_exit`'s `id`.
    pub name: Option<String>,
    /// Whether its `node_enter` was seen.
    pub entered: bool,
    /// How it ended; `None` while no `node_exit` was seen.
    pub result: Option<LoomNodeResult>,
    /// Its message chunks joined.
    pub text: String,
    /// Its thought chunks joined.
    pub thought: String,
    /// Its message chunks, block by block.
    pub text_blocks: Vec<LoomBlock>,
    /// Its thought chunks, block by block.
    pub thought_blocks: Vec<LoomBlock>,
    /// Its tool calls.
    pub tool_calls: Vec<LoomToolCall>,
    /// Its `tool_start`s.
    pub tool_starts: Vec<LoomToolStart>,
    /// Its `tool_output`s.
    pub tool_outputs: Vec<LoomToolOutput>,
    /// Its `tool_end`s.
    pub tool_ends: Vec<LoomToolEnd>,
    /// Its `tool_approval`s.
    pub approvals: Vec<LoomToolApproval>,
    /// Its `usage` frames.
    pub usage: Vec<LoomUsage>,
    /// Its `custom` frames.
    pub customs: Vec<LoomCustom>,
    /// Its state, checkpoint, ToT and GoT frames.
    pub events: Vec<LoomEvent>,
    /// Its frames of types this protocol does not define.
    pub other: Vec<LoomEvent>,
    /// The call ids whose results it handed to the model, in order (the `node_exit`'s
    /// `tool_results`, a Weft extension).
    pub tool_results: Vec<String>,
    /// Its first frame's `event_id`.
    pub first_event_id: Option<u64>,
    /// Its last frame's `event_id`.
    pub last_event_id: Option<u64>,
    /// Its first frame's line.
    pub first_line: usize,
    /// Its `node_exit`'s line.
    pub exit_line: Option<usize>,
}

/// The `reply` frame that ends a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoomReply {
    /// The run's whole reply.
    pub text: String,
    /// The run's final status (`completed`, `awaiting_approval` …), a Weft extension.
    pub status: Option<String>,
    /// The node run that produced it.
    pub node_id: Option<String>,
    /// Its `event_id`.
    pub event_id: Option<u64>,
    /// Its line.
    pub line: usize,
}

/// One run: from a `run_start` (or the first frame after the previous run's reply) to its reply.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LoomRun {
    /// Whether a `run_start` began it.
    pub started: bool,
    /// The `run_start`'s `run_id`.
    pub run_id: Option<String>,
    /// The `run_start`'s `agent`.
    pub agent: Option<String>,
    /// The `run_start`'s `message` (the user's).
    pub message: Option<String>,
    /// Its node runs, in the order they started.
    pub node_runs: Vec<LoomNodeRun>,
    /// Its `usage` frames, in order.
    pub usage: Vec<LoomUsage>,
    /// Its reply; `None` while it has not ended.
    pub reply: Option<LoomReply>,
    /// Its first frame's line.
    pub first_line: usize,
}

/// One session's runs.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LoomSession {
    /// The envelope's `session_id`; `None`: frames without one.
    pub session_id: Option<String>,
    /// Its runs, in order.
    pub runs: Vec<LoomRun>,
}

/// What a Loom stream says: its sessions, in the order they first appear, and the lines that
/// could not be read.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct LoomTranscript {
    /// The sessions.
    pub sessions: Vec<LoomSession>,
    /// The unreadable lines.
    pub errors: Vec<LoomLineError>,
}

impl LoomTranscript {
    /// The session `session_id` (`None`: the frames without a `session_id`).
    pub fn session(&self, session_id: Option<&str>) -> Option<&LoomSession> {
        self.sessions.iter().find(|s| s.session_id.as_deref() == session_id)
    }
}
