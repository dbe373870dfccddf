//! MCP servers through `McpServer`: the fixture server of `weft_tools::fixture` over stdio (a
//! child process) and over streamable HTTP on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use weft_agent::{
    CancellationToken, Tool, ToolContext, ToolError, ToolEvent, ToolOutput, ToolSource,
};
use weft_core::ToolContent;
use weft_tools::{McpServer, McpServerConfig};

fn stdio(name: &str) -> McpServerConfig {
    McpServerConfig {
        name: name.into(),
        command: Some(env!("CARGO_BIN_EXE_weft-mcp-fixture").into()),
        ..Default::default()
    }
}

async fn http(name: &str) -> McpServerConfig {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(weft_tools::fixture::serve_http(listener));
    McpServerConfig {
        name: name.into(),
        url: Some(format!("http://{addr}/mcp")),
        ..Default::default()
    }
}

fn tool(server: &McpServer, name: &str) -> Arc<dyn Tool> {
    server
        .tools()
        .into_iter()
        .find(|t| t.spec().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

/// Runs a call to its end: the deltas and the result.
async fn call(
    server: &McpServer,
    name: &str,
    args: Value,
    cancel: CancellationToken,
) -> (Vec<String>, Result<ToolOutput, ToolError>) {
    let mut stream = tool(server, name).execute(args, ToolContext::new("call-1", cancel));
    let mut deltas = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            ToolEvent::Delta(d) => deltas.push(d),
            ToolEvent::Complete(out) => return (deltas, Ok(out)),
            ToolEvent::Error(e) => return (deltas, Err(e)),
        }
    }
    panic!("the call ended without a result");
}

async fn text_of(server: &McpServer, name: &str) -> String {
    call(server, name, json!({}), CancellationToken::new()).await.1.unwrap().text_output()
}

/// Listing, calling, structured content, images, errors and progress: the same on both
/// transports.
async fn calls_are_mapped(server: &McpServer, prefix: &str) {
    let mut names: Vec<String> = server.tools().iter().map(|t| t.spec().name.clone()).collect();
    names.sort();
    assert!(names.contains(&format!("{prefix}__add")), "{names:?}");
    assert!(names.iter().all(|n| n.starts_with(&format!("{prefix}__"))));
    let add = tool(server, &format!("{prefix}__add"));
    assert_eq!(add.spec().parameters["required"], json!(["a", "b"]));

    let (_, out) = call(
        server,
        &format!("{prefix}__add"),
        json!({"a": 2, "b": 3.5}),
        CancellationToken::new(),
    )
    .await;
    let out = out.unwrap();
    assert_eq!(out.text_output(), "5.5");
    assert_eq!(out.details, Some(json!({"structuredContent": {"sum": 5.5}})));

    let (_, out) =
        call(server, &format!("{prefix}__image"), json!({}), CancellationToken::new()).await;
    let out = out.unwrap();
    assert_eq!(
        out.content[1],
        ToolContent::Image { mime_type: "image/png".into(), data: weft_tools::fixture::PNG.into() }
    );

    let (_, out) =
        call(server, &format!("{prefix}__fail"), json!({}), CancellationToken::new()).await;
    assert_eq!(out, Err(ToolError::failed("it failed on purpose")));

    let (deltas, out) =
        call(server, &format!("{prefix}__slow"), json!({"steps": 3}), CancellationToken::new())
            .await;
    assert_eq!(deltas, ["step 1 of 3\n", "step 2 of 3\n", "step 3 of 3\n"]);
    assert_eq!(out.unwrap().text_output(), "done after 3 steps");
}

/// Reads a call until the server says it started (its first delta), cancels it, and reads the
/// rest: every event the call gave.
async fn cancel_once_started(
    mut stream: weft_agent::ToolStream,
    cancel: &CancellationToken,
) -> Vec<ToolEvent> {
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        let started = matches!(&event, ToolEvent::Delta(d) if d == "started\n");
        events.push(event);
        if started {
            cancel.cancel();
        }
    }
    events
}

