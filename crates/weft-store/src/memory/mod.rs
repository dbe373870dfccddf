//! [`MemoryStore`]: everything in a map behind one mutex. For tests and `--store memory`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::time::Instant;
use weft_core::History;
use weft_core::message::TimestampMs;
use weft_core::session::SessionStatus;
use weft_core::store::{
    Checkpoint, Commit, EventRecord, OwnerScope, RunChange, RunState, SessionHead, SessionStore,
    StoreError, StoreFuture, StoredSession,
};

use crate::codec::{self, CommitShape, Position};
use crate::hub::{self, Hub};

mod log;

use log::EventLog;

/// A session store in memory. Clones share the same sessions.
///
/// Leases expire by the process's monotonic clock. The mutex is never held across an await.
#[derive(Clone, Default)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Default)]
struct Inner {
    state: Mutex<State>,
    hub: Arc<Hub>,
}

#[derive(Default)]
struct State {
    sessions: HashMap<String, Entry>,
    /// Orders checkpoints stored at the same instant.
    checkpoint_counter: u64,
}

struct Entry {
    head: SessionHead,
    messages: History,
    run: Option<RunState>,
    /// In seq order.
    events: EventLog,
    reserved_seq: u64,
    /// By (namespace, id): insertion order and the checkpoint.
    checkpoints: HashMap<(String, String), (u64, Checkpoint)>,
    lease: Option<Lease>,
}

struct Lease {
    holder: String,
    expires: Instant,
}

impl Entry {
    fn last_seq(&self) -> u64 {
        self.events.last_seq()
    }

    fn position(&self) -> Position {
        Position {
            version: self.head.version,
            message_count: self.messages.len() as u64,
            last_seq: self.last_seq(),
            owner: self.head.owner.clone(),
        }
    }

    fn live_lease(&self, now: Instant) -> Option<&Lease> {
        self.lease.as_ref().filter(|l| l.expires > now)
    }
}

impl MemoryStore {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // Every method checks before it changes anything, so a panic never leaves half a change.
        self.inner.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn create_now(&self, head: SessionHead, messages: History) -> Result<(), StoreError> {
        codec::check_create(&head, &messages)?;
        let mut state = self.state();
        if state.sessions.contains_key(&head.id) {
            return Err(StoreError::AlreadyExists(head.id));
        }
        let id = head.id.clone();
        state.sessions.insert(
            id,
            Entry {
                head,
                messages,
                run: None,
                events: EventLog::default(),
                reserved_seq: 0,
                checkpoints: HashMap::new(),
                lease: None,
            },
        );
        Ok(())
    }

    fn commit_now(&self, commit: Commit) -> Result<(), StoreError> {
        codec::precheck_commit(&commit)?;
        let shape = CommitShape::of(&commit);
        let appended = {
            let mut state = self.state();
            let entry = state
                .sessions
                .get_mut(&commit.head.id)
                .ok_or_else(|| StoreError::NotFound(commit.head.id.clone()))?;
            let held = entry.lease.as_ref().map(|l| l.holder.as_str());
            codec::check_lease(&shape.session_id, shape.lease.as_deref(), held)?;
            codec::check_commit(&entry.position(), &shape)?;
            let Commit { head, messages, run, events, .. } = commit;
            entry.head = head;
            for message in messages {
                entry.messages.push_shared(message);
            }
            match run {
                RunChange::Keep => {}
                RunChange::Set(run) => entry.run = Some(*run),
                RunChange::Clear => entry.run = None,
            }
            let appended = !events.is_empty();
            entry.events.extend(&events);
            entry.reserved_seq = entry.reserved_seq.max(entry.last_seq());
            appended
        };
        if appended {
            self.inner.hub.poke(&shape.session_id);
        }
        Ok(())
    }

    fn append_now(
        &self,
        session_id: &str,
        events: &[Arc<EventRecord>],
        lease: Option<&str>,
    ) -> Result<(), StoreError> {
        codec::check_event_order(session_id, events)?;
        {
            let mut state = self.state();
            let entry = state
                .sessions
                .get_mut(session_id)
                .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))?;
            codec::check_lease(session_id, lease, entry.lease.as_ref().map(|l| l.holder.as_str()))?;
            codec::check_first_seq(session_id, entry.last_seq(), events.first().map(|e| e.seq))?;
            if events.is_empty() {
                return Ok(());
            }
            entry.events.extend(events);
            entry.reserved_seq = entry.reserved_seq.max(entry.last_seq());
        }
        self.inner.hub.poke(session_id);
        Ok(())
    }

    fn with_entry<T>(
        &self,
        session_id: &str,
        f: impl FnOnce(&mut Entry) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let mut state = self.state();
        let entry = state
            .sessions
            .get_mut(session_id)
            .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))?;
        f(entry)
    }
}

