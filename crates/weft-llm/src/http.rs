//! HTTP for provider adapters: one shared, injectable client; a streamed SSE call with retries
//! (before the first byte only), timeouts (connect, first byte, idle between chunks), and
//! readable error messages. Credentials travel in headers and never appear in events, errors or
//! logs: no header value is ever formatted into a message.

use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::Value;
use weft_core::StopReason;

use crate::dialect::{DecodeFailure, SseDecoder};
use crate::event::ProviderEvent;
use crate::sse::SseParser;

/// Timeouts of one call.
///
/// The defaults bound what a user waits for a server that accepts the connection and then says
/// nothing: `first_byte` per attempt, times `1 + max_retries` attempts, plus the backoffs between
/// them (at most [`RetryPolicy::max_total_delay`]): with the defaults of both, 3 × 60 s plus a
/// few seconds, about three minutes. A model that is slow *to answer* is not cut short by that:
/// the providers send a streaming response's headers as soon as they accept the request, and a
/// reasoning model's silence comes after them, in the body, where only `idle` applies (never
/// retried). `WEFT_CONNECT_TIMEOUT`, `WEFT_FIRST_BYTE_TIMEOUT` and `WEFT_IDLE_TIMEOUT` change
/// them (see [`config::http_from_env`](crate::config::http_from_env)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing the TCP (and TLS) connection. Default 10 s.
    pub connect: Duration,
    /// From sending the request to the response's status line and headers (connecting
    /// included), *not* to the first byte of the body: that wait is `idle`'s. Providers answer a
    /// streaming request's headers at once, so this only catches servers that accepted the
    /// connection and hang (or a proxy buffering the whole response). Default 60 s; each retry
    /// waits it again.
    pub first_byte: Duration,
    /// Between two chunks of the body, the first one included: how long a model may be silent
    /// mid-answer (a reasoning model thinking without streaming its thoughts). Default 120 s;
    /// an idle timeout ends the call (partial kept), it is not retried.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(60),
            idle: Duration::from_secs(120),
        }
    }
}

/// When and how often a failed request is tried again: only failures before the response body
/// streams (connect errors, first-byte timeouts, 408, 409, 429, 5xx, `overloaded`), with
/// exponential backoff and jitter, honouring `Retry-After`, bounded in count and in total delay.
///
/// The defaults are 2 retries (as the official OpenAI and Anthropic SDKs), backoff from 0.5 s,
/// no single wait over 30 s (a longer `Retry-After` gives up at once rather than wait) and at
/// most 60 s of waiting in all: the sum of the waits between attempts never passes
/// `max_total_delay` (a wait that would pass it gives up instead). `WEFT_MAX_RETRIES` changes the
/// count (see [`config::http_from_env`](crate::config::http_from_env)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Tries after the first.
    pub max_retries: u32,
    /// The first backoff (doubled each time).
    pub base_delay: Duration,
    /// The longest single wait (a longer `Retry-After` ends the retries).
    pub max_delay: Duration,
    /// The most time spent waiting over all retries.
    pub max_total_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 2,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_total_delay: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        Self { max_retries: 0, ..Self::default() }
    }

    /// The wait before retry number `attempt` (0-based): `Retry-After` when the server said,
    /// else `base_delay * 2^attempt` with up to 25% jitter; `None` when it would pass
    /// `max_delay`.
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Option<Duration> {
        let delay = match retry_after {
            Some(d) => d,
            None => {
                let backoff = self.base_delay.saturating_mul(1u32 << attempt.min(16));
                // `backoff / 4` times a fraction in [0, 1): never overflows (`mul_f64` could).
                let jitter = (backoff / 4).mul_f64(fastrand::f64());
                backoff.saturating_add(jitter)
            }
        };
        (delay <= self.max_delay).then_some(delay)
    }
}

