//! [`Agent`]: a provider, local tools, configuration and hooks; it creates sessions and runs
//! them with [`Agent::execute`].

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::{FutureExt, Stream};
use weft_core::{
    AgentResponse, Commit, EventRecord, Input, Message, RunChange, Session, SessionStatus,
    SessionStore, StoreError, ToolCall, ToolSpec, now_ms,
};
use weft_llm::{CancellationToken, ModelRequest, Provider};

use crate::catalog::{RemoteTools, ToolCatalog};
use crate::error::{AgentError, ExecuteError};
use crate::execute::{Emitter, ExecuteResult, ExecuteStream};
use crate::hub::Hub;
use crate::identity::ProcessIdentity;
use crate::lease::Lease;
use crate::machine::Machine;
use crate::run::Run;
use crate::tool::{Tool, ToolSource};

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
/// The key of a session's `options` that holds its own limit of model calls per run.
pub const OPTION_MAX_TURNS: &str = "maxTurns";
/// The key of a session's `options` that holds its reasoning [`Mode`](crate::Mode) (absent:
/// react).
pub const OPTION_MODE: &str = "mode";
/// The key of a session's `options` that holds the seq after which the events of its current
/// (or last) execution start: the last event before that execution's `session_start`. Set when
/// an execution starts and committed with its start, so a reader attaching to the live or last
/// run subscribes from there without scanning the log.
pub const OPTION_RUN_AFTER_SEQ: &str = "runAfterSeq";
/// The checkpoint namespace of abort requests: a checkpoint `(session, ABORT_NAMESPACE, run id)`
/// asks the process running that run to abort it.
pub const ABORT_NAMESPACE: &str = "weft.abort";

/// The seq after which the current or last execution's events start, as recorded in a session's
/// `options` ([`OPTION_RUN_AFTER_SEQ`]); `None` for a session that has not recorded it.
pub fn run_after_seq(options: &serde_json::Value) -> Option<u64> {
    options.get(OPTION_RUN_AFTER_SEQ)?.as_u64()
}

/// A session's own limit of model calls per run ([`OPTION_MAX_TURNS`]), if it has one.
pub fn session_max_turns(options: &serde_json::Value) -> Option<u32> {
    options.get(OPTION_MAX_TURNS)?.as_u64().map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// Removes `key` from a session's `options`.
pub(crate) fn remove_option(options: &mut serde_json::Value, key: &str) {
    if let Some(map) = options.as_object_mut() {
        map.remove(key);
    }
}

/// Sets `key` in a session's `options` (made an object if it is not one).
pub(crate) fn set_option(options: &mut serde_json::Value, key: &str, value: serde_json::Value) {
    if !options.is_object() {
        *options = serde_json::Value::Object(serde_json::Map::new());
    }
    if let Some(map) = options.as_object_mut() {
        map.insert(key.to_string(), value);
    }
}

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

struct NoHooks;
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
    /// ([`ABORT_NAMESPACE`]); zero: never.
    pub abort_poll: Duration,
    /// How long a run keeps trying to store its end (its resting status, answer and pending
    /// calls) while the store fails transiently (a full disk, a dropped connection). Nothing
    /// reports the end before it is stored; a run whose end could not be stored in this time
    /// ends with an error saying so, never with the status it could not keep. At most two
    /// thirds of [`lease_ttl`](Self::lease_ttl): a lease unrenewed longer than its ttl may be
    /// taken over by another process, which would then recover the run from its last stored
    /// state while this one still tried to store another end.
    pub end_commit_timeout: Duration,
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
        }
    }
}

/// A provider sessions may name, with the model new sessions on it get by default.
struct NamedProvider {
    name: String,
    provider: Arc<dyn Provider>,
    model: Option<String>,
}

/// The sessions used most recently, kept open (strongly held) up to a bound.
#[derive(Default)]
struct Recent {
    tick: u64,
    by_id: HashMap<String, (u64, Arc<Shared>)>,
    by_tick: std::collections::BTreeMap<u64, String>,
}

impl Recent {
    fn touch(&mut self, id: &str, shared: &Arc<Shared>, bound: usize) {
        if bound == 0 {
            return;
        }
        self.tick += 1;
        let tick = self.tick;
        if let Some((old, _)) = self.by_id.insert(id.to_string(), (tick, Arc::clone(shared))) {
            self.by_tick.remove(&old);
        }
        self.by_tick.insert(tick, id.to_string());
        while self.by_id.len() > bound {
            let Some((_, oldest)) = self.by_tick.pop_first() else { break };
            self.by_id.remove(&oldest);
        }
    }

    fn remove(&mut self, id: &str) {
        if let Some((tick, _)) = self.by_id.remove(id) {
            self.by_tick.remove(&tick);
        }
    }
}

pub(crate) struct AgentInner {
    /// The default provider (new sessions without a provider of their own, and sessions naming
    /// one this agent does not have).
    pub(crate) provider: Arc<dyn Provider>,
    /// Every provider a session may name, the default first.
    providers: Vec<NamedProvider>,
    pub(crate) tools: ToolCatalog,
    pub(crate) config: AgentConfig,
    pub(crate) hooks: Arc<dyn AgentHooks>,
    pub(crate) approval: Option<ApprovalPolicy>,
    /// Where sessions are kept durably; `None`: in memory only.
    pub(crate) store: Option<Arc<dyn SessionStore>>,
    /// This process's name as a lease holder.
    pub(crate) holder: Arc<str>,
    /// The identity `holder` is the name of (a stable one holds its slot's lock).
    identity: ProcessIdentity,
    /// Set once the leases a dead process left under this identity are freed (the first use of
    /// the store waits for it).
    adopted: tokio::sync::OnceCell<()>,
    /// Whether the sweeper task is started.
    pub(crate) sweeper: std::sync::OnceLock<()>,
    /// Wakes the sweeper early (a run suspended with a deadline).
    pub(crate) sweep_now: Arc<tokio::sync::Notify>,
    /// The sessions open in this process: one handle (one log, one lock) per session.
    open: Mutex<HashMap<String, Weak<Shared>>>,
    /// The most recently used of them, kept open ([`AgentConfig::keep_open`]).
    recent: Mutex<Recent>,
}