/// A cancelled call is cancelled on the server: it counts the notification.
async fn cancelling_reaches_the_server(server: &McpServer, prefix: &str) {
    let cancel = CancellationToken::new();
    let stream = tool(server, &format!("{prefix}__hang"))
        .execute(json!({}), ToolContext::new("h", cancel.clone()));
    let events = cancel_once_started(stream, &cancel).await;
    assert!(matches!(events.last(), Some(ToolEvent::Error(ToolError::Cancelled(_)))), "{events:?}");
    let mut seen = String::new();
    for _ in 0..200 {
        seen = text_of(server, &format!("{prefix}__cancellations")).await;
        if seen == "1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen, "1", "the server did not see the cancellation");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_server_is_listed_called_and_cancelled() {
    let server = McpServer::start(stdio("fx")).await;
    assert_eq!(server.name(), "mcp:fx");
    calls_are_mapped(&server, "fx").await;
    cancelling_reaches_the_server(&server, "fx").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamable_http_server_is_listed_called_and_cancelled() {
    let server = McpServer::start(http("web").await).await;
    calls_are_mapped(&server, "web").await;
    cancelling_reaches_the_server(&server, "web").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_mid_call_gives_an_error_and_is_restarted() {
    let server = McpServer::start(stdio("fx")).await;
    assert_eq!(server.connections(), 1);
    let (_, out) = call(&server, "fx__crash", json!({}), CancellationToken::new()).await;
    let error = out.unwrap_err();
    assert!(matches!(&error, ToolError::Failed(m) if m.contains("MCP server fx")), "{error:?}");
    // The next call waits for the restart and works.
    let (_, out) =
        call(&server, "fx__add", json!({"a": 1, "b": 1}), CancellationToken::new()).await;
    assert_eq!(out.unwrap().text_output(), "2");
    assert_eq!(server.connections(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_tool_list_is_listed_again() {
    let server = McpServer::start(stdio("fx")).await;
    let generation = server.generation();
    assert!(!server.tools().iter().any(|t| t.spec().name == "fx__extra"));
    assert_eq!(text_of(&server, "fx__grow").await, "grown");
    assert!(server.wait_for_generation(generation, Duration::from_secs(10)).await);
    assert_eq!(text_of(&server, "fx__extra").await, "extra here");
}

/// Through an agent: a run that calls an MCP tool and is aborted mid-call cancels the call on
/// the server, and the run ends `aborted` with the call answered by an error result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_a_run_cancels_the_server_side_call() {
    use weft_agent::{Agent, SessionOptions};
    use weft_core::{AgentEvent, Input, SessionStatus};
    use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

    let server = McpServer::start(stdio("fx")).await;
    let provider = FauxProvider::new(FauxScript::new([
        FauxTurn::tool_call("fx__hang", json!({})),
        FauxTurn::text("never"),
    ]));
    let agent = Agent::builder(provider).tool_source(server.clone()).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let mut stream = agent.execute(&session, Input::text("hang")).await.unwrap();
    let abort = stream.abort_handle();
    let mut ended = None;
    while let Some(event) = stream.next().await {
        // The server said the call started: it is surely running there.
        if matches!(&event, AgentEvent::ToolExecutionDelta { delta, .. } if delta == "started\n") {
            abort.abort();
        }
        if let AgentEvent::ToolExecutionEnd { output, is_error, .. } = &event {
            ended = Some((output.clone(), *is_error));
        }
    }
    let result = stream.result().await;
    assert_eq!(result.status, SessionStatus::Aborted);
    assert_eq!(ended, Some(("Tool call aborted: the run was aborted".to_string(), true)));
    let mut seen = String::new();
    for _ in 0..200 {
        seen = text_of(&server, "fx__cancellations").await;
        if seen == "1" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(seen, "1", "the server did not see the cancellation");
}

/// A server that stops answering: the call that found it (cancelled, as a timeout does) ends
/// with an error result, the server fails its health check and is restarted, and the next call
/// works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_server_is_restarted() {
    let server = McpServer::start(stdio("fx")).await;
    let cancel = CancellationToken::new();
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("frozen");
    let args = json!({"marker": marker.to_str().unwrap()});
    let frozen = tokio::spawn({
        let stream =
            tool(&server, "fx__freeze").execute(args, ToolContext::new("f", cancel.clone()));
        async move { stream.collect::<Vec<_>>().await }
    });
    // Cancelled once the server has surely blocked.
    for _ in 0..500 {
        if marker.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(marker.exists(), "the server never froze");
    cancel.cancel();
    let events = frozen.await.unwrap();
    assert!(matches!(events.last(), Some(ToolEvent::Error(ToolError::Cancelled(_)))), "{events:?}");
    // The health check gives it 5 s to answer a listing; the old process gets ~3 s to exit.
    for _ in 0..600 {
        if server.connections() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(server.connections(), 2, "the hung server was not restarted");
    let (_, out) =
        call(&server, "fx__add", json!({"a": 20, "b": 22}), CancellationToken::new()).await;
    assert_eq!(out.unwrap().text_output(), "42");
}

/// Through an agent: arguments that do not fit the server's input schema never reach it; the
/// model gets an error result naming the problem, and a valid call runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_are_checked_against_the_servers_schema() {
    use weft_agent::{Agent, SessionOptions};
    use weft_core::Input;
    use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

    let server = McpServer::start(stdio("fx")).await;
    let provider = FauxProvider::new(FauxScript::new([
        FauxTurn::tool_call("fx__add", json!({"a": "two", "b": 3})),
        FauxTurn::tool_call("fx__add", json!({"a": 2, "b": 3})),
        FauxTurn::text("done"),
    ]));
    let agent = Agent::builder(provider).tool_source(server.clone()).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (_, result) = agent.respond(&session, Input::text("add")).await.unwrap();
    // Rejected calls never run: their error results go straight into the conversation.
    let ends: Vec<(String, bool)> = result
        .messages
        .iter()
        .filter_map(|m| match m {
            weft_core::Message::ToolResult(r) => Some((
                r.content
                    .iter()
                    .filter_map(|c| match c {
                        weft_core::UserContent::Text(t) => Some(t.text.clone()),
                        weft_core::UserContent::Image(_) => None,
                    })
                    .collect::<String>(),
                r.is_error,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(ends.len(), 2, "{ends:?}");
    assert!(
        ends[0].1 && ends[0].0.starts_with("Invalid arguments for tool fx__add: /a:"),
        "{ends:?}"
    );
    assert_eq!(ends[1], ("5".to_string(), false));
}
