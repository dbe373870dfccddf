//! The session's event log in this process: where events are numbered, kept, persisted and
//! fanned out to any number of watchers.
//!
//! - **Numbering.** Every event of a session gets its `seq` here, and only here. Numbers are
//!   taken from blocks reserved durably in the store ([`SessionStore::reserve_seqs`]), so a
//!   process that dies after showing an event nobody stored yet can never lead another process
//!   to give that number to a different event: numbering there goes on above the reservation.
//! - **Keeping.** Published events stay in memory until the store has them, and a window of the
//!   most recent ones after that, so watchers close behind are served from memory.
//! - **Persisting.** A persister task writes what is new in batches (group commit): when woken,
//!   at once if its last write was a while ago (a paced stream costs no timer per event), after
//!   a short gather ([`GATHER`]) when writes come close together; a barrier ([`Hub::persist`])
//!   waits until everything published so far is stored. Nothing waits for a watcher.
//! - **Durability.** Each run says how durably it is stored ([`Durability`]): under `sync` a
//!   watcher sees only what the store has (it is woken by the writes, not the publishes); under
//!   `exit` the persister writes nothing while the run is live, until a barrier (the run's end)
//!   asks for everything at once.
//! - **Watching.** [`Hub::subscribe`] gives the events after a seq: from memory when they are
//!   still there, from the store otherwise, then live ones as they are published, with no gap
//!   and no duplicate at the hand-over. A watcher that falls behind reads the store and never
//!   slows the run; one that never reads costs nothing.
//!
//! Without a store (sessions kept in memory only) numbers are this process's own, nothing is
//! persisted, and the hub keeps the events of the current (or last) run for its watchers. Once a
//! run has kept [`LAG_EVENTS`] events, deltas queued together are merged before numbering, as
//! when a store lags: a long burst (a model streaming faster than the run publishes) does not
//! keep one record per token for the rest of the run.
//!
//! The hub's lock guards short synchronous updates only, never an await.

mod persister;
mod watch;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::Notify;
use weft_core::{
    AgentEvent, Durability, EventRecord, MessageSpan, SessionStore, StoreError, now_ms,
};

/// How many sequence numbers the first reservation of a hub takes; each next one takes twice as
/// many as the last, up to [`MAX_RESERVE_BLOCK`], so a long run asks the store a handful of times
/// (a reservation waits behind the store's queued writes) and a short one leaves a small gap
/// after a crash.
const RESERVE_BLOCK: u64 = 4096;
/// How long a failed reservation waits before it is asked again (then twice as long, twice).
const RESERVE_RETRY: Duration = Duration::from_millis(25);
/// The largest reservation.
const MAX_RESERVE_BLOCK: u64 = 1 << 20;
/// How many persisted events stay in memory for watchers close behind. Small: a live watcher
/// takes what is new as soon as it is published, one further behind reads the store, and every
/// open session with a run keeps this many (with tens of thousands of sessions a server holds,
/// each retained event is memory that only a lagging watcher could use: at 64, a fifth of a
/// streaming session's heap, measured with massif).
const RETAIN: usize = 16;
/// Up to how many persisted events stay in memory while a watcher has not taken them yet (a
/// burst it is reading through): it is served from memory, not the store. Past this many it
/// reads the store: a watcher that stopped reading never holds memory.
const RETAIN_FOR_WATCHERS: usize = 64;
/// How long a published event may wait before the persister writes it.
pub(crate) const PERSIST_EVERY: Duration = Duration::from_millis(50);
/// How long the persister, woken, waits for more events to write them together, when its last
/// write ended less than [`GATHER_WITHIN`] before.
const GATHER: Duration = Duration::from_millis(2);
/// See [`GATHER`]: events published further apart than this are written at once.
const GATHER_WITHIN: Duration = Duration::from_millis(10);
/// How many events one read from the store returns at most.
const READ_PAGE: usize = 1024;
/// Unpersisted events beyond which adjacent deltas are merged before numbering.
pub(crate) const LAG_EVENTS: usize = 16 * 1024;
/// How long a watcher of a run in another process waits on the store before looking again.
const REMOTE_WAIT: Duration = Duration::from_secs(15);
/// How long after a run in another process ended its closing events are still waited for.
const CLOSING_GRACE_MS: u64 = 2_000;

