//! # weft-server
//!
//! The agent plan's HTTP API on Weft's durable runtime: the server keeps sessions (in the
//! agent's store), runs agents, and streams every run's events to any number of clients, who
//! send inputs, watch events, run their own tools when asked, and reconnect after a dropped
//! connection without losing an event.
//!
//! | method & path | what |
//! | --- | --- |
//! | `POST /api/agent/execute` | start or resume a run ([`ExecuteRequest`]); streams its events; `X-Session-Id`, `X-Run-Id` |
//! | `GET /api/agent/session/{id}` | the session: messages, status, pending calls, usage, cost ([`SessionView`]) |
//! | `GET /api/agent/session/{id}/stream` | attach to the live or last run; `Last-Event-ID` or `?after=` resumes after that event |
//! | `POST /api/agent/session/{id}/abort` | abort the run (409: nothing to abort) |
//! | `GET /api/agent/sessions`, `DELETE /api/agent/session/{id}` | list / delete the caller's sessions |
//! | `GET /api/agent/models` | the providers a new session may pick, each with its default model and the registry's models ([`ModelList`]) |
//! | `GET /api/agent/ws` | the same over WebSocket text frames (see the `ws` module source) |
//! | `POST /api/ag-ui` | AG-UI 1.0: `RunAgentInput` in, AG-UI events out (see the `agui` module source) |
//! | `POST /api/chat`, `GET /api/chat/{id}/stream` | the Vercel AI SDK's `useChat` (6 and 7): its request in, the UI message stream out; the GET resumes the running stream (204: none) |
//! | `GET /healthz`, `GET /readyz`, `GET /metrics`, `GET /openapi.json` | liveness, readiness (the store takes a write), Prometheus metrics (with keys: a key needed, unless [`Settings::metrics_public`]), the API description |
//! | `GET /`, `GET /playground/{file}` | the web playground (`clients/typescript`, embedded) |
//!
//! Streams are in the format `?protocol=native|loom|loom-export|aceai|ag-ui|vercel` asks for,
//! else by `Accept` (`application/x-ndjson`: Loom NDJSON; otherwise native SSE). In SSE every
//! event's last frame carries `id:` = the event's sequence number in the session, the cursor a
//! client resumes from. Errors are `{"error": {"code", "message"}}`.
//!
//! Runs belong to the server: a client that goes away does not stop its run (unless it asked
//! for `onDisconnect: "cancel"`). With API keys configured ([`Settings::api_keys`]), each key is
//! an owner who sees only their sessions; without keys, [`Server::serve`] refuses any address
//! but loopback.
//!
//! ```no_run
//! use weft_agent::Agent;
//! use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
//! use weft_server::{Server, Settings};
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let provider = FauxProvider::new(FauxScript::new([FauxTurn::text("Hi!")]));
//! let agent = Agent::builder(provider).store(weft_store::connect("memory").await?).build()?;
//! let server = Server::new(agent, Settings::new("faux"));
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! server.serve(listener, async { let _ = tokio::signal::ctrl_c().await; }).await?;
//! # Ok(()) }
//! ```

mod agui;
mod api;
mod auth;
mod body_timeout;
mod chat;
mod config;
mod conn;
mod error;
mod execute;
mod frontends;
#[doc(hidden)]
pub mod fuzzing;
mod ids;
mod metrics;
mod models;
mod openapi;
mod playground;
mod routes;
mod shards;
mod stream;
mod ws;
mod ws_limits;

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, Weak};

use axum::Router;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderName, HeaderValue, Method};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::{get, post};
use tokio_util::sync::CancellationToken;
use tower_http::cors::{AllowOrigin, CorsLayer};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use weft_agent::Agent;

