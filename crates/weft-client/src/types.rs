//! What the client sends and gets: execute options, events, results and session views.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};
use weft_core::store::SessionHead;
use weft_core::{
    AgentEvent, ApprovalDecision, Cost, Message, SessionStatus, ToolCall, ToolSpec, Usage,
};
use weft_protocol::native::NativeMessage;
use weft_tool_api::Tool;

/// One event of a stream: a decoded native frame with the sequence number the server gave it
/// (the SSE `id:`, the cursor to resume after).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// The event's sequence number in the session (`execute_complete` carries the one of the
    /// `session_end` before it).
    pub seq: u64,
    /// The event, or the `execute_complete` that closes a run.
    pub message: NativeMessage,
}

impl Event {
    /// The canonical event, unless this is the `execute_complete` frame.
    pub fn event(&self) -> Option<&AgentEvent> {
        match &self.message {
            NativeMessage::Event(event) => Some(event),
            NativeMessage::Complete { .. } => None,
        }
    }
}

/// Calls waiting for approval, handed to the approval callback.
#[derive(Debug, Clone)]
pub struct ApprovalRequest {
    /// The session.
    pub session_id: String,
    /// The calls to decide on.
    pub calls: Vec<ToolCall>,
}

impl ApprovalRequest {
    /// Approves every call.
    pub fn approve_all(&self) -> Vec<ApprovalDecision> {
        self.calls.iter().map(|c| ApprovalDecision::approve(c.id.clone())).collect()
    }

    /// Denies every call, saying why (the model sees the reason).
    pub fn deny_all(&self, reason: &str) -> Vec<ApprovalDecision> {
        self.calls.iter().map(|c| ApprovalDecision::deny(c.id.clone(), reason)).collect()
    }
}

/// The approval callback.
pub(crate) type ApprovalFn =
    Arc<dyn Fn(ApprovalRequest) -> BoxFuture<'static, Vec<ApprovalDecision>> + Send + Sync>;

/// How an execution is run: the session, a new session's settings, client tools, the approval
/// callback.
#[derive(Clone, Default)]
pub struct ExecuteOptions {
    pub(crate) session_id: Option<String>,
    /// Only continue `session_id`: send no context, so an unknown id is a 404.
    pub(crate) existing_only: bool,
    pub(crate) request: RequestOptions,
    pub(crate) messages: Vec<Message>,
    pub(crate) remote_specs: Vec<ToolSpec>,
    pub(crate) tools: Vec<Arc<dyn Tool>>,
    pub(crate) approval: Option<ApprovalFn>,
}

impl std::fmt::Debug for ExecuteOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecuteOptions")
            .field("session_id", &self.session_id)
            .field("request", &self.request)
            .field("messages", &self.messages.len())
            .field("remote_specs", &self.remote_specs)
            .field("tools", &self.tools.iter().map(|t| &t.spec().name).collect::<Vec<_>>())
            .field("approval", &self.approval.is_some())
            .finish()
    }
}

/// The `options` of an execute request, as the server reads them.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct RequestOptions {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) provider: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) system_prompt: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) max_turns: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) mode_options: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) multitask: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) on_disconnect: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) durability: Option<weft_core::Durability>,
}

impl RequestOptions {
    /// What a resuming request (tool results, approvals) carries: the session keeps the rest.
    pub(crate) fn for_resume(&self) -> Self {
        Self {
            on_disconnect: self.on_disconnect,
            multitask: self.multitask,
            durability: self.durability,
            ..Self::default()
        }
    }
}

/// What to do with an input while the session's run is under way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Multitask {
    /// Refuse it (the server's default): [`Error::Api`](crate::Error::Api) 409.
    Reject,
    /// Wait for the run to end, then start.
    Enqueue,
    /// Abort the run, then start.
    Interrupt,
}

impl ExecuteOptions {
    /// Options for a new session with the server's defaults.
    pub fn new() -> Self {
        Self::default()
    }

    /// Continue this session (or create it with this id, when it does not exist yet).
    pub fn session(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self
    }

    /// Continue this session, which must exist (an unknown id is a 404 `session_not_found`
    /// rather than a new session).
    pub fn continue_session(mut self, id: impl Into<String>) -> Self {
        self.session_id = Some(id.into());
        self.existing_only = true;
        self
    }

    /// The provider of a new session (one the server is configured with).
    pub fn provider(mut self, provider: impl Into<String>) -> Self {
        self.request.provider = Some(provider.into());
        self
    }