/// The HTTP client every adapter shares. Cheap to clone; inject one built as you like with
/// [`HttpClient::from_reqwest`].
#[derive(Debug, Clone)]
pub struct HttpClient {
    client: reqwest::Client,
    timeouts: Timeouts,
    retry: RetryPolicy,
}

impl HttpClient {
    /// A client with these timeouts and retries.
    pub fn new(timeouts: Timeouts, retry: RetryPolicy) -> Result<Self, reqwest::Error> {
        let client = reqwest::Client::builder().connect_timeout(timeouts.connect).build()?;
        Ok(Self { client, timeouts, retry })
    }

    /// Wraps a client built elsewhere (its own connect timeout applies).
    pub fn from_reqwest(client: reqwest::Client, timeouts: Timeouts, retry: RetryPolicy) -> Self {
        Self { client, timeouts, retry }
    }

    /// The same client with other retries.
    pub fn with_retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// The same client with other timeouts (the connect timeout is the built client's).
    pub fn with_timeouts(mut self, timeouts: Timeouts) -> Self {
        self.timeouts = timeouts;
        self
    }

    /// The retry policy.
    pub fn retry(&self) -> RetryPolicy {
        self.retry
    }

    /// The timeouts.
    pub fn timeouts(&self) -> Timeouts {
        self.timeouts
    }

    /// The underlying reqwest client.
    pub fn reqwest(&self) -> &reqwest::Client {
        &self.client
    }
}

/// A request to send: always a `POST` of a JSON body.
#[derive(Clone)]
pub struct HttpRequest {
    /// The full URL.
    pub url: String,
    /// Headers; values may hold credentials and are never printed.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Value,
}

impl std::fmt::Debug for HttpRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values are credentials: only the names are shown.
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("HttpRequest").field("url", &self.url).field("headers", &names).finish()
    }
}

/// Why one attempt failed before any content streamed.
struct Attempt {
    message: String,
    retryable: bool,
    retry_after: Option<Duration>,
}

/// Sends `request` and decodes its SSE body with a decoder from `make_decoder`, as a stream of
/// provider events that always ends with a terminal event. A request that fails before its body
/// streams, or whose decoder reports a retryable failure (an `overloaded` error event) before any
/// content, is tried again with a fresh decoder, as the client's [`RetryPolicy`] allows. See the
/// [module docs](self).
///
/// A successful response must be an event stream: its content type is `text/event-stream`
/// (parameters such as `charset` allowed), or, whatever the content type says (or if there is
/// none), its body starts like one (`data:`, `event:`, `id:`, `retry:` or a `:` comment). Any
/// other body (the JSON of a server that does not stream, the HTML page of a wrong URL) ends the
/// call with an error saying so, with the content type and the start of the body.
pub fn sse_call<D, F>(
    client: HttpClient,
    request: HttpRequest,
    make_decoder: F,
) -> impl Stream<Item = ProviderEvent> + Send + 'static
where
    D: SseDecoder,
    F: Fn() -> D + Send + 'static,
{
    async_stream::stream! {
        let policy = client.retry;
        let mut waited = Duration::ZERO;
        let mut attempt = 0u32;
        'attempts: loop {
            let response = match send(&client, &request).await {
                Ok(response) => response,
                Err(failure) => match next_delay(&policy, attempt, waited, &failure) {
                    Some(delay) => {
                        back_off(delay, &mut waited, &mut attempt).await;
                        continue 'attempts;
                    }
                    None => {
                        let message = after_retries(failure.message, attempt);
                        yield ProviderEvent::Error { reason: StopReason::Error, message };
                        return;
                    }
                },
            };
            let content_type = content_type_of(&response);
            let mut body = response.bytes_stream();
            let idle = client.timeouts.idle;
            // Bytes read before decoding (to tell an event stream from another body), decoded
            // first. Nothing is read ahead when the content type says `text/event-stream`.
            let mut sniffed = match sniff(&mut body, content_type.as_deref(), idle).await {
                Ok(sniffed) => sniffed,
                Err(message) => {
                    yield ProviderEvent::Error { reason: StopReason::Error, message };
                    return;
                }
            };
            let mut decoder = make_decoder();
            let mut content = false;
            let mut parser = SseParser::new();
            let (mut events, mut out) = (Vec::new(), Vec::new());
            loop {
                let pushed = match sniffed.take() {
                    Some(head) => parser.push(&head, &mut events),
                    None => match read_chunk(&mut body, idle).await {
                        Read::Chunk(bytes) => parser.push(bytes.as_ref(), &mut events),
                        Read::End => break,
                        Read::Failed(message) => {
                            yield ProviderEvent::Error { reason: StopReason::Error, message };
                            return;
                        }
                    },
                };
                // The events completed before a line that is not UTF-8 are decoded first: what
                // the partial message keeps must not depend on how the body was cut.
                for event in events.drain(..) {
                    let result = decoder.event(&event, &mut out);
                    if let Err(failure) = &result
                        && let Some(delay) =
                            decoder_retry(&policy, attempt, waited, failure, content, &out)
                    {
                        back_off(delay, &mut waited, &mut attempt).await;
                        continue 'attempts;
                    }
                    for e in out.drain(..) {
                        content |= matches!(e, ProviderEvent::Content(_));
                        let terminal = matches!(e, ProviderEvent::Done { .. } | ProviderEvent::Error { .. });
                        yield e;
                        if terminal {
                            return;
                        }
                    }
                    if let Err(failure) = result {
                        let message = failure_message(failure, content, attempt);
                        yield ProviderEvent::Error { reason: StopReason::Error, message };
                        return;
                    }
                }
                if let Err(e) = pushed {
                    yield ProviderEvent::Error { reason: StopReason::Error, message: e.to_string() };
                    return;
                }
            }
            parser.finish();
            decoder.end(&mut out);
            for e in out.drain(..) {
                yield e;
            }
            return;
        }
    }
}

