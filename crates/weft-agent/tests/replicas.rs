//! Several processes on one store (each `Agent` here stands for a process: its own open
//! sessions, logs and lease holder): a handle kept in one notices runs made in the other, an
//! abort reaches a run in the other, a session's own turn limit holds in the other; and in one
//! process, event numbers stay dense from run to run, and sessions pick their provider.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Recording;
use futures::StreamExt;
use serde_json::json;
use weft_agent::{Agent, AgentError, SessionOptions};
use weft_core::{
    AgentEvent, EventRecord, Input, SessionStatus, SessionStore, ToolResultMessage, ToolSpec,
};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_store::SqliteStore;

/// Two stores on one SQLite file, as two processes would open it.
async fn two_stores(dir: &tempfile::TempDir) -> (Arc<dyn SessionStore>, Arc<dyn SessionStore>) {
    let path = dir.path().join("weft.db");
    let a: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
    let b: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
    (a, b)
}

fn browser_tool() -> ToolSpec {
    ToolSpec::new(
        "read_page",
        "Reads the page open in the user's browser",
        json!({"type": "object", "properties": {"selector": {"type": "string"}}}),
    )
}

fn tool_turn() -> FauxTurn {
    FauxTurn::text("Reading.").with_tool_call_id("call-1", "read_page", json!({"selector": "h1"}))
}

fn answer(id: &str) -> ToolResultMessage {
    ToolResultMessage::new(id, "read_page", "Title", false)
}

async fn records(stream: weft_agent::ExecuteStream) -> Vec<Arc<EventRecord>> {
    stream.records().collect().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handle_kept_in_one_process_sees_runs_made_in_another() {
    let dir = tempfile::tempdir().unwrap();
    let (store_a, store_b) = two_stores(&dir).await;
    let a = Agent::builder(Recording::new([tool_turn(), FauxTurn::text("Second answer")]))
        .store(Arc::clone(&store_a))
        .build()
        .unwrap();
    let b = Agent::builder(Recording::new([FauxTurn::text("The title is Title.")]))
        .store(store_b)
        .build()
        .unwrap();
    let kept = a
        .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
        .await
        .unwrap();
    let id = kept.id();
    let first = records(a.execute(&kept, Input::text("Read it")).await.unwrap()).await;
    assert_eq!(kept.status(), SessionStatus::AwaitingToolExecution);

    // The other process resumes the run to its end.
    let there = b.session(&id).await.unwrap().unwrap();
    let resumed = records(b.execute(&there, vec![answer("call-1")]).await.unwrap()).await;
    assert_eq!(there.status(), SessionStatus::Completed);
    let b_last = resumed.last().unwrap().seq;
    assert!(b_last > first.last().unwrap().seq);

    // The handle kept here is stale; a new run on it starts from the store's state and its
    // stream is its own run, numbered after every stored event.
    let stream = a.execute(&kept, Input::text("And now?")).await.unwrap();
    let own = records(stream).await;
    let run_id = match &own[0].event {
        AgentEvent::SessionStart { run_id, .. } if own[0].seq > b_last => run_id.clone(),
        _ => panic!(
            "the run's stream starts with its own session_start after {b_last}: {:?}",
            own.iter().take(3).map(|r| (r.seq, r.event.kind())).collect::<Vec<_>>()
        ),
    };
    assert!(own.iter().all(|r| *r.run_id == *run_id), "only this run's events");
    let AgentEvent::SessionEnd { status, messages, .. } = &own.last().unwrap().event else {
        panic!("the stream ends with session_end")
    };
    assert_eq!(*status, SessionStatus::Completed);
    assert_eq!(messages.len(), 2, "the new user message and the answer");
    let snapshot = kept.snapshot();
    assert_eq!(snapshot.messages.len(), 6, "user, tool call, result, answer, user, answer");

    // The store's log has no repeated or reordered number.
    let stored = store_a.read_events(&id, 0, 10_000).await.unwrap();
    assert!(stored.windows(2).all(|w| w[0].seq < w[1].seq));
    assert_eq!(stored.len(), first.len() + resumed.len() + own.len());
}

/// The id of the session's current run.
/// A run stores its end, then lets go of the session: a client that read that end from one
/// process and at once sends a message through another is not refused in between (it once
/// was: `AlreadyRunning`, for a session at rest).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_another_process_just_ended_takes_input_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (store_a, store_b) = two_stores(&dir).await;
    // B lets go of a session 400 ms after its run has ended.
    let slow = Arc::new(common::Spy::new(store_b).slow_release(Duration::from_millis(400)));
    let a =
        Agent::builder(Recording::new([FauxTurn::text("from A")])).store(store_a).build().unwrap();
    let b = Agent::builder(Recording::new([FauxTurn::text("from B")])).store(slow).build().unwrap();
    let there = b.create_session(SessionOptions::default()).await.unwrap();
    let here = a.session(&there.id()).await.unwrap().unwrap();
    let ended = records(b.execute(&there, Input::text("first")).await.unwrap()).await;
    assert!(matches!(
        ended.last().map(|r| &r.event),
        Some(AgentEvent::SessionEnd { status: SessionStatus::Completed, .. })
    ));
    let started = std::time::Instant::now();
    let stream = a.execute(&here, Input::text("second")).await.expect("A starts once B lets go");
    let waited = started.elapsed();
    let result = stream.result().await;
    assert_eq!(result.status, SessionStatus::Completed);
    assert_eq!(result.response().final_output, "from A");
    assert_eq!(here.snapshot().messages.len(), 4, "both runs' messages, in order");
    eprintln!("A waited {waited:?} for B to let go");
}