impl AgentInner {
    /// The provider a session names (the default one for a name this agent does not have).
    pub(crate) fn provider_for(&self, name: &str) -> Arc<dyn Provider> {
        self.providers
            .iter()
            .find(|p| p.name == name)
            .map_or_else(|| Arc::clone(&self.provider), |p| Arc::clone(&p.provider))
    }
}

/// An agent: runs sessions against a provider with a set of local tools. Cheap to clone.
#[derive(Clone)]
pub struct Agent {
    inner: Arc<AgentInner>,
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
}

impl AgentBuilder {
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

    /// Adds a provider sessions may pick by `name` ([`SessionOptions::provider`]); `model` is the
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
            inner: Arc::new(AgentInner {
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
            }),
        };
        // Built within a runtime (a server starting): the sweeper starts now, so deadlines that
        // passed and runs that died while no process ran are handled without waiting for a
        // request. Otherwise it starts with the first session.
        if tokio::runtime::Handle::try_current().is_ok() {
            crate::deadline::ensure_sweeper(&agent.inner);
        }
        Ok(agent)
    }
}

/// How to create a session; everything is optional.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// Its id (default: a new UUID).
    pub id: Option<String>,
    /// The model (default: the agent's).
    pub model: Option<String>,
    /// The system prompt (default: the agent's).
    pub system_prompt: Option<Arc<str>>,
    /// Remote tools: specs without executors, run by the client.
    pub tools: Vec<ToolSpec>,
    /// Messages the conversation starts with.
    pub messages: Vec<Message>,
    /// The owner.
    pub owner: Option<String>,
    /// The provider, by the name the agent knows it by (default: the agent's default
    /// provider). A name the agent does not have is refused ([`AgentError::UnknownProvider`]).
    pub provider: Option<String>,
    /// The session's own limit of model calls per run (default: the agent's `max_turns`).
    /// Kept in the session's options, so it holds across resumes in any process.
    pub max_turns: Option<u32>,
    /// The reasoning mode of the session's runs (default: react), kept in its options.
    pub mode: Option<crate::Mode>,
}

impl Agent {
    /// Starts building an agent on `provider`.
    pub fn builder(provider: impl Provider + 'static) -> AgentBuilder {
        Self::builder_shared(Arc::new(provider))
    }

