//! The writer's operations: what a caller queues ([`Job`]: an [`Op`] and where its answer goes)
//! and what comes back. Shared by the writer thread and the functions that apply each operation.

use tokio::sync::oneshot;
use weft_core::store::{Checkpoint, StoreError};

use crate::codec::{EncodedCommit, EncodedEvent, EncodedHead};

/// One write, encoded by its caller (the writer only checks positions and writes).
pub(super) enum Op {
    Create {
        head: EncodedHead,
        messages: Vec<String>,
    },
    Commit(Box<EncodedCommit>),
    Reserve {
        session_id: String,
        count: u64,
    },
    Append {
        session_id: String,
        first_seq: Option<u64>,
        last_seq: u64,
        events: Vec<EncodedEvent>,
        lease: Option<String>,
    },
    PutCheckpoint {
        checkpoint: Checkpoint,
        value: String,
        at: i64,
    },
    Delete {
        session_id: String,
        owner: Option<String>,
    },
    Acquire {
        session_id: String,
        holder: String,
        ttl_ms: i64,
    },
    Renew {
        session_id: String,
        holder: String,
        ttl_ms: i64,
    },
    Release {
        session_id: String,
        holder: String,
    },
    TakeOver {
        process: String,
        heir: String,
        ttl_ms: i64,
    },
    Probe {
        id: String,
    },
}

/// A write's answer.
pub(super) enum Done {
    Unit,
    Seq(u64),
    Flag(bool),
    Ids(Vec<String>),
}

/// Whose waiters to wake once the transaction is committed (events appended, or deleted).
pub(super) struct Wake(pub(super) String);

pub(super) struct Job {
    pub(super) op: Op,
    pub(super) reply: oneshot::Sender<Result<Done, StoreError>>,
}

pub(super) type OpResult = Result<(Done, Option<Wake>), StoreError>;
