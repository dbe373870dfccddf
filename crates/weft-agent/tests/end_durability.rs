//! A run's end is reported only once the store has it: a store that fails transiently around
//! the end is tried again (nothing reports the end meanwhile, and this process never "recovers"
//! the run it is still ending); a store that does not take the end in time, or whose writer is
//! gone, makes the run end with an error saying the end was not kept — never with the status it
//! could not store, which a later recovery could contradict.

#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod common;

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use common::{Recording, Spy};
use futures::StreamExt;
use weft_agent::{Agent, SessionHandle, SessionOptions};
use weft_core::{AgentEvent, Input, Message, SessionStatus, SessionStore};
use weft_llm::faux::FauxTurn;
use weft_store::SqliteStore;

/// The text of the last assistant message among `messages`.
fn answer<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Option<String> {
    messages
        .into_iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(a.text()),
            _ => None,
        })
        .last()
}

struct Setup {
    agent: Agent,
    spy: Arc<Spy>,
    store: Arc<dyn SessionStore>,
    provider: Recording,
    session: SessionHandle,
    _dir: tempfile::TempDir,
}

/// An agent on a real SQLite file seen through a spy, whose model answers "Answer A" first and
/// "Answer B" to any later call (a recovery), sweeping every 20 ms. (A run tries to store its end
/// for at most two thirds of `lease_ttl`.)
async fn setup(end_commit_timeout: Duration, lease_ttl: Duration) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(dir.path().join("weft.db")).await.unwrap());
    let spy = Arc::new(Spy::new(sqlite));
    let store: Arc<dyn SessionStore> = spy.clone();
    let provider = Recording::new([
        FauxTurn::text("Answer A").with_delay_ms(20),
        FauxTurn::text("Answer B"),
        FauxTurn::text("Answer C"),
    ]);
    let agent = Agent::builder(provider.clone())
        .store(Arc::clone(&store))
        .sweep_interval(Duration::from_millis(20))
        .lease_ttl(lease_ttl)
        .end_commit_timeout(end_commit_timeout)
        .build()
        .unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    Setup { agent, spy, store, provider, session, _dir: dir }
}

