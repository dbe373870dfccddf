//! Durable sessions: the event log's watchers, a store that keeps everything, a session that
//! goes on in another process, and runs that only one process may start.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Recording;
use futures::StreamExt;
use serde_json::json;
use sqlx::Connection;
use weft_agent::{Agent, ExecuteError, SessionOptions};
use weft_core::{
    AgentEvent, EventRecord, Input, Message, OwnerScope, SessionStatus, SessionStore,
    ToolResultMessage, ToolSpec,
};
use weft_llm::faux::FauxTurn;
use weft_store::{MemoryStore, SqliteStore};

/// Prose of `len` characters.
fn prose(len: usize) -> String {
    "the quick brown fox jumps over the lazy dog ".chars().cycle().take(len).collect()
}

/// The text the text deltas of `records` spell, and their seqs.
fn text_and_seqs(records: &[Arc<EventRecord>]) -> (String, Vec<u64>) {
    let mut text = String::new();
    for record in records {
        if let AgentEvent::TextDelta { delta, .. } = &record.event {
            text.push_str(delta);
        }
    }
    (text, records.iter().map(|r| r.seq).collect())
}

fn assert_strictly_increasing(seqs: &[u64]) {
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "seqs must strictly increase: {seqs:?}");
}

async fn sqlite(dir: &tempfile::TempDir) -> Arc<dyn SessionStore> {
    Arc::new(SqliteStore::open(dir.path().join("weft.db")).await.unwrap())
}

