//! [`SqliteStore`]: the embedded default, one file.
//!
//! - **One writer.** Every write (create, commit, event append, `reserve_seqs`, checkpoint,
//!   lease, delete) is sent over a channel to one thread that owns the only writing connection
//!   and calls SQLite directly (no hand-off between threads per statement, and a commit's fsync
//!   holds no runtime worker). It begins a `BEGIN IMMEDIATE` transaction, takes whatever is
//!   queued by then (up to [`SqliteOptions::max_batch`] operations; writes queued while it waited
//!   for the file's lock join), applies it, commits, and only then answers each caller: one
//!   fsync for the whole batch (group commit). When event appends come close together it first
//!   lets them gather a moment ([`SqliteOptions::group_commit`], 4 ms): many sessions streaming
//!   at once are one append each per delta, and one sync per delta each would be most of their
//!   cost. Each operation runs inside its own `SAVEPOINT`,
//!   so one that fails (a stale commit, a bad seq, a row that cannot be written) is rolled back
//!   alone and fails only its own caller. If the transaction itself fails (the disk, the lock),
//!   every operation of the batch fails and nothing of it is written.
//! - **Readers.** Reads use a small pool of read-only connections; WAL lets them read while the
//!   writer writes. A load reads head, messages and run in one read transaction (a snapshot).
//! - **Other processes.** Several processes (or stores) may open the same file: `BEGIN
//!   IMMEDIATE` with a busy timeout serializes their writers, and every check a write depends on
//!   is made inside its transaction. A waiting tail is woken at once by this store's own writes
//!   and, for other writers, by a poller that watches `PRAGMA data_version` every
//!   [`SqliteOptions::poll_interval`] while anyone waits, and then reads the waited sessions'
//!   last seqs.
//! - **Durability.** WAL with `synchronous = FULL`: the WAL is synced at every commit, so an
//!   acknowledged write survives a power cut, not only a crash of the process (`NORMAL` would
//!   only sync at checkpoints and can lose the last commits on power loss, which the contract
//!   — "never loses what it acknowledged" — does not allow). Group commit makes this one sync
//!   per batch, not one per operation, and the agent already batches its events.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::ConnectOptions;
use sqlx::sqlite::{
    SqliteConnectOptions, SqlitePool, SqlitePoolOptions, SqliteRow, SqliteSynchronous,
};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use weft_core::store::{StoreError, StoredSession};

use crate::codec::{LogWindow, backend, column_u64, sql_error};
use crate::hub::Hub;
use crate::rows;

mod apply;
mod contract;
mod ops;
mod poller;
mod schema;
mod writer;

use ops::{Done, Job, Op};
use poller::poll_loop;
use schema::{enable_wal, migrate};
use writer::Writer;

/// Where the default store lives: `$WEFT_HOME/weft.db`, `WEFT_HOME` defaulting to `~/.weft`.
/// Creates the directory.
pub fn default_path() -> Result<PathBuf, StoreError> {
    let dir = weft_home()?;
    std::fs::create_dir_all(&dir)
        .map_err(|e| backend(format_args!("cannot create {}", dir.display()), e))?;
    Ok(dir.join("weft.db"))
}

/// Weft's own folder: `$WEFT_HOME` if set and not empty, else `~/.weft` (not created here).
/// The default store is `weft.db` in it, process identities are kept in its `processes/`.
pub fn weft_home() -> Result<PathBuf, StoreError> {
    let home = std::env::var_os("HOME").or_else(|| std::env::var_os("USERPROFILE"));
    weft_home_from(std::env::var_os("WEFT_HOME"), home)
}

/// `WEFT_HOME` if set and not empty, else `HOME/.weft`.
fn weft_home_from(
    weft_home: Option<OsString>,
    home: Option<OsString>,
) -> Result<PathBuf, StoreError> {
    match (weft_home.filter(|h| !h.is_empty()), home.filter(|h| !h.is_empty())) {
        (Some(dir), _) => Ok(PathBuf::from(dir)),
        (None, Some(home)) => Ok(PathBuf::from(home).join(".weft")),
        (None, None) => Err(StoreError::backend(
            "neither WEFT_HOME nor HOME is set: cannot place the default store",
        )),
    }
}

