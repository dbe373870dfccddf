//! A [`SessionStore`] that fails on purpose ([`FaultStore`]): transient errors (before or after
//! the write took effect), permanent refusals, latency, a hang, a writer that dies — each drawn
//! from a seeded generator at every call, with the odds of the current [`FaultPlan`].

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use weft_core::{
    Checkpoint, Commit, EventRecord, ForwardingStore, SessionHead, SessionStore, StoreError,
    StoreFuture, StoredSession,
};

/// The odds of each fault, per thousand calls of the kind it applies to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// A write or read fails transiently, and nothing was written.
    pub transient: u32,
    /// A write took effect, but its answer is lost: a transient error is returned.
    pub lost_reply: u32,
    /// A write is refused for good (an append as invalid, a commit as a conflict).
    pub refusal: u32,
    /// A call takes up to a second longer.
    pub latency: u32,
    /// A call never answers.
    pub hang: u32,
    /// The writer dies: this and every later write of the life answer `Closed`.
    pub writer_death: u32,
}

impl FaultPlan {
    /// No faults.
    pub fn calm() -> Self {
        Self::default()
    }

    /// Odds drawn from `rng`: some lives are calm, most are rough, a few very rough.
    pub fn seeded(rng: &mut fastrand::Rng) -> Self {
        let mut plan = Self::seeded_odds(rng);
        // `WEFT_SIM_OFF=hang,lost` turns kinds of faults off, to find which one a failure
        // needs (the seed's other choices stay the same).
        let off = std::env::var("WEFT_SIM_OFF").unwrap_or_default();
        for (name, odds) in [
            ("transient", &mut plan.transient),
            ("lost", &mut plan.lost_reply),
            ("refusal", &mut plan.refusal),
            ("latency", &mut plan.latency),
            ("hang", &mut plan.hang),
            ("death", &mut plan.writer_death),
        ] {
            if off.split(',').any(|o| o.trim() == name) {
                *odds = 0;
            }
        }
        plan
    }

    fn seeded_odds(rng: &mut fastrand::Rng) -> Self {
        match rng.u8(..10) {
            0..=1 => Self::calm(),
            2..=8 => Self {
                transient: rng.u32(0..40),
                lost_reply: rng.u32(0..15),
                refusal: rng.u32(0..4),
                latency: rng.u32(0..80),
                hang: rng.u32(0..3),
                writer_death: rng.u32(0..2),
            },
            _ => Self {
                transient: rng.u32(50..200),
                lost_reply: rng.u32(10..60),
                refusal: rng.u32(0..10),
                latency: rng.u32(50..200),
                hang: rng.u32(0..6),
                writer_death: rng.u32(0..4),
            },
        }
    }
}

/// How many faults of each kind were injected.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FaultCounts {
    /// Transient failures, nothing written.
    pub transient: u64,
    /// Writes applied whose answer was lost.
    pub lost_reply: u64,
    /// Permanent refusals.
    pub refusal: u64,
    /// Delayed calls.
    pub latency: u64,
    /// Calls that never answered.
    pub hang: u64,
    /// Writers that died.
    pub writer_death: u64,
}

impl FaultCounts {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &Self) {
        self.transient += other.transient;
        self.lost_reply += other.lost_reply;
        self.refusal += other.refusal;
        self.latency += other.latency;
        self.hang += other.hang;
        self.writer_death += other.writer_death;
    }

    /// Every fault injected.
    pub fn total(&self) -> u64 {
        self.transient
            + self.lost_reply
            + self.refusal
            + self.latency
            + self.hang
            + self.writer_death
    }
}

/// What kind of call a fault is drawn for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// A commit (refused as a conflict).
    Commit,
    /// An append of events (refused as invalid).
    Append,
    /// Another write (reservations, checkpoints, leases): never refused.
    Write,
    /// A read: transient failures and latency only.
    Read,
}

/// What happens to one call.
enum Fault {
    Transient,
    LostReply,
    Refuse,
    Latency(Duration),
    Hang,
    Dead,
}

struct State {
    rng: fastrand::Rng,
    plan: FaultPlan,
    dead: bool,
    counts: FaultCounts,
}

/// A store that passes every call on to `inner`, except the faults its plan draws.
pub struct FaultStore {
    inner: Arc<dyn SessionStore>,
    /// Shared with the same history's stores over `inner` reopened (see [`Self::over`]).
    state: Arc<Mutex<State>>,
}

impl FaultStore {
    /// A calm store over `inner`, drawing faults from `seed` once a plan is set.
    pub fn new(inner: Arc<dyn SessionStore>, seed: u64) -> Arc<Self> {
        Arc::new(Self {
            inner,
            state: Arc::new(Mutex::new(State {
                rng: fastrand::Rng::with_seed(seed),
                plan: FaultPlan::calm(),
                dead: false,
                counts: FaultCounts::default(),
            })),
        })
    }

