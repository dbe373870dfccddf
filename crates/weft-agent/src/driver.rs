//! The driver: everything [`Agent`](crate::Agent) does, on the agent's shared context —
//! creating, loading, registering and forking sessions, starting, launching and recovering
//! runs. [`Agent`](crate::Agent) is its public face; the sweeper (`deadline.rs`) drives it through
//! a weak reference to the context.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Weak};
use std::time::Duration;

use tokio::time::Instant;

use futures::FutureExt;
use tracing::{Instrument, Span};
use weft_core::{
    AgentResponse, Input, Message, Session, SessionStatus, SessionStore, StoreError, ToolSpec,
    now_ms,
};
use weft_llm::CancellationToken;

use crate::catalog::RemoteTools;
use crate::config::AgentConfig;
use crate::context::{AgentInner, NamedProvider};
use crate::error::{AgentError, ExecuteError};
use crate::execute::{Emitter, ExecuteResult, ExecuteStream};
use crate::identity::ProcessIdentity;
use crate::lease::Lease;
use crate::options::{RunOptions, SessionOptions};
use crate::run::Run;
use crate::session::{HANDOVER_POLL, HANDOVER_WAIT, Refusal, Reloaded, SessionHandle, Shared};
use weft_loop::{Machine, SessionSettings};

/// The agent's operations on its shared context. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Driver {
    pub(crate) inner: Arc<AgentInner>,
}

impl Driver {
    /// Whether this agent made `session` (a handle is used only with the agent that made it).
    pub(crate) fn made(&self, session: &SessionHandle) -> bool {
        session.shared.agent == self.inner.id
    }

    pub(crate) fn new(inner: Arc<AgentInner>) -> Self {
        Self { inner }
    }

