//! Two `weft serve` processes on one Postgres database (the many-replicas setup): a session
//! started on one is read, attached to live and resumed on the other; a run is executed by one
//! replica at a time; after `kill -9` of the replica running a session, the other takes the run
//! over from the store once its lease has expired, and the session goes on there. And chaos
//! between them (`chaos.rs`), through TCP proxies (`proxy.rs`).
//!
//! Needs `WEFT_TEST_POSTGRES_URL` (`eval "$(bash .ci/postgres.sh)"`): without it the test fails,
//! unless `WEFT_ALLOW_SKIP` has `postgres`.
#![allow(clippy::unwrap_used)]

#[path = "replicas/chaos.rs"]
mod chaos;
#[path = "replicas/proxy.rs"]
mod proxy;

mod http;
use http::{http, spawn_serving};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use weft_protocol::Frame;
use weft_protocol::framing::parse_sse;

/// The test database's URL, or `None` when the caller let the Postgres tests skip.
fn postgres_url() -> Option<String> {
    weft_test_support::postgres_url("the two-replica test")
}

/// A `weft serve` child process and its address.
struct Replica {
    child: Child,
    addr: String,
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(home: &Path, name: &str, store: &str, script: &Value) -> Replica {
    let script_file = home.join(format!("{name}.json"));
    std::fs::write(&script_file, script.to_string()).unwrap();
    let config = home.join(format!("{name}.toml"));
    std::fs::write(&config, "[limits]\nlease_ttl = \"1s\"\n").unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--store", store])
        .arg("--script")
        .arg(&script_file)
        .arg("--config")
        .arg(&config)
        .env("NO_COLOR", "1")
        .env("WEFT_HOME", home)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for var in ["WEFT_ADDR", "WEFT_STORE", "WEFT_PROVIDER", "WEFT_MODEL", "WEFT_PROVIDERS"] {
        cmd.env_remove(var);
    }
    cmd.env_remove("WEFT_API_KEYS").env_remove("RUST_LOG");
    let (child, addr) = spawn_serving(&mut cmd, name, false);
    Replica { child, addr }
}

fn session(addr: &str, id: &str) -> Option<Value> {
    let (status, body) = http(addr, "GET", &format!("/api/agent/session/{id}"), None);
    (status == 200).then(|| serde_json::from_str(&body).unwrap())
}

/// Waits until `check` holds for the session on `addr`.
fn wait_for(addr: &str, id: &str, limit: Duration, check: impl Fn(&Value) -> bool) -> Value {
    let started = Instant::now();
    loop {
        let seen = session(addr, id);
        if let Some(seen) = seen.filter(|s| check(s)) {
            return seen;
        }
        assert!(started.elapsed() < limit, "session {id} on {addr}: not as expected in time");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn last_json(frames: &[Frame]) -> Value {
    serde_json::from_str(&frames.last().unwrap().data).unwrap()
}

fn ids(frames: &[Frame]) -> Vec<u64> {
    frames.iter().filter_map(|f| f.id).collect()
}

#[test]
fn two_replicas_on_postgres_share_sessions_and_take_over_a_dead_run() {
    let Some(url) = postgres_url() else { return };
    let home = tempfile::tempdir().unwrap();
    // Each process's faux script starts from its first turn for every session: A's is a slow
    // turn that calls the client's tool (~6 s: B's polls and requests land while it runs, on
    // a busy machine too), B's the answer.
    let slow: String = "The weather needs a careful look. ".repeat(8);
    let a_script = json!({"turns": [{"text": slow, "chunkSize": 2, "delayMs": 45,
        "toolCalls": [{"id": "call-1", "name": "get_weather", "arguments": {"city": "Paris"}}]}]});
    let b_script = json!({"turns": [{"text": "It is sunny in Paris.", "chunkSize": 4},
                                    {"text": "Still sunny.", "chunkSize": 4}]});
    let a = serve(home.path(), "a", &url, &a_script);
    let b = serve(home.path(), "b", &url, &b_script);
    let unique = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    );
    let tools = json!([{"name": "get_weather", "parameters": {"type": "object"}}]);

    // 1. Started on A; read and attached to live on B; resumed on B.
    let s1 = format!("replica-one-{unique}");
    let execute = json!({"sessionId": s1, "input": {"role": "user", "content": "Weather?"},
                         "context": {"tools": tools}});
    let a_addr = a.addr.clone();
    let on_a =
        std::thread::spawn(move || http(&a_addr, "POST", "/api/agent/execute", Some(&execute)));
    wait_for(&b.addr, &s1, Duration::from_secs(20), |s| s["status"] == "running");
    let b_addr = b.addr.clone();
    let s1_path = format!("/api/agent/session/{s1}/stream");
    let watcher = std::thread::spawn(move || http(&b_addr, "GET", &s1_path, None));
    let (status, body) = on_a.join().unwrap();
    assert_eq!(status, 200, "{body}");
    let executed = parse_sse(&body);
    let (status, body) = watcher.join().unwrap();
    assert_eq!(status, 200, "{body}");
    let watched = parse_sse(&body);
    assert_eq!(last_json(&executed)["status"], "awaiting_tool_execution");
    assert_eq!(ids(&watched), ids(&executed), "B's watcher saw A's run, event for event");
    let on_b = session(&b.addr, &s1).unwrap();
    assert_eq!(on_b["status"], "awaiting_tool_execution");
    assert_eq!(on_b["pendingToolCalls"][0]["id"], "call-1");
    let result = json!({"sessionId": s1, "input": [{"role": "toolResult", "toolCallId": "call-1",
        "toolName": "get_weather", "content": "Sunny, 21°C"}]});
    let (status, body) = http(&b.addr, "POST", "/api/agent/execute", Some(&result));
    assert_eq!(status, 200, "{body}");
    let resumed = parse_sse(&body);
    assert_eq!(last_json(&resumed)["status"], "completed");
    assert!(ids(&resumed)[0] > *ids(&executed).last().unwrap());
    let on_a = session(&a.addr, &s1).unwrap();
    assert_eq!(on_a["status"], "completed");
    assert_eq!(on_a["messages"].as_array().map(Vec::len), Some(4));
    assert_eq!(on_a["messages"][3]["content"][0]["text"], "It is sunny in Paris.");

    // 2. One replica runs a session at a time; kill -9 it and the other takes the run over.
    let s2 = format!("replica-two-{unique}");
    let execute = json!({"sessionId": s2, "input": {"role": "user", "content": "Weather?"},
                         "context": {"tools": tools}});
    let a_addr = a.addr.clone();
    let doomed =
        std::thread::spawn(move || http(&a_addr, "POST", "/api/agent/execute", Some(&execute)));
    wait_for(&b.addr, &s2, Duration::from_secs(20), |s| s["status"] == "running");
    let second = json!({"sessionId": s2, "input": {"role": "user", "content": "Me too"}});
    let (status, body) = http(&b.addr, "POST", "/api/agent/execute", Some(&second));
    assert_eq!(status, 409, "{body}");
    let mut a = a;
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    let _ = doomed.join();
    let taken_over = wait_for(&b.addr, &s2, Duration::from_secs(30), |s| s["status"] != "running");
    // B went on from the last checkpoint (the user's message; A died inside its model call):
    // its own model call answered, and the dead call's partial text is nowhere.
    assert_eq!(taken_over["status"], "completed", "{taken_over}");
    let texts: Vec<&str> = taken_over["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"][0]["text"].as_str().unwrap_or(""))
        .collect();
    assert_eq!(texts, ["Weather?", "It is sunny in Paris."]);
    // The recovered run ends in the log like any run: attaching replays its end.
    let (status, body) = http(&b.addr, "GET", &format!("/api/agent/session/{s2}/stream"), None);
    assert_eq!(status, 200);
    assert_eq!(last_json(&parse_sse(&body))["status"], "completed");
    // And the session goes on on B.
    let next = json!({"sessionId": s2, "input": {"role": "user", "content": "Weather now?"}});
    let (status, body) = http(&b.addr, "POST", "/api/agent/execute", Some(&next));
    assert_eq!(status, 200, "{body}");
    assert_eq!(last_json(&parse_sse(&body))["status"], "completed");
    let last = session(&b.addr, &s2).unwrap();
    assert_eq!(last["messages"][3]["content"][0]["text"], "Still sunny.");
}
