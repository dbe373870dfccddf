//! # weft-agent
//!
//! The agent loop. An [`Agent`] holds a provider, local [`Tool`]s, settings and hooks; it creates
//! sessions ([`SessionHandle`]) and runs them with [`Agent::execute`], which returns an
//! [`ExecuteStream`]: every event as it happens, then [`ExecuteStream::result`].
//!
//! - A tool call to a local tool runs in a task of its own (concurrently with the turn's other
//!   calls), streaming its output; a panic or a timeout becomes an error result the model sees.
//! - A tool call to a remote tool (a session's spec without an executor) suspends the run with
//!   status `awaiting_tool_execution`; executing the session with the tool results resumes it.
//! - A tool call that needs approval suspends the run with status `awaiting_approval`; executing
//!   with approval decisions resumes it (a denial is an error result the model sees).
//! - The loop's decisions are a pure state machine (`weft_loop::Machine`); the driver (`run`)
//!   does the IO.
//!
//! ```
//! use weft_agent::{Agent, SessionOptions};
//! use weft_core::{Input, SessionStatus};
//! use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let provider = FauxProvider::new(FauxScript::new([FauxTurn::text("Hi there")]));
//! let agent = Agent::builder(provider).build().unwrap();
//! let session = agent.create_session(SessionOptions::default()).await.unwrap();
//! let (response, result) = agent.respond(&session, Input::text("Hello")).await.unwrap();
//! assert_eq!(result.status, SessionStatus::Completed);
//! assert_eq!(response.final_output, "Hi there");
//! # });
//! ```

mod admission;
mod agent;
mod builder;
mod calls;
mod catalog;
mod config;
mod content;
mod context;
mod deadline;
mod driver;
mod error;
mod execute;
mod fork;
mod graph;
mod hub;
mod identity;
mod lease;
mod model;
mod options;
mod outcome;
mod run;
mod session;
pub mod telemetry;
pub mod tool;

pub use agent::Agent;
pub use builder::AgentBuilder;
pub use config::{
    AgentConfig, AgentHooks, ApprovalPolicy, DEFAULT_ABORT_POLL, DEFAULT_END_COMMIT_TIMEOUT,
    DEFAULT_KEEP_OPEN, DEFAULT_LEASE_TTL, DEFAULT_MAX_TURNS, DEFAULT_REMOTE_TOOL_TIMEOUT,
    DEFAULT_SWEEP_INTERVAL, DEFAULT_TOOL_TIMEOUT, ToolGate,
};
pub use error::{AgentError, ExecuteError};
pub use execute::{
    AbortHandle, ExecuteResult, ExecuteStream, RecordStream, Sequenced, SequencedStream,
};
pub use fork::{
    ForkOptions, ForkedFrom, OPTION_BRANCH, OPTION_FORKED_FROM, forked_from, latest_branch,
};
pub use identity::ProcessIdentity;
pub use options::{
    ABORT_NAMESPACE, OPTION_MAX_TURNS, OPTION_RUN_AFTER_SEQ, RunOptions, SessionOptions,
    run_after_seq, session_max_turns,
};
pub use outcome::{Awaiting, FailureKind, RunOutcome, TurnLimit};
pub use session::SessionHandle;
pub use tool::{
    CancellationToken, DEFAULT_MAX_OUTPUT, FnTool, StaticTools, Tool, ToolContext, ToolError,
    ToolEvent, ToolOutput, ToolOutputSink, ToolSource, ToolStream, parameters_schema,
    streaming_tool_fn, tool_fn,
};
pub use weft_core::Durability;
pub use weft_core::ToolContent;
pub use weft_loop::{
    Action, CustomMode, Decision, GotOptions, Mode, ModeError, ModeKind, Modes, NodeOutcome,
    OPTION_MODE, React, Ready, Reasoning, Search, SessionSettings, TotOptions,
};
