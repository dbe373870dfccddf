//! Connection limits over raw loopback TCP: a slow head, an idle keep-alive connection, a slow
//! body and a client that takes no data are closed by their timers; a flood beyond the cap (idle
//! connections, or pipelined requests never read) leaves `/healthz` answering; a stream that is
//! sending, or whose client reads slowly, is never cut; HTTP/2 is not served.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use weft_llm::faux::{FauxScript, FauxTurn};

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

/// A connection that pipelines `requests` requests for `path` at once and never reads (its
/// receive buffer is small). Refused (closed at once) is fine.
async fn non_reader(server: &TestServer, path: &str, requests: usize) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr(server).parse().unwrap()).await.unwrap();
    let heads = format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").repeat(requests);
    let _ = stream.write_all(heads.as_bytes()).await;
    stream
}

/// A server whose one session has a long history (5,500 events, about 360 KB as SSE), and the
/// path that replays it.
async fn long_history(settings: impl FnOnce(&mut weft_server::Settings)) -> (TestServer, String) {
    let text = "All work and no play. ".repeat(250);
    let script = FauxScript::new([FauxTurn::text(text).with_chunk_size(1)]);
    let server = start_with(script, |b| b, settings).await;
    let (id, frames) = server.execute(json!({"input": user("Go"), "context": {"tools": []}})).await;
    assert_eq!(last_json(&frames)["status"], "completed");
    (server, format!("/api/agent/session/{id}/stream"))
}

