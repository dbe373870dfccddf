//! Helpers shared by the agent's integration tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use weft_agent::{Agent, ExecuteResult, SessionHandle};
use weft_core::{
    AgentEvent, Commit, EventRecord, Input, Message, SessionStore, StoreError, StoreFuture,
    StoredSession,
};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_llm::{CancellationToken, ModelRequest, Provider, ProviderStream};

/// A faux provider that also records every request it is sent.
#[derive(Clone)]
pub struct Recording {
    pub faux: Arc<FauxProvider>,
    pub requests: Arc<Mutex<Vec<ModelRequest>>>,
}

impl Recording {
    pub fn new(turns: impl IntoIterator<Item = FauxTurn>) -> Self {
        Self {
            faux: Arc::new(FauxProvider::new(FauxScript::new(turns))),
            requests: Arc::new(Mutex::new(Vec::new())),
        }
    }

    pub fn calls(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    pub fn last_request(&self) -> ModelRequest {
        self.requests.lock().unwrap().last().cloned().expect("no request")
    }
}

impl Provider for Recording {
    fn name(&self) -> &str {
        "faux"
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ProviderStream {
        self.requests.lock().unwrap().push(request.clone());
        self.faux.stream(request, cancel)
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
pub struct Query {
    #[allow(dead_code)]
    q: String,
}

/// A tool `charge` (`{"q": string}`) that never finishes: a process "dies" in it.
pub fn hang() -> impl weft_agent::Tool {
    weft_agent::tool_fn("charge", "Charges a card", |_: Query| async move {
        std::future::pending::<()>().await;
        Ok::<_, String>(String::new())
    })
}

/// Runs `input` to its end, collecting every event.
pub async fn run(
    agent: &Agent,
    session: &SessionHandle,
    input: impl Into<Input>,
) -> (Vec<AgentEvent>, ExecuteResult) {
    agent.execute(session, input).await.expect("input accepted").collect_all().await
}

/// The `type` tags of `events`.
pub fn kinds(events: &[AgentEvent]) -> Vec<&'static str> {
    events.iter().map(AgentEvent::kind).collect()
}

/// The tags of the events the agent plan defines (nodes and steps left out).
pub fn plan_kinds(events: &[AgentEvent]) -> Vec<&'static str> {
    events.iter().filter(|e| e.is_plan_event()).map(AgentEvent::kind).collect()
}

/// The tool results among `messages`, as (text, is_error), in order.
pub fn tool_results<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Vec<(String, bool)> {
    messages
        .into_iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((r.text_content(), r.is_error)),
            _ => None,
        })
        .collect()
}

/// A real store seen through a spy: counts the event writes it is asked for and may delay the
/// first lease acquisition and the first sweep (to fix the order of two awaits that race in
/// real life). Everything else goes straight to `inner`.
pub struct Spy {
    pub inner: Arc<dyn SessionStore>,
    pub appends: AtomicUsize,
    /// How many of the next `append_events` calls to refuse (as a store refusing a record
    /// does), without passing them on.
    pub refuse_appends: AtomicUsize,
    /// While set, `load` fails (as an unreachable store does).
    pub fail_loads: std::sync::atomic::AtomicBool,
    /// While set, a commit that puts the session at rest (a run's end) fails as a store that
    /// cannot write does (a full disk, a cut connection): transiently, nothing written.
    pub fail_ends: std::sync::atomic::AtomicBool,
    /// While set, such a commit fails as a store whose writer has stopped does.
    pub close_ends: std::sync::atomic::AtomicBool,
    /// While set, every write fails as on a full disk (transiently, nothing written): commits,
    /// reservations, appends and leases. Reads still answer.
    pub fail_writes: std::sync::atomic::AtomicBool,
    /// While set, reserving event numbers fails for good (everything else answers).
    pub fail_reserves: std::sync::atomic::AtomicBool,
    /// How many commits the store was sent.
    pub commits: AtomicUsize,
    acquires: AtomicUsize,
    dues: AtomicUsize,
    first_acquire_delay: Duration,
    first_due_delay: Duration,
    release_delay: Duration,
}

impl Spy {
    pub fn new(inner: Arc<dyn SessionStore>) -> Self {
        Self {
            inner,
            appends: AtomicUsize::new(0),
            refuse_appends: AtomicUsize::new(0),
            fail_loads: std::sync::atomic::AtomicBool::new(false),
            fail_ends: std::sync::atomic::AtomicBool::new(false),
            fail_reserves: std::sync::atomic::AtomicBool::new(false),
            close_ends: std::sync::atomic::AtomicBool::new(false),
            fail_writes: std::sync::atomic::AtomicBool::new(false),
            commits: AtomicUsize::new(0),
            acquires: AtomicUsize::new(0),
            dues: AtomicUsize::new(0),
            first_acquire_delay: Duration::ZERO,
            first_due_delay: Duration::ZERO,
            release_delay: Duration::ZERO,
        }
    }

