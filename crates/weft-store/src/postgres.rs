//! [`PostgresStore`]: several `weft serve` replicas sharing one database.
//!
//! - **Commits** are transactions that lock the session's row (`SELECT … FOR UPDATE`), check the
//!   version and positions, and write head, messages, run and events; a stale commit waits for
//!   the winner's row lock, then sees the new version and answers `Conflict`.
//! - **Sequence numbers** are reserved by one atomic `UPDATE … RETURNING`.
//! - **Leases** are rows `(session_id, holder, expires_at)`; every comparison uses the database's
//!   `now()`, so replicas whose clocks disagree still agree on who holds a lease.
//! - **Waiting tails**: every write that adds events (or deletes a session) sends
//!   `pg_notify(channel, 'SEQ:SESSION_ID')` inside its transaction, so the notification goes
//!   out when it commits. Each store instance keeps one `LISTEN` connection and wakes its local
//!   waiters for that session; when that connection is lost and comes back, every waiter is
//!   woken to look again (notifications sent meanwhile are lost, the store is not).
//! - **Migrations** run under a session-level advisory lock, so replicas starting together
//!   apply each migration once; applied versions are recorded in `weft_schema_migrations`.
//!
//! Everything lives in the connection's current schema (set `search_path` with the URL's
//! `options` to put a store in its own schema); the notification channel is named after it.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions, PgRow};
use sqlx::{ConnectOptions, Connection, Executor, PgConnection, Row};
use tokio::task::JoinHandle;
use weft_core::History;
use weft_core::message::TimestampMs;
use weft_core::session::SessionStatus;
use weft_core::store::{
    Checkpoint, Commit, EventRecord, OwnerScope, SessionHead, SessionStore, StoreError,
    StoreFuture, StoredSession,
};

use crate::codec::{
    self, EncodedCommit, EncodedEvent, EncodedRun, LogWindow, Position, backend, column,
    column_u64, limit_i64, sql_error, to_i64,
};
use crate::hub::{self, Hub};
use crate::rows;

/// The schema, in order, with the version each one brings the database to (its position + 1).
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_sessions", include_str!("../migrations/postgres/0001_sessions.sql")),
    (
        "0002_events_by_reference",
        include_str!("../migrations/postgres/0002_events_by_reference.sql"),
    ),
];

/// The advisory lock migrations run under (`weft_mig` in ASCII).
const MIGRATION_LOCK: i64 = 0x7765_6674_5f6d_6967;

/// How a [`PostgresStore`] runs.
#[derive(Debug, Clone)]
pub struct PostgresOptions {
    /// Connections in the pool, the `LISTEN` connection included (at least 2).
    pub max_connections: u32,
    /// How long an operation waits for a free connection.
    pub acquire_timeout: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self { max_connections: 10, acquire_timeout: Duration::from_secs(10) }
    }
}

/// A session store in a Postgres database. Clones share one pool and one `LISTEN` connection.
#[derive(Clone)]
pub struct PostgresStore {
    inner: Arc<Inner>,
}

struct Inner {
    pool: PgPool,
    channel: String,
    hub: Arc<Hub>,
    listener: JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

fn pg(e: sqlx::Error) -> StoreError {
    sql_error("Postgres", e)
}

/// The SQLSTATE of a database error.
fn sqlstate(e: &sqlx::Error) -> Option<String> {
    match e {
        sqlx::Error::Database(d) => d.code().map(|c| c.into_owned()),
        _ => None,
    }
}

/// A foreign-key violation means the session was deleted under us.
fn missing_session(session_id: &str) -> impl Fn(sqlx::Error) -> StoreError + '_ {
    move |e| match sqlstate(&e).as_deref() {
        Some("23503") => StoreError::NotFound(session_id.to_owned()),
        _ => pg(e),
    }
}

