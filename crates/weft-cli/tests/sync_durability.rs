//! `durability: "sync"` against a real `weft serve` on SQLite, killed with SIGKILL at seeded
//! points while a client streams a run: after every kill, every event the client received is
//! in the store, exactly as received. Each life of the server runs on the same database (so a
//! later life also recovers the runs the earlier ones left), and half the runs ask for `sync`
//! in their request while the other half get it from `weft serve --durability sync`.
//!
//! `WEFT_SYNC_KILLS=N` runs N kills instead of 8; `WEFT_SYNC_SEED=S` picks other kill points.

#![allow(clippy::unwrap_used, missing_docs)]

use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;
use weft_core::{AgentEvent, SessionStore};

/// One model turn: thinking, then a long answer in small, paced deltas (about a second).
const SCRIPT: &str = r#"{"turns":[{"thinking":"The user wants a long answer; I will give one.","text":"TEXT","chunkSize":3,"delayMs":3}]}"#;

/// `weft serve` on the SQLite file `db`, killed when dropped.
struct Serve {
    child: Child,
    addr: String,
}

impl Serve {
    fn start(home: &Path, db: &Path, flag_sync: bool) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
        cmd.args(["serve", "--addr", "127.0.0.1:0", "--script"])
            .arg(home.join("script.json"))
            .arg("--store")
            .arg(format!("sqlite:{}", db.display()));
        if flag_sync {
            cmd.args(["--durability", "sync"]);
        }
        cmd.env("WEFT_HOME", home).env("NO_COLOR", "1").current_dir(home).stdin(Stdio::null());
        for var in ["WEFT_ADDR", "WEFT_STORE", "WEFT_PROVIDER", "WEFT_MODEL", "WEFT_DURABILITY"] {
            cmd.env_remove(var);
        }
        let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.contains("http://") {
            line.clear();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "weft serve exited: {line}");
        }
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        let addr = line.trim().rsplit("http://").next().unwrap().to_string();
        Self { child, addr }
    }

    fn kill(mut self) {
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What a client received: the session's id and each event with an id, as (seq, JSON).
struct Received {
    session: Option<String>,
    events: Vec<(u64, Value)>,
}

/// Posts a new session's run and reads its stream on a thread until `frames` events with an id
/// arrived (or the stream ended); hands what it got over as it goes.
fn stream_run(addr: &str, sync_in_request: bool, frames: usize) -> mpsc::Receiver<Received> {
    let options = if sync_in_request { r#","options":{"durability":"sync"}"# } else { "" };
    let body = format!(
        r#"{{"input":{{"role":"user","content":"Tell me a long story."}},"context":{{"messages":[],"tools":[]}}{options}}}"#
    );
    let mut stream = TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "POST /api/agent/execute HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut received = Received { session: None, events: Vec::new() };
        // A frame's fields until its blank line; frames without an id wait for the next id (the
        // native `session_end` is numbered by the `execute_complete` frame that follows it).
        let (mut id, mut data, mut held) = (None, None, Vec::<Value>::new());
        for line in BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            if let Some(value) = line.to_ascii_lowercase().strip_prefix("x-session-id:") {
                received.session = Some(value.trim().to_string());
            } else if let Some(seq) = line.strip_prefix("id: ") {
                id = seq.trim().parse::<u64>().ok();
            } else if let Some(json) = line.strip_prefix("data: ") {
                data = serde_json::from_str::<Value>(json).ok();
            } else if line.is_empty() {
                held.extend(data.take());
                if let Some(seq) = id.take() {
                    let events = held.drain(..).filter(|e| e["type"] != "execute_complete");
                    received.events.extend(events.map(|e| (seq, e)));
                }
                if received.events.len() >= frames {
                    break;
                }
            }
        }
        let _ = tx.send(received);
    });
    rx
}

/// Every event of `received` is in the store at its seq, the same event.
async fn check_stored(store: &dyn SessionStore, received: &Received, life: usize) {
    let Some(session) = &received.session else { return };
    let stored = store.read_events(session, 0, 1_000_000).await.unwrap();
    for (seq, seen) in &received.events {
        let record = stored.iter().find(|r| r.seq == *seq).unwrap_or_else(|| {
            panic!("life {life}: event {seq} of session {session} was received but is not stored")
        });
        let kept = serde_json::to_value(&record.event).unwrap();
        let seen_event: AgentEvent = serde_json::from_value(seen.clone()).unwrap();
        assert_eq!(
            serde_json::to_value(&seen_event).unwrap(),
            kept,
            "life {life}: event {seq} was received as one thing and stored as another"
        );
    }
}

#[test]
fn under_sync_a_killed_server_has_stored_every_event_its_client_received() {
    let kills: usize =
        std::env::var("WEFT_SYNC_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(8);
    let seed: u64 =
        std::env::var("WEFT_SYNC_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or(20261127);
    let mut rng = fastrand::Rng::with_seed(seed);
    let home = tempfile::tempdir().unwrap();
    let text = "Once upon a time, a small runtime kept every promise it made. ".repeat(10);
    std::fs::write(home.path().join("script.json"), SCRIPT.replace("TEXT", &text)).unwrap();
    let db = home.path().join("weft.db");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut checked = 0;
    for life in 0..kills {
        let flag_sync = life % 2 == 0;
        let serve = Serve::start(home.path(), &db, flag_sync);
        // Somewhere in the run: its first events, its middle, close to its end.
        let frames = 1 + rng.usize(..240);
        let got = stream_run(&serve.addr, !flag_sync, frames);
        let received = got.recv_timeout(Duration::from_secs(30)).unwrap();
        // A moment more, so that some kills land between two events.
        std::thread::sleep(Duration::from_micros(rng.u64(..3000)));
        serve.kill();
        runtime.block_on(async {
            let store = weft_store::SqliteStore::open(&db).await.unwrap();
            check_stored(&store, &received, life).await;
        });
        checked += received.events.len();
        eprintln!(
            "life {life}: killed after {} events (asked for {frames}), all stored",
            received.events.len()
        );
    }
    assert!(checked > kills, "the client received events to check: {checked}");
    // The last life's server, started once more, recovers what the kills left and serves it.
    let started = Instant::now();
    let serve = Serve::start(home.path(), &db, true);
    let got = stream_run(&serve.addr, true, usize::MAX);
    let received = got.recv_timeout(Duration::from_secs(30)).unwrap();
    assert!(
        received.events.iter().any(|(_, e)| e["type"] == "session_end"),
        "a run after the kills completes ({:?})",
        started.elapsed()
    );
    runtime.block_on(async {
        let store = weft_store::SqliteStore::open(&db).await.unwrap();
        check_stored(&store, &received, kills).await;
    });
}