/// The content type a response says its body has, if any.
fn content_type_of(response: &reqwest::Response) -> Option<String> {
    response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
}

/// The message a decoder's failure ends the call with: after content, its own; before any,
/// with the retries there were.
fn failure_message(failure: DecodeFailure, content: bool, attempt: u32) -> String {
    if content { failure.message } else { after_retries(failure.message, attempt) }
}

/// Waits `delay` before the next attempt, and counts it.
async fn back_off(delay: Duration, waited: &mut Duration, attempt: &mut u32) {
    tokio::time::sleep(delay).await;
    *waited = waited.saturating_add(delay);
    *attempt += 1;
}

/// Tells an event stream from another body by its start, unless `content_type` says it is one
/// (then nothing is read and the answer is `Ok(None)`): `Ok(Some)` with the bytes read when it
/// looks like one, `Err` with the message that ends the call when it does not or cannot be read.
async fn sniff<B, S>(
    body: &mut S,
    content_type: Option<&str>,
    idle: Duration,
) -> Result<Option<Vec<u8>>, String>
where
    B: AsRef<[u8]>,
    S: Stream<Item = Result<B, reqwest::Error>> + Unpin,
{
    if is_event_stream(content_type) {
        return Ok(None);
    }
    let mut head = Vec::new();
    let looks_like_sse = loop {
        if let Some(verdict) = starts_like_sse(&head) {
            break verdict;
        }
        match read_chunk(body, idle).await {
            Read::Chunk(bytes) => head.extend_from_slice(bytes.as_ref()),
            // Too short to tell: without a content type, the decoder says what such a body
            // means for its dialect (an empty body, usually).
            Read::End => break content_type.is_none(),
            Read::Failed(message) => return Err(message),
        }
    };
    if !looks_like_sse {
        // A little more of the body, for the message.
        while head.len() < EXCERPT_BYTES {
            match read_chunk(body, idle).await {
                Read::Chunk(bytes) => head.extend_from_slice(bytes.as_ref()),
                Read::End | Read::Failed(_) => break,
            }
        }
        return Err(not_an_event_stream(content_type, &head));
    }
    Ok(Some(head))
}

