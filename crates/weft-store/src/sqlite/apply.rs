//! What each write does inside the writer's transaction: plain SQLite calls on the writer's own
//! thread (see `writer`), each statement prepared once and cached by the connection.

use rusqlite::{Connection, OptionalExtension, params};
use weft_core::message::now_ms;
use weft_core::store::{Checkpoint, StoreError};

use super::ops::{Done, Op, OpResult, Wake};
use crate::codec::{
    self, EncodedCommit, EncodedEvent, EncodedHead, EncodedRun, Position, backend, to_i64, to_u64,
};

pub(super) fn sql(e: rusqlite::Error) -> StoreError {
    backend("SQLite write", e)
}

/// A stored count or seq of a session row; negative means the row is corrupt.
fn stored_u64(value: i64, column: &str, session_id: &str) -> Result<u64, StoreError> {
    to_u64(value, "sessions", session_id, column)
}

fn position(conn: &Connection, session_id: &str) -> Result<Position, StoreError> {
    let row = conn
        .prepare_cached(
            "SELECT version, message_count, last_seq, owner FROM sessions WHERE id = ?1",
        )
        .and_then(|mut s| {
            s.query_row([session_id], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, i64>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, Option<String>>(3)?,
                ))
            })
            .optional()
        })
        .map_err(sql)?
        .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))?;
    Ok(Position {
        version: stored_u64(row.0, "version", session_id)?,
        message_count: stored_u64(row.1, "message_count", session_id)?,
        last_seq: stored_u64(row.2, "last_seq", session_id)?,
        owner: row.3,
    })
}

fn insert_messages(
    conn: &Connection,
    session_id: &str,
    first: u64,
    messages: &[String],
) -> Result<(), StoreError> {
    let mut insert = conn
        .prepare_cached("INSERT INTO messages (session_id, idx, message) VALUES (?1, ?2, ?3)")
        .map_err(sql)?;
    for (i, message) in messages.iter().enumerate() {
        let idx = to_i64(first + i as u64, "message index")?;
        insert.execute(params![session_id, idx, message]).map_err(sql)?;
    }
    Ok(())
}

fn insert_events(
    conn: &Connection,
    session_id: &str,
    events: &mut [EncodedEvent],
    message_count: u64,
) -> Result<(), StoreError> {
    for e in events.iter_mut() {
        e.settle(message_count)?;
    }
    // One prepared statement run per row: a direct call on this thread, no round trip.
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO events (session_id, seq, run_id, node_id, at, event, msg_first, \
             msg_count) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .map_err(sql)?;
    for e in events.iter() {
        insert
            .execute(params![
                session_id,
                e.seq,
                e.run_id,
                e.node_id,
                e.at,
                e.json,
                e.span.map(|(first, _)| first),
                e.span.map(|(_, count)| count),
            ])
            .map_err(sql)?;
    }
    Ok(())
}

fn session_exists(conn: &Connection, session_id: &str) -> Result<(), StoreError> {
    conn.prepare_cached("SELECT 1 FROM sessions WHERE id = ?1")
        .and_then(|mut s| s.query_row([session_id], |_| Ok(())).optional())
        .map_err(sql)?
        .ok_or_else(|| StoreError::NotFound(session_id.to_owned()))
}

/// Applies one operation (inside its savepoint).
pub(super) fn apply(conn: &Connection, op: Op) -> OpResult {
    match op {
        Op::Create { head, messages } => create(conn, head, messages),
        Op::Commit(encoded) => commit(conn, encoded),
        Op::Reserve { session_id, count } => reserve(conn, session_id, count),
        Op::Append { session_id, first_seq, last_seq, events, lease } => {
            append(conn, session_id, first_seq, last_seq, events, lease)
        }
        Op::PutCheckpoint { checkpoint, value, at } => put_checkpoint(conn, checkpoint, value, at),
        Op::Delete { session_id, owner } => delete(conn, session_id, owner),
        Op::Acquire { session_id, holder, ttl_ms } => acquire(conn, session_id, holder, ttl_ms),
        Op::Renew { session_id, holder, ttl_ms } => renew(conn, session_id, holder, ttl_ms),
        Op::Release { session_id, holder } => release(conn, session_id, holder),
        Op::TakeOver { process, heir, ttl_ms } => take_over(conn, process, heir, ttl_ms),
        Op::Probe { id } => probe(conn, id),
    }
}

