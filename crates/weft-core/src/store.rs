//! The durable shape of a session and the [`SessionStore`] contract.
//!
//! A session is stored as three parts that change at different rates:
//!
//! - its **head** ([`SessionHead`]): status, model, options, usage, cost and `version`, rewritten
//!   by every commit (a few hundred bytes);
//! - its **message log**: append-only, each message written once at its index;
//! - the **run state** ([`RunState`]) of its current or suspended run: the open turn with each
//!   call's state, the run's turn count, the steps it finished, deadlines.
//!
//! Beside them, every event the session ever emitted is an [`EventRecord`] in the session's event
//! log, numbered by `seq`: strictly increasing over the session's whole life and never reused.
//! Sequence numbers are handed out in blocks reserved durably ([`SessionStore::reserve_seqs`]),
//! so that a process that dies after streaming an event nobody stored yet cannot lead another
//! process to give its number to a different event.
//!
//! Changes reach the store as a [`Commit`], applied in one transaction and only if the session's
//! `version` is still the one the commit was made against; otherwise the store answers
//! [`StoreError::Conflict`] and changes nothing. Starting a run is such a commit (status
//! `running`), so two processes can never both start a run on one session.
//!
//! The head, run state and loaded session are defined in [`state`](crate::state), below this
//! module and [`session`](crate::session), and re-exported here.
//!
//! This module is plain data and a trait: backends (memory, SQLite, Postgres) live in
//! `weft-store`, and the agent sees storage only through [`SessionStore`].
//!
//! [`ForwardingStore`], for wrappers of a store, is defined in `store/forwarding.rs` and
//! re-exported here.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::AgentEvent;
use crate::history::History;
use crate::message::{Message, TimestampMs};

pub use crate::state::{RunChange, RunState, SessionHead, StoredSession};

mod durability;
mod forwarding;

pub use durability::Durability;
pub use forwarding::ForwardingStore;

/// A boxed future, as the store's methods return (the contract is object-safe, so a server can
/// hold `Arc<dyn SessionStore>`).
pub type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

/// One event of a session, as the event log keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct EventRecord {
    /// The session.
    pub session_id: Arc<str>,
    /// The run that emitted it.
    pub run_id: Arc<str>,
    /// Its number in the session: strictly increasing over the session's life, never reused.
    pub seq: u64,
    /// The node run it belongs to, when it belongs to one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<Arc<str>>,
    /// When it was emitted.
    pub at: TimestampMs,
    /// The event.
    pub event: AgentEvent,
    /// Where the messages the event repeats sit in the session's message log, when it repeats
    /// some the log has or is about to have: see [`MessageSpan`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<MessageSpan>,
}

impl EventRecord {
    /// The messages the event carries whole, in order: `message_end`'s and `error`'s message,
    /// `session_end`'s messages; none for other events. (`step_end` carries its assistant message
    /// inside the step, as an [`AssistantMessage`](crate::AssistantMessage).)
    pub fn carried_messages(&self) -> &[Arc<Message>] {
        match &self.event {
            AgentEvent::MessageEnd { message } => std::slice::from_ref(message),
            AgentEvent::Error { message: Some(message), .. } => std::slice::from_ref(message),
            AgentEvent::SessionEnd { messages, .. } => messages,
            _ => &[],
        }
    }
}

/// The positions in the session's message log of the messages an event repeats: `count`
/// messages from position `first` (0-based). For `message_end` and `error` the one message, for
/// `step_end` its assistant message, for `session_end` the messages the run added.
///
/// The log already keeps those messages, so a store keeps such an event without them and puts
/// them back when it is read: the stored log holds each message once. A store does so only when
/// its log has the messages when the event is appended (the agent commits a message before it
/// publishes the events that repeat it); otherwise it keeps the event whole.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageSpan {
    /// The position of the first message.
    pub first: u64,
    /// How many messages.
    pub count: u64,
}

impl MessageSpan {
    /// One message, at `position`.
    pub fn one(position: u64) -> Self {
        Self { first: position, count: 1 }
    }

    /// The position after the last message.
    pub fn end(&self) -> u64 {
        self.first.saturating_add(self.count)
    }
}

