//! The data the checks write: ids, messages, heads, commits, events and checkpoints, and a few
//! helpers on answers.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::json;
use weft_core::AgentEvent;
use weft_core::message::{
    AssistantContent, AssistantMessage, Message, StopReason, TextContent, ThinkingContent,
    ToolCall, ToolResultMessage, UserMessage,
};
use weft_core::state::{CallSlot, CallState, OpenTurn, SessionStatus};
use weft_core::step::{AgentStep, StepAnnotations, ToolExecutionResult};
use weft_core::store::{
    Checkpoint, Commit, EventRecord, RunChange, RunState, SessionHead, SessionStore, StoreError,
};
use weft_core::tool::ToolSpec;
use weft_core::usage::{Cost, Usage};

/// An id no other check (in this process or another) uses: `prefix`, the process id, the time
/// and a counter.
pub(super) fn unique(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{prefix}-{}-{nanos:x}-{n}", std::process::id())
}

/// A user message with `text`.
pub fn user(text: &str) -> Message {
    Message::User(UserMessage::text(text))
}

pub(super) fn text_of(message: &Message) -> String {
    match message {
        Message::User(m) => m.text_content(),
        Message::Assistant(m) => m.text(),
        Message::ToolResult(m) => m.text_content(),
    }
}

pub(super) fn call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: json!({"q": id, "n": [1, 2.5, "x"]}).into(),
    }
}

pub(super) fn assistant(text: &str, calls: &[ToolCall]) -> AssistantMessage {
    let mut content = vec![
        AssistantContent::Thinking(ThinkingContent {
            thinking: "let me think".into(),
            signature: Some("sig==".into()),
        }),
        AssistantContent::Text(TextContent { text: text.into() }),
    ];
    content.extend(calls.iter().cloned().map(AssistantContent::ToolCall));
    AssistantMessage {
        content,
        stop_reason: if calls.is_empty() { StopReason::Stop } else { StopReason::ToolUse },
        error_message: None,
        usage: Usage::new(120, 40, 8, 0),
        cost: Some(Box::new(Cost {
            input: 0.1,
            output: 0.2,
            cache_read: 0.1 + 0.2,
            cache_write: 0.0,
            total: 0.6,
        })),
        provider: "faux".into(),
        model: "faux-1".into(),
        timestamp: 1_700_000_000_123,
    }
}

/// A session head with every field set (a system prompt, a tool, options, usage and a cost
/// whose floats must round-trip exactly), at version 0 with no messages.
pub fn head(id: &str, owner: Option<&str>) -> SessionHead {
    SessionHead {
        id: id.into(),
        owner: owner.map(Into::into),
        status: SessionStatus::Idle,
        provider: "faux".into(),
        model: "faux-1".into(),
        system_prompt: Some("be brief".into()),
        tools: vec![
            ToolSpec::new("lookup", "looks things up", json!({"type": "object"}))
                .with_approval()
                .with_label("Lookup"),
        ],
        options: json!({"mode": "react", "maxTurns": 8}),
        usage: Usage::new(1, 2, 3, 4),
        cost: Cost {
            input: 0.25,
            output: 1e-7,
            cache_read: 0.0,
            cache_write: 3.5,
            total: 3.7500001,
        },
        message_count: 0,
        step_count: 0,
        next_deadline: None,
        version: 0,
        created_at: 1_700_000_000_000,
        updated_at: 1_700_000_000_000,
    }
}

/// The head after one more commit adding `added` messages.
pub(super) fn next(h: &SessionHead, added: usize) -> SessionHead {
    let mut n = h.clone();
    n.version += 1;
    n.message_count += added as u64;
    n.updated_at += 1;
    n
}

/// A commit on `h` appending `messages` (nothing else changes), with the head it leads to.
pub fn commit(h: &SessionHead, messages: Vec<Message>) -> (SessionHead, Commit) {
    let new = next(h, messages.len());
    let c = Commit {
        expected_version: h.version,
        head: new.clone(),
        messages: messages.into_iter().map(Arc::new).collect(),
        run: RunChange::Keep,
        events: Vec::new(),
        lease: None,
    };
    (new, c)
}

