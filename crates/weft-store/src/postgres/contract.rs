//! The contract: [`SessionStore`] for [`PostgresStore`].

use std::sync::Arc;
use std::time::Duration;

use sqlx::Row;
use weft_core::History;
use weft_core::message::TimestampMs;
use weft_core::session::SessionStatus;
use weft_core::store::{
    Checkpoint, Commit, EventRecord, OwnerScope, SessionHead, SessionStore, StoreError,
    StoreFuture, StoredSession,
};

use crate::codec::{self, column, limit_i64, to_i64};
use crate::hub;
use crate::rows;

use super::{PostgresStore, missing_session, pg};

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
        lease: Option<&'a str>,
    ) -> StoreFuture<'a, ()> {
        Box::pin(self.append_now(session_id, events, lease))
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