/// A set of changes to one session, applied in one transaction, only if the stored head's
/// `version` is `expected_version`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Commit {
    /// The version the changes were made against.
    pub expected_version: u64,
    /// The new head. Its `version` must be `expected_version + 1`, and its `message_count` the
    /// old count plus `messages.len()`.
    pub head: SessionHead,
    /// Messages appended to the log, the first at the old `message_count` (the session log's
    /// own, shared).
    #[serde(default)]
    pub messages: Vec<Arc<Message>>,
    /// What happens to the run state.
    #[serde(default)]
    pub run: RunChange,
    /// Events stored with the change (seq order; each above every seq already stored). Shared,
    /// not copied: the same records are what live watchers hold.
    #[serde(default)]
    pub events: Vec<Arc<EventRecord>>,
    /// The lease holder this commit is made under (a run's: every acquisition of a lease is a
    /// holder of its own, never reused), its fencing token: the store takes the commit only
    /// while the session's lease is this holder's (expired or not, as long as nobody took it
    /// since), in the same transaction as its writes, and refuses it with
    /// [`StoreError::LeaseLost`] once another holder has taken the lease or it was given back
    /// (checked before the version: a replica fenced off is told so, not that it conflicts).
    /// A replica that stalled past its lease's expiry can no longer change a session another
    /// replica runs. `None`: no lease is checked (a change made outside any run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
}

/// A saved state of a run, by (session, namespace, id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Checkpoint {
    /// The session (the protocol's `thread_id`).
    pub session_id: String,
    /// The protocol's `checkpoint_ns` (`""` for the top level).
    pub namespace: String,
    /// The protocol's `checkpoint_id`.
    pub id: String,
    /// The checkpoint it follows, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// When it was taken.
    pub at: TimestampMs,
    /// The saved state.
    pub value: Value,
}

/// Who may see a session in listing and deletion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OwnerScope<'a> {
    /// Every session (a single-user CLI, an operator).
    Any,
    /// Only this owner's sessions.
    Owner(&'a str),
}

impl OwnerScope<'_> {
    /// Whether a session owned by `owner` is in scope.
    pub fn admits(&self, owner: Option<&str>) -> bool {
        match self {
            OwnerScope::Any => true,
            OwnerScope::Owner(o) => owner == Some(*o),
        }
    }
}

/// The error underneath a [`StoreError::Backend`]: what the database driver, the file system …
/// answered. Shared, so that a [`StoreError`] stays cheap to clone (one failed write answers every
/// caller it was batched with).
pub type BackendSource = Arc<dyn std::error::Error + Send + Sync + 'static>;

/// Why a store refused or failed.
///
/// Two errors are equal when their variant and fields are, except that a
/// [`Backend`](Self::Backend) error's `source` is not compared (only its `message`).
#[derive(Debug, Clone)]
pub enum StoreError {
    /// No session with this id.
    NotFound(String),
    /// A session with this id exists already.
    AlreadyExists(String),
    /// The session changed since the commit's base version: nothing was written.
    Conflict {
        /// The session.
        session_id: String,
        /// The version the commit was made against.
        expected: u64,
        /// The version stored.
        found: u64,
    },
    /// The commit or record is not consistent with what is stored (a message index or seq out
    /// of order): a bug in the caller, nothing was written.
    Invalid(String),
    /// The backend failed (connection, disk, corrupt data). [Transient](Self::is_transient):
    /// the same call may succeed later.
    Backend {
        /// What failed, with the underlying error's own text when there is one. Never a secret
        /// (a connection string with its password, say).
        message: String,
        /// The underlying error, when there is one ([`std::error::Error::source`] returns it):
        /// for a caller that needs to know more than the text says (an `io::ErrorKind`, a
        /// database's error code).
        source: Option<BackendSource>,
    },
    /// A commit made under a lease that is no longer its holder's ([`Commit::lease`]): another
    /// holder took the session's run over (the lease had expired), or the lease was given
    /// back. Nothing was written; not transient.
    LeaseLost {
        /// The session.
        session_id: String,
        /// The holder the commit was made under.
        holder: String,
    },
    /// The store can no longer be used by this process: its writer has stopped (the task that
    /// owns the only writing connection ended with the runtime it ran on, or panicked) or it
    /// was shut down. Unlike [`Backend`](Self::Backend) it is not transient: asking again gets
    /// the same answer, so nothing retries it.
    Closed(String),
}