    /// Starts building an agent on a shared provider.
    pub fn builder_shared(provider: Arc<dyn Provider>) -> AgentBuilder {
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
        }
    }

    pub(crate) fn from_inner(inner: Arc<AgentInner>) -> Self {
        Self { inner }
    }

    /// The identity this agent holds its runs' leases under.
    pub fn identity(&self) -> &ProcessIdentity {
        &self.inner.identity
    }

    /// Before the first use of the store: the leases held under this agent's stable identity
    /// are a dead process's (the identity's lock was free when this process claimed it). They
    /// are taken over in one step (nobody else can take them in between) and their sessions
    /// dealt with here and now: a run is recovered, a suspended session's lease given back so
    /// it takes answers at once. Every later call returns at once.
    ///
    /// Tried once: should the store fail, those leases expire by themselves. (Trying again
    /// later could take over the leases of this process's own live runs, which share its name.)
    pub(crate) async fn adopt_identity(&self) {
        let inner = &self.inner;
        let (Some(store), true) = (&inner.store, inner.identity.is_stable()) else { return };
        inner
            .adopted
            .get_or_init(|| async {
                let heir: Arc<str> =
                    Arc::from(format!("{}/{}", inner.holder, uuid::Uuid::new_v4()));
                let ttl = inner.config.lease_ttl;
                let taken = match store.take_over_process_leases(&inner.holder, &heir, ttl).await {
                    Ok(taken) => taken,
                    Err(error) => {
                        tracing::warn!(%error, "taking over a dead process's leases failed: they expire by themselves");
                        return;
                    }
                };
                if !taken.is_empty() {
                    tracing::warn!(
                        identity = %inner.holder,
                        sessions = taken.len(),
                        "a previous process with this identity died holding runs: recovering them now"
                    );
                }
                for id in taken {
                    let lease = Lease::held(store, &id, Arc::clone(&heir), ttl);
                    self.take_over(&id, lease).await;
                }
            })
            .await;
    }

    /// A session whose lease this process took over from a dead holder: its run is recovered
    /// here; a session that rests (its holder died between storing the end and letting go) has
    /// its lease given back.
    async fn take_over(&self, id: &str, lease: Lease) {
        let stored = match self.store().map(|store| store.load(id)) {
            Some(load) => load.await,
            None => return,
        };
        match stored {
            Ok(Some(stored)) if stored.head.status == SessionStatus::Running => {
                match self.adopt(stored) {
                    Some(session) => drop(self.recover(&session, lease).await),
                    None => lease.release().await,
                }
            }
            Ok(_) => lease.release().await,
            Err(error) => {
                // The sweeper recovers it once the lease expires.
                tracing::warn!(session_id = %id, %error, "loading a dead process's session failed");
            }
        }
    }

    /// The agent's settings.
    pub fn config(&self) -> &AgentConfig {
        &self.inner.config
    }

    /// The names of the providers sessions may pick, the default first.
    pub fn provider_names(&self) -> Vec<String> {
        self.inner.providers.iter().map(|p| p.name.clone()).collect()
    }

    /// The providers sessions may pick, the default first, each with the model a new session on
    /// it gets when it names none.
    pub fn provider_models(&self) -> Vec<(String, String)> {
        let model =
            |p: &NamedProvider| p.model.clone().unwrap_or_else(|| self.inner.config.model.clone());
        self.inner.providers.iter().map(|p| (p.name.clone(), model(p))).collect()
    }

    /// The specs of the agent's local tools.
    pub fn tool_specs(&self) -> Vec<ToolSpec> {
        self.inner.tools.snapshot().specs().cloned().collect()
    }

    /// The agent's local tools now: each spec with the name of the source that supplies it
    /// (`agent` for the builder's own tools, `mcp:NAME` for an MCP server's).
    pub fn tool_sources(&self) -> Vec<(ToolSpec, String)> {
        let tools = self.inner.tools.snapshot();
        tools.iter().map(|t| (t.tool.spec().clone(), t.source.clone())).collect()
    }

    /// Creates a session (in the store, when the agent has one). Fails when a remote tool's
    /// name is taken or not one every provider accepts ([`AgentError::InvalidToolName`]) or its
    /// schema is invalid, or when the store refuses (an id taken).
    pub async fn create_session(
        &self,
        options: SessionOptions,
    ) -> Result<SessionHandle, AgentError> {
        if let Some(spec) = options.tools.iter().find(|t| !weft_core::valid_tool_name(&t.name)) {
            return Err(AgentError::InvalidToolName { name: spec.name.clone() });
        }
        let id = options.id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let named = match &options.provider {
            None => None,
            Some(name) => {
                Some(self.inner.providers.iter().find(|p| p.name == *name).ok_or_else(|| {
                    AgentError::UnknownProvider {
                        name: name.clone(),
                        allowed: self.provider_names(),
                    }
                })?)
            }
        };
        let provider_name =
            named.map_or_else(|| self.inner.provider.name().to_string(), |p| p.name.clone());
        let model = options
            .model
            .or_else(|| named.and_then(|p| p.model.clone()))
            .unwrap_or_else(|| self.inner.config.model.clone());
        let mut session = Session::new(id, provider_name, model);
        if let Some(mode) = options.mode.as_ref().filter(|m| **m != crate::Mode::React) {
            let mode = serde_json::to_value(mode).unwrap_or_default();
            set_option(&mut session.options, OPTION_MODE, mode);
        }
        if let Some(max_turns) = options.max_turns {
            set_option(&mut session.options, OPTION_MAX_TURNS, max_turns.max(1).into());
        }
        session.system_prompt =
            options.system_prompt.or_else(|| self.inner.config.system_prompt.clone());
        session.tools = options.tools;
        session.messages = options.messages.into();
        session.owner = options.owner;
        self.insert_new(session).await
    }

    /// Stores the new `session` (refused if its id is taken) and opens it.
    pub(crate) async fn insert_new(&self, session: Session) -> Result<SessionHandle, AgentError> {
        let remote = RemoteTools::new(&session.tools, &self.inner.tools.snapshot())?;
        if let Some(store) = &self.inner.store {
            store
                .create(session.head(), session.messages.clone())
                .await
                .map_err(AgentError::Store)?;
        }
        Ok(self.register(session, remote, 0, false))
    }

    /// Takes charge of a session kept in memory only (one this agent's store does not keep):
    /// for instance one restored by the caller. A session left `running` by a process that
    /// stopped is taken as `error`.
    pub fn open_session(&self, mut session: Session) -> Result<SessionHandle, AgentError> {
        let remote = RemoteTools::new(&session.tools, &self.inner.tools.snapshot())?;
        if session.status == SessionStatus::Running {
            session.status = SessionStatus::Error;
        }
        let last = session.last_event_seq;
        Ok(self.register(session, remote, last, false))
    }

    /// The session `id`: the one open in this process, or loaded from the store. `None` when
    /// no such session exists. A session whose run died with its process (`running` in the
    /// store, nobody holding its lease) is recovered: calls left running are answered with an
    /// error saying the run was interrupted (replay-safe tools run again) and the run goes on
    /// from its last checkpoint here; a suspended one loads suspended and resumes normally.
    pub async fn session(&self, id: &str) -> Result<Option<SessionHandle>, AgentError> {
        crate::deadline::ensure_sweeper(&self.inner);
        self.adopt_identity().await;
        if let Some(handle) = self.open_handle(id) {
            handle.refresh_if_stale().await;
            self.keep_recent(&handle);
            self.recover_if_dead(&handle).await;
            return Ok(Some(handle));
        }
        let Some(store) = &self.inner.store else { return Ok(None) };
        let Some(stored) = store.load(id).await.map_err(AgentError::Store)? else {
            return Ok(None);
        };
        // Another task may have loaded it meanwhile: one handle per session.
        if let Some(handle) = self.open_handle(id) {
            self.keep_recent(&handle);
            return Ok(Some(handle));
        }
        let handle = self.register_stored(stored)?;
        self.recover_if_dead(&handle).await;
        Ok(Some(handle))
    }

    /// A session `running` in the store with no run of this process: when nobody holds its
    /// lease (its process died), its run is recovered here.
    async fn recover_if_dead(&self, handle: &SessionHandle) {
        let Some(store) = &self.inner.store else { return };
        let id = {
            let state = handle.lock();
            if state.run.is_some() || state.session.status != SessionStatus::Running {
                return;
            }
            state.session.id.clone()
        };
        let ttl = self.inner.config.lease_ttl;
        if let Ok(Some(lease)) = Lease::acquire(store, &id, &self.inner.holder, ttl).await {
            drop(self.recover(handle, lease).await);
        }
    }

    /// A handle for a session just loaded from the store.
    pub(crate) fn register_stored(
        &self,
        stored: weft_core::StoredSession,
    ) -> Result<SessionHandle, AgentError> {
        let last_seq = stored.last_seq;
        let session = Session::from_stored(stored);
        let remote = RemoteTools::new(&session.tools, &self.inner.tools.snapshot())?;
        Ok(self.register(session, remote, last_seq, true))
    }

    /// The sessions open in this process.
    pub(crate) fn open_sessions(&self) -> Vec<SessionHandle> {
        let open = self.inner.open.lock().unwrap_or_else(|e| e.into_inner());
        open.values().filter_map(Weak::upgrade).map(|shared| SessionHandle { shared }).collect()
    }

    /// The session `id` if it is open in this process.
    pub(crate) fn open_sessions_with_id(&self, id: &str) -> Option<SessionHandle> {
        self.open_handle(id)
    }

    /// The agent's store, if it has one.
    pub fn store(&self) -> Option<&Arc<dyn SessionStore>> {
        self.inner.store.as_ref()
    }

    /// The heads of the sessions in `scope`, most recently updated first (at most `limit`): from
    /// the store, or those open in this process when the agent has none.
    pub async fn list_sessions(
        &self,
        scope: weft_core::OwnerScope<'_>,
        limit: usize,
    ) -> Result<Vec<weft_core::SessionHead>, AgentError> {
        if let Some(store) = &self.inner.store {
            return store.list_sessions(scope, limit).await.map_err(AgentError::Store);
        }
        let mut heads: Vec<_> = self
            .open_sessions()
            .into_iter()
            .map(|s| s.lock().session.head())
            .filter(|h| scope.admits(h.owner.as_deref()))
            .collect();
        heads.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| a.id.cmp(&b.id)));
        heads.truncate(limit);
        Ok(heads)
    }

    /// Deletes a session in `scope` with everything it has; says whether there was one. A
    /// session whose run is under way in this process is aborted first.
    pub async fn delete_session(
        &self,
        id: &str,
        scope: weft_core::OwnerScope<'_>,
    ) -> Result<bool, AgentError> {
        let open = self.open_handle(id);
        if let Some(session) = &open {
            if !scope.admits(session.lock().session.owner.as_deref()) {
                return Ok(false);
            }
            session.abort().await;
            let mut registry = self.inner.open.lock().unwrap_or_else(|e| e.into_inner());
            registry.remove(id);
            drop(registry);
            self.inner.recent.lock().unwrap_or_else(|e| e.into_inner()).remove(id);
        }
        match &self.inner.store {
            Some(store) => store.delete_session(id, scope).await.map_err(AgentError::Store),
            None => Ok(open.is_some()),
        }
    }

    /// This process's name as a lease holder.
    pub(crate) fn holder(&self) -> &Arc<str> {
        &self.inner.holder
    }

    fn open_handle(&self, id: &str) -> Option<SessionHandle> {
        let open = self.inner.open.lock().unwrap_or_else(|e| e.into_inner());
        open.get(id).and_then(Weak::upgrade).map(|shared| SessionHandle { shared })
    }

    /// The handle of `session`, open from now on. `loaded`: it comes from the store, and a
    /// handle another task opened for it meanwhile is kept instead.
    fn register(
        &self,
        session: Session,
        remote: RemoteTools,
        last_seq: u64,
        loaded: bool,
    ) -> SessionHandle {
        let id = session.id.clone();
        let committed_messages = session.messages.len();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                session,
                run: None,
                ending: false,
                stale: false,
                recovering: false,
                committed_messages,
            }),
            remote,
            hub: Mutex::new(HubSlot::Unmade(last_seq)),
            store: self.inner.store.clone(),
            idle: tokio::sync::Notify::new(),
        });
        let mut open = self.inner.open.lock().unwrap_or_else(|e| e.into_inner());
        if loaded && let Some(kept) = open.get(&id).and_then(Weak::upgrade) {
            // Loaded twice at once (a request and the sweeper): one handle per session, the
            // first one, whose run (a recovery) may have started already.
            drop(open);
            let handle = SessionHandle { shared: kept };
            self.keep_recent(&handle);
            return handle;
        }
        open.retain(|_, weak| weak.strong_count() > 0);
        open.insert(id, Arc::downgrade(&shared));
        drop(open);
        let handle = SessionHandle { shared };
        self.keep_recent(&handle);
        handle
    }

    /// Keeps `session` open as one of the most recently used ([`AgentConfig::keep_open`]).
    fn keep_recent(&self, session: &SessionHandle) {
        let id = session.id();
        let mut recent = self.inner.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.touch(&id, &session.shared, self.inner.config.keep_open);
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
        tokio::runtime::Handle::try_current().map_err(|_| ExecuteError::NoRuntime)?;
        // A start runs to its end even if its caller goes away (an HTTP client disconnecting
        // drops the handler's future): dropped half-way, it would leave the handle marked
        // running by a run that never began, refusing every later input.
        let (agent, session, input) = (self.clone(), session.clone(), input.into());
        match tokio::spawn(async move { agent.execute_here(&session, input).await }).await {
            Ok(started) => started,
            Err(join) if join.is_panic() => std::panic::resume_unwind(join.into_panic()),
            // The runtime is shutting down.
            Err(_) => Err(ExecuteError::NoRuntime),
        }
    }

    /// [`execute`](Self::execute), in the task that cannot be dropped half-way.
    async fn execute_here(
        &self,
        session: &SessionHandle,
        mut input: Input,
    ) -> Result<ExecuteStream, ExecuteError> {
        crate::deadline::ensure_sweeper(&self.inner);
        self.adopt_identity().await;
        // Only a store's lease can be held by another process's ending run.
        let mut deadline = self.inner.store.is_some().then(|| Instant::now() + HANDOVER_WAIT);
        loop {
            let spare = deadline.map(|_| input.clone());
            match self.start(session, input).await {
                Ok(stream) => return Ok(stream),
                Err(Refusal::Error(error)) => return Err(error),
                Err(Refusal::Recovering) => match spare {
                    // The input goes in once the recovery has ended, whatever it took.
                    Some(again) => {
                        session.wait_recovered().await;
                        input = again;
                        deadline = Some(Instant::now() + HANDOVER_WAIT);
                    }
                    None => return Err(ExecuteError::AlreadyRunning(session.id())),
                },
                Err(Refusal::HeldWhileResting) => match (spare, deadline) {
                    (Some(again), Some(until)) if Instant::now() < until => {
                        tokio::time::sleep(HANDOVER_POLL).await;
                        input = again;
                    }
                    _ => return Err(ExecuteError::AlreadyRunning(session.id())),
                },
            }
        }
    }

    /// One attempt of [`execute`](Self::execute).
    async fn start(&self, session: &SessionHandle, input: Input) -> Result<ExecuteStream, Refusal> {
        session.wait_while_ending().await;
        session.refresh_if_stale().await;
        self.keep_recent(session);
        let config = &self.inner.config;
        let cancel = CancellationToken::new();
        let input_message;
        let hub = session.hub();
        let (machine, first, start_len, session_id, run_id, commit, state_before, before) = {
            let mut state = session.lock();
            // `run` is set until the last run has published its end.
            if state.session.status == SessionStatus::Running || state.run.is_some() {
                if state.run.is_some() && state.recovering {
                    return Err(Refusal::Recovering);
                }
                return Err(ExecuteError::AlreadyRunning(state.session.id.clone()).into());
            }
            if state.stale {
                // The last run's end never reached the store, and the store cannot be read to
                // say what the session is now: nothing starts from a state it does not have.
                return Err(ExecuteError::Store(StoreError::backend(
                    "the session's last run ended without its end being stored, and the store \
                     cannot be read to reload it",
                ))
                .into());
            }
            let max_turns = session_max_turns(&state.session.options).unwrap_or(config.max_turns);
            let mode = crate::Mode::of_options(&state.session.options);
            let mut machine =
                Machine::with_mode(max_turns, millis(config.remote_tool_timeout), mode);
            let start_len = state.session.messages.len();
            let tools = self.inner.tools.snapshot();
            let is_message = matches!(input, Input::User(_));
            // What this process held, put back if the start is refused and the store cannot
            // say what the session is now.
            let before = self.inner.store.is_some().then(|| state.session.clone());
            let run_id = uuid::Uuid::new_v4().to_string();
            let state_before = Machine::mode_state(&state.session);
            let first = machine.begin(
                &mut state.session,
                input,
                |name| tools.get(name).is_some(),
                now_ms(),
                run_id.clone(),
            )?;
            // A user message is emitted as the run's first message (the log's own, at its
            // position); tool results are emitted when their turn completes.
            input_message = is_message
                .then(|| state.session.messages.shared().get(start_len).cloned())
                .flatten()
                .map(|message| (message, start_len as u64));
            state.session.status = SessionStatus::Running;
            // Where this execution's events start, committed with its start.
            set_option(&mut state.session.options, OPTION_RUN_AFTER_SEQ, hub.last_seq().into());
            state.run = Some(cancel.clone());
            let commit = session.shared.store.is_some().then(|| state.prepare_commit());
            let id = state.session.id.clone();
            (machine, first, start_len, id, run_id, commit, state_before, before)
        };
        let mut lease = None;
        if let (Some(store), Some(commit)) = (&self.inner.store, commit) {
            // The lease first, then the commit that says `running`: a session is never seen
            // running without a holder.
            let refused = match Lease::acquire(
                store,
                &session_id,
                &self.inner.holder,
                config.lease_ttl,
            )
            .await
            {
                Ok(Some(held)) => {
                    lease = Some(held);
                    None
                }
                Ok(None) => {
                    // Another process runs (or is starting) the session's run, or has just
                    // ended it and not yet let go.
                    return Err(match session.reload_or_restore(before).await {
                        Reloaded::Resting => Refusal::HeldWhileResting,
                        Reloaded::Running | Reloaded::Unknown => {
                            ExecuteError::AlreadyRunning(session_id).into()
                        }
                    });
                }
                Err(error) => Some(error),
            };
            let refused = match refused {
                Some(error) => Some(error),
                None => session.apply(commit).await.err(),
            };
            if let Some(error) = refused {
                if let Some(lease) = lease.take() {
                    lease.release().await;
                }
                // The session changed elsewhere, or the store failed: nothing starts, and what
                // this process holds is reloaded from the store.
                let running = session.reload_or_restore(before).await == Reloaded::Running;
                return Err(match error {
                    StoreError::Conflict { .. } if running => {
                        ExecuteError::AlreadyRunning(session_id)
                    }
                    other => ExecuteError::Store(other),
                }
                .into());
            }
        }
        let launch = Launch {
            machine,
            first,
            input_message,
            start_len,
            run_id,
            cancel,
            lease,
            state_before,
            recovers: None,
        };
        Ok(self.launch(session, launch))
    }

    /// Starts the run task of a run whose start is recorded (and, with a store, committed), and
    /// returns its stream.
    fn launch(&self, session: &SessionHandle, launch: Launch) -> ExecuteStream {
        let Launch {
            machine,
            first,
            input_message,
            start_len,
            run_id,
            cancel,
            lease,
            state_before,
            recovers,
        } = launch;
        let session_id = session.id();
        let hub = session.hub();
        hub.start_run();
        let after_seq = hub.last_seq();
        let events = hub.subscribe(after_seq, true);
        let (result_tx, result_rx) = tokio::sync::oneshot::channel();
        let mut run = Run::new(
            self.inner.clone(),
            session.clone(),
            machine,
            Emitter::new(hub, &run_id),
            cancel.clone(),
            start_len,
        );
        run.set_state_before(state_before);
        run.set_recovers(recovers);
        if let Some(lease) = &lease {
            lease.keep(cancel.clone());
            lease.watch_abort(&run_id, self.inner.config.abort_poll, cancel.clone());
        }
        // Released by the run itself, before the session takes new input: a late release
        // would take the next run's lease (same holder) away.
        run.set_lease(lease);
        tokio::spawn(async move {
            let mut run = run;
            // A panic in a hook or a provider must not leave the session `running` forever, nor
            // a stream without its end.
            let outcome = AssertUnwindSafe(run.drive(input_message, first)).catch_unwind().await;
            let result = match outcome {
                Ok(result) => result,
                Err(panic) => {
                    let panic = crate::run::panic_message(&*panic);
                    // Boxed: inline, this rare path's state machine would sit beside the one
                    // of `drive` in every run task (5.6 KiB with it, 3.4 KiB without).
                    Box::pin(run.end_after_panic(panic)).await
                }
            };
            let _ = result_tx.send(result);
        });
        ExecuteStream::new(session_id, after_seq, events, result_rx, cancel)
    }

    /// Takes over a run whose process died (the session is `running` in the store, and this
    /// process holds its lease now): it goes on from its last checkpoint
    /// ([`Machine::begin_recovery`]): calls left running are answered with an error saying the
    /// run was interrupted, replay-safe ones run again, and the mode carries on.
    ///
    /// `None` (and the lease given back) when a run of this process has the session already:
    /// the handle is claimed under its lock, so one dead run is never recovered twice.
    pub(crate) async fn recover(
        &self,
        session: &SessionHandle,
        lease: Lease,
    ) -> Option<ExecuteStream> {
        let config = &self.inner.config;
        let cancel = CancellationToken::new();
        let after_seq = session.hub().last_seq();
        let claimed = {
            let mut state = session.lock();
            if state.run.is_some() || state.session.status != SessionStatus::Running {
                None
            } else {
                let max_turns =
                    session_max_turns(&state.session.options).unwrap_or(config.max_turns);
                let mode = crate::Mode::of_options(&state.session.options);
                let mut machine =
                    Machine::with_mode(max_turns, millis(config.remote_tool_timeout), mode);
                set_option(&mut state.session.options, OPTION_RUN_AFTER_SEQ, after_seq.into());
                let start_len = state.session.messages.len();
                let tools = self.inner.tools.snapshot();
                let replay_safe =
                    |name: &str| tools.get(name).is_some_and(|t| t.tool.replay_safe());
                let state_before = Machine::mode_state(&state.session);
                let first = machine.begin_recovery(&mut state.session, replay_safe, now_ms());
                let run_id = uuid::Uuid::new_v4().to_string();
                let mut recovers = None;
                if let Some(run) = state.session.run.as_mut() {
                    // The dead execution's answer is known by the run's first execution's id.
                    let dead = std::mem::replace(&mut run.run_id, run_id.clone());
                    let first = run.first_run_id.get_or_insert(dead);
                    recovers = Some(first.clone());
                }
                state.run = Some(cancel.clone());
                state.recovering = true;
                Some((machine, first, start_len, run_id, state_before, recovers))
            }
        };
        let Some((machine, first, start_len, run_id, state_before, recovers)) = claimed else {
            lease.release().await;
            return None;
        };
        tracing::warn!(session_id = %session.id(), "recovering a run whose process stopped");
        let launch = Launch {
            machine,
            first,
            input_message: None,
            start_len,
            run_id,
            cancel,
            lease: Some(lease),
            state_before,
            recovers,
        };
        Some(self.launch(session, launch))
    }

    /// Runs `input` to the end without streaming and returns the step trace and final answer
    /// with the whole result.
    pub async fn respond(
        &self,
        session: &SessionHandle,
        input: impl Into<Input>,
    ) -> Result<(AgentResponse, ExecuteResult), ExecuteError> {
        let result = self.execute(session, input).await?.result().await;
        Ok((result.response(), result))
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What [`Agent::launch`] starts a run task with.
struct Launch {
    machine: Machine,
    first: crate::machine::Progress,
    /// The user message that starts the run, with its position in the log.
    input_message: Option<(Arc<Message>, u64)>,
    start_len: usize,
    run_id: String,
    cancel: CancellationToken,
    lease: Option<Lease>,
    /// The run's state before the input (or the recovery) was applied.
    state_before: serde_json::Value,
    /// For a recovery: the id of the run whose answer it completes.
    recovers: Option<String>,
}

pub(crate) struct State {
    pub(crate) session: Session,
    /// The running run's abort token.
    pub(crate) run: Option<CancellationToken>,
    /// The run has reported its end (its resting state is saved) and is letting go of the
    /// session: it counts as ended, and a new input waits the moment it takes.
    pub(crate) ending: bool,
    /// What this process holds is not what the store has, and must be reloaded before the
    /// session is used again: a run ended whose end the store never took.
    pub(crate) stale: bool,
    /// The run under way recovers one whose process died: new input waits for it to end
    /// instead of being refused.
    pub(crate) recovering: bool,
    /// How many of the session's messages the store has.
    committed_messages: usize,
}

impl State {
    /// The commit of everything changed since the last one: the head at the next version, the
    /// messages appended since, the run state. Applied with [`State::committed`] once stored.
    pub(crate) fn prepare_commit(&self) -> Commit {
        let s = &self.session;
        let mut head = s.head();
        head.version = s.version + 1;
        head.updated_at = now_ms();
        Commit {
            expected_version: s.version,
            head,
            messages: s.messages.shared_from(self.committed_messages).to_vec(),
            run: match &s.run {
                Some(run) => RunChange::Set(run.clone()),
                None => RunChange::Clear,
            },
            events: Vec::new(),
        }
    }

    /// The store took a commit made with [`State::prepare_commit`].
    fn committed(&mut self, version: u64, message_count: u64, updated_at: u64) {
        self.session.version = version;
        self.session.updated_at = updated_at;
        self.committed_messages = usize::try_from(message_count).unwrap_or(usize::MAX);
    }
}

pub(crate) struct Shared {
    state: Mutex<State>,
    pub(crate) remote: RemoteTools,
    /// The session's event log in this process, made when first needed (a run, a watcher):
    /// an idle session does not carry one. Replaced by a fresh one when the session is
    /// reloaded after another process added events (never while a run of this process uses it).
    hub: Mutex<HubSlot>,
    /// Where the session is kept, if anywhere.
    pub(crate) store: Option<Arc<dyn SessionStore>>,
    /// Woken when a run has let go of the session.
    pub(crate) idle: tokio::sync::Notify,
}

/// A session's event log in this process, or what it starts from once made.
enum HubSlot {
    /// Not made yet: the seq of the session's last event.
    Unmade(u64),
    /// Made.
    Made(Arc<Hub>),
}

/// What a reload found in the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reloaded {
    /// The session is running (in another process).
    Running,
    /// The session rests.
    Resting,
    /// Nothing to go by: no store, no such session, or the store failed.
    Unknown,
}

