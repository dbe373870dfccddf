//! What every backend shares: validation of commits and events against the stored positions,
//! JSON encoding, and the conversions between `u64` and the databases' signed integers.

use std::fmt::Display;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use weft_core::History;
use weft_core::event::AgentEvent;
use weft_core::message::Message;
use weft_core::store::{
    Checkpoint, Commit, EventRecord, MessageSpan, RunChange, SessionHead, StoreError,
};

/// A failure of the backend itself: `what` failed with `error`, kept as the
/// [`StoreError::Backend`]'s source (its text is in the message too, as before).
pub(crate) fn backend(
    what: impl Display,
    error: impl std::error::Error + Send + Sync + 'static,
) -> StoreError {
    StoreError::backend_caused_by(format!("{what}: {error}"), error)
}

/// A failure of a database call: [`StoreError::Closed`] when the pool was closed or SQLite's
/// worker thread is gone (nothing will ever answer through it again), a [`backend`] failure
/// otherwise.
pub(crate) fn sql_error(what: impl Display, error: sqlx::Error) -> StoreError {
    match error {
        sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed => {
            StoreError::Closed(format!("{what}: {error}"))
        }
        other => backend(what, other),
    }
}

/// Whether a lease's `holder` is held for `process`: the process itself, or one of its runs
/// (`process/run`).
pub(crate) fn held_for(holder: &str, process: &str) -> bool {
    holder.strip_prefix(process).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// A row that cannot be read back: names the table and the session.
pub(crate) fn corrupt(table: &str, session_id: &str, detail: impl Display) -> StoreError {
    StoreError::backend(corrupt_text(table, session_id, detail))
}

/// A row that cannot be read back because decoding it failed with `error` (kept as the source).
pub(crate) fn corrupt_by(
    table: &str,
    session_id: &str,
    error: impl std::error::Error + Send + Sync + 'static,
) -> StoreError {
    StoreError::backend_caused_by(corrupt_text(table, session_id, &error), error)
}

fn corrupt_text(table: &str, session_id: &str, detail: impl Display) -> String {
    format!("corrupt row in table {table} for session {session_id}: {detail}")
}

/// A `u64` as the databases store it; above `i64::MAX` is refused.
pub(crate) fn to_i64(value: u64, what: &str) -> Result<i64, StoreError> {
    i64::try_from(value)
        .map_err(|_| StoreError::Invalid(format!("{what} {value} is above the largest storable")))
}

/// A stored integer back as `u64`; negative means the row is corrupt.
pub(crate) fn to_u64(
    value: i64,
    table: &str,
    session_id: &str,
    column: &str,
) -> Result<u64, StoreError> {
    u64::try_from(value)
        .map_err(|_| corrupt(table, session_id, format!("{column} is negative ({value})")))
}

/// A limit as SQL takes it.
pub(crate) fn limit_i64(limit: usize) -> i64 {
    i64::try_from(limit).unwrap_or(i64::MAX)
}

/// JSON text of a value handed to the store.
pub(crate) fn encode<T: Serialize>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|e| StoreError::Invalid(format!("{what} cannot be serialized: {e}")))
}

/// A value back from its stored JSON text.
pub(crate) fn decode<T: DeserializeOwned>(
    text: &str,
    table: &str,
    session_id: &str,
) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| corrupt_by(table, session_id, e))
}

/// Checks a new session before anything is written.
pub(crate) fn check_create(head: &SessionHead, messages: &History) -> Result<(), StoreError> {
    if head.id.is_empty() {
        return Err(StoreError::Invalid("a session id cannot be empty".into()));
    }
    if head.version != 0 {
        return Err(StoreError::Invalid(format!(
            "a new session has version 0, not {} (session {})",
            head.version, head.id
        )));
    }
    if head.message_count != messages.len() as u64 {
        return Err(StoreError::Invalid(format!(
            "session {}: message_count {} but {} messages given",
            head.id,
            head.message_count,
            messages.len()
        )));
    }
    check_head_numbers(head)
}

/// Every number of a head fits the databases' integers.
fn check_head_numbers(head: &SessionHead) -> Result<(), StoreError> {
    to_i64(head.version, "version")?;
    to_i64(head.message_count, "message_count")?;
    to_i64(head.created_at, "created_at")?;
    to_i64(head.updated_at, "updated_at")?;
    if let Some(d) = head.next_deadline {
        to_i64(d, "next_deadline")?;
    }
    Ok(())
}