impl PostgresStore {
    /// Connects with default options and applies the migrations the database lacks.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        Self::connect_with(url, PostgresOptions::default()).await
    }

    /// Connects with `options`. The URL is libpq's form (`postgres://user@host:port/db?…`);
    /// errors never repeat it.
    pub async fn connect_with(url: &str, options: PostgresOptions) -> Result<Self, StoreError> {
        let connect = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Invalid(format!("not a Postgres URL: {e}")))?
            .disable_statement_logging();
        let pool = PgPoolOptions::new()
            .max_connections(options.max_connections.max(2))
            .acquire_timeout(options.acquire_timeout)
            .connect_with(connect)
            .await
            .map_err(|e| backend("Postgres connect", e))?;
        migrate(&pool).await?;
        let schema: Option<String> = sqlx::query("SELECT current_schema() AS schema")
            .fetch_one(&pool)
            .await
            .map_err(pg)?
            .try_get("schema")
            .map_err(pg)?;
        let schema = schema.ok_or_else(|| {
            StoreError::backend("Postgres: no current schema (check search_path)")
        })?;
        let channel = channel_name(&schema);
        let mut listener = PgListener::connect_with(&pool).await.map_err(pg)?;
        listener.listen(&channel).await.map_err(pg)?;
        let hub = Arc::new(Hub::default());
        let task = tokio::spawn(listen_loop(listener, Arc::clone(&hub)));
        Ok(Self { inner: Arc::new(Inner { pool, channel, hub, listener: task }) })
    }

    /// The `LISTEN/NOTIFY` channel of this store's schema.
    pub fn channel(&self) -> &str {
        &self.inner.channel
    }

    async fn last_seq(&self, session_id: &str) -> Result<u64, StoreError> {
        let row = sqlx::query("SELECT last_seq FROM sessions WHERE id = $1")
            .bind(session_id)
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(pg)?
            .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))?;
        column_u64(&row, "last_seq", "sessions", session_id)
    }

    /// The messages the events among `rows` stored by reference name (one query, none when no
    /// event needs any). Messages are committed before the events that name them, so they are
    /// there, whatever was written since.
    async fn log_window(&self, session_id: &str, rows: &[PgRow]) -> Result<LogWindow, StoreError> {
        let Some((first, lo, hi)) = rows::needed_messages(rows, session_id)? else {
            return Ok(LogWindow::default());
        };
        let texts: Vec<String> = sqlx::query_scalar(
            "SELECT message FROM messages WHERE session_id = $1 AND idx >= $2 AND idx < $3 \
             ORDER BY idx",
        )
        .bind(session_id)
        .bind(lo)
        .bind(hi)
        .fetch_all(&self.inner.pool)
        .await
        .map_err(pg)?;
        Ok(LogWindow::new(first, texts))
    }

    async fn exists(&self, session_id: &str) -> Result<bool, StoreError> {
        Ok(sqlx::query("SELECT 1 FROM sessions WHERE id = $1")
            .bind(session_id)
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(pg)?
            .is_some())
    }

    async fn create_now(&self, head: SessionHead, messages: History) -> Result<(), StoreError> {
        codec::check_create(&head, &messages)?;
        let encoded = codec::encode_head(&head)?;
        let messages = codec::encode_messages(messages.shared())?;
        let mut tx = self.inner.pool.begin().await.map_err(pg)?;
        let inserted = sqlx::query(
            "INSERT INTO sessions (id, owner, status, head, version, message_count, \
             reserved_seq, last_seq, next_deadline, created_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, 0, 0, $7, $8, $9) ON CONFLICT (id) DO NOTHING",
        )
        .bind(&encoded.id)
        .bind(&encoded.owner)
        .bind(encoded.status)
        .bind(&encoded.json)
        .bind(encoded.version)
        .bind(encoded.message_count)
        .bind(encoded.next_deadline)
        .bind(encoded.created_at)
        .bind(encoded.updated_at)
        .execute(&mut *tx)
        .await
        .map_err(pg)?
        .rows_affected();
        if inserted == 0 {
            return Err(StoreError::AlreadyExists(head.id));
        }
        insert_messages(&mut tx, &encoded.id, 0, messages).await?;
        tx.commit().await.map_err(pg)
    }

    async fn commit_now(&self, commit: Commit) -> Result<(), StoreError> {
        let EncodedCommit { head, messages, run, events, shape } = codec::encode_commit(&commit)?;
        drop(commit);
        let id = shape.session_id.as_str();
        let mut tx = self.inner.pool.begin().await.map_err(pg)?;
        let at = position(&mut tx, id).await?;
        codec::check_commit(&at, &shape)?;
        let last = shape.last_seq.unwrap_or(at.last_seq);
        let last_i = to_i64(last, "seq")?;
        sqlx::query(
            "UPDATE sessions SET status = $2, head = $3, version = $4, message_count = $5, \
             next_deadline = $6, updated_at = $7, last_seq = $8, \
             reserved_seq = GREATEST(reserved_seq, $8) WHERE id = $1",
        )
        .bind(id)
        .bind(head.status)
        .bind(&head.json)
        .bind(head.version)
        .bind(head.message_count)
        .bind(head.next_deadline)
        .bind(head.updated_at)
        .bind(last_i)
        .execute(&mut *tx)
        .await
        .map_err(pg)?;
        insert_messages(&mut tx, id, at.message_count, messages).await?;
        match run {
            EncodedRun::Keep => {}
            EncodedRun::Set(json) => {
                sqlx::query(
                    "INSERT INTO runs (session_id, run) VALUES ($1, $2) \
                     ON CONFLICT (session_id) DO UPDATE SET run = EXCLUDED.run",
                )
                .bind(id)
                .bind(json)
                .execute(&mut *tx)
                .await
                .map_err(pg)?;
            }
            EncodedRun::Clear => {
                sqlx::query("DELETE FROM runs WHERE session_id = $1")
                    .bind(id)
                    .execute(&mut *tx)
                    .await
                    .map_err(pg)?;
            }
        }
        let appended = !events.is_empty();
        if appended {
            insert_events(&mut tx, id, events, shape.message_count).await?;
            notify(&mut tx, &self.inner.channel, id, last).await?;
        }
        tx.commit().await.map_err(pg)?;
        if appended {
            self.inner.hub.poke(id);
        }
        Ok(())
    }

    async fn append_now(
        &self,
        session_id: &str,
        events: Vec<Arc<EventRecord>>,
    ) -> Result<(), StoreError> {
        codec::check_event_order(session_id, &events)?;
        let first = events.first().map(|e| e.seq);
        let last = events.last().map_or(0, |e| e.seq);
        let encoded = codec::encode_events(&events)?;
        drop(events);
        let mut tx = self.inner.pool.begin().await.map_err(pg)?;
        let at = position(&mut tx, session_id).await?;
        codec::check_first_seq(session_id, at.last_seq, first)?;
        if encoded.is_empty() {
            return Ok(());
        }
        insert_events(&mut tx, session_id, encoded, at.message_count).await?;
        sqlx::query(
            "UPDATE sessions SET last_seq = $2, reserved_seq = GREATEST(reserved_seq, $2) \
             WHERE id = $1",
        )
        .bind(session_id)
        .bind(to_i64(last, "seq")?)
        .execute(&mut *tx)
        .await
        .map_err(pg)?;
        notify(&mut tx, &self.inner.channel, session_id, last).await?;
        tx.commit().await.map_err(pg)?;
        self.inner.hub.poke(session_id);
        Ok(())
    }

    async fn load_now(&self, session_id: &str) -> Result<Option<StoredSession>, StoreError> {
        let mut tx = self.inner.pool.begin().await.map_err(pg)?;
        tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            .await
            .map_err(pg)?;
        let Some(session) = sqlx::query(
            "SELECT head, message_count, last_seq, reserved_seq FROM sessions WHERE id = $1",
        )
        .bind(session_id)
        .fetch_optional(&mut *tx)
        .await
        .map_err(pg)?
        else {
            return Ok(None);
        };
        let messages =
            sqlx::query("SELECT idx, message FROM messages WHERE session_id = $1 ORDER BY idx")
                .bind(session_id)
                .fetch_all(&mut *tx)
                .await
                .map_err(pg)?;
        let run = sqlx::query("SELECT run FROM runs WHERE session_id = $1")
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(pg)?;
        tx.commit().await.map_err(pg)?;
        rows::stored_session(session_id, &session, &messages, run.as_ref()).map(Some)
    }

    async fn reserve_now(&self, session_id: &str, count: u64) -> Result<u64, StoreError> {
        if count == 0 {
            return Err(StoreError::Invalid(format!(
                "session {session_id}: reserving 0 sequence numbers"
            )));
        }
        let count_i = to_i64(count, "reservation size")?;
        let row = sqlx::query(
            "UPDATE sessions SET reserved_seq = GREATEST(reserved_seq, last_seq) + $2 \
             WHERE id = $1 RETURNING reserved_seq",
        )
        .bind(session_id)
        .bind(count_i)
        .fetch_optional(&self.inner.pool)
        .await
        .map_err(|e| match sqlstate(&e).as_deref() {
            Some("22003") => StoreError::Invalid(format!(
                "session {session_id}: reserving {count} sequence numbers overflows"
            )),
            _ => pg(e),
        })?
        .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))?;
        let end = column_u64(&row, "reserved_seq", "sessions", session_id)?;
        end.checked_sub(count)
            .map(|base| base + 1)
            .ok_or_else(|| codec::corrupt("sessions", session_id, "reserved_seq went below 0"))
    }

    async fn delete_now(
        &self,
        session_id: &str,
        scope: OwnerScope<'_>,
    ) -> Result<bool, StoreError> {
        let owner = match scope {
            OwnerScope::Any => None,
            OwnerScope::Owner(o) => Some(o),
        };
        let mut tx = self.inner.pool.begin().await.map_err(pg)?;
        // The session's row first (its lock is what every write of events takes), then its
        // events, which have no foreign key (migration 0002); the other tables cascade.
        let deleted =
            sqlx::query("DELETE FROM sessions WHERE id = $1 AND ($2::text IS NULL OR owner = $2)")
                .bind(session_id)
                .bind(owner)
                .execute(&mut *tx)
                .await
                .map_err(pg)?
                .rows_affected()
                > 0;
        if deleted {
            sqlx::query("DELETE FROM events WHERE session_id = $1")
                .bind(session_id)
                .execute(&mut *tx)
                .await
                .map_err(pg)?;
            notify(&mut tx, &self.inner.channel, session_id, 0).await?;
        }
        tx.commit().await.map_err(pg)?;
        if deleted {
            self.inner.hub.poke(session_id);
        }
        Ok(deleted)
    }
}