/// Why one attempt to start a run did not.
enum Refusal {
    /// A run of this process is recovering one whose process died: the input waits for it.
    Recovering,
    /// The lease is held though the session rests: another process's run has ended and not yet
    /// let go. Worth another try in a moment.
    HeldWhileResting,
    /// Refused for good.
    Error(ExecuteError),
}

impl From<ExecuteError> for Refusal {
    fn from(error: ExecuteError) -> Self {
        Self::Error(error)
    }
}

/// The first pause between tries to store a run's end ([`SessionHandle::save_retrying`]).
const END_RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest.
const END_RETRY_MAX: Duration = Duration::from_secs(2);

/// How long a start waits for another process's ended run to let go of the session.
const HANDOVER_WAIT: Duration = Duration::from_secs(2);
/// How often it looks again meanwhile.
const HANDOVER_POLL: Duration = Duration::from_millis(20);

/// A session kept in memory, shared by the caller and its runs. Cheap to clone.
#[derive(Clone)]
pub struct SessionHandle {
    pub(crate) shared: Arc<Shared>,
}

impl SessionHandle {
    fn hub_slot(&self) -> MutexGuard<'_, HubSlot> {
        self.shared.hub.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session's event log in this process, made if it was not yet.
    pub(crate) fn hub(&self) -> Arc<Hub> {
        if let HubSlot::Made(hub) = &*self.hub_slot() {
            return Arc::clone(hub);
        }
        // The id is read before the slot is locked: `replace` takes the state's lock, then the
        // slot's, so the slot's is never held while waiting for the state's.
        let id = self.id();
        let mut slot = self.hub_slot();
        let hub = match &*slot {
            HubSlot::Made(hub) => return Arc::clone(hub),
            HubSlot::Unmade(last_seq) => Hub::new(&id, self.shared.store.clone(), *last_seq),
        };
        *slot = HubSlot::Made(Arc::clone(&hub));
        hub
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // The lock is never held across an await or around code that can panic; a poisoned
        // lock still holds a consistent session.
        self.shared.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session's id.
    pub fn id(&self) -> String {
        self.lock().session.id.clone()
    }

    /// Its status: `running` until a run of this process has published its end (its resting
    /// status is saved a moment before).
    pub fn status(&self) -> SessionStatus {
        let state = self.lock();
        if state.run.is_some() && !state.ending {
            SessionStatus::Running
        } else {
            state.session.status
        }
    }

    /// A copy of the whole session (with the status [`status`](Self::status) gives).
    pub fn snapshot(&self) -> Session {
        let state = self.lock();
        let mut session = state.session.clone();
        if state.run.is_some() && !state.ending {
            session.status = SessionStatus::Running;
        }
        session
    }

    /// Whether a run of this process is recovering the session's run whose process died (see
    /// [`Agent::session`]). An input given meanwhile waits for the recovery to end, then runs.
    pub fn is_recovering(&self) -> bool {
        let state = self.lock();
        state.run.is_some() && state.recovering
    }

    /// Waits until no recovery of this process has the session.
    async fn wait_recovered(&self) {
        loop {
            let idle = self.shared.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if !self.is_recovering() {
                return;
            }
            idle.await;
        }
    }

    /// Calls waiting for remote results.
    pub fn pending_tool_calls(&self) -> Vec<ToolCall> {
        self.lock().session.pending_tool_calls()
    }

    /// Calls waiting for approval.
    pub fn pending_approvals(&self) -> Vec<ToolCall> {
        self.lock().session.pending_approvals()
    }

    /// Aborts the session's run. A running run stops (see [`ExecuteStream::abort`]); a suspended
    /// one has its waiting calls answered with error results and ends `aborted`, so the session
    /// takes a new user message. A run under way in another process (sharing the store) is asked
    /// to stop through the store: that process looks for the request every
    /// [`AgentConfig::abort_poll`] and aborts the run as if asked here. Returns whether there was
    /// anything to abort.
    pub async fn abort(&self) -> bool {
        if self.lock().run.is_none() {
            self.refresh_if_stale().await;
        }
        let remote = {
            let state = self.lock();
            let elsewhere = state.run.is_none()
                && state.session.status == SessionStatus::Running
                && self.shared.store.is_some();
            // Running in another process: the run there is asked to stop.
            elsewhere.then(|| {
                let run_id = state.session.run.as_ref().map(|r| r.run_id.clone());
                (state.session.id.clone(), run_id)
            })
        };
        if let Some((session_id, run_id)) = remote {
            return self.request_remote_abort(session_id, run_id).await;
        }
        let commit = {
            let mut state = self.lock();
            if let Some(run) = &state.run {
                // A run that is ending has saved its resting state (and shown its end): there is
                // nothing left to abort.
                if state.ending {
                    return false;
                }
                run.cancel();
                return true;
            }
            if state.session.open_turn().is_none() {
                return false;
            }
            let mut machine = Machine::new(1, 0);
            machine.abort(&mut state.session, now_ms());
            machine.end(&mut state.session, SessionStatus::Aborted);
            if self.shared.store.is_none() {
                state.session.version += 1;
                state.session.updated_at = now_ms();
                return true;
            }
            state.prepare_commit()
        };
        if let Err(error) = self.apply(commit).await {
            tracing::error!(session_id = %self.id(), %error, "saving the aborted session failed");
            self.reload().await;
        }
        true
    }

    /// Records in the store that the run `run_id` (under way in another process) is to be
    /// aborted.
    async fn request_remote_abort(&self, session_id: String, run_id: Option<String>) -> bool {
        let (Some(store), Some(run_id)) = (&self.shared.store, run_id) else { return false };
        let checkpoint = weft_core::Checkpoint {
            session_id,
            namespace: ABORT_NAMESPACE.to_string(),
            id: run_id,
            parent_id: None,
            at: now_ms(),
            value: serde_json::json!({ "abort": true }),
        };
        match store.put_checkpoint(checkpoint).await {
            Ok(()) => true,
            Err(error) => {
                tracing::error!(session_id = %self.id(), %error, "recording the abort request failed");
                false
            }
        }
    }

    /// The session's events after `after_seq`, from its log (memory, then the store) and then
    /// live, to the end of the run under way or of the last one: what a client that reconnects
    /// with `Last-Event-ID` is sent. Any number of watchers may follow one session; none of
    /// them slows its run.
    pub fn subscribe(
        &self,
        after_seq: u64,
    ) -> impl Stream<Item = Arc<EventRecord>> + Send + 'static {
        // The stream owns the log it reads (the session may move on to a fresh one): the hub's
        // own stream, not a second one wrapped around it (each event would pass two generators).
        self.hub().subscribe(after_seq, true)
    }

