//! Process identities: a process that takes over the identity of one that died (the same
//! folder, whose lock the kernel released) frees the leases it left, so its suspended sessions
//! take answers and its runs are recovered at once, not after the lease ttl; a new input to a
//! session being recovered waits for the recovery and then runs. A second live process gets an
//! identity of its own and still waits for the lease.
//!
//! Each "process" is an agent on a runtime of its own; dropping both is its death: its tasks
//! stop where they are, its leases stay in the store, its identity's lock is let go.

#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod common;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use common::Spy;
use futures::StreamExt;
use serde_json::json;
use weft_agent::{Agent, ExecuteError, ProcessIdentity, SessionOptions};
use weft_core::{
    AgentEvent, Input, Message, SessionStatus, SessionStore, ToolResultMessage, ToolSpec,
};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_store::SqliteStore;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
}

/// A long lease: nothing in these tests may wait for one to expire.
const TTL: Duration = Duration::from_secs(120);

async fn sqlite(path: &Path) -> Arc<dyn SessionStore> {
    Arc::new(SqliteStore::open(path).await.unwrap())
}

/// A "process": an agent on the SQLite file `db` whose model plays `turns`, with the tool that
/// never ends, under the first free identity of `home`.
async fn process(db: &Path, home: &Path, turns: impl IntoIterator<Item = FauxTurn>) -> Agent {
    Agent::builder(FauxProvider::new(FauxScript::new(turns)))
        .tool(common::hang())
        .store(sqlite(db).await)
        .identity(ProcessIdentity::claim(home).unwrap())
        .lease_ttl(TTL)
        .build()
        .unwrap()
}

/// Process 1 on `home`: a session whose run is inside a tool call that never ends when the
/// process dies. Returns the session's id and the dead run's.
fn die_inside_a_tool(db: &Path, home: &Path) -> (String, String) {
    let rt = runtime();
    let ids = rt.block_on(async {
        let agent = process(db, home, [FauxTurn::tool_call("charge", json!({"q": "x"}))]).await;
        let session = agent.create_session(SessionOptions::default()).await.unwrap();
        let mut stream = agent.execute(&session, Input::text("buy")).await.unwrap();
        let mut run = String::new();
        while let Some(event) = stream.next().await {
            match event {
                AgentEvent::SessionStart { run_id, .. } => run = run_id,
                AgentEvent::ToolExecutionStart { .. } => break,
                _ => {}
            }
        }
        (session.id(), run)
    });
    drop(rt);
    ids
}

#[test]
fn a_restarted_process_recovers_its_dead_run_at_once_and_new_input_waits_for_it() {
    let dir = tempfile::tempdir().unwrap();
    let (db, home) = (dir.path().join("weft.db"), dir.path().join("processes"));
    let (id, dead_run) = die_inside_a_tool(&db, &home);
    let rt = runtime();
    rt.block_on(async {
        let recovered = FauxTurn::text("The charge was interrupted; I will not retry it.");
        let answer = FauxTurn::text("Here is your receipt.");
        let agent = process(&db, &home, [recovered, answer]).await;
        let session = agent.session(&id).await.unwrap().unwrap();
        assert!(session.is_recovering(), "the dead run is taken over at once, not after {TTL:?}");
        // Not refused: the message waits for the recovery, then runs.
        let (_, result) = tokio::time::timeout(
            Duration::from_secs(30),
            common::run(&agent, &session, Input::text("receipt?")),
        )
        .await
        .expect("the input ran once the recovery ended");
        assert_eq!(result.status, SessionStatus::Completed);
        let texts: Vec<String> = session
            .snapshot()
            .messages
            .iter()
            .map(|m| match m {
                Message::User(u) => format!("user: {}", u.text_content()),
                Message::Assistant(a) => format!("assistant: {}", a.text()),
                Message::ToolResult(r) => format!("result: {}", r.is_error),
            })
            .collect();
        assert_eq!(
            texts,
            [
                "user: buy",
                "assistant: ",
                "result: true",
                "assistant: The charge was interrupted; I will not retry it.",
                "user: receipt?",
                "assistant: Here is your receipt.",
            ]
        );
        // The log says which run the recovery completes: the dead one's (by its first
        // execution's id, the id clients know its answer by); the next run recovers nothing.
        let store = sqlite(&db).await;
        let starts: Vec<(String, Option<String>)> = store
            .read_events(&id, 0, usize::MAX)
            .await
            .unwrap()
            .iter()
            .filter_map(|record| match &record.event {
                AgentEvent::SessionStart { run_id, recovers, .. } => {
                    Some((run_id.clone(), recovers.as_deref().cloned()))
                }
                _ => None,
            })
            .filter(|(run, _)| *run != dead_run)
            .collect();
        assert_eq!(starts.len(), 2, "{starts:?}");
        assert_eq!(starts[0].1.as_deref(), Some(dead_run.as_str()), "{starts:?}");
        assert_eq!(starts[1].1, None);
    });
}