/// How a [`SqliteStore`] runs.
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Read connections in the pool (at least 1).
    pub read_connections: u32,
    /// How long a write waits for another process's write lock before failing.
    pub busy_timeout: Duration,
    /// How often a waiting tail looks for another process's appends.
    pub poll_interval: Duration,
    /// The most operations one transaction applies.
    pub max_batch: usize,
    /// How many operations may wait for the writer before callers wait to enqueue.
    pub queue: usize,
    /// How long the writer lets event appends gather before it begins a transaction, when they
    /// come close together (the last transaction ended less than four times this before): more
    /// appends per transaction, so fewer syncs of the file for the same events (paced streams of
    /// many sessions are one append each per delta). An append waits at most this much longer;
    /// one after a quiet moment does not wait, nor does any other write (a session's creation, a
    /// run's start or end, a lease). Zero: never.
    pub group_commit: Duration,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            read_connections: 4,
            busy_timeout: Duration::from_secs(5),
            poll_interval: Duration::from_millis(25),
            max_batch: 512,
            queue: 4096,
            group_commit: Duration::from_millis(4),
        }
    }
}

/// What the writer did so far: how many operations in how many transactions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Transactions committed (batches).
    pub transactions: u64,
    /// Operations applied in them (successful or not).
    pub operations: u64,
}

/// A session store in one SQLite file. Clones share the same connections and writer.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    readers: SqlitePool,
    writer: flume::Sender<Job>,
    hub: Arc<Hub>,
    stats: Arc<Counters>,
    poller: JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The writer ends by itself once its queue is closed (after its last batch).
        self.poller.abort();
    }
}

#[derive(Default)]
struct Counters {
    transactions: AtomicU64,
    operations: AtomicU64,
}

impl SqliteStore {
    /// Opens (creating if missing, with its directory) the store at `path`, with default
    /// options. Must be called inside a Tokio runtime.
    pub async fn open(path: impl AsRef<Path>) -> Result<Self, StoreError> {
        Self::open_with(path, SqliteOptions::default()).await
    }

    /// Opens the store at `path` with `options`.
    pub async fn open_with(
        path: impl AsRef<Path>,
        options: SqliteOptions,
    ) -> Result<Self, StoreError> {
        let path = path.as_ref().to_path_buf();
        if path.as_os_str() == ":memory:" || path.as_os_str().is_empty() {
            return Err(StoreError::Invalid(
                "a SQLite store needs a file (for a store in memory, use `memory`)".into(),
            ));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)
                .map_err(|e| backend(format_args!("cannot create {}", dir.display()), e))?;
        }
        let what = format!("SQLite store {}", path.display());
        let base = SqliteConnectOptions::new()
            .filename(&path)
            .busy_timeout(options.busy_timeout)
            .foreign_keys(false)
            .disable_statement_logging();

        let writer_options =
            base.clone().create_if_missing(true).synchronous(SqliteSynchronous::Full);
        let mut writer = writer_options.connect().await.map_err(|e| backend(&what, e))?;
        enable_wal(&mut writer, options.busy_timeout).await.map_err(|e| backend(&what, e))?;
        migrate(&mut writer).await.map_err(|e| match e {
            StoreError::Backend { message, source } => {
                StoreError::Backend { message: format!("{what}: {message}"), source }
            }
            other => other,
        })?;

        let reader_options = base.read_only(true);
        let readers = SqlitePoolOptions::new()
            .max_connections(options.read_connections.max(1))
            .min_connections(0)
            .connect_with(reader_options.clone())
            .await
            .map_err(|e| backend(&what, e))?;
        let watcher = reader_options.connect().await.map_err(|e| backend(&what, e))?;

        // The schema is in place: the writer thread writes on a connection of its own.
        drop(sqlx::Connection::close(writer).await);
        let hub = Arc::new(Hub::default());
        let stats = Arc::new(Counters::default());
        let (sender, receiver) = flume::bounded(options.queue.max(1));
        Writer {
            path: path.clone(),
            busy_timeout: options.busy_timeout,
            queue: receiver,
            hub: Arc::clone(&hub),
            stats: Arc::clone(&stats),
            max_batch: options.max_batch.max(1),
            group_commit: options.group_commit,
        }
        .start()
        .await?;
        let poller = tokio::spawn(poll_loop(
            watcher,
            readers.clone(),
            Arc::clone(&hub),
            options.poll_interval.max(Duration::from_millis(1)),
        ));
        Ok(Self { inner: Arc::new(Inner { path, readers, writer: sender, hub, stats, poller }) })
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// What the writer did so far.
    pub fn write_stats(&self) -> WriteStats {
        WriteStats {
            transactions: self.inner.stats.transactions.load(Ordering::Relaxed),
            operations: self.inner.stats.operations.load(Ordering::Relaxed),
        }
    }