    /// Every `release_lease` takes `delay` before it reaches the store.
    pub fn slow_release(mut self, delay: Duration) -> Self {
        self.release_delay = delay;
        self
    }

    /// The first `acquire_lease` takes `acquire`, the first `due_sessions` takes `due`.
    pub fn slow_first(mut self, acquire: Duration, due: Duration) -> Self {
        self.first_acquire_delay = acquire;
        self.first_due_delay = due;
        self
    }

    /// How many `append_events` calls the store was sent.
    pub fn appends(&self) -> usize {
        self.appends.load(Ordering::SeqCst)
    }
}

/// The answer of a store whose disk is full.
fn disk_full<'a, T: Send + 'a>() -> StoreFuture<'a, T> {
    Box::pin(std::future::ready(Err(StoreError::backend("disk full, by the test"))))
}

/// `delay` before `call`, if this is the first call counted by `counter`.
fn first_delayed<'a, T: Send + 'a>(
    counter: &AtomicUsize,
    delay: Duration,
    call: StoreFuture<'a, T>,
) -> StoreFuture<'a, T> {
    let first = counter.fetch_add(1, Ordering::SeqCst) == 0;
    Box::pin(async move {
        if first && !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        call.await
    })
}

/// Passes every call on to `inner`, except where a switch above says otherwise.
#[rustfmt::skip]
impl weft_core::ForwardingStore for Spy {
    fn inner(&self) -> &dyn SessionStore { &*self.inner }
    fn load<'a>(&'a self, id: &'a str) -> StoreFuture<'a, Option<StoredSession>> {
        if self.fail_loads.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(StoreError::backend("unreachable, by the test"))));
        }
        self.inner.load(id)
    }
    fn commit<'a>(&'a self, commit: Commit) -> StoreFuture<'a, ()> {
        self.commits.fetch_add(1, Ordering::SeqCst);
        if self.fail_writes.load(Ordering::SeqCst) {
            return disk_full();
        }
        let resting = commit.head.status != weft_core::SessionStatus::Running;
        if resting && self.close_ends.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(StoreError::Closed("the writer has stopped, by the test".into()))));
        }
        if resting && self.fail_ends.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(StoreError::backend("disk full, by the test"))));
        }
        self.inner.commit(commit)
    }
    fn reserve_seqs<'a>(&'a self, id: &'a str, count: u64) -> StoreFuture<'a, u64> {
        if self.fail_writes.load(Ordering::SeqCst) {
            return disk_full();
        }
        if self.fail_reserves.load(Ordering::SeqCst) {
            return Box::pin(std::future::ready(Err(StoreError::Invalid("no numbers, by the test".into()))));
        }
        self.inner.reserve_seqs(id, count)
    }
    fn append_events<'a>(&'a self, id: &'a str, events: Vec<Arc<EventRecord>>, lease: Option<&'a str>) -> StoreFuture<'a, ()> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        if self.fail_writes.load(Ordering::SeqCst) {
            return disk_full();
        }
        let refuse = self.refuse_appends.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_ok();
        if refuse {
            return Box::pin(std::future::ready(Err(StoreError::Invalid("refused by the test".into()))));
        }
        self.inner.append_events(id, events, lease)
    }
    fn acquire_lease<'a>(&'a self, id: &'a str, holder: &'a str, ttl: Duration) -> StoreFuture<'a, bool> {
        if self.fail_writes.load(Ordering::SeqCst) {
            return disk_full();
        }
        first_delayed(&self.acquires, self.first_acquire_delay, self.inner.acquire_lease(id, holder, ttl))
    }
    fn renew_lease<'a>(&'a self, id: &'a str, holder: &'a str, ttl: Duration) -> StoreFuture<'a, bool> {
        if self.fail_writes.load(Ordering::SeqCst) {
            return disk_full();
        }
        self.inner.renew_lease(id, holder, ttl)
    }
    fn release_lease<'a>(&'a self, id: &'a str, holder: &'a str) -> StoreFuture<'a, ()> {
        if self.fail_writes.load(Ordering::SeqCst) {
            return disk_full();
        }
        let (delay, release) = (self.release_delay, self.inner.release_lease(id, holder));
        Box::pin(async move {
            tokio::time::sleep(delay).await;
            release.await
        })
    }
    fn due_sessions<'a>(&'a self, now: u64, limit: usize) -> StoreFuture<'a, Vec<String>> {
        first_delayed(&self.dues, self.first_due_delay, self.inner.due_sessions(now, limit))
    }
}