pub(super) fn run_state(run_id: &str) -> RunState {
    let calls =
        [call("c1", "lookup"), call("c2", "browser"), call("c3", "shell"), call("c4", "rm")];
    let message = assistant("calling tools", &calls);
    let step = AgentStep {
        step_id: "step-1".into(),
        step_index: 0,
        timestamp: 1_700_000_000_200,
        llm_response: message,
        latency_ms: 321,
        tool_results: vec![ToolExecutionResult {
            call: calls[0].clone(),
            output: "found".into(),
            error: None,
            details: Some(json!({"rows": 3})),
            started_at: 1_700_000_000_300,
            latency_ms: 12,
        }],
        annotations: StepAnnotations::default(),
    };
    let mut done = ToolResultMessage::ok(&calls[0], "found");
    done.timestamp = 1_700_000_000_312;
    done.details = Some(json!({"rows": 3}));
    RunState {
        run_id: run_id.into(),
        mode: "react".into(),
        turns: 3,
        open_turn: Some(OpenTurn {
            step: step.clone(),
            calls: vec![
                CallSlot { call: calls[0].clone(), state: CallState::Done { result: done } },
                CallSlot {
                    call: calls[1].clone(),
                    state: CallState::AwaitingResult {
                        since: 1_700_000_000_400,
                        deadline: 1_700_000_600_400,
                    },
                },
                CallSlot { call: calls[2].clone(), state: CallState::Running },
                CallSlot { call: calls[3].clone(), state: CallState::AwaitingApproval },
            ],
        }),
        mode_state: json!({"frontier": [1, 2], "scores": {"a": 0.5}}),
        executions: 2,
        started_at: 1_700_000_000_100,
        first_run_id: Some("run-0".into()),
    }
}

/// An event record of run `run-1` numbered `seq` (with a node id when `seq` is even).
pub fn record(session_id: &str, seq: u64, event: AgentEvent) -> Arc<EventRecord> {
    Arc::new(EventRecord {
        session_id: session_id.into(),
        run_id: "run-1".into(),
        seq,
        node_id: seq.is_multiple_of(2).then(|| "think-1".into()),
        at: 1_700_000_000_000 + seq,
        event,
        messages: None,
    })
}

/// A `text_delta` event record numbered `seq`.
pub fn delta(session_id: &str, seq: u64, text: &str) -> Arc<EventRecord> {
    record(session_id, seq, AgentEvent::TextDelta { index: 0, delta: text.into() })
}

pub(super) fn checkpoint(
    session_id: &str,
    ns: &str,
    id: &str,
    at: u64,
    value: serde_json::Value,
) -> Checkpoint {
    Checkpoint {
        session_id: session_id.into(),
        namespace: ns.into(),
        id: id.into(),
        parent_id: None,
        at,
        value,
    }
}

/// Creates a session with [`head`]`(id, owner)` and `messages` on `store`, returning its head.
/// Panics if the store refuses.
pub async fn create(
    store: &dyn SessionStore,
    id: &str,
    owner: Option<&str>,
    messages: Vec<Message>,
) -> SessionHead {
    let mut h = head(id, owner);
    h.message_count = messages.len() as u64;
    store.create(h.clone(), messages.into()).await.unwrap();
    h
}

/// Commits a new status (and deadline) on a session, returning the new head.
pub(super) async fn set_status(
    store: &dyn SessionStore,
    h: &SessionHead,
    status: SessionStatus,
    next_deadline: Option<u64>,
) -> SessionHead {
    let (mut new, mut c) = commit(h, vec![]);
    new.status = status;
    new.next_deadline = next_deadline;
    c.head = new.clone();
    store.commit(c).await.unwrap();
    new
}

pub(super) fn is_not_found<T: std::fmt::Debug>(r: Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::NotFound(_)))
}

pub(super) fn is_invalid<T: std::fmt::Debug>(r: &Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::Invalid(_)))
}
