//! The writer: one thread that owns the writing connection and applies queued writes in batches,
//! one transaction per batch and one savepoint per operation.
//!
//! A thread of its own, calling SQLite directly: a statement is a function call, where through
//! sqlx's async connection each one was two hand-offs between threads (to its worker and back),
//! and a batch's fsync holds no runtime worker. The thread lives as long as the runtime that
//! opened the store (as a task of it would): once that runtime is gone, queued writes are
//! dropped unanswered, as a killed process's are.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;
use weft_core::store::StoreError;

use super::Counters;
use super::apply::{apply, sql};
use super::ops::{Job, Op, OpResult, Wake};
use crate::codec::backend;
use crate::hub::Hub;

/// What the writer thread needs.
pub(super) struct Writer {
    pub(super) path: PathBuf,
    pub(super) busy_timeout: Duration,
    pub(super) queue: flume::Receiver<Job>,
    pub(super) hub: Arc<Hub>,
    pub(super) stats: Arc<Counters>,
    pub(super) max_batch: usize,
    pub(super) group_commit: Duration,
}

impl Writer {
    /// Opens the writing connection on a thread of its own and starts writing there; returns
    /// once the connection is open (or could not be). Must be called inside a Tokio runtime: the
    /// writer stops with it.
    pub(super) async fn start(self) -> Result<(), StoreError> {
        let stopped = Arc::new(AtomicBool::new(false));
        // Dropped when the runtime shuts down (or the task is otherwise dropped).
        let guard = StopOnDrop(Arc::clone(&stopped));
        tokio::spawn(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
        });
        let (opened, open_answer) = oneshot::channel();
        std::thread::Builder::new()
            .name("weft-sqlite-writer".into())
            .spawn(move || match connect(&self.path, self.busy_timeout) {
                Ok(conn) => {
                    let _ = opened.send(Ok(()));
                    self.write_loop(conn, &stopped);
                }
                Err(error) => {
                    let _ = opened.send(Err(error));
                }
            })
            .map_err(|e| backend("cannot start the SQLite writer thread", e))?;
        open_answer
            .await
            .map_err(|_| StoreError::Closed("the SQLite writer stopped while opening".into()))?
    }

    fn write_loop(self, writer: Connection, stopped: &AtomicBool) {
        let mut conn = Some(writer);
        let queue = self.queue;
        // When the last transaction ended.
        let mut last_commit: Option<Instant> = None;
        while let Ok(first) = queue.recv() {
            let mut jobs = vec![first];
            // Event appends coming close together (the persisters of streaming runs, which no
            // run waits for under `async`): more of them join this transaction. Any other write
            // (a session's creation, a run's start or end, a lease) ends the wait.
            if is_append(&jobs[0])
                && !self.group_commit.is_zero()
                && last_commit.is_some_and(|at| at.elapsed() < self.group_commit * 4)
            {
                let until = Instant::now() + self.group_commit;
                while jobs.len() < self.max_batch {
                    let Ok(job) = queue.recv_deadline(until) else { break };
                    let urgent = !is_append(&job);
                    jobs.push(job);
                    if urgent {
                        break;
                    }
                }
            }
            if stopped.load(Ordering::Acquire) {
                // The runtime that opened the store is gone: nothing more is written.
                return;
            }
            if conn.is_none() {
                match connect(&self.path, self.busy_timeout) {
                    Ok(c) => conn = Some(c),
                    Err(error) => {
                        for job in jobs {
                            let _ = job.reply.send(Err(error.clone()));
                        }
                        continue;
                    }
                }
            }
            let Some(c) = conn.as_ref() else { continue };
            // The transaction is begun before the batch is gathered: whatever is queued while
            // it waits for the file's lock (another process's writer) joins it.
            if let Err(e) = exec(c, "BEGIN IMMEDIATE") {
                let error = sql(e);
                for job in jobs {
                    let _ = job.reply.send(Err(error.clone()));
                }
                conn = None;
                continue;
            }
            while jobs.len() < self.max_batch {
                match queue.try_recv() {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
            }
            let (ops, replies): (Vec<Op>, Vec<_>) =
                jobs.into_iter().map(|j| (j.op, j.reply)).unzip();
            let count = ops.len() as u64;
            let done = run_batch(c, ops);
            last_commit = Some(Instant::now());
            match done {
                Ok(results) => {
                    self.stats.transactions.fetch_add(1, Ordering::Relaxed);
                    self.stats.operations.fetch_add(count, Ordering::Relaxed);
                    for (result, reply) in results.into_iter().zip(replies) {
                        let answer = result.map(|(done, wake)| {
                            if let Some(Wake(id)) = wake {
                                self.hub.poke(&id);
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
}

fn is_append(job: &Job) -> bool {
    matches!(job.op, Op::Append { .. })
}

struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// The writing connection: the file (created by the store's opening), waiting up to
/// `busy_timeout` for other processes' writers, every commit synced (`synchronous = FULL`; the
/// file is in WAL mode already).
fn connect(path: &Path, busy_timeout: Duration) -> Result<Connection, StoreError> {
    let what = format!("SQLite store {}", path.display());
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags).map_err(|e| backend(&what, e))?;
    conn.busy_timeout(busy_timeout).map_err(|e| backend(&what, e))?;
    conn.pragma_update(None, "synchronous", "FULL").map_err(|e| backend(&what, e))?;
    conn.pragma_update(None, "foreign_keys", "OFF").map_err(|e| backend(&what, e))?;
    // Every statement the writer runs, prepared once.
    conn.set_prepared_statement_cache_capacity(64);
    Ok(conn)
}

/// The batch in the transaction begun, one savepoint per operation, then the commit. `Err`
/// means the transaction failed and nothing of the batch was written.
fn run_batch(conn: &Connection, ops: Vec<Op>) -> Result<Vec<OpResult>, StoreError> {
    let mut results = Vec::with_capacity(ops.len());
    for op in ops {
        if let Err(e) = exec(conn, "SAVEPOINT op") {
            return Err(abort(conn, sql(e)));
        }
        let result = apply(conn, op);
        let closed = if result.is_ok() {
            exec(conn, "RELEASE op")
        } else {
            exec(conn, "ROLLBACK TO op").and_then(|()| exec(conn, "RELEASE op"))
        };
        if let Err(e) = closed {
            return Err(abort(conn, sql(e)));
        }
        results.push(result);
    }
    if let Err(e) = exec(conn, "COMMIT") {
        return Err(abort(conn, sql(e)));
    }
    Ok(results)
}

/// Runs a statement without parameters, prepared once.
fn exec(conn: &Connection, statement: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(statement)?.execute([]).map(drop)
}

fn abort(conn: &Connection, error: StoreError) -> StoreError {
    let _ = conn.execute_batch("ROLLBACK");
    error
}
