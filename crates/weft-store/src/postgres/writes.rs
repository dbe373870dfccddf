//! Rows a write reads and adds inside its transaction: the session's position (locked), its
//! lease's fence, messages and events.

use sqlx::PgConnection;
use weft_core::store::StoreError;

use crate::codec::{self, EncodedEvent, Position, column, column_u64, to_i64};

use super::{missing_session, pg};

pub(super) async fn position(
    tx: &mut PgConnection,
    session_id: &str,
) -> Result<Position, StoreError> {
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

/// The fence of a write made under a lease (`lease`: its holder): the session's lease row must
/// still be that holder's. The row is locked (`FOR SHARE`) until the write's transaction ends,
/// after the session's row (the order every writer locks them in): a take-over waits for it.
pub(super) async fn fence(
    tx: &mut PgConnection,
    session_id: &str,
    lease: Option<&str>,
) -> Result<(), StoreError> {
    if lease.is_none() {
        return Ok(());
    }
    let held: Option<String> =
        sqlx::query_scalar("SELECT holder FROM leases WHERE session_id = $1 FOR SHARE")
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await
            .map_err(pg)?;
    codec::check_lease(session_id, lease, held.as_deref())
}

pub(super) async fn insert_messages(
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

pub(super) async fn insert_events(
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