/// The checks a commit must pass whatever is stored: its head's version, its events' order.
pub(crate) fn precheck_commit(commit: &Commit) -> Result<(), StoreError> {
    let id = &commit.head.id;
    if commit.head.version != commit.expected_version.wrapping_add(1) {
        return Err(StoreError::Invalid(format!(
            "session {id}: a commit made against version {} must carry version {}, not {}",
            commit.expected_version,
            commit.expected_version.wrapping_add(1),
            commit.head.version
        )));
    }
    check_head_numbers(&commit.head)?;
    check_event_order(id, &commit.events)
}

/// What the store holds of a session that a commit or an append is checked against.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Position {
    pub(crate) version: u64,
    pub(crate) message_count: u64,
    pub(crate) last_seq: u64,
    pub(crate) owner: Option<String>,
}

/// What the checks against the store need of a commit.
#[derive(Debug, Clone)]
pub(crate) struct CommitShape {
    pub(crate) session_id: String,
    pub(crate) expected_version: u64,
    pub(crate) message_count: u64,
    pub(crate) owner: Option<String>,
    pub(crate) new_messages: u64,
    pub(crate) first_seq: Option<u64>,
    pub(crate) last_seq: Option<u64>,
    /// The lease holder the commit is made under, if any (its fencing token).
    pub(crate) lease: Option<String>,
}

impl CommitShape {
    /// The shape of `commit`.
    pub(crate) fn of(commit: &Commit) -> Self {
        Self {
            session_id: commit.head.id.clone(),
            expected_version: commit.expected_version,
            message_count: commit.head.message_count,
            owner: commit.head.owner.clone(),
            new_messages: commit.messages.len() as u64,
            first_seq: commit.events.first().map(|e| e.seq),
            last_seq: commit.events.last().map(|e| e.seq),
            lease: commit.lease.clone(),
        }
    }
}

/// The checks of a commit against what is stored: conflict first, then consistency.
pub(crate) fn check_commit(position: &Position, shape: &CommitShape) -> Result<(), StoreError> {
    let id = &shape.session_id;
    if position.version != shape.expected_version {
        return Err(StoreError::Conflict {
            session_id: id.clone(),
            expected: shape.expected_version,
            found: position.version,
        });
    }
    let wanted = position.message_count.saturating_add(shape.new_messages);
    if shape.message_count != wanted {
        return Err(StoreError::Invalid(format!(
            "session {id}: the head says {} messages, but {} stored plus {} appended make {wanted}",
            shape.message_count, position.message_count, shape.new_messages
        )));
    }
    if shape.owner != position.owner {
        return Err(StoreError::Invalid(format!(
            "session {id}: the owner is fixed at creation and cannot change"
        )));
    }
    check_first_seq(id, position.last_seq, shape.first_seq)
}