/// Creates a session: its row and its first messages; a taken id is `AlreadyExists`.
fn create(conn: &Connection, head: EncodedHead, messages: Vec<String>) -> OpResult {
    let inserted = conn
        .prepare_cached(
            "INSERT INTO sessions (id, owner, status, head, version, message_count, \
             reserved_seq, last_seq, next_deadline, created_at, updated_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 0, 0, ?7, ?8, ?9) ON CONFLICT (id) DO NOTHING",
        )
        .and_then(|mut s| {
            s.execute(params![
                head.id,
                head.owner,
                head.status,
                head.json,
                head.version,
                head.message_count,
                head.next_deadline,
                head.created_at,
                head.updated_at,
            ])
        })
        .map_err(sql)?;
    if inserted == 0 {
        return Err(StoreError::AlreadyExists(head.id));
    }
    insert_messages(conn, &head.id, 0, &messages)?;
    Ok((Done::Unit, None))
}

/// Checks a commit against the stored position, then writes head, messages, run and events.
fn commit(conn: &Connection, commit: Box<EncodedCommit>) -> OpResult {
    let EncodedCommit { head, messages, run, mut events, shape } = *commit;
    let id = &shape.session_id;
    let at = position(conn, id)?;
    if shape.lease.is_some() {
        // One writer: nothing takes the lease between this look and the writes below.
        let held = lease_holder(conn, id)?;
        codec::check_lease(id, shape.lease.as_deref(), held.as_deref())?;
    }
    codec::check_commit(&at, &shape)?;
    let last = shape.last_seq.unwrap_or(at.last_seq);
    let last_i = to_i64(last, "seq")?;
    conn.prepare_cached(
        "UPDATE sessions SET status = ?1, head = ?2, version = ?3, message_count = ?4, \
         next_deadline = ?5, updated_at = ?6, last_seq = ?7, \
         reserved_seq = max(reserved_seq, ?7) WHERE id = ?8",
    )
    .and_then(|mut s| {
        s.execute(params![
            head.status,
            head.json,
            head.version,
            head.message_count,
            head.next_deadline,
            head.updated_at,
            last_i,
            id,
        ])
    })
    .map_err(sql)?;
    insert_messages(conn, id, at.message_count, &messages)?;
    write_run(conn, id, run)?;
    insert_events(conn, id, &mut events, shape.message_count)?;
    let wake = (!events.is_empty()).then(|| Wake(id.clone()));
    Ok((Done::Unit, wake))
}

/// The holder of the session's lease row (expired or not), if there is one.
fn lease_holder(conn: &Connection, session_id: &str) -> Result<Option<String>, StoreError> {
    conn.prepare_cached("SELECT holder FROM leases WHERE session_id = ?1")
        .and_then(|mut s| s.query_row([session_id], |r| r.get(0)).optional())
        .map_err(sql)
}

/// Stores a commit's run change: keeps, replaces or deletes the session's run row.
fn write_run(conn: &Connection, id: &str, run: EncodedRun) -> Result<(), StoreError> {
    let written = match run {
        EncodedRun::Keep => return Ok(()),
        EncodedRun::Set(json) => conn
            .prepare_cached(
                "INSERT INTO runs (session_id, run) VALUES (?1, ?2) \
                 ON CONFLICT (session_id) DO UPDATE SET run = excluded.run",
            )
            .and_then(|mut s| s.execute(params![id, json])),
        EncodedRun::Clear => conn
            .prepare_cached("DELETE FROM runs WHERE session_id = ?1")
            .and_then(|mut s| s.execute([id])),
    };
    written.map(drop).map_err(sql)
}

