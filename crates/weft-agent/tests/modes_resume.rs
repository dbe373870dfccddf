//! Kill and resume, per reasoning mode: a child process runs a react, tot or got session of the
//! example scripts (examples/scripts) on SQLite; once the checkpoint of a chosen node run is in
//! the store, while the next model call hangs, the child is killed (SIGKILL). A fresh agent in
//! this process, whose faux provider holds only the turns that come after the last completed
//! node, loads the session: it recovers the dead run from its saved state and finishes it. The
//! final answer is the script's, and the faux calls counted prove that completed nodes (react:
//! the model call whose tool ran; tot: explored branches; got: completed graph nodes) were not
//! run again.
//!
//! The child is this test binary again, running the ignored test `worker` (which does nothing
//! unless `WEFT_MODES_WORKER` is set), as tests/crash.rs does.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs, unreachable_pub)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use schemars::JsonSchema;
use serde::Deserialize;
use weft_agent::{Agent, Mode, SessionOptions, tool_fn};
use weft_core::{Input, Message, SessionStatus, SessionStore};
use weft_llm::faux::{FauxProvider, FauxScript};
use weft_store::SqliteStore;

const LEASE: Duration = Duration::from_millis(300);

#[derive(Deserialize, JsonSchema)]
struct EchoArgs {
    text: String,
}

fn script(name: &str) -> FauxScript {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripts").join(name);
    FauxScript::from_file(path).unwrap()
}

fn agent(store: Arc<dyn SessionStore>, script: FauxScript) -> (Agent, Arc<FauxProvider>) {
    let provider = Arc::new(FauxProvider::new(script));
    let agent =
        Agent::builder_shared(provider.clone())
            .store(store)
            .lease_ttl(LEASE)
            .sweep_interval(Duration::from_millis(50))
            .tool(tool_fn("echo", "Echoes the text", |a: EchoArgs| async move {
                Ok::<_, String>(a.text)
            }))
            .build()
            .unwrap();
    (agent, provider)
}

/// One case: its script, the turn the child hangs in, and the checkpoints (node run
/// ids) that must be stored before it is killed.
struct Case {
    script: &'static str,
    hang_at: usize,
    killed_after: &'static [&'static str],
    prompt: &'static str,
}

const TOT: Case = Case {
    script: "tot.json",
    hang_at: 5,
    killed_after: &["observe-4"],
    prompt: "Make 24 from 4 6 1 1",
};

const GOT: Case = Case {
    script: "got.json",
    hang_at: 5,
    killed_after: &["plan_graph-0", "got-facts-1", "got-length-2", "got-cities-2", "got-flow-2"],
    prompt: "Tell me about the Seine",
};

const REACT: Case = Case {
    script: "react.json",
    hang_at: 1,
    killed_after: &["think-0", "act-0", "observe-0"],
    prompt: "How long is the Seine?",
};

fn case(mode: &str) -> &'static Case {
    match mode {
        "react" => &REACT,
        "tot" => &TOT,
        _ => &GOT,
    }
}

#[test]
#[ignore = "the kill-and-resume tests' worker process: they run it; by itself it does nothing"]
fn worker() {
    let Ok(mode) = std::env::var("WEFT_MODES_WORKER") else { return };
    let db = std::env::var("WEFT_MODES_DB").unwrap();
    let case = case(&mode);
    let mut script = script(case.script);
    script.turns[case.hang_at].stall = true;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&db).await.unwrap());
        let (agent, _) = agent(store, script);
        let options = SessionOptions {
            id: Some(format!("s-{mode}")),
            mode: Some(Mode::named(&mode).unwrap()),
            ..SessionOptions::default()
        };
        let session = agent.create_session(options).await.unwrap();
        let stream = agent.execute(&session, Input::text(case.prompt)).await.unwrap();
        // Hangs in the stalled call until killed.
        let _ = stream.result().await;
        std::process::exit(3);
    });
}

struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn kill_and_resume(mode: &str) {
    let case = case(mode);
    let dir = tempfile::tempdir().unwrap();
    let db: PathBuf = dir.path().join("weft.db");
    let mut child = Child(
        Command::new(std::env::current_exe().unwrap())
            .args(["worker", "--exact", "--ignored", "--nocapture", "--test-threads=1"])
            .env("WEFT_MODES_WORKER", mode)
            .env("WEFT_MODES_DB", &db)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    runtime.block_on(async move {
        let session_id = format!("s-{mode}");
        // Wait for the chosen checkpoints; the open store sees the child's writes.
        let started = Instant::now();
        let store: Arc<dyn SessionStore> = loop {
            if db.exists()
                && let Ok(store) = SqliteStore::open(&db).await
            {
                break Arc::new(store);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        loop {
            let stored = store.list_checkpoints(&session_id, mode).await.unwrap_or_default();
            let ids: Vec<&str> = stored.iter().map(|c| c.id.as_str()).collect();
            if case.killed_after.iter().all(|id| ids.contains(id)) {
                break;
            }
            assert!(started.elapsed() < Duration::from_secs(60), "checkpoints never came: {ids:?}");
            assert!(child.0.try_wait().unwrap().is_none(), "the worker ended early");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        // A moment for the hanging call to start, then the process dies.
        tokio::time::sleep(Duration::from_millis(100)).await;
        child.0.kill().unwrap();
        child.0.wait().unwrap();
        let head = store.head(&session_id).await.unwrap().unwrap();
        assert_eq!(head.status, SessionStatus::Running, "killed mid-run");

        // Another process: only the turns after the last completed node.
        let full = script(case.script);
        let rest = FauxScript::new(full.turns[case.hang_at..].to_vec());
        let expected_calls = rest.turns.len();
        tokio::time::sleep(LEASE).await;
        let (agent, provider) = agent(store.clone(), rest);
        let session = agent.session(&session_id).await.unwrap().unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while matches!(session.status(), SessionStatus::Running | SessionStatus::Idle) {
            assert!(Instant::now() < deadline, "the recovered run never ended");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let snapshot = session.snapshot();
        assert_eq!(snapshot.status, SessionStatus::Completed, "{snapshot:#?}");
        let answer = match snapshot.messages.last() {
            Some(Message::Assistant(m)) => m.text(),
            other => panic!("{other:?}"),
        };
        let want = full.turns.last().unwrap().text.clone().unwrap();
        assert_eq!(answer, want);
        assert_eq!(
            provider.turns_played(&session_id),
            expected_calls,
            "only the calls after the last checkpoint were made again"
        );
        // The resumed run went on checkpointing, after the ones of the dead process.
        let stored = store.list_checkpoints(&session_id, mode).await.unwrap();
        assert!(stored.len() > case.killed_after.len());
        let events = store.read_events(&session_id, 0, 10_000).await.unwrap();
        let mut enters: Vec<String> = events
            .iter()
            .filter_map(|r| match &r.event {
                weft_core::AgentEvent::NodeEnter { node_id, .. } => Some(node_id.clone()),
                _ => None,
            })
            .collect();
        let n = enters.len();
        enters.sort();
        enters.dedup();
        assert_eq!(enters.len(), n, "node ids are unique over both processes");
        // No tool call ran twice (react's echo ran before the kill, in the dead process).
        let mut started: Vec<&str> = events
            .iter()
            .filter_map(|r| match &r.event {
                weft_core::AgentEvent::ToolExecutionStart { tool_call_id, .. } => {
                    Some(tool_call_id.as_str())
                }
                _ => None,
            })
            .collect();
        let runs = started.len();
        started.sort_unstable();
        started.dedup();
        assert_eq!(started.len(), runs, "a tool call ran again: {started:?}");
        if mode == "react" {
            assert_eq!(runs, 1, "the echo ran once");
        }
    });
}

#[test]
fn react_resumes_from_its_last_checkpoint_without_running_its_tool_again() {
    kill_and_resume("react");
}

#[test]
fn tot_resumes_from_its_last_checkpoint_without_expanding_again() {
    kill_and_resume("tot");
}

#[test]
fn got_resumes_from_its_last_checkpoint_without_rerunning_completed_nodes() {
    kill_and_resume("got");
}
