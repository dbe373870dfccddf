//! # weft-store
//!
//! The backends of [`SessionStore`], the durable home of Weft's sessions (the contract and its
//! types are in [`weft_core::store`]):
//!
//! - [`MemoryStore`]: a map behind a mutex, for tests and `--store memory`. Nothing survives the
//!   process; clones share one store.
//! - [`SqliteStore`]: the embedded default, one file (by default [`default_path`], that is
//!   `$WEFT_HOME/weft.db`). WAL mode; every write goes to **one writer thread** that applies
//!   whatever is queued in one transaction (group commit, one savepoint per operation so that a
//!   failed operation fails only its caller); reads use a small pool of read-only connections.
//!   Several processes may open the same file: SQLite's lock serializes their writers, and a
//!   waiting tail polls the file so that it sees another process's appends.
//! - [`PostgresStore`]: for several `weft serve` replicas sharing one database. Commits are
//!   transactions that lock the session's row; leases live in a row and expire by the
//!   database's clock; `LISTEN/NOTIFY` wakes waiting tails in every replica.
//!
//! [`connect`] opens any of them from a URL (`memory`, `sqlite:PATH`, `postgres://…`).
//!
//! ## Layout
//!
//! Each backend keeps the same tables (SQL in `migrations/`, embedded in the binary and applied
//! in order on open; the version applied is recorded in the database, and a database newer than
//! the binary is refused):
//!
//! | table | key | holds |
//! | --- | --- | --- |
//! | `sessions` | `id` | the head as JSON, and as columns what queries need: `owner`, `status`, `version`, `message_count`, `reserved_seq`, `last_seq`, `next_deadline`, `created_at`, `updated_at` |
//! | `messages` | `(session_id, idx)` | one message (JSON) per row, written once |
//! | `runs` | `session_id` | the run state (JSON) |
//! | `events` | `(session_id, seq)` | `run_id`, `node_id`, `at`, the event (JSON) |
//! | `checkpoints` | `(session_id, namespace, id)` | `parent_id`, `at`, insertion order, the value (JSON) |
//! | `leases` | `session_id` | `holder`, `expires_at` |
//!
//! JSON is stored as text, exactly as `serde_json` wrote it, so what is loaded is what was
//! stored (key order and numbers included).
//!
//! ## Testing a backend of your own
//!
//! With the `testing` feature, `weft_store::testing` is the conformance suite this crate runs
//! against its own backends: a backend outside the repository implements
//! `testing::Subject` (its store, and another instance on the same data) and runs
//! `testing::run_all`, or each check as a test of its own:
//!
//! ```toml
//! [dev-dependencies]
//! weft-store = { version = "…", features = ["testing"] }
//! ```
//!
//! ```ignore
//! #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn conformance() {
//!     weft_store::testing::run_all(|| async { MySubject::fresh().await }).await;
//! }
//! ```
//!
//! The module's documentation has a complete example.
//!
//! ## Semantics every backend shares
//!
//! The conformance suite (`weft_store::testing`, run by `tests/conformance.rs`) runs the same
//! checks against all three. Beyond what [`SessionStore`] says:
//!
//! - A commit is checked in this order, and nothing is written when a check fails: what needs
//!   nothing stored ([`StoreError::Invalid`]: a head `version` other than
//!   `expected_version + 1`, events out of order or of another session); the session exists
//!   ([`StoreError::NotFound`]); a commit made under a lease ([`weft_core::Commit::lease`]) finds
//!   the session's lease still that holder's ([`StoreError::LeaseLost`]: the fence, checked in
//!   the commit's own transaction — on Postgres with the lease row locked until it ends, so a
//!   take-over waits for it); its version is `expected_version` ([`StoreError::Conflict`]);
//!   then [`StoreError::Invalid`] for a `message_count` other than the stored count plus the new
//!   messages, a changed `owner`, or a first event not above the last stored seq.
//! - An append under a lease is fenced like a commit ([`StoreError::LeaseLost`], checked before
//!   the seq order).
//! - Numbers are stored as signed 64-bit integers: a `u64` above `i64::MAX` is refused as
//!   [`StoreError::Invalid`].
//! - Appending events raises `reserved_seq` to at least the last stored seq, so
//!   [`SessionStore::reserve_seqs`] always answers above every stored and every reserved number.
//!   Reserving 0 numbers is [`StoreError::Invalid`].
//! - Methods naming an unknown session answer [`StoreError::NotFound`], except those whose
//!   answer can say "nothing": `load`/`head`/`get_checkpoint` (`None`), `list_checkpoints`
//!   (empty), `delete_session` (`false`) and `release_lease` (`Ok`).
//! - The latest checkpoint of a namespace is the one with the greatest `at`, ties going to the
//!   one stored last; replacing a checkpoint keeps its place among equal `at`s.
//! - `list_sessions` orders by `updated_at` descending, then id; `due_sessions` by id.
//! - Leases expire by the store's clock: the process's monotonic clock (memory), the machine's
//!   clock (SQLite: every process sharing the file is on one machine), the database's `now()`
//!   (Postgres). A holder may renew an expired lease as long as nobody took it. Lease ttls and
//!   `wait_events` timeouts above ten years are cut to ten years.

mod codec;
mod hub;
mod memory;
mod postgres;
mod rows;
mod sqlite;
#[cfg(feature = "testing")]
pub mod testing;

use std::sync::Arc;

pub use memory::MemoryStore;
pub use postgres::{PostgresOptions, PostgresStore};
pub use sqlite::{SqliteOptions, SqliteStore, WriteStats, default_path, weft_home};
pub use weft_core::store::{SessionStore, StoreError};

/// The forms [`connect`] accepts, for error messages and `--help` texts.
pub const STORE_URL_FORMS: &str =
    "`memory`, `sqlite:PATH` (or `sqlite://PATH`), `postgres://…` (or `postgresql://…`)";

/// Opens the store a URL names:
///
/// - `memory` → a new [`MemoryStore`];
/// - `sqlite:PATH` or `sqlite://PATH` → a [`SqliteStore`] on that file (created if missing);
/// - `postgres://…` or `postgresql://…` → a [`PostgresStore`] (libpq-style URL; migrations are
///   applied on connect).
///
/// Anything else is [`StoreError::Invalid`] listing the accepted forms. Errors never repeat the
/// URL (it may hold a password).
pub async fn connect(url: &str) -> Result<Arc<dyn SessionStore>, StoreError> {
    let trimmed = url.trim();
    if trimmed == "memory" || trimmed == "memory:" {
        return Ok(Arc::new(MemoryStore::new()));
    }
    if let Some(rest) = trimmed.strip_prefix("sqlite:") {
        let path = rest.strip_prefix("//").unwrap_or(rest);
        if path.is_empty() || path.contains('?') || path == ":memory:" {
            return Err(StoreError::Invalid(format!(
                "a SQLite store URL is `sqlite:PATH`, a file path without parameters (for a store in memory: \
                 `memory`); \
                 accepted: {STORE_URL_FORMS}"
            )));
        }
        return Ok(Arc::new(SqliteStore::open(path).await?));
    }
    if trimmed.starts_with("postgres://") || trimmed.starts_with("postgresql://") {
        return Ok(Arc::new(PostgresStore::connect(trimmed).await?));
    }
    let scheme = trimmed.split_once(':').map(|(s, _)| s).unwrap_or(trimmed);
    let shown: String = scheme.chars().take(32).collect();
    Err(StoreError::Invalid(format!(
        "unknown session store {shown:?}; accepted: {STORE_URL_FORMS}"
    )))
}
