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
        let path =
            std::env::temp_dir().join(format!("weft-cli-test-{}-{name}.json", std::process::id()));
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

/// `weft` with `args`, colour off, its output piped.
fn weft(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.args(args).env("NO_COLOR", "1").stdin(Stdio::null());
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

/// The one line a failure leaves on stderr.
fn one_stderr_line(o: &Output) -> String {
    let err = stderr(o);
    assert!(err.ends_with('\n') && err.lines().count() == 1, "not one line: {err:?}");
    assert!(err.starts_with("weft: "), "{err:?}");
    err.trim_end().to_string()
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
    assert_eq!(stderr(&o), "");
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
    let Some(Message::Assistant(last)) = messages.last() else { panic!("no final answer") };
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
            AgentEvent::MessageEnd { message } => match *message {
                Message::Assistant(m) => Some(m.model),
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
    assert_eq!(one_stderr_line(&o), "weft: the model call failed: overloaded");

    // Also with --json, where stdout still ends with the run's reply frame.
    let o = run(&["run", "Hi", "--json", "--script", script.path()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(one_stderr_line(&o).contains("overloaded"));
    let last: Value = serde_json::from_str(stdout(&o).lines().last().unwrap()).unwrap();
    assert_eq!((&last["reply"], &last["status"]), (&json!(""), &json!("error")), "{last}");
}

#[test]
fn reaching_max_turns_exits_1_and_says_so() {
    let call = json!({"toolCalls": [{"name": "echo", "arguments": {"text": "again"}}]});
    let script = Script::new("loop", &json!({"turns": [call, call, call, {"text": "never"}]}));
    let o = run(&["run", "Loop", "--script", script.path(), "--max-turns", "2"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(one_stderr_line(&o), "weft: run stopped: max_turns (2) reached");
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
}

#[test]
fn help_lists_run_and_documents_the_built_in_tools() {
    let o = run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).lines().any(|l| l.trim_start().starts_with("run ")), "{}", stdout(&o));
    let o = run(&["run", "--help"]);
    let help = stdout(&o);
    for needle in ["echo", "current_time", "--script", "--json", "--max-turns", "Exit status"] {
        assert!(help.contains(needle), "{needle} missing from:\n{help}");
    }
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
        assert_eq!(err, "", "json={json}");
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
    assert_eq!(err, "weft: interrupted: the run was aborted\n");
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

// Real providers: each dialect against a local server standing in for the provider, keys and
// base URLs given to the child process through its environment (never the test's own).

#[path = "../../weft-llm/tests/common/mod.rs"]
mod provider_kit;

use provider_kit::{MockResponse, MockServer};

/// `weft run` for `provider` against `server`, its key and base URL in the child's environment.
fn run_against(provider: &str, server: &str, extra: &[&str]) -> Output {
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
    for var in [
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
        "GEMINI_BASE_URL",
    ] {
        cmd.env_remove(var);
    }
    cmd.env(key, "sk-cli-secret").env(url, base);
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
    let line = one_stderr_line(&o);
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
