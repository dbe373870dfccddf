//! `weft serve`: configuration mistakes in one line, loopback only without keys, and a real
//! server answering the plan's flow over loopback HTTP until SIGTERM.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

fn weft(home: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.args(args).env("NO_COLOR", "1").env("WEFT_HOME", home).stdin(Stdio::null());
    for var in [
        "WEFT_ADDR",
        "WEFT_STORE",
        "WEFT_PROVIDER",
        "WEFT_MODEL",
        "WEFT_API_KEYS",
        "WEFT_CORS_ORIGINS",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn script() -> String {
    format!("{}/../../examples/scripts/serve.json", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_bad_config_file_is_one_line_naming_file_line_and_key() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("weft.toml");
    std::fs::write(&file, "addr = \"127.0.0.1:0\"\n[limits]\nbody_bytes = \"lots\"\n").unwrap();
    let output =
        weft(home.path(), &["serve", "--script", &script(), "--config", file.to_str().unwrap()])
            .output()
            .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("weft: {}:3: limits.body_bytes: ", file.display())),
        "{stderr}"
    );
    // $WEFT_HOME/weft.toml is found without --config.
    let output = weft(home.path(), &["serve", "--script", &script()]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn without_keys_a_public_address_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let output = weft(
        home.path(),
        &["serve", "--script", &script(), "--store", "memory", "--addr", "0.0.0.0:0"],
    )
    .output()
    .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("refusing to listen on 0.0.0.0"), "{stderr}");
    // It never said it was serving: the refusal is the one line.
    assert!(!stderr.contains("serving"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

fn http(addr: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn serves_the_flow_on_the_default_store_and_stops_on_sigterm() {
    let home = tempfile::tempdir().unwrap();
    let mut child = weft(home.path(), &["serve", "--script", &script(), "--addr", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    // Served from 4 KiB pages: transparent huge pages are off for the process (the kernel shows
    // the prctl flag in /proc since 5.0).
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap_or_default();
    let thp = status.lines().find(|l| l.starts_with("THP_enabled:")).map(str::to_string);
    let body = r#"{"input":{"role":"user","content":"Weather in Paris?"},"context":{"tools":[{"name":"get_weather","parameters":{"type":"object"}}]}}"#;
    let response = http(
        &addr,
        &format!(
            "POST /api/agent/execute HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    );
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains(r#""status":"awaiting_tool_execution""#), "{response}");
    assert!(home.path().join("weft.db").exists(), "the default store is $WEFT_HOME/weft.db");
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    if cfg!(target_os = "linux")
        && let Some(thp) = thp
    {
        assert_eq!(thp.split_whitespace().nth(1), Some("0"), "{thp}");
    }
}

/// `weft serve` on `home`'s default store with the faux `script`, on a port of its own: the
/// child and its address.
fn start_serve(home: &std::path::Path, script: &std::path::Path) -> (std::process::Child, String) {
    let mut child =
        weft(home, &["serve", "--script", script.to_str().unwrap(), "--addr", "127.0.0.1:0"])
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("http://") {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "weft serve exited before serving");
    }
    // Drained, so the server never blocks writing its logs.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    (child, addr)
}

/// Posts `body` to `/api/agent/execute` and reads the streamed response until a line contains
/// `needle`; returns what was read (the connection is dropped).
fn execute_until(addr: &str, body: &str, needle: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    let request = format!(
        "POST /api/agent/execute HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    stream.set_read_timeout(Some(std::time::Duration::from_secs(60))).unwrap();
    let mut reader = BufReader::new(stream);
    let mut seen = String::new();
    let mut line = String::new();
    while !line.contains(needle) {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "{needle:?} never came: {seen}");
        seen.push_str(&line);
    }
    seen
}

fn session_of(response: &str) -> String {
    let line =
        response.lines().find(|l| l.to_ascii_lowercase().starts_with("x-session-id:")).unwrap();
    line.split_once(':').unwrap().1.trim().to_string()
}

/// `kill -9` of the server while a run streams: the restarted server (same `WEFT_HOME`, so the
/// same process identity) recovers that run at once instead of after the lease ttl, and a new
/// message to the session waits for the recovery and runs, where it was a `409 session_running`.
#[test]
fn a_killed_servers_run_is_recovered_at_once_and_the_session_takes_a_new_message() {
    let home = tempfile::tempdir().unwrap();
    let script = home.path().join("slow.json");
    let slow = "one two three four five six seven eight nine ten eleven twelve";
    let turns = serde_json::json!({"turns": [
        {"text": slow, "chunkSize": 4, "delayMs": 100},
        {"text": "Second answer."}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let (mut server, addr) = start_serve(home.path(), &script);
    let first = execute_until(
        &addr,
        r#"{"input":{"role":"user","content":"First?"},"context":{}}"#,
        "text_delta",
    );
    let session = session_of(&first);
    server.kill().unwrap(); // SIGKILL
    server.wait().unwrap();

    let (mut server, addr) = start_serve(home.path(), &script);
    let body =
        format!(r#"{{"sessionId":"{session}","input":{{"role":"user","content":"Second?"}}}}"#);
    let second = execute_until(&addr, &body, "execute_complete");
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert!(second.contains(r#""status":"completed""#), "{second}");
    assert!(second.contains("Second answer."), "{second}");
    let view = http(
        &addr,
        &format!(
            "GET /api/agent/session/{session} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        ),
    );
    // The recovered run's whole answer, then the new exchange.
    let texts = [slow, "Second?", "Second answer."];
    let mut at = 0;
    for text in texts {
        at += view[at..].find(text).unwrap_or_else(|| panic!("{text:?} missing in order: {view}"));
    }
    Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    assert_eq!(server.wait().unwrap().code(), Some(0));
}

/// `kill -9` of the server right after it said `awaiting_tool_execution`: the restarted server
/// takes the tool's result at once.
#[test]
fn a_killed_servers_pending_tool_call_is_answerable_at_once_after_a_restart() {
    let home = tempfile::tempdir().unwrap();
    let (mut server, addr) = start_serve(home.path(), std::path::Path::new(&script()));
    let first = execute_until(
        &addr,
        r#"{"input":{"role":"user","content":"Weather in Paris?"},"context":{"tools":[{"name":"get_weather","parameters":{"type":"object"}}]}}"#,
        r#""type":"awaiting_tool_execution""#,
    );
    server.kill().unwrap(); // SIGKILL
    server.wait().unwrap();
    let session = session_of(&first);

    // The restarted server's model answers with the result in view (a faux script plays from
    // its first turn in a new process).
    let answer = home.path().join("answer.json");
    std::fs::write(&answer, r#"{"turns":[{"text":"It is sunny in Paris."}]}"#).unwrap();
    let (mut server, addr) = start_serve(home.path(), &answer);
    let body = format!(
        r#"{{"sessionId":"{session}","input":[{{"role":"toolResult","toolCallId":"call_weather_1","toolName":"get_weather","content":"Sunny"}}]}}"#
    );
    // A lease the dead server still held would make this a 409 session_running.
    let second = execute_until(&addr, &body, "execute_complete");
    assert!(second.starts_with("HTTP/1.1 200"), "{second}");
    assert!(second.contains(r#""status":"completed""#), "{second}");
    assert!(second.contains("It is sunny in Paris."), "{second}");
    Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    assert_eq!(server.wait().unwrap().code(), Some(0));
}

/// Reads from `stream` until the server closes it; `None` if it is still open after 20 s.
fn closed_within_bound(stream: &mut TcpStream, mut send: impl FnMut(&mut TcpStream)) -> Option<()> {
    stream.set_read_timeout(Some(std::time::Duration::from_millis(20))).unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 1024];
    while started.elapsed() < std::time::Duration::from_secs(20) {
        send(stream);
        match stream.read(&mut buf) {
            Ok(0) => return Some(()),
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Some(()),
        }
    }
    None
}

/// Kills the server if the test fails before it stops it.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn connection_limits_from_weft_toml_hold_against_slow_idle_and_flooding_clients() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("weft.toml");
    std::fs::write(
        &file,
        "[limits]\nheader_timeout = \"300ms\"\nidle_timeout = \"300ms\"\nmax_connections = 8\n",
    )
    .unwrap();
    let mut child = weft(
        home.path(),
        &[
            "serve",
            "--script",
            &script(),
            "--store",
            "memory",
            "--addr",
            "127.0.0.1:0",
            "--config",
            file.to_str().unwrap(),
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut child = Reaped(child);
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();

    // Headers a byte at a time: closed by the header timeout.
    let mut slow = TcpStream::connect(&addr).unwrap();
    let head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    let mut sent = 0;
    let closed = closed_within_bound(&mut slow, |s| {
        let _ = s.write_all(&[head.get(sent).copied().unwrap_or(b'a')]);
        sent += 1;
    });
    assert!(closed.is_some(), "a slowloris connection was kept open");

    // A keep-alive connection left idle after its answer: closed by the idle timeout.
    let mut idle = TcpStream::connect(&addr).unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    assert!(closed_within_bound(&mut idle, |_| {}).is_some(), "an idle connection was kept open");

    // Four times the cap of idle connections: /healthz still answers.
    let flood: Vec<TcpStream> = (0..32).map(|_| TcpStream::connect(&addr).unwrap()).collect();
    for _ in 0..5 {
        let response = http(&addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    }
    drop(flood);

    Command::new("kill").args(["-TERM", &child.0.id().to_string()]).status().unwrap();
    assert_eq!(child.0.wait().unwrap().code(), Some(0));
}

/// `kill -9` of the server while a `useChat` run streams, then a reload's resume after the
/// restart: the stream is the recovered run as one assistant message from its `start`, with
/// the whole answer once and no error between the dead run and its recovery (the page would stop
/// at the error and never show the answer the server completed).
#[test]
fn a_chat_resumed_after_a_killed_server_streams_the_recovered_run_alone() {
    let home = tempfile::tempdir().unwrap();
    let script = home.path().join("slow.json");
    let slow = "one two three four five six seven eight nine ten eleven twelve";
    let turns = serde_json::json!({"turns": [{"text": slow, "chunkSize": 4, "delayMs": 150}]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let (mut server, addr) = start_serve(home.path(), &script);
    let body = r#"{"id":"chat-1","messages":[{"id":"u1","role":"user","parts":[{"type":"text","text":"Count"}]}]}"#;
    let mut stream = TcpStream::connect(&addr).unwrap();
    let request = format!(
        "POST /api/chat HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut first = String::new();
    while !line.contains("text-delta") {
        line.clear();
        assert!(reader.read_line(&mut line).unwrap() > 0, "no text came: {first}");
        first.push_str(&line);
    }
    let dead_run = first
        .split(r#""messageId":""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_string();
    server.kill().unwrap(); // SIGKILL
    server.wait().unwrap();

    let (mut server, addr) = start_serve(home.path(), &script);
    let resumed =
        http(&addr, "GET /api/chat/chat-1/stream HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert!(resumed.starts_with("HTTP/1.1 200"), "{resumed}");
    let parts: Vec<serde_json::Value> = resumed
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect();
    assert!(!parts.iter().any(|p| p["type"] == "error"), "an error part: {resumed}");
    let starts: Vec<&serde_json::Value> = parts.iter().filter(|p| p["type"] == "start").collect();
    assert_eq!(starts.len(), 1, "one message: {resumed}");
    // The dead run's message, replayed whole: a page that kept the partial answer (under the
    // id the dead run's `start` gave it) has it replaced, not doubled.
    assert_eq!(starts[0]["messageId"], dead_run.as_str(), "the dead run's message: {resumed}");
    let text: String = parts
        .iter()
        .filter(|p| p["type"] == "text-delta")
        .map(|p| p["delta"].as_str().unwrap())
        .collect();
    assert_eq!(text, slow, "the whole answer, once: {resumed}");
    assert_eq!(parts.last().unwrap()["type"], "finish", "{resumed}");
    let view = http(
        &addr,
        "GET /api/agent/session/chat-1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    );
    assert!(view.contains(r#""status":"completed""#), "{view}");
    Command::new("kill").args(["-TERM", &server.id().to_string()]).status().unwrap();
    assert_eq!(server.wait().unwrap().code(), Some(0));
}