/// The stored head's status and the stored answer.
async fn stored(setup: &Setup) -> (SessionStatus, Option<String>) {
    let loaded = setup.store.load(&setup.session.id()).await.unwrap().unwrap();
    (loaded.head.status, answer(loaded.messages.iter()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_the_store_failed_to_take_for_a_while_is_stored_before_it_is_reported() {
    let setup = setup(Duration::from_secs(60), Duration::from_secs(6)).await;
    setup.spy.fail_ends.store(true, Ordering::SeqCst);
    let mut stream = setup.agent.execute(&setup.session, Input::text("Question?")).await.unwrap();
    // The model's answer streams as usual.
    while let Some(event) = stream.next().await {
        if matches!(event, AgentEvent::TextDelta { .. }) {
            break;
        }
    }
    // The store refuses the end for a while: nothing reports it, and the sweeper (every 20 ms)
    // does not take the run this process is still ending.
    let early = tokio::time::timeout(Duration::from_millis(800), async {
        while let Some(event) = stream.next().await {
            if matches!(event, AgentEvent::SessionEnd { .. }) {
                return event;
            }
        }
        panic!("the stream ended without session_end");
    })
    .await;
    assert!(early.is_err(), "the end was reported before it was stored: {early:?}");
    assert_eq!(setup.provider.calls(), 1, "the run was not recovered while it was ending");
    setup.spy.fail_ends.store(false, Ordering::SeqCst);
    let (rest, result) = stream.collect_all().await;
    let end = rest.iter().find_map(|e| match e {
        AgentEvent::SessionEnd { status, .. } => Some(*status),
        _ => None,
    });
    assert_eq!(end, Some(SessionStatus::Completed));
    assert_eq!(result.status, SessionStatus::Completed);
    assert_eq!(result.error, None);
    assert_eq!(result.outcome, weft_agent::RunOutcome::Completed);
    assert_eq!(answer(&result.messages).as_deref(), Some("Answer A"));
    assert_eq!(stored(&setup).await, (SessionStatus::Completed, Some("Answer A".into())));
    // Many sweeps later, what the client was told still holds.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(stored(&setup).await, (SessionStatus::Completed, Some("Answer A".into())));
    assert_eq!(setup.provider.calls(), 1, "no recovery ever ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_end_the_store_never_took_is_an_error_that_says_so_never_completed() {
    let setup = setup(Duration::from_millis(400), Duration::from_secs(3)).await;
    setup.spy.fail_ends.store(true, Ordering::SeqCst);
    let (events, result) =
        common::run(&setup.agent, &setup.session, Input::text("Question?")).await;
    let statuses: Vec<SessionStatus> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::SessionEnd { status, .. } => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(statuses, [SessionStatus::Error], "never completed");
    assert_eq!(result.status, SessionStatus::Error);
    let weft_agent::RunOutcome::EndNotDurable { reached, message } = &result.outcome else {
        panic!("an end the store never took is not said so: {result:?}")
    };
    assert_eq!(*reached, SessionStatus::Completed, "what the run reached, and could not keep");
    assert!(!result.outcome.is_durable());
    let error = result.error.as_deref().unwrap_or_default();
    assert!(error.ends_with(message.as_str()), "the error says it too: {error}");
    assert!(
        events.iter().any(|e| matches!(e, AgentEvent::Error { error, .. } if error == message)),
        "the stream says so too"
    );
    assert!(result.pending_tool_calls.is_empty());
    // The store still has the run as it last stored it; once it takes writes again, the run is
    // recovered from there (as after a crash) and the session takes new input.
    setup.spy.fail_ends.store(false, Ordering::SeqCst);
    let mut status = SessionStatus::Running;
    for _ in 0..500 {
        status = stored(&setup).await.0;
        if status != SessionStatus::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status, SessionStatus::Completed, "recovered once the store took writes");
    let handle = setup.agent.session(&setup.session.id()).await.unwrap().unwrap();
    for _ in 0..500 {
        if handle.status() != SessionStatus::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let (_, next) = common::run(&setup.agent, &handle, Input::text("Again?")).await;
    assert_eq!(next.status, SessionStatus::Completed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_whose_writer_is_gone_is_not_retried() {
    // 40 s of retries would outlast the bound below: a closed store is not retried at all.
    let setup = setup(Duration::from_secs(60), Duration::from_secs(60)).await;
    setup.spy.close_ends.store(true, Ordering::SeqCst);
    let ran = tokio::time::timeout(
        Duration::from_secs(20),
        common::run(&setup.agent, &setup.session, Input::text("Question?")),
    )
    .await;
    let (_, result) = ran.expect("the run ended without retrying a closed store");
    assert_eq!(result.status, SessionStatus::Error);
    let weft_agent::RunOutcome::EndNotDurable { message, .. } = &result.outcome else {
        panic!("an end the store never took is not said so: {result:?}")
    };
    // Which store error it was is only in words (the store's own).
    assert!(message.contains("closed"), "{message}");
    assert_eq!(setup.spy.commits.load(Ordering::SeqCst), 3, "start, boundary, one end try");
}

/// A full disk from the middle of a model call past the end's timeout: the run's last events
/// are numbered and shown without a reservation in the store. Once the disk has room, the
/// recovery of that run in the same process numbers its events above every number a client
/// saw (none is given twice), and the events the client saw reach the store as it saw them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numbers_shown_while_the_disk_was_full_are_never_given_again() {
    let setup = setup(Duration::from_millis(400), Duration::from_secs(3)).await;
    let stream = setup.agent.execute(&setup.session, Input::text("Question?")).await.unwrap();
    let mut seen: Vec<(u64, &'static str, String)> = Vec::new();
    let mut records = stream.records();
    while let Some(record) = records.next().await {
        let delta = matches!(record.event, AgentEvent::TextDelta { .. });
        seen.push((record.seq, record.event.kind(), record.run_id.to_string()));
        if delta {
            break;
        }
    }
    setup.spy.fail_writes.store(true, Ordering::SeqCst);
    while let Some(record) = records.next().await {
        seen.push((record.seq, record.event.kind(), record.run_id.to_string()));
    }
    let result = records.result().await;
    assert_eq!(result.status, SessionStatus::Error, "{:?}", result.error);
    assert_eq!(seen.last().map(|s| s.1), Some("session_end"));
    setup.spy.fail_writes.store(false, Ordering::SeqCst);
    // Recovered here once the store takes writes again (the lease is given back then).
    let mut status = SessionStatus::Running;
    for _ in 0..1000 {
        status = stored(&setup).await.0;
        if status != SessionStatus::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(status, SessionStatus::Completed, "recovered once the disk had room");
    let handle = setup.agent.session(&setup.session.id()).await.unwrap().unwrap();
    for _ in 0..1000 {
        if handle.status() != SessionStatus::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Wait for the log to be written out, then compare.
    let id = setup.session.id();
    let mut stored_log = Vec::new();
    for _ in 0..500 {
        stored_log = setup.store.read_events(&id, 0, 100_000).await.unwrap();
        let ended =
            stored_log.iter().filter(|r| matches!(r.event, AgentEvent::SessionEnd { .. })).count();
        if ended >= 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let first_run = seen[0].2.clone();
    let max_seen = seen.iter().map(|s| s.0).max().unwrap();
    for (seq, kind, _) in &seen {
        let kept = stored_log.iter().find(|r| r.seq == *seq);
        assert_eq!(kept.map(|r| r.event.kind()), Some(*kind), "seq {seq} as the client saw it");
        assert_eq!(kept.map(|r| r.run_id.to_string()), Some(first_run.clone()), "seq {seq}");
    }
    let recovered: Vec<u64> =
        stored_log.iter().filter(|r| *r.run_id != *first_run).map(|r| r.seq).collect();
    assert!(!recovered.is_empty(), "the recovery's events are stored");
    assert!(recovered.iter().all(|seq| *seq > max_seen), "{recovered:?} vs {max_seen}");
    assert!(stored_log.windows(2).all(|w| w[0].seq < w[1].seq));
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Nothing {}

/// A run whose events can no longer be numbered (the store reserves no more numbers for them)
/// stops showing events where that happened: its stream ends without a `session_end`, and its
/// result says the store does not have its end. Only such a result may come without its end
/// (the crash test holds every durable one to it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_whose_events_cannot_be_numbered_ends_its_stream_early_and_says_it_is_not_durable() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(dir.path().join("weft.db")).await.unwrap());
    let spy = Arc::new(Spy::new(sqlite));
    // The tool turns reservations off: the second model call's deltas (more than the numbers
    // the run reserved at its start) cannot be numbered.
    let switch = Arc::clone(&spy);
    let no_numbers = weft_agent::tool_fn("no_numbers", "Stops reservations", move |_: Nothing| {
        switch.fail_reserves.store(true, Ordering::SeqCst);
        async { Ok::<_, String>("done".to_string()) }
    });
    let provider = Recording::new([
        FauxTurn::tool_call("no_numbers", serde_json::json!({})),
        FauxTurn::text("x".repeat(5_000)).with_chunk_size(1),
    ]);
    let store: Arc<dyn SessionStore> = spy.clone();
    let agent =
        Agent::builder(provider).tool(no_numbers).store(Arc::clone(&store)).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let mut records = agent.execute(&session, Input::text("Go")).await.unwrap().records();
    let mut kinds = Vec::new();
    while let Some(record) = records.next().await {
        kinds.push(record.event.kind());
    }
    let result = records.result().await;
    assert!(kinds.contains(&"tool_execution_end"), "{kinds:?}");
    assert!(!kinds.contains(&"session_end"), "a cut run's stream shows no end: {kinds:?}");
    assert!(!result.outcome.is_durable(), "{:?}: {:?}", result.outcome, result.error);
    let error = result.error.unwrap_or_default();
    assert!(error.contains("no numbers, by the test"), "{error}");
}
