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
use sqlx::{ConnectOptions, Executor, Row};
use tokio::task::JoinHandle;
use weft_core::History;
use weft_core::store::{Commit, EventRecord, OwnerScope, SessionHead, StoreError, StoredSession};

use crate::codec::{
    self, EncodedCommit, EncodedRun, LogWindow, backend, column_u64, sql_error, to_i64,
};
use crate::hub::Hub;
use crate::rows;

mod contract;
mod notify;
mod schema;
mod writes;

use notify::{channel_name, listen_loop, notify};
use schema::migrate;
use writes::{append_events, fence, insert_events, insert_messages, position};

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
        // The session row first, then the lease row: the order every writer locks them in.
        let at = position(&mut tx, id).await?;
        // The lease row stays locked until the commit ends: a take-over waits for it, and then
        // finds the session as this commit left it.
        fence(&mut tx, id, shape.lease.as_deref()).await?;
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
        lease: Option<&str>,
    ) -> Result<(), StoreError> {
        codec::check_event_order(session_id, &events)?;
        let first = events.first().map(|e| e.seq);
        let last = events.last().map_or(0, |e| e.seq);
        let encoded = codec::encode_events(&events)?;
        drop(events);
        let mut tx = self.inner.pool.begin().await.map_err(pg)?;
        let at = position(&mut tx, session_id).await?;
        fence(&mut tx, session_id, lease).await?;
        codec::check_first_seq(session_id, at.last_seq, first)?;
        if encoded.is_empty() {
            return Ok(());
        }
        append_events(&mut tx, session_id, encoded, at.message_count, last, &self.inner.channel)
            .await?;
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