pub use api::{
    AbortResponse, ExecuteContext, ExecuteOptions, ExecuteRequest, ForkRequest, Health, Multitask,
    OnDisconnect, SessionList, SessionView,
};
pub use config::{
    ConfigError, ConnectionLimits, DEFAULT_ADDR, DEFAULT_BODY_BYTES, DEFAULT_BODY_TIMEOUT,
    DEFAULT_BURST, DEFAULT_FAILED_KEYS_PER_MINUTE, DEFAULT_HEADER_TIMEOUT, DEFAULT_IDLE_TIMEOUT,
    DEFAULT_MAX_CONNECTIONS, DEFAULT_REQUESTS_PER_MINUTE, DEFAULT_SHUTDOWN_GRACE,
    DEFAULT_WRITE_TIMEOUT, DEFAULT_WS_SEND_QUEUE, DEFAULT_WS_SEND_TIMEOUT,
    DEFAULT_WS_SOCKETS_PER_KEY, DEFAULT_WS_STREAMS_PER_KEY, DEFAULT_WS_STREAMS_PER_SOCKET,
    ProviderEntry, ServeConfig, Settings, find_file, parse_api_keys, parse_duration,
    parse_providers,
};
pub use conn::FD_RESERVE;
pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use models::{ModelEntry, ModelList, ProviderModels};

/// What every handler shares.
pub(crate) struct AppState {
    pub(crate) agent: Agent,
    pub(crate) settings: Settings,
    pub(crate) metrics: metrics::Metrics,
    pub(crate) limiter: auth::RateLimiter,
    /// Wrong API keys per client address.
    pub(crate) failed_keys: auth::RateLimiter,
    /// Cancelled when the server shuts down: streams end.
    pub(crate) closing: CancellationToken,
    /// Per session: how far its event log was scanned, and its `session_end` seqs.
    pub(crate) ends: Mutex<HashMap<String, (u64, Vec<u64>)>>,
    pub(crate) runs: execute::Runs,
    /// Per session: the queue enqueued inputs wait in.
    queues: Mutex<HashMap<String, Weak<tokio::sync::Mutex<()>>>>,
    /// Notified every [`Settings::keep_alive`] by one task: the streams' keep-alive clock.
    keep_alive: std::sync::OnceLock<Arc<tokio::sync::Notify>>,
    /// WebSocket streams open per API key.
    pub(crate) ws_streams: ws_limits::PerKey,
    /// WebSockets open per API key.
    pub(crate) ws_sockets: ws_limits::PerKey,
}

impl AppState {
    /// The queue of enqueued inputs of a session.
    pub(crate) fn queue(&self, session_id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut queues = self.queues.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(queue) = queues.get(session_id).and_then(Weak::upgrade) {
            return queue;
        }
        queues.retain(|_, q| q.strong_count() > 0);
        let queue = Arc::new(tokio::sync::Mutex::new(()));
        queues.insert(session_id.to_string(), Arc::downgrade(&queue));
        queue
    }

    /// The keep-alive clock of the streams, started by the first stream: one task and one timer
    /// for the whole server instead of one per stream. It ticks once more when the server
    /// closes (streams then end), and stops then or once the server is dropped.
    pub(crate) fn keep_alive(&self) -> Arc<tokio::sync::Notify> {
        let every = self.settings.keep_alive;
        let closing = self.closing.clone();
        Arc::clone(self.keep_alive.get_or_init(|| {
            let ticks = Arc::new(tokio::sync::Notify::new());
            let weak = Arc::downgrade(&ticks);
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(every);
                interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                interval.tick().await;
                loop {
                    let closed = tokio::select! {
                        _ = interval.tick() => false,
                        () = closing.cancelled() => true,
                    };
                    let Some(ticks) = weak.upgrade() else { return };
                    ticks.notify_waiters();
                    if closed {
                        return;
                    }
                }
            });
            ticks
        }))
    }

    /// Forgets what was kept about a deleted session.
    pub(crate) fn forget(&self, session_id: &str) {
        self.ends.lock().unwrap_or_else(|e| e.into_inner()).remove(session_id);
    }
}

