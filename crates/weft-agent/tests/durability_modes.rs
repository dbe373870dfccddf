//! A run's `durability` (sync, async, exit), seen from outside: through the stream a caller
//! reads and the writes a real SQLite store is sent.
//!
//! - `sync`: no event reaches a watcher before the store has it, with a store that takes its
//!   time over every write (and under `async`, on the same store, watchers are ahead of it:
//!   the check can fail).
//! - `exit`: nothing of the run is written between its start and its end; then the whole log,
//!   the messages and the checkpoints are, and they are what the caller was streamed.
//! - A run keeps its durability when another process recovers it.

#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod common;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::Recording;
use futures::StreamExt;
use weft_agent::{Agent, Durability, RunOptions, SessionOptions};
use weft_core::{
    AgentEvent, Checkpoint, Commit, EventRecord, Input, SessionStatus, SessionStore, StoreFuture,
};
use weft_llm::faux::FauxTurn;
use weft_store::SqliteStore;

/// A write the store was sent, in the order it was sent.
#[derive(Debug, Clone, PartialEq)]
enum Write {
    /// A commit, with the status it stores.
    Commit(SessionStatus),
    /// Events appended.
    Append,
    /// A checkpoint.
    Checkpoint,
}

/// A store that records its writes, and which event numbers it holds (once a write has
/// returned), each append taking `append_delay` first.
struct Ledger {
    inner: Arc<dyn SessionStore>,
    writes: Mutex<Vec<Write>>,
    stored: Mutex<BTreeSet<u64>>,
    append_delay: Duration,
}

impl Ledger {
    fn new(inner: Arc<dyn SessionStore>, append_delay: Duration) -> Arc<Self> {
        Arc::new(Self {
            inner,
            writes: Mutex::new(Vec::new()),
            stored: Mutex::new(BTreeSet::new()),
            append_delay,
        })
    }

    fn writes(&self) -> Vec<Write> {
        self.writes.lock().unwrap().clone()
    }

    fn has(&self, seq: u64) -> bool {
        self.stored.lock().unwrap().contains(&seq)
    }

    fn log(&self, write: Write) {
        self.writes.lock().unwrap().push(write);
    }
}

#[rustfmt::skip]
impl weft_core::ForwardingStore for Ledger {
    fn inner(&self) -> &dyn SessionStore { &*self.inner }
    fn commit<'a>(&'a self, commit: Commit) -> StoreFuture<'a, ()> {
        self.log(Write::Commit(commit.head.status));
        self.inner.commit(commit)
    }
    fn append_events<'a>(&'a self, id: &'a str, events: Vec<Arc<EventRecord>>, lease: Option<&'a str>) -> StoreFuture<'a, ()> {
        self.log(Write::Append);
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        Box::pin(async move {
            tokio::time::sleep(self.append_delay).await;
            self.inner.append_events(id, events, lease).await?;
            self.stored.lock().unwrap().extend(seqs);
            Ok(())
        })
    }
    fn put_checkpoint<'a>(&'a self, checkpoint: Checkpoint) -> StoreFuture<'a, ()> {
        self.log(Write::Checkpoint);
        self.inner.put_checkpoint(checkpoint)
    }
}

