//! `weft run` and `weft tools list` with tools from `weft.toml`: an MCP server (the fixture of
//! `weft_tools::fixture`, over streamable HTTP on 127.0.0.1), built-in tools and policy.

#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::{Command, Output, Stdio};

use serde_json::json;
use weft_protocol::loom::LoomReceiver;

/// A fixture MCP server on 127.0.0.1, served by the returned runtime while it lives.
fn mcp_server() -> (tokio::runtime::Runtime, String) {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    runtime.spawn(weft_tools::fixture::serve_http(listener));
    (runtime, url)
}

fn weft(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_weft"))
        .args(args)
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env("WEFT_HOME", dir.join("home"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn a_scripted_run_calls_an_mcp_tool_and_a_built_in_tool() {
    let (_server, url) = mcp_server();
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("weft.toml");
    std::fs::write(
        &config,
        format!(
            "[[mcp]]\nname = \"fx\"\nurl = \"{url}\"\n\n[builtins]\ntools = [\"calculator\"]\n"
        ),
    )
    .unwrap();
    let script = dir.path().join("script.json");
    let turns = json!({"turns": [
        {"toolCalls": [
            {"name": "fx__add", "arguments": {"a": 2, "b": 3}},
            {"name": "calculator", "arguments": {"expression": "2 ^ 10"}},
            {"name": "fx__fail", "arguments": {}}
        ]},
        {"text": "Five and 1024."}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let config = config.to_str().unwrap();
    let script = script.to_str().unwrap();
    let o = weft(
        dir.path(),
        &["run", "Add", "--json", "--store", "memory", "--config", config, "--script", script],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let mut receiver = LoomReceiver::new();
    receiver.push_text(&text(&o.stdout));
    let transcript = receiver.finish();
    assert!(transcript.errors.is_empty(), "{:?}", transcript.errors);
    let run = &transcript.sessions[0].runs[0];
    let act = run.node_runs.iter().find(|n| n.name.as_deref() == Some("act")).unwrap();
    // The calls run concurrently: their ends come in the order they finish.
    let mut ends: Vec<_> =
        act.tool_ends.iter().map(|e| (e.name.as_str(), e.result.as_str(), e.is_error)).collect();
    ends.sort();
    assert_eq!(
        ends,
        [
            ("calculator", "1024", false),
            ("fx__add", "5", false),
            ("fx__fail", "it failed on purpose", true)
        ]
    );
    assert_eq!(run.reply.as_ref().map(|r| r.text.as_str()), Some("Five and 1024."));
}

#[test]
fn tools_list_shows_sources_schemas_and_policy() {
    let (_server, url) = mcp_server();
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("weft.toml"),
        format!(
            "[[mcp]]\nname = \"fx\"\nurl = \"{url}\"\n\n[builtins]\ntools = [\"calculator\", \"shell\"]\n\n\
             [tools.echo]\nenabled = false\n\n[tools.shell]\napproval = \"never\"\n\n[tools.fx__add]\napproval = \"always\"\n"
        ),
    )
    .unwrap();
    let o = weft(dir.path(), &["tools", "list"]);
    assert_eq!(o.status.code(), Some(0), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    let row = |name: &str| -> Vec<String> {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no row for {name}: {out}"))
            .split_whitespace()
            .map(String::from)
            .collect()
    };
    assert_eq!(row("fx__add")[..3], ["fx__add", "mcp:fx", "approval"]);
    assert!(row("fx__add").join(" ").ends_with("{a: number, b: number}"), "{out}");
    assert_eq!(row("calculator")[..3], ["calculator", "builtin", "-"]);
    assert_eq!(
        row("shell")[..3],
        ["shell", "builtin", "-"],
        "approval = never lifts shell's default"
    );
    assert_eq!(row("current_time")[..2], ["current_time", "weft"]);
    assert!(!out.lines().any(|l| l.starts_with("echo ")), "echo is disabled: {out}");
}

#[test]
fn a_mistake_in_the_tools_configuration_names_the_key() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("weft.toml"), "[builtins]\ntools = [\"rm_rf\"]\n").unwrap();
    let o = weft(dir.path(), &["tools", "list"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(err.contains("weft.toml:1: builtins.tools: unknown tool \"rm_rf\""), "{err}");
}