/// The delay before trying again after the decoder reported `failure`: only a retryable failure
/// before any content (sent, or among the events in `out`), as `policy` allows.
fn decoder_retry(
    policy: &RetryPolicy,
    attempt: u32,
    waited: Duration,
    failure: &DecodeFailure,
    content: bool,
    out: &[ProviderEvent],
) -> Option<Duration> {
    if !failure.retryable || content || out.iter().any(|e| matches!(e, ProviderEvent::Content(_))) {
        return None;
    }
    let attempt_failure =
        Attempt { message: failure.message.clone(), retryable: true, retry_after: None };
    next_delay(policy, attempt, waited, &attempt_failure)
}

/// How much of a body that is not an event stream is read, to quote its start.
const EXCERPT_BYTES: usize = 1024;

/// How many characters of such a body an error message quotes.
const EXCERPT_CHARS: usize = 200;

/// One read of a response body.
enum Read<B> {
    Chunk(B),
    End,
    /// The idle timeout passed, or the connection broke: the message says which.
    Failed(String),
}

/// The next chunk of `body`, waiting at most `idle`.
async fn read_chunk<B, S>(body: &mut S, idle: Duration) -> Read<B>
where
    S: Stream<Item = Result<B, reqwest::Error>> + Unpin,
{
    match tokio::time::timeout(idle, body.next()).await {
        Err(_) => {
            Read::Failed(format!("the provider sent nothing for {} (idle timeout)", seconds(idle)))
        }
        Ok(None) => Read::End,
        Ok(Some(Err(e))) => Read::Failed(format!(
            "the connection to the provider broke mid-stream: {}",
            without_url(&e)
        )),
        Ok(Some(Ok(bytes))) => Read::Chunk(bytes),
    }
}

/// Whether a `Content-Type` value is `text/event-stream` (any parameters, any case).
fn is_event_stream(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|ct| {
        ct.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("text/event-stream")
    })
}

/// Whether a body starting with `head` is an event stream: `Some(true)` if it starts with an SSE
/// field (`data:`, `event:`, `id:`, `retry:`) or a comment (`:`), after an optional byte-order
/// mark and blank lines; `Some(false)` if it cannot; `None` if more bytes are needed to tell.
fn starts_like_sse(head: &[u8]) -> Option<bool> {
    const FIELDS: [&[u8]; 5] = [b":", b"data:", b"event:", b"id:", b"retry:"];
    let head = head.strip_prefix(b"\xEF\xBB\xBF".as_slice()).unwrap_or(head);
    let start = head.iter().position(|b| !matches!(b, b'\r' | b'\n'))?;
    let head = &head[start..];
    let mut undecided = false;
    for field in FIELDS {
        let n = head.len().min(field.len());
        if head[..n] == field[..n] {
            if n == field.len() {
                return Some(true);
            }
            undecided = true;
        }
    }
    if undecided { None } else { Some(false) }
}

/// The message for a successful response that is not an event stream.
fn not_an_event_stream(content_type: Option<&str>, head: &[u8]) -> String {
    let kind = match content_type.map(str::trim).filter(|ct| !ct.is_empty()) {
        Some(ct) => format!("content type {}", one_line(ct, 100)),
        None => "no content type".to_string(),
    };
    let text = one_line(&String::from_utf8_lossy(head), EXCERPT_CHARS);
    let body = if text.is_empty() { "an empty body".to_string() } else { format!("body: {text}") };
    format!(
        "the provider did not answer with an event stream ({kind}; {body}); check the base URL \
         and that the server supports streaming"
    )
}

