//! `McpServer` against the reference MCP server, `@modelcontextprotocol/server-everything`
//! (npm, pinned in tests/reference/package.json, installed there by `.ci/run`), over stdio.
//!
//! Without the package (a checkout where `npm ci` was not run in tests/reference) the test fails,
//! unless `WEFT_ALLOW_SKIP` has `mcp` (see `weft_test_support::skip`).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use futures::StreamExt;
use serde_json::{Value, json};
use weft_agent::{CancellationToken, ToolContext, ToolError, ToolEvent, ToolOutput, ToolSource};
use weft_core::ToolContent;
use weft_tools::{McpServer, McpServerConfig};

fn reference() -> Option<PathBuf> {
    let index = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/reference/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    if index.is_file() {
        return Some(index);
    }
    weft_test_support::skip(
        "mcp",
        "the reference MCP server's tests",
        "the reference MCP server is not installed (npm ci in crates/weft-tools/tests/reference)",
    );
    None
}

async fn call(
    server: &McpServer,
    name: &str,
    args: Value,
) -> (Vec<String>, Result<ToolOutput, ToolError>) {
    let tool = server.tools().into_iter().find(|t| t.spec().name == name).expect(name);
    let mut stream = tool.execute(args, ToolContext::new("c", CancellationToken::new()));
    let mut deltas = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            ToolEvent::Delta(d) => deltas.push(d),
            ToolEvent::Complete(out) => return (deltas, Ok(out)),
            ToolEvent::Error(e) => return (deltas, Err(e)),
        }
    }
    panic!("no result");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reference_server_is_listed_and_called() {
    let Some(index) = reference() else { return };
    let server = McpServer::start(McpServerConfig {
        name: "ref".into(),
        command: Some("node".into()),
        args: vec![index.to_string_lossy().into_owned(), "stdio".into()],
        ..Default::default()
    })
    .await;
    let names: Vec<String> = server.tools().iter().map(|t| t.spec().name.clone()).collect();
    for expected in
        ["ref__echo", "ref__get-sum", "ref__get-tiny-image", "ref__trigger-long-running-operation"]
    {
        assert!(names.iter().any(|n| n == expected), "{expected} not in {names:?}");
    }
    let (_, out) = call(&server, "ref__echo", json!({"message": "hi"})).await;
    assert_eq!(out.unwrap().text_output(), "Echo: hi");
    let (_, out) = call(&server, "ref__get-sum", json!({"a": 2, "b": 40})).await;
    assert!(out.unwrap().text_output().contains("42"));
    let (_, out) = call(&server, "ref__get-tiny-image", json!({})).await;
    let out = out.unwrap();
    assert!(
        out.content.iter().any(|c| matches!(c, ToolContent::Image { mime_type, data } if mime_type == "image/png" && !data.is_empty())),
        "{:?}",
        out.content
    );
    let (deltas, out) =
        call(&server, "ref__trigger-long-running-operation", json!({"duration": 0.3, "steps": 3}))
            .await;
    assert!(out.unwrap().text_output().contains("Steps: 3"));
    assert_eq!(deltas.len(), 3, "{deltas:?}");
}
