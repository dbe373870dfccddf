//! [`SqliteStore`]: the embedded default, one file.
//!
//! - **One writer.** Every write (create, commit, event append, `reserve_seqs`, checkpoint,
//!   lease, delete) is sent over a channel to one task that owns the only writing connection.
//!   The task takes whatever is queued (up to [`SqliteOptions::max_batch`] operations), applies it
//!   in one `BEGIN IMMEDIATE … COMMIT` transaction, and only then answers each caller: one
//!   fsync for the whole batch (group commit). Each operation runs inside its own `SAVEPOINT`,
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

use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqlitePool, SqlitePoolOptions, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{ConnectOptions, Executor, Row};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use weft_core::History;
use weft_core::message::{TimestampMs, now_ms};
use weft_core::session::SessionStatus;
use weft_core::store::{
    Checkpoint, Commit, EventRecord, OwnerScope, SessionHead, SessionStore, StoreError,
    StoreFuture, StoredSession,
};

use crate::codec::{
    self, EncodedCommit, EncodedEvent, EncodedHead, EncodedRun, LogWindow, Position, backend,
    column, column_u64, limit_i64, sql_error, to_i64,
};
use crate::hub::{self, Hub};
use crate::rows;

/// The schema, in order: the version of a database is the number of migrations applied
/// (`PRAGMA user_version`).
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_sessions", include_str!("../migrations/sqlite/0001_sessions.sql")),
    ("0002_events_by_reference", include_str!("../migrations/sqlite/0002_events_by_reference.sql")),
];

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
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            read_connections: 4,
            busy_timeout: Duration::from_secs(5),
            poll_interval: Duration::from_millis(25),
            max_batch: 512,
            queue: 4096,
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
    writer: mpsc::Sender<Job>,
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

        let hub = Arc::new(Hub::default());
        let stats = Arc::new(Counters::default());
        let (sender, receiver) = mpsc::channel(options.queue.max(1));
        tokio::spawn(write_loop(
            writer,
            writer_options,
            receiver,
            Arc::clone(&hub),
            Arc::clone(&stats),
            options.max_batch.max(1),
        ));
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
            .send(Job { op, reply })
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