impl PartialEq for StoreError {
    fn eq(&self, other: &Self) -> bool {
        use StoreError::*;
        match (self, other) {
            (NotFound(a), NotFound(b)) => a == b,
            (AlreadyExists(a), AlreadyExists(b)) => a == b,
            (
                Conflict { session_id: a, expected: ea, found: fa },
                Conflict { session_id: b, expected: eb, found: fb },
            ) => a == b && ea == eb && fa == fb,
            (Invalid(a), Invalid(b)) => a == b,
            (Backend { message: a, .. }, Backend { message: b, .. }) => a == b,
            (Closed(a), Closed(b)) => a == b,
            (LeaseLost { session_id: a, holder: ha }, LeaseLost { session_id: b, holder: hb }) => {
                a == b && ha == hb
            }
            _ => false,
        }
    }
}

impl Eq for StoreError {}

impl std::fmt::Display for StoreError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StoreError::NotFound(id) => write!(f, "unknown session {id}"),
            StoreError::AlreadyExists(id) => write!(f, "session {id} exists already"),
            StoreError::Conflict { session_id, expected, found } => write!(
                f,
                "session {session_id} changed concurrently (expected version {expected}, found {found})"
            ),
            StoreError::Invalid(why) => write!(f, "invalid store operation: {why}"),
            StoreError::Backend { message, .. } => write!(f, "session store failed: {message}"),
            StoreError::Closed(why) => write!(f, "session store closed: {why}"),
            StoreError::LeaseLost { session_id, holder } => write!(
                f,
                "session {session_id}: the lease this change was made under ({holder}) was taken over or given back"
            ),
        }
    }
}

impl std::error::Error for StoreError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            StoreError::Backend { source: Some(source), .. } => Some(&**source),
            _ => None,
        }
    }
}

impl StoreError {
    /// A [`Backend`](Self::Backend) failure with no underlying error (a check of the backend's
    /// own, such as a schema newer than the build). `message` must not hold a secret.
    pub fn backend(message: impl Into<String>) -> Self {
        StoreError::Backend { message: message.into(), source: None }
    }

    /// A [`Backend`](Self::Backend) failure caused by `source`, kept as the error's
    /// [`source`](std::error::Error::source). `message` says what failed and is shown as it
    /// is (it does not add `source`'s text: include it when it is safe to show); it must not
    /// hold a secret.
    pub fn backend_caused_by(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        StoreError::Backend { message: message.into(), source: Some(Arc::new(source)) }
    }

    /// Whether the same call may succeed later: the backend failed (a connection dropped, a
    /// disk was full) rather than refusing what was asked. A refusal (an unknown session, a
    /// conflict, an inconsistent record) gives the same answer however often it is retried, and
    /// so does a store that is [closed](Self::Closed). Retry loops ask this, not the variant.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Backend { .. } => true,
            StoreError::NotFound(_)
            | StoreError::AlreadyExists(_)
            | StoreError::Conflict { .. }
            | StoreError::Invalid(_)
            | StoreError::LeaseLost { .. }
            | StoreError::Closed(_) => false,
        }
    }
}

