//! Built-in tools through a real `weft serve` (faux script, SQLite under a temporary
//! `WEFT_HOME`): `shell`'s environment and processes on a server with API keys, its refusal there
//! unless allowed, and a `fetch_url` of a page the HTML parser chokes on while `/healthz` keeps
//! answering. Every byte goes to 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::json;

/// An API key of the server under test, and a provider key it is started with: neither may
/// reach a command.
const API_KEY: &str = "weft-test-key-0123456789abcdef";
const PROVIDER_KEY: &str = "sk-test-provider-secret-9876543210";

/// A running `weft serve`, killed when dropped (also when a test fails).
struct Serve {
    child: Child,
    addr: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `weft serve` in `dir` with `weft.toml` and a faux script of `turns`, with API keys (from the
/// environment, as an operator would) when `keys`.
fn weft_serve(dir: &Path, config: &str, turns: serde_json::Value, keys: bool) -> Command {
    std::fs::write(dir.join("weft.toml"), config).unwrap();
    std::fs::write(dir.join("script.json"), json!({ "turns": turns }).to_string()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.args(["serve", "--script", "script.json", "--addr", "127.0.0.1:0"])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("WEFT_HOME", dir.join("home"))
        .env("OPENAI_API_KEY", PROVIDER_KEY)
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
    for var in ["WEFT_ADDR", "WEFT_STORE", "WEFT_PROVIDER", "WEFT_MODEL", "RUST_LOG"] {
        cmd.env_remove(var);
    }
    if keys {
        cmd.env("WEFT_API_KEYS", format!("{API_KEY}=alice"));
    } else {
        cmd.env_remove("WEFT_API_KEYS");
    }
    cmd
}

fn start(mut cmd: Command) -> Serve {
    let mut child = cmd.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("http://") {
        line.clear();
        if stderr.read_line(&mut line).unwrap() == 0 {
            let _ = child.kill();
            panic!("weft serve did not start");
        }
    }
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    // Keep reading stderr so the server never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    Serve { child, addr }
}

/// One request on its own connection; the whole response (the stream, for an execute), or why
/// there is none within a generous bound.
fn http(addr: &str, request: &str) -> Result<String, String> {
    let mut stream = TcpStream::connect(addr).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(20))).map_err(|e| e.to_string())?;
    stream.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream.read_to_string(&mut response).map_err(|e| format!("no answer: {e}"))?;
    Ok(response)
}

fn execute(addr: &str, key: Option<&str>) -> Result<String, String> {
    let body = r#"{"input":{"role":"user","content":"go"},"context":{"tools":[]}}"#;
    let auth = key.map(|k| format!("Authorization: Bearer {k}\r\n")).unwrap_or_default();
    http(
        addr,
        &format!(
            "POST /api/agent/execute HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    )
}

/// The first number after `name=` in `text` (the command itself says `name=$!`).
fn pid_after(text: &str, name: &str) -> i32 {
    text.match_indices(&format!("{name}="))
        .find_map(|(at, m)| {
            let digits: String =
                text[at + m.len()..].chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .unwrap_or_else(|| panic!("no {name}=PID in {text}"))
}

/// Whether process `pid` is gone (or a zombie, about to be reaped), waiting a little for it.
fn gone(pid: i32) -> bool {
    for _ in 0..250 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        if stat.is_err() || stat.is_ok_and(|s| s.contains(") Z ")) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

const SHELL_CONFIG: &str = "[builtins]\ntools = [\"shell\"]\nshell_allow_with_api_keys = true\n\n\
                            [tools.shell]\napproval = \"never\"\ntimeout = \"20s\"\n";

/// On a server with API keys (allowed explicitly), a `shell` call's `env` shows none of the
/// server's keys nor the provider's; the call ends when `sh` does, with its output, though a
/// job was left in the background; and neither that job nor one that left the session with
/// `setsid` outlives the call.
#[test]
fn shell_on_a_keyed_server_gets_a_clean_environment_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let command = "env; sleep 777 & echo bg=$!; setsid sh -c 'echo sid=$$; exec sleep 778' & \
                   sleep 0.2; echo done";
    let turns = json!([
        {"toolCalls": [{"id": "call_1", "name": "shell", "arguments": {"command": command}}]},
        {"text": "Ran it."}
    ]);
    let serve = start(weft_serve(dir.path(), SHELL_CONFIG, turns, true));
    let response = execute(&serve.addr, Some(API_KEY)).unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("done") && response.contains("PATH="), "{response}");
    for secret in [API_KEY, PROVIDER_KEY, "WEFT_API_KEYS", "OPENAI_API_KEY"] {
        assert!(!response.contains(secret), "{secret} reached the command: {response}");
    }
    let (bg, sid) = (pid_after(&response, "bg"), pid_after(&response, "sid"));
    assert!(gone(bg), "the background job {bg} outlived the call");
    assert!(gone(sid), "the setsid job {sid} outlived the call");
    assert!(response.contains(r#""status":"completed""#), "{response}");
}

/// A call that times out ends what it started too, though it left the session with `setsid`:
/// the reaper kills everything below it when the call gives up.
#[test]
fn a_timed_out_shell_call_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[builtins]\ntools = [\"shell\"]\n\n[tools.shell]\napproval = \"never\"\n\
                  timeout = \"2s\"\n";
    let command = "setsid sh -c 'echo sid=$$; exec sleep 779' & sleep 100";
    let turns = json!([
        {"toolCalls": [{"id": "call_1", "name": "shell", "arguments": {"command": command}}]},
        {"text": "It timed out."}
    ]);
    let serve = start(weft_serve(dir.path(), config, turns, false));
    let response = execute(&serve.addr, None).unwrap();
    assert!(response.contains(r#""status":"completed""#), "{response}");
    let sid = pid_after(&response, "sid");
    assert!(gone(sid), "the setsid job {sid} outlived the timed-out call");
}

/// Without `shell_allow_with_api_keys`, a server with API keys and `shell` does not start, and
/// says how to allow it.
#[test]
fn shell_is_refused_on_a_keyed_server_unless_allowed() {
    let dir = tempfile::tempdir().unwrap();
    let config = "[builtins]\ntools = [\"shell\", \"calculator\"]\n";
    let mut child = weft_serve(dir.path(), config, json!([{"text": "hi"}]), true).spawn().unwrap();
    let mut status = None;
    for _ in 0..1000 {
        status = child.try_wait().unwrap();
        if status.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    if status.is_none() {
        let _ = child.kill();
        let _ = child.wait();
        panic!("weft serve started with shell and API keys");
    }
    assert_eq!(status.and_then(|s| s.code()), Some(2));
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    assert!(
        stderr.contains("shell is refused on a server with API keys")
            && stderr.contains("shell_allow_with_api_keys = true"),
        "{stderr}"
    );
    // Without keys (loopback only), the same configuration serves.
    drop(start(weft_serve(dir.path(), config, json!([{"text": "hi"}]), false)));
}

/// A page of 100,000 nested `<div>`s served on 127.0.0.1 by a thread of this test (one plain
/// HTTP/1.1 response per connection); each request is reported on the channel.
fn deep_page_server() -> (String, std::sync::mpsc::Receiver<()>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/deep", listener.local_addr().unwrap());
    let (served_tx, served) = std::sync::mpsc::channel();
    let page = format!("<p>before</p>{}deep", "<div>".repeat(100_000));
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let page = page.clone();
            let served_tx = served_tx.clone();
            std::thread::spawn(move || {
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).is_ok_and(|n| n == 1) {
                    head.push(byte[0]);
                }
                let _ = served_tx.send(());
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{page}",
                    page.len()
                );
            });
        }
    });
    (url, served)
}

/// Four `fetch_url` calls of the deep page at once (more than the server's async workers on
/// this machine): each ends within its 5 s timeout, and `/healthz` answers all the while.
#[test]
fn a_deep_html_fetch_ends_in_time_while_healthz_keeps_answering() {
    let (url, served) = deep_page_server();
    let dir = tempfile::tempdir().unwrap();
    let config = "[builtins]\ntools = [\"fetch_url\"]\nfetch_allow_loopback = true\n\
                  fetch_timeout = \"5s\"\n";
    let calls: Vec<_> = (1..=4)
        .map(|i| json!({"id": format!("call_{i}"), "name": "fetch_url", "arguments": {"url": url}}))
        .collect();
    let turns = json!([{"toolCalls": calls}, {"text": "Read them."}]);
    let serve = start(weft_serve(dir.path(), config, turns, false));
    let addr = serve.addr.clone();
    let (done_tx, done) = std::sync::mpsc::channel();
    std::thread::spawn(move || done_tx.send(execute(&addr, None)));

    served.recv_timeout(Duration::from_secs(30)).expect("the page was not fetched");
    let mut checks = 0;
    let response = loop {
        if let Ok(response) = done.try_recv() {
            break response.unwrap();
        }
        assert!(checks < 1000, "the run did not end (each fetch's timeout is 5 s)");
        let health =
            http(&serve.addr, "GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .unwrap_or_else(|e| panic!("/healthz during the fetches: {e}"));
        assert!(health.starts_with("HTTP/1.1 200"), "{health}");
        checks += 1;
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(checks >= 1, "/healthz was not asked during the fetches");
    assert!(response.contains(r#""status":"completed""#), "{response}");
    let ended = response.matches("too complex to read past byte").count()
        + response.matches("took longer than 5s").count();
    assert!(ended >= 4, "{response}");
}