    /// The model of a new session.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.request.model = Some(model.into());
        self
    }

    /// The system prompt of a new session.
    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.request.system_prompt = Some(prompt.into());
        self
    }

    /// The most model calls a run of a new session may make.
    pub fn max_turns(mut self, turns: u32) -> Self {
        self.request.max_turns = Some(turns);
        self
    }

    /// The agent mode of a new session: `react` (the server's default), `tot` or `got`.
    pub fn mode(mut self, mode: impl Into<String>) -> Self {
        self.request.mode = Some(mode.into());
        self
    }

    /// The mode's parameters for a new session (the server's `options.modeOptions`):
    /// `{"breadth":3,"depth":3,"search":"dfs","maxModelCalls":30}` for `tot`,
    /// `{"concurrency":4,"adaptive":true,"nodeBudget":12,"maxModelCalls":40,"nodeTurns":4}` for
    /// `got`.
    pub fn mode_options(mut self, options: serde_json::Value) -> Self {
        self.request.mode_options = Some(options);
        self
    }

    /// What the server does when the session is already running.
    pub fn multitask(mut self, multitask: Multitask) -> Self {
        self.request.multitask = Some(match multitask {
            Multitask::Reject => "reject",
            Multitask::Enqueue => "enqueue",
            Multitask::Interrupt => "interrupt",
        });
        self
    }

    /// Abort the run when this client's connection goes away (by default the run goes on and
    /// the client reattaches).
    pub fn cancel_on_disconnect(mut self) -> Self {
        self.request.on_disconnect = Some("cancel");
        self
    }

    /// How durably the server stores each execution of this run (its `options.durability`;
    /// default: the server's): under [`Durability::Sync`](weft_core::Durability::Sync) nothing
    /// is streamed to this client before the server's store has it.
    pub fn durability(mut self, durability: weft_core::Durability) -> Self {
        self.request.durability = Some(durability);
        self
    }

    /// Messages a new session starts with.
    pub fn messages(mut self, messages: Vec<Message>) -> Self {
        self.messages = messages;
        self
    }

    /// A client-side tool: its spec goes to a new session as a remote tool, and when a run
    /// suspends on calls to it, this client runs them and posts their results.
    pub fn tool(mut self, tool: impl Tool) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// A client-side tool, shared.
    pub fn shared_tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// A remote tool this client does not run: a run that calls it ends the stream suspended
    /// (`awaiting_tool_execution`), for the caller to answer with
    /// [`Input::ToolResults`](weft_core::Input::ToolResults).
    pub fn remote_tool(mut self, spec: ToolSpec) -> Self {
        self.remote_specs.push(spec);
        self
    }

    /// Decides on calls that need approval; the decisions are posted and the stream goes on.
    /// Without one, a run waiting for approval ends the stream (`awaiting_approval`).
    pub fn on_approval<F, Fut>(mut self, decide: F) -> Self
    where
        F: Fn(ApprovalRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Vec<ApprovalDecision>> + Send + 'static,
    {
        self.approval = Some(Arc::new(move |request| Box::pin(decide(request))));
        self
    }

    /// The specs a new session gets: remote specs, then those of the client tools.
    pub(crate) fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = self.remote_specs.clone();
        specs.extend(self.tools.iter().map(|t| t.spec().clone()));
        specs
    }
}

/// How a dropped stream is reattached: up to `max_tries` times in a row without progress,
/// waiting `first_delay`, doubled each time up to `max_delay`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reconnect {
    /// Reattachments without an event in between before the stream fails.
    pub max_tries: u32,
    /// The first wait.
    pub first_delay: Duration,
    /// The longest wait.
    pub max_delay: Duration,
}

impl Default for Reconnect {
    fn default() -> Self {
        Self {
            max_tries: 5,
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
        }
    }
}

impl Reconnect {
    /// The wait before reattachment number `attempt` (from 0).
    pub(crate) fn delay(&self, attempt: u32) -> Duration {
        let factor = 1u32.checked_shl(attempt.min(20)).unwrap_or(u32::MAX);
        self.first_delay.saturating_mul(factor).min(self.max_delay)
    }
}

/// What an execution (all its runs, resumed automatically) ended with.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecuteResult {
    /// The session.
    pub session_id: String,
    /// How the last run ended.
    pub status: SessionStatus,
    /// The messages the runs added, in order.
    pub messages: Vec<Arc<Message>>,
    /// Calls still waiting: for results nobody here runs, or approvals nobody here decides.
    pub pending_tool_calls: Vec<ToolCall>,
    /// Those of them that wait for an approval.
    pub pending_approvals: Vec<ToolCall>,
    /// Tokens of the runs this stream saw.
    pub usage: Usage,
    /// Cost of the runs this stream saw.
    pub cost: Cost,
    /// The error message of the last run's failure (its last assistant message's), if any.
    pub error: Option<String>,
}

/// A session as `GET /api/agent/session/{id}` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
#[non_exhaustive]
pub struct SessionView {
    /// Its id.
    pub id: String,
    /// Where it stands.
    pub status: SessionStatus,
    /// The provider.
    pub provider: String,
    /// The model.
    pub model: String,
    /// The system prompt.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// Its tools.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// The whole conversation.
    #[serde(default)]
    pub messages: Vec<Message>,
    /// Calls waiting for remote results.
    #[serde(default)]
    pub pending_tool_calls: Vec<ToolCall>,
    /// Calls waiting for approval.
    #[serde(default)]
    pub pending_approvals: Vec<ToolCall>,
    /// Tokens over the session's life.
    #[serde(default)]
    pub usage: Usage,
    /// Cost over the session's life.
    #[serde(default)]
    pub cost: Cost,
    /// The current or suspended run's id.
    #[serde(default)]
    pub run_id: Option<String>,
    /// The sequence number of its last event.
    #[serde(default)]
    pub last_event_seq: u64,
    /// Model calls made.
    #[serde(default)]
    pub step_count: u32,
    /// Created (ms since the epoch).
    #[serde(default)]
    pub created_at: u64,
    /// Last changed (ms since the epoch).
    #[serde(default)]
    pub updated_at: u64,
}

/// `GET /api/agent/sessions`.
#[derive(Debug, Deserialize)]
pub(crate) struct SessionList {
    pub(crate) sessions: Vec<SessionHead>,
}
