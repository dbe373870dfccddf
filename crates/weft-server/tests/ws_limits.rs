//! WebSocket messages are requests: rate-limited per key, streams capped per socket and per key,
//! and a client that does not read is closed with a reason while the server's queue stays
//! bounded. Sockets are capped per key, closed when idle, and replaced at the connection cap
//! when they carry no stream.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use weft_llm::faux::{FauxScript, FauxTurn};

type Socket<S> = tokio_tungstenite::WebSocketStream<S>;

/// Far longer than any timer under test: only a broken limit hits it.
const BOUND: Duration = Duration::from_secs(30);

const KEY: &str = "key-of-alice-1";

fn ws_request(server: &TestServer) -> tokio_tungstenite::tungstenite::handshake::client::Request {
    let url = server.url("/api/agent/ws").replace("http://", "ws://");
    let mut request = url.into_client_request().unwrap();
    if let Some(key) = &server.key {
        request.headers_mut().insert("authorization", format!("Bearer {key}").parse().unwrap());
    }
    request
}

async fn connect(
    server: &TestServer,
) -> Socket<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>> {
    tokio_tungstenite::connect_async(ws_request(server)).await.unwrap().0
}

async fn next_json<S>(socket: &mut Socket<S>) -> Value
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let message = tokio::time::timeout(BOUND, socket.next()).await.unwrap().unwrap().unwrap();
        if let Message::Text(text) = message {
            return serde_json::from_str(&text).unwrap();
        }
    }
}

fn execute_message() -> Message {
    Message::text(
        json!({"type": "execute", "input": user("Hi"), "context": {"tools": []}}).to_string(),
    )
}

