//! The hub's persister: the task that writes what the hub publishes, in batches (group
//! commit), and recognises a write whose answer was lost.

use std::sync::Arc;
use std::time::Duration;

use weft_core::{SessionStore, StoreError};

use super::{GATHER, GATHER_WITHIN, Hub, PERSIST_EVERY, READ_PAGE, first_at_or_after};

/// Writes what the hub publishes, in batches, until the run has ended and all is stored.
pub(super) async fn persister(hub: Arc<Hub>) {
    let Some(store) = hub.store.clone() else { return };
    let mut backoff = PERSIST_EVERY;
    // When the last write ended.
    let mut last_write: Option<tokio::time::Instant> = None;
    loop {
        let woken = hub.pending.notified();
        tokio::pin!(woken);
        woken.as_mut().enable();
        let (batch, fence) = hub.unpersisted();
        if batch.is_empty() {
            let done = {
                let mut state = hub.lock();
                // A publish's write under way ends by waking this task when it leaves anything.
                let done = !state.live && !state.writing;
                if done {
                    state.persister = false;
                }
                done
            };
            if done {
                return;
            }
            woken.await;
            // Writes close together (a run publishing faster than the store writes): gather
            // what comes in the next moments into the same write. A paced stream (a model's
            // tokens) is written as it comes, without a timer per event.
            if last_write.is_some_and(|at| at.elapsed() < GATHER_WITHIN) {
                tokio::time::sleep(GATHER).await;
            }
            continue;
        }
        // Until this iteration ends, whatever it does with the answer.
        let _writing = Writing(&hub);
        let (first, last) = (batch[0].seq, batch[batch.len() - 1].seq);
        let run = Arc::clone(&batch[0].run_id);
        let newest = Arc::clone(&batch[batch.len() - 1].run_id);
        let fenced = fence.is_some().then(|| FencedWrite::start(&hub));
        let written = store.append_events(&hub.session_id, batch, fence.as_deref()).await;
        drop(fenced);
        match written {
            Ok(()) => {
                backoff = PERSIST_EVERY;
                last_write = Some(tokio::time::Instant::now());
                hub.persisted_up_to(last);
            }
            Err(error) => {
                // A refusal may be the retry of a write whose answer was lost: the store says.
                let kept = if error.is_transient() {
                    Kept::Unknown
                } else {
                    hub.kept(&store, first, last).await
                };
                match kept {
                    Kept::Stored(kept) => {
                        // A write whose answer was lost (a connection cut after the commit) took
                        // effect: its retry is refused because the store has these events already.
                        tracing::warn!(session_id = %hub.session_id, %error, first, kept, "the store had these events already (an earlier write's answer was lost)");
                        backoff = PERSIST_EVERY;
                        hub.persisted_up_to(kept);
                    }
                    Kept::No if !hub.refused_at(&run, first) => {
                        // An earlier run's tail (sent before its run let go of its lease, say):
                        // gone from memory; the run under way goes on.
                        tracing::error!(session_id = %hub.session_id, %error, first, last, "the store refused an earlier run's events for good; they are not retried");
                    }
                    Kept::No => {
                        // Retrying would get the same answer forever (and keep this task and the
                        // events alive): these events, and the rest of this run's, stay in this
                        // process's memory only, and the run is told. A later run's are written.
                        tracing::error!(session_id = %hub.session_id, %error, first, last, "the store refused these events for good; they are not retried");
                        // `unpersisted` skips the rest of the run from here on.
                        let mut state = hub.lock();
                        state.fence_lost |= matches!(error, StoreError::LeaseLost { .. });
                        state.hole.get_or_insert(first);
                        state.refusal = Some(error.clone());
                        state.failure = Some((error, newest));
                        drop(state);
                        hub.written.notify_waiters();
                    }
                    Kept::Unknown => {
                        tracing::error!(session_id = %hub.session_id, %error, "persisting events failed; retrying");
                        hub.lock().failure = Some((error, newest));
                        hub.written.notify_waiters();
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(Duration::from_secs(5));
                    }
                }
            }
        }
    }
}

/// The persister took a batch to write: no publish writes at once until it is done with it.
struct Writing<'a>(&'a Hub);

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.lock().writing = false;
    }
}

/// An append under a fence under way, counted while it lives (see `Hub::fenced_writes_over`).
struct FencedWrite<'a>(&'a Hub);

impl<'a> FencedWrite<'a> {
    fn start(hub: &'a Hub) -> Self {
        hub.lock().fenced_writes += 1;
        Self(hub)
    }
}

impl Drop for FencedWrite<'_> {
    fn drop(&mut self) {
        self.0.lock().fenced_writes -= 1;
        self.0.written.notify_waiters();
    }
}

/// What the store has of a write that was refused.
enum Kept {
    /// This process's events, up to this seq: an earlier try took effect.
    Stored(u64),
    /// Not this process's events: a refusal.
    No,
    /// The store could not be read: try the write again.
    Unknown,
}

impl Hub {
    /// Whether the store has this process's events from `first` on already (written by a
    /// write whose answer was lost): the last seq up to `last` it has, when the events it has
    /// there are this process's (the same seqs, of the same runs).
    async fn kept(&self, store: &Arc<dyn SessionStore>, first: u64, last: u64) -> Kept {
        let count = usize::try_from(last - first + 1).unwrap_or(READ_PAGE).min(READ_PAGE);
        let stored = match store.read_events(&self.session_id, first - 1, count).await {
            Ok(stored) => stored,
            // Not known: the write is tried again, as after a transient failure.
            Err(error) if error.is_transient() => return Kept::Unknown,
            // The session is gone, or the store refuses the read too: a refusal.
            Err(_) => return Kept::No,
        };
        if stored.first().map(|r| r.seq) != Some(first) {
            return Kept::No;
        }
        let state = self.lock();
        let start = first_at_or_after(&state.events, first);
        let mut kept = Kept::No;
        for record in stored.iter().take_while(|r| r.seq <= last) {
            let mine = state.events.range(start..).find(|m| m.seq == record.seq);
            if mine.is_none_or(|mine| mine.run_id != record.run_id) {
                return Kept::No;
            }
            kept = Kept::Stored(record.seq);
        }
        kept
    }
}
