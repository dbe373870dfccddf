//! [`Agent`]: a provider, local tools, configuration and hooks; it creates sessions and runs
//! them with [`Agent::execute`]. The public face of the driver (`driver.rs`), which does the
//! work.

use std::sync::Arc;

use weft_core::{AgentResponse, Input, Session, SessionStore, ToolSpec};

use crate::config::AgentConfig;
use crate::driver::Driver;
use crate::error::{AgentError, ExecuteError};
use crate::execute::{ExecuteResult, ExecuteStream};
use crate::fork::ForkOptions;
use crate::identity::ProcessIdentity;
use crate::options::{RunOptions, SessionOptions};
use crate::session::SessionHandle;

/// An agent: runs sessions against a provider with a set of local tools. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    pub(crate) driver: Driver,
}

impl Agent {
    /// The identity this agent holds its runs' leases under.
    pub fn identity(&self) -> &ProcessIdentity {
        self.driver.identity()
    }

    /// The agent's settings.
    pub fn config(&self) -> &AgentConfig {
        self.driver.config()
    }

    /// The reasoning modes sessions may run in: react, tot, got, and those added with
    /// [`AgentBuilder::mode`](crate::AgentBuilder::mode). Read a mode from JSON or a name
    /// with these.
    pub fn modes(&self) -> &weft_loop::Modes {
        &self.driver.inner.modes
    }

    /// The names of the providers sessions may pick, the default first.
    pub fn provider_names(&self) -> Vec<String> {
        self.driver.provider_names()
    }

    /// The providers sessions may pick, the default first, each with the model a new session on
    /// it gets when it names none.
    pub fn provider_models(&self) -> Vec<(String, String)> {
        self.driver.provider_models()
    }

    /// The specs of the agent's local tools.
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        self.driver.tool_specs()
    }

    /// The agent's local tools now: each spec with the name of the source that supplies it
    /// (`agent` for the builder's own tools, `mcp:NAME` for an MCP server's).
    pub fn tool_sources(&self) -> Vec<(ToolSpec, String)> {
        self.driver.tool_sources()
    }

    /// Creates a session (in the store, when the agent has one). Fails when a remote tool's
    /// name is taken or not one every provider accepts ([`AgentError::InvalidToolName`]) or its
    /// schema is invalid, or when the store refuses (an id taken).
    pub async fn create_session(
        &self,
        options: SessionOptions,
    ) -> Result<SessionHandle, AgentError> {
        self.driver.create_session(options).await
    }

    /// Takes charge of a session kept in memory only (one this agent's store does not keep):
    /// for instance one restored by the caller. A session left `running` by a process that
    /// stopped is taken as `error`.
    pub fn open_session(&self, session: Session) -> Result<SessionHandle, AgentError> {
        self.driver.open_session(session)
    }

    /// The session `id`: the one open in this process, or loaded from the store. `None` when
    /// no such session exists. A session whose run died with its process (`running` in the
    /// store, nobody holding its lease) is recovered: calls left running are answered with an
    /// error saying the run was interrupted (replay-safe tools run again) and the run goes on
    /// from its last checkpoint here; a suspended one loads suspended and resumes normally.
    pub async fn session(&self, id: &str) -> Result<Option<SessionHandle>, AgentError> {
        // From the first session loaded on (an agent built outside a runtime could not start
        // its sweeper then).
        crate::deadline::ensure_sweeper(&self.driver.inner);
        self.driver.session(id).await
    }

    /// The agent's store, if it has one.
    pub fn store(&self) -> Option<&Arc<dyn SessionStore>> {
        self.driver.store()
    }

    /// The heads of the sessions in `scope`, most recently updated first (at most `limit`): from
    /// the store, or those open in this process when the agent has none.
    pub async fn list_sessions(
        &self,
        scope: weft_core::OwnerScope<'_>,
        limit: usize,
    ) -> Result<Vec<weft_core::SessionHead>, AgentError> {
        self.driver.list_sessions(scope, limit).await
    }

    /// Deletes a session in `scope` with everything it has; says whether there was one. A
    /// session whose run is under way in this process is aborted first.
    pub async fn delete_session(
        &self,
        id: &str,
        scope: weft_core::OwnerScope<'_>,
    ) -> Result<bool, AgentError> {
        self.driver.delete_session(id, scope).await
    }

    /// Starts a run of `session` on `input`: a user message starts a new run, tool results or
    /// approval decisions resume a suspended one. The input is checked first: a refused input
    /// changes nothing. With a store, starting is a write conditional on the session's version,
    /// so two processes can never both start a run on one session. Must be called within a
    /// Tokio runtime; the run is a task of its own and goes on to its end even if the stream is
    /// dropped.
    ///
    /// A session another process has just run to its end may still be held for a moment (its
    /// run stores its last events, then lets go): a start that finds the session resting but
    /// still held waits for it to be let go, up to two seconds, instead of being refused.
    pub async fn execute(
        &self,
        session: &SessionHandle,
        input: impl Into<Input>,
    ) -> Result<ExecuteStream, ExecuteError> {
        self.execute_with(session, input, RunOptions::default()).await
    }

    /// [`execute`](Self::execute), with options for this execution alone: how durably it is
    /// stored ([`RunOptions::durability`]: under `sync`, the stream waits for the store, so
    /// nothing anyone receives is missing from it after a crash).
    pub async fn execute_with(
        &self,
        session: &SessionHandle,
        input: impl Into<Input>,
        options: RunOptions,
    ) -> Result<ExecuteStream, ExecuteError> {
        tokio::runtime::Handle::try_current().map_err(|_| ExecuteError::NoRuntime)?;
        // Deadlines and dead runs are watched from the first run on (an agent built outside a
        // runtime could not start its sweeper then).
        crate::deadline::ensure_sweeper(&self.driver.inner);
        self.driver.execute(session, input, options).await
    }

    /// Runs `input` to the end without streaming and returns the step trace and final answer
    /// with the whole result.
    pub async fn respond(
        &self,
        session: &SessionHandle,
        input: impl Into<Input>,
    ) -> Result<(AgentResponse, ExecuteResult), ExecuteError> {
        self.driver.respond(session, input).await
    }

    /// A new session whose conversation is the first `at_message` messages of `parent`'s, with
    /// its provider, model, system prompt, tools, mode, limits and owner, linked to it
    /// ([`forked_from`](crate::forked_from)). The parent is not changed. Its usage and cost start at zero.
    pub async fn fork_session(
        &self,
        parent: &SessionHandle,
        options: ForkOptions,
    ) -> Result<SessionHandle, AgentError> {
        self.driver.fork_session(parent, options).await
    }
}
