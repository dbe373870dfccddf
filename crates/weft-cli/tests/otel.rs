//! OpenTelemetry, end to end: `weft serve` with the standard `OTEL_EXPORTER_OTLP_*` variables
//! sends the spans of a run with a tool call over OTLP/HTTP to a real receiver, Arize Phoenix
//! (from PyPI, `.ci/phoenix.sh`; `WEFT_PHOENIX` names another `phoenix` program), under the
//! caller's `traceparent`. The test reads them back from Phoenix's REST API and checks their
//! names, parents and attributes.
//!
//! Without Phoenix the test fails, unless `WEFT_ALLOW_SKIP` has `phoenix`.

#![allow(clippy::unwrap_used)]

mod http;

use std::collections::HashMap;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use http::{http, http_with, spawn_serving};
use serde_json::{Value, json};

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";
const PROJECT: &str = "weft-otel-test";

/// A child process, killed when dropped.
struct Process(Child);

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn phoenix_program() -> Option<PathBuf> {
    let program = std::env::var_os("WEFT_PHOENIX").map(PathBuf::from).unwrap_or_else(|| {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/phoenix-venv/bin/phoenix")
    });
    program.is_file().then_some(program)
}

/// Phoenix on 127.0.0.1, its data in `dir`, ready: its address.
fn phoenix(program: &Path, dir: &Path) -> (Process, String) {
    let port = free_port();
    let child = Command::new(program)
        .args(["serve", "--no-internet"])
        .env("PHOENIX_WORKING_DIR", dir)
        .env("PHOENIX_HOST", "127.0.0.1")
        .env("PHOENIX_PORT", port.to_string())
        .env("PHOENIX_GRPC_PORT", free_port().to_string())
        .env("PHOENIX_TELEMETRY_ENABLED", "false")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let process = Process(child);
    let addr = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let healthy = |addr: &str| {
        std::net::TcpStream::connect(addr).is_ok() && http(addr, "GET", "/healthz", None).0 == 200
    };
    while !healthy(&addr) {
        assert!(started.elapsed() < Duration::from_secs(120), "Phoenix did not start");
        std::thread::sleep(Duration::from_millis(200));
    }
    (process, addr)
}