    /// The sequence number of the session's last event.
    pub fn last_seq(&self) -> u64 {
        match &*self.hub_slot() {
            HubSlot::Made(hub) => hub.last_seq(),
            HubSlot::Unmade(last_seq) => *last_seq,
        }
    }

    /// Stores `commit`, made from this session's state; on success the state records it.
    pub(crate) async fn apply(&self, commit: Commit) -> Result<(), StoreError> {
        let Some(store) = &self.shared.store else { return Ok(()) };
        let (version, count, at) =
            (commit.head.version, commit.head.message_count, commit.head.updated_at);
        store.commit(commit).await?;
        self.lock().committed(version, count, at);
        Ok(())
    }

    /// Saves what changed since the last commit (a no-op without a store).
    pub(crate) async fn save(&self) -> Result<(), StoreError> {
        if self.shared.store.is_none() {
            return Ok(());
        }
        let commit = self.lock().prepare_commit();
        self.apply(commit).await
    }

    /// Saves what changed since the last commit like [`save`](Self::save), trying again while
    /// the store fails transiently, until `until`: for a run's end, which nothing may report
    /// before the store has it. A refusal, a closed store or the time running out is returned.
    ///
    /// A transient failure may hide a commit that was applied (a connection cut after the
    /// database committed, before it answered): the next try then finds the version moved on.
    /// When the stored head is one a try of this loop wrote (its version, and the `updated_at`
    /// of one of the tries), it counts as stored.
    pub(crate) async fn save_retrying(&self, until: Instant) -> Result<(), StoreError> {
        let Some(store) = &self.shared.store else { return Ok(()) };
        let mut backoff = END_RETRY_FIRST;
        // The `updated_at` of every try: a head with one of them at the commit's version is one
        // this loop wrote.
        let mut tried = Vec::new();
        loop {
            let commit = self.lock().prepare_commit();
            let (version, count) = (commit.head.version, commit.head.message_count);
            tried.push(commit.head.updated_at);
            let error = match self.apply(commit).await {
                Ok(()) => return Ok(()),
                Err(error) => error,
            };
            if tried.len() > 1 && matches!(error, StoreError::Conflict { .. }) {
                match self.stored_head(store, until).await {
                    Ok(Some(head))
                        if head.version == version && tried.contains(&head.updated_at) =>
                    {
                        self.lock().committed(version, count, head.updated_at);
                        return Ok(());
                    }
                    // Another process moved the session on: refused.
                    Ok(_) => return Err(error),
                    Err(unread) => return Err(unread),
                }
            }
            if !error.is_transient() || Instant::now() + backoff >= until {
                return Err(error);
            }
            tracing::warn!(session_id = %self.id(), %error, "storing the run's end failed; retrying");
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(END_RETRY_MAX);
        }
    }