/// A server whose one session's run has streamed 5,500 events (about 360 KB as SSE) and then
/// waits for ever, and the path of its stream: a response that never ends.
async fn endless_stream(settings: impl FnOnce(&mut weft_server::Settings)) -> (TestServer, String) {
    use futures::StreamExt;
    let text = "All work and no play. ".repeat(250);
    let script = FauxScript::new([FauxTurn::text(text).with_chunk_size(1).stalled()]);
    let server = start_with(script, |b| b, settings).await;
    let response = server
        .post("/api/agent/execute", None)
        .json(&json!({"input": user("Go"), "context": {"tools": []}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = session_header(&response);
    // Read until the run has streamed its text, then let this stream go.
    let (mut seen, mut body) = (0, response.bytes_stream());
    while seen < 5_000 {
        let chunk = tokio::time::timeout(BOUND, body.next()).await.unwrap().unwrap().unwrap();
        seen += String::from_utf8_lossy(&chunk).matches("text_delta").count();
    }
    drop(body);
    let started = Instant::now();
    while metric_inside(&server, "weft_connections_open").await > 0.0 {
        assert!(started.elapsed() < BOUND, "the first stream's connection stayed open");
        tokio::time::sleep(ms(20)).await;
    }
    (server, format!("/api/agent/session/{id}/stream"))
}

/// A metric's value, read from the server's router without a connection (so even with every
/// connection taken), 0 when absent.
async fn metric_inside(server: &TestServer, sample: &str) -> f64 {
    use tower::ServiceExt;
    let request = axum::http::Request::get("/metrics").body(axum::body::Body::empty()).unwrap();
    let response = server.app.router().oneshot(request).await.unwrap();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX).await.unwrap();
    String::from_utf8_lossy(&body)
        .lines()
        .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// Waits until the metric `sample` is at least `least` ([`metric_inside`]); its last value,
/// after [`BOUND`] at most.
async fn await_metric(server: &TestServer, sample: &str, least: f64) -> f64 {
    let started = Instant::now();
    loop {
        let value = metric_inside(server, sample).await;
        if value >= least || started.elapsed() > BOUND {
            return value;
        }
        tokio::time::sleep(ms(20)).await;
    }
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

#[tokio::test]
async fn a_flood_of_streams_never_read_leaves_healthz_answering() {
    // Timers far off: only the cap can make room. Each flood connection asks for a stream that
    // never ends (of a run that waits) and reads nothing: it has a request in flight for ever,
    // and the server's writes to it stall (the stream's 360 KB are more than the socket
    // buffers take). No API key is needed on a server without keys, and any key does on one
    // with keys.
    let cap = 8;
    let (server, stream) = endless_stream(|s| {
        s.max_connections = cap;
        s.header_timeout = Duration::from_secs(60);
        s.idle_timeout = Duration::from_secs(60);
        s.write_timeout = Duration::from_secs(60);
    })
    .await;
    let mut flood = Vec::new();
    for round in 0..4 {
        for _ in 0..cap {
            flood.push(non_reader(&server, &stream, 1).await);
        }
        // Every slot holds a flood connection whose writes are stalled.
        let stalled = await_metric(&server, "weft_connections_stalled", cap as f64).await;
        // The gauge counts open connections only, not those already replaced and closing.
        assert_eq!(stalled, cap as f64, "round {round}");
        assert_eq!(metric_inside(&server, "weft_connections_open").await, cap as f64);
        // A client's new connection takes the place of one of them and is answered.
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let response = tokio::time::timeout(BOUND, client.get(server.url("/healthz")).send())
            .await
            .expect("/healthz did not answer during the flood");
        assert!(
            response.as_ref().is_ok_and(|r| r.status() == 200),
            "round {round}: /healthz refused ({stalled} connections stalled): {response:?}"
        );
    }
    let evicted = metric_inside(&server, "weft_connections_closed_total{reason=\"evicted\"}");
    assert!(evicted.await >= (3 * cap) as f64);
}

#[tokio::test]
async fn a_response_whose_client_takes_no_data_is_closed_by_the_write_timeout() {
    let (server, replay) = long_history(|s| {
        s.header_timeout = Duration::from_secs(60);
        s.idle_timeout = Duration::from_secs(60);
        s.write_timeout = ms(300);
    })
    .await;
    let started = Instant::now();
    // A stream stalled mid-body (a request in flight), and pipelined small files stalled
    // between responses (hyper reads the next head only once the last response is flushed).
    let mut streams = non_reader(&server, &replay, 20).await;
    let mut files = non_reader(&server, "/playground/playground.js", 400).await;
    let sample = "weft_connections_closed_total{reason=\"write_timeout\"}";
    assert_eq!(
        await_metric(&server, sample, 2.0).await,
        2.0,
        "connections whose client took no data were kept open"
    );
    assert!(started.elapsed() >= ms(300), "closed before its timeout");
    // What the socket buffers held, then the end.
    read_to_close(&mut streams).await;
    read_to_close(&mut files).await;
    assert_eq!(metric(&server, "weft_connections_stalled").await, 0.0);
}

#[tokio::test]
async fn a_stream_whose_client_reads_slowly_outlives_the_write_timeout() {
    // A 550 KB answer (and the message end that repeats it): many times what the socket
    // buffers hold, so the server waits on the client again and again.
    let text = "All work and no play. ".repeat(25_000);
    let script = FauxScript::new([FauxTurn::text(text).with_chunk_size(4096)]);
    let server = start_with(
        script,
        |b| b,
        |s| {
            s.write_timeout = Duration::from_secs(1);
        },
    )
    .await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(addr(&server).parse().unwrap()).await.unwrap();
    let body = json!({"input": user("Go"), "context": {"tools": []}}).to_string();
    let request = format!(
        "POST /api/agent/execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    // Meanwhile: the server waits on this client (its writes stall) at some point.
    let watcher = {
        let (base, client) = (server.base.clone(), server.client.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            while started.elapsed() < BOUND {
                if let Ok(response) = client.get(format!("{base}/metrics")).send().await {
                    let text = response.text().await.unwrap_or_default();
                    let stalled: f64 = text
                        .lines()
                        .find_map(|l| l.strip_prefix("weft_connections_stalled ")?.parse().ok())
                        .unwrap_or(0.0);
                    if stalled >= 1.0 {
                        return true;
                    }
                }
                tokio::time::sleep(ms(20)).await;
            }
            false
        })
    };
    // 32 KB every 50 ms: slower than the server writes, never silent for long.
    let started = Instant::now();
    let mut received = Vec::new();
    let mut buf = vec![0u8; 32 * 1024];
    let read = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let mut taken = 0;
            while taken < buf.len() {
                match stream.read(&mut buf[taken..]).await {
                    Ok(0) | Err(_) => {
                        received.extend_from_slice(&buf[..taken]);
                        return;
                    }
                    Ok(n) => taken += n,
                }
            }
            received.extend_from_slice(&buf[..taken]);
            tokio::time::sleep(ms(50)).await;
        }
    })
    .await;
    assert!(read.is_ok(), "the stream did not end");
    let took = started.elapsed();
    let response = String::from_utf8_lossy(&received).into_owned();
    let tail = &response[response.len().saturating_sub(600)..];
    assert!(
        response.contains("\"status\":\"completed\""),
        "cut after {} bytes, {took:?}: {tail}\n{}",
        received.len(),
        server.client.get(server.url("/metrics")).send().await.unwrap().text().await.unwrap()
    );
    assert!(took > Duration::from_secs(2), "read in {took:?}: not slowly enough to test anything");
    assert!(watcher.await.unwrap(), "the server never waited on the client");
    assert_eq!(
        metric(&server, "weft_connections_closed_total{reason=\"write_timeout\"}").await,
        0.0
    );
}