/// Puts the file in WAL mode. Switching needs an exclusive lock that the busy timeout does not
/// wait for, so two processes creating the file at once retry here.
async fn enable_wal(conn: &mut SqliteConnection, patience: Duration) -> Result<(), sqlx::Error> {
    let give_up = tokio::time::Instant::now() + patience;
    loop {
        match sqlx::query("PRAGMA journal_mode = WAL").fetch_one(&mut *conn).await {
            Ok(row) => {
                let mode: String = row.try_get(0)?;
                if mode.eq_ignore_ascii_case("wal") {
                    return Ok(());
                }
                return Err(sqlx::Error::Protocol(format!(
                    "the file stays in journal mode {mode}, not WAL"
                )));
            }
            Err(e) if tokio::time::Instant::now() < give_up && is_busy(&e) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

fn is_busy(error: &sqlx::Error) -> bool {
    // SQLITE_BUSY (5) and SQLITE_LOCKED (6), with their extended codes.
    match error {
        sqlx::Error::Database(e) => {
            e.code().and_then(|c| c.parse::<i32>().ok()).is_some_and(|c| matches!(c & 0xff, 5 | 6))
        }
        _ => false,
    }
}

/// Applies the migrations this binary knows and the file lacks, in one transaction that holds
/// the write lock (two processes opening a new file at once apply them once).
async fn migrate(conn: &mut SqliteConnection) -> Result<(), StoreError> {
    let fail = |e: sqlx::Error| backend("migration", e);
    conn.execute("BEGIN IMMEDIATE").await.map_err(fail)?;
    let result = async {
        let row = sqlx::query("PRAGMA user_version").fetch_one(&mut *conn).await.map_err(fail)?;
        let applied: i64 = row.try_get(0).map_err(fail)?;
        let known = MIGRATIONS.len() as i64;
        if applied > known {
            return Err(StoreError::backend(format!(
                "the database is at schema version {applied}, newer than this build knows \
                 ({known}): use a newer weft"
            )));
        }
        for (name, sql) in &MIGRATIONS[usize::try_from(applied).unwrap_or(0)..] {
            sqlx::raw_sql(sql)
                .execute(&mut *conn)
                .await
                .map_err(|e| backend(format_args!("migration {name}"), e))?;
        }
        if applied < known {
            conn.execute(format!("PRAGMA user_version = {known}").as_str()).await.map_err(fail)?;
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => conn.execute("COMMIT").await.map(|_| ()).map_err(fail),
        Err(e) => {
            let _ = conn.execute("ROLLBACK").await;
            Err(e)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The writer.

/// One write, encoded by its caller (the writer only checks positions and writes).
enum Op {
    Create { head: EncodedHead, messages: Vec<String> },
    Commit(Box<EncodedCommit>),
    Reserve { session_id: String, count: u64 },
    Append { session_id: String, first_seq: Option<u64>, last_seq: u64, events: Vec<EncodedEvent> },
    PutCheckpoint { checkpoint: Checkpoint, value: String, at: i64 },
    Delete { session_id: String, owner: Option<String> },
    Acquire { session_id: String, holder: String, ttl_ms: i64 },
    Renew { session_id: String, holder: String, ttl_ms: i64 },
    Release { session_id: String, holder: String },
    TakeOver { process: String, heir: String, ttl_ms: i64 },
    Probe { id: String },
}

/// A write's answer.
enum Done {
    Unit,
    Seq(u64),
    Flag(bool),
    Ids(Vec<String>),
}

/// Whose waiters to wake once the transaction is committed (events appended, or deleted).
struct Wake(String);

struct Job {
    op: Op,
    reply: oneshot::Sender<Result<Done, StoreError>>,
}

async fn write_loop(
    writer: SqliteConnection,
    reconnect: SqliteConnectOptions,
    mut queue: mpsc::Receiver<Job>,
    hub: Arc<Hub>,
    stats: Arc<Counters>,
    max_batch: usize,
) {
    let mut conn = Some(writer);
    let mut jobs: Vec<Job> = Vec::new();
    while queue.recv_many(&mut jobs, max_batch).await > 0 {
        let (ops, replies): (Vec<Op>, Vec<_>) = jobs.drain(..).map(|j| (j.op, j.reply)).unzip();
        if conn.is_none() {
            match reconnect.connect().await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    let error = backend("SQLite writer cannot reconnect", e);
                    for reply in replies {
                        let _ = reply.send(Err(error.clone()));
                    }
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let count = ops.len() as u64;
        match run_batch(c, ops).await {
            Ok(results) => {
                stats.transactions.fetch_add(1, Ordering::Relaxed);
                stats.operations.fetch_add(count, Ordering::Relaxed);
                for (result, reply) in results.into_iter().zip(replies) {
                    let answer = result.map(|(done, wake)| {
                        if let Some(Wake(id)) = wake {
                            hub.poke(&id);
                        }
                        done
                    });
                    let _ = reply.send(answer);
                }
            }
            Err(error) => {
                tracing::warn!(%error, "SQLite write batch failed; reconnecting the writer");
                // Whatever state the connection is in, start the next batch on a fresh one.
                conn = None;
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
        }
    }
}

type OpResult = Result<(Done, Option<Wake>), StoreError>;

/// One transaction for the batch, one savepoint per operation. `Err` means the transaction
/// failed and nothing of the batch was written.
async fn run_batch(conn: &mut SqliteConnection, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError> {
    let fail = |e: sqlx::Error| backend("SQLite write", e);
    conn.execute("BEGIN IMMEDIATE").await.map_err(fail)?;
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        if let Err(e) = conn.execute("SAVEPOINT op").await {
            return Err(abort(conn, fail(e)).await);
        }
        let result = apply(conn, op).await;
        let closed = if result.is_ok() {
            conn.execute("RELEASE op").await.map(|_| ())
        } else {
            match conn.execute("ROLLBACK TO op").await {
                Ok(_) => conn.execute("RELEASE op").await.map(|_| ()),
                Err(e) => Err(e),
            }
        };
        if let Err(e) = closed {
            return Err(abort(conn, fail(e)).await);
        }
        results.push(result);
    }
    if let Err(e) = conn.execute("COMMIT").await {
        return Err(abort(conn, fail(e)).await);
    }
    Ok(results)
}

async fn abort(conn: &mut SqliteConnection, error: StoreError) -> StoreError {
    let _ = conn.execute("ROLLBACK").await;
    error
}

fn sql(e: sqlx::Error) -> StoreError {
    backend("SQLite write", e)
}

async fn position(conn: &mut SqliteConnection, session_id: &str) -> Result<Position, StoreError> {
    let row =
        sqlx::query("SELECT version, message_count, last_seq, owner FROM sessions WHERE id = ?")
            .bind(session_id)
            .fetch_optional(&mut *conn)
            .await
            .map_err(sql)?
            .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))?;
    Ok(Position {
        version: column_u64(&row, "version", "sessions", session_id)?,
        message_count: column_u64(&row, "message_count", "sessions", session_id)?,
        last_seq: column_u64(&row, "last_seq", "sessions", session_id)?,
        owner: column(&row, "owner", "sessions", session_id)?,
    })
}

async fn insert_messages(
    conn: &mut SqliteConnection,
    session_id: &str,
    first: u64,
    messages: &[String],
) -> Result<(), StoreError> {
    for (i, message) in messages.iter().enumerate() {
        sqlx::query("INSERT INTO messages (session_id, idx, message) VALUES (?, ?, ?)")
            .bind(session_id)
            .bind(to_i64(first + i as u64, "message index")?)
            .bind(message)
            .execute(&mut *conn)
            .await
            .map_err(sql)?;
    }
    Ok(())
}

async fn insert_events(
    conn: &mut SqliteConnection,
    session_id: &str,
    events: &mut [EncodedEvent],
    message_count: u64,
) -> Result<(), StoreError> {
    // Many rows per statement: each statement is a round trip to sqlx's SQLite worker thread,
    // which costs far more than SQLite's own work for a small row. 8 parameters a row stays well
    // under SQLite's limit of 32,766 variables per statement.
    const ROWS_PER_STATEMENT: usize = 1024;
    for e in events.iter_mut() {
        e.settle(message_count)?;
    }
    for chunk in events.chunks(ROWS_PER_STATEMENT) {
        let mut insert = sqlx::QueryBuilder::<sqlx::Sqlite>::new(
            "INSERT INTO events (session_id, seq, run_id, node_id, at, event, msg_first, msg_count) ",
        );
        insert.push_values(chunk, |mut row, e| {
            row.push_bind(session_id)
                .push_bind(e.seq)
                .push_bind(&e.run_id)
                .push_bind(&e.node_id)
                .push_bind(e.at)
                .push_bind(&e.json)
                .push_bind(e.span.map(|(first, _)| first))
                .push_bind(e.span.map(|(_, count)| count));
        });
        insert.build().execute(&mut *conn).await.map_err(sql)?;
    }
    Ok(())
}

async fn session_exists(conn: &mut SqliteConnection, session_id: &str) -> Result<(), StoreError> {
    sqlx::query("SELECT 1 FROM sessions WHERE id = ?")
        .bind(session_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(sql)?
        .map(|_| ())
        .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))
}

async fn apply(conn: &mut SqliteConnection, op: Op) -> OpResult {
    match op {
        Op::Create { head, messages } => {
            let inserted = sqlx::query(
                "INSERT INTO sessions (id, owner, status, head, version, message_count, \
                 reserved_seq, last_seq, next_deadline, created_at, updated_at) \
                 VALUES (?, ?, ?, ?, ?, ?, 0, 0, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
            )
            .bind(&head.id)
            .bind(&head.owner)
            .bind(head.status)
            .bind(&head.json)
            .bind(head.version)
            .bind(head.message_count)
            .bind(head.next_deadline)
            .bind(head.created_at)
            .bind(head.updated_at)
            .execute(&mut *conn)
            .await
            .map_err(sql)?
            .rows_affected();
            if inserted == 0 {
                return Err(StoreError::AlreadyExists(head.id));
            }
            insert_messages(conn, &head.id, 0, &messages).await?;
            Ok((Done::Unit, None))
        }
        Op::Commit(commit) => {
            let EncodedCommit { head, messages, run, mut events, shape } = *commit;
            let id = &shape.session_id;
            let at = position(conn, id).await?;
            codec::check_commit(&at, &shape)?;
            let last = shape.last_seq.unwrap_or(at.last_seq);
            let last_i = to_i64(last, "seq")?;
            sqlx::query(
                "UPDATE sessions SET status = ?, head = ?, version = ?, message_count = ?, \
                 next_deadline = ?, updated_at = ?, last_seq = ?, \
                 reserved_seq = max(reserved_seq, ?) WHERE id = ?",
            )
            .bind(head.status)
            .bind(&head.json)
            .bind(head.version)
            .bind(head.message_count)
            .bind(head.next_deadline)
            .bind(head.updated_at)
            .bind(last_i)
            .bind(last_i)
            .bind(id)
            .execute(&mut *conn)
            .await
            .map_err(sql)?;
            insert_messages(conn, id, at.message_count, &messages).await?;
            match run {
                EncodedRun::Keep => {}
                EncodedRun::Set(json) => {
                    sqlx::query(
                        "INSERT INTO runs (session_id, run) VALUES (?, ?) \
                         ON CONFLICT (session_id) DO UPDATE SET run = excluded.run",
                    )
                    .bind(id)
                    .bind(json)
                    .execute(&mut *conn)
                    .await
                    .map_err(sql)?;
                }
                EncodedRun::Clear => {
                    sqlx::query("DELETE FROM runs WHERE session_id = ?")
                        .bind(id)
                        .execute(&mut *conn)
                        .await
                        .map_err(sql)?;
                }
            }
            insert_events(conn, id, &mut events, shape.message_count).await?;
            let wake = (!events.is_empty()).then(|| Wake(id.clone()));
            Ok((Done::Unit, wake))
        }
        Op::Reserve { session_id, count } => {
            let row = sqlx::query("SELECT reserved_seq, last_seq FROM sessions WHERE id = ?")
                .bind(&session_id)
                .fetch_optional(&mut *conn)
                .await
                .map_err(sql)?
                .ok_or_else(|| StoreError::NotFound(session_id.clone()))?;
            let reserved = column_u64(&row, "reserved_seq", "sessions", &session_id)?;
            let last = column_u64(&row, "last_seq", "sessions", &session_id)?;
            let (first, end) = codec::reservation(&session_id, reserved, last, count)?;
            sqlx::query("UPDATE sessions SET reserved_seq = ? WHERE id = ?")
                .bind(to_i64(end, "seq")?)
                .bind(&session_id)
                .execute(&mut *conn)
                .await
                .map_err(sql)?;
            Ok((Done::Seq(first), None))
        }
        Op::Append { session_id, first_seq, last_seq, mut events } => {
            let at = position(conn, &session_id).await?;
            codec::check_first_seq(&session_id, at.last_seq, first_seq)?;
            if events.is_empty() {
                return Ok((Done::Unit, None));
            }
            insert_events(conn, &session_id, &mut events, at.message_count).await?;
            let last = to_i64(last_seq, "seq")?;
            sqlx::query(
                "UPDATE sessions SET last_seq = ?, reserved_seq = max(reserved_seq, ?) WHERE id = ?",
            )
            .bind(last)
            .bind(last)
            .bind(&session_id)
            .execute(&mut *conn)
            .await
            .map_err(sql)?;
            Ok((Done::Unit, Some(Wake(session_id))))
        }
        Op::PutCheckpoint { checkpoint, value, at } => {
            session_exists(conn, &checkpoint.session_id).await?;
            sqlx::query(
                "INSERT INTO checkpoints (session_id, namespace, id, parent_id, at, value) \
                 VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, namespace, id) DO UPDATE \
                 SET parent_id = excluded.parent_id, at = excluded.at, value = excluded.value",
            )
            .bind(&checkpoint.session_id)
            .bind(&checkpoint.namespace)
            .bind(&checkpoint.id)
            .bind(&checkpoint.parent_id)
            .bind(at)
            .bind(value)
            .execute(&mut *conn)
            .await
            .map_err(sql)?;
            Ok((Done::Unit, None))
        }
        Op::Delete { session_id, owner } => {
            let Some(row) = sqlx::query("SELECT owner FROM sessions WHERE id = ?")
                .bind(&session_id)
                .fetch_optional(&mut *conn)
                .await
                .map_err(sql)?
            else {
                return Ok((Done::Flag(false), None));
            };
            let stored: Option<String> = column(&row, "owner", "sessions", &session_id)?;
            if owner.is_some() && stored != owner {
                return Ok((Done::Flag(false), None));
            }
            for table in ["events", "messages", "runs", "checkpoints", "leases"] {
                sqlx::query(&format!("DELETE FROM {table} WHERE session_id = ?"))
                    .bind(&session_id)
                    .execute(&mut *conn)
                    .await
                    .map_err(sql)?;
            }
            sqlx::query("DELETE FROM sessions WHERE id = ?")
                .bind(&session_id)
                .execute(&mut *conn)
                .await
                .map_err(sql)?;
            Ok((Done::Flag(true), Some(Wake(session_id))))
        }
        Op::Acquire { session_id, holder, ttl_ms } => {
            session_exists(conn, &session_id).await?;
            let now = clock_ms()?;
            let current = sqlx::query("SELECT holder, expires_at FROM leases WHERE session_id = ?")
                .bind(&session_id)
                .fetch_optional(&mut *conn)
                .await
                .map_err(sql)?;
            if let Some(row) = current {
                let other: String = column(&row, "holder", "leases", &session_id)?;
                let expires: i64 = column(&row, "expires_at", "leases", &session_id)?;
                if other != holder && expires > now {
                    return Ok((Done::Flag(false), None));
                }
            }
            sqlx::query(
                "INSERT INTO leases (session_id, holder, expires_at) VALUES (?, ?, ?) \
                 ON CONFLICT (session_id) DO UPDATE \
                 SET holder = excluded.holder, expires_at = excluded.expires_at",
            )
            .bind(&session_id)
            .bind(&holder)
            .bind(now.saturating_add(ttl_ms))
            .execute(&mut *conn)
            .await
            .map_err(sql)?;
            Ok((Done::Flag(true), None))
        }
        Op::Renew { session_id, holder, ttl_ms } => {
            session_exists(conn, &session_id).await?;
            let now = clock_ms()?;
            let renewed =
                sqlx::query("UPDATE leases SET expires_at = ? WHERE session_id = ? AND holder = ?")
                    .bind(now.saturating_add(ttl_ms))
                    .bind(&session_id)
                    .bind(&holder)
                    .execute(&mut *conn)
                    .await
                    .map_err(sql)?
                    .rows_affected();
            Ok((Done::Flag(renewed == 1), None))
        }
        Op::Release { session_id, holder } => {
            sqlx::query("DELETE FROM leases WHERE session_id = ? AND holder = ?")
                .bind(&session_id)
                .bind(&holder)
                .execute(&mut *conn)
                .await
                .map_err(sql)?;
            Ok((Done::Unit, None))
        }
        Op::TakeOver { process, heir, ttl_ms } => {
            // `substr` counts characters as `length` does: the holder's first characters are
            // the process's name and a slash.
            let rows = sqlx::query(
                "UPDATE leases SET holder = ?2, expires_at = ?3 \
                 WHERE holder = ?1 OR substr(holder, 1, length(?1) + 1) = ?1 || '/' \
                 RETURNING session_id",
            )
            .bind(&process)
            .bind(&heir)
            .bind(clock_ms()?.saturating_add(ttl_ms))
            .fetch_all(&mut *conn)
            .await
            .map_err(sql)?;
            let mut taken = Vec::with_capacity(rows.len());
            for row in &rows {
                let id: String = column(row, "session_id", "leases", "")?;
                taken.push(id);
            }
            taken.sort();
            Ok((Done::Ids(taken), None))
        }
        Op::Probe { id } => {
            // A lease row no session can have, written and deleted: the page changes, so the
            // commit writes (and syncs) the log, and nothing is left.
            sqlx::query(
                "INSERT INTO leases (session_id, holder, expires_at) VALUES (?, 'probe', 0)",
            )
            .bind(&id)
            .execute(&mut *conn)
            .await
            .map_err(sql)?;
            sqlx::query("DELETE FROM leases WHERE session_id = ?")
                .bind(&id)
                .execute(&mut *conn)
                .await
                .map_err(sql)?;
            Ok((Done::Unit, None))
        }
    }
}

/// The machine's clock, for leases (every process sharing a file is on one machine).
fn clock_ms() -> Result<i64, StoreError> {
    to_i64(now_ms(), "clock")
}

// ---------------------------------------------------------------------------------------------
// The poller: another process's appends.

/// While anyone waits, watches `PRAGMA data_version` (it changes when another connection
/// commits) and, when it changed, reads the waited sessions' last seqs: a session whose last seq
/// is not the one the poller saw before (or that is gone) has its waiters woken.
async fn poll_loop(
    mut watcher: SqliteConnection,
    readers: SqlitePool,
    hub: Arc<Hub>,
    interval: Duration,
) {
    let mut seen_version: Option<i64> = None;
    // The last seq the poller saw of each waited session (`None`: gone).
    let mut seen: HashMap<String, Option<u64>> = HashMap::new();
    loop {
        if hub.is_idle() {
            seen.clear();
            hub.registered().await;
            continue;
        }
        tokio::time::sleep(interval).await;
        let version = match sqlx::query("PRAGMA data_version").fetch_one(&mut watcher).await {
            Ok(row) => row.try_get::<i64, _>(0).ok(),
            Err(error) => {
                tracing::warn!(%error, "SQLite store poller cannot read data_version");
                None
            }
        };
        let waited = hub.waited();
        let waited_set: HashSet<&str> = waited.iter().map(String::as_str).collect();
        seen.retain(|id, _| waited_set.contains(id.as_str()));
        let new_waiters = waited.iter().any(|id| !seen.contains_key(id));
        if version.is_some() && version == seen_version && !new_waiters {
            continue;
        }
        seen_version = version;
        for chunk in waited.chunks(256) {
            let marks = vec!["?"; chunk.len()].join(", ");
            let text = format!("SELECT id, last_seq FROM sessions WHERE id IN ({marks})");
            let mut query = sqlx::query(&text);
            for id in chunk {
                query = query.bind(id);
            }
            let found = match query.fetch_all(&readers).await {
                Ok(found) => found,
                Err(error) => {
                    tracing::warn!(%error, "SQLite store poller cannot read last seqs");
                    seen_version = None;
                    continue;
                }
            };
            let mut now: HashMap<&str, Option<u64>> =
                chunk.iter().map(|id| (id.as_str(), None)).collect();
            for row in &found {
                let Ok(id) = row.try_get::<String, _>("id") else { continue };
                let last = column_u64(row, "last_seq", "sessions", &id).ok();
                if let Some(slot) = now.get_mut(id.as_str()) {
                    *slot = last;
                }
            }
            for (id, last) in now {
                // The first look at a newly waited session pokes too: an append may have landed
                // between its waiter's own look and this one.
                if seen.insert(id.to_owned(), last) != Some(last) {
                    hub.poke(id);
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The contract.

fn owner_of(scope: OwnerScope<'_>) -> Option<String> {
    match scope {
        OwnerScope::Any => None,
        OwnerScope::Owner(owner) => Some(owner.to_owned()),
    }
}

impl SessionStore for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn create<'a>(&'a self, head: SessionHead, messages: History) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            codec::check_create(&head, &messages)?;
            let op = Op::Create {
                head: codec::encode_head(&head)?,
                messages: codec::encode_messages(messages.shared())?,
            };
            self.write_unit(op).await
        })
    }

    fn load<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<StoredSession>> {
        Box::pin(self.load_now(session_id))
    }

    fn head<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<SessionHead>> {
        Box::pin(async move {
            let row = sqlx::query("SELECT head FROM sessions WHERE id = ?")
                .bind(session_id)
                .fetch_optional(&self.inner.readers)
                .await
                .map_err(|e| self.read_error(e))?;
            row.map(|row| rows::head(&row, session_id)).transpose()
        })
    }

    fn commit<'a>(&'a self, commit: Commit) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let encoded = codec::encode_commit(&commit)?;
            drop(commit);
            self.write_unit(Op::Commit(Box::new(encoded))).await
        })
    }

    fn reserve_seqs<'a>(&'a self, session_id: &'a str, count: u64) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            match self.write(Op::Reserve { session_id: session_id.to_owned(), count }).await? {
                Done::Seq(first) => Ok(first),
                _ => Err(StoreError::backend("the SQLite writer answered out of kind")),
            }
        })
    }

    fn append_events<'a>(
        &'a self,
        session_id: &'a str,
        events: Vec<Arc<EventRecord>>,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            codec::check_event_order(session_id, &events)?;
            let op = Op::Append {
                session_id: session_id.to_owned(),
                first_seq: events.first().map(|e| e.seq),
                last_seq: events.last().map_or(0, |e| e.seq),
                events: codec::encode_events(&events)?,
            };
            self.write_unit(op).await
        })
    }

    fn read_events<'a>(
        &'a self,
        session_id: &'a str,
        after_seq: u64,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Arc<EventRecord>>> {
        Box::pin(async move {
            let found = sqlx::query(
                "SELECT seq, run_id, node_id, at, event, msg_first, msg_count FROM events \
                 WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?",
            )
            .bind(session_id)
            .bind(i64::try_from(after_seq).unwrap_or(i64::MAX))
            .bind(limit_i64(limit))
            .fetch_all(&self.inner.readers)
            .await
            .map_err(|e| self.read_error(e))?;
            if found.is_empty() && !self.exists(session_id).await? {
                return Err(StoreError::NotFound(session_id.to_owned()));
            }
            let window = self.log_window(session_id, &found).await?;
            let sid: Arc<str> = Arc::from(session_id);
            found.iter().map(|row| rows::event(row, &sid, &window).map(Arc::new)).collect()
        })
    }

    fn wait_events<'a>(
        &'a self,
        session_id: &'a str,
        after_seq: u64,
        timeout: Duration,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            hub::wait_for_events(&self.inner.hub, session_id, after_seq, timeout, || {
                self.last_seq(session_id)
            })
            .await
        })
    }

    fn put_checkpoint<'a>(&'a self, checkpoint: Checkpoint) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            codec::check_checkpoint(&checkpoint)?;
            let value = codec::encode(&checkpoint.value, "checkpoint value")?;
            let at = to_i64(checkpoint.at, "checkpoint time")?;
            self.write_unit(Op::PutCheckpoint { checkpoint, value, at }).await
        })
    }

    fn get_checkpoint<'a>(
        &'a self,
        session_id: &'a str,
        namespace: &'a str,
        id: Option<&'a str>,
    ) -> StoreFuture<'a, Option<Checkpoint>> {
        Box::pin(async move {
            let query = match id {
                Some(id) => sqlx::query(
                    "SELECT namespace, id, parent_id, at, value FROM checkpoints \
                     WHERE session_id = ? AND namespace = ? AND id = ?",
                )
                .bind(session_id)
                .bind(namespace)
                .bind(id),
                None => sqlx::query(
                    "SELECT namespace, id, parent_id, at, value FROM checkpoints \
                     WHERE session_id = ? AND namespace = ? ORDER BY at DESC, ord DESC LIMIT 1",
                )
                .bind(session_id)
                .bind(namespace),
            };
            let row =
                query.fetch_optional(&self.inner.readers).await.map_err(|e| self.read_error(e))?;
            row.map(|row| rows::checkpoint(&row, session_id)).transpose()
        })
    }

    fn find_checkpoints<'a>(
        &'a self,
        namespace: &'a str,
        keys: &'a [(String, String)],
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        Box::pin(async move {
            let mut found = Vec::new();
            // SQLite binds at most 32,766 variables: a few hundred keys per query.
            for chunk in keys.chunks(256) {
                let mut sql = String::from(
                    "SELECT session_id, id FROM checkpoints WHERE namespace = ? AND (",
                );
                for i in 0..chunk.len() {
                    sql.push_str(if i == 0 { "" } else { " OR " });
                    sql.push_str("(session_id = ? AND id = ?)");
                }
                sql.push(')');
                let mut query = sqlx::query(&sql).bind(namespace);
                for (session_id, id) in chunk {
                    query = query.bind(session_id).bind(id);
                }
                let rows =
                    query.fetch_all(&self.inner.readers).await.map_err(|e| self.read_error(e))?;
                for row in &rows {
                    found.push((
                        row.try_get::<String, _>(0).map_err(|e| self.read_error(e))?,
                        row.try_get::<String, _>(1).map_err(|e| self.read_error(e))?,
                    ));
                }
            }
            Ok(found)
        })
    }

    fn list_checkpoints<'a>(
        &'a self,
        session_id: &'a str,
        namespace: &'a str,
    ) -> StoreFuture<'a, Vec<Checkpoint>> {
        Box::pin(async move {
            let found = sqlx::query(
                "SELECT namespace, id, parent_id, at, value FROM checkpoints \
                 WHERE session_id = ? AND namespace = ? ORDER BY at, ord",
            )
            .bind(session_id)
            .bind(namespace)
            .fetch_all(&self.inner.readers)
            .await
            .map_err(|e| self.read_error(e))?;
            found.iter().map(|row| rows::checkpoint(row, session_id)).collect()
        })
    }

    fn list_sessions<'a>(
        &'a self,
        scope: OwnerScope<'a>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<SessionHead>> {
        Box::pin(async move {
            let query = match scope {
                OwnerScope::Any => sqlx::query(
                    "SELECT id, head FROM sessions ORDER BY updated_at DESC, id LIMIT ?",
                )
                .bind(limit_i64(limit)),
                OwnerScope::Owner(owner) => sqlx::query(
                    "SELECT id, head FROM sessions WHERE owner = ? \
                     ORDER BY updated_at DESC, id LIMIT ?",
                )
                .bind(owner)
                .bind(limit_i64(limit)),
            };
            let found =
                query.fetch_all(&self.inner.readers).await.map_err(|e| self.read_error(e))?;
            found.iter().map(rows::listed_head).collect()
        })
    }

    fn delete_session<'a>(
        &'a self,
        session_id: &'a str,
        scope: OwnerScope<'a>,
    ) -> StoreFuture<'a, bool> {
        Box::pin(
            self.write_flag(Op::Delete {
                session_id: session_id.to_owned(),
                owner: owner_of(scope),
            }),
        )
    }

    fn acquire_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.write_flag(Op::Acquire {
            session_id: session_id.to_owned(),
            holder: holder.to_owned(),
            ttl_ms: codec::ttl_ms(ttl),
        }))
    }

    fn renew_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.write_flag(Op::Renew {
            session_id: session_id.to_owned(),
            holder: holder.to_owned(),
            ttl_ms: codec::ttl_ms(ttl),
        }))
    }

    fn release_lease<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(self.write_unit(Op::Release {
            session_id: session_id.to_owned(),
            holder: holder.to_owned(),
        }))
    }

    fn take_over_process_leases<'a>(
        &'a self,
        process: &'a str,
        heir: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let op = Op::TakeOver {
                process: process.to_owned(),
                heir: heir.to_owned(),
                ttl_ms: codec::ttl_ms(ttl),
            };
            match self.write(op).await? {
                Done::Ids(taken) => Ok(taken),
                _ => Err(StoreError::backend("the SQLite writer answered out of kind")),
            }
        })
    }

    fn probe_write(&self) -> StoreFuture<'_, ()> {
        Box::pin(self.write_unit(Op::Probe { id: codec::probe_id() }))
    }

    fn due_sessions<'a>(&'a self, now: TimestampMs, limit: usize) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let clock = clock_ms()?;
            let found = sqlx::query(
                "SELECT id FROM sessions s WHERE \
                 (s.status = ? AND NOT EXISTS (SELECT 1 FROM leases l \
                    WHERE l.session_id = s.id AND l.expires_at > ?)) \
                 OR (s.status IN (?, ?) AND s.next_deadline <= ?) \
                 ORDER BY id LIMIT ?",
            )
            .bind(SessionStatus::Running.as_str())
            .bind(clock)
            .bind(SessionStatus::AwaitingToolExecution.as_str())
            .bind(SessionStatus::AwaitingApproval.as_str())
            .bind(i64::try_from(now).unwrap_or(i64::MAX))
            .bind(limit_i64(limit))
            .fetch_all(&self.inner.readers)
            .await
            .map_err(|e| self.read_error(e))?;
            found.iter().map(|row| column(row, "id", "sessions", "?")).collect()
        })
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