/// `weft_events_SCHEMA`, or a hash of the schema when that would pass Postgres's 63 bytes.
fn channel_name(schema: &str) -> String {
    let plain = format!("weft_events_{schema}");
    if plain.len() <= 63 {
        return plain;
    }
    // FNV-1a: stable across builds and platforms.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in schema.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("weft_events_{hash:016x}")
}

/// Applies the migrations the database lacks, under an advisory lock held by one connection.
async fn migrate(pool: &PgPool) -> Result<(), StoreError> {
    let fail = |e: sqlx::Error| backend("Postgres migration", e);
    let mut conn = pool.acquire().await.map_err(fail)?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *conn)
        .await
        .map_err(fail)?;
    let result = apply_migrations(&mut conn).await;
    let unlocked =
        sqlx::query("SELECT pg_advisory_unlock($1)").bind(MIGRATION_LOCK).execute(&mut *conn).await;
    if unlocked.is_err() {
        // Never hand a connection that may still hold the lock back to the pool: closing it
        // ends its session, which releases the lock.
        let _ = conn.detach().close().await;
    }
    result
}

async fn apply_migrations(conn: &mut PgConnection) -> Result<(), StoreError> {
    let fail = |e: sqlx::Error| backend("Postgres migration", e);
    conn.execute(
        "CREATE TABLE IF NOT EXISTS weft_schema_migrations (\
             version    INTEGER     NOT NULL PRIMARY KEY, \
             name       TEXT        NOT NULL, \
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    )
    .await
    .map_err(fail)?;
    let applied = sqlx::query("SELECT version, name FROM weft_schema_migrations ORDER BY version")
        .fetch_all(&mut *conn)
        .await
        .map_err(fail)?;
    for row in &applied {
        let version: i32 = row.try_get("version").map_err(fail)?;
        let name: String = row.try_get("name").map_err(fail)?;
        let known = usize::try_from(version - 1).ok().and_then(|i| MIGRATIONS.get(i));
        match known {
            Some((known, _)) if *known == name => {}
            Some((known, _)) => {
                return Err(StoreError::backend(format!(
                    "Postgres migration {version} is {name:?} in the database but {known:?} in \
                     this build"
                )));
            }
            None => {
                return Err(StoreError::backend(format!(
                    "the database has schema version {version} ({name}), newer than this build \
                     knows ({}): use a newer weft",
                    MIGRATIONS.len()
                )));
            }
        }
    }
    for (i, (name, sql)) in MIGRATIONS.iter().enumerate().skip(applied.len()) {
        let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
        let mut tx = conn.begin().await.map_err(fail)?;
        sqlx::raw_sql(sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| backend(format_args!("Postgres migration {name}"), e))?;
        sqlx::query("INSERT INTO weft_schema_migrations (version, name) VALUES ($1, $2)")
            .bind(version)
            .bind(*name)
            .execute(&mut *tx)
            .await
            .map_err(fail)?;
        tx.commit().await.map_err(fail)?;
    }
    Ok(())
}

/// Wakes the local waiters named by notifications; wakes them all after a lost connection.
async fn listen_loop(mut listener: PgListener, hub: Arc<Hub>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        match listener.try_recv().await {
            Ok(Some(notification)) => {
                backoff = Duration::from_millis(100);
                match notification.payload().split_once(':') {
                    Some((_, session_id)) => hub.poke(session_id),
                    None => hub.poke_all(),
                }
            }
            // The connection was lost and is back (sqlx reconnects before saying so): whatever
            // was notified meanwhile is lost, so everyone looks again.
            Ok(None) => hub.poke_all(),
            Err(error) => {
                tracing::warn!(%error, "Postgres store: LISTEN connection failed; reconnecting");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                // Reconnects and listens again (the channel list is kept); once it is back,
                // wake everyone to look again.
                if listener.listen_all(std::iter::empty::<&str>()).await.is_ok() {
                    hub.poke_all();
                }
            }
        }
    }
}

