//! Reading the SQL backends' rows back into the contract's types. Every failure is a
//! [`StoreError::Backend`] naming the table and the session: a stored row is never trusted.

use std::sync::Arc;

use sqlx::{ColumnIndex, Decode, Row, Type};
use weft_core::message::Message;
use weft_core::store::{
    Checkpoint, EventRecord, MessageSpan, RunState, SessionHead, StoreError, StoredSession,
};

use crate::codec::{self, LogWindow, column, column_u64, corrupt, decode, to_i64, to_u64};

/// `(seq, run_id, node_id, at, event, msg_first, msg_count)` of the `events` table. An event
/// stored by reference (`msg_first` set) gets its messages back from `window`.
pub(crate) fn event<'r, R>(
    row: &'r R,
    session_id: &Arc<str>,
    window: &LogWindow,
) -> Result<EventRecord, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: Decode<'r, R::Database> + Type<R::Database>,
{
    let sid: &str = session_id;
    let run_id: String = column(row, "run_id", "events", sid)?;
    let node_id: Option<String> = column(row, "node_id", "events", sid)?;
    let text: String = column(row, "event", "events", sid)?;
    let (event, messages) = match span(row, sid)? {
        Some(span) => {
            (codec::with_messages(&text, span.first, span.count, window, sid)?, Some(span))
        }
        None => (decode(&text, "events", sid)?, None),
    };
    Ok(EventRecord {
        session_id: Arc::clone(session_id),
        run_id: run_id.into(),
        seq: column_u64(row, "seq", "events", sid)?,
        node_id: node_id.map(Into::into),
        at: column_u64(row, "at", "events", sid)?,
        event,
        messages,
    })
}

/// The positions `[first, end)` of the log that the events among `rows` stored by reference
/// name, if any (as `i64`s, to bind).
pub(crate) fn needed_messages<'r, R>(
    rows: &'r [R],
    session_id: &str,
) -> Result<Option<(u64, i64, i64)>, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
{
    let spans: Vec<MessageSpan> = rows
        .iter()
        .map(|row| span(row, session_id))
        .filter_map(Result::transpose)
        .collect::<Result<_, _>>()?;
    match codec::needed_messages(spans.into_iter()) {
        None => Ok(None),
        Some((first, end)) => {
            Ok(Some((first, to_i64(first, "message position")?, to_i64(end, "message position")?)))
        }
    }
}

/// The `(msg_first, msg_count)` of an `events` row: set for an event stored by reference.
pub(crate) fn span<'r, R>(row: &'r R, session_id: &str) -> Result<Option<MessageSpan>, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    Option<i64>: Decode<'r, R::Database> + Type<R::Database>,
{
    let first: Option<i64> = column(row, "msg_first", "events", session_id)?;
    let count: Option<i64> = column(row, "msg_count", "events", session_id)?;
    Ok(match (first, count) {
        (Some(first), Some(count)) => Some(MessageSpan {
            first: to_u64(first, "events", session_id, "msg_first")?,
            count: to_u64(count, "events", session_id, "msg_count")?,
        }),
        (None, None) => None,
        _ => return Err(corrupt("events", session_id, "msg_first and msg_count disagree")),
    })
}

/// `(namespace, id, parent_id, at, value)` of the `checkpoints` table.
pub(crate) fn checkpoint<'r, R>(row: &'r R, session_id: &str) -> Result<Checkpoint, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
    Option<String>: Decode<'r, R::Database> + Type<R::Database>,
{
    let table = "checkpoints";
    let value: String = column(row, "value", table, session_id)?;
    Ok(Checkpoint {
        session_id: session_id.to_owned(),
        namespace: column(row, "namespace", table, session_id)?,
        id: column(row, "id", table, session_id)?,
        parent_id: column(row, "parent_id", table, session_id)?,
        at: column_u64(row, "at", table, session_id)?,
        value: decode(&value, table, session_id)?,
    })
}

/// The `head` column of the `sessions` table.
pub(crate) fn head<'r, R>(row: &'r R, session_id: &str) -> Result<SessionHead, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    let text: String = column(row, "head", "sessions", session_id)?;
    let head: SessionHead = decode(&text, "sessions", session_id)?;
    if head.id != session_id {
        return Err(corrupt("sessions", session_id, format!("the head names session {}", head.id)));
    }
    Ok(head)
}

/// A head from a listing, whose id is in the `id` column.
pub(crate) fn listed_head<'r, R>(row: &'r R) -> Result<SessionHead, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    let id: String = column(row, "id", "sessions", "?")?;
    head(row, &id)
}

/// A whole session from its `sessions` row (`head`, `last_seq`, `reserved_seq`,
/// `message_count`), its `messages` rows (`idx`, `message`, in order) and its `runs` row.
pub(crate) fn stored_session<'r, R>(
    session_id: &str,
    session: &'r R,
    messages: &'r [R],
    run: Option<&'r R>,
) -> Result<StoredSession, StoreError>
where
    R: Row,
    for<'n> &'n str: ColumnIndex<R>,
    i64: Decode<'r, R::Database> + Type<R::Database>,
    String: Decode<'r, R::Database> + Type<R::Database>,
{
    let head = head(session, session_id)?;
    let count = column_u64(session, "message_count", "sessions", session_id)?;
    if count != messages.len() as u64 || head.message_count != count {
        return Err(corrupt(
            "messages",
            session_id,
            format!(
                "{} messages stored, the head says {} and the row {count}",
                messages.len(),
                head.message_count
            ),
        ));
    }
    let mut log: Vec<Message> = Vec::with_capacity(messages.len());
    for (expected, row) in messages.iter().enumerate() {
        let idx = column_u64(row, "idx", "messages", session_id)?;
        if idx != expected as u64 {
            return Err(corrupt(
                "messages",
                session_id,
                format!("message {idx} found where {expected} belongs"),
            ));
        }
        let text: String = column(row, "message", "messages", session_id)?;
        log.push(decode(&text, "messages", session_id)?);
    }
    let run: Option<RunState> = match run {
        Some(row) => {
            let text: String = column(row, "run", "runs", session_id)?;
            Some(decode(&text, "runs", session_id)?)
        }
        None => None,
    };
    Ok(StoredSession {
        head,
        messages: log.into(),
        run,
        last_seq: column_u64(session, "last_seq", "sessions", session_id)?,
        reserved_seq: column_u64(session, "reserved_seq", "sessions", session_id)?,
    })
}
