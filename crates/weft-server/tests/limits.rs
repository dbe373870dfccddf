//! Connection limits over raw loopback TCP: a slow head, an idle keep-alive connection and a slow
//! body are closed by their timers; a flood beyond the cap leaves `/healthz` answering; a stream
//! that is sending is never idle; HTTP/2 is not served.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Far longer than any timer under test: only a broken limit hits it.
const BOUND: Duration = Duration::from_secs(20);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn addr(server: &TestServer) -> String {
    server.base.trim_start_matches("http://").to_string()
}

/// Reads until the server closes the connection (EOF or reset); what it sent before. Panics
/// after [`BOUND`].
async fn read_to_close(socket: &mut TcpStream) -> String {
    let mut received = Vec::new();
    let mut buf = [0u8; 4096];
    let read = tokio::time::timeout(BOUND, async {
        loop {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => received.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    assert!(read.is_ok(), "the server did not close the connection within {BOUND:?}");
    String::from_utf8_lossy(&received).into_owned()
}

/// Whether the server closed `socket` (EOF or reset), waiting `wait` for it.
async fn is_closed(socket: &mut TcpStream, wait: Duration) -> bool {
    let mut buf = [0u8; 64];
    matches!(tokio::time::timeout(wait, socket.read(&mut buf)).await, Ok(Ok(0) | Err(_)))
}

/// A metric's value in `/metrics` (the sample with exactly these labels), 0 when absent. A
/// connection refused at the cap is tried again.
async fn metric(server: &TestServer, sample: &str) -> f64 {
    let started = Instant::now();
    let text = loop {
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        match client.get(server.url("/metrics")).send().await {
            Ok(response) => break response.text().await.unwrap(),
            Err(error) => {
                assert!(started.elapsed() < BOUND, "/metrics: {error}");
                tokio::time::sleep(ms(50)).await;
            }
        }
    };
    text.lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

#[tokio::test]
async fn a_head_sent_a_byte_at_a_time_is_closed_by_the_header_timeout() {
    let server = start_with(
        weather_script(),
        |b| b,
        |s| {
            s.header_timeout = ms(300);
            s.idle_timeout = Duration::from_secs(60);
        },
    )
    .await;
    let started = Instant::now();
    let mut socket = TcpStream::connect(addr(&server)).await.unwrap();
    // A head that never ends: one byte every 20 ms, headers of `a`s after the request line.
    let head = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    let mut sent = 0usize;
    let closed = tokio::time::timeout(BOUND, async {
        loop {
            let byte = head.get(sent).copied().unwrap_or(b'a');
            if socket.write_all(&[byte]).await.is_err() || is_closed(&mut socket, ms(20)).await {
                return;
            }
            sent += 1;
        }
    })
    .await;
    assert!(closed.is_ok(), "a slow head was kept open for {BOUND:?} ({sent} bytes sent)");
    assert!(started.elapsed() >= ms(300), "closed before its timeout");
    // A byte every ~20 ms did not hold the timer off.
    assert!(sent >= 2, "{sent}");

    // A connection that sends nothing at all is closed by the same timer.
    let mut silent = TcpStream::connect(addr(&server)).await.unwrap();
    assert_eq!(read_to_close(&mut silent).await, "");
    assert_eq!(
        metric(&server, "weft_connections_closed_total{reason=\"header_timeout\"}").await,
        2.0
    );
    // A prompt client is served as ever.
    let response = server.client.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_by_the_idle_timeout() {
    let server = start_with(
        weather_script(),
        |b| b,
        |s| {
            s.header_timeout = Duration::from_secs(60);
            s.idle_timeout = ms(300);
        },
    )
    .await;
    let mut socket = TcpStream::connect(addr(&server)).await.unwrap();
    let asked = Instant::now();
    socket.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut response = Vec::new();
    let mut buf = [0u8; 1024];
    while !String::from_utf8_lossy(&response).contains("{\"status\":\"ok\"}") {
        let n = tokio::time::timeout(BOUND, socket.read(&mut buf)).await.unwrap().unwrap();
        assert!(n > 0, "closed before answering");
        response.extend_from_slice(&buf[..n]);
    }
    assert!(String::from_utf8_lossy(&response).starts_with("HTTP/1.1 200"));
    // Kept alive after the answer, then closed once idle for the idle timeout (the header
    // timeout, a minute, is not what closes it).
    assert_eq!(read_to_close(&mut socket).await, "");
    assert!(asked.elapsed() >= ms(300), "closed before its timeout");
    assert_eq!(
        metric(&server, "weft_connections_closed_total{reason=\"idle_timeout\"}").await,
        1.0
    );
}

#[tokio::test]
async fn a_slow_body_is_cut_with_408() {
    let server = start_with(
        weather_script(),
        |b| b,
        |s| {
            s.header_timeout = Duration::from_secs(60);
            s.body_timeout = ms(500);
        },
    )
    .await;
    let mut socket = TcpStream::connect(addr(&server)).await.unwrap();
    socket
        .write_all(
            b"POST /api/agent/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
              Content-Length: 1000\r\n\r\n{",
        )
        .await
        .unwrap();
    let (mut reader, mut writer) = socket.into_split();
    // The body comes a byte every 50 ms: it would take 50 s.
    let trickle = tokio::spawn(async move {
        for _ in 0..999 {
            tokio::time::sleep(ms(50)).await;
            if writer.write_all(b" ").await.is_err() {
                return;
            }
        }
    });
    let mut received = Vec::new();
    let read = tokio::time::timeout(BOUND, reader.read_to_end(&mut received)).await;
    trickle.abort();
    assert!(read.is_ok(), "a slow body was read for {BOUND:?}");
    let response = String::from_utf8_lossy(&received).to_lowercase();
    assert!(response.starts_with("http/1.1 408"), "{response}");
    assert!(response.contains("connection: close"), "{response}");
    assert!(response.contains("\"code\":\"request_timeout\""), "{response}");
    assert!(response.contains("limits.body_timeout"), "{response}");
    assert_eq!(metric(&server, "weft_http_responses_total{status=\"408\"}").await, 1.0);

    // A body that arrives in time is read as ever.
    let (_, frames) = server
        .execute(json!({"input": user("Weather?"),
                        "context": {"tools": [remote_weather_tool()]}}))
        .await;
    assert_eq!(last_json(&frames)["status"], "awaiting_tool_execution");
}

#[tokio::test]
async fn a_flood_beyond_the_cap_leaves_healthz_answering() {
    // Timers far off: only the cap can make room.
    let server = start_with(
        weather_script(),
        |b| b,
        |s| {
            s.max_connections = 16;
            s.header_timeout = Duration::from_secs(60);
            s.idle_timeout = Duration::from_secs(60);
        },
    )
    .await;
    let mut flood = Vec::new();
    for _ in 0..100 {
        flood.push(TcpStream::connect(addr(&server)).await.unwrap());
    }
    for _ in 0..10 {
        // A client's new connection is the last the flood would close: it is answered.
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let response = tokio::time::timeout(BOUND, client.get(server.url("/healthz")).send())
            .await
            .expect("/healthz did not answer during the flood")
            .unwrap();
        assert_eq!(response.status(), 200);
        for _ in 0..10 {
            flood.push(TcpStream::connect(addr(&server)).await.unwrap());
        }
    }
    // The server holds no more than its cap: every flood connection but the newest few was
    // closed to make room.
    let flooded = flood.len();
    let mut closed = 0;
    for socket in &mut flood {
        if is_closed(socket, ms(200)).await {
            closed += 1;
        }
    }
    assert!(closed >= flooded - 16, "only {closed} of {flooded} flood connections were closed");
    assert!(metric(&server, "weft_connections_open").await <= 16.0);
    assert!(metric(&server, "weft_connections_closed_total{reason=\"evicted\"}").await >= 100.0);
}

#[tokio::test]
async fn at_the_cap_with_every_connection_busy_a_new_one_is_closed_at_once() {
    let server = start_with(
        stall_script(),
        |b| b,
        |s| {
            s.max_connections = 3;
            s.header_timeout = Duration::from_secs(60);
            s.idle_timeout = Duration::from_secs(60);
            // A stream dropped by its client is noticed at the next keep-alive it writes.
            s.keep_alive = ms(100);
        },
    )
    .await;
    // Three streams of runs that never end: three busy connections.
    let mut streams = Vec::new();
    for _ in 0..3 {
        let response = server
            .post("/api/agent/execute", None)
            .json(&json!({"input": user("Hi"), "context": {"tools": []}}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        let id = session_header(&response);
        streams.push((id, response));
    }
    let mut refused = TcpStream::connect(addr(&server)).await.unwrap();
    let _ = refused.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").await;
    assert_eq!(read_to_close(&mut refused).await, "", "refused without an answer");
    // A stream goes away: its slot frees, and a new connection is served.
    drop(streams.pop());
    assert!(metric(&server, "weft_connections_closed_total{reason=\"refused\"}").await >= 1.0);
    let response = server.client.get(server.url("/healthz")).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn a_stream_that_is_sending_outlives_the_idle_timeout() {
    let server = start_with(
        stall_script(),
        |b| b,
        |s| {
            s.header_timeout = ms(300);
            s.idle_timeout = ms(300);
            s.keep_alive = ms(100);
        },
    )
    .await;
    let response = server
        .post("/api/agent/execute", None)
        .json(&json!({"input": user("Hi"), "context": {"tools": []}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = session_header(&response);
    // A Loom NDJSON stream of the same run sends nothing while the model stalls: still busy.
    let quiet = server
        .get(&format!("/api/agent/session/{id}/stream"), None)
        .header("accept", "application/x-ndjson")
        .send()
        .await
        .unwrap();
    assert_eq!(quiet.status(), 200);
    let mut sse = response.bytes_stream();
    let mut ndjson = quiet.bytes_stream();
    let started = Instant::now();
    let mut text = String::new();
    // Ten idle timeouts go by: the SSE stream keeps sending keep-alives, both stay open.
    while started.elapsed() < ms(3000) {
        use futures::StreamExt;
        tokio::select! {
            chunk = sse.next() => {
                let chunk = chunk.expect("the SSE stream was cut").unwrap();
                text.push_str(&String::from_utf8_lossy(&chunk));
            }
            chunk = ndjson.next() => {
                assert!(matches!(chunk, Some(Ok(_))), "the NDJSON stream was cut");
            }
            () = tokio::time::sleep(ms(50)) => {}
        }
    }
    assert!(text.matches(": keep-alive").count() >= 3, "{text}");
    let aborted = server.post(&format!("/api/agent/session/{id}/abort"), None).send().await;
    assert_eq!(aborted.unwrap().status(), 200);
    let mut rest = String::new();
    use futures::StreamExt;
    while let Some(chunk) = tokio::time::timeout(BOUND, sse.next()).await.unwrap() {
        rest.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
    }
    assert!(rest.contains("\"status\":\"aborted\""), "{rest}");
    assert_eq!(
        metric(&server, "weft_connections_closed_total{reason=\"idle_timeout\"}").await,
        0.0
    );
}

#[tokio::test]
async fn http2_with_prior_knowledge_is_not_served() {
    let server = start(weather_script()).await;
    let mut socket = TcpStream::connect(addr(&server)).await.unwrap();
    // The HTTP/2 connection preface, then an empty SETTINGS frame.
    socket.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0").await.unwrap();
    let answer = read_to_close(&mut socket).await;
    // An HTTP/2 server's first frame is its SETTINGS (type 4 at byte 3).
    assert!(answer.as_bytes().get(3) != Some(&4) || answer.starts_with("HTTP/1.1"), "{answer:?}");
}
