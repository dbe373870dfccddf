//! [`AgentBuilder`]: how an [`Agent`] is put together.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft_core::{SessionStore, ToolCall, ToolSpec};
use weft_llm::Provider;

use crate::agent::Agent;
use crate::catalog::ToolCatalog;
use crate::config::{AgentConfig, AgentHooks, ApprovalPolicy, NoHooks};
use crate::context::{AgentInner, NamedProvider, Recent};
use crate::driver::Driver;
use crate::error::AgentError;
use crate::identity::ProcessIdentity;
use crate::tool::{Tool, ToolSource};

impl Agent {
    /// Starts building an agent on `provider`.
    pub fn builder(provider: impl Provider + 'static) -> AgentBuilder {
        Self::builder_shared(Arc::new(provider))
    }

    /// Starts building an agent on a shared provider.
    pub fn builder_shared(provider: Arc<dyn Provider>) -> AgentBuilder {
        AgentBuilder::new(provider)
    }
}

/// Builds an [`Agent`].
pub struct AgentBuilder {
    provider: Arc<dyn Provider>,
    providers: Vec<NamedProvider>,
    tools: Vec<Arc<dyn Tool>>,
    sources: Vec<Arc<dyn ToolSource>>,
    config: AgentConfig,
    hooks: Arc<dyn AgentHooks>,
    approval: Option<ApprovalPolicy>,
    store: Option<Arc<dyn SessionStore>>,
    identity: Option<ProcessIdentity>,
    modes: weft_loop::Modes,
}

impl AgentBuilder {
    /// A builder on `provider` with every setting at its default.
    pub(crate) fn new(provider: Arc<dyn Provider>) -> Self {
        AgentBuilder {
            provider,
            providers: Vec::new(),
            tools: Vec::new(),
            sources: Vec::new(),
            config: AgentConfig::default(),
            hooks: Arc::new(NoHooks),
            approval: None,
            store: None,
            identity: None,
            modes: weft_loop::Modes::builtin(),
        }
    }

    /// Lets sessions run in a reasoning mode of the application's own, besides react, tot and
    /// got: a session names it in its options (`{"type": name, ...parameters}`), and the
    /// server and the CLI read it by name ([`Agent::modes`]). A mode of the same name as one
    /// the agent has replaces it.
    pub fn mode(mut self, kind: weft_loop::ModeKind) -> Self {
        self.modes = self.modes.with(kind);
        self
    }

    /// Keeps sessions in `store` (see `weft-store` for memory, SQLite and Postgres): every
    /// message, status change and event is durable, sessions can be loaded by id in any
    /// process ([`Agent::session`]), and any number of watchers can follow a run. Without a
    /// store, sessions live in this process's memory only.
    pub fn store(mut self, store: Arc<dyn SessionStore>) -> Self {
        self.store = Some(store);
        self
    }

    /// Holds runs' leases under `identity` (default: an [ephemeral](ProcessIdentity::ephemeral)
    /// one). With a stable identity ([`ProcessIdentity::claim`]), the agent's first use of the
    /// store frees the leases a dead process left under it, so its runs are recovered and its
    /// suspended sessions resumed at once instead of after the lease ttl.
    pub fn identity(mut self, identity: ProcessIdentity) -> Self {
        self.identity = Some(identity);
        self
    }

    /// Sets the default model.
    pub fn model(mut self, model: impl Into<String>) -> Self {
        self.config.model = model.into();
        self
    }

    /// Sets the default system prompt (one copy, shared by every session that uses it).
    pub fn system_prompt(mut self, prompt: impl Into<Arc<str>>) -> Self {
        self.config.system_prompt = Some(prompt.into());
        self
    }

