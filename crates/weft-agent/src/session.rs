//! [`SessionHandle`]: a session held in this process — its state under one lock, its event
//! log, its commits to the store, its reload and the hand-over between runs.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;

use futures::Stream;
use weft_core::{
    Commit, EventRecord, RunChange, Session, SessionStatus, SessionStore, StoreError, ToolCall,
    now_ms,
};
use weft_llm::CancellationToken;

use crate::catalog::RemoteTools;
use crate::error::ExecuteError;
use crate::hub::Hub;
use crate::options::ABORT_NAMESPACE;
use weft_loop::Machine;

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
    pub(crate) committed_messages: usize,
    /// The holder of the lease the run under way holds, while it holds it: the fencing token
    /// of every commit made meanwhile ([`Commit::lease`]), which the store refuses once
    /// another process took the run over.
    pub(crate) fence: Option<std::sync::Arc<str>>,
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
            lease: self.fence.as_deref().map(str::to_owned),
        }
    }

    /// The store took a commit made with [`State::prepare_commit`].
    pub(crate) fn committed(&mut self, version: u64, message_count: u64, updated_at: u64) {
        self.session.version = version;
        self.session.updated_at = updated_at;
        self.committed_messages = usize::try_from(message_count).unwrap_or(usize::MAX);
    }
}

pub(crate) struct Shared {
    /// The id of the agent that made the handle ([`crate::context::AgentInner::id`]).
    pub(crate) agent: u64,
    pub(crate) state: Mutex<State>,
    pub(crate) remote: RemoteTools,
    /// The session's event log in this process, made when first needed (a run, a watcher):
    /// an idle session does not carry one. Replaced by a fresh one when the session is
    /// reloaded after another process added events (never while a run of this process uses it).
    pub(crate) hub: Mutex<HubSlot>,
    /// Where the session is kept, if anywhere.
    pub(crate) store: Option<Arc<dyn SessionStore>>,
    /// Woken when a run has let go of the session.
    pub(crate) idle: tokio::sync::Notify,
}

impl Shared {
    /// A session held in this process from now on: `last_seq` is its log's last event,
    /// `store` where it is kept, if anywhere.
    pub(crate) fn new(
        agent: u64,
        session: Session,
        remote: RemoteTools,
        last_seq: u64,
        store: Option<Arc<dyn SessionStore>>,
    ) -> Arc<Self> {
        let committed_messages = session.messages.len();
        Arc::new(Shared {
            state: Mutex::new(State {
                session,
                run: None,
                ending: false,
                stale: false,
                recovering: false,
                committed_messages,
                fence: None,
            }),
            agent,
            remote,
            hub: Mutex::new(HubSlot::Unmade(last_seq)),
            store,
            idle: tokio::sync::Notify::new(),
        })
    }
}

/// A session's event log in this process, or what it starts from once made.
pub(crate) enum HubSlot {
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
pub(crate) enum Refusal {
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
pub(crate) const END_RETRY_FIRST: Duration = Duration::from_millis(50);
/// The longest.
pub(crate) const END_RETRY_MAX: Duration = Duration::from_secs(2);

/// How long a start waits for another process's ended run to let go of the session.
pub(crate) const HANDOVER_WAIT: Duration = Duration::from_secs(2);
/// How often it looks again meanwhile.
pub(crate) const HANDOVER_POLL: Duration = Duration::from_millis(20);

/// A session kept in memory, shared by the caller and its runs. Cheap to clone.
#[derive(Clone)]
pub struct SessionHandle {
    pub(crate) shared: Arc<Shared>,
}

impl SessionHandle {
    pub(crate) fn hub_slot(&self) -> MutexGuard<'_, HubSlot> {
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
    /// [`Agent::session`](crate::Agent::session)). An input given meanwhile waits for the recovery to end, then runs.
    pub fn is_recovering(&self) -> bool {
        let state = self.lock();
        state.run.is_some() && state.recovering
    }

    /// Whether a run of this process has the session (started, resumed or recovering here, until
    /// it has published its end). A session [`Running`](SessionStatus::Running) without one is
    /// run by another process, or was left running by one that died.
    pub fn is_running_here(&self) -> bool {
        self.lock().run.is_some()
    }

    /// Waits until no recovery of this process has the session.
    pub(crate) async fn wait_recovered(&self) {
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

    /// Aborts the session's run. A running run stops (see [`ExecuteStream::abort`](crate::ExecuteStream::abort)); a suspended
    /// one has its waiting calls answered with error results and ends `aborted`, so the session
    /// takes a new user message. A run under way in another process (sharing the store) is asked
    /// to stop through the store: that process looks for the request every
    /// [`AgentConfig::abort_poll`](crate::AgentConfig::abort_poll) and aborts the run as if asked here. Returns whether there was
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
    pub(crate) async fn request_remote_abort(
        &self,
        session_id: String,
        run_id: Option<String>,
    ) -> bool {
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
        self.hub().subscribe(after_seq, true, None)
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
        if let Err(error) = store.commit(commit).await {
            if matches!(error, StoreError::LeaseLost { .. }) {
                // Another process took the run over: what the run still has to write stays
                // fenced off, also after it lets go.
                self.hub().fence_lost();
            }
            return Err(error);
        }
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
    pub(crate) async fn stored_head(
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
    pub(crate) async fn wait_while_ending(&self) {
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
    pub(crate) async fn reload_or_restore(&self, before: Option<Session>) -> Reloaded {
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