async fn position(tx: &mut PgConnection, session_id: &str) -> Result<Position, StoreError> {
    let row = sqlx::query(
        "SELECT version, message_count, last_seq, owner FROM sessions WHERE id = $1 FOR UPDATE",
    )
    .bind(session_id)
    .fetch_optional(&mut *tx)
    .await
    .map_err(pg)?
    .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))?;
    Ok(Position {
        version: column_u64(&row, "version", "sessions", session_id)?,
        message_count: column_u64(&row, "message_count", "sessions", session_id)?,
        last_seq: column_u64(&row, "last_seq", "sessions", session_id)?,
        owner: column(&row, "owner", "sessions", session_id)?,
    })
}

async fn insert_messages(
    tx: &mut PgConnection,
    session_id: &str,
    first: u64,
    messages: Vec<String>,
) -> Result<(), StoreError> {
    if messages.is_empty() {
        return Ok(());
    }
    let indexes = (0..messages.len() as u64)
        .map(|i| to_i64(first + i, "message index"))
        .collect::<Result<Vec<i64>, _>>()?;
    sqlx::query(
        "INSERT INTO messages (session_id, idx, message) \
         SELECT $1, idx, message FROM UNNEST($2::bigint[], $3::text[]) AS m (idx, message)",
    )
    .bind(session_id)
    .bind(indexes)
    .bind(messages)
    .execute(&mut *tx)
    .await
    .map_err(missing_session(session_id))?;
    Ok(())
}

