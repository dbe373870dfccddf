//! The hub's watchers: the stream of a session's events after a seq, from memory, then the
//! store, then live, and of a run another process may be executing.

use std::sync::Arc;

use futures::Stream;
use weft_core::{AgentEvent, EventRecord, SessionStatus, SessionStore, now_ms};

use super::{
    CLOSING_GRACE_MS, Hub, PERSIST_EVERY, READ_PAGE, REMOTE_WAIT, first_at_or_after,
    last_at_or_after,
};

/// Where a stream is, and what it streams.
struct Cursor {
    /// The seq it wants next.
    next: u64,
    /// It ends after a `session_end`.
    follow_run: bool,
    /// The run whose stream it is, if it is one run's.
    only: Option<Arc<str>>,
    /// The run's own first event was streamed.
    started: bool,
}

/// What a stream does with a record.
enum Admit {
    /// Streams it; then ends, if it closed the run being followed.
    Yield { ended: bool },
    /// Passes over it (another run's, before the run's own first event).
    Skip,
    /// Ends before it (another run's, after the run's own events).
    End,
}

impl Cursor {
    fn admit(&mut self, record: &EventRecord) -> Admit {
        if let Some(run) = &self.only {
            // The run's own records share its id's allocation: one pointer compared per record.
            let own = Arc::ptr_eq(run, &record.run_id) || **run == *record.run_id;
            if !own {
                if self.started {
                    return Admit::End;
                }
                self.next = record.seq + 1;
                return Admit::Skip;
            }
            self.started = true;
        }
        self.next = record.seq + 1;
        Admit::Yield {
            ended: self.follow_run && matches!(record.event, AgentEvent::SessionEnd { .. }),
        }
    }
}

/// What one look at the log found.
enum Fetch {
    /// Records to stream, in the batch.
    Records,
    /// Nothing yet: a run of this process is live; wait for its next publish.
    Wait,
    /// Look again (the cursor moved over a gap, a read failed, a remote wait ended).
    Again,
    /// The stream is over.
    End,
}

enum RemoteTail {
    Events(Vec<Arc<EventRecord>>),
    Wait,
    End,
}

impl Hub {
    /// The events with seq above `after_seq`: stored ones, then live ones as they come. With
    /// `follow_run`, the stream ends after the run under way (or the last one) has ended:
    /// after a `session_end`, or at once when no run is under way and nothing newer exists.
    /// With `only`, it is that run's stream: another run's events before the run's first (a dead
    /// run's tail, stored after the head this process read) are skipped, and it ends where
    /// another run's events follow the run's own (the run was cut off before its end, and the
    /// session has moved on).
    pub(crate) fn subscribe(
        self: &Arc<Self>,
        after_seq: u64,
        follow_run: bool,
        only: Option<Arc<str>>,
    ) -> impl Stream<Item = Arc<EventRecord>> + Send + use<> {
        let hub = Arc::clone(self);
        let mut cursor = Cursor { next: after_seq + 1, follow_run, only, started: false };
        async_stream::stream! {
            // Counted among the watchers while the stream lives.
            let watcher = Watcher::new(&hub, cursor.next);
            // One batch buffer for the stream's life, not one per wake-up.
            let mut batch = Vec::new();
            loop {
                // Registered before looking, so a publish after the look wakes us.
                let published = hub.published.notified();
                tokio::pin!(published);
                published.as_mut().enable();
                match hub.fetch(&mut cursor, watcher.id, &mut batch).await {
                    Fetch::Records => {
                        for record in batch.drain(..) {
                            match cursor.admit(&record) {
                                Admit::Yield { ended } => {
                                    yield record;
                                    if ended {
                                        return;
                                    }
                                }
                                Admit::Skip => {}
                                Admit::End => return,
                            }
                        }
                    }
                    Fetch::Wait => published.await,
                    Fetch::Again => {}
                    Fetch::End => return,
                }
            }
        }
    }

    /// One look for what comes after the cursor: memory, then the store where memory no longer
    /// reaches, then (no run of this process under way) what another process may be writing.
    async fn fetch(
        &self,
        cursor: &mut Cursor,
        watcher: u64,
        batch: &mut Vec<Arc<EventRecord>>,
    ) -> Fetch {
        let next = cursor.next;
        let (in_memory, live, last) = self.take_from_memory(watcher, next, batch);
        if !batch.is_empty() {
            return Fetch::Records;
        }
        if !in_memory
            && next <= last
            && let Some(store) = &self.store
        {
            // Trimmed from memory: read the store. Where memory starts is taken first: what is
            // below it and not in memory now is in the store, or never will be (a reservation
            // gap). Taken after the read, it could have moved past events written meanwhile,
            // which would then be skipped.
            let front = self.first_in_memory();
            return match store.read_events(&self.session_id, next - 1, READ_PAGE).await {
                Ok(records) if !records.is_empty() => {
                    *batch = records;
                    Fetch::Records
                }
                // A gap (numbers reserved by a process that died): skip to memory.
                Ok(_) => {
                    cursor.next = front.unwrap_or(last + 1).max(next);
                    Fetch::Again
                }
                Err(error) => {
                    tracing::warn!(session_id = %self.session_id, %error, "reading events failed");
                    Box::pin(tokio::time::sleep(PERSIST_EVERY)).await;
                    Fetch::Again
                }
            };
        }
        if !in_memory && next <= last {
            // No store, and memory no longer has `next` (an earlier run's): what there is
            // starts at the current run.
            cursor.next = self.first_in_memory().unwrap_or(last + 1).max(next);
            return Fetch::Again;
        }
        if live {
            return Fetch::Wait;
        }
        if self.is_cut() {
            // The run shows nothing more (its events could not be numbered).
            return Fetch::End;
        }
        // No run of this process is under way: another process may be running one.
        // Boxed: inline, this path's state machine (its timers and reads) would sit in every
        // watcher's stream, while only a watcher of another process's run takes it.
        match Box::pin(self.remote_tail(next)).await {
            RemoteTail::Events(records) => {
                *batch = records;
                Fetch::Records
            }
            RemoteTail::Wait => Fetch::Again,
            RemoteTail::End => Fetch::End,
        }
    }