    /// The same faults over `inner` (the store reopened by a new process): the plan, the
    /// generator and the counts go on from this one's.
    pub fn over(&self, inner: Arc<dyn SessionStore>) -> Arc<Self> {
        Arc::new(Self { inner, state: Arc::clone(&self.state) })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Faults from now on follow `plan`; a dead writer is alive again (a new process).
    pub fn set_plan(&self, plan: FaultPlan) {
        let mut state = self.lock();
        state.plan = plan;
        state.dead = false;
    }

    /// The faults injected so far.
    pub fn counts(&self) -> FaultCounts {
        self.lock().counts
    }

    fn draw(&self, call: Call) -> Option<Fault> {
        let mut guard = self.lock();
        let state = &mut *guard;
        let write = call != Call::Read;
        if write && state.dead {
            return Some(Fault::Dead);
        }
        let plan = state.plan;
        if plan == FaultPlan::calm() {
            return None;
        }
        let roll = state.rng.u32(..1000);
        let mut at = 0;
        let mut hit = |odds: u32| {
            at += odds;
            roll < at
        };
        let fault = if hit(plan.transient) {
            state.counts.transient += 1;
            Fault::Transient
        } else if write && hit(plan.lost_reply) {
            state.counts.lost_reply += 1;
            Fault::LostReply
        } else if matches!(call, Call::Commit | Call::Append) && hit(plan.refusal) {
            state.counts.refusal += 1;
            Fault::Refuse
        } else if hit(plan.latency) {
            state.counts.latency += 1;
            Fault::Latency(Duration::from_millis(state.rng.u64(1..1000)))
        } else if hit(plan.hang) {
            state.counts.hang += 1;
            Fault::Hang
        } else if write && hit(plan.writer_death) {
            state.counts.writer_death += 1;
            state.dead = true;
            Fault::Dead
        } else {
            return None;
        };
        Some(fault)
    }

    /// `call` made through the fault drawn for it.
    fn through<'a, T: Send + 'a>(
        &'a self,
        kind: Call,
        refusal: impl FnOnce() -> StoreError,
        call: impl FnOnce() -> StoreFuture<'a, T>,
    ) -> StoreFuture<'a, T> {
        let Some(fault) = self.draw(kind) else { return call() };
        let failed =
            |error: StoreError| -> StoreFuture<'a, T> { Box::pin(std::future::ready(Err(error))) };
        match fault {
            Fault::Transient => failed(StoreError::backend("injected: the store failed")),
            Fault::Refuse => failed(refusal()),
            Fault::Dead => failed(StoreError::Closed("injected: the writer died".into())),
            Fault::Hang => Box::pin(std::future::pending()),
            Fault::Latency(delay) => {
                let call = call();
                Box::pin(async move {
                    tokio::time::sleep(delay).await;
                    call.await
                })
            }
            Fault::LostReply => {
                let call = call();
                Box::pin(async move {
                    let _ = call.await;
                    Err(StoreError::backend("injected: the connection was cut after the write"))
                })
            }
        }
    }
}

type Refusal = fn() -> StoreError;

fn invalid() -> StoreError {
    StoreError::Invalid("injected: refused".into())
}

fn unreachable_refusal() -> StoreError {
    StoreError::backend("injected: the store failed")
}

#[rustfmt::skip]
impl ForwardingStore for FaultStore {
    fn inner(&self) -> &dyn SessionStore { &*self.inner }
    fn create<'a>(&'a self, head: SessionHead, messages: weft_core::History) -> StoreFuture<'a, ()> {
        self.through(Call::Write, unreachable_refusal as Refusal, || self.inner.create(head, messages))
    }
    fn load<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredSession>> {
        self.through(Call::Read, unreachable_refusal as Refusal, || self.inner.load(id))
    }
    fn head<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<SessionHead>> {
        self.through(Call::Read, unreachable_refusal as Refusal, || self.inner.head(id))
    }
    fn commit<'a>(&'a self, commit: Commit) -> StoreFuture<'a, ()> {
        let conflict = {
            let (session_id, expected) = (commit.head.id.clone(), commit.expected_version);
            move || StoreError::Conflict { session_id, expected, found: expected + 1 }
        };
        self.through(Call::Commit, conflict, || self.inner.commit(commit))
    }
    fn reserve_seqs<'a>(&'a self, id: &'a str, count: u64) -> StoreFuture<'a, u64> {
        self.through(Call::Write, unreachable_refusal as Refusal, || self.inner.reserve_seqs(id, count))
    }
    fn append_events<'a>(&'a self, id: &'a str, events: Vec<Arc<EventRecord>>, lease: Option<&'a str>) -> StoreFuture<'a, ()> {
        self.through(Call::Append, invalid as Refusal, || self.inner.append_events(id, events, lease))
    }
    fn read_events<'a>(&'a self, id: &'a str, after: u64, limit: usize) -> StoreFuture<'a, Vec<Arc<EventRecord>>> {
        self.through(Call::Read, unreachable_refusal as Refusal, || self.inner.read_events(id, after, limit))
    }
    fn put_checkpoint<'a>(&'a self, checkpoint: Checkpoint) -> StoreFuture<'a, ()> {
        self.through(Call::Write, unreachable_refusal as Refusal, || self.inner.put_checkpoint(checkpoint))
    }
    fn acquire_lease<'a>(&'a self, id: &'a str, holder: &'a str, ttl: Duration) -> StoreFuture<'a, bool> {
        self.through(Call::Write, unreachable_refusal as Refusal, || self.inner.acquire_lease(id, holder, ttl))
    }
    fn renew_lease<'a>(&'a self, id: &'a str, holder: &'a str, ttl: Duration) -> StoreFuture<'a, bool> {
        self.through(Call::Write, unreachable_refusal as Refusal, || self.inner.renew_lease(id, holder, ttl))
    }
    fn release_lease<'a>(&'a self, id: &'a str, holder: &'a str) -> StoreFuture<'a, ()> {
        self.through(Call::Write, unreachable_refusal as Refusal, || self.inner.release_lease(id, holder))
    }
}
