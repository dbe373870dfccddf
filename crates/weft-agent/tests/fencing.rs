//! No run is executed by two replicas at once: every commit of a run carries its lease's holder
//! (the fencing token), and the store refuses it once another replica has taken the lease over.
//!
//! Replica A stalls in the middle of a run (its lease renewals hang, as in a long pause of the
//! process); its lease expires and replica B, on the same SQLite file, takes the run over. In
//! the moment between B's taking the lease and B's first commit, A wakes up and goes on: its
//! commit is refused (without the fence it would be taken, A would finish the run with its own
//! answer, and B's recovery would then be the one refused), and so are its events (appends are
//! fenced too). B's recovery stores its answer.

#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use common::Recording;
use weft_agent::{Agent, SessionOptions};
use weft_core::{Commit, Input, Message, SessionStatus, SessionStore, StoreFuture};
use weft_llm::faux::FauxTurn;
use weft_store::SqliteStore;

/// Replica A's view of the store: its lease renewals hang while `stalled` is set.
struct Stalling {
    inner: Arc<dyn SessionStore>,
    stalled: AtomicBool,
}

#[rustfmt::skip]
impl weft_core::ForwardingStore for Stalling {
    fn inner(&self) -> &dyn SessionStore { &*self.inner }
    fn renew_lease<'a>(&'a self, id: &'a str, holder: &'a str, ttl: Duration) -> StoreFuture<'a, bool> {
        if self.stalled.load(Ordering::SeqCst) {
            return Box::pin(std::future::pending());
        }
        self.inner.renew_lease(id, holder, ttl)
    }
}

/// Replica B's view of the store: once it has taken a lease, its commits wait for `go`.
struct Gated {
    inner: Arc<dyn SessionStore>,
    acquired: tokio::sync::Notify,
    holding: AtomicBool,
    go: tokio::sync::Semaphore,
}

#[rustfmt::skip]
impl weft_core::ForwardingStore for Gated {
    fn inner(&self) -> &dyn SessionStore { &*self.inner }
    fn acquire_lease<'a>(&'a self, id: &'a str, holder: &'a str, ttl: Duration) -> StoreFuture<'a, bool> {
        Box::pin(async move {
            let taken = self.inner.acquire_lease(id, holder, ttl).await?;
            if taken {
                self.holding.store(true, Ordering::SeqCst);
                self.acquired.notify_one();
            }
            Ok(taken)
        })
    }
    fn commit<'a>(&'a self, commit: Commit) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            if self.holding.load(Ordering::SeqCst) {
                let _pass = self.go.acquire().await;
            }
            self.inner.commit(commit).await
        })
    }
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Nothing {}

/// The text of the last assistant message and of every tool result among `messages`.
fn answer_and_results(messages: &[Message]) -> (Option<String>, Vec<String>) {
    let answer = messages.iter().rev().find_map(|m| match m {
        Message::Assistant(a) => Some(a.text()),
        _ => None,
    });
    let results = messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some(r.text_content()),
            _ => None,
        })
        .collect();
    (answer, results)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_replica_whose_run_was_taken_over_can_no_longer_commit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let file_a: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let file_b: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let a_store = Arc::new(Stalling { inner: file_a, stalled: AtomicBool::new(false) });
    let b_store = Arc::new(Gated {
        inner: file_b,
        acquired: tokio::sync::Notify::new(),
        holding: AtomicBool::new(false),
        go: tokio::sync::Semaphore::new(0),
    });
    let ttl = Duration::from_millis(400);

    // A's tool tells when it has started, and finishes when the test says.
    let entered = Arc::new(tokio::sync::Notify::new());
    let gate = Arc::new(tokio::sync::Notify::new());
    let step = {
        let (entered, gate) = (Arc::clone(&entered), Arc::clone(&gate));
        weft_agent::tool_fn("step", "One step of the work", move |_: Nothing| {
            let (entered, gate) = (Arc::clone(&entered), Arc::clone(&gate));
            async move {
                entered.notify_one();
                gate.notified().await;
                Ok::<_, String>("done by A".to_owned())
            }
        })
    };
    let a_model = Recording::new([
        FauxTurn::tool_call("step", serde_json::json!({})),
        FauxTurn::text("Answer A"),
    ]);
    let a = Agent::builder(a_model)
        .tool(step)
        .store(a_store.clone())
        .lease_ttl(ttl)
        .sweep_interval(Duration::ZERO)
        .build()
        .unwrap();
    let session = a.create_session(SessionOptions::default()).await.unwrap();
    let id = session.id();
    let run = a.execute(&session, Input::text("Do the work")).await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), entered.notified()).await.unwrap();

    // A stalls; B, sweeping every 20 ms, takes the run over once A's lease has expired.
    a_store.stalled.store(true, Ordering::SeqCst);
    let b = Agent::builder(Recording::new([FauxTurn::text("Answer B")]))
        .store(b_store.clone())
        .lease_ttl(ttl)
        .sweep_interval(Duration::from_millis(20))
        .build()
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), b_store.acquired.notified()).await.unwrap();

    // A wakes up before B has committed anything: its step's result is refused.
    gate.notify_one();
    let a_result = tokio::time::timeout(Duration::from_secs(10), run.result()).await.unwrap();
    assert!(!a_result.outcome.is_durable(), "{a_result:?}");
    let said = a_result.error.clone().unwrap_or_default();
    assert!(said.contains("taken over"), "A's run does not say its lease was taken: {said}");

    // B goes on, and its recovery is what the session keeps. A run stores its resting state
    // first and its last events right after (they are durable before any watcher sees them):
    // the test waits for both, the end in the session and B's `session_end` in the log.
    b_store.go.add_permits(1_000);
    let (loaded, log) = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let loaded = b_store.inner.load(&id).await.unwrap().unwrap();
            let log = b_store.inner.read_events(&id, 0, 100_000).await.unwrap();
            let a_run = log.first().map(|r| r.run_id.clone()).unwrap();
            let b_ended = log.iter().any(|r| {
                r.run_id != a_run && matches!(r.event, weft_core::AgentEvent::SessionEnd { .. })
            });
            if loaded.head.status == SessionStatus::Completed && b_ended {
                break (loaded, log);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("B's recovery never completed the run, or its events were never stored");
    let messages = loaded.messages.to_vec();
    let (answer, results) = answer_and_results(&messages);
    assert_eq!(answer.as_deref(), Some("Answer B"));
    assert!(!results.iter().any(|r| r == "done by A"), "A's step was stored: {results:?}");

    // Nor are A's events of the step's end: appends are fenced too.
    let late: Vec<_> = log
        .iter()
        .filter(|r| serde_json::to_string(&r.event).unwrap().contains("done by A"))
        .map(|r| (r.seq, r.event.kind()))
        .collect();
    assert!(late.is_empty(), "A's events after the take-over were stored: {late:?}");
    drop(b);
}
