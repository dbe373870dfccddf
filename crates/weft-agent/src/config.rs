//! The agent's settings ([`AgentConfig`] and its defaults) and the hooks into its loop
//! ([`AgentHooks`], [`ToolGate`], [`ApprovalPolicy`]). A leaf: it knows nothing of sessions or
//! runs.

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use weft_core::{ToolCall, ToolSpec};
use weft_llm::ModelRequest;

/// How many model calls one run may make unless configured otherwise.
pub const DEFAULT_MAX_TURNS: u32 = 50;
/// How long a local tool call may run unless it or the agent says otherwise.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// How long a remote tool call may wait for its result.
pub const DEFAULT_REMOTE_TOOL_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// How long a run's lease lasts without renewal.
pub const DEFAULT_LEASE_TTL: Duration = Duration::from_secs(15);
/// How often the sweeper looks for expired deadlines and dead runs.
pub const DEFAULT_SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// How many recently used sessions an agent keeps open (see [`AgentConfig::keep_open`]).
pub const DEFAULT_KEEP_OPEN: usize = 256;
/// How often a run looks in the store for an abort requested by another process.
pub const DEFAULT_ABORT_POLL: Duration = Duration::from_millis(500);
/// How long a run tries to store its end while the store fails transiently (never longer than
/// two thirds of its lease's ttl, which could then be taken over).
pub const DEFAULT_END_COMMIT_TIMEOUT: Duration = Duration::from_secs(10);
/// What a before-tool-call hook decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolGate {
    /// The call goes ahead.
    Allow,
    /// The call is refused; the model sees this reason as an error result.
    Block(String),
}

/// Hooks into the loop. Every method has a default that does nothing.
pub trait AgentHooks: Send + Sync {
    /// Called before each model call; may rewrite the request (trim or summarise the history,
    /// inject context, change the tools).
    fn before_model_call<'a>(&'a self, request: &'a mut ModelRequest) -> BoxFuture<'a, ()> {
        let _ = request;
        Box::pin(async {})
    }

    /// Called before each tool call that passed validation, local or remote; may block it.
    fn before_tool_call<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, ToolGate> {
        let _ = call;
        Box::pin(async { ToolGate::Allow })
    }
}

pub(crate) struct NoHooks;
impl AgentHooks for NoHooks {}

/// Decides whether a call needs approval, beyond the tools that always do.
pub type ApprovalPolicy = Arc<dyn Fn(&ToolSpec, &ToolCall) -> bool + Send + Sync>;

/// The agent's settings.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The default model id for new sessions.
    pub model: String,
    /// The default system prompt for new sessions.
    pub system_prompt: Option<Arc<str>>,
    /// How many model calls one run may make.
    pub max_turns: u32,
    /// How long a local tool call may run (a tool may set its own).
    pub tool_timeout: Duration,
    /// How long a remote call waits for its result.
    pub remote_tool_timeout: Duration,
    /// Sampling temperature.
    pub temperature: Option<f32>,
    /// Output token limit per model call.
    pub max_tokens: Option<u32>,
    /// How long a run's lease in the store lasts without renewal: after a process dies, another
    /// may take its runs over once this has passed. Renewed every third of it.
    pub lease_ttl: Duration,
    /// How often the sweeper looks for remote calls past their deadline and for runs whose
    /// process died (in the store, when there is one).
    pub sweep_interval: Duration,
    /// How many recently used sessions stay open in this process when nobody holds their
    /// handle (0: none). An open session keeps its event log's numbering, so the events of its
    /// next run follow the last ones densely instead of after a new reservation.
    pub keep_open: usize,
    /// How often a run with a store looks for an abort requested by another process
    /// ([`ABORT_NAMESPACE`](crate::ABORT_NAMESPACE)); zero: never.
    pub abort_poll: Duration,
    /// How long a run keeps trying to store its end (its resting status, answer and pending
    /// calls) while the store fails transiently (a full disk, a dropped connection). Nothing
    /// reports the end before it is stored; a run whose end could not be stored in this time
    /// ends with an error saying so, never with the status it could not keep. At most two
    /// thirds of [`lease_ttl`](Self::lease_ttl): a lease unrenewed longer than its ttl may be
    /// taken over by another process, which would then recover the run from its last stored
    /// state while this one still tried to store another end.
    pub end_commit_timeout: Duration,
    /// Whether the runs' GenAI spans ([`telemetry`](crate::telemetry)) carry message content:
    /// the model calls' input and output messages and system instructions, the tool calls'
    /// arguments and results. Off by default: traces often go where the conversations may not.
    pub capture_content: bool,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            model: String::new(),
            system_prompt: None,
            max_turns: DEFAULT_MAX_TURNS,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            remote_tool_timeout: DEFAULT_REMOTE_TOOL_TIMEOUT,
            temperature: None,
            max_tokens: None,
            lease_ttl: DEFAULT_LEASE_TTL,
            sweep_interval: DEFAULT_SWEEP_INTERVAL,
            keep_open: DEFAULT_KEEP_OPEN,
            abort_poll: DEFAULT_ABORT_POLL,
            end_commit_timeout: DEFAULT_END_COMMIT_TIMEOUT,
            capture_content: false,
        }
    }
}
