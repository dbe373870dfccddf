//! A run's own appends against its own lease (found by the simulation on SQLite, where a write
//! is under way while the run goes on): the persister's append, sent under the run's lease and
//! still under way when the run ends, must not be refused because the run let its own lease go
//! meanwhile; and when an earlier run's tail is refused for good after the next run started,
//! the refusal is the earlier run's: the next runs go on, and a stream of the earlier `sync` run
//! is never shown what the store will never have.

#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::Recording;
use futures::StreamExt;
use weft_agent::{Agent, Durability, ExecuteError, RunOptions, SessionHandle, SessionOptions};
use weft_core::{AgentEvent, EventRecord, Input, SessionStore, StoreError, StoreFuture};
use weft_llm::faux::FauxTurn;
use weft_store::SqliteStore;

/// The run's view of the store: the first append fails for a moment (nothing written); the
/// second takes `delay` before it reaches the store, or, with `refuse_second`, waits for `go`
/// and is refused for good (nothing written); every later one passes.
struct Appends {
    inner: Arc<dyn SessionStore>,
    count: AtomicUsize,
    delay: Duration,
    refuse_second: AtomicBool,
    second_held: tokio::sync::Notify,
    go: tokio::sync::Semaphore,
}

impl Appends {
    fn new(inner: Arc<dyn SessionStore>, delay: Duration, refuse_second: bool) -> Arc<Self> {
        Arc::new(Self {
            inner,
            count: AtomicUsize::new(0),
            delay,
            refuse_second: AtomicBool::new(refuse_second),
            second_held: tokio::sync::Notify::new(),
            go: tokio::sync::Semaphore::new(0),
        })
    }
}

#[rustfmt::skip]
impl weft_core::ForwardingStore for Appends {
    fn inner(&self) -> &dyn SessionStore { &*self.inner }
    fn append_events<'a>(&'a self, id: &'a str, events: Vec<Arc<EventRecord>>, lease: Option<&'a str>) -> StoreFuture<'a, ()> {
        let n = self.count.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            match n {
                0 => Err(StoreError::backend("the disk is full (for a moment)")),
                1 if self.refuse_second.load(Ordering::SeqCst) => {
                    self.second_held.notify_one();
                    let _pass = self.go.acquire().await;
                    Err(StoreError::Invalid("refused by the test".into()))
                }
                1 => {
                    tokio::time::sleep(self.delay).await;
                    self.inner.append_events(id, events, lease).await
                }
                _ => self.inner.append_events(id, events, lease).await,
            }
        })
    }
}

/// A model answer streamed over about `chunks` × 10 ms.
fn slow_text(text: &str) -> FauxTurn {
    FauxTurn::text(text).with_chunk_size(2).with_delay_ms(10)
}

async fn agent(store: Arc<dyn SessionStore>, turns: Vec<FauxTurn>) -> (Agent, SessionHandle) {
    let agent = Agent::builder(Recording::new(turns))
        .store(store)
        .lease_ttl(Duration::from_secs(30))
        .sweep_interval(Duration::ZERO)
        .build()
        .unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    (agent, session)
}

