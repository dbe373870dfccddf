//! weft-client against a real `weft serve` (in-process, 127.0.0.1, faux provider, SQLite in a
//! temp dir): the client tool loop, approvals, reconnection through a proxy that cuts the
//! stream, abort, errors.
#![allow(clippy::unwrap_used, missing_docs)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use weft_agent::{Agent, AgentBuilder, tool_fn};
use weft_client::{Client, Error, Event, ExecuteOptions, NativeMessage, Reconnect};
use weft_core::{AgentEvent, ApprovalDecision, Input, Message, SessionStatus};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_server::{Server, Settings};

struct TestServer {
    base: String,
    _shutdown: tokio::sync::oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

async fn start(script: FauxScript, agent: impl FnOnce(AgentBuilder) -> AgentBuilder) -> TestServer {
    start_keyed(script, agent, None).await
}

async fn start_keyed(
    script: FauxScript,
    agent: impl FnOnce(AgentBuilder) -> AgentBuilder,
    key: Option<&str>,
) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let store = weft_store::connect(&format!("sqlite:{}", dir.path().join("weft.db").display()))
        .await
        .unwrap();
    let agent: Agent = agent(Agent::builder(FauxProvider::new(script)).model("faux").store(store))
        .build()
        .unwrap();
    let mut settings = Settings::new("faux");
    settings.requests_per_minute = 0;
    if let Some(key) = key {
        settings.api_keys.insert(key.to_string(), "alice".to_string());
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(Server::new(agent, settings).serve(listener, async move {
        let _ = rx.await;
    }));
    TestServer { base, _shutdown: tx, _dir: dir }
}

fn client(base: &str) -> Client {
    let http = reqwest::Client::builder().no_proxy().build().unwrap();
    Client::with_http(base, http).reconnect(Reconnect {
        max_tries: 5,
        first_delay: Duration::from_millis(20),
        ..Default::default()
    })
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct City {
    city: String,
}

fn weather_script() -> FauxScript {
    FauxScript::new([
        FauxTurn::text("Let me look that up.")
            .with_tool_call_id("call-1", "get_weather", json!({"city": "Paris"}))
            .with_chunk_size(4),
        FauxTurn::text("It is sunny in Paris.").with_chunk_size(4),
    ])
}

fn text_of(events: &[Event]) -> String {
    events
        .iter()
        .filter_map(|e| match e.event() {
            Some(AgentEvent::TextDelta { delta, .. }) => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

async fn collect(
    mut stream: weft_client::ExecuteStream,
) -> (Vec<Event>, weft_client::ExecuteResult) {
    let mut events = Vec::new();
    while let Some(item) =
        tokio::time::timeout(Duration::from_secs(20), stream.next()).await.unwrap()
    {
        events.push(item.unwrap());
    }
    (events, stream.result().unwrap())
}

#[tokio::test]
async fn client_tools_run_and_the_run_resumes() {
    let server = start(weather_script(), |b| b).await;
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = Arc::clone(&calls);
    let weather = tool_fn("get_weather", "The weather in a city", move |args: City| {
        seen.fetch_add(1, Ordering::SeqCst);
        async move { Ok::<_, String>(format!("sunny in {}", args.city)) }
    });
    let stream = client(&server.base)
        .execute(Input::text("Weather in Paris?"), ExecuteOptions::new().tool(weather));
    let (events, result) = collect(stream).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    assert_eq!(text_of(&events), "Let me look that up.It is sunny in Paris.");
    assert_eq!(result.status, SessionStatus::Completed);
    let completes: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.message {
            NativeMessage::Complete { status, .. } => Some(*status),
            _ => None,
        })
        .collect();
    assert_eq!(completes, [SessionStatus::AwaitingToolExecution, SessionStatus::Completed]);
    // Sequence numbers only grow, across both runs.
    assert!(events.windows(2).all(|w| w[0].seq <= w[1].seq));
    let output = result.messages.iter().find_map(|m| match m.as_ref() {
        Message::ToolResult(r) => Some(r.text_content()),
        _ => None,
    });
    assert_eq!(output.as_deref(), Some("sunny in Paris"));

    // The session, as the server keeps it; the list and delete.
    let c = client(&server.base);
    let view = c.get_session(&result.session_id).await.unwrap();
    assert_eq!(view.status, SessionStatus::Completed);
    assert_eq!(view.messages.len(), 4);
    let list = c.list_sessions(Some(10)).await.unwrap();
    assert!(list.iter().any(|h| h.id == result.session_id));
    c.delete_session(&result.session_id).await.unwrap();
    let error = c.get_session(&result.session_id).await.unwrap_err();
    assert_eq!((error.status(), error.code()), (Some(404), Some("session_not_found")));
}

#[tokio::test]
async fn without_a_handler_the_stream_ends_suspended() {
    let server = start(weather_script(), |b| b).await;
    let spec = weft_core::ToolSpec::new("get_weather", "weather", json!({"type": "object"}));
    let c = client(&server.base);
    let result = c
        .execute(Input::text("Weather?"), ExecuteOptions::new().remote_tool(spec))
        .finish()
        .await
        .unwrap();
    assert_eq!(result.status, SessionStatus::AwaitingToolExecution);
    assert_eq!(result.pending_tool_calls[0].id, "call-1");
    // Answer it by hand.
    let answer = weft_core::ToolResultMessage::ok(&result.pending_tool_calls[0], "rain");
    let resumed = c
        .execute(answer.into(), ExecuteOptions::new().session(&result.session_id))
        .finish()
        .await
        .unwrap();
    assert_eq!(resumed.status, SessionStatus::Completed);
}

fn delete_script() -> FauxScript {
    FauxScript::new([
        FauxTurn::tool_call("delete", json!({"path": "a.txt"})),
        FauxTurn::text("Done.").with_chunk_size(2),
    ])
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Path {
    path: String,
}

#[tokio::test]
async fn the_approval_callback_decides() {
    let server = start(delete_script(), |b| {
        b.tool(
            tool_fn("delete", "Deletes a file", |args: Path| async move {
                Ok::<_, String>(format!("deleted {}", args.path))
            })
            .with_approval(),
        )
    })
    .await;
    for approve in [true, false] {
        let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
        let record = Arc::clone(&asked);
        let options = ExecuteOptions::new().on_approval(move |request| {
            record.lock().unwrap().extend(request.calls.iter().map(|c| (*c.arguments).clone()));
            let decisions: Vec<ApprovalDecision> =
                if approve { request.approve_all() } else { request.deny_all("not today") };
            async move { decisions }
        });
        let (events, result) =
            collect(client(&server.base).execute(Input::text("Delete a.txt"), options)).await;
        assert_eq!(*asked.lock().unwrap(), [json!({"path": "a.txt"})]);
        assert_eq!(result.status, SessionStatus::Completed);
        assert_eq!(text_of(&events), "Done.");
        let tool_result = result.messages.iter().find_map(|m| match m.as_ref() {
            Message::ToolResult(r) => Some((r.is_error, r.text_content())),
            _ => None,
        });
        let (is_error, text) = tool_result.unwrap();
        assert_eq!(is_error, !approve, "{text}");
        if approve {
            assert_eq!(text, "deleted a.txt");
        } else {
            assert!(text.contains("not today"), "{text}");
        }
    }
}

/// A proxy on 127.0.0.1 that forwards connections to `upstream`, and cuts the first one after
/// `cut` bytes of response.
async fn cutting_proxy(upstream: String, cut: usize) -> (String, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let connections = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&connections);
    let addr = upstream.trim_start_matches("http://").to_string();
    tokio::spawn(async move {
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else { return };
            let first = count.fetch_add(1, Ordering::SeqCst) == 0;
            let addr = addr.clone();
            tokio::spawn(async move {
                let mut outbound = tokio::net::TcpStream::connect(addr).await.unwrap();
                let (mut ri, mut wi) = inbound.split();
                let (mut ro, mut wo) = outbound.split();
                let up = tokio::io::copy(&mut ri, &mut wo);
                let down = async {
                    let mut sent = 0usize;
                    let mut buf = vec![0u8; 512];
                    loop {
                        let n = ro.read(&mut buf).await.unwrap_or(0);
                        if n == 0 {
                            return;
                        }
                        let n = if first { n.min(cut.saturating_sub(sent)) } else { n };
                        if wi.write_all(&buf[..n]).await.is_err() {
                            return;
                        }
                        sent += n;
                        if first && sent >= cut {
                            return;
                        }
                    }
                };
                tokio::select! {
                    _ = up => {}
                    () = down => {}
                }
            });
        }
    });
    (base, connections)
}

#[tokio::test]
async fn a_dropped_connection_is_resumed_without_gap_or_duplicate() {
    let text = "The quick brown fox jumps over the lazy dog, twice over.";
    let script = FauxScript::new([FauxTurn::text(text)
        .with_thinking("Foxes and dogs.")
        .with_chunk_size(3)
        .with_delay_ms(15)]);
    let server = start(script, |b| b).await;
    let (proxy, connections) = cutting_proxy(server.base.clone(), 1200).await;
    let stream = client(&proxy).execute(Input::text("Tell me"), ExecuteOptions::new());
    let (events, result) = collect_with_reconnects(stream).await;
    assert!(connections.load(Ordering::SeqCst) >= 2, "the stream was never cut");
    assert_eq!(text_of(&events), text);
    let seqs: Vec<u64> = events.iter().filter(|e| e.event().is_some()).map(|e| e.seq).collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "a duplicate or out of order: {seqs:?}");
    let starts = events
        .iter()
        .filter(|e| matches!(e.event(), Some(AgentEvent::SessionStart { .. })))
        .count();
    assert_eq!(starts, 1);
    assert_eq!(result.status, SessionStatus::Completed);
}

async fn collect_with_reconnects(
    mut stream: weft_client::ExecuteStream,
) -> (Vec<Event>, weft_client::ExecuteResult) {
    let mut events = Vec::new();
    while let Some(item) =
        tokio::time::timeout(Duration::from_secs(20), stream.next()).await.unwrap()
    {
        events.push(item.unwrap());
    }
    assert!(stream.reconnects() >= 1, "no reconnection");
    (events, stream.result().unwrap())
}

#[tokio::test]
async fn abort_ends_the_run_aborted() {
    let server = start(FauxScript::new([FauxTurn::text("Working on it").stalled()]), |b| b).await;
    let mut stream = client(&server.base).execute(Input::text("Go"), ExecuteOptions::new());
    let abort = stream.abort_handle();
    let mut aborted = false;
    let mut statuses = Vec::new();
    while let Some(item) =
        tokio::time::timeout(Duration::from_secs(20), stream.next()).await.unwrap()
    {
        let event = item.unwrap();
        if !aborted && matches!(event.event(), Some(AgentEvent::TextDelta { .. })) {
            abort.abort().await.unwrap();
            aborted = true;
        }
        if let NativeMessage::Complete { status, .. } = event.message {
            statuses.push(status);
        }
    }
    assert!(aborted);
    assert_eq!(statuses, [SessionStatus::Aborted]);
    assert_eq!(stream.result().unwrap().status, SessionStatus::Aborted);
}

#[tokio::test]
async fn errors_carry_the_status_and_the_servers_code() {
    let server = start_keyed(weather_script(), |b| b, Some("k-123")).await;
    let anonymous = client(&server.base);
    let error = anonymous.list_sessions(None).await.unwrap_err();
    assert_eq!(error.status(), Some(401));
    assert!(matches!(error, Error::Api { .. }));
    let keyed = client(&server.base).api_key("k-123");
    assert!(keyed.list_sessions(None).await.unwrap().is_empty());
    // An execute refused before it streams: the stream's one item is the error.
    let mut stream = keyed.execute(Input::text("hi"), ExecuteOptions::new().provider("nope"));
    let error = stream.next().await.unwrap().unwrap_err();
    assert_eq!((error.status(), error.code()), (Some(400), Some("unknown_provider")));
    assert!(stream.next().await.is_none());
}

/// `mode` and `mode_options` reach the server: the tree-of-thoughts example script stops at the
/// model-call bound it was given (as react it would have completed after its first turn).
#[tokio::test]
async fn mode_and_its_options_reach_the_server() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/scripts/tot.json");
    let server = start(FauxScript::from_file(path).unwrap(), |b| b).await;
    let c = client(&server.base);
    let options = ExecuteOptions::new().mode("tot").mode_options(json!({"maxModelCalls": 2}));
    let result = c.execute(Input::text("Make 24 from 4 6 1 1"), options).finish().await.unwrap();
    assert_eq!(result.status, SessionStatus::MaxTurns);
    let react = c.execute(Input::text("Make 24"), ExecuteOptions::new()).finish().await.unwrap();
    assert_eq!(react.status, SessionStatus::Completed);
}