    /// The session's stored head, read again while the store fails transiently, until `until`.
    async fn stored_head(
        &self,
        store: &Arc<dyn SessionStore>,
        until: Instant,
    ) -> Result<Option<weft_core::SessionHead>, StoreError> {
        let id = self.id();
        let mut backoff = END_RETRY_FIRST;
        loop {
            match store.head(&id).await {
                Err(error) if error.is_transient() && Instant::now() + backoff < until => {
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(END_RETRY_MAX);
                }
                read => return read,
            }
        }
    }

    /// Waits (briefly) for a run that has reported its end to let go of the session.
    async fn wait_while_ending(&self) {
        for _ in 0..100 {
            let idle = self.shared.idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            {
                let state = self.lock();
                if state.run.is_none() || !state.ending {
                    return;
                }
            }
            let _ = tokio::time::timeout(Duration::from_millis(50), idle).await;
        }
    }

    /// Another process may have moved the session on since this one last looked (run it,
    /// resumed it, aborted it): when the store's head has another version, what this process
    /// holds is reloaded, its event log included, so a run started here goes on from the
    /// store's state and numbers its events after every stored one. Only when no run of this
    /// process has the session; one read of the head otherwise.
    pub(crate) async fn refresh_if_stale(&self) {
        let Some(store) = &self.shared.store else { return };
        let (id, version, stale) = {
            let state = self.lock();
            if state.run.is_some() {
                return;
            }
            (state.session.id.clone(), state.session.version, state.stale)
        };
        if stale {
            self.reload().await;
            return;
        }
        match store.head(&id).await {
            Ok(Some(head)) if head.version == version => {}
            Ok(_) => {
                self.reload().await;
            }
            Err(error) => {
                tracing::warn!(session_id = %id, %error, "reading the session's head failed");
            }
        }
    }