/// The stored log once it holds `ends` run ends (or after 10 s).
async fn stored_log(store: &Arc<dyn SessionStore>, id: &str, ends: usize) -> Vec<Arc<EventRecord>> {
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let log = store.read_events(id, 0, 100_000).await.unwrap();
        let stored_ends =
            log.iter().filter(|r| matches!(r.event, AgentEvent::SessionEnd { .. })).count();
        if stored_ends >= ends || tokio::time::Instant::now() > until {
            return log;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_under_way_when_the_run_lets_its_lease_go_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let file: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(dir.path().join("weft.db")).await.unwrap());
    // The first append fails; the persister's retry, under the run's lease, takes 1.5 s: the
    // run (~600 ms of text) ends while it is under way.
    let store = Appends::new(Arc::clone(&file), Duration::from_millis(1500), false);
    let text = "weft warp loom shuttle thread heddle reed ".repeat(3);
    let (agent, session) = agent(store.clone(), vec![slow_text(&text)]).await;
    let stream = agent.execute(&session, Input::text("Question?")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(20), stream.result()).await.unwrap();

    // The run's events are all stored, its end included, numbered without a gap.
    let log = stored_log(&file, &session.id(), 1).await;
    let kinds: Vec<_> = log.iter().map(|r| r.event.kind()).collect();
    assert_eq!(
        kinds.last().copied(),
        Some("session_end"),
        "the run's end is not stored: {kinds:?}"
    );
    let seqs: Vec<u64> = log.iter().map(|r| r.seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "a gap in the stored log: {seqs:?}");
    assert!(store.count.load(Ordering::SeqCst) >= 3, "the scenario did not happen");
    // And the session takes the next input.
    let next = agent.execute(&session, Input::text("And?")).await;
    assert!(!matches!(next, Err(ExecuteError::AlreadyRunning(_))), "the session is held");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_runs_tail_refused_after_the_next_run_started_is_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let file: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(dir.path().join("weft.db")).await.unwrap());
    let store = Appends::new(Arc::clone(&file), Duration::ZERO, true);
    let turns =
        vec![slow_text("The first answer."), FauxTurn::text("Two."), FauxTurn::text("Three.")];
    let (agent, session) = agent(store.clone(), turns).await;

    // R1, `sync`: its first append fails, its retry is held (then refused). Its stream shows
    // only what the store has: a task reads it to its end.
    let sync = RunOptions::default().durability(Durability::Sync);
    let r1 = agent.execute_with(&session, Input::text("One?"), sync).await.unwrap();
    let r1_reader = tokio::spawn(async move {
        let mut records = r1.records();
        let mut seen = Vec::new();
        while let Some(record) = records.next().await {
            seen.push(record.seq);
        }
        seen
    });
    tokio::time::timeout(Duration::from_secs(10), store.second_held.notified()).await.unwrap();

    // R2 (`exit`) starts once R1 has let its lease go, then R1's tail is refused for good, then
    // R3 (`async`) runs.
    let start = |durability: Durability, text: &'static str| {
        let (agent, session) = (agent.clone(), session.clone());
        async move {
            let options = RunOptions::default().durability(durability);
            loop {
                match agent.execute_with(&session, Input::text(text), options).await {
                    Err(ExecuteError::AlreadyRunning(_)) => {
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    started => break started.unwrap(),
                }
            }
        }
    };
    let r2 = tokio::time::timeout(Duration::from_secs(20), start(Durability::Exit, "Two?"))
        .await
        .unwrap();
    // R2's end is stored (its answer is in the session) before R1's tail is refused: R2 then
    // waits for its events while R1's failed write is still being retried. That failure is
    // R1's, not R2's answer: R2 waits for the retry's.
    let id = session.id();
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            let stored = file.load(&id).await.unwrap().unwrap();
            let answered = stored
                .messages
                .iter()
                .any(|m| matches!(m, weft_core::Message::Assistant(a) if a.text() == "Two."));
            if answered {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("R2's end was never stored");
    store.go.add_permits(1);
    let r2 =
        tokio::time::timeout(Duration::from_secs(20), r2.result()).await.expect("R2 never ended");
    let r3 = tokio::time::timeout(Duration::from_secs(20), async {
        start(Durability::Async, "Three?").await.result().await
    })
    .await
    .expect("R3 never ended");

    // R1's stream ended, showing nothing the store does not have.
    let seen = tokio::time::timeout(Duration::from_secs(10), r1_reader).await.unwrap().unwrap();
    let log = stored_log(&file, &session.id(), 2).await;
    let stored: std::collections::HashSet<u64> = log.iter().map(|r| r.seq).collect();
    let unstored: Vec<u64> = seen.iter().copied().filter(|s| !stored.contains(s)).collect();
    assert!(unstored.is_empty(), "R1's stream (sync) showed unstored seqs {unstored:?}");
    // The refusal was R1's: R2 and R3 were not cut by it. (With the fix undone, this is what
    // fails here: R2 is cut. The simulation's seed 19 went one step further, to a `sync` stream
    // shown R1's unstored tail, which the check above guards; this scenario does not reach it.)
    for (name, run) in [("R2", &r2), ("R3", &r3)] {
        assert!(run.error.is_none(), "{name} was cut by R1's refusal: {:?}", run.error);
    }
}
