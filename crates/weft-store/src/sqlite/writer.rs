//! The writer: one task that owns the writing connection and applies queued writes in batches,
//! one transaction per batch and one savepoint per operation.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use sqlx::{ConnectOptions, Executor};
use tokio::sync::mpsc;
use weft_core::store::StoreError;

use super::Counters;
use super::apply::apply;
use super::ops::{Job, Op, OpResult, Wake};
use crate::codec::backend;
use crate::hub::Hub;

pub(super) async fn write_loop(
    writer: SqliteConnection,
    reconnect: SqliteConnectOptions,
    mut queue: mpsc::Receiver<Job>,
    hub: Arc<Hub>,
    stats: Arc<Counters>,
    max_batch: usize,
) {
    let mut conn = Some(writer);
    let mut jobs: Vec<Job> = Vec::new();
    while queue.recv_many(&mut jobs, max_batch).await > 0 {
        let (ops, replies): (Vec<Op>, Vec<_>) = jobs.drain(..).map(|j| (j.op, j.reply)).unzip();
        if conn.is_none() {
            match reconnect.connect().await {
                Ok(c) => conn = Some(c),
                Err(e) => {
                    let error = backend("SQLite writer cannot reconnect", e);
                    for reply in replies {
                        let _ = reply.send(Err(error.clone()));
                    }
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        let count = ops.len() as u64;
        match run_batch(c, ops).await {
            Ok(results) => {
                stats.transactions.fetch_add(1, Ordering::Relaxed);
                stats.operations.fetch_add(count, Ordering::Relaxed);
                for (result, reply) in results.into_iter().zip(replies) {
                    let answer = result.map(|(done, wake)| {
                        if let Some(Wake(id)) = wake {
                            hub.poke(&id);
                        }
                        done
                    });
                    let _ = reply.send(answer);
                }
            }
            Err(error) => {
                tracing::warn!(%error, "SQLite write batch failed; reconnecting the writer");
                // Whatever state the connection is in, start the next batch on a fresh one.
                conn = None;
                for reply in replies {
                    let _ = reply.send(Err(error.clone()));
                }
            }
        }
    }
}

/// One transaction for the batch, one savepoint per operation. `Err` means the transaction
/// failed and nothing of the batch was written.
async fn run_batch(conn: &mut SqliteConnection, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError> {
    let fail = |e: sqlx::Error| backend("SQLite write", e);
    conn.execute("BEGIN IMMEDIATE").await.map_err(fail)?;
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        if let Err(e) = conn.execute("SAVEPOINT op").await {
            return Err(abort(conn, fail(e)).await);
        }
        let result = apply(conn, op).await;
        let closed = if result.is_ok() {
            conn.execute("RELEASE op").await.map(|_| ())
        } else {
            match conn.execute("ROLLBACK TO op").await {
                Ok(_) => conn.execute("RELEASE op").await.map(|_| ()),
                Err(e) => Err(e),
            }
        };
        if let Err(e) = closed {
            return Err(abort(conn, fail(e)).await);
        }
        results.push(result);
    }
    if let Err(e) = conn.execute("COMMIT").await {
        return Err(abort(conn, fail(e)).await);
    }
    Ok(results)
}

async fn abort(conn: &mut SqliteConnection, error: StoreError) -> StoreError {
    let _ = conn.execute("ROLLBACK").await;
    error
}