    /// Replaces what this process holds with what the store has, unless a run of this process
    /// has the session (one may have started while the store was read): says whether it did.
    /// When the store has events this process's log has not numbered (another process ran the
    /// session), the log is replaced too: numbering goes on above the store's. A log that is
    /// ahead of the store (events this process numbered and showed that the store does not have
    /// yet: a run whose end it did not keep) is kept, so its numbers are never given again.
    pub(crate) fn replace(&self, stored: weft_core::StoredSession) -> bool {
        let last_seq = stored.last_seq;
        let session = Session::from_stored(stored);
        let mut state = self.lock();
        if state.run.is_some() {
            return false;
        }
        {
            let mut slot = self.hub_slot();
            match &*slot {
                HubSlot::Made(hub) if hub.last_seq() < last_seq => {
                    *slot =
                        HubSlot::Made(Hub::new(&session.id, self.shared.store.clone(), last_seq));
                }
                HubSlot::Made(_) => {}
                HubSlot::Unmade(_) => *slot = HubSlot::Unmade(last_seq),
            }
        }
        state.committed_messages = session.messages.len();
        state.session = session;
        state.ending = false;
        state.stale = false;
        state.recovering = false;
        true
    }

    /// Replaces what this process holds with what the store has; says what that is.
    pub(crate) async fn reload(&self) -> Reloaded {
        let Some(store) = &self.shared.store else { return Reloaded::Unknown };
        let id = self.id();
        match store.load(&id).await {
            Ok(Some(stored)) => {
                let running = stored.head.status == SessionStatus::Running;
                self.replace(stored);
                if running { Reloaded::Running } else { Reloaded::Resting }
            }
            Ok(None) => Reloaded::Unknown,
            Err(error) => {
                tracing::error!(session_id = %id, %error, "reloading the session failed");
                Reloaded::Unknown
            }
        }
    }

    /// After a refused start: puts back `before`, what this process held before the start (so
    /// the handle is never left with a run that did not begin), then [`reload`](Self::reload)s
    /// what the store has.
    async fn reload_or_restore(&self, before: Option<Session>) -> Reloaded {
        {
            let mut state = self.lock();
            if let Some(before) = before {
                state.session = before;
            }
            state.run = None;
            state.ending = false;
        }
        self.reload().await
    }
}
