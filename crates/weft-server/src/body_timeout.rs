//! The body timeout: a request body must arrive whole within [`Settings::body_timeout`] of the
//! request's start, or the answer is `408 request_timeout` and the connection closes. A layer of
//! the router; the connection's own timers are `conn`'s.
//!
//! [`Settings::body_timeout`]: crate::Settings::body_timeout

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use tokio::time::Instant;

use crate::AppState;
use crate::conn::nonzero;
use crate::error::ApiError;

/// A request body that must arrive whole before a deadline; past it, reading fails and the
/// response is replaced by a 408 ([`body_timeout`]).
struct TimedBody {
    body: Body,
    deadline: Instant,
    sleep: Option<Pin<Box<tokio::time::Sleep>>>,
    expired: Arc<AtomicBool>,
}

/// The error a request body gives past its deadline.
#[derive(Debug, thiserror::Error)]
#[error("the request body did not arrive in time")]
struct BodyTimedOut;

impl http_body::Body for TimedBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let this = &mut *self;
        if let Poll::Ready(frame) = Pin::new(&mut this.body).poll_frame(cx) {
            return Poll::Ready(frame);
        }
        // Waiting for the client: the deadline counts (its timer only made when needed).
        let deadline = this.deadline;
        let sleep = this.sleep.get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => {
                this.expired.store(true, Ordering::Release);
                Poll::Ready(Some(Err(axum::Error::new(BodyTimedOut))))
            }
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

/// Middleware: a request body must arrive within [`Settings::body_timeout`] of the request's
/// start. When it did not, whatever the handler answered (it could not read its body) becomes
/// `408 request_timeout` with `Connection: close`.
pub(crate) async fn body_timeout(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(limit) = nonzero(state.settings.body_timeout) else {
        return next.run(request).await;
    };
    let expired = Arc::new(AtomicBool::new(false));
    let deadline = Instant::now() + limit;
    let flag = Arc::clone(&expired);
    let request =
        request.map(|body| Body::new(TimedBody { body, deadline, sleep: None, expired: flag }));
    let response = next.run(request).await;
    if !expired.load(Ordering::Acquire) {
        return response;
    }
    let mut response = ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "request_timeout",
        format!(
            "the request body did not arrive within {} (limits.body_timeout)",
            humantime::format_duration(limit)
        ),
    )
    .into_response();
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}