    /// Adds a local tool.
    pub fn tool(mut self, tool: impl Tool) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    /// Adds a shared local tool.
    pub fn shared_tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds a source of local tools (an MCP server, a configured set of built-in tools); its
    /// tools are looked up again before each model call, so a set that changes is seen.
    pub fn tool_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.sources.push(source);
        self
    }

    /// Limits the model calls of one run.
    pub fn max_turns(mut self, max_turns: u32) -> Self {
        self.config.max_turns = max_turns;
        self
    }

    /// Sets the default timeout of local tool calls.
    pub fn tool_timeout(mut self, timeout: Duration) -> Self {
        self.config.tool_timeout = timeout;
        self
    }

    /// Sets how long remote calls wait for their results.
    pub fn remote_tool_timeout(mut self, timeout: Duration) -> Self {
        self.config.remote_tool_timeout = timeout;
        self
    }

    /// Sets how long a run's lease lasts without renewal (see [`AgentConfig::lease_ttl`]).
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.config.lease_ttl = ttl;
        self
    }

    /// Sets how often the sweeper looks for expired deadlines and dead runs.
    pub fn sweep_interval(mut self, every: Duration) -> Self {
        self.config.sweep_interval = every;
        self
    }

    /// Sets how many recently used sessions stay open (see [`AgentConfig::keep_open`]).
    pub fn keep_open(mut self, sessions: usize) -> Self {
        self.config.keep_open = sessions;
        self
    }

    /// Sets how often a run looks for an abort requested by another process (zero: never).
    pub fn abort_poll(mut self, every: Duration) -> Self {
        self.config.abort_poll = every;
        self
    }

    /// Sets how long a run keeps trying to store its end while the store fails transiently
    /// (see [`AgentConfig::end_commit_timeout`]).
    pub fn end_commit_timeout(mut self, timeout: Duration) -> Self {
        self.config.end_commit_timeout = timeout;
        self
    }

    /// Whether the runs' GenAI spans carry message content (see
    /// [`AgentConfig::capture_content`]; off by default).
    pub fn capture_content(mut self, on: bool) -> Self {
        self.config.capture_content = on;
        self
    }

    /// Adds a provider sessions may pick by `name` ([`SessionOptions::provider`](crate::SessionOptions::provider)); `model` is the
    /// model of new sessions on it that name none. The provider the builder started with is
    /// the default, named by its [`Provider::name`]; adding a provider under that name replaces
    /// it as the one sessions naming it use.
    pub fn with_provider(
        mut self,
        name: impl Into<String>,
        provider: Arc<dyn Provider>,
        model: impl Into<String>,
    ) -> Self {
        let name = name.into();
        self.providers.retain(|p| p.name != name);
        self.providers.push(NamedProvider { name, provider, model: Some(model.into()) });
        self
    }

    /// Sets all settings at once.
    pub fn config(mut self, config: AgentConfig) -> Self {
        self.config = config;
        self
    }

    /// Installs hooks.
    pub fn hooks(mut self, hooks: impl AgentHooks + 'static) -> Self {
        self.hooks = Arc::new(hooks);
        self
    }

    /// Requires approval for the calls `policy` picks (in addition to tools that always need it).
    pub fn approval_policy(
        mut self,
        policy: impl Fn(&ToolSpec, &ToolCall) -> bool + Send + Sync + 'static,
    ) -> Self {
        self.approval = Some(Arc::new(policy));
        self
    }

    /// Builds the agent; fails on duplicate tool names or invalid parameter schemas.
    pub fn build(self) -> Result<Agent, AgentError> {
        let tools = ToolCatalog::new(self.tools, self.sources)?;
        let default_name = self.provider.name().to_string();
        let mut providers = self.providers;
        if !providers.iter().any(|p| p.name == default_name) {
            providers.insert(
                0,
                NamedProvider {
                    name: default_name,
                    provider: Arc::clone(&self.provider),
                    model: None,
                },
            );
        }
        let identity = self.identity.unwrap_or_else(ProcessIdentity::ephemeral);
        let agent = Agent {
            driver: Driver::new(Arc::new(AgentInner {
                id: crate::context::next_agent_id(),
                provider: self.provider,
                providers,
                tools,
                config: self.config,
                hooks: self.hooks,
                approval: self.approval,
                store: self.store,
                holder: identity.shared_name(),
                identity,
                adopted: tokio::sync::OnceCell::new(),
                sweeper: std::sync::OnceLock::new(),
                sweep_now: Arc::new(tokio::sync::Notify::new()),
                open: Mutex::new(HashMap::new()),
                recent: Mutex::new(Recent::default()),
                modes: self.modes,
            })),
        };
        // Built within a runtime (a server starting): the sweeper starts now, so deadlines that
        // passed and runs that died while no process ran are handled without waiting for a
        // request. Otherwise it starts with the first session.
        if tokio::runtime::Handle::try_current().is_ok() {
            crate::deadline::ensure_sweeper(&agent.driver.inner);
        }
        Ok(agent)
    }
}