/// `text` on one line (runs of whitespace and control characters made one space), at most
/// `max` characters (then `…`).
fn one_line(text: &str, max: usize) -> String {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || c.is_control())
        .filter(|w| !w.is_empty())
        .collect();
    let text = words.join(" ");
    match text.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// `message`, saying how many retries were made before giving up.
fn after_retries(message: String, attempts: u32) -> String {
    match attempts {
        0 => message,
        1 => format!("{message} (after 1 retry)"),
        n => format!("{message} (after {n} retries)"),
    }
}

fn next_delay(
    policy: &RetryPolicy,
    attempt: u32,
    waited: Duration,
    failure: &Attempt,
) -> Option<Duration> {
    if !failure.retryable || attempt >= policy.max_retries {
        return None;
    }
    let delay = policy.delay(attempt, failure.retry_after)?;
    (waited.saturating_add(delay) <= policy.max_total_delay).then_some(delay)
}

/// One attempt: the response if its status is a success, else why not.
async fn send(client: &HttpClient, request: &HttpRequest) -> Result<reqwest::Response, Attempt> {
    let body = serde_json::to_vec(&request.body).unwrap_or_default();
    let mut builder = client
        .client
        .post(&request.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .body(body);
    for (name, value) in &request.headers {
        builder = builder.header(name, value);
    }
    let response = match tokio::time::timeout(client.timeouts.first_byte, builder.send()).await {
        Err(_) => {
            return Err(Attempt {
                message: format!(
                    "the provider did not answer within {} (first-byte timeout)",
                    seconds(client.timeouts.first_byte)
                ),
                retryable: true,
                retry_after: None,
            });
        }
        Ok(Err(e)) => {
            return Err(Attempt {
                message: format!("cannot reach the provider: {}", without_url(&e)),
                retryable: e.is_connect() || e.is_timeout(),
                retry_after: None,
            });
        }
        Ok(Ok(response)) => response,
    };
    let status = response.status();
    if status.is_success() {
        return Ok(response);
    }
    let retry_after = retry_after(response.headers());
    let code = status.as_u16();
    let body = tokio::time::timeout(client.timeouts.idle, response.text())
        .await
        .ok()
        .and_then(Result::ok)
        .unwrap_or_default();
    let detail = error_detail(&body);
    let overloaded = detail.to_ascii_lowercase().contains("overloaded");
    // A 404 or 405 usually means a wrong base URL or model: say which URL was asked.
    let asked = match code {
        404 | 405 => format!(" for POST {}", shown_url(&request.url)),
        _ => String::new(),
    };
    Err(Attempt {
        message: match detail.is_empty() {
            true => format!("the provider answered HTTP {status}{asked}"),
            false => format!("the provider answered HTTP {status}{asked}: {detail}"),
        },
        retryable: matches!(code, 408 | 409 | 429) || code >= 500 || overloaded,
        retry_after,
    })
}

/// `Retry-After` as seconds or an HTTP date (also `retry-after-ms`, which some providers send).
/// A value too large for a `Duration` (or `inf`) is the longest one (so it is not waited for);
/// one that is not a number at all (`NaN`) is ignored.
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers.get("retry-after-ms").and_then(|v| v.to_str().ok())
        && let Ok(ms) = ms.trim().parse::<f64>()
        && !ms.is_nan()
    {
        return Some(secs_f64(ms / 1000.0));
    }
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return (!secs.is_nan()).then(|| secs_f64(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO))
}

/// `secs` (not NaN) as a duration: negative is zero, too large (or infinite) is `Duration::MAX`.
/// Never panics, unlike `Duration::from_secs_f64`.
fn secs_f64(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs.max(0.0)).unwrap_or(Duration::MAX)
}