/// Reserves `count` seqs above every stored and reserved one; answers the first.
fn reserve(conn: &Connection, session_id: String, count: u64) -> OpResult {
    let (reserved, last) = conn
        .prepare_cached("SELECT reserved_seq, last_seq FROM sessions WHERE id = ?1")
        .and_then(|mut s| {
            s.query_row([&session_id], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, i64>(1)?)))
                .optional()
        })
        .map_err(sql)?
        .ok_or_else(|| StoreError::NotFound(session_id.clone()))?;
    let reserved = stored_u64(reserved, "reserved_seq", &session_id)?;
    let last = stored_u64(last, "last_seq", &session_id)?;
    let (first, end) = codec::reservation(&session_id, reserved, last, count)?;
    let end = to_i64(end, "seq")?;
    conn.prepare_cached("UPDATE sessions SET reserved_seq = ?1 WHERE id = ?2")
        .and_then(|mut s| s.execute(params![end, session_id]))
        .map_err(sql)?;
    Ok((Done::Seq(first), None))
}

/// Appends events above the last stored seq.
fn append(
    conn: &Connection,
    session_id: String,
    first_seq: Option<u64>,
    last_seq: u64,
    mut events: Vec<EncodedEvent>,
    lease: Option<String>,
) -> OpResult {
    let at = position(conn, &session_id)?;
    if lease.is_some() {
        let held = lease_holder(conn, &session_id)?;
        codec::check_lease(&session_id, lease.as_deref(), held.as_deref())?;
    }
    codec::check_first_seq(&session_id, at.last_seq, first_seq)?;
    if events.is_empty() {
        return Ok((Done::Unit, None));
    }
    insert_events(conn, &session_id, &mut events, at.message_count)?;
    let last = to_i64(last_seq, "seq")?;
    conn.prepare_cached(
        "UPDATE sessions SET last_seq = ?1, reserved_seq = max(reserved_seq, ?1) WHERE id = ?2",
    )
    .and_then(|mut s| s.execute(params![last, session_id]))
    .map_err(sql)?;
    Ok((Done::Unit, Some(Wake(session_id))))
}

/// Stores a checkpoint, replacing one with the same id in place.
fn put_checkpoint(conn: &Connection, checkpoint: Checkpoint, value: String, at: i64) -> OpResult {
    session_exists(conn, &checkpoint.session_id)?;
    conn.prepare_cached(
        "INSERT INTO checkpoints (session_id, namespace, id, parent_id, at, value) \
         VALUES (?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT (session_id, namespace, id) DO UPDATE \
         SET parent_id = excluded.parent_id, at = excluded.at, value = excluded.value",
    )
    .and_then(|mut s| {
        s.execute(params![
            checkpoint.session_id,
            checkpoint.namespace,
            checkpoint.id,
            checkpoint.parent_id,
            at,
            value,
        ])
    })
    .map_err(sql)?;
    Ok((Done::Unit, None))
}

/// Deletes a session and everything it has, if `owner` (when given) owns it.
fn delete(conn: &Connection, session_id: String, owner: Option<String>) -> OpResult {
    let stored = conn
        .prepare_cached("SELECT owner FROM sessions WHERE id = ?1")
        .and_then(|mut s| s.query_row([&session_id], |r| r.get::<_, Option<String>>(0)).optional())
        .map_err(sql)?;
    let Some(stored) = stored else {
        return Ok((Done::Flag(false), None));
    };
    if owner.is_some() && stored != owner {
        return Ok((Done::Flag(false), None));
    }
    for table in ["events", "messages", "runs", "checkpoints", "leases"] {
        conn.prepare_cached(&format!("DELETE FROM {table} WHERE session_id = ?1"))
            .and_then(|mut s| s.execute([&session_id]))
            .map_err(sql)?;
    }
    conn.prepare_cached("DELETE FROM sessions WHERE id = ?1")
        .and_then(|mut s| s.execute([&session_id]))
        .map_err(sql)?;
    Ok((Done::Flag(true), Some(Wake(session_id))))
}