/// An event as a run hands it to the hub, before it is numbered.
#[derive(Debug)]
pub(crate) struct Draft {
    /// The node run it belongs to.
    pub(crate) node_id: Option<Arc<str>>,
    /// The event.
    pub(crate) event: AgentEvent,
    /// Where the messages it repeats are in the session's log (see [`MessageSpan`]).
    pub(crate) messages: Option<MessageSpan>,
}

/// One session's log in this process. See the [module docs](self).
pub(crate) struct Hub {
    session_id: Arc<str>,
    store: Option<Arc<dyn SessionStore>>,
    state: Mutex<HubState>,
    /// Woken when events are published or a run ends (watchers).
    published: Notify,
    /// Woken when there is something to persist (the persister).
    pending: Notify,
    /// Woken after every write of the persister, failed or not (a barrier waiting for it).
    written: Notify,
    /// The store may still take appends at once ([`SessionStore::append_events_now`]); cleared
    /// the first time it answers that it cannot.
    write_now: AtomicBool,
}

struct HubState {
    /// Published events in seq order: all that are not persisted yet, and the last few that are.
    events: VecDeque<Arc<EventRecord>>,
    /// The seq of the last event numbered (0: none).
    last_seq: u64,
    /// The highest seq reserved in the store.
    reserved: u64,
    /// The size of the next reservation.
    reserve_block: u64,
    /// Everything up to here is in the store.
    persisted: u64,
    /// A run of this process is publishing here.
    live: bool,
    /// The persister task is running.
    persister: bool,
    /// The last store failure, until a write succeeds again, with the newest run whose events
    /// the failed write carried: a wait for the store is answered with the failure only if it
    /// is the waiting run's (an earlier run's write whose retry is under way is not; the retry
    /// carries the waiting run's events too, and answers it).
    failure: Option<(StoreError, Arc<str>)>,
    /// Everything up to here that is not persisted was refused by the store for good (the
    /// session was deleted elsewhere, another process wrote these seqs), or belongs to a run
    /// some of whose events were: never sent again.
    refused: u64,
    /// The current run's refusal, if the store refused any of its events for good: the run
    /// cannot be durable, and says so.
    refusal: Option<StoreError>,
    /// How durably the current (or last) run is stored.
    durability: Durability,
    /// Under [`Durability::Exit`], what a barrier ([`Hub::persist`]) asked to be written while
    /// the run is live; nothing above it is.
    barrier: u64,
    /// The first seq of the current run the store refused for good: the store will never have
    /// it nor anything of the run after it, whatever `persisted` says later.
    hole: Option<u64>,
    /// Why the current run's events could not be numbered (the store reserved no numbers for
    /// them): nothing more of the run is shown, and its watchers' streams end.
    unnumbered: Option<StoreError>,
    /// The holder of the lease of the run under way: every append is fenced by it
    /// ([`SessionStore::append_events`]). A run that lets go of its lease cleanly unfences the
    /// rest of its events (a write retried after the store failed at its end goes on as
    /// before); one whose lease was taken over ([`fence_lost`](Hub::fence_lost)) does not: what
    /// it still had to write is refused.
    fence: Option<Arc<str>>,
    /// A write under `fence` was refused: another process took the run over.
    fence_lost: bool,
    /// The last seq a `sync` run published: until the store has everything up to it, no
    /// watcher sees past what the store has, whatever run publishes now (a watcher behind a
    /// `sync` run's end that was not stored must not be shown it by the next run).
    sync_last: u64,
    /// The run started here last (the run under way, if `live`): a refusal of an earlier run's
    /// events is that run's, not this one's.
    run: Option<Arc<str>>,
    /// Appends under a fence the persister has under way: the run lets go of its lease only
    /// once they are over (see [`Hub::fenced_writes_over`]).
    fenced_writes: usize,
    /// A write is under way (the persister's, or one made at once by a publish): the other
    /// writer leaves what is new to it.
    writing: bool,
    /// Each watcher's id and the seq it takes next, as of its last look at memory: what none of
    /// them has taken is kept (up to [`RETAIN_FOR_WATCHERS`]).
    watchers: Vec<(u64, u64)>,
    /// The id of the next watcher.
    next_watcher: u64,
    /// When (ms since the epoch) the last write that succeeded ended.
    wrote_at: u64,
}

