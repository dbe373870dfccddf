//! What each write does inside the writer's transaction.

use sqlx::sqlite::SqliteConnection;
use weft_core::message::now_ms;
use weft_core::store::{Checkpoint, StoreError};

use super::ops::{Done, Op, OpResult, Wake};
use crate::codec::{
    self, EncodedCommit, EncodedEvent, EncodedHead, EncodedRun, Position, backend, column,
    column_u64, to_i64,
};

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

/// Applies one operation (inside its savepoint).
pub(super) async fn apply(conn: &mut SqliteConnection, op: Op) -> OpResult {
    match op {
        Op::Create { head, messages } => create(conn, head, messages).await,
        Op::Commit(encoded) => commit(conn, encoded).await,
        Op::Reserve { session_id, count } => reserve(conn, session_id, count).await,
        Op::Append { session_id, first_seq, last_seq, events, lease } => {
            append(conn, session_id, first_seq, last_seq, events, lease).await
        }
        Op::PutCheckpoint { checkpoint, value, at } => {
            put_checkpoint(conn, checkpoint, value, at).await
        }
        Op::Delete { session_id, owner } => delete(conn, session_id, owner).await,
        Op::Acquire { session_id, holder, ttl_ms } => {
            acquire(conn, session_id, holder, ttl_ms).await
        }
        Op::Renew { session_id, holder, ttl_ms } => renew(conn, session_id, holder, ttl_ms).await,
        Op::Release { session_id, holder } => release(conn, session_id, holder).await,
        Op::TakeOver { process, heir, ttl_ms } => take_over(conn, process, heir, ttl_ms).await,
        Op::Probe { id } => probe(conn, id).await,
    }
}

/// Creates a session: its row and its first messages; a taken id is `AlreadyExists`.
async fn create(conn: &mut SqliteConnection, head: EncodedHead, messages: Vec<String>) -> OpResult {
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

/// Checks a commit against the stored position, then writes head, messages, run and events.
async fn commit(conn: &mut SqliteConnection, commit: Box<EncodedCommit>) -> OpResult {
    let EncodedCommit { head, messages, run, mut events, shape } = *commit;
    let id = &shape.session_id;
    let at = position(conn, id).await?;
    if shape.lease.is_some() {
        // One writer: nothing takes the lease between this look and the writes below.
        let held = lease_holder(conn, id).await?;
        codec::check_lease(id, shape.lease.as_deref(), held.as_deref())?;
    }
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
    write_run(conn, id, run).await?;
    insert_events(conn, id, &mut events, shape.message_count).await?;
    let wake = (!events.is_empty()).then(|| Wake(id.clone()));
    Ok((Done::Unit, wake))
}

/// The holder of the session's lease row (expired or not), if there is one.
async fn lease_holder(
    conn: &mut SqliteConnection,
    session_id: &str,
) -> Result<Option<String>, StoreError> {
    sqlx::query_scalar("SELECT holder FROM leases WHERE session_id = ?")
        .bind(session_id)
        .fetch_optional(&mut *conn)
        .await
        .map_err(sql)
}

/// Stores a commit's run change: keeps, replaces or deletes the session's run row.
async fn write_run(
    conn: &mut SqliteConnection,
    id: &str,
    run: EncodedRun,
) -> Result<(), StoreError> {
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
    Ok(())
}

/// Reserves `count` seqs above every stored and reserved one; answers the first.
async fn reserve(conn: &mut SqliteConnection, session_id: String, count: u64) -> OpResult {
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

/// Appends events above the last stored seq.
async fn append(
    conn: &mut SqliteConnection,
    session_id: String,
    first_seq: Option<u64>,
    last_seq: u64,
    mut events: Vec<EncodedEvent>,
    lease: Option<String>,
) -> OpResult {
    let at = position(conn, &session_id).await?;
    if lease.is_some() {
        let held = lease_holder(conn, &session_id).await?;
        codec::check_lease(&session_id, lease.as_deref(), held.as_deref())?;
    }
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

/// Stores a checkpoint, replacing one with the same id in place.
async fn put_checkpoint(
    conn: &mut SqliteConnection,
    checkpoint: Checkpoint,
    value: String,
    at: i64,
) -> OpResult {
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

/// Deletes a session and everything it has, if `owner` (when given) owns it.
async fn delete(
    conn: &mut SqliteConnection,
    session_id: String,
    owner: Option<String>,
) -> OpResult {
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

/// Takes the lease unless another holder has it and it has not expired.
async fn acquire(
    conn: &mut SqliteConnection,
    session_id: String,
    holder: String,
    ttl_ms: i64,
) -> OpResult {
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

/// Extends the lease if `holder` still has it.
async fn renew(
    conn: &mut SqliteConnection,
    session_id: String,
    holder: String,
    ttl_ms: i64,
) -> OpResult {
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

/// Drops the lease if `holder` has it.
async fn release(conn: &mut SqliteConnection, session_id: String, holder: String) -> OpResult {
    sqlx::query("DELETE FROM leases WHERE session_id = ? AND holder = ?")
        .bind(&session_id)
        .bind(&holder)
        .execute(&mut *conn)
        .await
        .map_err(sql)?;
    Ok((Done::Unit, None))
}

/// Gives every lease held for `process` (or its runs) to `heir`; answers their sessions, sorted.
async fn take_over(
    conn: &mut SqliteConnection,
    process: String,
    heir: String,
    ttl_ms: i64,
) -> OpResult {
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

/// Writes and deletes a row, so that the commit must write.
async fn probe(conn: &mut SqliteConnection, id: String) -> OpResult {
    // A lease row no session can have, written and deleted: the page changes, so the
    // commit writes (and syncs) the log, and nothing is left.
    sqlx::query("INSERT INTO leases (session_id, holder, expires_at) VALUES (?, 'probe', 0)")
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

/// The machine's clock, for leases (every process sharing a file is on one machine).
pub(super) fn clock_ms() -> Result<i64, StoreError> {
    to_i64(now_ms(), "clock")
}