/// A start refused while the store cannot say what the session is leaves the handle as it
/// was: it is not left holding a run that never began.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_start_leaves_the_handle_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let (store_a, store_b) = two_stores(&dir).await;
    let spy = Arc::new(common::Spy::new(store_a));
    let a = Agent::builder(Recording::new([FauxTurn::text("from A")]))
        .store(spy.clone())
        .build()
        .unwrap();
    let b = Agent::builder(Recording::new([FauxTurn::text("never").stalled()]))
        .store(store_b)
        .build()
        .unwrap();
    let there = b.create_session(SessionOptions::default()).await.unwrap();
    let here = a.session(&there.id()).await.unwrap().unwrap();
    // B runs the session; A, whose handle is stale, tries to start one while its store cannot
    // be read.
    let running = b.execute(&there, Input::text("first")).await.unwrap();
    spy.fail_loads.store(true, std::sync::atomic::Ordering::SeqCst);
    let refused = a.execute(&here, Input::text("second")).await.err();
    assert_eq!(refused, Some(weft_agent::ExecuteError::AlreadyRunning(there.id())));
    let held = here.snapshot();
    assert_eq!(held.status, SessionStatus::Idle, "as it was, not `running` a run that never began");
    assert!(held.messages.is_empty() && held.run.is_none(), "{held:?}");
    // Once B's run is over and the store answers again, A's handle takes input.
    assert!(there.abort().await);
    assert_eq!(running.result().await.status, SessionStatus::Aborted);
    spy.fail_loads.store(false, std::sync::atomic::Ordering::SeqCst);
    let result = a.execute(&here, Input::text("third")).await.unwrap().result().await;
    assert_eq!(result.status, SessionStatus::Completed);
    assert_eq!(result.response().final_output, "from A");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_asked_in_one_process_stops_the_run_in_another() {
    let dir = tempfile::tempdir().unwrap();
    let (store_a, store_b) = two_stores(&dir).await;
    let a = Agent::builder(FauxProvider::new(FauxScript::new([
        FauxTurn::text("Working on it").stalled()
    ])))
    .store(store_a)
    .abort_poll(Duration::from_millis(20))
    .build()
    .unwrap();
    let b =
        Agent::builder(Recording::new([FauxTurn::text("unused")])).store(store_b).build().unwrap();
    let session = a.create_session(SessionOptions::default()).await.unwrap();
    let id = session.id();
    let stream = a.execute(&session, Input::text("Go")).await.unwrap();
    let mut events = stream.records();
    // Wait until the model is streaming.
    while let Some(record) = events.next().await {
        if matches!(record.event, AgentEvent::TextDelta { .. }) {
            break;
        }
    }
    let there = b.session(&id).await.unwrap().unwrap();
    assert_eq!(there.status(), SessionStatus::Running);
    let watcher = tokio::spawn(there.subscribe(there.last_seq()).collect::<Vec<_>>());
    assert!(there.abort().await, "a run under way elsewhere can be aborted");
    let rest: Vec<_> = tokio::time::timeout(Duration::from_secs(10), events.collect::<Vec<_>>())
        .await
        .expect("the run stops");
    let end = |records: &[Arc<EventRecord>]| match records.last().map(|r| &r.event) {
        Some(AgentEvent::SessionEnd { status, .. }) => Some(*status),
        _ => None,
    };
    assert_eq!(end(&rest), Some(SessionStatus::Aborted));
    assert_eq!(session.status(), SessionStatus::Aborted);
    // The other process's watcher saw the same end, and its handle says so.
    let watched = tokio::time::timeout(Duration::from_secs(20), watcher).await.unwrap().unwrap();
    assert_eq!(end(&watched), Some(SessionStatus::Aborted));
    let there = b.session(&id).await.unwrap().unwrap();
    assert_eq!(there.status(), SessionStatus::Aborted);
    // Nothing left to abort.
    assert!(!there.abort().await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_own_turn_limit_holds_when_another_process_resumes_it() {
    let dir = tempfile::tempdir().unwrap();
    let (store_a, store_b) = two_stores(&dir).await;
    let a = Agent::builder(Recording::new([tool_turn(), FauxTurn::text("unused")]))
        .store(store_a)
        .build()
        .unwrap();
    let b_provider = Recording::new([FauxTurn::text("A second model call")]);
    let b = Agent::builder(b_provider.clone()).store(store_b).max_turns(50).build().unwrap();
    let session = a
        .create_session(SessionOptions {
            tools: vec![browser_tool()],
            max_turns: Some(1),
            ..Default::default()
        })
        .await
        .unwrap();
    let (_, result) = common::run(&a, &session, Input::text("Read it")).await;
    assert_eq!(result.status, SessionStatus::AwaitingToolExecution);

    let there = b.session(&session.id()).await.unwrap().unwrap();
    assert_eq!(weft_agent::session_max_turns(&there.snapshot().options), Some(1));
    let (_, result) = common::run(&b, &there, vec![answer("call-1")]).await;
    assert_eq!(result.status, SessionStatus::MaxTurns, "{:?}", result.error);
    assert_eq!(b_provider.calls(), 0, "the session's limit of one model call holds");
    assert_eq!(
        result.outcome,
        weft_agent::RunOutcome::MaxTurns { limit: weft_agent::TurnLimit::MaxTurns }
    );
    assert_eq!(result.error.as_deref(), Some("the run stopped after 1 model calls (max_turns)"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn event_numbers_stay_dense_from_run_to_run_when_nobody_holds_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(dir.path().join("weft.db")).await.unwrap());
    let agent = Agent::builder(Recording::new([FauxTurn::text("One"), FauxTurn::text("Two")]))
        .store(Arc::clone(&store))
        .build()
        .unwrap();
    let id = {
        let session = agent.create_session(SessionOptions::default()).await.unwrap();
        common::run(&agent, &session, Input::text("first")).await;
        session.id()
    };
    // Nobody holds the session now; the next request finds it open all the same.
    let session = agent.session(&id).await.unwrap().unwrap();
    let before = session.last_seq();
    let second = records(agent.execute(&session, Input::text("second")).await.unwrap()).await;
    assert_eq!(second[0].seq, before + 1, "no gap between two runs");
    assert_eq!(
        weft_agent::run_after_seq(&store.head(&id).await.unwrap().unwrap().options),
        Some(before)
    );
    let stored = store.read_events(&id, 0, 10_000).await.unwrap();
    let seqs: Vec<u64> = stored.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "dense from 1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_pick_their_provider_by_name() {
    let other = FauxProvider::new(FauxScript::new([FauxTurn::text("From the other one")]));
    let agent = Agent::builder(Recording::new([FauxTurn::text("From the default")]))
        .model("default-model")
        .with_provider("other", Arc::new(other), "other-model")
        .build()
        .unwrap();
    assert_eq!(agent.provider_names(), vec!["faux".to_string(), "other".to_string()]);
    let picked = agent
        .create_session(SessionOptions { provider: Some("other".into()), ..Default::default() })
        .await
        .unwrap();
    assert_eq!(
        (picked.snapshot().provider, picked.snapshot().model),
        ("other".into(), "other-model".into())
    );
    let (response, _) = agent.respond(&picked, Input::text("hi")).await.unwrap();
    assert_eq!(response.final_output, "From the other one");
    let default = agent.create_session(SessionOptions::default()).await.unwrap();
    assert_eq!(default.snapshot().model, "default-model");
    let (response, _) = agent.respond(&default, Input::text("hi")).await.unwrap();
    assert_eq!(response.final_output, "From the default");
    let unknown = agent
        .create_session(SessionOptions { provider: Some("nope".into()), ..Default::default() })
        .await;
    assert!(matches!(
        unknown,
        Err(AgentError::UnknownProvider { ref allowed, .. }) if allowed.len() == 2
    ));
}
