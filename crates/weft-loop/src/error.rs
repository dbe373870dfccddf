//! Inputs a session cannot take. A refused input changes nothing.

/// Why the machine refused an input ([`crate::Machine::begin`]): the session is left as it was.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
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
    /// A tool result or approval decision for a call that was answered (or decided) already.
    #[error("tool call {0:?} was answered already")]
    AlreadyAnswered(String),
    /// An approval decision for a call that is not waiting for one.
    #[error("no tool call awaiting approval has id {0:?}")]
    UnknownApproval(String),
    /// An approval decision for a call that waits for its (remote) result.
    #[error(
        "tool call {0:?} is waiting for its result, not for an approval: send its result as a \
         toolResult message"
    )]
    AwaitsResult(String),
    /// A tool result for a call that waits for an approval decision.
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
}