/// The fence of a write made under a lease ([`Commit::lease`], the `lease` of an append): the
/// session's lease must still be that holder's (`held`: the holder of the session's lease row,
/// expired or not, if any).
pub(crate) fn check_lease(
    session_id: &str,
    lease: Option<&str>,
    held: Option<&str>,
) -> Result<(), StoreError> {
    match lease {
        Some(holder) if held != Some(holder) => Err(StoreError::LeaseLost {
            session_id: session_id.to_owned(),
            holder: holder.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Events are of `session_id`, in strictly increasing seq order, each storable.
pub(crate) fn check_event_order(
    session_id: &str,
    events: &[Arc<EventRecord>],
) -> Result<(), StoreError> {
    let mut previous: Option<u64> = None;
    for event in events {
        // The hub hands over its own id: the same string, most often, not just an equal one.
        let same = std::ptr::eq(event.session_id.as_ptr(), session_id.as_ptr())
            && event.session_id.len() == session_id.len();
        if !same && &*event.session_id != session_id {
            return Err(StoreError::Invalid(format!(
                "an event of session {} given for session {session_id}",
                event.session_id
            )));
        }
        if event.seq == 0 {
            return Err(StoreError::Invalid(format!("session {session_id}: seq 0 is not a seq")));
        }
        if let Some(p) = previous
            && event.seq <= p
        {
            return Err(StoreError::Invalid(format!(
                "session {session_id}: events out of order (seq {} after {p})",
                event.seq
            )));
        }
        to_i64(event.seq, "seq")?;
        to_i64(event.at, "event time")?;
        previous = Some(event.seq);
    }
    Ok(())
}

/// The first new event (if any) is above the last stored seq (the order among the new ones is
/// checked already).
pub(crate) fn check_first_seq(
    session_id: &str,
    last_seq: u64,
    first_seq: Option<u64>,
) -> Result<(), StoreError> {
    match first_seq {
        Some(first) if first <= last_seq => Err(StoreError::Invalid(format!(
            "session {session_id}: event seq {first} is not above the last stored seq {last_seq}"
        ))),
        _ => Ok(()),
    }
}

/// Where a reservation of `count` numbers starts, and the new `reserved_seq`.
pub(crate) fn reservation(
    session_id: &str,
    reserved_seq: u64,
    last_seq: u64,
    count: u64,
) -> Result<(u64, u64), StoreError> {
    if count == 0 {
        return Err(StoreError::Invalid(format!(
            "session {session_id}: reserving 0 sequence numbers"
        )));
    }
    let base = reserved_seq.max(last_seq);
    let end =
        base.checked_add(count).filter(|end| i64::try_from(*end).is_ok()).ok_or_else(|| {
            StoreError::Invalid(format!(
                "session {session_id}: reserving {count} sequence numbers above {base} overflows"
            ))
        })?;
    Ok((base + 1, end))
}

/// A checkpoint's numbers fit.
pub(crate) fn check_checkpoint(checkpoint: &Checkpoint) -> Result<(), StoreError> {
    to_i64(checkpoint.at, "checkpoint time").map(|_| ())
}

/// The session id of the row a write probe writes and deletes (`probe_write`): one of its own
/// per probe, so that deleting it never deletes anything else (even a library user's session
/// named like a probe).
pub(crate) fn probe_id() -> String {
    static PROBES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = PROBES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("~probe~{}-{}-{n}", std::process::id(), process_nonce())
}

/// A per-process nonce for probe ids: the time the first probe was made.
fn process_nonce() -> u64 {
    static NONCE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *NONCE.get_or_init(weft_core::now_ms)
}

/// The longest lease or wait the stores honour (longer ones are cut to it): ten years.
pub(crate) const MAX_DURATION: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

/// A lease's time to live in milliseconds (at least 1, at most [`MAX_DURATION`]).
pub(crate) fn ttl_ms(ttl: Duration) -> i64 {
    i64::try_from(ttl.min(MAX_DURATION).as_millis()).unwrap_or(i64::MAX).max(1)
}

/// An event ready for a SQL backend: its columns and JSON.
pub(crate) struct EncodedEvent {
    pub(crate) seq: i64,
    pub(crate) run_id: String,
    pub(crate) node_id: Option<String>,
    pub(crate) at: i64,
    /// The event's JSON; without the messages of `span` when `span` is set.
    pub(crate) json: String,
    /// The log positions (first, count) of the messages `json` leaves out, to be put back from
    /// the `messages` table when the event is read: the stored log keeps each message once.
    pub(crate) span: Option<(i64, i64)>,
    /// For an event encoded by reference, the record itself: should the log not have the
    /// messages when the event is written, it is stored whole after all ([`Self::settle`]).
    record: Option<Arc<EventRecord>>,
}

impl EncodedEvent {
    /// Decides, inside the writing transaction, how the event is stored: by reference only when
    /// the log (`message_count` messages) has every message the reference names.
    pub(crate) fn settle(&mut self, message_count: u64) -> Result<(), StoreError> {
        if let (Some((first, count)), Some(record)) = (self.span, self.record.take()) {
            let end = u64::try_from(first.saturating_add(count)).unwrap_or(u64::MAX);
            if end > message_count {
                self.json = encode(&record.event, "event")?;
                self.span = None;
            }
        }
        Ok(())
    }
}

/// Events ready for a SQL backend (order and ranges checked by the caller). Events that repeat
/// messages of the log ([`EventRecord::messages`]) are encoded without them; the writer
/// [settles](EncodedEvent::settle) each against the log before inserting it.
pub(crate) fn encode_events(events: &[Arc<EventRecord>]) -> Result<Vec<EncodedEvent>, StoreError> {
    events
        .iter()
        .map(|e| {
            let by_reference = match e.messages {
                Some(span) => without_messages(&e.event, span)?.map(|json| (json, span)),
                None => None,
            };
            let (json, span, record) = match by_reference {
                Some((json, span)) => (
                    json,
                    Some((
                        to_i64(span.first, "message position")?,
                        to_i64(span.count, "message count")?,
                    )),
                    Some(Arc::clone(e)),
                ),
                None => (encode(&e.event, "event")?, None, None),
            };
            Ok(EncodedEvent {
                seq: to_i64(e.seq, "seq")?,
                run_id: e.run_id.to_string(),
                node_id: e.node_id.as_ref().map(|n| n.to_string()),
                at: to_i64(e.at, "event time")?,
                json,
                span,
                record,
            })
        })
        .collect()
}

/// The JSON of `event` without the messages `span` names, or `None` when the event does not
/// repeat exactly that many messages (then it is stored whole).
fn without_messages(event: &AgentEvent, span: MessageSpan) -> Result<Option<String>, StoreError> {
    let mut value = match event {
        AgentEvent::MessageEnd { .. } if span.count == 1 => {
            return Ok(Some(r#"{"type":"message_end"}"#.to_owned()));
        }
        AgentEvent::Error { error, message: Some(_) } if span.count == 1 => {
            return encode(&serde_json::json!({ "type": "error", "error": error }), "event")
                .map(Some);
        }
        AgentEvent::SessionEnd { messages, .. } if messages.len() as u64 == span.count => {
            to_value(event)?
        }
        AgentEvent::StepEnd { .. } if span.count == 1 => to_value(event)?,
        _ => return Ok(None),
    };
    let removed = match &mut value {
        Value::Object(map) if map.contains_key("messages") => map.remove("messages"),
        Value::Object(map) => match map.get_mut("step") {
            Some(Value::Object(step)) => step.remove("llmResponse"),
            _ => None,
        },
        _ => None,
    };
    if removed.is_none() {
        return Ok(None);
    }
    encode(&value, "event").map(Some)
}

fn to_value(event: &AgentEvent) -> Result<Value, StoreError> {
    serde_json::to_value(event)
        .map_err(|e| StoreError::Invalid(format!("event cannot be serialized: {e}")))
}

/// An event stored by reference, whole again: the messages at positions `first..` (their JSON
/// as stored, `messages[0]` at `first`) put back where [`encode_events`] took them out.
pub(crate) fn with_messages(
    json: &str,
    first: u64,
    count: u64,
    messages: &LogWindow,
    session_id: &str,
) -> Result<AgentEvent, StoreError> {
    let mut value: Value = decode(json, "events", session_id)?;
    let mut taken = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(1024));
    for position in first..first.saturating_add(count) {
        let text = messages.get(position).ok_or_else(|| {
            corrupt(
                "events",
                session_id,
                format!("an event names message {position}, which the log lacks"),
            )
        })?;
        taken.push(decode::<Value>(text, "messages", session_id)?);
    }
    let Value::Object(map) = &mut value else {
        return Err(corrupt("events", session_id, "an event stored by reference is not an object"));
    };
    match map.get("type").and_then(Value::as_str) {
        Some("message_end" | "error") if taken.len() == 1 => {
            map.insert("message".into(), taken.swap_remove(0));
        }
        Some("session_end") => {
            map.insert("messages".into(), Value::Array(taken));
        }
        Some("step_end") if taken.len() == 1 => match map.get_mut("step") {
            Some(Value::Object(step)) => {
                step.insert("llmResponse".into(), taken.swap_remove(0));
            }
            _ => return Err(corrupt("events", session_id, "a step_end without its step")),
        },
        other => {
            return Err(corrupt(
                "events",
                session_id,
                format!("an event of type {other:?} names {count} messages"),
            ));
        }
    }
    serde_json::from_value(value).map_err(|e| corrupt_by("events", session_id, e))
}

/// The stored JSON of consecutive messages of one session's log, read for the events that
/// name them.
#[derive(Default)]
pub(crate) struct LogWindow {
    first: u64,
    texts: Vec<String>,
}

impl LogWindow {
    /// Messages `first`, `first + 1` … as stored.
    pub(crate) fn new(first: u64, texts: Vec<String>) -> Self {
        Self { first, texts }
    }

    fn get(&self, position: u64) -> Option<&str> {
        let i = usize::try_from(position.checked_sub(self.first)?).ok()?;
        self.texts.get(i).map(String::as_str)
    }
}

/// The positions `[first, end)` of the log that events stored by reference with `spans` need,
/// if any.
pub(crate) fn needed_messages(spans: impl Iterator<Item = MessageSpan>) -> Option<(u64, u64)> {
    spans.fold(None, |acc, span| {
        Some(match acc {
            None => (span.first, span.end()),
            Some((lo, hi)) => (lo.min(span.first), hi.max(span.end())),
        })
    })
}

/// A head ready for a SQL backend: its columns and JSON.
pub(crate) struct EncodedHead {
    pub(crate) id: String,
    pub(crate) owner: Option<String>,
    pub(crate) status: &'static str,
    pub(crate) json: String,
    pub(crate) version: i64,
    pub(crate) message_count: i64,
    pub(crate) next_deadline: Option<i64>,
    pub(crate) created_at: i64,
    pub(crate) updated_at: i64,
}

/// A head ready for a SQL backend (numbers checked by the caller).
pub(crate) fn encode_head(head: &SessionHead) -> Result<EncodedHead, StoreError> {
    Ok(EncodedHead {
        id: head.id.clone(),
        owner: head.owner.clone(),
        status: head.status.as_str(),
        json: encode(head, "session head")?,
        version: to_i64(head.version, "version")?,
        message_count: to_i64(head.message_count, "message_count")?,
        next_deadline: head.next_deadline.map(|d| to_i64(d, "next_deadline")).transpose()?,
        created_at: to_i64(head.created_at, "created_at")?,
        updated_at: to_i64(head.updated_at, "updated_at")?,
    })
}

/// What a commit does to the run, encoded.
pub(crate) enum EncodedRun {
    Keep,
    Set(String),
    Clear,
}

/// The run change encoded.
pub(crate) fn encode_run(run: &RunChange) -> Result<EncodedRun, StoreError> {
    Ok(match run {
        RunChange::Keep => EncodedRun::Keep,
        RunChange::Set(state) => EncodedRun::Set(encode(state.as_ref(), "run state")?),
        RunChange::Clear => EncodedRun::Clear,
    })
}

/// Messages encoded, one JSON text each.
pub(crate) fn encode_messages<M: AsRef<Message>>(
    messages: &[M],
) -> Result<Vec<String>, StoreError> {
    messages.iter().map(|m| encode(m.as_ref(), "message")).collect()
}

/// A commit checked for what it can be checked without the store, then encoded.
pub(crate) struct EncodedCommit {
    pub(crate) head: EncodedHead,
    pub(crate) messages: Vec<String>,
    pub(crate) run: EncodedRun,
    pub(crate) events: Vec<EncodedEvent>,
    pub(crate) shape: CommitShape,
}

/// Prechecks and encodes a commit.
pub(crate) fn encode_commit(commit: &Commit) -> Result<EncodedCommit, StoreError> {
    precheck_commit(commit)?;
    Ok(EncodedCommit {
        head: encode_head(&commit.head)?,
        messages: encode_messages(&commit.messages)?,
        run: encode_run(&commit.run)?,
        events: encode_events(&commit.events)?,
        shape: CommitShape::of(commit),
    })
}

/// A column of a row, or a [`StoreError::Backend`] (with the driver's error as its source) naming the table and the session.
pub(crate) fn column<'r, R, T>(
    row: &'r R,
    name: &str,
    table: &str,
    session_id: &str,
) -> Result<T, StoreError>
where
    R: sqlx::Row,
    T: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'n> &'n str: sqlx::ColumnIndex<R>,
{
    row.try_get(name).map_err(|e| {
        StoreError::backend_caused_by(
            corrupt_text(table, session_id, format_args!("column {name}: {e}")),
            e,
        )
    })
}

/// An integer column holding a `u64`.
pub(crate) fn column_u64<'r, R>(
    row: &'r R,
    name: &str,
    table: &str,
    session_id: &str,
) -> Result<u64, StoreError>
where
    R: sqlx::Row,
    i64: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    for<'n> &'n str: sqlx::ColumnIndex<R>,
{
    let value: i64 = column(row, name, table, session_id)?;
    to_u64(value, table, session_id, name)
}
