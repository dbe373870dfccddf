//! The conformance suite of [`SessionStore`]: the checks every backend passes (memory, SQLite and
//! Postgres here), public so that a backend outside this repository can run them too. Only with
//! the `testing` feature.
//!
//! A backend is tested through a [`Subject`]: the store under test and a way to open another
//! instance on the same data (checks prove what crosses instances: conflicts, reservations,
//! wake-ups). Each check is a `pub async fn name(f: &dyn Subject)` that panics when the store does
//! not conform; [`CHECKS`] lists them all and [`run_all`] runs them one after the other, each on a
//! fresh subject.
//!
//! Checks spawn Tokio tasks and sleep: run them in a multi-threaded runtime. Each check uses
//! session ids of its own, but some (`probe_write_leaves_nothing`, `due_sessions`) look at every
//! session the store has: give each check a fresh, empty store.
//!
//! ```no_run
//! # // `no_run`: a doc test cannot hold a `#[tokio::test]`.
//! use std::sync::Arc;
//!
//! use weft_core::{SessionStore, StoreError};
//! use weft_store::MemoryStore;
//! use weft_store::testing::{self, Subject, SubjectFuture};
//!
//! /// A fresh store (a backend of your own in place of `MemoryStore`).
//! struct Mine(MemoryStore);
//!
//! impl Subject for Mine {
//!     fn store(&self) -> Arc<dyn SessionStore> {
//!         Arc::new(self.0.clone())
//!     }
//!
//!     fn other(&self) -> SubjectFuture<'_, Result<Arc<dyn SessionStore>, StoreError>> {
//!         // A second connection to the same database; for memory, a clone sharing the map.
//!         Box::pin(async { Ok(Arc::new(self.0.clone()) as Arc<dyn SessionStore>) })
//!     }
//! }
//!
//! // In a test: #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn conformance() {
//!     testing::run_all(|| async { Mine(MemoryStore::new()) }).await;
//! }
//! ```
//!
//! To see each check as a test of its own (and run them in parallel), call them one by one:
//! `testing::round_trip(&Mine(MemoryStore::new())).await` in a `#[tokio::test]` per check, as
//! this crate's `tests/conformance.rs` does; its `every_check_is_run` test compares its list
//! with [`CHECKS`], so a new check cannot be forgotten.

// A check's job is to panic when the store does not conform: unwrapping its answers is the way.
#![allow(clippy::unwrap_used)]

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use weft_core::store::{SessionStore, StoreError};

mod data;
mod events;
mod leases;
mod sessions;

pub use data::{commit, create, delta, head, record, user};
pub use events::{
    event_log_after_every_seq, events_repeating_messages, reserve_seqs_never_overlap,
    wait_events_across_instances,
};
pub use leases::{due_sessions, lease_fences_writes, leases, process_leases};
pub use sessions::{
    already_exists, append_only_order, checkpoints, concurrent_commits_conflict,
    delete_removes_everything, failures_fail_only_their_caller, invalid_writes_change_nothing,
    not_found, owner_isolation, probe_write_leaves_nothing, round_trip,
};

/// The future of a [`Subject`]'s method. Not `Send`: the checks await it where they are, and
/// opening a store often holds a driver's non-`Send` state across an await.
pub type SubjectFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A backend under test: the store the checks use, and another instance on the same data.
pub trait Subject: Send + Sync {
    /// The store under test (a fresh, empty one for each check).
    fn store(&self) -> Arc<dyn SessionStore>;

    /// Another instance on the same data, as another process would open it (a second
    /// connection, pool or file handle; for a store in memory, a clone that shares it): what
    /// one instance writes, the other must see, and a wait on one must wake for the other's
    /// appends.
    fn other(&self) -> SubjectFuture<'_, Result<Arc<dyn SessionStore>, StoreError>>;

    /// The text the backend stored for event `seq` of a session, for backends that store
    /// events as text (the SQL ones: their `event` column): the checks make sure an event that
    /// repeats messages of the log is stored without them. `None` (the default): the check is
    /// skipped.
    fn raw_event<'a>(&'a self, session_id: &'a str, seq: u64) -> SubjectFuture<'a, Option<String>> {
        let _ = (session_id, seq);
        Box::pin(async { None })
    }
}

/// The future of a check.
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// One check of the suite, by name.
#[derive(Clone, Copy)]
pub struct Check {
    /// Its name: the name of its function in this module.
    pub name: &'static str,
    /// Runs it on a subject; panics when the store does not conform.
    pub run: for<'a> fn(&'a dyn Subject) -> CheckFuture<'a>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check").field("name", &self.name).finish_non_exhaustive()
    }
}

macro_rules! checks {
    ($($check:ident),* $(,)?) => {
        /// Every check of the suite, in the order [`run_all`] runs them.
        pub const CHECKS: &[Check] = &[
            $(Check { name: stringify!($check), run: |f| Box::pin($check(f)) }),*
        ];
    };
}

checks!(
    round_trip,
    already_exists,
    not_found,
    append_only_order,
    concurrent_commits_conflict,
    invalid_writes_change_nothing,
    event_log_after_every_seq,
    reserve_seqs_never_overlap,
    checkpoints,
    owner_isolation,
    wait_events_across_instances,
    leases,
    lease_fences_writes,
    process_leases,
    due_sessions,
    delete_removes_everything,
    failures_fail_only_their_caller,
    events_repeating_messages,
    probe_write_leaves_nothing,
);

/// Runs every check in [`CHECKS`], each on a fresh subject from `make`, one after the other;
/// panics at the first that fails (the name of each check is printed to stderr before it runs,
/// so a failing test's output says which).
pub async fn run_all<S, F, Fut>(mut make: F)
where
    S: Subject,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    for check in CHECKS {
        let subject = make().await;
        eprintln!("store conformance: {}", check.name);
        (check.run)(&subject).await;
    }
}

/// Another instance of the subject's store; panics if it cannot be opened.
async fn other(f: &dyn Subject) -> Arc<dyn SessionStore> {
    match f.other().await {
        Ok(store) => store,
        Err(error) => panic!("cannot open another instance of the store: {error}"),
    }
}