    /// Up to a page of events from `next` on, if memory still has `next`; whether it has;
    /// whether a run is live here; the last seq
    /// (into `batch`, which is empty when called). `watcher` has taken everything before
    /// `next`, and takes the page.
    fn take_from_memory(
        &self,
        watcher: u64,
        next: u64,
        batch: &mut Vec<Arc<EventRecord>>,
    ) -> (bool, bool, u64) {
        let mut state = self.lock();
        let found = Self::page(&state, self.store.is_some(), next, batch);
        let taken = batch.last().map_or(next, |record| record.seq + 1);
        if let Some((_, at)) = state.watchers.iter_mut().find(|(w, _)| *w == watcher) {
            *at = taken;
        }
        found
    }

    /// See [`take_from_memory`](Self::take_from_memory).
    fn page(
        state: &super::HubState,
        stored: bool,
        next: u64,
        batch: &mut Vec<Arc<EventRecord>>,
    ) -> (bool, bool, u64) {
        let last = state.visible(stored);
        // A run cut off (its events could not be numbered) shows nothing more: a watcher that
        // has all it was shown follows it no further.
        let live = state.live && state.unnumbered.is_none();
        if next > last {
            return (true, live, last);
        }
        // A live watcher wants what was just published: found from the back, among the records
        // it is about to read (the front is older, and a cache miss per look).
        let start = match last_at_or_after(&state.events, next) {
            Some(start) => start,
            None => {
                let first = state.events.front().map_or(last + 1, |r| r.seq);
                if next < first {
                    return (false, live, last);
                }
                first_at_or_after(&state.events, next)
            }
        };
        let page = state.events.range(start..).take_while(|r| r.seq <= last).take(READ_PAGE);
        batch.extend(page.cloned());
        (true, live, last)
    }

    /// Whether the current run was cut off: its events could not be numbered.
    fn is_cut(&self) -> bool {
        self.lock().unnumbered.is_some()
    }

    fn first_in_memory(&self) -> Option<u64> {
        self.lock().events.front().map(|r| r.seq)
    }

    /// Events of a run another process may be executing: what the store has after `next - 1`,
    /// or a wait for more, or the end when the session is not running.
    async fn remote_tail(&self, next: u64) -> RemoteTail {
        let Some(store) = &self.store else { return RemoteTail::End };
        match store.read_events(&self.session_id, next - 1, READ_PAGE).await {
            Ok(records) if !records.is_empty() => return RemoteTail::Events(records),
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(session_id = %self.session_id, %error, "reading events failed");
                tokio::time::sleep(PERSIST_EVERY).await;
                return RemoteTail::Wait;
            }
        }
        // A run's resting state is saved before its closing events (`session_end`) are written:
        // a head that ended moments ago may still have them on the way.
        let wait = match store.head(&self.session_id).await {
            Ok(Some(head)) if head.status == SessionStatus::Running => REMOTE_WAIT,
            Ok(Some(head)) if now_ms().saturating_sub(head.updated_at) < CLOSING_GRACE_MS => {
                if self.ends_at(store, next - 1).await {
                    return RemoteTail::End;
                }
                PERSIST_EVERY
            }
            Ok(_) => return RemoteTail::End,
            Err(_) => REMOTE_WAIT,
        };
        match store.wait_events(&self.session_id, next - 1, wait).await {
            Ok(_) => RemoteTail::Wait,
            Err(_) => {
                tokio::time::sleep(PERSIST_EVERY).await;
                RemoteTail::Wait
            }
        }
    }

    /// Whether the stored event numbered `seq` closes a run.
    async fn ends_at(&self, store: &Arc<dyn SessionStore>, seq: u64) -> bool {
        let Some(before) = seq.checked_sub(1) else { return false };
        match store.read_events(&self.session_id, before, 1).await {
            Ok(records) => records
                .first()
                .is_some_and(|r| r.seq == seq && matches!(r.event, AgentEvent::SessionEnd { .. })),
            Err(_) => false,
        }
    }
}

/// A watcher counted in the hub while its stream lives (see `HubState::watchers`).
struct Watcher {
    hub: Arc<Hub>,
    id: u64,
}

impl Watcher {
    fn new(hub: &Arc<Hub>, next: u64) -> Self {
        let mut state = hub.lock();
        let id = state.next_watcher;
        state.next_watcher += 1;
        state.watchers.push((id, next));
        Self { hub: Arc::clone(hub), id }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.hub.lock().watchers.retain(|(w, _)| *w != self.id);
    }
}