/// Why [`Server::serve`] stopped.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// No API keys are configured and the address is not loopback.
    #[error(
        "refusing to listen on {0} without API keys: anyone who can reach it could use the \
         server; configure API keys (WEFT_API_KEYS=key=owner or [api_keys] in weft.toml) or \
         listen on 127.0.0.1"
    )]
    Unprotected(SocketAddr),
    /// The listener failed.
    #[error("the server failed: {0}")]
    Io(#[from] std::io::Error),
}

/// The HTTP server: an agent (with its store), settings, and the state its handlers share.
#[derive(Clone)]
pub struct Server {
    state: Arc<AppState>,
}

impl Server {
    /// A server running sessions on `agent`. The agent should have a store: sessions then
    /// survive restarts, and streams resume from it.
    pub fn new(agent: Agent, settings: Settings) -> Self {
        let limiter = auth::RateLimiter::new(settings.requests_per_minute, settings.burst);
        let failed_keys = auth::RateLimiter::new(
            settings.failed_keys_per_minute,
            settings.failed_keys_per_minute,
        );
        Self {
            state: Arc::new(AppState {
                agent,
                settings,
                metrics: metrics::Metrics::default(),
                limiter,
                failed_keys,
                closing: CancellationToken::new(),
                ends: Mutex::new(HashMap::new()),
                runs: execute::Runs::default(),
                queues: Mutex::new(HashMap::new()),
                keep_alive: std::sync::OnceLock::new(),
                ws_streams: ws_limits::PerKey::default(),
                ws_sockets: ws_limits::PerKey::default(),
            }),
        }
    }

    /// The router with every endpoint and layer (tests may drive it directly).
    pub fn router(&self) -> Router {
        let state = Arc::clone(&self.state);
        let mut api = Router::new()
            .route("/api/agent/execute", post(routes::execute))
            .route(
                "/api/agent/session/{id}",
                get(routes::get_session).delete(routes::delete_session),
            )
            .route("/api/agent/session/{id}/stream", get(routes::attach))
            .route("/api/agent/session/{id}/abort", post(routes::abort))
            .route("/api/agent/session/{id}/fork", post(routes::fork))
            .route("/api/agent/sessions", get(routes::list_sessions))
            .route("/api/agent/models", get(models::list))
            .route("/api/agent/ws", get(ws::upgrade))
            .route("/api/ag-ui", post(agui::run))
            .route("/api/ag-ui/{thread_id}/stop", post(agui::stop))
            .route("/api/chat", post(chat::post))
            .route("/api/chat/{id}", get(chat::get))
            .route("/api/chat/{id}/stream", get(chat::resume))
            .route("/api/chat/{id}/stop", post(chat::stop));
        // The metrics show every owner's use: behind the keys, unless made public.
        let mut operations = Router::new()
            .route("/healthz", get(routes::healthz))
            .route("/readyz", get(routes::readyz))
            .route("/openapi.json", get(openapi::openapi));
        if state.settings.metrics_public {
            operations = operations.route("/metrics", get(routes::metrics));
        } else {
            api = api.route("/metrics", get(routes::metrics));
        }
        let api =
            api.route_layer(middleware::from_fn_with_state(Arc::clone(&state), auth::authenticate));
        let request_id = HeaderName::from_static("x-request-id");
        Router::new()
            .merge(api)
            .merge(playground::routes())
            .merge(operations)
            .fallback(routes::not_found)
            .method_not_allowed_fallback(routes::method_not_allowed)
            .layer(middleware::from_fn_with_state(Arc::clone(&state), body_timeout::body_timeout))
            .layer(DefaultBodyLimit::max(state.settings.body_bytes))
            .layer(middleware::from_fn_with_state(Arc::clone(&state), count_responses))
            .layer(cors(&state.settings.cors_origins))
            .layer(PropagateRequestIdLayer::new(request_id.clone()))
            .layer(TraceLayer::new_for_http().make_span_with(request_span))
            .layer(SetRequestIdLayer::new(request_id, MakeRequestUuid))
            .with_state(state)
    }

