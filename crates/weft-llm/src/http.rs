//! HTTP for provider adapters: one shared, injectable client; a streamed SSE call with retries
//! (before the first byte only), timeouts (connect, first byte, idle between chunks), and
//! readable error messages. Credentials travel in headers and never appear in events, errors or
//! logs: no header value is ever formatted into a message.

use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::Value;
use weft_core::StopReason;

use crate::dialect::SseDecoder;
use crate::provider::ProviderEvent;
use crate::sse::SseParser;

/// Timeouts of one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeouts {
    /// Establishing the connection.
    pub connect: Duration,
    /// From sending the request to the response's first byte (a reasoning model may think long).
    pub first_byte: Duration,
    /// Between two chunks of the body.
    pub idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            first_byte: Duration::from_secs(300),
            idle: Duration::from_secs(120),
        }
    }
}

/// When and how often a failed request is tried again: only failures before the response body
/// streams (connect errors, 408, 429, 5xx, `overloaded`), with exponential backoff and jitter,
/// honouring `Retry-After`, bounded in count and in total delay.
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
            max_retries: 3,
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
                let jitter = backoff.mul_f64(fastrand::f64() * 0.25);
                backoff + jitter
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
                        tokio::time::sleep(delay).await;
                        waited += delay;
                        attempt += 1;
                        continue 'attempts;
                    }
                    None => {
                        let message = after_retries(failure.message, attempt);
                        yield ProviderEvent::Error { reason: StopReason::Error, message };
                        return;
                    }
                },
            };
            let mut decoder = make_decoder();
            let mut content = false;
            let mut body = response.bytes_stream();
            let mut parser = SseParser::new();
            let (mut events, mut out) = (Vec::new(), Vec::new());
            loop {
                let chunk = match tokio::time::timeout(client.timeouts.idle, body.next()).await {
                    Err(_) => {
                        let secs = seconds(client.timeouts.idle);
                        yield ProviderEvent::Error {
                            reason: StopReason::Error,
                            message: format!("the provider sent nothing for {secs} (idle timeout)"),
                        };
                        return;
                    }
                    Ok(None) => break,
                    Ok(Some(Err(e))) => {
                        yield ProviderEvent::Error {
                            reason: StopReason::Error,
                            message: format!("the connection to the provider broke mid-stream: {}", without_url(&e)),
                        };
                        return;
                    }
                    Ok(Some(Ok(bytes))) => bytes,
                };
                if let Err(e) = parser.push(&chunk, &mut events) {
                    yield ProviderEvent::Error { reason: StopReason::Error, message: e.to_string() };
                    return;
                }
                for event in events.drain(..) {
                    let result = decoder.event(&event, &mut out);
                    if let Err(failure) = &result
                        && failure.retryable
                        && !content
                        && !out.iter().any(|e| matches!(e, ProviderEvent::Content(_)))
                    {
                        let attempt_failure = Attempt {
                            message: failure.message.clone(),
                            retryable: true,
                            retry_after: None,
                        };
                        if let Some(delay) = next_delay(&policy, attempt, waited, &attempt_failure) {
                            tokio::time::sleep(delay).await;
                            waited += delay;
                            attempt += 1;
                            continue 'attempts;
                        }
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
                        let message = if content {
                            failure.message
                        } else {
                            after_retries(failure.message, attempt)
                        };
                        yield ProviderEvent::Error { reason: StopReason::Error, message };
                        return;
                    }
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
    (waited + delay <= policy.max_total_delay).then_some(delay)
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
    Err(Attempt {
        message: match detail.is_empty() {
            true => format!("the provider answered HTTP {status}"),
            false => format!("the provider answered HTTP {status}: {detail}"),
        },
        retryable: matches!(code, 408 | 409 | 429) || code >= 500 || overloaded,
        retry_after,
    })
}

/// `Retry-After` as seconds or an HTTP date (also `retry-after-ms`, which some providers send).
fn retry_after(headers: &reqwest::header::HeaderMap) -> Option<Duration> {
    if let Some(ms) = headers.get("retry-after-ms").and_then(|v| v.to_str().ok())
        && let Ok(ms) = ms.trim().parse::<f64>()
    {
        return Some(Duration::from_secs_f64(ms.max(0.0) / 1000.0));
    }
    let value = headers.get(reqwest::header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<f64>() {
        return Some(Duration::from_secs_f64(secs.max(0.0)));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(std::time::SystemTime::now()).unwrap_or(Duration::ZERO))
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