    /// What [`Agent::identity`](crate::Agent::identity) does.
    pub(crate) fn identity(&self) -> &ProcessIdentity {
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

    /// What [`Agent::config`](crate::Agent::config) does.
    pub(crate) fn config(&self) -> &AgentConfig {
        &self.inner.config
    }

    /// What [`Agent::provider_names`](crate::Agent::provider_names) does.
    pub(crate) fn provider_names(&self) -> Vec<String> {
        self.inner.providers.iter().map(|p| p.name.clone()).collect()
    }

    /// What [`Agent::provider_models`](crate::Agent::provider_models) does.
    pub(crate) fn provider_models(&self) -> Vec<(String, String)> {
        let model =
            |p: &NamedProvider| p.model.clone().unwrap_or_else(|| self.inner.config.model.clone());
        self.inner.providers.iter().map(|p| (p.name.clone(), model(p))).collect()
    }

    /// What [`Agent::tool_specs`](crate::Agent::tool_specs) does.
    pub(crate) fn tool_specs(&self) -> Vec<ToolSpec> {
        self.inner.tools.snapshot().specs().cloned().collect()
    }

    /// What [`Agent::tool_sources`](crate::Agent::tool_sources) does.
    pub(crate) fn tool_sources(&self) -> Vec<(ToolSpec, String)> {
        let tools = self.inner.tools.snapshot();
        tools.iter().map(|t| (t.tool.spec().clone(), t.source.clone())).collect()
    }

    /// What [`Agent::create_session`](crate::Agent::create_session) does.
    pub(crate) async fn create_session(
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
        let settings = SessionSettings {
            max_turns: options.max_turns,
            mode: options.mode.unwrap_or_default(),
            ..SessionSettings::default()
        };
        settings.write(&mut session.options);
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

    /// What [`Agent::open_session`](crate::Agent::open_session) does.
    pub(crate) fn open_session(&self, mut session: Session) -> Result<SessionHandle, AgentError> {
        let remote = RemoteTools::new(&session.tools, &self.inner.tools.snapshot())?;
        if session.status == SessionStatus::Running {
            session.status = SessionStatus::Error;
        }
        let last = session.last_event_seq;
        Ok(self.register(session, remote, last, false))
    }

    /// What [`Agent::session`](crate::Agent::session) does.
    pub(crate) async fn session(&self, id: &str) -> Result<Option<SessionHandle>, AgentError> {
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

    /// The handle of a session the store has just given: the one open here (brought up to
    /// date unless a run of this process is using it), or a new one. `None` when a run of this
    /// process holds it, or its tools no longer fit the agent's.
    pub(crate) fn adopt(&self, stored: weft_core::StoredSession) -> Option<SessionHandle> {
        if let Some(open) = self.open_sessions_with_id(&stored.head.id) {
            return open.replace(stored).then_some(open);
        }
        self.register_stored(stored).ok()
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

    /// What [`Agent::store`](crate::Agent::store) does.
    pub(crate) fn store(&self) -> Option<&Arc<dyn SessionStore>> {
        self.inner.store.as_ref()
    }

    /// What [`Agent::list_sessions`](crate::Agent::list_sessions) does.
    pub(crate) async fn list_sessions(
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

    /// What [`Agent::delete_session`](crate::Agent::delete_session) does.
    pub(crate) async fn delete_session(
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
        let shared =
            Shared::new(self.inner.id, session, remote, last_seq, self.inner.store.clone());
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

    /// What [`Agent::execute_with`](crate::Agent::execute_with) does.
    pub(crate) async fn execute(
        &self,
        session: &SessionHandle,
        input: impl Into<Input>,
        options: RunOptions,
    ) -> Result<ExecuteStream, ExecuteError> {
        tokio::runtime::Handle::try_current().map_err(|_| ExecuteError::NoRuntime)?;
        if !self.made(session) {
            return Err(ExecuteError::ForeignSession(session.id()));
        }
        // A start runs to its end even if its caller goes away (an HTTP client disconnecting
        // drops the handler's future): dropped half-way, it would leave the handle marked
        // running by a run that never began, refusing every later input.
        let (agent, session, input) = (self.clone(), session.clone(), input.into());
        let task = async move { agent.execute_here(&session, input, options).await };
        match tokio::spawn(task.instrument(Span::current())).await {
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
        options: RunOptions,
    ) -> Result<ExecuteStream, ExecuteError> {
        self.adopt_identity().await;
        // Only a store's lease can be held by another process's ending run.
        let mut deadline = self.inner.store.is_some().then(|| Instant::now() + HANDOVER_WAIT);
        loop {
            let spare = deadline.map(|_| input.clone());
            match self.start(session, input, options).await {
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
    async fn start(
        &self,
        session: &SessionHandle,
        input: Input,
        options: RunOptions,
    ) -> Result<ExecuteStream, Refusal> {
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
            let settings = SessionSettings::read(&state.session.options, &self.inner.modes);
            let mut machine = Machine::for_session(
                &settings,
                config.max_turns,
                millis(config.remote_tool_timeout),
            );
            let start_len = state.session.messages.len();
            let tools = self.inner.tools.snapshot();
            let is_message = matches!(input, Input::User(_));
            // What this process held, put back if the start is refused and the store cannot
            // say what the session is now.
            let before = self.inner.store.is_some().then(|| state.session.clone());
            let run_id = uuid::Uuid::new_v4().to_string();
            let state_before = Machine::mode_state(&state.session);
            let first = machine
                .begin(
                    &mut state.session,
                    input,
                    |name| tools.get(name).is_some(),
                    now_ms(),
                    run_id.clone(),
                )
                .map_err(ExecuteError::from)?;
            // A user message is emitted as the run's first message (the log's own, at its
            // position); tool results are emitted when their turn completes.
            input_message = is_message
                .then(|| state.session.messages.shared().get(start_len).cloned())
                .flatten()
                .map(|message| (message, start_len as u64));
            state.session.status = SessionStatus::Running;
            // Where this execution's events start, and how durably it is stored, committed
            // with its start.
            SessionSettings::record_run_after_seq(&mut state.session.options, hub.last_seq());
            SessionSettings::record_durability(&mut state.session.options, options.durability);
            state.run = Some(cancel.clone());
            let commit = session.shared.store.is_some().then(|| state.prepare_commit());
            let id = state.session.id.clone();
            (machine, first, start_len, id, run_id, commit, state_before, before)
        };
        let lease = match commit {
            Some(commit) => self.claim(session, commit, before, session_id).await?,
            None => None,
        };
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
            durability: options.durability,
        };
        Ok(self.launch(session, launch))
    }

    /// Claims a start recorded in this process for the store: the run's lease first, then the
    /// commit that says `running` (a session is never seen running without a holder). Refused
    /// when another process holds the session's run, or the commit is refused (the session
    /// changed elsewhere, or the store failed); then what this process holds is reloaded
    /// (`before`: what it held before the start, put back when the store cannot be read).
    async fn claim(
        &self,
        session: &SessionHandle,
        mut commit: weft_core::Commit,
        before: Option<Session>,
        session_id: String,
    ) -> Result<Option<Lease>, Refusal> {
        let Some(store) = &self.inner.store else { return Ok(None) };
        let config = &self.inner.config;
        let mut lease = None;
        // The lease first, then the commit that says `running`: a session is never seen
        // running without a holder.
        let refused =
            match Lease::acquire(store, &session_id, &self.inner.holder, config.lease_ttl).await {
                Ok(Some(held)) => {
                    // The start and every later commit of the run are fenced by its lease.
                    commit.lease = Some(held.holder().to_string());
                    session.lock().fence = Some(Arc::clone(held.holder()));
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
                session.lock().fence = None;
                lease.release().await;
            }
            // The session changed elsewhere, or the store failed: nothing starts, and what
            // this process holds is reloaded from the store.
            let running = session.reload_or_restore(before).await == Reloaded::Running;
            return Err(match error {
                StoreError::Conflict { .. } if running => ExecuteError::AlreadyRunning(session_id),
                other => ExecuteError::Store(other),
            }
            .into());
        }
        Ok(lease)
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
            durability,
        } = launch;
        let session_id = session.id();
        let hub = session.hub();
        let run_id_shared: Arc<str> = Arc::from(run_id.as_str());
        hub.start_run(&run_id_shared, durability, lease.as_ref().map(|l| Arc::clone(l.holder())));
        let after_seq = hub.last_seq();
        let events = hub.subscribe(after_seq, true, Some(Arc::clone(&run_id_shared)));
        let (result_tx, result_rx) = tokio::sync::oneshot::channel();
        let machine_mode = machine.mode().name();
        let mut run = Run::new(
            self.inner.clone(),
            session.clone(),
            machine,
            Emitter::new(hub, run_id_shared),
            cancel.clone(),
            start_len,
        );
        let span = self.run_span(session, &run_id, machine_mode, recovers.as_deref());
        run.set_span(span, after_seq);
        run.set_state_before(state_before);
        run.set_recovers(recovers);
        run.set_durability(durability);
        if let Some(lease) = &lease {
            lease.keep(cancel.clone());
            lease.watch_abort(&run_id, self.inner.config.abort_poll, cancel.clone());
        }
        // Released by the run itself, before the session takes new input: a late release
        // would take the next run's lease (same holder) away.
        run.set_lease(lease);
        // The run's task is in its span (what it logs belongs to the run).
        let span = run.span().clone();
        let task = async move {
            let mut run = run;
            // A panic in a hook or a provider must not leave the session `running` forever, nor
            // a stream without its end.
            let outcome = AssertUnwindSafe(run.drive(input_message, first)).catch_unwind().await;
            let result = match outcome {
                Ok(result) => result,
                Err(panic) => {
                    let panic = crate::calls::panic_message(&*panic);
                    // Boxed: inline, this rare path's state machine would sit beside the one
                    // of `drive` in every run task (5.6 KiB with it, 3.4 KiB without).
                    Box::pin(run.end_after_panic(panic)).await
                }
            };
            let _ = result_tx.send(result);
        };
        tokio::spawn(task.instrument(span));
        ExecuteStream::new(session_id, after_seq, events, result_rx, cancel)
    }

    /// The `invoke_agent` span of run `run_id` of `session`: a child of the current span (the
    /// caller's, which [`execute`](Self::execute) carries into the task that starts the run).
    fn run_span(
        &self,
        session: &SessionHandle,
        run_id: &str,
        mode: &str,
        recovers: Option<&str>,
    ) -> Span {
        let state = session.lock();
        let s = &state.session;
        let provider = self.inner.provider_for(&s.provider);
        crate::telemetry::invoke_agent(&crate::telemetry::RunInfo {
            session_id: &s.id,
            run_id,
            mode,
            provider: provider.name(),
            model: &s.model,
            recovers,
        })
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
                let settings = SessionSettings::read(&state.session.options, &self.inner.modes);
                let mut machine = Machine::for_session(
                    &settings,
                    config.max_turns,
                    millis(config.remote_tool_timeout),
                );
                SessionSettings::record_run_after_seq(&mut state.session.options, after_seq);
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
                state.fence = Some(Arc::clone(lease.holder()));
                let durability = settings.durability;
                Some((machine, first, start_len, run_id, state_before, recovers, durability))
            }
        };
        let Some((machine, first, start_len, run_id, state_before, recovers, durability)) = claimed
        else {
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
            durability,
        };
        Some(self.launch(session, launch))
    }

    /// What [`Agent::respond`](crate::Agent::respond) does.
    pub(crate) async fn respond(
        &self,
        session: &SessionHandle,
        input: impl Into<Input>,
    ) -> Result<(AgentResponse, ExecuteResult), ExecuteError> {
        let result = self.execute(session, input, RunOptions::default()).await?.result().await;
        Ok((result.response(), result))
    }
}

pub(crate) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What [`Agent::launch`] starts a run task with.
struct Launch {
    machine: Machine,
    first: weft_loop::Progress,
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
    /// How durably the run is stored.
    durability: weft_core::Durability,
}
