//! Rows a write reads and adds inside its transaction: the session's position (locked), its
//! lease's fence, messages and events.

use sqlx::PgConnection;
use weft_core::store::StoreError;

use crate::codec::{self, EncodedEvent, Position, column, column_u64, to_i64};

use super::notify::notify_payload;
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

/// The rows of events, as `INSERT ... SELECT FROM UNNEST` binds them.
macro_rules! insert_events_sql {
    () => {
        "INSERT INTO events (session_id, seq, run_id, node_id, at, event, msg_first, msg_count) \
         SELECT $1, seq, run_id, node_id, at, event, msg_first, msg_count \
         FROM UNNEST($2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::text[], \
                     $7::bigint[], $8::bigint[]) \
         AS e (seq, run_id, node_id, at, event, msg_first, msg_count)"
    };
}

/// An append's rows, the session's new end and the notification, in one statement (one round
/// trip instead of three): `$9` the last seq, `$10` the channel, `$11` the payload.
const APPEND_EVENTS: &str = concat!(
    "WITH appended AS (",
    insert_events_sql!(),
    " RETURNING 1), \
     advanced AS (UPDATE sessions SET last_seq = $9, reserved_seq = GREATEST(reserved_seq, $9) \
                  WHERE id = $1 RETURNING 1) \
     SELECT pg_notify($10, $11)"
);

/// The columns of `events` (settled against the session's `message_count`), bound as `$2`–`$8`
/// after the session id.
fn bind_events<'q>(
    query: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    session_id: &'q str,
    events: Vec<EncodedEvent>,
    message_count: u64,
) -> Result<sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>, StoreError> {
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
    Ok(query
        .bind(session_id)
        .bind(seqs)
        .bind(runs)
        .bind(nodes)
        .bind(ats)
        .bind(jsons)
        .bind(firsts)
        .bind(counts))
}

pub(super) async fn insert_events(
    tx: &mut PgConnection,
    session_id: &str,
    events: Vec<EncodedEvent>,
    message_count: u64,
) -> Result<(), StoreError> {
    bind_events(sqlx::query(insert_events_sql!()), session_id, events, message_count)?
        .execute(&mut *tx)
        .await
        .map_err(missing_session(session_id))?;
    Ok(())
}

/// Appends `events` (the session's row locked, their first seq checked), moves the session's
/// end to `last` and notifies `channel`'s listeners at the commit: one statement.
pub(super) async fn append_events(
    tx: &mut PgConnection,
    session_id: &str,
    events: Vec<EncodedEvent>,
    message_count: u64,
    last: u64,
    channel: &str,
) -> Result<(), StoreError> {
    bind_events(sqlx::query(APPEND_EVENTS), session_id, events, message_count)?
        .bind(to_i64(last, "seq")?)
        .bind(channel)
        .bind(notify_payload(session_id, last))
        .execute(&mut *tx)
        .await
        .map_err(missing_session(session_id))?;
    Ok(())
}