/// Durable sessions: heads, message logs, run states, event logs, checkpoints and leases.
///
/// Every method is atomic. A backend never loses what it acknowledged, never reorders a
/// session's events, and answers a stale commit with [`StoreError::Conflict`].
pub trait SessionStore: Send + Sync + 'static {
    /// The backend's name for logs and errors (`memory`, `sqlite`, `postgres`).
    fn kind(&self) -> &'static str;

    /// Stores a new session (head with `version` 0 and `message_count` = `messages.len()`).
    /// [`StoreError::AlreadyExists`] if the id is taken.
    fn create<'a>(&'a self, head: SessionHead, messages: History) -> StoreFuture<'a, ()>;

    /// Loads a session: head, messages, run state and its event-log positions.
    fn load<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<StoredSession>>;

    /// Loads only a session's head.
    fn head<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<SessionHead>>;

    /// Applies `commit` if the head's version is still `commit.expected_version`.
    fn commit<'a>(&'a self, commit: Commit) -> StoreFuture<'a, ()>;

    /// Reserves `count` sequence numbers and returns the first; numbering goes on above every
    /// number reserved before, in any process.
    fn reserve_seqs<'a>(&'a self, session_id: &'a str, count: u64) -> StoreFuture<'a, u64>;

    /// Appends events (in seq order, each above every seq already stored) outside a commit.
    /// The records are shared with the live watchers that hold them: a backend that keeps them
    /// in memory keeps these, one that writes them serializes them.
    ///
    /// `lease` fences the append as [`Commit::lease`] fences a commit: with a holder, the events
    /// are stored only while the session's lease is that holder's, and refused with
    /// [`StoreError::LeaseLost`] (nothing written) otherwise. `None`: not fenced.
    fn append_events<'a>(
        &'a self,
        session_id: &'a str,
        events: Vec<Arc<EventRecord>>,
        lease: Option<&'a str>,
    ) -> StoreFuture<'a, ()>;

    /// [`append_events`](Self::append_events) done at once, in the caller's thread, by a backend
    /// that keeps events in this process's memory and so never waits: `None` from every other
    /// one (the default), and the caller awaits `append_events` instead. Same contract, same
    /// answers. The writer of a paced stream (a model's tokens, one publish at a time) saves a
    /// task wake-up per event with it.
    ///
    /// Wrappers ([`ForwardingStore`]) answer `None`: an override of `append_events` (a fault
    /// injected, a call counted) is never bypassed.
    fn append_events_now(
        &self,
        session_id: &str,
        events: &[Arc<EventRecord>],
        lease: Option<&str>,
    ) -> Option<Result<(), StoreError>> {
        let _ = (session_id, events, lease);
        None
    }

    /// Up to `limit` events with seq greater than `after_seq`, in order.
    fn read_events<'a>(
        &'a self,
        session_id: &'a str,
        after_seq: u64,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Arc<EventRecord>>>;

    /// Waits until the session has an event after `after_seq` (appended by any process) or
    /// `timeout` passes; says whether there is one.
    fn wait_events<'a>(
        &'a self,
        session_id: &'a str,
        after_seq: u64,
        timeout: Duration,
    ) -> StoreFuture<'a, bool>;

    /// Stores a checkpoint (replacing one with the same session, namespace and id).
    fn put_checkpoint<'a>(&'a self, checkpoint: Checkpoint) -> StoreFuture<'a, ()>;

    /// One checkpoint, or the latest of the namespace when `id` is `None`.
    fn get_checkpoint<'a>(
        &'a self,
        session_id: &'a str,
        namespace: &'a str,
        id: Option<&'a str>,
    ) -> StoreFuture<'a, Option<Checkpoint>>;

    /// Which of `keys` — (session id, checkpoint id) pairs — have a checkpoint in `namespace`:
    /// the keys found, in any order. One call for many sessions: a process polls the abort
    /// requests of all its runs with one query per interval, not one per run. The default asks
    /// [`get_checkpoint`](Self::get_checkpoint) for each key; backends with a query language
    /// answer in one query.
    fn find_checkpoints<'a>(
        &'a self,
        namespace: &'a str,
        keys: &'a [(String, String)],
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        Box::pin(async move {
            let mut found = Vec::new();
            for (session_id, id) in keys {
                if self.get_checkpoint(session_id, namespace, Some(id)).await?.is_some() {
                    found.push((session_id.clone(), id.clone()));
                }
            }
            Ok(found)
        })
    }

    /// The namespace's checkpoints, oldest first.
    fn list_checkpoints<'a>(
        &'a self,
        session_id: &'a str,
        namespace: &'a str,
    ) -> StoreFuture<'a, Vec<Checkpoint>>;

    /// The heads of the sessions in scope, most recently updated first, at most `limit`.
    fn list_sessions<'a>(
        &'a self,
        scope: OwnerScope<'a>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<SessionHead>>;

    /// Deletes a session in scope with everything it has (messages, run, events, checkpoints,
    /// lease); says whether there was one.
    fn delete_session<'a>(
        &'a self,
        session_id: &'a str,
        scope: OwnerScope<'a>,
    ) -> StoreFuture<'a, bool>;

    /// Takes the lease on running the session's run for `ttl`, if nobody else holds an
    /// unexpired one (the holder itself may take it again). Says whether `holder` has it now.
    fn acquire_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool>;

    /// Extends `holder`'s lease by `ttl` from now; `false` if it lost it (expired and taken).
    fn renew_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool>;

    /// Gives the lease up, if `holder` holds it.
    fn release_lease<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, ()>;

    /// Takes over every lease held for the process `process`, expired or not — every lease
    /// whose holder is `process` itself or starts with `process/` (a run's holder is its
    /// process's name, a slash, and the run's own id) — in one atomic step: each becomes
    /// `heir`'s, for `ttl` from now. Returns the sessions whose leases were taken over.
    ///
    /// Only for a process that knows those holders are dead: it has taken over the identity
    /// they ran under (an exclusive lock that the kernel released when they died), so it may
    /// recover their runs at once instead of after their leases expire — and nobody else can
    /// take them in between.
    fn take_over_process_leases<'a>(
        &'a self,
        process: &'a str,
        heir: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Vec<String>>;

    /// Sessions that are `running` with no unexpired lease (their process died), or suspended
    /// with a remote-call deadline at or before `now`: what recovery and the deadline sweeper
    /// look for. At most `limit` ids.
    fn due_sessions<'a>(&'a self, now: TimestampMs, limit: usize) -> StoreFuture<'a, Vec<String>>;

    /// Writes something durably and takes it back in the same way: `Ok` when the store can
    /// write now (a server's readiness), the backend's error when it cannot (a full disk, a
    /// read-only or lost database). Leaves nothing behind, so probing often never grows the
    /// store. The default creates a session no client can name (its id has `~probe~`) and
    /// deletes it; backends override it with one cheaper write that changes a row and undoes
    /// it in one transaction.
    fn probe_write(&self) -> StoreFuture<'_, ()> {
        static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        Box::pin(async move {
            let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let id = format!("~probe~{}-{}-{n}", std::process::id(), crate::message::now_ms());
            let head = crate::session::Session::new(id.clone(), "probe", "probe").head();
            self.create(head, History::new()).await?;
            self.delete_session(&id, OwnerScope::Any).await.map(|_| ())
        })
    }
}

