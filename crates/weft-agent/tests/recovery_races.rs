//! Races of recovery and leases in one process, found by the crash test (tests/crash.rs) and
//! kept as regression tests; each forces its interleaving with a store that delays one call.

#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::Spy;
use futures::StreamExt;
use serde_json::json;
use weft_agent::{Agent, ExecuteError, SessionOptions};
use weft_core::{AgentEvent, Input, SessionStatus, SessionStore};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_store::SqliteStore;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// `Agent::session()` and the sweeper both try to recover one dead run in one process; the
/// second must neither recover it again nor disturb a run a client started meanwhile (it once
/// did, and its lease release aborted that run).
#[test]
fn a_dead_run_is_recovered_once_even_when_loading_races_the_sweeper() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    // Process 1 dies inside a tool call: the session stays `running` in the store.
    let id = {
        let rt = runtime();
        let id = rt.block_on(async {
            let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
            let turn = FauxTurn::tool_call("charge", json!({"q": "x"}));
            let agent = Agent::builder(FauxProvider::new(FauxScript::new([turn])))
                .tool(common::hang())
                .store(store)
                .lease_ttl(Duration::from_millis(50))
                .build()
                .unwrap();
            let session = agent.create_session(SessionOptions::default()).await.unwrap();
            let mut stream = agent.execute(&session, Input::text("buy")).await.unwrap();
            while let Some(event) = stream.next().await {
                if matches!(event, AgentEvent::ToolExecutionStart { .. }) {
                    break;
                }
            }
            session.id()
        });
        drop(rt);
        id
    };
    std::thread::sleep(Duration::from_millis(100)); // its lease expires
    // Process 2, built outside a runtime: its sweeper starts with the first `session()`.
    let rt = runtime();
    let sqlite: Arc<dyn SessionStore> =
        rt.block_on(async { Arc::new(SqliteStore::open(&path).await.unwrap()) as _ });
    // The first lease acquisition takes 300 ms and the first sweep 50 ms: this only fixes the
    // order of two awaits that race in real life.
    let spy = Spy::new(sqlite).slow_first(Duration::from_millis(300), Duration::from_millis(50));
    let store: Arc<dyn SessionStore> = Arc::new(spy);
    let turn =
        FauxTurn::text("the quick brown fox jumps over the lazy dog ".repeat(10)).with_delay_ms(3);
    // The recovered run goes on: its model call answers the interrupted call first.
    let recovered = FauxTurn::text("The charge was interrupted; I will not retry it.");
    let agent = Agent::builder(FauxProvider::new(FauxScript::new([recovered, turn])))
        .tool(common::hang())
        .store(Arc::clone(&store))
        // Long enough that no late renewal lets client A's delayed acquisition take B's run.
        .lease_ttl(Duration::from_secs(5))
        .sweep_interval(Duration::from_millis(10))
        .build()
        .unwrap();
    rt.block_on(async {
        // Client A: `session()` registers the handle, then waits 300 ms for the lease.
        let loading = tokio::spawn({
            let (agent, id) = (agent.clone(), id.clone());
            async move { agent.session(&id).await }
        });
        // Meanwhile (t = 50 ms) the sweeper recovers that same handle and runs it to its end.
        let mut status = SessionStatus::Running;
        for _ in 0..2000 {
            status = store.head(&id).await.unwrap().unwrap().status;
            if status != SessionStatus::Running {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(status, SessionStatus::Completed, "the sweeper recovered it");
        // Client B sends a message on the (open) handle: a run that streams for ~0.5 s.
        let handle = agent.session(&id).await.unwrap().unwrap();
        while handle.status() == SessionStatus::Running {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        let mut stream = agent.execute(&handle, Input::text("hello")).await.unwrap().sequenced();
        // At t = 300 ms client A's `session()` gets the lease and recovers the handle again,
        // in the middle of client B's run.
        let mut events: Vec<(u64, AgentEvent)> = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), async {
            while let Some(e) = stream.next().await {
                events.push(e);
            }
        })
        .await;
        assert!(read.is_ok(), "client B's stream never ended");
        let result = tokio::time::timeout(Duration::from_secs(5), stream.result()).await;
        let _ = tokio::time::timeout(Duration::from_secs(5), loading).await;
        tokio::time::sleep(Duration::from_millis(800)).await;
        let stored = store.read_events(&id, 0, usize::MAX).await.unwrap();
        let stored: HashMap<u64, AgentEvent> =
            stored.iter().map(|r| (r.seq, r.event.clone())).collect();
        let mut mismatched = Vec::new();
        for (seq, event) in &events {
            match stored.get(seq) {
                Some(s) if s != event => mismatched.push(format!(
                    "seq {seq}: streamed {} / stored {}",
                    event.kind(),
                    s.kind()
                )),
                None => {
                    mismatched.push(format!("seq {seq}: streamed {}, never stored", event.kind()))
                }
                _ => {}
            }
        }
        let ends: Vec<String> = events
            .iter()
            .filter_map(|(seq, e)| match e {
                AgentEvent::SessionEnd { status, messages, .. } => {
                    Some(format!("{seq}: {} with {} messages", status.as_str(), messages.len()))
                }
                _ => None,
            })
            .collect();
        let head = store.head(&id).await.unwrap().unwrap();
        eprintln!("client B's stream: {} events; its session_end: {ends:?}", events.len());
        match &result {
            Ok(r) => eprintln!("client B's result: {} {:?}", r.status.as_str(), r.error),
            Err(_) => eprintln!("client B's result: never came (5 s)"),
        }
        eprintln!(
            "stored status: {}; streamed events not stored as streamed: {mismatched:?}",
            head.status.as_str()
        );
        assert!(result.is_ok(), "client B's result never came");
        assert!(mismatched.is_empty(), "seqs streamed with other content than stored");
        assert_eq!(head.status, SessionStatus::Completed, "client B's run should have completed");
    });
}