    /// Whether this server may listen on `addr`: without API keys, only a loopback address
    /// ([`ServeError::Unprotected`] otherwise). [`serve`](Self::serve) checks it too; a caller
    /// checks it first to say "serving" only when it will.
    pub fn check_addr(&self, addr: SocketAddr) -> Result<(), ServeError> {
        if self.state.settings.api_keys.is_empty() && !addr.ip().is_loopback() {
            return Err(ServeError::Unprotected(addr));
        }
        Ok(())
    }

    /// Serves on `listener` until `shutdown` completes; then stops accepting, ends the streams,
    /// lets runs end for the configured grace, aborts those still going (an abort is saved: every
    /// run rests at a durable point and gives its lease back), and returns.
    ///
    /// Connections live under the limits of [`Settings`]: `header_timeout`, `body_timeout`,
    /// `idle_timeout`, `write_timeout` and `max_connections` (at the cap, the connection waiting
    /// longest for its client — for a request, or to take data — is closed for the new one;
    /// with every connection busy, the new one is closed).
    /// HTTP/1.1 only. Each request carries its peer's address (`ConnectInfo<SocketAddr>`):
    /// wrong API keys are counted per address.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let addr = listener.local_addr()?;
        self.check_addr(addr)?;
        let closing = self.state.closing.clone();
        let app = self.router();
        tracing::info!(%addr, "weft server listening");
        // The accept loop with the connection limits (`conn`): the cap, the header, idle and
        // body timeouts, TCP_NODELAY, a clone of the router per connection.
        let shards = shards::Shards::start(self.state.settings.connection_threads)?;
        conn::run(listener, app, Arc::clone(&self.state), &shards, shutdown, closing).await;
        self.state.runs.drain(self.state.settings.shutdown_grace).await;
        shards.stop().await;
        tracing::info!("server stopped");
        Ok(())
    }
}

/// A request's span (target [`weft_telemetry::HTTP_SPAN_TARGET`]): its log fields, and what an
/// OpenTelemetry server span needs (`otel.name` = method and route, `http.*`, `url.path`). It
/// continues the caller's trace (`traceparent`) when telemetry is on, so the runs the request
/// starts are in the caller's trace.
fn request_span(request: &Request) -> tracing::Span {
    let id = request.headers().get("x-request-id").and_then(|v| v.to_str().ok()).unwrap_or("");
    let route = request.extensions().get::<axum::extract::MatchedPath>().map(|m| m.as_str());
    let method = request.method().as_str();
    let span = tracing::info_span!(
        target: weft_telemetry::HTTP_SPAN_TARGET,
        "request",
        otel.name = match route {
            Some(route) => format!("{method} {route}"),
            None => method.to_string(),
        },
        otel.kind = "server",
        http.request.method = method,
        http.route = route,
        url.path = request.uri().path(),
        method = %request.method(),
        path = %request.uri().path(),
        request_id = %id,
        session_id = tracing::field::Empty,
        run_id = tracing::field::Empty,
    );
    weft_telemetry::continue_trace(&span, request.headers());
    span
}

async fn count_responses(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let response = next.run(request).await;
    state.metrics.response(response.status().as_u16());
    response
}

fn cors(origins: &[String]) -> CorsLayer {
    if origins.is_empty() {
        return CorsLayer::new();
    }
    let layer = CorsLayer::new()
        .allow_methods([Method::GET, Method::POST, Method::DELETE, Method::OPTIONS])
        .allow_headers([
            axum::http::header::AUTHORIZATION,
            axum::http::header::CONTENT_TYPE,
            axum::http::header::ACCEPT,
            HeaderName::from_static("last-event-id"),
        ])
        .expose_headers([
            HeaderName::from_static("x-session-id"),
            HeaderName::from_static("x-run-id"),
            HeaderName::from_static(weft_protocol::vercel::HEADER.0),
        ]);
    if origins.iter().any(|o| o == "*") {
        return layer.allow_origin(AllowOrigin::any());
    }
    let allowed: Vec<HeaderValue> =
        origins.iter().filter_map(|o| HeaderValue::from_str(o).ok()).collect();
    layer.allow_origin(allowed)
}