#[test]
fn a_restarted_process_takes_answers_for_a_suspended_session_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (db, home) = (dir.path().join("weft.db"), dir.path().join("processes"));
    let weather = ToolSpec::new("get_weather", "The weather", json!({"type": "object"}));
    // Process 1 suspends on a remote call and dies before its lease is given back (the
    // release is slow: the kill lands between the end the client saw and the release).
    let (id, call_id) = {
        let rt = runtime();
        let ids = rt.block_on(async {
            let store =
                Arc::new(Spy::new(sqlite(&db).await).slow_release(Duration::from_secs(600)));
            let turn = FauxTurn::tool_call("get_weather", json!({"city": "Paris"}));
            let agent = Agent::builder(FauxProvider::new(FauxScript::new([turn])))
                .store(store)
                .identity(ProcessIdentity::claim(&home).unwrap())
                .lease_ttl(TTL)
                .build()
                .unwrap();
            let options = SessionOptions { tools: vec![weather.clone()], ..Default::default() };
            let session = agent.create_session(options).await.unwrap();
            let mut stream = agent.execute(&session, Input::text("weather?")).await.unwrap();
            let mut call_id = None;
            while let Some(event) = stream.next().await {
                if let AgentEvent::AwaitingToolExecution { tool_calls, .. } = &event {
                    call_id = Some(tool_calls[0].id.clone());
                }
                if matches!(event, AgentEvent::SessionEnd { .. }) {
                    break;
                }
            }
            (session.id(), call_id.unwrap())
        });
        drop(rt);
        ids
    };
    let rt = runtime();
    rt.block_on(async {
        let agent = process(&db, &home, [FauxTurn::text("Sunny.")]).await;
        let session = agent.session(&id).await.unwrap().unwrap();
        assert_eq!(session.status(), SessionStatus::AwaitingToolExecution);
        let call = session.pending_tool_calls().remove(0);
        assert_eq!(call.id, call_id);
        let answer = ToolResultMessage::ok(&call, "21 degrees");
        let stream = agent.execute(&session, Input::ToolResults(vec![answer])).await;
        let (_, result) = stream.expect("accepted at once").collect_all().await;
        assert_eq!(result.status, SessionStatus::Completed);
    });
}

#[test]
fn a_second_live_process_has_an_identity_of_its_own_and_waits_for_the_lease() {
    let dir = tempfile::tempdir().unwrap();
    let (db, home) = (dir.path().join("weft.db"), dir.path().join("processes"));
    let rt = runtime();
    rt.block_on(async {
        let first = process(&db, &home, [FauxTurn::tool_call("charge", json!({"q": "x"}))]).await;
        let session = first.create_session(SessionOptions::default()).await.unwrap();
        let mut stream = first.execute(&session, Input::text("buy")).await.unwrap();
        while let Some(event) = stream.next().await {
            if matches!(event, AgentEvent::ToolExecutionStart { .. }) {
                break;
            }
        }
        // The first process lives: the second gets the next slot, and its run is not taken.
        let second = process(&db, &home, [FauxTurn::text("no")]).await;
        assert_ne!(first.identity().name(), second.identity().name());
        assert_eq!(second.identity().slot_path().unwrap().file_name().unwrap(), "1.lock");
        let there = second.session(&session.id()).await.unwrap().unwrap();
        assert!(!there.is_recovering());
        let refused = second.execute(&there, Input::text("hello")).await.err();
        assert!(matches!(refused, Some(ExecuteError::AlreadyRunning(_))), "{refused:?}");
        assert!(session.abort().await);
    });
}