/// `url` as it may be shown in a message: without its query and fragment (which may hold
/// credentials, such as a `key=` parameter) and without a user or password.
pub fn shown_url(url: &str) -> String {
    let url = url.trim();
    let url = url.split(['?', '#']).next().unwrap_or("");
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let authority_end = rest.find('/').unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{scheme}<credentials>@{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}

/// The readable part of an error body: the `message` of the usual JSON error shapes
/// (`{"error":{"message"}}`, `{"error":"…"}`, `{"message"}`, a list of those), else the text,
/// shortened.
pub fn error_detail(body: &str) -> String {
    fn message(v: &Value) -> Option<String> {
        match v {
            Value::String(s) => Some(s.clone()),
            Value::Array(items) => items.iter().find_map(message),
            Value::Object(map) => {
                if let Some(m) = map.get("message").and_then(Value::as_str) {
                    let kind =
                        map.get("type").or_else(|| map.get("status")).and_then(Value::as_str);
                    return Some(match kind {
                        Some(kind) if !m.contains(kind) => format!("{m} ({kind})"),
                        _ => m.to_string(),
                    });
                }
                map.get("error").and_then(message)
            }
            _ => None,
        }
    }
    let body = body.trim();
    let text = serde_json::from_str::<Value>(body).ok().and_then(|v| message(&v));
    let text = text.unwrap_or_else(|| body.to_string());
    let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match text.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

/// A duration in seconds for a message: `300s`, `1.5s`, `0.2s` (never a misleading `0s`).
fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s >= 10.0 { format!("{s:.0}s") } else { format!("{}s", (s * 100.0).round() / 100.0) }
}

/// A reqwest error's message without its URL (which is safe today, but need not stay so).
fn without_url(e: &reqwest::Error) -> String {
    let mut text = e.to_string();
    if let Some(url) = e.url() {
        text = text.replace(&format!(" for url ({url})"), "").replace(url.as_str(), "<url>");
    }
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_bodies_become_readable_messages() {
        assert_eq!(
            error_detail(r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#),
            "Rate limit reached (rate_limit_error)"
        );
        assert_eq!(
            error_detail(
                r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
            ),
            "Overloaded (overloaded_error)"
        );
        assert_eq!(
            error_detail(
                r#"[{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}]"#
            ),
            "Quota exceeded (RESOURCE_EXHAUSTED)"
        );
        assert_eq!(error_detail("<html>\n Bad   gateway\n</html>"), "<html> Bad gateway </html>");
        assert_eq!(error_detail(&"x".repeat(400)).chars().count(), 301);
    }

    #[test]
    fn backoff_doubles_honours_retry_after_and_has_bounds() {
        let p = RetryPolicy::default();
        let d0 = p.delay(0, None).unwrap();
        assert!(d0 >= Duration::from_millis(500) && d0 <= Duration::from_millis(625), "{d0:?}");
        let d2 = p.delay(2, None).unwrap();
        assert!(d2 >= Duration::from_millis(2000) && d2 <= Duration::from_millis(2500), "{d2:?}");
        assert_eq!(p.delay(0, Some(Duration::from_secs(3))), Some(Duration::from_secs(3)));
        assert_eq!(p.delay(0, Some(Duration::from_secs(31))), None, "beyond max_delay");
        let failure = Attempt { message: String::new(), retryable: true, retry_after: None };
        assert!(next_delay(&p, 3, Duration::ZERO, &failure).is_none(), "count bound");
        let failure = Attempt { retry_after: Some(Duration::from_secs(20)), ..failure };
        assert!(next_delay(&p, 0, Duration::from_secs(50), &failure).is_none(), "total bound");
    }

    #[test]
    fn the_defaults_bound_a_hanging_server_to_a_few_minutes() {
        let (t, r) = (Timeouts::default(), RetryPolicy::default());
        // A server that accepts and never answers: every attempt waits `first_byte`, and the
        // waits between attempts are bounded by `max_total_delay`.
        let worst = t.first_byte * (1 + r.max_retries) + r.max_total_delay;
        assert!(worst <= Duration::from_secs(4 * 60), "{worst:?}");
        // The backoffs alone, without Retry-After, are far below that bound.
        let backoffs: Duration = (0..r.max_retries).map(|a| r.delay(a, None).unwrap()).sum();
        assert!(backoffs <= r.max_total_delay, "{backoffs:?}");
        // Slow models are not cut short: a reasoning model may be silent for two minutes.
        assert!(t.idle >= Duration::from_secs(120));
        assert!(t.connect < t.first_byte);
    }

    #[test]
    fn absurd_policies_and_headers_never_panic() {
        let p = RetryPolicy {
            max_retries: u32::MAX,
            base_delay: Duration::MAX,
            max_delay: Duration::MAX,
            max_total_delay: Duration::MAX,
        };
        for attempt in [0, 1, 31, u32::MAX] {
            assert!(p.delay(attempt, None).is_some());
        }
        let failure = Attempt { message: String::new(), retryable: true, retry_after: None };
        assert!(next_delay(&p, 5, Duration::MAX, &failure).is_some());
        let mut headers = reqwest::header::HeaderMap::new();
        for (name, value, expected) in [
            ("retry-after", "1e30", Some(Duration::MAX)),
            ("retry-after", "inf", Some(Duration::MAX)),
            ("retry-after", "-3", Some(Duration::ZERO)),
            ("retry-after", "NaN", None),
            ("retry-after-ms", "1e300", Some(Duration::MAX)),
            ("retry-after-ms", "1500", Some(Duration::from_millis(1500))),
        ] {
            headers.clear();
            headers.insert(name, reqwest::header::HeaderValue::from_static(value));
            assert_eq!(retry_after(&headers), expected, "{name}: {value}");
        }
    }

    #[test]
    fn event_streams_are_told_by_their_content_type_or_their_start() {
        assert!(is_event_stream(Some("text/event-stream")));
        assert!(is_event_stream(Some("text/event-stream; charset=utf-8")));
        assert!(is_event_stream(Some(" TEXT/Event-Stream ;charset=UTF-8")));
        assert!(!is_event_stream(Some("application/json")));
        assert!(!is_event_stream(Some("text/event-streamx")));
        assert!(!is_event_stream(None));
        for yes in ["data: x", ":", ": ping", "event:", "id: 1", "retry: 10", "\r\n\ndata:"] {
            assert_eq!(starts_like_sse(yes.as_bytes()), Some(true), "{yes:?}");
        }
        assert_eq!(starts_like_sse(b"\xEF\xBB\xBFdata: x"), Some(true));
        for unsure in ["", "\n", "d", "da", "dat", "data", "e", "i", "re", "retry"] {
            assert_eq!(starts_like_sse(unsure.as_bytes()), None, "{unsure:?}");
        }
        for no in ["{", "<html>", "OK", "dato", " data:", "data\n", "ids:"] {
            assert_eq!(starts_like_sse(no.as_bytes()), Some(false), "{no:?}");
        }
    }

    #[test]
    fn urls_in_messages_lose_queries_and_credentials() {
        assert_eq!(shown_url("http://h:1/v1/x?alt=sse&key=K"), "http://h:1/v1/x");
        assert_eq!(shown_url("https://u:p@h/v1#frag"), "https://<credentials>@h/v1");
        assert_eq!(shown_url("u:p@h:8080/v1"), "<credentials>@h:8080/v1");
        assert_eq!(shown_url("http://h/a@b"), "http://h/a@b", "an @ in the path is kept");
        assert_eq!(one_line(" a\n\tb \u{7}c  ", 10), "a b c");
        assert_eq!(one_line("abcdef", 3), "abc…");
    }

    #[test]
    fn requests_never_print_header_values() {
        let r = HttpRequest {
            url: "http://127.0.0.1:1/v1/messages".into(),
            headers: vec![("x-api-key".into(), "sk-secret".into())],
            body: Value::Null,
        };
        let shown = format!("{r:?}");
        assert!(shown.contains("x-api-key") && !shown.contains("sk-secret"), "{shown}");
    }
}
