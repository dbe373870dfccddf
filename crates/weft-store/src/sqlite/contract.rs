//! The contract: [`SessionStore`] for [`SqliteStore`].

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

use super::SqliteStore;
use super::apply::clock_ms;
use super::ops::{Done, Op};
use crate::codec::{self, column, limit_i64, to_i64};
use crate::hub;
use crate::rows;

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
        lease: Option<&'a str>,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            codec::check_event_order(session_id, &events)?;
            let op = Op::Append {
                session_id: session_id.to_owned(),
                first_seq: events.first().map(|e| e.seq),
                last_seq: events.last().map_or(0, |e| e.seq),
                events: codec::encode_events(&events)?,
                lease: lease.map(str::to_owned),
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