async fn insert_events(
    tx: &mut PgConnection,
    session_id: &str,
    events: Vec<EncodedEvent>,
    message_count: u64,
) -> Result<(), StoreError> {
    let n = events.len();
    let (mut seqs, mut runs, mut nodes, mut ats, mut jsons, mut firsts, mut counts) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    for mut e in events {
        e.settle(message_count)?;
        seqs.push(e.seq);
        runs.push(e.run_id);
        nodes.push(e.node_id);
        ats.push(e.at);
        jsons.push(e.json);
        firsts.push(e.span.map(|(first, _)| first));
        counts.push(e.span.map(|(_, count)| count));
    }
    sqlx::query(
        "INSERT INTO events (session_id, seq, run_id, node_id, at, event, msg_first, msg_count) \
         SELECT $1, seq, run_id, node_id, at, event, msg_first, msg_count \
         FROM UNNEST($2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::text[], \
                     $7::bigint[], $8::bigint[]) \
         AS e (seq, run_id, node_id, at, event, msg_first, msg_count)",
    )
    .bind(session_id)
    .bind(seqs)
    .bind(runs)
    .bind(nodes)
    .bind(ats)
    .bind(jsons)
    .bind(firsts)
    .bind(counts)
    .execute(&mut *tx)
    .await
    .map_err(missing_session(session_id))?;
    Ok(())
}

/// Tells every listener, when the transaction commits, that the session changed.
async fn notify(
    tx: &mut PgConnection,
    channel: &str,
    session_id: &str,
    seq: u64,
) -> Result<(), StoreError> {
    // A payload must stay under 8000 bytes: an absurdly long id wakes everyone instead.
    let payload =
        if session_id.len() < 7000 { format!("{seq}:{session_id}") } else { seq.to_string() };
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(channel)
        .bind(payload)
        .execute(&mut *tx)
        .await
        .map_err(pg)?;
    Ok(())
}

