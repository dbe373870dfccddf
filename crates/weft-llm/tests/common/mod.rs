//! The shared HTTP test kit: a real HTTP/1.1 server on `127.0.0.1` serving scripted responses
//! (SSE bodies in chunks, delays, stalls, cuts) and recording every request, plus small helpers.
//!
//! Use it as `mod common;` from a test file. Every response carries `Connection: close`, so each
//! request arrives on its own connection; connections are served concurrently.

#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use weft_llm::http::{HttpClient, RetryPolicy, Timeouts};
use weft_llm::{ContentDelta, ProviderEvent, ProviderStream, StreamEvent};

/// One piece of a scripted response body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// Bytes, sent (and flushed) as one HTTP chunk of a chunked body.
    Bytes(Vec<u8>),
    /// Wait this long before the next part.
    Delay(Duration),
    /// Send nothing more and hang until the client closes the connection.
    Stall,
}

impl Part {
    /// A `Bytes` part from text.
    pub fn text(s: &str) -> Self {
        Part::Bytes(s.as_bytes().to_vec())
    }
}

/// A scripted response.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MockResponse {
    /// The status code.
    pub status: u16,
    /// Extra headers (besides `Connection`, `Transfer-Encoding`/`Content-Length`).
    pub headers: Vec<(String, String)>,
    /// The body, in parts.
    pub parts: Vec<Part>,
    /// After the parts, close the socket without ending the body (a connection cut).
    pub cut: bool,
    /// Wait this long before sending the status line and headers (a slow first byte).
    pub delay_headers: Option<Duration>,
}

impl MockResponse {
    /// 200, `text/event-stream`, the body in one chunk.
    pub fn sse(body: &str) -> Self {
        Self::sse_parts(vec![Part::text(body)])
    }

    /// 200, `text/event-stream`, the body in these parts (each `Bytes` part its own chunk).
    pub fn sse_parts(parts: Vec<Part>) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            parts,
            ..Self::default()
        }
    }

    /// A status with a body of `application/json` (the body is sent as is, with a
    /// `Content-Length`).
    pub fn status(code: u16, body: &str) -> Self {
        Self {
            status: code,
            headers: vec![("content-type".into(), "application/json".into())],
            parts: vec![Part::text(body)],
            ..Self::default()
        }
    }

    /// 200 with this `content-type` (none if `None`) and the body in one chunk.
    pub fn ok(content_type: Option<&str>, body: &str) -> Self {
        Self {
            status: 200,
            headers: content_type
                .map(|ct| vec![("content-type".to_string(), ct.to_string())])
                .unwrap_or_default(),
            parts: vec![Part::text(body)],
            ..Self::default()
        }
    }

    /// Adds a header (replacing one of the same name, case-insensitively).
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self.headers.push((name.to_string(), value.to_string()));
        self
    }

    /// After the parts, close the socket without the terminating chunk.
    pub fn cut(mut self) -> Self {
        self.cut = true;
        self
    }

    /// Waits `delay` before sending the status line (the response's first byte).
    pub fn delay_headers(mut self, delay: Duration) -> Self {
        self.delay_headers = Some(delay);
        self
    }

    /// Whether the body goes out chunked: success bodies, and any body with delays, stalls or
    /// a cut; other (error) bodies get a `Content-Length`.
    fn chunked(&self) -> bool {
        (200..300).contains(&self.status)
            || self.cut
            || self.parts.iter().any(|p| !matches!(p, Part::Bytes(_)))
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    /// `POST`, `GET` …
    pub method: String,
    /// The path with its query.
    pub path: String,
    /// The headers in order, names lowercased.
    pub headers: Vec<(String, String)>,
    /// The body (de-chunked if it was sent chunked).
    pub body: Vec<u8>,
    /// When the request's head had arrived.
    pub at: Instant,
}

impl RecordedRequest {
    /// The first header of this name (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        let name = name.to_ascii_lowercase();
        self.headers.iter().find(|(n, _)| *n == name).map(|(_, v)| v.as_str())
    }

    /// The body as JSON (panics if it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| {
            panic!("request body is not JSON ({e}): {}", String::from_utf8_lossy(&self.body))
        })
    }

    /// The body as text (lossy).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

#[derive(Default)]
struct State {
    script: Vec<MockResponse>,
    next: usize,
    requests: Vec<RecordedRequest>,
}

/// A scripted HTTP/1.1 server on `127.0.0.1`. Stops accepting when dropped.
pub struct MockServer {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    hangups: Arc<AtomicUsize>,
    accept: tokio::task::JoinHandle<()>,
}

