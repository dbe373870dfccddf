//! The `weft` binary end to end: real processes, faux scripts in temporary files, no network.

#![allow(clippy::unwrap_used)]

use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
#[cfg(unix)]
use std::sync::mpsc;
#[cfg(unix)]
use std::time::Duration;

use serde_json::{Value, json};
use weft_core::{AgentEvent, Message, SessionStatus};
use weft_protocol::loom::LoomReceiver;
use weft_protocol::native::{NativeMessage, decode_frame};

/// `--protocol native` output: the events, and the final `execute_complete`'s status.
fn native_events(out: &str) -> (Vec<AgentEvent>, Option<SessionStatus>) {
    let (mut events, mut status) = (Vec::new(), None);
    for line in out.lines() {
        match decode_frame(line).unwrap_or_else(|e| panic!("{e}: {line}")) {
            NativeMessage::Event(e) => events.push(e),
            NativeMessage::Complete { status: s, .. } => status = Some(s),
        }
    }
    (events, status)
}

/// A faux script in a file of its own, removed when dropped.
struct Script(PathBuf);

impl Script {
    fn new(name: &str, script: &serde_json::Value) -> Self {
        // One file per script made: tests run at once, and two may make scripts of one name
        // (each deletes its own when dropped).
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let path = std::env::temp_dir()
            .join(format!("weft-cli-test-{}-{n}-{name}.json", std::process::id()));
        std::fs::write(&path, script.to_string()).unwrap();
        Self(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for Script {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Every variable of the environment that changes what `weft run` does.
const WEFT_VARS: [&str; 11] = [
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "GEMINI_BASE_URL",
    "WEFT_CONNECT_TIMEOUT",
    "WEFT_FIRST_BYTE_TIMEOUT",
    "WEFT_IDLE_TIMEOUT",
    "WEFT_MAX_RETRIES",
    "RUST_LOG",
];

/// `weft` with `args`, colour off, its output piped, none of the test's own `WEFT_*`, key, base
/// URL or `RUST_LOG` variables. A `weft run` that names no store keeps its session in memory
/// (`--store memory` is added), and `WEFT_HOME` is a path no directory can be made at, so that
/// nothing ever reaches the real `~/.weft`: a test that wants the default store uses [`Home`].
fn weft(args: &[&str]) -> Command {
    let mut cmd = weft_with_home(args, &unusable_home());
    if args.first() == Some(&"run") && !args.contains(&"--store") {
        cmd.args(["--store", "memory"]);
    }
    cmd
}

/// A `WEFT_HOME` under a file (the weft binary itself): opening the default store there fails.
fn unusable_home() -> PathBuf {
    std::path::Path::new(env!("CARGO_BIN_EXE_weft")).join("no-weft-home")
}

/// `weft` with `args` as [`weft`] runs it, but with `WEFT_HOME` at `home` and nothing added.
fn weft_with_home(args: &[&str], home: &std::path::Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.args(args).env("NO_COLOR", "1").env("WEFT_HOME", home).stdin(Stdio::null());
    for var in WEFT_VARS {
        cmd.env_remove(var);
    }
    cmd
}

fn run(args: &[&str]) -> Output {
    weft(args).output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// The one line a failure leaves on stderr, when it is all there is (a mistake found before
/// anything ran).
fn one_stderr_line(o: &Output) -> String {
    let err = stderr(o);
    assert!(err.ends_with('\n') && err.lines().count() == 1, "not one line: {err:?}");
    assert!(err.starts_with("weft: "), "{err:?}");
    err.trim_end().to_string()
}

/// The reason a failed run gives: stderr's last line, one line; before it only the session's
/// id, the run's summary line (terminal view) and log lines (` WARN …`).
fn reason_line(o: &Output) -> String {
    let err = stderr(o);
    assert!(err.ends_with('\n'), "{err:?}");
    let lines: Vec<&str> = err.lines().collect();
    let (reason, before) = lines.split_last().unwrap_or_else(|| panic!("no reason on stderr"));
    assert!(reason.starts_with("weft: "), "{err:?}");
    assert!(before.iter().filter(|l| l.starts_with("tokens: ")).count() <= 1, "{err:?}");
    assert!(before.iter().filter(|l| l.starts_with("session: ")).count() <= 1, "{err:?}");
    assert!(
        before
            .iter()
            .all(|l| l.starts_with("tokens: ") || l.starts_with("session: ") || l.contains("WARN")),
        "more than the session, a summary and warnings before the reason: {err:?}"
    );
    reason.to_string()
}

/// The session id a run printed on stderr, `session: ID`: once, before the summary and the
/// reason (log lines of the run, such as warnings, may come before it).
fn session_id(o: &Output) -> String {
    let err = stderr(o);
    let mut lines = err.lines().filter_map(|l| l.strip_prefix("session: "));
    let id = lines.next().unwrap_or_else(|| panic!("no session line: {err:?}"));
    assert!(lines.next().is_none(), "{err:?}");
    assert!(!id.is_empty() && !id.contains(' '), "{err:?}");
    let at = |prefix: &str| err.lines().position(|l| l.starts_with(prefix));
    let session = at("session: ");
    for later in ["tokens: ", "weft: "] {
        assert!(at(later).is_none_or(|line| Some(line) > session), "{err:?}");
    }
    id.to_string()
}

/// stderr without its session line (see [`session_id`]).
fn stderr_after_session(o: &Output) -> String {
    let id = session_id(o);
    stderr(o).replacen(&format!("session: {id}\n"), "", 1)
}

/// The summary line of a terminal run (on stderr).
fn summary_line(o: &Output) -> String {
    let err = stderr(o);
    let mut summaries = err.lines().filter(|l| l.starts_with("tokens: "));
    let line = summaries.next().unwrap_or_else(|| panic!("no summary in {err:?}")).to_string();
    assert!(summaries.next().is_none(), "{err:?}");
    line
}

/// Position of `needle` in `hay`, which must contain it.
fn at(hay: &str, needle: &str) -> usize {
    hay.find(needle).unwrap_or_else(|| panic!("{needle:?} not in:\n{hay}"))
}

fn echo_script(name: &str) -> Script {
    Script::new(
        name,
        &json!({"turns": [
            {"text": "Let me echo that.", "toolCalls": [
                {"id": "c1", "name": "echo", "arguments": {"text": "hello brave new world"}}
            ]},
            {"text": "It said hello brave new world.", "chunkSize": 3}
        ]}),
    )
}

#[test]
fn text_run_streams_thinking_and_text_and_exits_0() {
    let script = Script::new(
        "text",
        &json!({"turns": [{"thinking": "A greeting.", "text": "Hello there, traveller!"}]}),
    );
    let o = run(&["run", "Hi", "--provider", "faux", "--script", script.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "thinking: A greeting.\nHello there, traveller!\n");
    // stderr has the session's id, the summary line and nothing else.
    let err = stderr_after_session(&o);
    assert!(err.starts_with("tokens: 0 in, 0 out · cost: $0") && err.lines().count() == 1, "{err}");
}

#[test]
fn tool_run_shows_the_call_its_output_and_result() {
    let script = echo_script("echo");
    let o = run(&["run", "Echo please", "--provider", "faux", "--script", script.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let call = at(&out, "Let me echo that.\n[tool] echo {\"text\":\"hello brave new world\"}\n");
    let output = at(&out, "\n  hello brave new world\n");
    let result = at(&out, "\n[tool] echo: ok\n");
    let answer = at(&out, "\nIt said hello brave new world.\n");
    assert!(call < output && output < result && result < answer, "{out}");
}

#[test]
fn unknown_tools_get_an_error_result_and_current_time_answers() {
    let script = Script::new(
        "unknown",
        &json!({"turns": [
            {"toolCalls": [{"name": "nope", "arguments": {"x": 1}}, {"name": "current_time"}]},
            {"text": "Done."}
        ]}),
    );
    let o = run(&["run", "Hi", "--script", script.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(at(&out, "Tool nope not found\n") < at(&out, "[tool] nope: error\n"), "{out}");
    at(&out, "[tool] current_time: ok\n");
    let time = out
        .lines()
        .find_map(|l| l.strip_prefix("  ").filter(|t| t.ends_with('Z')))
        .unwrap_or_else(|| panic!("no time in:\n{out}"));
    // YYYY-MM-DDTHH:MM:SSZ
    let shape: String = time.chars().map(|c| if c.is_ascii_digit() { 'd' } else { c }).collect();
    assert_eq!(shape, "dddd-dd-ddTdd:dd:ddZ", "{time}");
    assert!(out.ends_with("Done.\n"), "{out}");
}

#[test]
fn native_protocol_prints_the_plans_events_and_nothing_else() {
    let script = echo_script("json");
    let o = run(&[
        "run",
        "Echo please",
        "--protocol",
        "native",
        "--script",
        script.path(),
        "--model",
        "m-1",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let (events, complete) = native_events(&out);
    assert_eq!(complete, Some(SessionStatus::Completed), "execute_complete comes last");
    assert!(out.lines().last().unwrap().contains("\"execute_complete\""));
    assert!(events.iter().all(AgentEvent::is_plan_event));
    assert_eq!(events.first().map(AgentEvent::kind), Some("session_start"));
    let Some(AgentEvent::SessionEnd { status, messages, .. }) = events.last() else {
        panic!("last event is not session_end: {:?}", events.last())
    };
    assert_eq!(*status, SessionStatus::Completed);

    // Per assistant message, the text deltas add up to its text.
    let mut deltas = Vec::new();
    let mut answers = Vec::new();
    for e in &events {
        match e {
            AgentEvent::MessageStart { role: weft_core::Role::Assistant } => {
                deltas.push(String::new())
            }
            AgentEvent::TextDelta { delta, .. } => deltas.last_mut().unwrap().push_str(delta),
            AgentEvent::MessageEnd { message } => {
                if let Message::Assistant(m) = &**message {
                    assert_eq!(m.model, "m-1");
                    answers.push(m.text());
                }
            }
            _ => {}
        }
    }
    assert_eq!(deltas, answers);
    let Some(Message::Assistant(last)) = messages.last().map(|m| &**m) else {
        panic!("no final answer")
    };
    assert_eq!(deltas.last().unwrap(), &last.text());
    assert_eq!(last.text(), "It said hello brave new world.");

    // echo streamed its text word by word, then completed with all of it.
    let tool_deltas: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(tool_deltas, ["hello ", "brave ", "new ", "world"]);
    assert!(events.iter().any(|e| matches!(e,
        AgentEvent::ToolExecutionEnd { output, is_error: false, .. }
            if output == "hello brave new world")));
}

#[test]
fn model_defaults_to_faux() {
    let script = Script::new("model", &json!({"turns": [{"text": "ok"}]}));
    let o = run(&["run", "Hi", "--protocol", "native", "--script", script.path()]);
    let (events, _) = native_events(&stdout(&o));
    let models: Vec<String> = events
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::MessageEnd { message } => match &*message {
                Message::Assistant(m) => Some(m.model.to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(models, ["faux"]);
}

#[test]
fn a_failed_model_call_exits_1_with_its_reason() {
    let script = Script::new("error", &json!({"turns": [{"error": "overloaded"}]}));
    let o = run(&["run", "Hi", "--script", script.path()]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(reason_line(&o), "weft: the model call failed: overloaded");

    // Also with --json, where stdout still ends with the run's reply frame.
    let o = run(&["run", "Hi", "--json", "--script", script.path()]);
    assert_eq!(o.status.code(), Some(1));
    let err = stderr_after_session(&o);
    assert!(err.starts_with("weft: ") && err.contains("overloaded"), "{err}");
    assert_eq!(err.lines().count(), 1, "no summary line with --json: {err}");
    let last: Value = serde_json::from_str(stdout(&o).lines().last().unwrap()).unwrap();
    assert_eq!((&last["reply"], &last["status"]), (&json!(""), &json!("error")), "{last}");
}

#[test]
fn reaching_max_turns_exits_1_and_says_so() {
    let call = json!({"toolCalls": [{"name": "echo", "arguments": {"text": "again"}}]});
    let script = Script::new("loop", &json!({"turns": [call, call, call, {"text": "never"}]}));
    let o = run(&["run", "Loop", "--script", script.path(), "--max-turns", "2"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(reason_line(&o), "weft: run stopped: max_turns (2) reached");
    let out = stdout(&o);
    assert_eq!(out.matches("[tool] echo: ok").count(), 2, "{out}");
    assert!(!out.contains("never"));
}

#[test]
fn configuration_mistakes_exit_2_with_one_line() {
    let missing = std::env::temp_dir().join("weft-cli-test-no-such-script.json");
    let missing = missing.to_str().unwrap();
    let o = run(&["run", "Hi", "--provider", "faux", "--script", missing]);
    assert_eq!(o.status.code(), Some(2));
    let line = one_stderr_line(&o);
    assert!(line.starts_with(&format!("weft: cannot read faux script {missing}: ")), "{line}");
    assert_eq!(stdout(&o), "");

    let invalid = Script::new("invalid", &json!({"turns": [{"txt": "typo"}]}));
    let o = run(&["run", "Hi", "--script", invalid.path()]);
    assert_eq!(o.status.code(), Some(2));
    let line = one_stderr_line(&o);
    assert!(line.contains("invalid faux script") && line.contains("txt"), "{line}");

    let o = run(&["run", "Hi", "--provider", "faux"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_stderr_line(&o).contains("--script"));

    let o = run(&["run", "Hi", "--provider", "llamas"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_stderr_line(&o).contains("unknown provider \"llamas\""));

    for provider in ["openai", "openai-responses", "anthropic", "gemini"] {
        let o = run(&["run", "Hi", "--provider", provider]);
        assert_eq!(o.status.code(), Some(2));
        assert!(one_stderr_line(&o).contains("needs --model ID"), "{provider}");
    }

    // Flags clap rejects are usage errors too.
    let o = run(&["run", "Hi", "--max-turns", "0"]);
    assert_eq!(o.status.code(), Some(2));

    // Telemetry Weft cannot send is said before anything runs (gRPC is not built in).
    let script = echo_script("grpc");
    let o = weft(&["run", "Hi", "--script", script.path()])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let line = one_stderr_line(&o);
    assert!(line.starts_with("weft: telemetry: OTLP protocol \"grpc\" is not supported"), "{line}");
    assert_eq!(stdout(&o), "");
}

#[test]
fn help_lists_run_and_documents_the_built_in_tools() {
    let o = run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).lines().any(|l| l.trim_start().starts_with("run ")), "{}", stdout(&o));
    let o = run(&["run", "--help"]);
    let help = stdout(&o);
    for needle in [
        "echo",
        "current_time",
        "--script",
        "--json",
        "--max-turns",
        "Exit status",
        "--connect-timeout",
        "--first-byte-timeout",
        "--idle-timeout",
        "--max-retries",
        "WEFT_CONNECT_TIMEOUT",
        "WEFT_FIRST_BYTE_TIMEOUT",
        "WEFT_IDLE_TIMEOUT",
        "WEFT_MAX_RETRIES",
        "--verbose",
        "143",
        "tokens: ",
        "--session",
        "--store",
        "$WEFT_HOME/weft.db",
        "~/.weft",
        "postgres://",
        "first turn",
    ] {
        assert!(help.contains(needle), "{needle} missing from:\n{help}");
    }
    let o = run(&["sessions", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    let help = stdout(&o);
    for needle in ["list", "show", "delete", "--store", "$WEFT_HOME/weft.db"] {
        assert!(help.contains(needle), "{needle} missing from:\n{help}");
    }
    let o = run(&["sessions", "list", "--help"]);
    assert!(stdout(&o).contains("--limit"), "{}", stdout(&o));
}

#[cfg(unix)]
/// Reads `child`'s stdout on a thread; the receiver gets each chunk as it arrives.
fn read_stdout(child: &mut Child) -> mpsc::Receiver<Vec<u8>> {
    let mut out = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = out.read(&mut buf) {
            if tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    rx
}

#[cfg(unix)]
/// Collects stdout until it contains `needle` (the child is killed if it never does).
fn wait_for(child: &mut Child, rx: &mpsc::Receiver<Vec<u8>>, needle: &str) -> String {
    let mut seen = Vec::new();
    while !String::from_utf8_lossy(&seen).contains(needle) {
        match rx.recv_timeout(Duration::from_secs(60)) {
            Ok(chunk) => seen.extend(chunk),
            Err(_) => {
                let _ = child.kill();
                panic!("{needle:?} never came; got {:?}", String::from_utf8_lossy(&seen));
            }
        }
    }
    String::from_utf8(seen).unwrap()
}

fn stderr_of(child: &mut Child) -> String {
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    err
}

#[test]
fn a_closed_stdout_ends_the_run_quietly() {
    // Far more than a pipe holds, so weft is still writing when the reader goes away.
    let text = "word ".repeat(400_000);
    let script = Script::new("long", &json!({"turns": [{"text": text, "chunkSize": 1000}]}));
    for json in [false, true] {
        let mut args = vec!["run", "Hi", "--script", script.path()];
        if json {
            args.push("--json");
        }
        let mut child = weft(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut first = [0u8; 16];
        out.read_exact(&mut first).unwrap();
        drop(out);
        let err = stderr_of(&mut child);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "json={json}: {err}");
        assert!(err.starts_with("session: ") && err.lines().count() == 1, "json={json}: {err}");
    }
}

/// Sends SIGINT (what Ctrl-C sends) to `child`.
#[cfg(unix)]
fn interrupt(child: &Child) {
    let status = Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

#[cfg(unix)]
#[test]
fn ctrl_c_aborts_the_run_keeps_what_streamed_and_exits_130() {
    // The model says something, then hangs until the run is aborted.
    let script =
        Script::new("stall", &json!({"turns": [{"text": "partial answer", "stall": true}]}));
    let mut child = weft(&["run", "Hi", "--script", script.path()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = read_stdout(&mut child);
    // The text shows while the run is still going: it is streamed, not buffered to the end.
    let mut out = wait_for(&mut child, &rx, "partial answer");
    interrupt(&child);
    let err = stderr_of(&mut child);
    let status = child.wait().unwrap();
    while let Ok(chunk) = rx.recv_timeout(Duration::from_secs(5)) {
        out.push_str(&String::from_utf8(chunk).unwrap());
    }
    assert_eq!(status.code(), Some(130), "{err}");
    assert_eq!(out, "partial answer\n");
    let (session, err) = err.split_once('\n').unwrap();
    assert!(session.starts_with("session: "), "{session}");
    let (summary, reason) = err.split_once('\n').unwrap();
    assert!(summary.starts_with("tokens: "), "{err}");
    assert_eq!(reason, "weft: interrupted: the run was aborted\n");
}

#[cfg(unix)]
#[test]
fn ctrl_c_in_json_mode_still_ends_with_the_reply() {
    let script = Script::new("stall-json", &json!({"turns": [{"text": "partial", "stall": true}]}));
    let mut child = weft(&["run", "Hi", "--json", "--script", script.path()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = read_stdout(&mut child);
    let mut out = wait_for(&mut child, &rx, "\"message_chunk\"");
    interrupt(&child);
    let status = child.wait().unwrap();
    while let Ok(chunk) = rx.recv_timeout(Duration::from_secs(5)) {
        out.push_str(&String::from_utf8(chunk).unwrap());
    }
    assert_eq!(status.code(), Some(130));
    let last: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!((&last["reply"], &last["status"]), (&json!("partial"), &json!("aborted")), "{last}");
}

#[test]
fn json_is_the_loom_stream_protocol_read_by_the_receiver() {
    // A text run.
    let script =
        Script::new("loom-text", &json!({"turns": [{"thinking": "Hm.", "text": "Hello!"}]}));
    let o = run(&["run", "Hi", "--json", "--script", script.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut receiver = LoomReceiver::new();
    receiver.push_text(&stdout(&o));
    let transcript = receiver.finish();
    assert!(transcript.errors.is_empty(), "{:?}", transcript.errors);
    assert_eq!(transcript.sessions.len(), 1);
    let loom_run = &transcript.sessions[0].runs[0];
    assert_eq!(loom_run.message.as_deref(), Some("Hi"));
    assert_eq!(loom_run.reply.as_ref().map(|r| r.text.as_str()), Some("Hello!"));
    let think = &loom_run.node_runs[0];
    assert_eq!(
        (think.name.as_deref(), think.text.as_str(), think.thought.as_str()),
        (Some("think"), "Hello!", "Hm.")
    );

    // A tool run: echo streams its output, then the model answers.
    let script = echo_script("loom-tool");
    let o = run(&["run", "Echo please", "--json", "--script", script.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let mut receiver = LoomReceiver::new();
    receiver.push_text(&stdout(&o));
    let transcript = receiver.finish();
    assert!(transcript.errors.is_empty(), "{:?}", transcript.errors);
    let loom_run = &transcript.sessions[0].runs[0];
    let names: Vec<_> =
        loom_run.node_runs.iter().map(|n| n.name.as_deref().unwrap_or("")).collect();
    assert_eq!(names, ["think", "act", "observe", "think"]);
    let call = &loom_run.node_runs[0].tool_calls[0];
    assert_eq!(
        (call.name.as_deref(), &call.arguments),
        (Some("echo"), &json!({"text": "hello brave new world"}))
    );
    let act = &loom_run.node_runs[1];
    let output: String = act.tool_outputs.iter().map(|o| o.content.as_str()).collect();
    assert_eq!(output, "hello brave new world");
    assert_eq!(act.tool_ends[0].result, "hello brave new world");
    assert_eq!(
        loom_run.reply.as_ref().map(|r| r.text.as_str()),
        Some("It said hello brave new world.")
    );
    // The whole stream also decodes to the transcript the run's events give.
    let session = &transcript.sessions[0];
    let t = session.transcript().unwrap();
    assert_eq!(t.texts.last().map(String::as_str), Some("It said hello brave new world."));
    assert_eq!(t.status, Some(SessionStatus::Completed));
}

#[test]
fn every_protocol_prints_json_lines() {
    let script = echo_script("protocols");
    for protocol in ["native", "loom", "loom-export", "aceai", "ag-ui", "vercel"] {
        let o = run(&["run", "Echo please", "--protocol", protocol, "--script", script.path()]);
        assert_eq!(o.status.code(), Some(0), "{protocol}: {}", stderr(&o));
        let out = stdout(&o);
        assert!(out.lines().count() > 10, "{protocol}: {out}");
        for line in out.lines() {
            let v: Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("{protocol}: {e}: {line}"));
            assert!(v.is_object(), "{protocol}: {line}");
        }
    }
    let o = run(&["run", "Hi", "--protocol", "sse", "--script", script.path()]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn response_prints_the_step_trace_as_one_object() {
    let script = Script::new(
        "response",
        &json!({"turns": [
            {"thinking": "Echo first.", "text": "Let me echo that.", "toolCalls": [
                {"id": "c1", "name": "echo", "arguments": {"text": "hello"}},
                {"id": "c2", "name": "nope", "arguments": {}}
            ]},
            {"text": "It said hello.", "chunkSize": 3}
        ]}),
    );
    let o = run(&["run", "Echo please", "--response", "--script", script.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "{out}");
    let response: weft_core::AgentResponse = serde_json::from_str(&out).unwrap();
    assert_eq!(response.final_output, "It said hello.");
    let [first, second] = &response.steps[..] else { panic!("{out}") };
    assert_eq!((first.step_index, second.step_index), (0, 1));
    assert_eq!(first.llm_response.text(), "Let me echo that.");
    let results: Vec<_> = first
        .tool_results
        .iter()
        .map(|r| (r.call.name.as_str(), r.output.as_str(), r.error.is_some()))
        .collect();
    assert_eq!(results, [("echo", "hello", false), ("nope", "Tool nope not found", true)]);
    assert!(second.tool_results.is_empty());
    // The session's id is on stderr, as for every run; nothing else is.
    assert_eq!(stderr_after_session(&o), "");

    // Only with a local run, and with no other output format.
    for other in [&["--json"][..], &["--protocol", "native"], &["--server", "http://127.0.0.1:9"]] {
        let mut args = vec!["run", "Hi", "--response"];
        args.extend_from_slice(other);
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{other:?}: {}", stderr(&o));
    }
}

// Real providers: each dialect against a local server standing in for the provider, keys and
// base URLs given to the child process through its environment (never the test's own).

#[path = "../../weft-llm/tests/common/mod.rs"]
mod provider_kit;

use provider_kit::{MockResponse, MockServer};

/// `weft run` for `provider` against `server`, its key and base URL in the child's environment.
fn run_against(provider: &str, server: &str, extra: &[&str]) -> Output {
    run_against_with(provider, server, extra, &[])
}

/// [`run_against`] with more variables in the child's environment.
fn run_against_with(provider: &str, server: &str, extra: &[&str], vars: &[(&str, &str)]) -> Output {
    let (key, url, base) = match provider {
        "openai" | "openai-responses" => {
            ("OPENAI_API_KEY", "OPENAI_BASE_URL", format!("{server}/v1"))
        }
        "anthropic" => ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", server.to_string()),
        _ => ("GEMINI_API_KEY", "GEMINI_BASE_URL", server.to_string()),
    };
    let mut args = vec!["run", "What is up?", "--provider", provider, "--model", "test-model"];
    args.extend_from_slice(extra);
    let mut cmd = weft(&args);
    cmd.env(key, "sk-cli-secret").env(url, base);
    for (name, value) in vars {
        cmd.env(name, value);
    }
    cmd.output().unwrap()
}

fn dialect_fixture(provider: &str, name: &str) -> String {
    let dir =
        if provider == "openai" { "openai_chat".to_string() } else { provider.replace('-', "_") };
    let path = format!("{}/../weft-llm/tests/fixtures/{dir}/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_http_provider_runs_from_the_environment() {
    for provider in ["openai", "openai-responses", "anthropic", "gemini"] {
        let server =
            MockServer::start(vec![MockResponse::sse(&dialect_fixture(provider, "text.sse"))])
                .await;
        let url = server.url();
        let o =
            tokio::task::spawn_blocking(move || run_against(provider, &url, &[])).await.unwrap();
        assert_eq!(o.status.code(), Some(0), "{provider}: {}", stderr(&o));
        assert!(!stdout(&o).trim().is_empty(), "{provider}: no answer shown");
        let request = &server.requests()[0];
        let sent: String = request.headers.iter().map(|(_, v)| v.as_str()).collect();
        assert!(sent.contains("sk-cli-secret"), "{provider}: the key was not sent");
        assert!(request.text().contains("What is up?"), "{provider}");
        assert!(!stdout(&o).contains("sk-cli-secret") && !stderr(&o).contains("sk-cli-secret"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_and_tool_calls_are_shown_as_they_stream() {
    // Anthropic's thinking, then the answer.
    let server =
        MockServer::start(vec![MockResponse::sse(&dialect_fixture("anthropic", "thinking.sse"))])
            .await;
    let url = server.url();
    let o = tokio::task::spawn_blocking(move || run_against("anthropic", &url, &[])).await.unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("thinking: "), "{}", stdout(&o));

    // OpenAI's parallel tool calls (tools this CLI lacks: answered with errors), then an answer.
    let server = MockServer::start(vec![
        MockResponse::sse(&dialect_fixture("openai", "parallel_tools.sse")),
        MockResponse::sse(&dialect_fixture("openai", "text.sse")),
    ])
    .await;
    let url = server.url();
    let o = tokio::task::spawn_blocking(move || run_against("openai", &url, &[])).await.unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.matches("[tool] ").count() >= 2, "{out}");
    assert!(out.contains("not found"), "{out}");
    // The second request carried both error results back to the model.
    let second = server.requests()[1].json();
    let tool_messages =
        second["messages"].as_array().unwrap().iter().filter(|m| m["role"] == "tool").count();
    assert_eq!(tool_messages, 2);
}

#[test]
fn a_missing_key_or_an_unreachable_server_is_one_line() {
    let mut cmd = weft(&["run", "Hi", "--provider", "anthropic", "--model", "claude-sonnet-4-0"]);
    cmd.env_remove("ANTHROPIC_API_KEY");
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(one_stderr_line(&o).contains("ANTHROPIC_API_KEY"), "{}", stderr(&o));

    let port = provider_kit::refused_port();
    let mut cmd = weft(&["run", "Hi", "--provider", "gemini", "--model", "gemini-2.5-flash"]);
    cmd.env("GEMINI_API_KEY", "k").env("GEMINI_BASE_URL", format!("http://127.0.0.1:{port}"));
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(1));
    let line = reason_line(&o);
    assert!(line.contains("cannot reach the provider"), "{line}");
}

#[test]
fn models_lists_the_registry_and_takes_overrides() {
    let o = run(&["models"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for id in ["gpt-4o", "claude-sonnet-4-20250514", "gemini-2.5-flash"] {
        assert!(out.contains(id), "{id} missing from:\n{out}");
    }
    let o = run(&["models", "--provider", "gemini"]);
    assert!(stdout(&o).lines().skip(1).all(|l| l.starts_with("gemini")), "{}", stdout(&o));

    let file = Script::new(
        "models",
        &json!({"models": [{"provider": "openai", "id": "my-local-model", "prices": {"input": 1.5}}]}),
    );
    let o = run(&["models", "--provider", "openai", "--models", file.path()]);
    let line = stdout(&o).lines().find(|l| l.contains("my-local-model")).unwrap().to_string();
    assert!(line.contains("1.5"), "{line}");

    let bad = Script::new("bad-models", &json!({"models": "nope"}));
    let o = run(&["models", "--models", bad.path()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_stderr_line(&o).contains("invalid models file"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_models_file_prices_the_run() {
    let server =
        MockServer::start(vec![MockResponse::sse(&dialect_fixture("openai", "text.sse"))]).await;
    // The fixture's usage, priced at $1,000,000 per million input and output tokens: the cost
    // equals the token counts.
    let file = Script::new(
        "priced",
        &json!({"models": [{"provider": "openai", "id": "test-model", "prices": {"input": 1e6, "output": 1e6, "cacheRead": 1e6}}]}),
    );
    let path = file.path().to_string();
    let url = server.url();
    let o = tokio::task::spawn_blocking(move || {
        run_against("openai", &url, &["--protocol", "native", "--models", &path])
    })
    .await
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (events, _) = native_events(&stdout(&o));
    let Some(AgentEvent::SessionEnd { cost, usage, .. }) =
        events.iter().rev().find(|e| e.kind() == "session_end")
    else {
        panic!("no session_end")
    };
    assert!(usage.total > 0);
    assert_eq!(cost.total, (usage.input + usage.output + usage.cache_read) as f64);
}

// Issue #8: exactness and hardening.

/// Bytes that must never reach the terminal from a model or a tool: ESC, NUL, CSI (U+009B in
/// UTF-8), CR, DEL, BEL.
const RAW_CONTROLS: [&[u8]; 6] = [b"\x1b", b"\x00", b"\xc2\x9b", b"\r", b"\x7f", b"\x07"];

fn holds(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn the_model_cannot_control_the_terminal() {
    let evil = "A\u{1b}[31mred\u{0}nul\u{9b}2Jcsi\rcr\u{7f}del\u{7}bel";
    let script = Script::new(
        "evil",
        &json!({"turns": [
            {"thinking": evil, "text": evil, "toolCalls": [
                {"id": "c1", "name": "echo", "arguments": {"text": evil}},
                {"id": "c2", "name": format!("x{evil}"), "arguments": {"k": evil}}
            ]},
            {"text": evil, "error": evil}
        ]}),
    );
    let shown = "A^[[31mred^@nul<U+009B>2Jcsi^Mcr^?del^Gbel";
    for color in [false, true] {
        let mut cmd = weft(&["run", "Hi", "--script", script.path()]);
        if color {
            // Colour is only for terminals; this checks that NO_COLOR was never the protection.
            cmd.env_remove("NO_COLOR");
        }
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        for raw in RAW_CONTROLS {
            assert!(!holds(&o.stdout, raw), "{raw:?} reached stdout: {:?}", stdout(&o));
            assert!(!holds(&o.stderr, raw), "{raw:?} reached stderr: {:?}", stderr(&o));
        }
        let out = stdout(&o);
        assert!(out.starts_with(&format!("thinking: {shown}\n{shown}\n")), "{out}");
        // echo's streamed output and the unknown tool's name are shown the same way.
        assert!(out.contains(&format!("\n  {shown}\n[tool] echo: ok\n")), "{out}");
        assert!(out.contains(&format!("[tool] x{shown}: error\n")), "{out}");
        assert!(reason_line(&o).ends_with(shown), "{}", stderr(&o));
    }
}

/// A server on 127.0.0.1 that accepts connections and never answers; counts them.
struct HangingServer {
    url: String,
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl HangingServer {
    fn start() -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let count = accepted.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            // Bounded: more connections than any test makes.
            for socket in listener.incoming().take(64) {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                held.push(socket);
            }
        });
        Self { url, accepted }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

#[test]
fn a_server_that_never_answers_fails_fast_with_the_timeout_flags() {
    let server = HangingServer::start();
    let started = std::time::Instant::now();
    let o = run_against(
        "openai",
        &server.url,
        &["--first-byte-timeout", "300ms", "--max-retries", "1", "--connect-timeout", "2s"],
    );
    let took = started.elapsed();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(took < Duration::from_secs(10), "took {took:?}");
    let reason = reason_line(&o);
    assert!(reason.contains("first-byte timeout") && reason.contains("0.3s"), "{reason}");
    assert!(reason.contains("after 1 retry"), "{reason}");
    assert_eq!(server.accepted(), 2, "one try and one retry");
}

#[test]
fn the_timeout_variables_work_and_flags_override_them() {
    let server = HangingServer::start();
    let started = std::time::Instant::now();
    let o = run_against_with(
        "anthropic",
        &server.url,
        &[],
        &[("WEFT_FIRST_BYTE_TIMEOUT", "0.3"), ("WEFT_MAX_RETRIES", "0")],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(started.elapsed() < Duration::from_secs(10));
    let reason = reason_line(&o);
    assert!(reason.contains("first-byte timeout") && !reason.contains("retr"), "{reason}");
    assert_eq!(server.accepted(), 1);

    // A flag wins over its variable, which is then not even read.
    let server = HangingServer::start();
    let o = run_against_with(
        "gemini",
        &server.url,
        &["--first-byte-timeout", "250ms", "--max-retries", "0"],
        &[("WEFT_FIRST_BYTE_TIMEOUT", "1 fortnight"), ("WEFT_MAX_RETRIES", "5")],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(reason_line(&o).contains("0.25s"), "{}", stderr(&o));
    assert_eq!(server.accepted(), 1);
}

#[test]
fn bad_timeout_values_exit_2_naming_the_flag_or_variable() {
    let server = HangingServer::start();
    for (flag, value) in [
        ("--first-byte-timeout", "5 parsecs"),
        ("--connect-timeout", "0"),
        ("--idle-timeout", "-1s"),
        ("--max-retries", "-1"),
        ("--max-retries", "many"),
    ] {
        let args: Vec<&str> = [flag, value].into_iter().filter(|a| !a.is_empty()).collect();
        let o = run_against("openai", &server.url, &args);
        assert_eq!(o.status.code(), Some(2), "{flag} {value}: {}", stderr(&o));
        let line = one_stderr_line(&o);
        let flag = flag.split('=').next().unwrap();
        assert!(line.contains(flag), "{line}");
    }
    for var in ["WEFT_CONNECT_TIMEOUT", "WEFT_FIRST_BYTE_TIMEOUT", "WEFT_IDLE_TIMEOUT"] {
        let o = run_against_with("openai", &server.url, &[], &[(var, "soon")]);
        assert_eq!(o.status.code(), Some(2), "{var}: {}", stderr(&o));
        assert!(one_stderr_line(&o).contains(var), "{}", stderr(&o));
    }
    let o = run_against_with("openai", &server.url, &[], &[("WEFT_MAX_RETRIES", "-1")]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_stderr_line(&o).contains("WEFT_MAX_RETRIES"), "{}", stderr(&o));
    assert_eq!(server.accepted(), 0, "nothing was sent");

    // The faux provider makes no HTTP calls: a timeout flag there is a mistake, not ignored.
    let script = Script::new("faux-timeout", &json!({"turns": [{"text": "ok"}]}));
    let o = run(&["run", "Hi", "--script", script.path(), "--idle-timeout", "1s"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_stderr_line(&o).contains("--idle-timeout"), "{}", stderr(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_is_not_an_event_stream_is_named_as_such() {
    let json_body = r#"{"id":"chatcmpl-1","object":"chat.completion","choices":[]}"#;
    let html_body = "<!DOCTYPE html><html><body>Welcome to nginx!</body></html>";
    let cases = [
        (MockResponse::status(200, json_body), "application/json", "chatcmpl-1"),
        (
            MockResponse::status(200, html_body).with_header("content-type", "text/html"),
            "text/html",
            "Welcome to nginx",
        ),
    ];
    for (response, content_type, excerpt) in cases {
        let server = MockServer::start(vec![response]).await;
        let url = server.url();
        let o =
            tokio::task::spawn_blocking(move || run_against("openai", &url, &[])).await.unwrap();
        assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
        let reason = reason_line(&o);
        assert!(reason.contains("event stream"), "{reason}");
        assert!(reason.contains(content_type) && reason.contains(excerpt), "{reason}");
        assert_eq!(server.requests().len(), 1, "not retried");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_404_names_the_url_requested() {
    let server =
        MockServer::start(vec![MockResponse::status(404, r#"{"error":"no such route"}"#)]).await;
    let url = server.url();
    let o = tokio::task::spawn_blocking(move || run_against("anthropic", &url, &[])).await.unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let reason = reason_line(&o);
    assert!(reason.contains("404"), "{reason}");
    assert!(reason.contains(&format!("{}/v1/messages", server.url())), "{reason}");
}

#[test]
fn an_invalid_base_url_exits_2_naming_the_variable() {
    for (provider, var, value) in [
        ("openai", "OPENAI_BASE_URL", "localhost:11434/v1"),
        ("anthropic", "ANTHROPIC_BASE_URL", "ftp://127.0.0.1"),
        ("gemini", "GEMINI_BASE_URL", "http://"),
    ] {
        let mut cmd = weft(&["run", "Hi", "--provider", provider, "--model", "m"]);
        cmd.env(var, value).env("OPENAI_API_KEY", "k").env("ANTHROPIC_API_KEY", "k");
        cmd.env("GEMINI_API_KEY", "k");
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{var}: {}", stderr(&o));
        assert!(one_stderr_line(&o).contains(var), "{}", stderr(&o));
    }
}

#[test]
fn the_summary_line_gives_tokens_cost_model_and_time() {
    let script = Script::new(
        "priced-faux",
        &json!({"turns": [
            {"text": "Hello.", "usage": {"input": 100, "output": 50, "cacheRead": 400, "reasoning": 20}}
        ]}),
    );
    // $1000 per million input tokens, $2000 per million output, $100 per million cached:
    // 100 × 0.001 + 50 × 0.002 + 400 × 0.0001 = $0.24.
    let models = Script::new(
        "faux-models",
        &json!({"models": [{"provider": "faux", "id": "faux-pro",
            "prices": {"input": 1000, "output": 2000, "cacheRead": 100}}]}),
    );
    let o = run(&[
        "run",
        "Hi",
        "--script",
        script.path(),
        "--model",
        "faux-pro",
        "--models",
        models.path(),
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Hello.\n", "the summary is not on stdout");
    let line = summary_line(&o);
    let (head, time) = line.rsplit_once(" · time: ").unwrap();
    assert_eq!(
        head,
        "tokens: 500 in (400 cached), 50 out (20 reasoning) · cost: $0.24 · model: faux-pro"
    );
    assert!(time.ends_with('s') && !time.contains(' '), "{line}");
    assert_eq!(stderr_after_session(&o).lines().count(), 1, "{}", stderr(&o));

    // The same run in JSON: no summary, stdout is JSON only.
    let o = run(&["run", "Hi", "--json", "--script", script.path(), "--models", models.path()]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stderr_after_session(&o), "");
    assert!(stdout(&o).lines().all(|l| l.starts_with('{')));

    // An answer cut at the output limit says so.
    let cut =
        Script::new("cut", &json!({"turns": [{"text": "Once upon a", "stopReason": "length"}]}));
    let o = run(&["run", "Hi", "--script", cut.path(), "--models", models.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let line = summary_line(&o);
    assert!(
        line.ends_with(" · stopped: length (the answer was cut at the output limit)"),
        "{line}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_model_is_warned_about_on_stderr() {
    let server = MockServer::start(vec![
        MockResponse::sse(&dialect_fixture("openai", "text.sse")),
        MockResponse::sse(&dialect_fixture("openai", "text.sse")),
    ])
    .await;
    let url = server.url();
    let o = tokio::task::spawn_blocking(move || run_against("openai", &url, &[])).await.unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    let warning = err.lines().find(|l| l.contains("unknown model")).unwrap_or_else(|| {
        panic!("no warning in {err:?}");
    });
    assert!(warning.contains("WARN") && warning.contains("test-model"), "{warning}");
    assert!(summary_line(&o).contains("cost: $0 (unknown model)"), "{err}");

    // RUST_LOG chooses what is logged: errors only, no warning.
    let url = server.url();
    let o = tokio::task::spawn_blocking(move || {
        run_against_with("openai", &url, &[], &[("RUST_LOG", "error")])
    })
    .await
    .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!stderr(&o).contains("WARN"), "{}", stderr(&o));
}

#[test]
fn a_models_file_must_be_readable_and_valid_for_every_provider() {
    let script = Script::new("models-faux", &json!({"turns": [{"text": "ok"}]}));
    let missing = std::env::temp_dir().join("weft-cli-test-no-such-models.json");
    let o = run(&["run", "Hi", "--script", script.path(), "--models", missing.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_stderr_line(&o).contains("cannot read models file"), "{}", stderr(&o));

    let bad = Script::new("models-bad", &json!({"models": [{"provider": "faux"}]}));
    let o = run(&["run", "Hi", "--script", script.path(), "--models", bad.path()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_stderr_line(&o).contains("invalid models file"), "{}", stderr(&o));

    let negative = Script::new(
        "models-negative",
        &json!({"models": [{"provider": "faux", "id": "faux", "prices": {"input": -1}}]}),
    );
    let o = run(&["run", "Hi", "--script", script.path(), "--models", negative.path()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(one_stderr_line(&o).contains("invalid models file"), "{}", stderr(&o));
    let o = run(&["models", "--models", negative.path()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
}

#[test]
fn contradictory_or_ignored_flags_are_one_line_errors() {
    let script = Script::new("flags", &json!({"turns": [{"text": "ok"}]}));
    let o = run(&["run", "Hi", "--script", script.path(), "--json", "--protocol", "native"]);
    assert_eq!(o.status.code(), Some(2));
    let line = one_stderr_line(&o);
    assert!(line.contains("--json") && line.contains("--protocol"), "{line}");
    assert_eq!(stdout(&o), "");

    let mut cmd = weft(&["run", "Hi", "--provider", "openai", "--model", "m"]);
    cmd.args(["--script", script.path()]).env("OPENAI_API_KEY", "k");
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(one_stderr_line(&o).contains("--script is for the faux provider"), "{}", stderr(&o));

    let o = run(&["models", "--provider", "openia"]);
    assert_eq!(o.status.code(), Some(2));
    let line = one_stderr_line(&o);
    for name in ["openai", "openai-responses", "anthropic", "gemini", "faux"] {
        assert!(line.contains(name), "{line}");
    }
    assert_eq!(stdout(&o), "");

    // Whatever clap refuses is one line too.
    let o = run(&["run", "Hi", "--no-such-flag"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(one_stderr_line(&o).contains("--no-such-flag"), "{}", stderr(&o));
}

/// Sends SIGTERM to `child`.
#[cfg(unix)]
fn terminate(child: &Child) {
    let status = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
}

#[cfg(unix)]
#[test]
fn sigterm_aborts_the_run_like_ctrl_c_and_exits_143() {
    let script = Script::new("term", &json!({"turns": [{"text": "partial", "stall": true}]}));
    // JSON: the stream still ends with the run's reply frame.
    let mut child = weft(&["run", "Hi", "--json", "--script", script.path()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = read_stdout(&mut child);
    let mut out = wait_for(&mut child, &rx, "\"message_chunk\"");
    terminate(&child);
    let err = stderr_of(&mut child);
    let status = child.wait().unwrap();
    while let Ok(chunk) = rx.recv_timeout(Duration::from_secs(5)) {
        out.push_str(&String::from_utf8(chunk).unwrap());
    }
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(err.starts_with("session: "), "{err}");
    assert!(err.ends_with("\nweft: terminated: the run was aborted\n"), "{err}");
    assert_eq!(err.lines().count(), 2, "{err}");
    let last: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_eq!((&last["reply"], &last["status"]), (&json!("partial"), &json!("aborted")), "{last}");

    // The terminal view: what streamed, the summary, the reason.
    let mut child = weft(&["run", "Hi", "--script", script.path()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = read_stdout(&mut child);
    wait_for(&mut child, &rx, "partial");
    terminate(&child);
    let err = stderr_of(&mut child);
    assert_eq!(child.wait().unwrap().code(), Some(143), "{err}");
    assert!(err.ends_with("\nweft: terminated: the run was aborted\n"), "{err}");
}

// Issue #9: sessions in the store.

/// A `WEFT_HOME` of its own (a temporary directory, removed when dropped).
struct Home(tempfile::TempDir);

impl Home {
    fn new() -> Self {
        Self(tempfile::Builder::new().prefix("weft-cli-home-").tempdir().unwrap())
    }

    /// `weft` with `args` in this home (nothing added: no `--store` means the default store).
    fn weft(&self, args: &[&str]) -> Command {
        weft_with_home(args, self.0.path())
    }

    fn run(&self, args: &[&str]) -> Output {
        self.weft(args).output().unwrap()
    }

    /// The default store's file.
    fn db(&self) -> PathBuf {
        self.0.path().join("weft.db")
    }

    /// `weft sessions show ID --json` (with `extra` flags), parsed.
    fn show_json(&self, id: &str, extra: &[&str]) -> Value {
        let mut args = vec!["sessions", "show", id, "--json"];
        args.extend_from_slice(extra);
        let o = self.run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(&o)))
    }
}

/// The role and text of each message of `show --json`'s session.
fn conversation(shown: &Value) -> Vec<(String, String)> {
    let messages = shown["messages"].as_array().unwrap();
    messages
        .iter()
        .map(|m| {
            let text: String = m["content"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| b["type"] == "text")
                .map(|b| b["text"].as_str().unwrap())
                .collect();
            (m["role"].as_str().unwrap().to_string(), text)
        })
        .collect()
}

fn priced_faux() -> (Script, Script) {
    let script = Script::new(
        "stored",
        &json!({"turns": [
            {"thinking": "A greeting.", "text": "Hello!", "toolCalls": [
                {"id": "c1", "name": "echo", "arguments": {"text": "hi"}}
            ], "usage": {"input": 100, "output": 50}},
            {"text": "Echoed.", "usage": {"input": 10, "output": 5}}
        ]}),
    );
    // $1000 per million input tokens, $2000 per million output: step 0 costs
    // 100 × 0.001 + 50 × 0.002 = $0.20, step 1 $0.02.
    let models = Script::new(
        "stored-models",
        &json!({"models": [{"provider": "faux", "id": "faux-pro",
            "prices": {"input": 1000, "output": 2000}}]}),
    );
    (script, models)
}

#[test]
fn a_run_is_kept_in_the_default_store_and_continued_with_its_session_id() {
    let home = Home::new();
    let (script, models) = priced_faux();
    let faux = ["--script", script.path(), "--models", models.path()];
    let mut args = vec!["run", "Hi", "--model", "faux-pro"];
    args.extend(faux);
    let o = home.run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = session_id(&o);
    assert!(home.db().is_file(), "the default store is $WEFT_HOME/weft.db");
    assert_eq!(
        stdout(&o),
        "thinking: A greeting.\nHello!\n[tool] echo {\"text\":\"hi\"}\n  hi\n[tool] echo: ok\nEchoed.\n"
    );

    // Continued in a new process: the model (the faux script, from its first turn again in a
    // new process) answers after the whole first exchange.
    let mut args = vec!["run", "And again?", "--session", &id];
    args.extend(faux);
    let o = home.run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(session_id(&o), id);
    assert!(summary_line(&o).contains("model: faux-pro"), "the session's model: {}", stderr(&o));
    let shown = home.show_json(&id, &[]);
    let roles: Vec<String> = conversation(&shown).into_iter().map(|(role, _)| role).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "toolResult",
            "assistant",
            "user",
            "assistant",
            "toolResult",
            "assistant"
        ]
    );
    let texts = conversation(&shown);
    assert_eq!((texts[0].1.as_str(), texts[4].1.as_str()), ("Hi", "And again?"));
    assert_eq!(shown["head"]["messageCount"], 8);
    assert_eq!(shown["head"]["status"], "completed");
    assert_eq!(shown["steps"].as_array().unwrap().len(), 4);
    assert_eq!(shown["steps"][2]["stepIndex"], 2);

    // The human view: the conversation, the steps with tokens and cost, the totals.
    let o = home.run(&["sessions", "show", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    at(
        &out,
        &format!(
            "session {id}\nstatus: completed · provider: faux · model: faux-pro · 8 messages · 4 steps\n"
        ),
    );
    let first = at(
        &out,
        "user:\n  Hi\nassistant (faux-pro):\n  thinking: A greeting.\n  Hello!\n  \
         [tool] echo {\"text\":\"hi\"} (c1)\ntool result (echo, c1): ok\n  hi\n\
         assistant (faux-pro):\n  Echoed.\nuser:\n  And again?\n",
    );
    let steps = at(&out, "\nsteps:\n  step 0 · model faux-pro · ");
    assert!(first < steps, "{out}");
    at(&out, " · tokens: 100 in, 50 out · cost: $0.20\n    tool echo (c1) · ");
    at(&out, "  step 3 · model faux-pro · ");
    assert!(
        out.ends_with("total: tokens: 220 in, 110 out · cost: $0.44 · status: completed\n"),
        "{out}"
    );

    // Listed, most recent first; --limit keeps the newest.
    let o = home.run(&["run", "Another", "--script", script.path()]);
    let newest = session_id(&o);
    let o = home.run(&["sessions", "list"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    for column in ["id", "status", "model", "messages", "updated", "cost"] {
        assert!(lines[0].contains(column), "{out}");
    }
    assert!(lines[1].starts_with(&newest), "{out}");
    assert!(lines[2].starts_with(&id), "{out}");
    let row: Vec<&str> = lines[2].split_whitespace().collect();
    assert_eq!((row[1], row[2], row[3], row[5]), ("completed", "faux-pro", "8", "$0.44"), "{out}");
    let o = home.run(&["sessions", "list", "--limit", "1"]);
    assert_eq!(stdout(&o).lines().count(), 2, "{}", stdout(&o));
    let o = home.run(&["sessions", "list", "--json"]);
    let heads: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(heads[1]["id"], json!(id));

    // A session keeps its mode: flags asking for another are refused; its own is accepted.
    let o = home.run(&["run", "Hi", "--session", &id, "--mode", "tot", "--script", script.path()]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        one_stderr_line(&o).contains("runs in mode react")
            && one_stderr_line(&o).contains("cannot change mode"),
        "{}",
        stderr(&o)
    );

    // Deleted: gone for show, delete and --session alike.
    let o = home.run(&["sessions", "delete", &id]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("deleted session {id}\n"));
    for args in [
        vec!["sessions", "show", &id],
        vec!["sessions", "delete", &id],
        vec!["run", "Hi", "--session", &id, "--script", script.path()],
    ] {
        let o = home.run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(one_stderr_line(&o), format!("weft: unknown session ID {id}"));
    }
    let o = home.run(&["sessions", "list"]);
    assert!(!stdout(&o).contains(&id) && stdout(&o).contains(&newest), "{}", stdout(&o));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_continued_session_sends_the_model_the_whole_conversation() {
    let server = MockServer::start(vec![
        MockResponse::sse(&dialect_fixture("openai", "text.sse")),
        MockResponse::sse(&dialect_fixture("openai", "text.sse")),
    ])
    .await;
    let home = Home::new();
    let url = format!("{}/v1", server.url());
    let openai = move |home: &Home, args: &[&str]| {
        let mut cmd = home.weft(args);
        cmd.env("OPENAI_API_KEY", "k").env("OPENAI_BASE_URL", &url);
        cmd.output().unwrap()
    };
    // The server answers on this runtime: the processes are waited for on a blocking thread.
    let (home, (first, second)) = tokio::task::spawn_blocking(move || {
        let o = openai(&home, &["run", "What is up?", "--provider", "openai", "--model", "m-7"]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        // The provider and the model are the session's: no need to repeat them.
        let second = openai(&home, &["run", "And then?", "--session", &session_id(&o)]);
        (home, (o, second))
    })
    .await
    .unwrap();
    assert_eq!(second.status.code(), Some(0), "{}", stderr(&second));
    let id = session_id(&first);
    assert_eq!(session_id(&second), id);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let sent = requests[1].json();
    assert_eq!(sent["model"], "m-7");
    let messages = sent["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "user"], "{sent}");
    let answer = &conversation(&home.show_json(&id, &[]))[1].1;
    assert!(!answer.is_empty());
    assert!(messages[0].to_string().contains("What is up?"), "{sent}");
    assert!(messages[1].to_string().contains(answer.as_str()), "{sent}");
    assert!(messages[2].to_string().contains("And then?"), "{sent}");

    // Flags that contradict the stored session are refused before anything is sent (so these
    // processes may be waited for right here).
    for (flags, what) in [
        (vec!["--provider", "anthropic", "--model", "m-7"], "provider"),
        (vec!["--model", "m-8"], "model"),
        (vec!["--system", "Be brief."], "system prompt"),
    ] {
        let mut args = vec!["run", "Hi", "--session", &id];
        args.extend(flags);
        let mut cmd = home.weft(&args);
        cmd.env("OPENAI_API_KEY", "k").env("ANTHROPIC_API_KEY", "k");
        let o = cmd.output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(one_stderr_line(&o).contains(what), "{}", stderr(&o));
    }
    assert_eq!(server.requests().len(), 2);
}

#[test]
fn unknown_sessions_and_bad_stores_exit_2_with_one_line() {
    let home = Home::new();
    let script = Script::new("unknown-session", &json!({"turns": [{"text": "ok"}]}));
    let o = home.run(&["run", "Hi", "--session", "no-such-id", "--script", script.path()]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(one_stderr_line(&o), "weft: unknown session ID no-such-id");
    assert_eq!(stdout(&o), "");

    let home = Home::new();
    for store in ["mysql://admin:hunter2@127.0.0.1/weft", "sqlite:", "", "redis:"] {
        for args in [
            vec!["run", "Hi", "--script", script.path(), "--store", store],
            vec!["sessions", "list", "--store", store],
            vec!["sessions", "show", "x", "--store", store],
            vec!["sessions", "delete", "x", "--store", store],
        ] {
            let o = home.run(&args);
            assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
            let line = one_stderr_line(&o);
            assert!(line.starts_with("weft: invalid --store: "), "{line}");
            for form in ["`memory`", "`sqlite:PATH`", "`postgres://…`"] {
                assert!(line.contains(form), "{form} not named: {line}");
            }
            assert!(!line.contains("hunter2"), "{line}");
        }
    }
    // A store that cannot be opened: exit 2, and the URL's password is never shown.
    let o = home.run(&[
        "run",
        "Hi",
        "--script",
        script.path(),
        "--store",
        &format!("postgres://admin:hunter2@127.0.0.1:{}/weft", provider_kit::refused_port()),
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let line = one_stderr_line(&o);
    assert!(line.starts_with("weft: cannot open the session store: "), "{line}");
    assert!(!line.contains("hunter2"), "{line}");
    assert!(!home.db().exists(), "no default store was made");

    // A WEFT_HOME where no directory can be made.
    let o = run(&["sessions", "list"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(one_stderr_line(&o).contains("cannot open the session store"), "{}", stderr(&o));
}

#[test]
fn store_memory_keeps_the_session_in_the_process_only() {
    let home = Home::new();
    let script = Script::new("memory", &json!({"turns": [{"text": "Hello."}]}));
    let o = home.run(&["run", "Hi", "--script", script.path(), "--store", "memory"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Hello.\n");
    let id = session_id(&o);
    assert!(!home.db().exists(), "nothing written to $WEFT_HOME");
    let o = home.run(&["sessions", "list", "--store", "memory"]);
    assert_eq!((o.status.code(), stdout(&o).as_str()), (Some(0), "no sessions\n"));
    let o =
        home.run(&["run", "Hi", "--session", &id, "--script", script.path(), "--store", "memory"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!home.db().exists());

    // sqlite:PATH is a file of its own.
    let file = home.0.path().join("elsewhere.db");
    let url = format!("sqlite:{}", file.display());
    let o = home.run(&["run", "Hi", "--script", script.path(), "--store", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(file.is_file() && !home.db().exists());
    let shown = home.show_json(&session_id(&o), &["--store", &url]);
    assert_eq!(shown["messages"].as_array().unwrap().len(), 2);
}

#[test]
fn a_session_waiting_on_tool_calls_refuses_a_new_prompt() {
    use std::sync::Arc;
    use weft_agent::{Agent, SessionOptions};
    use weft_core::{Input, ToolSpec};
    use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

    let home = Home::new();
    // A session suspended on a remote tool call, as a server would leave it.
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let id = runtime.block_on(async {
        let store = weft_store::SqliteStore::open(home.db()).await.unwrap();
        let turn = FauxTurn::tool_call("read_page", json!({"selector": "h1"}));
        let agent = Agent::builder(FauxProvider::new(FauxScript::new([turn])))
            .model("faux")
            .store(Arc::new(store))
            .build()
            .unwrap();
        let tools = vec![ToolSpec::new("read_page", "Reads the page.", json!({"type": "object"}))];
        let session = agent
            .create_session(SessionOptions { tools, ..SessionOptions::default() })
            .await
            .unwrap();
        let result = agent.execute(&session, Input::text("Read it")).await.unwrap().result().await;
        assert_eq!(result.status, SessionStatus::AwaitingToolExecution);
        session.id()
    });
    drop(runtime);

    let script = Script::new("suspended", &json!({"turns": [{"text": "never"}]}));
    let o = home.run(&["run", "Something else", "--session", &id, "--script", script.path()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let line = one_stderr_line(&o);
    assert!(line.contains("is waiting on tool calls") && line.contains(&id), "{line}");
    assert_eq!(stdout(&o), "");
    // Nothing changed, and show says what it waits for.
    let shown = home.show_json(&id, &[]);
    assert_eq!(shown["head"]["status"], "awaiting_tool_execution");
    assert_eq!(shown["messages"].as_array().unwrap().len(), 2);
    let o = home.run(&["sessions", "show", &id]);
    let out = stdout(&o);
    assert!(out.contains("remote tools: read_page\n"), "{out}");
    assert!(out.contains("[tool] read_page {\"selector\":\"h1\"}"), "{out}");
    let total = out.lines().last().unwrap();
    assert!(
        total.contains("· status: awaiting_tool_execution · awaiting results of read_page ("),
        "{out}"
    );
}

#[cfg(unix)]
#[test]
fn a_session_running_elsewhere_refuses_a_second_run() {
    let home = Home::new();
    let stall = Script::new("running", &json!({"turns": [{"text": "partial", "stall": true}]}));
    let mut child = home
        .weft(&["run", "Hi", "--json", "--script", stall.path()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = read_stdout(&mut child);
    wait_for(&mut child, &rx, "\"message_chunk\"");
    // The running session is the only one.
    let o = home.run(&["sessions", "list", "--json"]);
    let heads: Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(heads[0]["status"], "running", "{heads}");
    let id = heads[0]["id"].as_str().unwrap().to_string();

    let text = Script::new("after", &json!({"turns": [{"text": "Later."}]}));
    let o = home.run(&["run", "Me too", "--session", &id, "--script", text.path()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let line = one_stderr_line(&o);
    assert!(line.contains("is already running") && line.contains(&id), "{line}");
    // Nor is it deleted from under its run, unless forced.
    let o = home.run(&["sessions", "delete", &id]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(one_stderr_line(&o).contains("--force"), "{}", stderr(&o));

    terminate(&child);
    let err = stderr_of(&mut child);
    assert_eq!(child.wait().unwrap().code(), Some(143), "{err}");
    assert!(err.lines().any(|l| l == format!("session: {id}")), "{err}");
    assert_eq!(home.show_json(&id, &[])["head"]["status"], "aborted");

    // Aborted, it takes a new prompt.
    let o = home.run(&["run", "Again", "--session", &id, "--script", text.path()]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stdout(&o), "Later.\n");
    let texts = conversation(&home.show_json(&id, &[]));
    assert_eq!(
        texts,
        [
            ("user".to_string(), "Hi".to_string()),
            ("assistant".to_string(), "partial".to_string()),
            ("user".to_string(), "Again".to_string()),
            ("assistant".to_string(), "Later.".to_string()),
        ]
    );
}

/// `kill -9` of `weft run` mid-run leaves its session `running` under a lease that would hold
/// for the lease ttl; the next `weft run --session` on the same `WEFT_HOME` takes the dead
/// process's identity over, recovers that run at once, runs its own prompt after it, and says
/// what happened. On the default store (SQLite).
#[cfg(unix)]
#[test]
fn a_killed_runs_session_is_continued_at_once_by_the_next_run() {
    killed_run_is_continued(&[]);
}

/// The same on a Postgres store.
#[cfg(unix)]
#[test]
fn a_killed_runs_session_is_continued_at_once_on_postgres_too() {
    let Some(url) = postgres_url() else { return };
    killed_run_is_continued(&["--store", &url]);
}

#[cfg(unix)]
fn killed_run_is_continued(store: &[&str]) {
    let home = Home::new();
    // The first turn streams slowly (about 1.5 s); the second answers the next prompt.
    let slow = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen";
    let script = Script::new(
        "killed",
        &json!({"turns": [
            {"text": slow, "chunkSize": 5, "delayMs": 100},
            {"text": "Second answer."}
        ]}),
    );
    let mut args = vec!["run", "First?", "--json", "--script", script.path()];
    args.extend_from_slice(store);
    let mut child = home.weft(&args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let rx = read_stdout(&mut child);
    let seen = wait_for(&mut child, &rx, "\"message_chunk\"");
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    // The session the killed process streamed (the store may hold other tests' sessions).
    let id = seen
        .split("\"session_id\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no session id in {seen}"))
        .to_string();
    assert_eq!(home.show_json(&id, store)["head"]["status"], "running");

    let mut args = vec!["run", "Second?", "--session", &id, "--script", script.path()];
    args.extend_from_slice(store);
    let o = home.run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("session {id}: the previous run was interrupted; continuing")),
        "{}",
        stderr(&o)
    );
    assert_eq!(stdout(&o), "Second answer.\n");
    let shown = home.show_json(&id, store);
    assert_eq!(shown["head"]["status"], "completed");
    assert_eq!(
        conversation(&shown),
        [
            ("user".to_string(), "First?".to_string()),
            ("assistant".to_string(), slow.to_string()),
            ("user".to_string(), "Second?".to_string()),
            ("assistant".to_string(), "Second answer.".to_string()),
        ]
    );
}

/// The test database's URL, or `None` when the caller let the Postgres tests skip.
fn postgres_url() -> Option<String> {
    weft_test_support::postgres_url("weft against a Postgres store")
}

#[test]
fn a_postgres_store_keeps_sessions_too() {
    let Some(url) = postgres_url() else { return };
    let home = Home::new();
    let (script, models) = priced_faux();
    let faux = ["--script", script.path(), "--models", models.path(), "--store", &url];
    let mut args = vec!["run", "Hi", "--model", "faux-pro"];
    args.extend(faux);
    let o = home.run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let id = session_id(&o);
    let mut args = vec!["run", "More", "--session", &id];
    args.extend(faux);
    let o = home.run(&args);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));

    let shown = home.show_json(&id, &["--store", &url]);
    assert_eq!(shown["messages"].as_array().unwrap().len(), 8);
    assert_eq!(shown["steps"].as_array().unwrap().len(), 4);
    let o = home.run(&["sessions", "show", &id, "--store", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains(" · tokens: 100 in, 50 out · cost: $0.20\n"), "{}", stdout(&o));
    let o = home.run(&["sessions", "list", "--store", &url, "--limit", "100"]);
    assert!(stdout(&o).contains(&id), "{}", stdout(&o));
    let o = home.run(&["sessions", "delete", &id, "--store", &url]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = home.run(&["sessions", "show", &id, "--store", &url]);
    assert_eq!(o.status.code(), Some(2));
    assert!(!home.db().exists(), "the default store was not touched");
}