fn ready<'a, T: Send + 'a>(result: Result<T, StoreError>) -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(result))
}

impl SessionStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn create<'a>(&'a self, head: SessionHead, messages: History) -> StoreFuture<'a, ()> {
        ready(self.create_now(head, messages))
    }

    fn load<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<StoredSession>> {
        let state = self.state();
        let loaded = state.sessions.get(session_id).map(|e| StoredSession {
            head: e.head.clone(),
            messages: e.messages.clone(),
            run: e.run.clone(),
            last_seq: e.last_seq(),
            reserved_seq: e.reserved_seq,
        });
        ready(Ok(loaded))
    }

    fn head<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<SessionHead>> {
        let head = self.state().sessions.get(session_id).map(|e| e.head.clone());
        ready(Ok(head))
    }

    fn commit<'a>(&'a self, commit: Commit) -> StoreFuture<'a, ()> {
        ready(self.commit_now(commit))
    }

    fn reserve_seqs<'a>(&'a self, session_id: &'a str, count: u64) -> StoreFuture<'a, u64> {
        ready(self.with_entry(session_id, |entry| {
            let (first, end) =
                codec::reservation(session_id, entry.reserved_seq, entry.last_seq(), count)?;
            entry.reserved_seq = end;
            Ok(first)
        }))
    }

    fn append_events<'a>(
        &'a self,
        session_id: &'a str,
        events: Vec<Arc<EventRecord>>,
        lease: Option<&'a str>,
    ) -> StoreFuture<'a, ()> {
        ready(self.append_now(session_id, &events, lease))
    }

    fn append_events_now(
        &self,
        session_id: &str,
        events: &[Arc<EventRecord>],
        lease: Option<&str>,
    ) -> Option<Result<(), StoreError>> {
        Some(self.append_now(session_id, events, lease))
    }

    fn read_events<'a>(
        &'a self,
        session_id: &'a str,
        after_seq: u64,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Arc<EventRecord>>> {
        ready(self.with_entry(session_id, |entry| Ok(entry.events.read(after_seq, limit))))
    }

    fn wait_events<'a>(
        &'a self,
        session_id: &'a str,
        after_seq: u64,
        timeout: Duration,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            hub::wait_for_events(&self.inner.hub, session_id, after_seq, timeout, || {
                std::future::ready(self.with_entry(session_id, |e| Ok(e.last_seq())))
            })
            .await
        })
    }

    fn put_checkpoint<'a>(&'a self, checkpoint: Checkpoint) -> StoreFuture<'a, ()> {
        let result = codec::check_checkpoint(&checkpoint).and_then(|()| {
            let mut state = self.state();
            state.checkpoint_counter += 1;
            let counter = state.checkpoint_counter;
            let entry = state
                .sessions
                .get_mut(&checkpoint.session_id)
                .ok_or_else(|| StoreError::NotFound(checkpoint.session_id.clone()))?;
            let key = (checkpoint.namespace.clone(), checkpoint.id.clone());
            let order = entry.checkpoints.get(&key).map_or(counter, |(order, _)| *order);
            entry.checkpoints.insert(key, (order, checkpoint));
            Ok(())
        });
        ready(result)
    }

    fn find_checkpoints<'a>(
        &'a self,
        namespace: &'a str,
        keys: &'a [(String, String)],
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        let state = self.state();
        let found = keys
            .iter()
            .filter(|(session_id, id)| {
                state.sessions.get(session_id).is_some_and(|entry| {
                    entry.checkpoints.contains_key(&(namespace.to_owned(), id.clone()))
                })
            })
            .cloned()
            .collect();
        ready(Ok(found))
    }

    fn get_checkpoint<'a>(
        &'a self,
        session_id: &'a str,
        namespace: &'a str,
        id: Option<&'a str>,
    ) -> StoreFuture<'a, Option<Checkpoint>> {
        let state = self.state();
        let found = state.sessions.get(session_id).and_then(|entry| match id {
            Some(id) => entry
                .checkpoints
                .get(&(namespace.to_owned(), id.to_owned()))
                .map(|(_, c)| c.clone()),
            None => entry
                .checkpoints
                .values()
                .filter(|(_, c)| c.namespace == namespace)
                .max_by_key(|(order, c)| (c.at, *order))
                .map(|(_, c)| c.clone()),
        });
        ready(Ok(found))
    }

    fn list_checkpoints<'a>(
        &'a self,
        session_id: &'a str,
        namespace: &'a str,
    ) -> StoreFuture<'a, Vec<Checkpoint>> {
        let state = self.state();
        let mut found: Vec<(TimestampMs, u64, Checkpoint)> = state
            .sessions
            .get(session_id)
            .map(|entry| {
                entry
                    .checkpoints
                    .values()
                    .filter(|(_, c)| c.namespace == namespace)
                    .map(|(order, c)| (c.at, *order, c.clone()))
                    .collect()
            })
            .unwrap_or_default();
        found.sort_by_key(|(at, order, _)| (*at, *order));
        ready(Ok(found.into_iter().map(|(_, _, c)| c).collect()))
    }

    fn list_sessions<'a>(
        &'a self,
        scope: OwnerScope<'a>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<SessionHead>> {
        let state = self.state();
        let mut heads: Vec<&SessionHead> = state
            .sessions
            .values()
            .map(|e| &e.head)
            .filter(|h| scope.admits(h.owner.as_deref()))
            .collect();
        heads.sort_by(|a, b| b.updated_at.cmp(&a.updated_at).then_with(|| a.id.cmp(&b.id)));
        ready(Ok(heads.into_iter().take(limit).cloned().collect()))
    }

    fn delete_session<'a>(
        &'a self,
        session_id: &'a str,
        scope: OwnerScope<'a>,
    ) -> StoreFuture<'a, bool> {
        let deleted = {
            let mut state = self.state();
            match state.sessions.get(session_id) {
                Some(entry) if scope.admits(entry.head.owner.as_deref()) => {
                    state.sessions.remove(session_id);
                    true
                }
                _ => false,
            }
        };
        if deleted {
            self.inner.hub.poke(session_id);
        }
        ready(Ok(deleted))
    }

    fn acquire_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        ready(self.with_entry(session_id, |entry| {
            let now = Instant::now();
            if entry.live_lease(now).is_some_and(|l| l.holder != holder) {
                return Ok(false);
            }
            entry.lease = Some(Lease {
                holder: holder.to_owned(),
                expires: now + ttl.min(codec::MAX_DURATION),
            });
            Ok(true)
        }))
    }

    fn renew_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        ready(self.with_entry(session_id, |entry| match entry.lease.as_mut() {
            Some(lease) if lease.holder == holder => {
                lease.expires = Instant::now() + ttl.min(codec::MAX_DURATION);
                Ok(true)
            }
            _ => Ok(false),
        }))
    }

    fn release_lease<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, ()> {
        let mut state = self.state();
        if let Some(entry) = state.sessions.get_mut(session_id)
            && entry.lease.as_ref().is_some_and(|l| l.holder == holder)
        {
            entry.lease = None;
        }
        ready(Ok(()))
    }

    fn take_over_process_leases<'a>(
        &'a self,
        process: &'a str,
        heir: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Vec<String>> {
        let expires = Instant::now() + ttl.min(codec::MAX_DURATION);
        let mut state = self.state();
        let mut taken = Vec::new();
        for (id, entry) in &mut state.sessions {
            if let Some(lease) =
                entry.lease.as_mut().filter(|l| codec::held_for(&l.holder, process))
            {
                lease.holder = heir.to_owned();
                lease.expires = expires;
                taken.push(id.clone());
            }
        }
        taken.sort();
        ready(Ok(taken))
    }

    fn due_sessions<'a>(&'a self, now: TimestampMs, limit: usize) -> StoreFuture<'a, Vec<String>> {
        let clock = Instant::now();
        let state = self.state();
        let mut due: Vec<String> = state
            .sessions
            .values()
            .filter(|e| match e.head.status {
                SessionStatus::Running => e.live_lease(clock).is_none(),
                SessionStatus::AwaitingToolExecution | SessionStatus::AwaitingApproval => {
                    e.head.next_deadline.is_some_and(|d| d <= now)
                }
                _ => false,
            })
            .map(|e| e.head.id.clone())
            .collect();
        due.sort();
        due.truncate(limit);
        ready(Ok(due))
    }
}