impl MockServer {
    /// Starts serving `responses` in order, one per request; requests beyond the script get a
    /// 500 with body `no scripted response`.
    pub async fn start(responses: Vec<MockResponse>) -> MockServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(State { script: responses, ..State::default() }));
        let hangups = Arc::new(AtomicUsize::new(0));
        let accept = tokio::spawn({
            let (state, hangups) = (state.clone(), hangups.clone());
            async move {
                while let Ok((socket, _)) = listener.accept().await {
                    tokio::spawn(serve(socket, state.clone(), hangups.clone()));
                }
            }
        });
        MockServer { addr, state, hangups, accept }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The address listened on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request received so far, in order of arrival.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.state.lock().unwrap().requests.clone()
    }

    /// How many `Stall`s ended because the client closed the connection.
    pub fn hangups(&self) -> usize {
        self.hangups.load(Ordering::SeqCst)
    }

    /// Waits (up to `within`) until at least `n` stalls saw the client close the connection.
    pub async fn wait_hangups(&self, n: usize, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        while self.hangups() < n {
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// Serves one connection: one request, one response, close.
async fn serve(mut socket: TcpStream, state: Arc<Mutex<State>>, hangups: Arc<AtomicUsize>) {
    let _ = socket.set_nodelay(true);
    let Some(request) = read_request(&mut socket).await else { return };
    let response = {
        let mut state = state.lock().unwrap();
        state.requests.push(request);
        let i = state.next;
        state.next += 1;
        state.script.get(i).cloned()
    };
    let response = response.unwrap_or_else(|| {
        MockResponse::status(500, "no scripted response").with_header("content-type", "text/plain")
    });
    if write_response(&mut socket, &response, &hangups).await.is_ok() && !response.cut {
        let _ = socket.shutdown().await;
    }
}

/// Reads more bytes into `buf`; `false` at end of stream or on an error.
async fn read_more(socket: &mut TcpStream, buf: &mut Vec<u8>) -> bool {
    let mut chunk = [0u8; 8192];
    match socket.read(&mut chunk).await {
        Ok(0) | Err(_) => false,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            true
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Reads one request (head, then a `Content-Length` or chunked body); `None` if the client went
/// away first or sent garbage.
async fn read_request(socket: &mut TcpStream) -> Option<RecordedRequest> {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i;
        }
        if buf.len() > 1 << 20 || !read_more(socket, &mut buf).await {
            return None;
        }
    };
    let at = Instant::now();
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut rest = buf.split_off(head_end + 4);
    let mut lines = head.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_string();
    let path = request_line.next()?.to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let get = |name: &str| headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
    let body =
        if get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
            let mut body = Vec::new();
            loop {
                let line_end = loop {
                    if let Some(i) = find(&rest, b"\r\n") {
                        break i;
                    }
                    if !read_more(socket, &mut rest).await {
                        return None;
                    }
                };
                let size_text = String::from_utf8_lossy(&rest[..line_end]).into_owned();
                let size_text = size_text.split(';').next().unwrap_or("").trim().to_string();
                let size = usize::from_str_radix(&size_text, 16).ok()?;
                rest.drain(..line_end + 2);
                while rest.len() < size + 2 {
                    if !read_more(socket, &mut rest).await {
                        return None;
                    }
                }
                if size == 0 {
                    break;
                }
                body.extend_from_slice(&rest[..size]);
                rest.drain(..size + 2);
            }
            body
        } else {
            let len = get("content-length").and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
            while rest.len() < len {
                if !read_more(socket, &mut rest).await {
                    return None;
                }
            }
            rest.truncate(len);
            rest
        };
    Some(RecordedRequest { method, path, headers, body, at })
}

fn reason_phrase(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        409 => "Conflict",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// Writes the response; `Err` when the client went away (or a stall ended).
async fn write_response(
    socket: &mut TcpStream,
    response: &MockResponse,
    hangups: &AtomicUsize,
) -> std::io::Result<()> {
    if let Some(delay) = response.delay_headers {
        tokio::time::sleep(delay).await;
    }
    let chunked = response.chunked();
    let mut head = format!("HTTP/1.1 {} {}\r\n", response.status, reason_phrase(response.status));
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    if chunked {
        head.push_str("transfer-encoding: chunked\r\n");
    } else {
        let len: usize = response
            .parts
            .iter()
            .map(|p| match p {
                Part::Bytes(b) => b.len(),
                _ => 0,
            })
            .sum();
        head.push_str(&format!("content-length: {len}\r\n"));
    }
    head.push_str("connection: close\r\n\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.flush().await?;
    for part in &response.parts {
        match part {
            Part::Bytes(bytes) if bytes.is_empty() => {}
            Part::Bytes(bytes) if chunked => {
                let mut chunk = format!("{:x}\r\n", bytes.len()).into_bytes();
                chunk.extend_from_slice(bytes);
                chunk.extend_from_slice(b"\r\n");
                socket.write_all(&chunk).await?;
                socket.flush().await?;
            }
            Part::Bytes(bytes) => {
                socket.write_all(bytes).await?;
                socket.flush().await?;
            }
            Part::Delay(delay) => tokio::time::sleep(*delay).await,
            Part::Stall => {
                // Hang until the client closes its end (reads return 0 or fail).
                let mut sink = [0u8; 1024];
                loop {
                    match socket.read(&mut sink).await {
                        Ok(0) | Err(_) => break,
                        Ok(_) => {}
                    }
                }
                hangups.fetch_add(1, Ordering::SeqCst);
                return Err(std::io::ErrorKind::ConnectionAborted.into());
            }
        }
    }
    if chunked && !response.cut {
        socket.write_all(b"0\r\n\r\n").await?;
        socket.flush().await?;
    }
    Ok(())
}

/// A fixture file's exact text, from `tests/fixtures/<path>`.
pub fn fixture(path: &str) -> String {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&full).unwrap_or_else(|e| panic!("cannot read fixture {full}: {e}"))
}

/// A fixture file's exact bytes, from `tests/fixtures/<path>`.
pub fn fixture_bytes(path: &str) -> Vec<u8> {
    let full = format!("{}/tests/fixtures/{path}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&full).unwrap_or_else(|e| panic!("cannot read fixture {full}: {e}"))
}

/// Splits `body` into `Bytes` parts of at most `size` bytes (to exercise chunk boundaries).
pub fn split_parts(body: &[u8], size: usize) -> Vec<Part> {
    body.chunks(size.max(1)).map(|c| Part::Bytes(c.to_vec())).collect()
}

/// Fast retries for tests: 3 retries, 10 ms base delay.
pub fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(10),
        max_delay: Duration::from_secs(5),
        max_total_delay: Duration::from_secs(10),
    }
}

/// Short timeouts for tests: connect 2 s, first byte 5 s, idle 5 s.
pub fn test_timeouts() -> Timeouts {
    Timeouts {
        connect: Duration::from_secs(2),
        first_byte: Duration::from_secs(5),
        idle: Duration::from_secs(5),
    }
}

/// A client with [`test_timeouts`] and [`fast_retry`].
pub fn test_client() -> HttpClient {
    HttpClient::new(test_timeouts(), fast_retry()).unwrap()
}

/// A client with these timeouts and [`fast_retry`].
pub fn client_with(timeouts: Timeouts) -> HttpClient {
    HttpClient::new(timeouts, fast_retry()).unwrap()
}

/// Every event of a provider-event stream (e.g. `sse_call`'s), with a 10 s guard.
pub async fn collect_events(
    stream: impl futures::Stream<Item = ProviderEvent> + Send,
) -> Vec<ProviderEvent> {
    tokio::time::timeout(Duration::from_secs(10), stream.collect::<Vec<_>>())
        .await
        .expect("the event stream did not end within 10 s")
}

/// One call through `provider`: its deltas and its final message (`Ok` for `Done`, `Err` for
/// `Error`), asserting `key` appears in none of them.
pub async fn run_call(
    provider: &dyn weft_llm::Provider,
    request: weft_llm::ModelRequest,
    key: &str,
) -> (Vec<ContentDelta>, Result<weft_core::AssistantMessage, weft_core::AssistantMessage>) {
    let stream = provider.stream(request, weft_llm::CancellationToken::new());
    let (deltas, terminal) = collect_stream(stream).await;
    let shown = format!("{deltas:?} {terminal:?}");
    assert!(!shown.contains(key), "the API key leaked: {shown}");
    let message = match terminal {
        StreamEvent::Done(m) => Ok(*m),
        StreamEvent::Error(m) => Err(*m),
        StreamEvent::Content(_) => unreachable!("collect_stream returns the terminal event"),
    };
    (deltas, message)
}

/// A `ProviderStream`'s content deltas and its terminal event (asserting nothing follows it),
/// with a 10 s guard.
pub async fn collect_stream(mut stream: ProviderStream) -> (Vec<ContentDelta>, StreamEvent) {
    let run = async {
        let mut deltas = Vec::new();
        while let Some(event) = stream.next().await {
            match event {
                StreamEvent::Content(d) => deltas.push(d),
                terminal => {
                    assert!(stream.next().await.is_none(), "nothing after the terminal event");
                    return (deltas, terminal);
                }
            }
        }
        panic!("the stream ended without a terminal event");
    };
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the stream did not end within 10 s")
}

/// The message of the terminal `Error` event of `events` (panics if the last is not an error).
pub fn error_message(events: &[ProviderEvent]) -> String {
    match events.last() {
        Some(ProviderEvent::Error { message, .. }) => message.clone(),
        other => panic!("expected a terminal Error, got {other:?} (all: {events:?})"),
    }
}

/// A port on 127.0.0.1 nobody listens on (bound, then released).
pub fn refused_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