impl HubState {
    /// The last seq a watcher may see: under `sync` (with a store), only what the store has.
    fn visible(&self, stored: bool) -> u64 {
        let kept = self.hole.map_or(self.persisted, |hole| self.persisted.min(hole - 1));
        if stored && (self.durability == Durability::Sync || kept < self.sync_last) {
            kept.min(self.last_seq)
        } else {
            self.last_seq
        }
    }

    /// The last seq the persister may write now: under `exit`, while the run is live, only
    /// what a barrier asked for.
    fn writable(&self) -> u64 {
        if self.durability == Durability::Exit && self.live {
            self.barrier.min(self.last_seq)
        } else {
            self.last_seq
        }
    }
}

impl Hub {
    /// The hub of a session whose stored log ends at `last_seq`. Numbers reserved by an
    /// earlier process are not this hub's to use: its first publish reserves anew, above them.
    pub(crate) fn new(
        session_id: &str,
        store: Option<Arc<dyn SessionStore>>,
        last_seq: u64,
    ) -> Arc<Self> {
        Arc::new(Self {
            session_id: Arc::from(session_id),
            store,
            state: Mutex::new(HubState {
                events: VecDeque::new(),
                last_seq,
                reserved: last_seq,
                reserve_block: RESERVE_BLOCK,
                persisted: last_seq,
                live: false,
                persister: false,
                failure: None,
                refused: 0,
                refusal: None,
                durability: Durability::default(),
                barrier: 0,
                hole: None,
                unnumbered: None,
                sync_last: 0,
                fence: None,
                fence_lost: false,
                run: None,
                fenced_writes: 0,
                writing: false,
                watchers: Vec::new(),
                next_watcher: 0,
                wrote_at: 0,
            }),
            write_now: AtomicBool::new(true),
            published: Notify::new(),
            pending: Notify::new(),
            written: Notify::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        // Updates are short and leave the state consistent at every step.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The seq of the last event numbered.
    pub(crate) fn last_seq(&self) -> u64 {
        self.lock().last_seq
    }

    /// Whether deltas should be merged before numbering: the store is far behind, or, without
    /// a store, the run's log in memory (which keeps every event of the run) is long.
    pub(crate) fn lagging(&self) -> bool {
        let state = self.lock();
        state.events.len() > LAG_EVENTS
            && (self.store.is_none() || state.last_seq - state.persisted > LAG_EVENTS as u64)
    }

    /// A run of this process (`run`) starts publishing, stored as `durability` says, its events
    /// fenced by its lease's holder (`fence`): the persister runs until it ends.
    pub(crate) fn start_run(
        self: &Arc<Self>,
        run: &Arc<str>,
        durability: Durability,
        fence: Option<Arc<str>>,
    ) {
        let spawn = {
            let mut state = self.lock();
            state.live = true;
            state.run = Some(Arc::clone(run));
            state.fence = fence;
            state.fence_lost = false;
            state.unnumbered = None;
            let before = std::mem::replace(&mut state.durability, durability);
            if state.refusal.take().is_some() {
                // Whatever the refused run published is not sent with this run's events.
                state.refused = state.last_seq;
            }
            if let Some(hole) = state.hole.take()
                && before == Durability::Sync
            {
                // A `sync` run's events from its hole on were never shown and will never be
                // stored: they leave memory, so that no later watcher is shown them either.
                while state.events.back().is_some_and(|r| r.seq >= hole) {
                    state.events.pop_back();
                }
                state.sync_last = state.sync_last.min(hole - 1);
            }
            if self.store.is_none() {
                // Nothing else keeps older runs' events: the current run's are enough.
                state.events.clear();
                return;
            }
            !std::mem::replace(&mut state.persister, true)
        };
        if spawn {
            tokio::spawn(persister::persister(Arc::clone(self)));
        }
    }

    /// A write under the run's lease was refused: another process took the run over, and
    /// nothing the run still has to write may reach the store.
    pub(crate) fn fence_lost(&self) {
        self.lock().fence_lost = true;
    }

    /// The run lets go of its lease: unless it was taken over, what it still has to write is
    /// written without the fence (the session is at rest; a later run's writes come after).
    pub(crate) fn release_fence(&self) {
        let mut state = self.lock();
        if !state.fence_lost {
            state.fence = None;
        }
    }

    /// Returns once no append under a fence is under way, or after `within`. A run lets go of
    /// its lease after this: an append sent under the lease and applied after the release would
    /// be refused as if another process had taken the run over, and the run's own events would
    /// be lost.
    pub(crate) async fn fenced_writes_over(&self, within: Duration) {
        let wait = async {
            loop {
                // Registered before looking, so a write after the look wakes us.
                let written = self.written.notified();
                tokio::pin!(written);
                written.as_mut().enable();
                if self.lock().fenced_writes == 0 {
                    return;
                }
                written.await;
            }
        };
        if tokio::time::timeout(within, wait).await.is_err() {
            tracing::warn!(session_id = %self.session_id, "an append under the run's lease is still under way; letting the lease go all the same");
        }
    }

    /// A refusal for good of the events from `first` on, of `run`: `true` if `run` is the run
    /// started here last, whose refusal it is (see the persister). Otherwise the refused events
    /// are an earlier run's tail, which the store will never have: they leave memory (no
    /// watcher is shown them from now on; one waiting behind a `sync` run's tail is shown the
    /// next run's events instead, and its stream ends there without the run's end) and
    /// nothing of the run under way is cut.
    pub(super) fn refused_at(&self, run: &Arc<str>, first: u64) -> bool {
        let mut state = self.lock();
        if state.run.as_ref().is_some_and(|r| Arc::ptr_eq(r, run) || **r == **run) {
            return true;
        }
        let start = first_at_or_after(&state.events, first);
        let count = state
            .events
            .range(start..)
            .take_while(|r| Arc::ptr_eq(&r.run_id, run) || *r.run_id == **run)
            .count();
        let dropped = state.events.drain(start..start + count).next_back().map(|r| r.seq);
        // Nothing is waited for there any more (a barrier of the run under way counts them as
        // done); what failed was the earlier run's write: the next write says how the store is.
        state.refused = state.refused.max(dropped.unwrap_or(0));
        state.failure = None;
        drop(state);
        self.published.notify_waiters();
        self.written.notify_waiters();
        false
    }

    /// The run ended (its last event is published): watchers following it may stop.
    pub(crate) fn end_run(&self) {
        self.lock().live = false;
        self.published.notify_waiters();
        self.pending.notify_one();
    }

    /// Numbers `events` (each with its node id) and makes them visible, reserving numbers in the
    /// store when needed; `events` is left empty (its room kept for the caller's next batch).
    /// Returns the seq of the last one.
    pub(crate) async fn publish(
        &self,
        run_id: &Arc<str>,
        events: &mut Vec<Draft>,
    ) -> Result<u64, StoreError> {
        if events.is_empty() {
            return Ok(self.last_seq());
        }
        // A number is shown only once the store has reserved it: shown without a reservation,
        // it could be given to another event by the next process (this one dying before it
        // stored it). Events that cannot be numbered are not shown, nor is anything the run
        // publishes after them: the run stops, its watchers' streams end without its end, and
        // its result says why.
        if let Err(error) = self.reserve(events.len() as u64).await {
            events.clear();
            self.cut(error.clone());
            return Err(error);
        }
        Ok(self.show(run_id, events))
    }

    /// The current run's events can no longer be numbered: its watchers' streams end.
    fn cut(&self, error: StoreError) {
        self.lock().unnumbered.get_or_insert(error);
        self.published.notify_waiters();
    }

    /// Numbers `events` (leaving it empty), adds them to memory and wakes the persister (when
    /// it may write them) and the watchers (when they may see them).
    fn show(&self, run_id: &Arc<str>, events: &mut Vec<Draft>) -> u64 {
        let (last, persist, visible, now) = {
            let mut guard = self.lock();
            let state = &mut *guard;
            let at = now_ms();
            let mut seq = state.last_seq;
            // Straight into memory: no vector of records per batch.
            state.events.extend(events.drain(..).map(|draft| {
                seq += 1;
                self.record(run_id, seq, at, draft)
            }));
            state.last_seq = seq;
            if state.durability == Durability::Sync {
                state.sync_last = seq;
            }
            let persist = state.writable() == seq;
            let visible = state.visible(self.store.is_some()) == seq;
            // Written at once only when the last write is a while ago (a paced stream): a burst
            // is the persister's to gather, and to merge while it lags.
            let now = (persist
                && self.store.is_some()
                && self.write_now.load(Ordering::Relaxed)
                && !state.writing
                && at.saturating_sub(state.wrote_at) >= GATHER_WITHIN.as_millis() as u64)
                .then(|| Self::take_unpersisted(state))
                .flatten();
            (seq, persist, visible, now.map(|taken| (taken, at)))
        };
        if persist && !now.is_some_and(|((batch, fence), at)| self.write_now(batch, fence, at)) {
            self.pending.notify_one();
        }
        if visible {
            self.published.notify_waiters();
        }
        last
    }

    /// Takes what is new for a writer (marking a write under way), when there is any.
    fn take_unpersisted(state: &mut HubState) -> Option<(Batch, Option<Arc<str>>)> {
        let (batch, fence) = Self::unpersisted_in(state);
        if batch.is_empty() {
            return None;
        }
        state.writing = true;
        state.fenced_writes += usize::from(fence.is_some());
        Some((batch, fence))
    }

    /// Writes `batch` (taken by [`take_unpersisted`](Self::take_unpersisted)) at once, in this
    /// thread, when the store can without waiting ([`SessionStore::append_events_now`]: it keeps
    /// events in memory): a paced stream then wakes no persister per event. `false` when the
    /// persister is to be woken: the store cannot, or refused (the persister writes the batch
    /// again and deals with the refusal), or more is to be written. `at`: when it was published.
    fn write_now(&self, batch: Batch, fence: Option<Arc<str>>, at: u64) -> bool {
        let last = batch.last_seq();
        let written = self.store.as_ref().and_then(|store| {
            store.append_events_now(&self.session_id, batch.as_slice(), fence.as_deref())
        });
        if written.is_none() {
            self.write_now.store(false, Ordering::Relaxed);
        }
        let stored = matches!(written, Some(Ok(())));
        let (wake_watchers, done) = {
            let mut state = self.lock();
            state.writing = false;
            state.fenced_writes -= usize::from(fence.is_some());
            let wake = stored && self.mark_persisted(&mut state, last);
            if stored {
                // The store keeps it in memory: it ended as it began.
                state.wrote_at = at;
            }
            // More published meanwhile by another task, which left it to this write, or the run
            // ended while it was under way (the persister waits to see it before it stops):
            // the persister's turn.
            (wake, state.live && state.writable() <= state.persisted.max(state.refused))
        };
        self.after_write(wake_watchers);
        stored && done
    }

    /// Like [`publish`](Self::publish), but the events are in the store before anyone sees
    /// them (and so is everything published before): for the events that report a run's end.
    pub(crate) async fn publish_durable(
        &self,
        run_id: &Arc<str>,
        mut events: Vec<Draft>,
    ) -> Result<u64, StoreError> {
        let Some(store) = self.store.clone() else {
            return self.publish(run_id, &mut events).await;
        };
        if events.is_empty() {
            return Ok(self.last_seq());
        }
        let persisted = self.persist().await;
        if let Err(error) = self.reserve(events.len() as u64).await {
            // Not shown: see `publish`.
            self.cut(error.clone());
            return Err(error);
        }
        if let Err(error) = persisted {
            // Numbered (reserved), shown all the same: this process's watchers see the run's
            // end; the store may miss it, and the run's result says so.
            self.show(run_id, &mut events);
            return Err(error);
        }
        // Numbered without being shown: the run is the hub's only publisher, so nothing else
        // takes these numbers while they are written.
        let (records, fence) = {
            let state = self.lock();
            (self.number(&state, run_id, events), state.fence.clone())
        };
        let written =
            store.append_events(&self.session_id, records.clone(), fence.as_deref()).await;
        let last = {
            let mut state = self.lock();
            state.last_seq = records.last().map_or(state.last_seq, |r| r.seq);
            state.events.extend(records);
            if state.durability == Durability::Sync {
                state.sync_last = state.last_seq;
            }
            state.last_seq
        };
        match written {
            Ok(()) => self.persisted_up_to(last),
            // Shown all the same; the persister tries them again.
            Err(_) => self.pending.notify_one(),
        }
        self.published.notify_waiters();
        written.map(|()| last)
    }

    /// Makes sure numbers are reserved for `count` more events.
    async fn reserve(&self, count: u64) -> Result<(), StoreError> {
        let Some(store) = &self.store else { return Ok(()) };
        let (short, block) = {
            let state = self.lock();
            if let Some(error) = &state.unnumbered {
                return Err(error.clone());
            }
            if let Some(refusal) = &state.refusal {
                // The store will never have this run's log whole: the run stops (at its next
                // step boundary), reporting why.
                return Err(refusal.clone());
            }
            ((state.last_seq + count).saturating_sub(state.reserved), state.reserve_block)
        };
        if short == 0 {
            return Ok(());
        }
        let block = short.max(block);
        // A store that fails for a moment is asked again, briefly: without numbers the run stops.
        let mut backoff = RESERVE_RETRY;
        let first = loop {
            match store.reserve_seqs(&self.session_id, block).await {
                Ok(first) => break first,
                Err(error) if error.is_transient() && backoff <= RESERVE_RETRY * 4 => {
                    tracing::warn!(session_id = %self.session_id, %error, "reserving event numbers failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff *= 2;
                }
                Err(error) => return Err(error),
            }
        };
        let mut state = self.lock();
        // Numbering goes on above everything reserved, in any process.
        if first > state.last_seq + 1 {
            state.last_seq = first - 1;
        }
        state.reserved = state.reserved.max(first + block - 1);
        state.reserve_block = (block * 2).min(MAX_RESERVE_BLOCK);
        Ok(())
    }

    /// The records of `events`, numbered after the last seq.
    fn number(
        &self,
        state: &HubState,
        run_id: &Arc<str>,
        events: Vec<Draft>,
    ) -> Vec<Arc<EventRecord>> {
        let at = now_ms();
        let mut seq = state.last_seq;
        events
            .into_iter()
            .map(|draft| {
                seq += 1;
                self.record(run_id, seq, at, draft)
            })
            .collect()
    }

    /// The record of `draft`, numbered `seq`.
    fn record(&self, run_id: &Arc<str>, seq: u64, at: u64, draft: Draft) -> Arc<EventRecord> {
        Arc::new(EventRecord {
            session_id: Arc::clone(&self.session_id),
            run_id: Arc::clone(run_id),
            seq,
            node_id: draft.node_id,
            at,
            event: draft.event,
            messages: draft.messages,
        })
    }

    /// Waits until everything published so far is in the store.
    pub(crate) async fn persist(&self) -> Result<(), StoreError> {
        if self.store.is_none() {
            return Ok(());
        }
        let target = {
            let mut state = self.lock();
            state.barrier = state.barrier.max(state.last_seq);
            state.last_seq
        };
        loop {
            // Registered before looking, so a write after the look wakes us.
            let written = self.written.notified();
            tokio::pin!(written);
            written.as_mut().enable();
            {
                let state = self.lock();
                if let Some(refusal) = state.refusal.clone() {
                    return Err(refusal);
                }
                // Refused seqs of an earlier run are never stored: not waited for.
                if state.persisted.max(state.refused) >= target {
                    return Ok(());
                }
                if let Some((failure, of)) = &state.failure
                    && state.run.as_deref() == Some(&**of)
                {
                    return Err(failure.clone());
                }
            }
            self.pending.notify_one();
            // The persister reports every write, failed or not.
            written.await;
        }
    }

    /// The events not yet persisted, and the fence to write them under, for the persister: none
    /// while a write made at once by a publish is under way (it leaves the rest to the
    /// persister). Taking some, the persister is writing until it drops its [`Writing`].
    fn unpersisted(&self) -> (Vec<Arc<EventRecord>>, Option<Arc<str>>) {
        let mut state = self.lock();
        if state.writing {
            return (Vec::new(), None);
        }
        let (batch, fence) = Self::unpersisted_in(&mut state);
        let batch = batch.into_vec();
        state.writing = !batch.is_empty();
        (batch, fence)
    }

    /// See [`unpersisted`](Self::unpersisted).
    fn unpersisted_in(state: &mut HubState) -> (Batch, Option<Arc<str>>) {
        if state.refusal.is_some() {
            // The store refused this run's events: its later ones are not sent either (the run
            // cannot be durable, and says so), only those of a run started afterwards.
            state.refused = state.last_seq;
        }
        let from = state.persisted.max(state.refused);
        let upto = state.writable();
        if from >= upto {
            return (Batch::Many(Vec::new()), None);
        }
        // They are the last ones (but for any a barrier did not ask for yet): counted from the
        // back, looking at no older record.
        let newer = state.events.iter().rev().take_while(|r| r.seq > upto).count();
        let end = state.events.len() - newer;
        let count = state.events.range(..end).rev().take_while(|r| r.seq > from).count();
        let batch = if count == 1 {
            // A paced stream's one event: no vector for it.
            Batch::One(Arc::clone(&state.events[end - 1]))
        } else {
            Batch::Many(state.events.range(end - count..end).cloned().collect())
        };
        (batch, state.fence.clone())
    }

    /// The store has everything up to `seq`: trims memory to the retention window.
    fn persisted_up_to(&self, seq: u64) {
        let wake_watchers = {
            let mut state = self.lock();
            state.wrote_at = now_ms();
            self.mark_persisted(&mut state, seq)
        };
        self.after_write(wake_watchers);
    }

    /// Wakes who waits for a write: watchers too when they may see more now.
    fn after_write(&self, wake_watchers: bool) {
        if wake_watchers {
            self.published.notify_waiters();
        }
        self.written.notify_waiters();
    }

    /// See [`persisted_up_to`](Self::persisted_up_to): `true` when watchers may see more.
    fn mark_persisted(&self, state: &mut HubState, seq: u64) -> bool {
        // Under `sync` (or behind a `sync` run's tail), what watchers may see grows with the
        // store, not with the publishes.
        let wake_watchers = self.store.is_some()
            && (state.durability == Durability::Sync || state.persisted < state.sync_last);
        state.persisted = state.persisted.max(seq);
        state.failure = None;
        // Every watcher has taken what is before this.
        let taken = state.watchers.iter().map(|&(_, next)| next).min().unwrap_or(u64::MAX);
        while let Some(front) = state.events.front().map(|r| r.seq)
            && front <= state.persisted
            && (state.events.len() > RETAIN_FOR_WATCHERS
                || (state.events.len() > RETAIN && front < taken))
        {
            state.events.pop_front();
        }
        // A burst (a store that lagged) does not leave its room allocated for the session's life.
        let keep = 2 * RETAIN_FOR_WATCHERS.max(state.events.len());
        if state.events.capacity() > 2 * keep {
            state.events.shrink_to(keep);
        }
        wake_watchers
    }
}

/// The index of the first event with seq `seq` or above. Seqs in memory are consecutive except
/// across a reservation gap: the index is found by arithmetic (one record looked at) and, only
/// across a gap, by a binary search (each step a record elsewhere in memory).
fn first_at_or_after(events: &VecDeque<Arc<EventRecord>>, seq: u64) -> usize {
    let Some(front) = events.front() else { return 0 };
    let Some(offset) = seq.checked_sub(front.seq) else { return 0 };
    match usize::try_from(offset).ok().and_then(|i| Some((i, events.get(i)?))) {
        Some((i, record)) if record.seq == seq => i,
        None if events.back().is_some_and(|r| r.seq < seq) => events.len(),
        _ => events.partition_point(|r| r.seq < seq),
    }
}

/// The index of the event with seq `seq`, found by arithmetic from the back (where live
/// watchers read): `None` when that record is not `seq` (a reservation gap, or not in memory).
fn last_at_or_after(events: &VecDeque<Arc<EventRecord>>, seq: u64) -> Option<usize> {
    let back = events.back()?;
    let from_back = usize::try_from(back.seq.checked_sub(seq)?).ok()?;
    let i = events.len().checked_sub(1 + from_back)?;
    (events.get(i)?.seq == seq).then_some(i)
}

/// Events taken for a write: one (a paced stream's, as a rule) is not put in a vector.
enum Batch {
    One(Arc<EventRecord>),
    Many(Vec<Arc<EventRecord>>),
}

impl Batch {
    fn is_empty(&self) -> bool {
        matches!(self, Self::Many(records) if records.is_empty())
    }

    fn as_slice(&self) -> &[Arc<EventRecord>] {
        match self {
            Self::One(record) => std::slice::from_ref(record),
            Self::Many(records) => records,
        }
    }

    /// The seq of the last one (0 when empty).
    fn last_seq(&self) -> u64 {
        self.as_slice().last().map_or(0, |r| r.seq)
    }

    fn into_vec(self) -> Vec<Arc<EventRecord>> {
        match self {
            Self::One(record) => vec![record],
            Self::Many(records) => records,
        }
    }
}