/// A run's lease is released before the session takes new input, and each run holds a lease of
/// its own: the next run's lease is never released under it (it once was, aborting that run).
#[test]
fn a_runs_lease_release_never_aborts_the_next_run() {
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let store: Arc<dyn SessionStore> =
            Arc::new(SqliteStore::open(dir.path().join("weft.db")).await.unwrap());
        let mut turns = Vec::new();
        for _ in 0..60 {
            turns.push(FauxTurn::text("short"));
            turns.push(FauxTurn::text("x".repeat(200)).with_chunk_size(4).with_delay_ms(2));
        }
        let agent = Agent::builder(FauxProvider::new(FauxScript::new(turns)))
            .store(store)
            .lease_ttl(Duration::from_millis(150))
            .build()
            .unwrap();
        let session = agent.create_session(SessionOptions::default()).await.unwrap();
        let mut aborted = 0;
        for round in 0..60 {
            // Run 1: the client reads the stream to its end (as an SSE client does).
            let stream = agent.execute(&session, Input::text(format!("a{round}"))).await.unwrap();
            let _events: Vec<AgentEvent> = stream.collect().await;
            // …and sends the next input as soon as the session takes it.
            let stream = loop {
                match agent.execute(&session, Input::text(format!("b{round}"))).await {
                    Ok(stream) => break stream,
                    Err(ExecuteError::AlreadyRunning(_)) => tokio::task::yield_now().await,
                    Err(e) => panic!("{e}"),
                }
            };
            let result = stream.result().await;
            if result.status != SessionStatus::Completed {
                aborted += 1;
                eprintln!(
                    "round {round}: run 2 ended {} ({:?})",
                    result.status.as_str(),
                    result.error
                );
            }
        }
        eprintln!("{aborted} of 60 second runs did not complete");
        assert_eq!(aborted, 0);
    });
}

/// A handle loaded while another process runs the session sees that run end: it does not say
/// `running` forever, nor refuse every input with `AlreadyRunning` (it once did).
#[test]
fn a_handle_loaded_while_another_process_ran_the_session_sees_it_end() {
    let dir = tempfile::tempdir().unwrap();
    runtime().block_on(async {
        let path = dir.path().join("weft.db");
        let open =
            || async { Arc::new(SqliteStore::open(&path).await.unwrap()) as Arc<dyn SessionStore> };
        // ~1.6 s: B must load the session while A's run is surely still going.
        let turns = [
            FauxTurn::text("slow answer").with_chunk_size(1).with_delay_ms(150),
            FauxTurn::text("ok"),
        ];
        let a = Agent::builder(FauxProvider::new(FauxScript::new(turns.clone())))
            .store(open().await)
            .build()
            .unwrap();
        let b = Agent::builder(FauxProvider::new(FauxScript::new(turns)))
            .store(open().await)
            .build()
            .unwrap();
        let session = a.create_session(SessionOptions::default()).await.unwrap();
        let running = a.execute(&session, Input::text("first")).await.unwrap();
        // Process B loads the session while A runs it.
        let seen = b.session(&session.id()).await.unwrap().unwrap();
        assert_eq!(seen.status(), SessionStatus::Running);
        assert_eq!(running.result().await.status, SessionStatus::Completed);
        tokio::time::sleep(Duration::from_millis(500)).await;
        let stored = open().await.head(&session.id()).await.unwrap().unwrap().status;
        eprintln!("stored: {}; B's handle: {}", stored.as_str(), seen.status().as_str());
        let again = b.session(&session.id()).await.unwrap().unwrap();
        eprintln!("B's session() again: {}", again.status().as_str());
        let refused = b.execute(&again, Input::text("second")).await.err();
        eprintln!("B's input: {refused:?}");
        assert!(refused.is_none(), "B cannot send input to a session that rests");
    });
}

/// A caller that goes away while its input is being started (an HTTP client disconnecting drops
/// the handler's future) does not leave the session marked running by a run that never began:
/// the start finishes without it, its run goes on to its end, and the session takes new input.
#[test]
fn a_start_whose_caller_goes_away_still_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let rt = runtime();
    rt.block_on(async {
        let sqlite: Arc<dyn SessionStore> =
            Arc::new(SqliteStore::open(dir.path().join("weft.db")).await.unwrap());
        // The start's lease takes 300 ms: the caller is gone long before.
        let spy = Spy::new(sqlite).slow_first(Duration::from_millis(300), Duration::ZERO);
        let turns = [FauxTurn::text("first"), FauxTurn::text("second")];
        let agent = Agent::builder(FauxProvider::new(FauxScript::new(turns)))
            .store(Arc::new(spy))
            .build()
            .unwrap();
        let session = agent.create_session(SessionOptions::default()).await.unwrap();
        let caller = tokio::spawn({
            let (agent, session) = (agent.clone(), session.clone());
            async move { agent.execute(&session, Input::text("one")).await.map(|_| ()) }
        });
        tokio::time::sleep(Duration::from_millis(50)).await;
        caller.abort();
        assert!(caller.await.unwrap_err().is_cancelled());
        // The abandoned input still ran: its run ends, and the session takes the next one.
        let mut answer = None;
        for _ in 0..500 {
            if session.status() == SessionStatus::Completed {
                answer = session.snapshot().messages.last().map(|m| format!("{m:?}"));
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(
            answer.is_some_and(|m| m.contains("first")),
            "the run of the abandoned start ended"
        );
        let next = agent.execute(&session, Input::text("two")).await;
        let (_, result) = next.expect("the session takes new input").collect_all().await;
        assert_eq!(result.status, SessionStatus::Completed);
    });
}