/// Takes the lease unless another holder has it and it has not expired.
fn acquire(conn: &Connection, session_id: String, holder: String, ttl_ms: i64) -> OpResult {
    session_exists(conn, &session_id)?;
    let now = clock_ms()?;
    let current = conn
        .prepare_cached("SELECT holder, expires_at FROM leases WHERE session_id = ?1")
        .and_then(|mut s| {
            s.query_row([&session_id], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                .optional()
        })
        .map_err(sql)?;
    if let Some((other, expires)) = current
        && other != holder
        && expires > now
    {
        return Ok((Done::Flag(false), None));
    }
    conn.prepare_cached(
        "INSERT INTO leases (session_id, holder, expires_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (session_id) DO UPDATE \
         SET holder = excluded.holder, expires_at = excluded.expires_at",
    )
    .and_then(|mut s| s.execute(params![session_id, holder, now.saturating_add(ttl_ms)]))
    .map_err(sql)?;
    Ok((Done::Flag(true), None))
}

/// Extends the lease if `holder` still has it.
fn renew(conn: &Connection, session_id: String, holder: String, ttl_ms: i64) -> OpResult {
    session_exists(conn, &session_id)?;
    let now = clock_ms()?;
    let renewed = conn
        .prepare_cached("UPDATE leases SET expires_at = ?1 WHERE session_id = ?2 AND holder = ?3")
        .and_then(|mut s| s.execute(params![now.saturating_add(ttl_ms), session_id, holder]))
        .map_err(sql)?;
    Ok((Done::Flag(renewed == 1), None))
}

/// Drops the lease if `holder` has it.
fn release(conn: &Connection, session_id: String, holder: String) -> OpResult {
    conn.prepare_cached("DELETE FROM leases WHERE session_id = ?1 AND holder = ?2")
        .and_then(|mut s| s.execute(params![session_id, holder]))
        .map_err(sql)?;
    Ok((Done::Unit, None))
}

/// Gives every lease held for `process` (or its runs) to `heir`; answers their sessions, sorted.
fn take_over(conn: &Connection, process: String, heir: String, ttl_ms: i64) -> OpResult {
    // `substr` counts characters as `length` does: the holder's first characters are
    // the process's name and a slash.
    let expires = clock_ms()?.saturating_add(ttl_ms);
    let mut taken: Vec<String> = conn
        .prepare_cached(
            "UPDATE leases SET holder = ?2, expires_at = ?3 \
             WHERE holder = ?1 OR substr(holder, 1, length(?1) + 1) = ?1 || '/' \
             RETURNING session_id",
        )
        .and_then(|mut s| s.query_map(params![process, heir, expires], |r| r.get(0))?.collect())
        .map_err(sql)?;
    taken.sort();
    Ok((Done::Ids(taken), None))
}

/// Writes and deletes a row, so that the commit must write.
fn probe(conn: &Connection, id: String) -> OpResult {
    // A lease row no session can have, written and deleted: the page changes, so the
    // commit writes (and syncs) the log, and nothing is left.
    conn.prepare_cached(
        "INSERT INTO leases (session_id, holder, expires_at) VALUES (?1, 'probe', 0)",
    )
    .and_then(|mut s| s.execute([&id]))
    .map_err(sql)?;
    conn.prepare_cached("DELETE FROM leases WHERE session_id = ?1")
        .and_then(|mut s| s.execute([&id]))
        .map_err(sql)?;
    Ok((Done::Unit, None))
}

/// The machine's clock, for leases (every process sharing a file is on one machine).
pub(super) fn clock_ms() -> Result<i64, StoreError> {
    to_i64(now_ms(), "clock")
}