/// A metric's value in `/metrics` (the sample with exactly these labels), 0 when absent.
async fn metric(server: &TestServer, sample: &str) -> f64 {
    let text = server.get("/metrics", None).send().await.unwrap().text().await.unwrap();
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn executes_over_one_socket_are_rate_limited_past_the_burst() {
    let script = FauxScript::new([FauxTurn::text("Hello.")]);
    let server = start_with(
        script,
        |b| b,
        |s| {
            s.api_keys.insert(KEY.into(), "alice".into());
            // One token a minute: none comes back during the test.
            s.requests_per_minute = 1;
            s.burst = 5;
        },
    )
    .await;
    let mut socket = connect(&server).await;
    for _ in 0..10 {
        socket.send(execute_message()).await.unwrap();
    }
    let (mut started, mut ended, mut limited) = (0, 0, 0);
    while started + limited < 10 || ended < started {
        let message = next_json(&mut socket).await;
        match (message["type"].as_str(), message["error"]["code"].as_str()) {
            (Some("started"), _) => started += 1,
            (Some("end"), _) => ended += 1,
            (_, Some("rate_limited")) => {
                limited += 1;
                let text = message["error"]["message"].as_str().unwrap();
                assert!(text.contains("retry in"), "{text}");
                assert!(!text.contains(KEY), "the key leaked: {text}");
            }
            (_, Some(other)) => panic!("unexpected error {other}: {message}"),
            _ => {}
        }
    }
    // The upgrade took one token of the burst, four executes the rest.
    assert_eq!((started, limited), (4, 6));
    // Over HTTP the same key is out of tokens too.
    let response = server.get("/api/agent/sessions", None).send().await.unwrap();
    assert_eq!(response.status(), 429);
}

#[tokio::test]
async fn aborts_over_one_socket_are_rate_limited_past_the_burst() {
    let server = start_with(
        stall_script(),
        |b| b,
        |s| {
            s.api_keys.insert(KEY.into(), "alice".into());
            s.requests_per_minute = 1;
            s.burst = 5;
        },
    )
    .await;
    let mut socket = connect(&server).await;
    // Each abort looks its session up in the store: one of a running run, the rest of ids that
    // do not exist.
    socket.send(execute_message()).await.unwrap();
    let started = next_json(&mut socket).await;
    assert_eq!(started["type"], "started", "{started}");
    let id = started["sessionId"].as_str().unwrap().to_string();
    let abort = |id: &str| Message::text(json!({"type": "abort", "sessionId": id}).to_string());
    socket.send(abort(&id)).await.unwrap();
    for n in 0..9 {
        socket.send(abort(&format!("no-such-session-{n}"))).await.unwrap();
    }
    let (mut answered, mut limited) = (0, 0);
    while answered + limited < 10 {
        let message = next_json(&mut socket).await;
        match (message["type"].as_str(), message["error"]["code"].as_str()) {
            (Some("aborted"), _) | (_, Some("session_not_found")) => answered += 1,
            (_, Some("rate_limited")) => {
                limited += 1;
                assert!(message["sessionId"].is_string(), "{message}");
            }
            (_, Some(other)) => panic!("unexpected error {other}: {message}"),
            _ => {}
        }
    }
    // The upgrade and the execute took two tokens of the burst, three aborts the rest.
    assert_eq!((answered, limited), (3, 7));
}

#[tokio::test]
async fn streams_are_capped_per_socket_and_per_key() {
    let server = start_with(
        stall_script(),
        |b| b,
        |s| {
            s.ws_streams_per_socket = 2;
            s.ws_streams_per_key = 3;
        },
    )
    .await;
    let mut first = connect(&server).await;
    for _ in 0..3 {
        first.send(execute_message()).await.unwrap();
    }
    let mut sessions = Vec::new();
    let mut refusals = Vec::new();
    while sessions.len() + refusals.len() < 3 {
        let message = next_json(&mut first).await;
        if message["type"] == "started" {
            sessions.push(message["sessionId"].as_str().unwrap().to_string());
        } else if message.get("error").is_some() {
            refusals.push(message);
        }
    }
    assert_eq!(sessions.len(), 2, "{refusals:?}");
    assert_eq!(refusals[0]["error"]["code"], "too_many_streams");
    let text = refusals[0]["error"]["message"].as_str().unwrap();
    assert!(text.contains("limits.ws_streams_per_socket"), "{text}");

    // A second socket of the same key (no keys: one anonymous key) gets the key's third.
    let mut second = connect(&server).await;
    second.send(execute_message()).await.unwrap();
    assert_eq!(next_json(&mut second).await["type"], "started");
    second
        .send(Message::text(json!({"type": "attach", "sessionId": sessions[0]}).to_string()))
        .await
        .unwrap();
    let refused = loop {
        let message = next_json(&mut second).await;
        if message.get("error").is_some() {
            break message;
        }
    };
    assert_eq!(refused["error"]["code"], "too_many_streams");
    assert_eq!(refused["sessionId"], sessions[0].as_str());
    let text = refused["error"]["message"].as_str().unwrap();
    assert!(text.contains("limits.ws_streams_per_key"), "{text}");

    // A stream that ends gives its slot back.
    first
        .send(Message::text(json!({"type": "abort", "sessionId": sessions[0]}).to_string()))
        .await
        .unwrap();
    loop {
        let message = next_json(&mut first).await;
        if message["type"] == "end" && message["sessionId"] == sessions[0].as_str() {
            break;
        }
    }
    first
        .send(Message::text(json!({"type": "attach", "sessionId": sessions[0]}).to_string()))
        .await
        .unwrap();
    loop {
        let message = next_json(&mut first).await;
        assert!(message.get("error").is_none(), "{message}");
        if message["type"] == "end" && message["sessionId"] == sessions[0].as_str() {
            break;
        }
    }
}

#[tokio::test]
async fn a_socket_that_does_not_read_is_closed_with_a_reason_and_a_bounded_queue() {
    // A long answer in one-character deltas: every attach replays thousands of events.
    let text: String = "All work and no play. ".repeat(250);
    let script = FauxScript::new([FauxTurn::text(text).with_chunk_size(1)]);
    let queue = 64 * 1024;
    let server = start_with(
        script,
        |b| b,
        |s| {
            s.ws_send_queue = queue;
            s.ws_send_timeout = Duration::from_millis(500);
        },
    )
    .await;
    let (id, frames) = server.execute(json!({"input": user("Go"), "context": {"tools": []}})).await;
    assert_eq!(last_json(&frames)["status"], "completed");

    // A client with a tiny receive buffer that sends 2,000 attaches and reads nothing.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let stream = socket.connect(server.base.trim_start_matches("http://").parse().unwrap()).await;
    let (socket, _) =
        tokio_tungstenite::client_async(ws_request(&server), stream.unwrap()).await.unwrap();
    let (mut write, mut read) = socket.split();
    let attach = json!({"type": "attach", "sessionId": id}).to_string();
    let flood = tokio::spawn(async move {
        for _ in 0..2000 {
            if write.send(Message::text(attach.clone())).await.is_err() {
                return;
            }
        }
    });

    // The server's queue and streams stay bounded until it gives up on the socket.
    let started = Instant::now();
    let (mut most_queued, mut most_streams) = (0.0f64, 0.0f64);
    while metric(&server, "weft_ws_slow_closed_total").await < 1.0 {
        assert!(started.elapsed() < BOUND, "a socket that does not read was kept open");
        most_queued = most_queued.max(metric(&server, "weft_ws_queued_bytes").await);
        most_streams = most_streams.max(metric(&server, "weft_stream_clients").await);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(most_queued <= queue as f64, "{most_queued} bytes queued");
    assert!(most_streams <= weft_server::DEFAULT_WS_STREAMS_PER_SOCKET as f64, "{most_streams}");

    // Reading now: what the socket buffers held, then the close frame with its reason.
    let close = tokio::time::timeout(BOUND, async {
        while let Some(message) = read.next().await {
            if let Message::Close(frame) = message.unwrap() {
                return frame;
            }
        }
        None
    })
    .await
    .unwrap()
    .expect("closed without a close frame");
    assert_eq!(close.code, CloseCode::Policy);
    assert!(close.reason.contains("took no data"), "{}", close.reason);
    assert!(close.reason.contains("limits.ws_send_timeout"), "{}", close.reason);
    flood.abort();

    // Its streams stopped and its queue is gone.
    let started = Instant::now();
    while metric(&server, "weft_stream_clients").await > 0.0
        || metric(&server, "weft_ws_queued_bytes").await > 0.0
    {
        assert!(started.elapsed() < BOUND, "the closed socket's streams or queue remain");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(server.session(&id).await["status"], "completed");
}

/// Reads until the server's close frame (frames before it are skipped).
async fn close_frame<S>(socket: &mut Socket<S>) -> CloseFrame
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let message = tokio::time::timeout(BOUND, socket.next())
            .await
            .expect("the socket was not closed")
            .expect("closed without a close frame")
            .unwrap();
        if let Message::Close(frame) = message {
            return frame.expect("a close frame without a code");
        }
    }
}

#[tokio::test]
async fn a_socket_without_a_stream_is_closed_after_the_idle_timeout() {
    let server = start_with(
        stall_script(),
        |b| b,
        |s| {
            s.idle_timeout = Duration::from_millis(300);
        },
    )
    .await;
    // A socket that never asks for anything.
    let opened = Instant::now();
    let mut silent = connect(&server).await;
    let close = close_frame(&mut silent).await;
    assert!(opened.elapsed() >= Duration::from_millis(300), "closed before its timeout");
    assert_eq!(close.code, CloseCode::Normal);
    assert!(close.reason.contains("limits.idle_timeout"), "{}", close.reason);

    // A socket carrying a stream is not idle, however quiet the stream (the run waits).
    let mut busy = connect(&server).await;
    busy.send(execute_message()).await.unwrap();
    let started = next_json(&mut busy).await;
    let id = started["sessionId"].as_str().unwrap().to_string();
    let quiet = tokio::time::timeout(Duration::from_millis(1500), async {
        loop {
            match busy.next().await {
                Some(Ok(Message::Close(frame))) => return frame,
                Some(Ok(_)) => {}
                other => panic!("{other:?}"),
            }
        }
    })
    .await;
    assert!(quiet.is_err(), "a socket with a stream was closed: {quiet:?}");
    // Its stream ends: from then on it is idle, and closed in its turn.
    let abort = json!({"type": "abort", "sessionId": id}).to_string();
    busy.send(Message::text(abort)).await.unwrap();
    let close = close_frame(&mut busy).await;
    assert_eq!(close.code, CloseCode::Normal);
    assert!(close.reason.contains("limits.idle_timeout"), "{}", close.reason);
    assert_eq!(server.session(&id).await["status"], "aborted");
}

#[tokio::test]
async fn a_key_past_its_socket_cap_is_refused_at_the_upgrade() {
    const OTHER: &str = "key-of-bob-22";
    let server = start_with(
        stall_script(),
        |b| b,
        |s| {
            s.api_keys.insert(KEY.into(), "alice".into());
            s.api_keys.insert(OTHER.into(), "bob".into());
            s.ws_sockets_per_key = 2;
        },
    )
    .await;
    let mut sockets = vec![connect(&server).await, connect(&server).await];
    let refused = tokio_tungstenite::connect_async(ws_request(&server)).await;
    let Err(tokio_tungstenite::tungstenite::Error::Http(response)) = refused else {
        panic!("a third socket of the key was accepted: {refused:?}");
    };
    assert_eq!(response.status(), 429);
    let body: Value = serde_json::from_slice(response.body().as_deref().unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "too_many_sockets", "{body}");
    let text = body["error"]["message"].as_str().unwrap();
    assert!(text.contains("limits.ws_sockets_per_key"), "{text}");
    assert!(!text.contains(KEY), "the key leaked: {text}");

    // Another key has sockets of its own.
    let mut other = ws_request(&server);
    other.headers_mut().insert("authorization", format!("Bearer {OTHER}").parse().unwrap());
    let (mut bobs, _) = tokio_tungstenite::connect_async(other).await.unwrap();
    bobs.send(execute_message()).await.unwrap();
    assert_eq!(next_json(&mut bobs).await["type"], "started");

    // A socket that closes gives its slot back.
    let mut first = sockets.remove(0);
    first.close(None).await.unwrap();
    while first.next().await.is_some() {}
    let started = Instant::now();
    loop {
        match tokio_tungstenite::connect_async(ws_request(&server)).await {
            Ok((socket, _)) => {
                sockets.push(socket);
                break;
            }
            Err(tokio_tungstenite::tungstenite::Error::Http(response))
                if response.status() == 429 && started.elapsed() < BOUND =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(error) => panic!("{error}"),
        }
    }
}

#[tokio::test]
async fn a_flood_of_idle_sockets_at_the_cap_leaves_healthz_answering() {
    // Timers far off: only the cap can make room.
    let cap = 8;
    let server = start_with(
        stall_script(),
        |b| b,
        |s| {
            s.max_connections = cap;
            s.header_timeout = Duration::from_secs(60);
            s.idle_timeout = Duration::from_secs(60);
        },
    )
    .await;
    // A socket carrying a stream is busy: never replaced.
    let mut busy = connect(&server).await;
    busy.send(execute_message()).await.unwrap();
    let id = next_json(&mut busy).await["sessionId"].as_str().unwrap().to_string();

    let mut flood = Vec::new();
    for round in 0..6 {
        for _ in 0..4 {
            if let Ok((socket, _)) = tokio_tungstenite::connect_async(ws_request(&server)).await {
                flood.push(socket);
            }
        }
        // A client's new connection takes the place of the idle socket that waited longest.
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let response = tokio::time::timeout(BOUND, client.get(server.url("/healthz")).send())
            .await
            .expect("/healthz did not answer during the flood");
        assert!(
            response.as_ref().is_ok_and(|r| r.status() == 200),
            "round {round}: /healthz refused: {response:?}"
        );
    }
    assert_eq!(flood.len(), 24, "sockets of the flood were refused");
    // The first flood sockets were closed, with a reason.
    let close = close_frame(&mut flood[0]).await;
    assert_eq!(close.code, CloseCode::Again);
    assert!(close.reason.contains("limits.max_connections"), "{}", close.reason);
    // The busy socket still carries its stream.
    let abort = json!({"type": "abort", "sessionId": id}).to_string();
    busy.send(Message::text(abort)).await.unwrap();
    loop {
        let message = next_json(&mut busy).await;
        if message["type"] == "end" {
            break;
        }
    }
}
