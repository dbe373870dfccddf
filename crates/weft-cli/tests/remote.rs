//! The CLI as a client: `weft run --server` and `weft sessions … --server` against a child
//! `weft serve` on 127.0.0.1 (faux provider, memory store).
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

fn weft(home: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.args(args).env("NO_COLOR", "1").env("WEFT_HOME", home).stdin(Stdio::null());
    for var in [
        "WEFT_ADDR",
        "WEFT_STORE",
        "WEFT_PROVIDER",
        "WEFT_MODEL",
        "WEFT_API_KEYS",
        "WEFT_API_KEY",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

struct Serve {
    child: Child,
    base: String,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(home: &std::path::Path) -> Serve {
    let script = home.join("script.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"thinking":"hmm","text":"Calling echo.","toolCalls":[{"name":"echo","arguments":{"text":"hello world"}}],"chunkSize":4},{"text":"It said hello world.","chunkSize":4,"usage":{"input":10,"output":5}}]}"#,
    )
    .unwrap();
    let mut child = weft(
        home,
        &[
            "serve",
            "--script",
            script.to_str().unwrap(),
            "--addr",
            "127.0.0.1:0",
            "--store",
            "memory",
        ],
    )
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let base = format!("http://{}", line.trim().rsplit("http://").next().unwrap());
    Serve { child, base }
}

fn stdout_of(home: &std::path::Path, args: &[&str]) -> (Option<i32>, String, String) {
    let output = weft(home, args).output().unwrap();
    (
        output.status.code(),
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
    )
}

#[test]
fn run_and_sessions_against_a_server() {
    let home = tempfile::tempdir().unwrap();
    let server = serve(home.path());
    let base = server.base.as_str();

    // The terminal view: the same renderer and summary line as a local run.
    let (code, out, err) = stdout_of(home.path(), &["run", "Echo hello", "--server", base]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out,
        "thinking: hmm\nCalling echo.\n[tool] echo {\"text\":\"hello world\"}\n  hello world\n\
         [tool] echo: ok\nIt said hello world.\n"
    );
    assert!(err.starts_with("session: "), "{err}");
    assert!(err.contains("tokens: 10 in, 5 out") && err.contains("model: faux"), "{err}");
    let id = err.lines().next().unwrap().trim_start_matches("session: ").to_string();

    // --protocol native: re-encoded from the server's events, closed by execute_complete.
    let (code, out, _) =
        stdout_of(home.path(), &["run", "again", "--server", base, "--protocol", "native"]);
    assert_eq!(code, Some(0));
    let last: serde_json::Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "execute_complete");
    assert_eq!(last["status"], "completed");

    // --json: the server's Loom NDJSON, node events included.
    let (code, out, _) = stdout_of(home.path(), &["run", "json", "--server", base, "--json"]);
    assert_eq!(code, Some(0));
    assert!(out.lines().any(|l| l.contains("\"type\":\"node_enter\"")), "{out}");
    assert!(out.lines().all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok()));

    // Continue the session (the faux script has played its turns for it: the model call fails,
    // exit 1, as a local run); an unknown one is exit 2.
    let (code, _, err) =
        stdout_of(home.path(), &["run", "more", "--server", base, "--session", &id]);
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains(&format!("session: {id}")) && err.contains("no turn left"), "{err}");
    let (code, _, err) =
        stdout_of(home.path(), &["run", "x", "--server", base, "--session", "nope"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("session_not_found"), "{err}");

    // Local-only flags are refused.
    let (code, _, err) =
        stdout_of(home.path(), &["run", "x", "--server", base, "--store", "memory"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--store is for local runs"), "{err}");

    // Sessions on the server.
    let (code, out, _) = stdout_of(home.path(), &["sessions", "list", "--server", base]);
    assert_eq!(code, Some(0));
    assert!(out.contains(&id), "{out}");
    let (code, out, _) = stdout_of(home.path(), &["sessions", "show", &id, "--server", base]);
    assert_eq!(code, Some(0));
    assert!(out.contains("status: error") && out.contains("It said hello world."), "{out}");
    let (code, out, _) = stdout_of(home.path(), &["sessions", "delete", &id, "--server", base]);
    assert_eq!((code, out.trim()), (Some(0), format!("deleted session {id}").as_str()));
    let (code, _, _) = stdout_of(home.path(), &["sessions", "show", &id, "--server", base]);
    assert_eq!(code, Some(2));
}

/// A server whose stream sends one event larger than the client keeps (40 MiB of `data:` with
/// no line end): `weft run --server` stops reading at its limit and says so once, instead of
/// holding the line in memory.
#[test]
fn an_event_larger_than_the_limit_ends_the_run_with_one_clear_error() {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = std::thread::spawn(move || {
        // Every connection (the run, and any reattachment) gets the same endless event.
        for stream in listener.incoming().take(4) {
            let Ok(mut stream) = stream else { return };
            std::thread::spawn(move || {
                let mut request = Vec::new();
                let mut byte = [0u8; 1];
                while !request.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    request.push(byte[0]);
                }
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                            x-session-id: huge-1\r\nconnection: close\r\n\r\ndata: ";
                if stream.write_all(head.as_bytes()).is_err() {
                    return;
                }
                let chunk = vec![b'x'; 1024 * 1024];
                for _ in 0..40 {
                    if stream.write_all(&chunk).is_err() {
                        return;
                    }
                }
            });
        }
    });
    let home = tempfile::tempdir().unwrap();
    let mut child = weft(home.path(), &["run", "--server", &base, "hi"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    drop(server);
    assert_eq!(status.code(), Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("weft: ")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(lines[0].contains("an event larger than 33554432 bytes"), "{stderr}");
    assert_eq!(lines[0].matches("larger than").count(), 1, "said twice: {stderr}");
}