    /// Sends `op` to the writer and waits for its answer.
    async fn write(&self, op: Op) -> Result<Done, StoreError> {
        let (reply, answer) = oneshot::channel();
        self.inner
            .writer
            .send_async(Job { op, reply })
            .await
            .map_err(|_| StoreError::Closed("the SQLite writer has stopped".into()))?;
        answer
            .await
            .map_err(|_| StoreError::Closed("the SQLite writer stopped before answering".into()))?
    }

    async fn write_unit(&self, op: Op) -> Result<(), StoreError> {
        self.write(op).await.map(|_| ())
    }

    async fn write_flag(&self, op: Op) -> Result<bool, StoreError> {
        match self.write(op).await? {
            Done::Flag(flag) => Ok(flag),
            _ => Err(StoreError::backend("the SQLite writer answered out of kind")),
        }
    }

    fn read_error(&self, error: sqlx::Error) -> StoreError {
        sql_error(format_args!("SQLite store {}", self.inner.path.display()), error)
    }

    async fn last_seq(&self, session_id: &str) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT last_seq FROM sessions WHERE id = ?")
            .bind(session_id)
            .fetch_optional(&self.inner.readers)
            .await
            .map_err(|e| self.read_error(e))?
            .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))?;
        column_u64(&row, "last_seq", "sessions", session_id)
    }

    /// The messages the events among `rows` stored by reference name (one query, none when no
    /// event needs any). Messages are committed before the events that name them, so they are
    /// there, whatever was written since.
    async fn log_window(
        &self,
        session_id: &str,
        rows: &[SqliteRow],
    ) -> Result<LogWindow, StoreError> {
        let Some((first, lo, hi)) = rows::needed_messages(rows, session_id)? else {
            return Ok(LogWindow::default());
        };
        let texts: Vec<String> = sqlx::query_scalar(
            "SELECT message FROM messages WHERE session_id = ? AND idx >= ? AND idx < ? \
             ORDER BY idx",
        )
        .bind(session_id)
        .bind(lo)
        .bind(hi)
        .fetch_all(&self.inner.readers)
        .await
        .map_err(|e| self.read_error(e))?;
        Ok(LogWindow::new(first, texts))
    }

    async fn exists(&self, session_id: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query("SELECT 1 FROM sessions WHERE id = ?")
            .bind(session_id)
            .fetch_optional(&self.inner.readers)
            .await
            .map_err(|e| self.read_error(e))?
            .is_some())
    }

    async fn load_now(&self, session_id: &str) -> Result<Option<StoredSession>, StoreError> {
        let mut tx = self.inner.readers.begin().await.map_err(|e| self.read_error(e))?;
        let Some(session) = sqlx::query(
            "SELECT head, message_count, last_seq, reserved_seq FROM sessions WHERE id = ?",
        )
        .bind(session_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(|e| self.read_error(e))?
        else {
            return Ok(None);
        };
        let messages =
            sqlx::query("SELECT idx, message FROM messages WHERE session_id = ? ORDER BY idx")
                .bind(session_id)
                .fetch_all(&mut *tx)
                .await
                .map_err(|e| self.read_error(e))?;
        let run = sqlx::query("SELECT run FROM runs WHERE session_id = ?")
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(|e| self.read_error(e))?;
        tx.commit().await.map_err(|e| self.read_error(e))?;
        rows::stored_session(session_id, &session, &messages, run.as_ref()).map(Some)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn weft_home_defaults() {
        let home = weft_home_from(None, Some("/home/u".into())).expect("home");
        assert_eq!(home, PathBuf::from("/home/u/.weft"));
        let set = weft_home_from(Some("/srv/weft".into()), Some("/home/u".into())).expect("set");
        assert_eq!(set, PathBuf::from("/srv/weft"));
        let empty = weft_home_from(Some("".into()), Some("/home/u".into())).expect("empty");
        assert_eq!(empty, PathBuf::from("/home/u/.weft"));
        assert!(matches!(weft_home_from(None, None), Err(StoreError::Backend { .. })));
    }
}
