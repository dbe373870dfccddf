//! Errors: configuration mistakes ([`AgentError`]) and inputs a session cannot take
//! ([`ExecuteError`]). Failures during a run are never errors: they are events and statuses.

/// A mistake in how an agent or a session is set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// Two tools share a name.
    #[error("two tools are named {0:?}; tool names must be unique")]
    DuplicateTool(String),
    /// Two tool sources supply a tool of the same name.
    #[error(
        "tool {name:?} is supplied by both {first} and {second}; rename one (MCP tools are named \
         server__tool, so two servers need different names) or disable it in [tools.{name}]"
    )]
    ToolNameCollision {
        /// The name.
        name: String,
        /// The source that supplied it first.
        first: String,
        /// The source that supplied it again.
        second: String,
    },
    /// A tool's name is not one every provider accepts (1 to 64 of `A-Z a-z 0-9 _ -`:
    /// [`weft_core::valid_tool_name`]); the name is shown cut to 64 characters.
    #[error(
        "tool name {} is not accepted by model providers: use 1 to {} letters, digits, '_' or '-'",
        shown_name(.name),
        weft_core::MAX_TOOL_NAME
    )]
    InvalidToolName {
        /// The name.
        name: String,
    },
    /// A tool's parameter schema is not a JSON Schema.
    #[error("the parameter schema of tool {tool:?} is not a valid JSON Schema: {reason}")]
    InvalidToolSchema {
        /// The tool.
        tool: String,
        /// Why.
        reason: String,
    },
    /// The session store refused or failed (an id taken, a backend down).
    #[error("{0}")]
    Store(weft_core::StoreError),
    /// A session named a provider the agent does not have.
    #[error("unknown provider {name:?}; allowed: {}", .allowed.join(", "))]
    UnknownProvider {
        /// The name given.
        name: String,
        /// The providers the agent has.
        allowed: Vec<String>,
    },
    /// A fork at a point the session cannot be cut at (past its end, or between a tool call
    /// and its result).
    #[error("{0}")]
    InvalidFork(String),
    /// A session handle made by another agent: each agent has its own tools, store and
    /// registry of open sessions, so a handle is used only with the agent that made it.
    #[error(
        "session {0} was opened by another agent; open it with this agent (`session()`) instead"
    )]
    ForeignSession(String),
}

/// A tool name as an error shows it: quoted, cut to the longest valid length (with its size).
fn shown_name(name: &str) -> String {
    let cut: String = name.chars().take(weft_core::MAX_TOOL_NAME).collect();
    if cut.len() == name.len() {
        format!("{cut:?}")
    } else {
        format!("{cut:?}… ({} bytes)", name.len())
    }
}

/// Why `execute` refused an input. A refused input changes nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExecuteError {
    /// The session already has a run in progress.
    #[error("session {0} is already running; wait for its run to end or abort it")]
    AlreadyRunning(String),
    /// The session store refused or failed; nothing was started. A `Conflict` means the
    /// session changed elsewhere in the meantime: it has been reloaded, try again.
    #[error("{0}")]
    Store(weft_core::StoreError),
    /// A user message arrived while tool calls wait for results or approvals.
    #[error(
        "session {session} is waiting on tool calls {}; send their results or approvals first, or abort the run",
        .calls.join(", ")
    )]
    AwaitingToolCalls {
        /// The session.
        session: String,
        /// The calls it waits on.
        calls: Vec<String>,
    },
    /// Tool results or approvals arrived, but the session waits for none.
    #[error("session {0} is not waiting for tool results or approvals")]
    NothingPending(String),
    /// A tool result for a call that is not waiting for one.
    #[error("no pending tool call has id {0:?}")]
    UnknownToolCall(String),
    /// A tool result or approval decision for a call that was answered (or decided) already:
    /// refused, so that no answer is ever applied twice.
    #[error("tool call {0:?} was answered already")]
    AlreadyAnswered(String),
    /// An approval decision for a call that is not waiting for one.
    #[error("no tool call awaiting approval has id {0:?}")]
    UnknownApproval(String),
    /// An approval decision for a call that waits for its (remote) result, not for approval.
    #[error(
        "tool call {0:?} is waiting for its result, not for an approval: send its result as a \
         toolResult message"
    )]
    AwaitsResult(String),
    /// A tool result for a call that waits for an approval decision, not for a result.
    #[error(
        "tool call {0:?} is waiting for an approval, not for a result: send an approval \
         decision for it"
    )]
    AwaitsApproval(String),
    /// The same call is answered twice in one input.
    #[error("tool call {0:?} is answered more than once")]
    DuplicateAnswer(String),
    /// A tool result names a different tool than its call.
    #[error(
        "the result for tool call {id:?} names tool {given:?}, but the call is to {expected:?}"
    )]
    ToolNameMismatch {
        /// The call.
        id: String,
        /// The name in the result.
        given: String,
        /// The call's tool.
        expected: String,
    },
    /// Tool results or approvals with nothing in them.
    #[error("the input holds no tool results or approvals")]
    EmptyInput,
    /// `execute` was called outside a Tokio runtime.
    #[error("execute() must be called from within a Tokio runtime")]
    NoRuntime,
    /// A session handle made by another agent: each agent has its own tools, store and
    /// registry of open sessions, so a handle is used only with the agent that made it.
    #[error(
        "session {0} was opened by another agent; open it with this agent (`session()`) instead"
    )]
    ForeignSession(String),
}

impl From<weft_loop::InputError> for ExecuteError {
    fn from(error: weft_loop::InputError) -> Self {
        use weft_loop::InputError as E;
        match error {
            E::AwaitingToolCalls { session, calls } => Self::AwaitingToolCalls { session, calls },
            E::NothingPending(session) => Self::NothingPending(session),
            E::UnknownToolCall(id) => Self::UnknownToolCall(id),
            E::AlreadyAnswered(id) => Self::AlreadyAnswered(id),
            E::UnknownApproval(id) => Self::UnknownApproval(id),
            E::AwaitsResult(id) => Self::AwaitsResult(id),
            E::AwaitsApproval(id) => Self::AwaitsApproval(id),
            E::DuplicateAnswer(id) => Self::DuplicateAnswer(id),
            E::ToolNameMismatch { id, given, expected } => {
                Self::ToolNameMismatch { id, given, expected }
            }
            E::EmptyInput => Self::EmptyInput,
        }
    }
}