/// `weft serve` exporting to `otlp` (an OTLP/HTTP base URL), with `script`.
fn serve(home: &Path, otlp: &str, script: &Value) -> (Process, String) {
    let script_file = home.join("script.json");
    std::fs::write(&script_file, script.to_string()).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    // Nothing of the test's own environment that changes what it does: only what is set here.
    for (var, _) in std::env::vars() {
        if var.starts_with("WEFT_") || var.starts_with("OTEL_") || var == "RUST_LOG" {
            cmd.env_remove(var);
        }
    }
    cmd.args(["serve", "--addr", "127.0.0.1:0", "--store", "memory", "--script"])
        .arg(&script_file)
        .env("NO_COLOR", "1")
        .env("WEFT_HOME", home)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", otlp)
        // Phoenix takes traces only.
        .env("OTEL_METRICS_EXPORTER", "none")
        .env("OTEL_BSP_SCHEDULE_DELAY", "100")
        .env("OTEL_RESOURCE_ATTRIBUTES", format!("openinference.project.name={PROJECT}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let (child, addr) = spawn_serving(&mut cmd, "weft serve", true);
    (Process(child), addr)
}

/// The project's spans once Phoenix has at least `count` of them.
fn spans(phoenix: &str, count: usize) -> Vec<Value> {
    let started = Instant::now();
    loop {
        let (status, body) =
            http(phoenix, "GET", &format!("/v1/projects/{PROJECT}/spans?limit=100"), None);
        // 404 until the project's first span arrives.
        if status == 200 {
            let spans =
                serde_json::from_str::<Value>(&body).unwrap()["data"].as_array().unwrap().clone();
            if spans.len() >= count {
                return spans;
            }
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "Phoenix has not got the spans ({status}): {body}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Asserts that `span` (as Phoenix returns it) has these string attributes.
fn has(span: &Value, expected: &[(&str, &str)]) {
    for (key, value) in expected {
        assert_eq!(span["attributes"][key], *value, "{} {key}: {span}", span["name"]);
    }
}

#[test]
fn a_runs_spans_reach_a_real_otlp_receiver_under_the_callers_trace() {
    let Some(program) = phoenix_program() else {
        return weft_test_support::skip(
            "phoenix",
            "the OpenTelemetry test",
            "Arize Phoenix is not installed (bash .ci/phoenix.sh, or WEFT_PHOENIX=path/to/phoenix)",
        );
    };
    let dir = tempfile::tempdir().unwrap();
    let (_phoenix, phoenix_addr) = phoenix(&program, &dir.path().join("phoenix"));
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let script = json!({"turns": [
        {"thinking": "Echo first.", "text": "Let me echo that.",
         "toolCalls": [{"id": "c1", "name": "echo", "arguments": {"text": "hello"}}]},
        {"text": "It said hello."}
    ]});
    let (_weft, addr) = serve(&home, &format!("http://{phoenix_addr}"), &script);

    let traceparent = format!("traceparent: 00-{TRACE}-{CALLER_SPAN}-01");
    let request = json!({"input": {"role": "user", "content": "Echo please"},
                         "context": {"messages": [], "tools": []}});
    let (status, body) =
        http_with(&addr, "POST", "/api/agent/execute", &[&traceparent], Some(&request));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""status":"completed""#), "{body}");
    let session_id = body
        .split("\"sessionId\":\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .map(str::to_string);

    // The request, the run, two model calls and the tool call.
    let spans = spans(&phoenix_addr, 5);
    let by_name =
        |name: &str| -> Vec<&Value> { spans.iter().filter(|s| s["name"] == name).collect() };
    let names: Vec<&str> = spans.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert!(spans.iter().all(|s| s["context"]["trace_id"] == TRACE), "{names:?}");
    let id = |s: &Value| s["context"]["span_id"].as_str().unwrap().to_string();
    let attrs = |s: &Value| s["attributes"].as_object().unwrap().clone();

    let [request] = by_name("POST /api/agent/execute")[..] else { panic!("{names:?}") };
    assert_eq!(request["parent_id"], CALLER_SPAN);
    assert_eq!(attrs(request)["http.route"], "/api/agent/execute");

    let [run] = by_name("invoke_agent")[..] else { panic!("{names:?}") };
    assert_eq!(run["parent_id"], id(request).as_str());
    let run_attrs = attrs(run);
    has(
        run,
        &[
            ("gen_ai.operation.name", "invoke_agent"),
            ("gen_ai.provider.name", "faux"),
            ("weft.status", "completed"),
            ("weft.mode", "react"),
        ],
    );
    assert!(run_attrs["weft.run.id"].is_string());
    if let Some(session_id) = session_id {
        assert_eq!(run_attrs["gen_ai.conversation.id"], session_id.as_str());
    }
    assert!(
        run_attrs["weft.seq.last"].as_i64().unwrap()
            > run_attrs["weft.seq.first"].as_i64().unwrap()
    );
    assert_eq!(run["span_kind"], "AGENT");

    let chats = by_name("chat faux");
    assert_eq!(chats.len(), 2, "{names:?}");
    let mut reasons: HashMap<i64, Value> = HashMap::new();
    for chat in &chats {
        assert_eq!(chat["parent_id"], id(run).as_str());
        let a = attrs(chat);
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.request.model"], "faux");
        assert_eq!(a["gen_ai.response.model"], "faux");
        assert!(a["gen_ai.response.time_to_first_chunk"].as_f64().unwrap() >= 0.0);
        assert!(!a.contains_key("gen_ai.input.messages"), "content is not captured by default");
        reasons.insert(
            a["weft.step.index"].as_i64().unwrap(),
            a["gen_ai.response.finish_reasons"].clone(),
        );
    }
    assert_eq!(reasons[&0], json!(["tool_call"]));
    assert_eq!(reasons[&1], json!(["stop"]));

    let [tool] = by_name("execute_tool echo")[..] else { panic!("{names:?}") };
    assert_eq!(tool["parent_id"], id(run).as_str());
    has(
        tool,
        &[
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.tool.name", "echo"),
            ("gen_ai.tool.call.id", "c1"),
            ("gen_ai.tool.type", "function"),
        ],
    );
    assert_eq!(tool["status_code"], "UNSET");
}