/// A weather tool's call, then an answer streamed in many small deltas.
fn script() -> Vec<FauxTurn> {
    let answer = "It is sunny in Paris, and it will stay so for the rest of the week. ".repeat(4);
    vec![
        FauxTurn::tool_call("weather", serde_json::json!({"city": "Paris"})).with_delay_ms(1),
        FauxTurn::text(answer).with_chunk_size(3).with_delay_ms(1),
    ]
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct City {
    city: String,
}

/// An agent with a weather tool and a `charge` that never ends, on `store`, whose runs' lease
/// lasts `lease_ttl`.
fn agent_with(provider: Recording, store: Arc<dyn SessionStore>, lease_ttl: Duration) -> Agent {
    let weather = weft_agent::tool_fn("weather", "The weather in a city", |a: City| async move {
        Ok::<_, String>(format!("Sunny in {}", a.city))
    });
    Agent::builder(provider)
        .tool(weather)
        .tool(common::hang())
        .store(store)
        .lease_ttl(lease_ttl)
        .sweep_interval(Duration::from_millis(20))
        .build()
        .unwrap()
}

fn agent(provider: Recording, store: Arc<dyn SessionStore>) -> Agent {
    agent_with(provider, store, Duration::from_secs(15))
}

async fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn SessionStore> {
    sqlite_at(&dir.path().join("weft.db")).await
}

async fn sqlite_at(path: &std::path::Path) -> Arc<dyn SessionStore> {
    Arc::new(SqliteStore::open(path).await.unwrap())
}

/// Runs the script under `durability`; for every record the caller's stream gives, whether the
/// store had it when it arrived. Returns those, the records, and the ledger.
async fn run_with(
    durability: Durability,
    append_delay: Duration,
) -> (Vec<bool>, Vec<Arc<EventRecord>>, Arc<Ledger>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let ledger = Ledger::new(sqlite(&dir).await, append_delay);
    let agent = agent(Recording::new(script()), ledger.clone());
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let options = RunOptions::default().durability(durability);
    let mut stream =
        agent.execute_with(&session, Input::text("Weather?"), options).await.unwrap().records();
    let (mut stored_on_arrival, mut records) = (Vec::new(), Vec::new());
    while let Some(record) = stream.next().await {
        stored_on_arrival.push(ledger.has(record.seq));
        records.push(record);
    }
    let result = stream.result().await;
    assert_eq!(result.status, SessionStatus::Completed, "{:?}", result.error);
    (stored_on_arrival, records, ledger, dir)
}

/// The events the store keeps for the run's session, by seq.
async fn stored(ledger: &Ledger, id: &str) -> Vec<(u64, AgentEvent)> {
    let records = ledger.inner.read_events(id, 0, 100_000).await.unwrap();
    records.iter().map(|r| (r.seq, r.event.clone())).collect()
}

fn session_of(records: &[Arc<EventRecord>]) -> String {
    records[0].session_id.to_string()
}

#[tokio::test]
async fn under_sync_no_watcher_sees_an_event_before_the_store_has_it() {
    let (stored_on_arrival, records, ledger, _dir) =
        run_with(Durability::Sync, Duration::from_millis(5)).await;
    assert!(records.len() > 50, "the answer streams in many deltas: {}", records.len());
    let early: Vec<u64> = records
        .iter()
        .zip(&stored_on_arrival)
        .filter(|(_, stored)| !**stored)
        .map(|(r, _)| r.seq)
        .collect();
    assert!(early.is_empty(), "events seen before the store had them: {early:?}");
    // And what was seen is what is stored.
    let seen: Vec<(u64, AgentEvent)> = records.iter().map(|r| (r.seq, r.event.clone())).collect();
    assert_eq!(stored(&ledger, &session_of(&records)).await, seen);
}

#[tokio::test]
async fn under_async_watchers_run_ahead_of_a_slow_store() {
    let (stored_on_arrival, records, ledger, _dir) =
        run_with(Durability::Async, Duration::from_millis(5)).await;
    let early = stored_on_arrival.iter().filter(|stored| !**stored).count();
    assert!(early > 0, "async streams before the store has the events");
    // The end is stored before it is reported, whatever the mode; everything is, by then.
    let seen: Vec<(u64, AgentEvent)> = records.iter().map(|r| (r.seq, r.event.clone())).collect();
    assert_eq!(stored(&ledger, &session_of(&records)).await, seen);
}

#[tokio::test]
async fn under_exit_nothing_is_written_between_the_start_and_the_end() {
    let (_, records, ledger, _dir) = run_with(Durability::Exit, Duration::ZERO).await;
    let writes = ledger.writes();
    // One commit starts the run, the next ends it, and nothing is written in between: the
    // model's two calls and the tool's run are stored with the end.
    let first_rest = writes
        .iter()
        .position(|w| matches!(w, Write::Commit(s) if *s != SessionStatus::Running))
        .unwrap();
    assert_eq!(writes[0], Write::Commit(SessionStatus::Running), "{writes:?}");
    assert_eq!(first_rest, 1, "nothing between the start and the end: {writes:?}");
    assert!(
        writes[first_rest..].contains(&Write::Append),
        "the log is written at the end: {writes:?}"
    );
    // Everything streamed is stored, and the session's messages with it.
    let seen: Vec<(u64, AgentEvent)> = records.iter().map(|r| (r.seq, r.event.clone())).collect();
    let id = session_of(&records);
    assert_eq!(stored(&ledger, &id).await, seen);
    let session = ledger.inner.load(&id).await.unwrap().unwrap();
    assert_eq!(session.head.status, SessionStatus::Completed);
    assert_eq!(session.messages.len(), 4, "user, call, result, answer");
    assert_eq!(session.head.options["durability"], "exit");
}

#[tokio::test]
async fn under_async_the_run_is_written_as_it_goes() {
    let (_, _, ledger, _dir) = run_with(Durability::Async, Duration::ZERO).await;
    let writes = ledger.writes();
    let first_rest = writes
        .iter()
        .position(|w| matches!(w, Write::Commit(s) if *s != SessionStatus::Running))
        .unwrap();
    // The step boundaries are committed, and events appended, before the end.
    let before_end = &writes[1..first_rest];
    assert!(before_end.contains(&Write::Append), "{writes:?}");
    assert!(before_end.contains(&Write::Commit(SessionStatus::Running)), "{writes:?}");
}

#[tokio::test]
async fn a_run_without_durability_is_async_and_leaves_the_stored_options_as_they_were() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir).await;
    let mut turns = script();
    turns.push(FauxTurn::text("Still sunny."));
    let agent = agent(Recording::new(turns), Arc::clone(&store));
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let id = session.id();
    let options = RunOptions::default().durability(Durability::Sync);
    agent.execute_with(&session, Input::text("Weather?"), options).await.unwrap().result().await;
    assert_eq!(store.load(&id).await.unwrap().unwrap().head.options["durability"], "sync");
    // The next run names none: it is async, and the key is gone (a session that never asks
    // keeps the stored form it always had).
    let result = agent.execute(&session, Input::text("And now?")).await.unwrap().result().await;
    assert_eq!(result.status, SessionStatus::Completed);
    let options = store.load(&id).await.unwrap().unwrap().head.options;
    assert!(options.get("durability").is_none(), "{options}");
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// A process dies in an `exit` run, after a tool ran and while a second one runs: nothing of
/// the run but its start was stored, so the next process recovers it from its input — and the
/// recovery is `exit` too: its first write is the end. No event number the dead process showed
/// is used again.
#[test]
fn an_exit_run_lost_in_a_crash_is_run_again_from_its_input_and_stays_exit() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let (id, shown) = {
        let rt = runtime();
        let out = rt.block_on(async {
            let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
            let turns = [
                FauxTurn::tool_call("weather", serde_json::json!({"city": "Paris"})),
                FauxTurn::tool_call("charge", serde_json::json!({"q": "x"})),
            ];
            let agent = agent_with(Recording::new(turns), store, Duration::from_millis(100));
            let session = agent.create_session(SessionOptions::default()).await.unwrap();
            let options = RunOptions::default().durability(Durability::Exit);
            let mut stream = agent
                .execute_with(&session, Input::text("Weather, then pay"), options)
                .await
                .unwrap()
                .records();
            let mut shown = 0;
            while let Some(record) = stream.next().await {
                shown = record.seq;
                if matches!(&record.event, AgentEvent::ToolExecutionStart { tool_name, .. } if tool_name == "charge")
                {
                    break;
                }
            }
            (session.id(), shown)
        });
        drop(rt);
        out
    };
    let rt = runtime();
    rt.block_on(async {
        let ledger = Ledger::new(sqlite_at(&path).await, Duration::ZERO);
        let stored = ledger.inner.load(&id).await.unwrap().unwrap();
        assert_eq!(stored.head.status, SessionStatus::Running);
        assert_eq!(stored.messages.len(), 1, "only the input was stored");
        assert!(ledger.inner.read_events(&id, 0, 1000).await.unwrap().is_empty());
        let provider = Recording::new([FauxTurn::text("Sunny; I did not pay.")]);
        let agent = agent_with(provider, ledger.clone(), Duration::from_millis(100));
        let handle = agent.session(&id).await.unwrap().unwrap();
        let mut status = handle.status();
        for _ in 0..500 {
            status = ledger.inner.head(&id).await.unwrap().unwrap().status;
            if status != SessionStatus::Running {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(status, SessionStatus::Completed);
        let writes = ledger.writes();
        assert_eq!(writes[0], Write::Commit(SessionStatus::Completed), "{writes:?}");
        let session = ledger.inner.load(&id).await.unwrap().unwrap();
        assert_eq!(session.messages.len(), 2, "the input and the recovery's answer");
        assert_eq!(session.head.options["durability"], "exit");
        // The end is committed before its events are written: they follow.
        let mut events = Vec::new();
        for _ in 0..500 {
            events = ledger.inner.read_events(&id, 0, 1000).await.unwrap();
            if events.iter().any(|e| matches!(e.event, AgentEvent::SessionEnd { .. })) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(events.iter().any(|e| matches!(e.event, AgentEvent::SessionEnd { .. })));
        assert!(events.iter().all(|e| e.seq > shown), "no number shown before is used again");
    });
}