#[cfg(test)]
mod tests {
    use std::error::Error as _;

    use super::*;

    #[test]
    fn backend_errors_keep_their_source_and_are_transient() {
        let io = std::io::Error::new(std::io::ErrorKind::StorageFull, "disk full");
        let error = StoreError::backend_caused_by("SQLite write: disk full", io);
        assert_eq!(error.to_string(), "session store failed: SQLite write: disk full");
        let source = error.source().map(|s| s.to_string());
        assert_eq!(source.as_deref(), Some("disk full"));
        let kind =
            error.source().and_then(|s| s.downcast_ref::<std::io::Error>()).map(|e| e.kind());
        assert_eq!(kind, Some(std::io::ErrorKind::StorageFull));
        assert!(error.is_transient());
        // A clone shares the source; equality looks at the message only.
        assert!(error.clone().source().is_some());
        assert_eq!(error, StoreError::backend("SQLite write: disk full"));
        assert!(StoreError::backend("no source").source().is_none());
    }

    #[test]
    fn refusals_and_a_closed_store_are_not_transient() {
        let refusals = [
            StoreError::NotFound("s".into()),
            StoreError::AlreadyExists("s".into()),
            StoreError::Conflict { session_id: "s".into(), expected: 1, found: 2 },
            StoreError::Invalid("seq out of order".into()),
            StoreError::Closed("the writer has stopped".into()),
        ];
        for error in refusals {
            assert!(!error.is_transient(), "{error}");
            assert!(error.source().is_none(), "{error}");
        }
    }
}