impl SessionStore for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn create<'a>(&'a self, head: SessionHead, messages: History) -> StoreFuture<'a, ()> {
        Box::pin(self.create_now(head, messages))
    }

    fn load<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<StoredSession>> {
        Box::pin(self.load_now(session_id))
    }

    fn head<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<SessionHead>> {
        Box::pin(async move {
            let row = sqlx::query("SELECT head FROM sessions WHERE id = $1")
                .bind(session_id)
                .fetch_optional(&self.inner.pool)
                .await
                .map_err(pg)?;
            row.map(|row| rows::head(&row, session_id)).transpose()
        })
    }

    fn commit<'a>(&'a self, commit: Commit) -> StoreFuture<'a, ()> {
        Box::pin(self.commit_now(commit))
    }

    fn reserve_seqs<'a>(&'a self, session_id: &'a str, count: u64) -> StoreFuture<'a, u64> {
        Box::pin(self.reserve_now(session_id, count))
    }

    fn append_events<'a>(
        &'a self,
        session_id: &'a str,
        events: Vec<Arc<EventRecord>>,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.append_now(session_id, events))
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
                 WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
            )
            .bind(session_id)
            .bind(i64::try_from(after_seq).unwrap_or(i64::MAX))
            .bind(limit_i64(limit))
            .fetch_all(&self.inner.pool)
            .await
            .map_err(pg)?;
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
            let sid = checkpoint.session_id.as_str();
            sqlx::query(
                "INSERT INTO checkpoints (session_id, namespace, id, parent_id, at, value) \
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (session_id, namespace, id) \
                 DO UPDATE SET parent_id = EXCLUDED.parent_id, at = EXCLUDED.at, \
                 value = EXCLUDED.value",
            )
            .bind(sid)
            .bind(&checkpoint.namespace)
            .bind(&checkpoint.id)
            .bind(&checkpoint.parent_id)
            .bind(to_i64(checkpoint.at, "checkpoint time")?)
            .bind(value)
            .execute(&self.inner.pool)
            .await
            .map_err(missing_session(sid))?;
            Ok(())
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
                     WHERE session_id = $1 AND namespace = $2 AND id = $3",
                )
                .bind(session_id)
                .bind(namespace)
                .bind(id),
                None => sqlx::query(
                    "SELECT namespace, id, parent_id, at, value FROM checkpoints \
                     WHERE session_id = $1 AND namespace = $2 ORDER BY at DESC, ord DESC LIMIT 1",
                )
                .bind(session_id)
                .bind(namespace),
            };
            let row = query.fetch_optional(&self.inner.pool).await.map_err(pg)?;
            row.map(|row| rows::checkpoint(&row, session_id)).transpose()
        })
    }

    fn find_checkpoints<'a>(
        &'a self,
        namespace: &'a str,
        keys: &'a [(String, String)],
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        Box::pin(async move {
            if keys.is_empty() {
                return Ok(Vec::new());
            }
            let (sessions, ids): (Vec<&str>, Vec<&str>) =
                keys.iter().map(|(s, i)| (s.as_str(), i.as_str())).unzip();
            let rows = sqlx::query(
                "SELECT c.session_id, c.id FROM checkpoints c \
                 JOIN UNNEST($2::text[], $3::text[]) AS k(session_id, id) \
                 ON c.session_id = k.session_id AND c.id = k.id WHERE c.namespace = $1",
            )
            .bind(namespace)
            .bind(&sessions)
            .bind(&ids)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(pg)?;
            rows.iter()
                .map(|row| {
                    Ok((
                        row.try_get::<String, _>(0).map_err(pg)?,
                        row.try_get::<String, _>(1).map_err(pg)?,
                    ))
                })
                .collect()
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
                 WHERE session_id = $1 AND namespace = $2 ORDER BY at, ord",
            )
            .bind(session_id)
            .bind(namespace)
            .fetch_all(&self.inner.pool)
            .await
            .map_err(pg)?;
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
                    "SELECT id, head FROM sessions ORDER BY updated_at DESC, id LIMIT $1",
                )
                .bind(limit_i64(limit)),
                OwnerScope::Owner(owner) => sqlx::query(
                    "SELECT id, head FROM sessions WHERE owner = $1 \
                     ORDER BY updated_at DESC, id LIMIT $2",
                )
                .bind(owner)
                .bind(limit_i64(limit)),
            };
            let found = query.fetch_all(&self.inner.pool).await.map_err(pg)?;
            found.iter().map(rows::listed_head).collect()
        })
    }

    fn delete_session<'a>(
        &'a self,
        session_id: &'a str,
        scope: OwnerScope<'a>,
    ) -> StoreFuture<'a, bool> {
        Box::pin(self.delete_now(session_id, scope))
    }

    fn acquire_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let row = sqlx::query(
                "INSERT INTO leases (session_id, holder, expires_at) \
                 VALUES ($1, $2, now() + $3 * interval '1 millisecond') \
                 ON CONFLICT (session_id) DO UPDATE \
                 SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at \
                 WHERE leases.holder = EXCLUDED.holder OR leases.expires_at <= now() \
                 RETURNING holder",
            )
            .bind(session_id)
            .bind(holder)
            .bind(codec::ttl_ms(ttl))
            .fetch_optional(&self.inner.pool)
            .await
            .map_err(missing_session(session_id))?;
            Ok(row.is_some())
        })
    }

    fn renew_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let renewed = sqlx::query(
                "UPDATE leases SET expires_at = now() + $3 * interval '1 millisecond' \
                 WHERE session_id = $1 AND holder = $2",
            )
            .bind(session_id)
            .bind(holder)
            .bind(codec::ttl_ms(ttl))
            .execute(&self.inner.pool)
            .await
            .map_err(pg)?
            .rows_affected();
            if renewed == 0 && !self.exists(session_id).await? {
                return Err(StoreError::NotFound(session_id.to_owned()));
            }
            Ok(renewed > 0)
        })
    }

    fn release_lease<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            sqlx::query("DELETE FROM leases WHERE session_id = $1 AND holder = $2")
                .bind(session_id)
                .bind(holder)
                .execute(&self.inner.pool)
                .await
                .map_err(pg)?;
            Ok(())
        })
    }

    fn take_over_process_leases<'a>(
        &'a self,
        process: &'a str,
        heir: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let rows = sqlx::query(
                "UPDATE leases SET holder = $2, expires_at = now() + $3 * interval '1 millisecond' \
                 WHERE holder = $1 OR starts_with(holder, $1 || '/') \
                 RETURNING session_id",
            )
            .bind(process)
            .bind(heir)
            .bind(codec::ttl_ms(ttl))
            .fetch_all(&self.inner.pool)
            .await
            .map_err(pg)?;
            let mut taken = Vec::with_capacity(rows.len());
            for row in rows {
                let id: String = column(&row, "session_id", "leases", "")?;
                taken.push(id);
            }
            taken.sort();
            Ok(taken)
        })
    }

    fn due_sessions<'a>(&'a self, now: TimestampMs, limit: usize) -> StoreFuture<'a, Vec<String>> {
        Box::pin(async move {
            let found = sqlx::query(
                "SELECT id FROM sessions s WHERE \
                 (s.status = $1 AND NOT EXISTS (SELECT 1 FROM leases l \
                    WHERE l.session_id = s.id AND l.expires_at > now())) \
                 OR (s.status IN ($2, $3) AND s.next_deadline <= $4) \
                 ORDER BY id LIMIT $5",
            )
            .bind(SessionStatus::Running.as_str())
            .bind(SessionStatus::AwaitingToolExecution.as_str())
            .bind(SessionStatus::AwaitingApproval.as_str())
            .bind(i64::try_from(now).unwrap_or(i64::MAX))
            .bind(limit_i64(limit))
            .fetch_all(&self.inner.pool)
            .await
            .map_err(pg)?;
            found.iter().map(|row| column(row, "id", "sessions", "?")).collect()
        })
    }

    fn probe_write(&self) -> StoreFuture<'_, ()> {
        Box::pin(async move {
            // A session row no client can name, inserted and deleted in one transaction (no
            // other transaction ever sees it): the database writes (and syncs) its log, and
            // nothing is left.
            let id = codec::probe_id();
            let mut tx = self.inner.pool.begin().await.map_err(pg)?;
            sqlx::query(
                "INSERT INTO sessions (id, status, head, version, message_count, created_at, \
                 updated_at) VALUES ($1, 'idle', '{}', 0, 0, 0, 0)",
            )
            .bind(&id)
            .execute(&mut *tx)
            .await
            .map_err(pg)?;
            sqlx::query("DELETE FROM sessions WHERE id = $1")
                .bind(&id)
                .execute(&mut *tx)
                .await
                .map_err(pg)?;
            tx.commit().await.map_err(pg)
        })
    }
}