fn browser_tool() -> ToolSpec {
    ToolSpec::new(
        "read_page",
        "Reads the page open in the user's browser",
        json!({"type": "object", "properties": {"selector": {"type": "string"}}}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_watchers_joining_at_different_points_see_exactly_the_run() {
    let text = prose(8_000);
    let provider = Recording::new([FauxTurn::text(text.clone()).with_chunk_size(4)]);
    let agent = Agent::builder(provider).store(Arc::new(MemoryStore::new())).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let before = session.last_seq();

    let stream = agent.execute(&session, Input::text("go")).await.unwrap();
    let from_start = tokio::spawn(session.subscribe(before).collect::<Vec<_>>());
    let slow = tokio::spawn(
        session
            .subscribe(before)
            .then(|record| async move {
                tokio::time::sleep(Duration::from_micros(50)).await;
                record
            })
            .collect::<Vec<_>>(),
    );
    // The run's own stream; a third watcher joins after its 300th event.
    let mut own = Vec::new();
    let mut records = stream.records();
    let mut mid = None;
    while let Some(record) = records.next().await {
        if own.len() == 300 {
            mid = Some((
                record.seq - 1,
                tokio::spawn(session.subscribe(record.seq - 1).collect::<Vec<_>>()),
            ));
        }
        own.push(record);
    }
    let result = records.result().await;
    assert_eq!(result.status, SessionStatus::Completed);

    let (own_text, own_seqs) = text_and_seqs(&own);
    assert_eq!(own_text, text);
    assert_strictly_increasing(&own_seqs);
    assert!(matches!(own.last().unwrap().event, AgentEvent::SessionEnd { .. }));
    for (name, watcher) in
        [("from the start", from_start.await.unwrap()), ("slow", slow.await.unwrap())]
    {
        let (watched_text, seqs) = text_and_seqs(&watcher);
        assert_eq!(seqs, own_seqs, "the {name} watcher sees exactly the run's events");
        assert_eq!(watched_text, text);
    }
    let (joined_at, mid) = mid.unwrap();
    let mid = mid.await.unwrap();
    let expected: Vec<u64> = own_seqs.iter().copied().filter(|s| *s > joined_at).collect();
    assert_eq!(
        text_and_seqs(&mid).1,
        expected,
        "the late watcher sees the rest, no gap, no duplicate"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watcher_that_never_reads_does_not_hold_the_run_back() {
    let text = prose(120_000);
    let provider = Recording::new([FauxTurn::text(text.clone()).with_chunk_size(4)]);
    let agent = Agent::builder(provider).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let stream = agent.execute(&session, Input::text("go")).await.unwrap();
    // 30,000 deltas: far more than any buffer a reader could hold the run back with.
    let idle = session.subscribe(0);
    let result = tokio::time::timeout(Duration::from_secs(60), stream.result()).await.unwrap();
    assert_eq!(result.status, SessionStatus::Completed);
    let Some(Message::Assistant(answer)) = result.messages.last() else { panic!() };
    assert_eq!(answer.text(), text);
    drop(idle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_far_behind_catches_up_from_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite(&dir).await;
    let text = prose(80_000);
    let provider = Recording::new([FauxTurn::text(text.clone()).with_chunk_size(4)]);
    let agent = Agent::builder(provider).store(store.clone()).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let result = agent.execute(&session, Input::text("go")).await.unwrap().result().await;
    assert_eq!(result.status, SessionStatus::Completed);

    // The run is over; memory keeps only its last events: the rest comes from the store.
    let replay: Vec<_> = session.subscribe(0).collect().await;
    let (replayed, seqs) = text_and_seqs(&replay);
    assert_eq!(replayed, text, "every character once, in order");
    assert_strictly_increasing(&seqs);
    assert!(matches!(replay.last().unwrap().event, AgentEvent::SessionEnd { .. }));
    assert_eq!(*seqs.last().unwrap(), session.last_seq());
    // And the store has exactly those events.
    let stored = store.read_events(&session.id(), 0, usize::MAX).await.unwrap();
    assert_eq!(stored.iter().map(|r| r.seq).collect::<Vec<_>>(), seqs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_session_resumes_in_another_process() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let provider = Recording::new([
            FauxTurn::text("Reading.").with_tool_call("read_page", json!({"selector": "h1"}))
        ]);
        let agent = Agent::builder(provider).store(sqlite(&dir).await).build().unwrap();
        let session = agent
            .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
            .await
            .unwrap();
        let result = agent.execute(&session, Input::text("Title?")).await.unwrap().result().await;
        assert_eq!(result.status, SessionStatus::AwaitingToolExecution);
        session.id()
    };
    // A new agent on a new store instance over the same file: as a process started later.
    let provider = Recording::new([FauxTurn::text("It is Weft.")]);
    let agent = Agent::builder(provider.clone()).store(sqlite(&dir).await).build().unwrap();
    let session = agent.session(&id).await.unwrap().expect("the session was kept");
    assert_eq!(session.status(), SessionStatus::AwaitingToolExecution);
    let pending = session.pending_tool_calls();
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].arguments, json!({"selector": "h1"}).into());
    let first_run_end = session.last_seq();
    assert!(first_run_end > 0);

    let stream = agent
        .execute(&session, Input::ToolResults(vec![ToolResultMessage::ok(&pending[0], "Weft")]))
        .await
        .unwrap();
    let events: Vec<(u64, AgentEvent)> = stream.sequenced().collect().await;
    assert!(events[0].0 > first_run_end, "numbering goes on above the first process's events");
    let snapshot = session.snapshot();
    assert_eq!(snapshot.status, SessionStatus::Completed);
    let roles: Vec<_> = snapshot.messages.iter().map(Message::role).collect();
    use weft_core::Role::*;
    assert_eq!(roles, [User, Assistant, ToolResult, Assistant]);
    // The model was sent the whole conversation, the remote result included.
    assert_eq!(provider.last_request().messages.len(), 3);

    // What the stream reported is in the store as soon as the stream has reported it.
    let stored = sqlite(&dir).await.read_events(&id, 0, usize::MAX).await.unwrap();
    assert_eq!(stored.last().map(|r| r.seq), Some(session.last_seq()));
    assert!(matches!(stored.last().unwrap().event, AgentEvent::SessionEnd { .. }));
    // A third process sees what the second one stored.
    let agent = Agent::builder(Recording::new([])).store(sqlite(&dir).await).build().unwrap();
    let reloaded = agent.session(&id).await.unwrap().unwrap();
    assert_eq!(reloaded.snapshot().messages, snapshot.messages);
    assert_eq!(reloaded.status(), SessionStatus::Completed);
    assert_eq!(reloaded.last_seq(), session.last_seq());
}

/// A session loaded and left alone holds no event log until it needs one; when another process
/// runs it meanwhile, this one's log starts above that process's events, not where it loaded.
#[tokio::test]
async fn a_session_left_idle_while_another_process_ran_it_numbers_above_that_run() {
    let dir = tempfile::tempdir().unwrap();
    let a = Agent::builder(Recording::new([FauxTurn::text("One."), FauxTurn::text("Two.")]))
        .store(sqlite(&dir).await)
        .build()
        .unwrap();
    let in_a = a.create_session(SessionOptions::default()).await.unwrap();
    a.execute(&in_a, Input::text("first")).await.unwrap().result().await;
    let b = Agent::builder(Recording::new([FauxTurn::text("Three.")]))
        .store(sqlite(&dir).await)
        .build()
        .unwrap();
    let in_b = b.session(&in_a.id()).await.unwrap().expect("the session was kept");
    let loaded_at = in_b.last_seq();
    assert_eq!(loaded_at, in_a.last_seq(), "an idle handle knows where the log stands");

    a.execute(&in_a, Input::text("second")).await.unwrap().result().await;
    let a_end = in_a.last_seq();
    assert!(a_end > loaded_at);
    let events: Vec<(u64, AgentEvent)> =
        b.execute(&in_b, Input::text("third")).await.unwrap().sequenced().collect().await;
    assert!(events[0].0 > a_end, "numbering goes on above the other process's run");
    assert_eq!(events.last().map(|e| e.0), Some(in_b.last_seq()));
    let stored = sqlite(&dir).await.read_events(&in_a.id(), 0, usize::MAX).await.unwrap();
    let seqs: Vec<u64> = stored.iter().map(|r| r.seq).collect();
    assert_strictly_increasing(&seqs);
    assert_eq!(seqs.last(), Some(&in_b.last_seq()));
    // A watcher follows one run to its end: from where the handle was loaded, the other
    // process's second run; from there, this one's.
    let other: Vec<u64> = in_b.subscribe(loaded_at).map(|r| r.seq).collect::<Vec<_>>().await;
    let own: Vec<u64> = in_b.subscribe(a_end).map(|r| r.seq).collect::<Vec<_>>().await;
    let in_store = |from: u64, to: u64| -> Vec<u64> {
        seqs.iter().copied().filter(|s| *s > from && *s <= to).collect()
    };
    assert_eq!(other, in_store(loaded_at, a_end));
    assert_eq!(own, in_store(a_end, u64::MAX));
    assert_eq!(own, events.iter().map(|e| e.0).collect::<Vec<_>>());
    let texts: Vec<String> = in_b
        .snapshot()
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(a.text()),
            _ => None,
        })
        .collect();
    assert_eq!(texts, ["One.", "Two.", "Three."]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_one_of_two_processes_starts_a_run_on_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let agent = |store| {
        let turns = (0..40).map(|_| FauxTurn::text("ok").with_delay_ms(1));
        Agent::builder(Recording::new(turns)).store(store).build().unwrap()
    };
    let (a, b) = (agent(sqlite(&dir).await), agent(sqlite(&dir).await));
    let id = a.create_session(SessionOptions::default()).await.unwrap().id();
    for round in 0..10 {
        let (sa, sb) =
            (a.session(&id).await.unwrap().unwrap(), b.session(&id).await.unwrap().unwrap());
        let (ra, rb) = tokio::join!(
            a.execute(&sa, Input::text(format!("a{round}"))),
            b.execute(&sb, Input::text(format!("b{round}")))
        );
        let started: Vec<_> = [ra, rb].into_iter().filter_map(Result::ok).collect();
        assert!(!started.is_empty(), "round {round}: one of them starts");
        if started.len() == 2 {
            // One ran to its end before the other started: both are then valid, in turn.
            let results = futures::future::join_all(started.into_iter().map(|s| s.result())).await;
            assert!(results.iter().all(|r| r.status == SessionStatus::Completed));
            continue;
        }
        let result = started.into_iter().next().unwrap().result().await;
        assert_eq!(result.status, SessionStatus::Completed);
    }
    // Whatever interleaving happened, the stored conversation is a valid alternation.
    let store = sqlite(&dir).await;
    let stored = store.load(&id).await.unwrap().unwrap();
    let roles: Vec<_> = stored.messages.iter().map(Message::role).collect();
    assert!(
        roles.chunks(2).all(|pair| pair == [weft_core::Role::User, weft_core::Role::Assistant]),
        "{roles:?}"
    );
}

#[tokio::test]
async fn a_conflicting_start_is_refused_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let agent = |store| {
        // ~2 s: B's start surely comes while A's run is going.
        Agent::builder(Recording::new([FauxTurn::text("slow")
            .with_chunk_size(1)
            .with_delay_ms(500)]))
        .store(store)
        .build()
        .unwrap()
    };
    let (a, b) = (agent(sqlite(&dir).await), agent(sqlite(&dir).await));
    let id = a.create_session(SessionOptions::default()).await.unwrap().id();
    let sb = b.session(&id).await.unwrap().unwrap();
    let sa = a.session(&id).await.unwrap().unwrap();
    let running = a.execute(&sa, Input::text("first")).await.unwrap();
    // B's copy is stale: its start is a conditional write that loses.
    let err = b.execute(&sb, Input::text("second")).await.err().unwrap();
    assert_eq!(err, ExecuteError::AlreadyRunning(id.clone()));
    assert_eq!(sb.status(), SessionStatus::Running, "B reloaded what the store has");
    assert_eq!(running.result().await.status, SessionStatus::Completed);
    let stored = sqlite(&dir).await.load(&id).await.unwrap().unwrap();
    assert_eq!(stored.messages.len(), 2, "the refused input left no trace");
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Query {
    q: String,
}

/// An agent on the SQLite file in `dir` whose tools are a replay-safe `lookup` and a `charge`
/// that is not; `charge` never finishes when `hang` is set (the process will "die" in it).
async fn tool_agent(dir: &tempfile::TempDir, turns: Vec<FauxTurn>, hang: bool) -> Agent {
    let lookups = std::sync::atomic::AtomicUsize::new(0);
    let lookups = Arc::new(lookups);
    let lookup = weft_agent::tool_fn("lookup", "Looks something up", move |a: Query| {
        let lookups = lookups.clone();
        async move {
            lookups.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Ok::<_, String>(format!("found {}", a.q))
        }
    })
    .replay_safe();
    let charge = weft_agent::tool_fn("charge", "Charges a card", move |_: Query| async move {
        if hang {
            std::future::pending::<()>().await;
        }
        Ok::<_, String>("charged".to_string())
    });
    Agent::builder(Recording::new(turns))
        .tool(lookup)
        .tool(charge)
        .store(sqlite(dir).await)
        .lease_ttl(Duration::from_millis(300))
        .sweep_interval(Duration::from_millis(50))
        .build()
        .unwrap()
}

#[test]
fn a_run_whose_process_died_is_recovered_when_its_session_is_loaded() {
    let dir = tempfile::tempdir().unwrap();
    // A "process" (its own runtime) starts a run that calls a replay-safe tool and one that is
    // not, and dies while the second is running: the runtime is dropped, nothing cleans up.
    let id = {
        let rt = tokio::runtime::Runtime::new().unwrap();
        let id = rt.block_on(async {
            let turn = FauxTurn::default()
                .with_tool_call("lookup", json!({"q": "price"}))
                .with_tool_call("charge", json!({"q": "card"}));
            let agent = tool_agent(&dir, vec![turn], true).await;
            let session = agent.create_session(SessionOptions::default()).await.unwrap();
            let mut stream = agent.execute(&session, Input::text("buy it")).await.unwrap();
            // Wait until the calls run (their state is committed at the model call's end).
            while let Some(event) = stream.next().await {
                if matches!(event, AgentEvent::ToolExecutionEnd { .. }) {
                    break;
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            session.id()
        });
        drop(rt);
        id
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store = sqlite(&dir).await;
        let stored = store.load(&id).await.unwrap().unwrap();
        assert_eq!(stored.head.status, SessionStatus::Running, "the dead run left it running");
        tokio::time::sleep(Duration::from_millis(400)).await; // its lease expires

        let turns = vec![FauxTurn::text("Done."), FauxTurn::text("Nothing more.")];
        let agent = tool_agent(&dir, turns, false).await;
        let session = agent.session(&id).await.unwrap().unwrap();
        for _ in 0..1500 {
            if session.status() != SessionStatus::Running {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(session.status(), SessionStatus::Completed, "recovered and run to its end");
        // Everything after what the store had when the process died: the recovered run, however
        // far it had gone when this looks.
        let watched: Vec<_> = session.subscribe(stored.last_seq).collect().await;
        let results = common::tool_results(&session.snapshot().messages);
        assert_eq!(
            results,
            [
                ("found price".to_string(), false),
                (
                    "Tool call interrupted: the process running it stopped before it finished"
                        .to_string(),
                    true
                )
            ],
            "the replay-safe call ran again, the other was answered as interrupted"
        );
        // The run went on from its last checkpoint: the model saw both results and answered.
        let messages = session.snapshot().messages;
        assert_eq!(messages.len(), 5, "user, calls, two results, the answer");
        let answer = match messages.last() {
            Some(Message::Assistant(m)) => m.text(),
            other => panic!("the last message is not an answer: {other:?}"),
        };
        assert_eq!(answer, "Done.");
        let ended = watched.iter().rev().find_map(|r| match &r.event {
            AgentEvent::SessionEnd { status, .. } => Some(*status),
            _ => None,
        });
        assert_eq!(ended, Some(SessionStatus::Completed), "watchers saw the recovered run end");
        // The session takes new input, and the model sees a valid conversation.
        let result = agent.execute(&session, Input::text("and now?")).await.unwrap().result().await;
        assert_eq!(result.status, SessionStatus::Completed);
        let stored = store.load(&id).await.unwrap().unwrap();
        assert_eq!(stored.head.status, SessionStatus::Completed);
        assert_eq!(stored.messages.len(), 7);
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deadline_that_passed_while_no_process_ran_is_enforced_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let id = {
        let agent = Agent::builder(Recording::new([FauxTurn::tool_call("read_page", json!({}))]))
            .store(sqlite(&dir).await)
            .remote_tool_timeout(Duration::from_millis(100))
            .build()
            .unwrap();
        let session = agent
            .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
            .await
            .unwrap();
        let result = agent.execute(&session, Input::text("title?")).await.unwrap().result().await;
        assert_eq!(result.status, SessionStatus::AwaitingToolExecution);
        session.id()
        // The agent (the process) goes away before the deadline.
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    // A new process starts: its sweeper finds the expired call without being asked.
    let provider = Recording::new([FauxTurn::text("The page never answered.")]);
    let _agent = Agent::builder(provider.clone())
        .store(sqlite(&dir).await)
        .sweep_interval(Duration::from_millis(50))
        .build()
        .unwrap();
    let store = sqlite(&dir).await;
    let mut status = SessionStatus::AwaitingToolExecution;
    for _ in 0..200 {
        status = store.head(&id).await.unwrap().unwrap().status;
        if status == SessionStatus::Completed {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(status, SessionStatus::Completed);
    let Some(Message::ToolResult(r)) = provider.last_request().messages.last().cloned() else {
        panic!("the model was not told")
    };
    assert!(r.is_error && r.text_content().contains("before its deadline"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_answer_received_by_two_processes_at_once_is_applied_once() {
    let dir = tempfile::tempdir().unwrap();
    // Each process's faux provider plays its own script from its start: A's first turn asks for
    // the page; whichever process resumes answers with text.
    let agent = |store, turns: Vec<FauxTurn>| {
        Agent::builder(Recording::new(turns)).store(store).build().unwrap()
    };
    let a = agent(
        sqlite(&dir).await,
        vec![FauxTurn::tool_call("read_page", json!({})), FauxTurn::text("Thanks.")],
    );
    let session = a
        .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
        .await
        .unwrap();
    let id = session.id();
    let result = a.execute(&session, Input::text("title?")).await.unwrap().result().await;
    let call = result.pending_tool_calls[0].clone();
    let b = agent(sqlite(&dir).await, vec![FauxTurn::text("Thanks.")]);
    let sb = b.session(&id).await.unwrap().unwrap();

    let answer = || Input::ToolResults(vec![ToolResultMessage::ok(&call, "Weft")]);
    let (ra, rb) = tokio::join!(a.execute(&session, answer()), b.execute(&sb, answer()));
    let (accepted, refused): (Vec<_>, Vec<_>) = [ra, rb].into_iter().partition(Result::is_ok);
    assert_eq!(accepted.len(), 1, "exactly one process applies the answer");
    let refusal = refused.into_iter().next().unwrap().err().unwrap();
    assert!(
        matches!(
            refusal,
            ExecuteError::AlreadyRunning(_)
                | ExecuteError::AlreadyAnswered(_)
                | ExecuteError::Store(_)
        ),
        "{refusal}"
    );
    let result = accepted.into_iter().next().unwrap().unwrap().result().await;
    assert_eq!(result.status, SessionStatus::Completed);
    let stored = sqlite(&dir).await.load(&id).await.unwrap().unwrap();
    let results = stored.messages.iter().filter(|m| matches!(m, Message::ToolResult(_))).count();
    assert_eq!(results, 1, "the answer is in the conversation once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_store_a_watcher_from_an_old_seq_gets_the_current_run() {
    let provider = Recording::new([
        FauxTurn::text("first answer"),
        FauxTurn::text(prose(4_000)).with_chunk_size(4).with_delay_ms(1),
    ]);
    let agent = Agent::builder(provider).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    agent.execute(&session, Input::text("one")).await.unwrap().result().await;
    let stream = agent.execute(&session, Input::text("two")).await.unwrap();
    // Memory keeps only the run under way; a watcher asking for seq 1 on gets all of that run.
    let watched: Vec<_> =
        tokio::time::timeout(Duration::from_secs(30), session.subscribe(0).collect::<Vec<_>>())
            .await
            .expect("the watcher follows the run to its end");
    let own: Vec<(u64, AgentEvent)> = stream.sequenced().collect().await;
    assert_eq!(
        watched.iter().map(|r| r.seq).collect::<Vec<_>>(),
        own.iter().map(|(s, _)| *s).collect::<Vec<_>>()
    );
    assert_eq!(text_and_seqs(&watched).0, prose(4_000));
}

#[tokio::test]
async fn sessions_are_listed_and_deleted_per_owner() {
    use weft_core::OwnerScope;
    let dir = tempfile::tempdir().unwrap();
    let agent = Agent::builder(Recording::new([])).store(sqlite(&dir).await).build().unwrap();
    let owned = |owner: &str| SessionOptions { owner: Some(owner.into()), ..Default::default() };
    let alice = agent.create_session(owned("alice")).await.unwrap().id();
    let bob = agent.create_session(owned("bob")).await.unwrap().id();
    let listed = agent.list_sessions(OwnerScope::Owner("alice"), 10).await.unwrap();
    assert_eq!(listed.iter().map(|h| h.id.as_str()).collect::<Vec<_>>(), [alice.as_str()]);
    assert_eq!(agent.list_sessions(OwnerScope::Any, 10).await.unwrap().len(), 2);
    // Bob cannot delete Alice's session; she can.
    assert!(!agent.delete_session(&alice, OwnerScope::Owner("bob")).await.unwrap());
    assert!(agent.session(&alice).await.unwrap().is_some());
    assert!(agent.delete_session(&alice, OwnerScope::Owner("alice")).await.unwrap());
    assert!(agent.session(&alice).await.unwrap().is_none(), "gone from the process and the store");
    assert!(agent.session(&bob).await.unwrap().is_some());
}

/// Every event that repeats messages names where they are in the log, and names them right:
/// the user's message, an answer whose call is rejected at once (its result follows it in the
/// log in the same instant), a local tool's turn, a remote call and its resumption, the final
/// answer, every `step_end` and each run's `session_end`. SQLite keeps those events without the
/// messages (each message once in the file) and gives them back whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_repeating_messages_point_at_the_log_and_are_stored_once() {
    let dir = tempfile::tempdir().unwrap();
    let agent = tool_agent(
        &dir,
        vec![
            FauxTurn::text("No such tool first.").with_tool_call("no_such_tool", json!({})),
            FauxTurn::text("Looking it up.").with_tool_call("lookup", json!({"q": "weft"})),
            FauxTurn::text("Reading the page.").with_tool_call("read_page", json!({})),
            FauxTurn::text("The answer is forty-two, said the remarkable page."),
        ],
        false,
    )
    .await;
    let session = agent
        .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
        .await
        .unwrap();
    // The records as the runs publish them (live: the hub keeps only a few once they are
    // stored, and records read back from the store carry the messages it put back).
    let mut live: Vec<Arc<EventRecord>> = Vec::new();
    let mut records =
        agent.execute(&session, Input::text("Find the answer")).await.unwrap().records();
    while let Some(record) = records.next().await {
        live.push(record);
    }
    let first = records.result().await;
    assert_eq!(first.status, SessionStatus::AwaitingToolExecution);
    let pending = session.pending_tool_calls();
    let results = vec![ToolResultMessage::ok(&pending[0], "the remarkable page says 42")];
    let mut records = agent.execute(&session, Input::ToolResults(results)).await.unwrap().records();
    while let Some(record) = records.next().await {
        live.push(record);
    }
    let second = records.result().await;
    assert_eq!(second.status, SessionStatus::Completed);

    let log = session.snapshot().messages;
    let mut spans = 0;
    for record in &live {
        let Some(span) = record.messages else {
            assert!(
                !matches!(
                    record.event,
                    AgentEvent::MessageEnd { .. }
                        | AgentEvent::StepEnd { .. }
                        | AgentEvent::SessionEnd { .. }
                ),
                "{record:?} names no messages"
            );
            continue;
        };
        spans += 1;
        let named = &log.shared()[span.first as usize..span.end() as usize];
        match &record.event {
            AgentEvent::StepEnd { step } => {
                assert_eq!(span.count, 1);
                assert_eq!(*named[0], Message::Assistant(step.llm_response.clone()));
            }
            _ => {
                let carried = record.carried_messages();
                assert_eq!(carried.len(), named.len(), "{record:?}");
                for (c, n) in carried.iter().zip(named) {
                    assert!(Arc::ptr_eq(c, n), "the event shares the log's own message");
                }
            }
        }
    }
    // 9 messages (user, 3 × assistant + result, answer) and 4 steps, 2 session_ends.
    assert_eq!(log.len(), 8);
    assert_eq!(spans, 8 + 4 + 2);

    // From the file: the same events, whole; the rows do not repeat the messages.
    let store = sqlite(&dir).await;
    let stored = store.read_events(&session.id(), 0, usize::MAX).await.unwrap();
    let events = |r: &[Arc<EventRecord>]| r.iter().map(|e| e.event.clone()).collect::<Vec<_>>();
    assert_eq!(events(&stored), events(&live));
    let mut raw = sqlx::SqliteConnection::connect(&format!(
        "sqlite:{}",
        dir.path().join("weft.db").display()
    ))
    .await
    .unwrap();
    // The user's words are in no event row; the final answer's only in its block's `text_end`.
    assert_eq!(types_holding(&mut raw, "Find the answer").await, Vec::<String>::new());
    assert_eq!(types_holding(&mut raw, "forty-two").await, ["text_end"]);
}

/// The types of the stored events (deltas aside) whose JSON holds `text`.
async fn types_holding(raw: &mut sqlx::SqliteConnection, text: &str) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT json_extract(event, '$.type') FROM events \
         WHERE instr(event, ?) > 0 AND json_extract(event, '$.type') <> 'text_delta' ORDER BY seq",
    )
    .bind(text)
    .fetch_all(raw)
    .await
    .unwrap()
}

/// A session deleted by another process while this one runs it: the store refuses the run's
/// events for good. The run reports the refusal as its error, and the refused events are not
/// sent again and again for the life of the process (they once were, every five seconds at
/// most, keeping the session's events and a task alive).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_the_store_refuses_for_good_are_not_retried_and_the_run_is_told() {
    let dir = tempfile::tempdir().unwrap();
    let spy = Arc::new(common::Spy::new(sqlite(&dir).await));
    // ~2.5 s of streaming: the deletion below surely lands while the model streams.
    let provider =
        Recording::new([FauxTurn::text(prose(2_000)).with_chunk_size(8).with_delay_ms(10)]);
    let agent = Agent::builder(provider).store(spy.clone()).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let id = session.id();
    let mut stream = agent.execute(&session, Input::text("go on")).await.unwrap();
    let mut deltas = 0;
    while let Some(event) = stream.next().await {
        if matches!(event, AgentEvent::TextDelta { .. }) {
            deltas += 1;
            if deltas == 10 {
                break;
            }
        }
    }
    // Another process deletes the session while the model streams.
    let other = Agent::builder(Recording::new([])).store(sqlite(&dir).await).build().unwrap();
    assert!(other.delete_session(&id, OwnerScope::Any).await.unwrap());
    let at_delete = spy.appends();

    let result =
        tokio::time::timeout(Duration::from_secs(30), stream.result()).await.expect("the run ends");
    // The model's answer was whole (its status says so), but the run is not durable: it says so.
    // The store refused the events, and then the end (the session is gone): either is told.
    let message = match &result.outcome {
        weft_agent::RunOutcome::Failed { kind: weft_agent::FailureKind::Store, message }
        | weft_agent::RunOutcome::EndNotDurable { message, .. } => message,
        _ => panic!("the run does not say its events were refused: {result:?}"),
    };
    assert!(!result.outcome.is_durable());
    // The store's own words name the session.
    assert!(message.contains(&id), "{message}");

    // One write was refused (and one may have been under way as the session went): the rest
    // of the run's events were not offered one batch after another.
    let after_end = spy.appends();
    assert!(after_end <= at_delete + 2, "{} writes after the deletion", after_end - at_delete);

    // The run has ended; its refused events are not sent again. A retrying writer would call
    // the store again within its longest backoff (5 s).
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    assert_eq!(spy.appends(), after_end, "refused events were sent again");
}

/// An agent on a real SQLite file seen through a spy, whose model answers two runs with 400
/// characters of prose each, in 8-character deltas; and a session of it.
async fn two_runs_on_a_spied_store()
-> (tempfile::TempDir, Arc<common::Spy>, Agent, weft_agent::SessionHandle) {
    let dir = tempfile::tempdir().unwrap();
    let spy = Arc::new(common::Spy::new(sqlite(&dir).await));
    let provider = Recording::new([
        FauxTurn::text(prose(400)).with_chunk_size(8).with_delay_ms(1),
        FauxTurn::text(prose(400)).with_chunk_size(8).with_delay_ms(1),
    ]);
    let agent = Agent::builder(provider).store(spy.clone()).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    (dir, spy, agent, session)
}

/// After a run whose events the store refused, the next run of the same session is written as
/// usual: neither the refused events nor the refusal are carried into it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_refused_run_the_next_run_is_stored_whole() {
    let (_dir, spy, agent, session) = two_runs_on_a_spied_store().await;
    let id = session.id();

    spy.refuse_appends.store(1, std::sync::atomic::Ordering::SeqCst);
    let first = agent.execute(&session, Input::text("one")).await.unwrap().result().await;
    let weft_agent::RunOutcome::Failed { kind: weft_agent::FailureKind::Store, message } =
        &first.outcome
    else {
        panic!("the refused run does not say so: {first:?}")
    };
    // The store's own words are passed on.
    assert!(message.contains("refused by the test"), "{message}");

    let second = agent.execute(&session, Input::text("two")).await.unwrap().result().await;
    assert_eq!((second.status, second.error.as_deref()), (SessionStatus::Completed, None));
    assert_eq!(second.outcome, weft_agent::RunOutcome::Completed);
    let stored = spy.inner.read_events(&id, 0, 100_000).await.unwrap();
    let runs: std::collections::BTreeSet<&str> = stored.iter().map(|r| &*r.run_id).collect();
    assert_eq!(runs.len(), 1, "only the second run's events are stored");
    assert!(matches!(stored.first().map(|r| &r.event), Some(AgentEvent::SessionStart { .. })));
    assert!(matches!(stored.last().map(|r| &r.event), Some(AgentEvent::SessionEnd { .. })));
    let (text, seqs) = text_and_seqs(&stored);
    assert_eq!(text, prose(400));
    assert_strictly_increasing(&seqs);
}

/// A run's stream is that run's: a run cut off by a refusal (its end never shown), whose stream
/// is read only after the session's next run has ended, streams none of the next run's events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_runs_stream_read_late_holds_nothing_of_the_next_run() {
    let (_dir, spy, agent, session) = two_runs_on_a_spied_store().await;

    spy.refuse_appends.store(1, std::sync::atomic::Ordering::SeqCst);
    let mut first = agent.execute(&session, Input::text("one")).await.unwrap().records();
    // Nobody reads the first run's stream until the second run has ended.
    let second = loop {
        match agent.execute(&session, Input::text("two")).await {
            Ok(stream) => break stream.result().await,
            Err(ExecuteError::AlreadyRunning(_)) => {
                tokio::time::sleep(Duration::from_millis(5)).await
            }
            Err(error) => panic!("the second run did not start: {error}"),
        }
    };
    assert_eq!(second.status, SessionStatus::Completed, "{:?}", second.error);

    let mut runs = std::collections::BTreeSet::new();
    while let Some(record) = first.next().await {
        runs.insert(record.run_id.to_string());
    }
    let result = first.result().await;
    assert!(!result.outcome.is_durable(), "{result:?}");
    // The store has only the second run's events.
    let stored = spy.inner.read_events(&session.id(), 0, 100_000).await.unwrap();
    let next_run = stored.last().map(|r| r.run_id.to_string()).unwrap();
    assert!(!runs.contains(&next_run), "the first run's stream holds the next run's events");
    // What memory still held of the first run, if anything (its events were never stored).
    assert!(runs.len() <= 1, "{runs:?}");
}
