//! MCP servers as tool sources, through the official Rust SDK (`rmcp`).
//!
//! An [`McpServer`] is supervised by a task of its own: it connects (a child process over
//! stdio, or streamable HTTP), lists the server's tools, lists them again on
//! `notifications/tools/list_changed`, and when the connection ends (the process died, the
//! server went away) or a call finds the server hung, it reconnects with backoff (100 ms,
//! doubling to 10 s). Its tools are named `SERVER__TOOL` and take the server's input schema as
//! their parameters (the agent validates arguments against it before a call). A tool whose
//! `SERVER__TOOL` is not a name every model provider accepts (1 to 64 of `A-Z a-z 0-9 _ -`:
//! MCP allows `.`, `/` and longer names) is skipped with a warning, as one whose schema is
//! invalid: offered to a model, it would fail every call of every run.
//!
//! A call streams the server's progress notifications as output deltas; when the run is
//! aborted (or the call times out) the server is sent `notifications/cancelled`. A call that
//! finds no connection waits for the restart (up to 10 s) and otherwise fails with an error
//! result: a broken server never takes the run down.

mod result;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use rmcp::model::{
    CallToolRequestParams, CancelledNotificationParam, ClientRequest, ProgressNotificationParam,
    ProgressToken, Request, ServerResult,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};
use serde_json::Value;
use tokio::sync::{Notify, mpsc, watch};
use weft_cancel::CancellationToken;
use weft_core::ToolSpec;
use weft_tool_api::{Tool, ToolContext, ToolError, ToolEvent, ToolOutput, ToolSource, ToolStream};

use crate::config::McpServerConfig;

pub use result::map_result;

/// How long a call waits for a server that is (re)connecting.
const CONNECT_WAIT: Duration = Duration::from_secs(10);
/// How long the first connection may take before start-up goes on without the server's tools.
const START_WAIT: Duration = Duration::from_secs(20);
/// The shortest and longest pause between two connection attempts.
const BACKOFF: (Duration, Duration) = (Duration::from_millis(100), Duration::from_secs(10));
/// How long a server has to answer a health check after a call was cancelled.
const HEALTH_WAIT: Duration = Duration::from_secs(5);

/// How long a call's result waits for progress notifications still in flight.
const PROGRESS_SETTLE: Duration = Duration::from_millis(20);
/// How long, at most, a call's result waits for the last step of a progress the server counted
/// (`total`) when that step has not arrived: the server sent it before the result, and the client
/// handles each notification on a task of its own, which a busy machine may run late.
const PROGRESS_LAST_STEP_WAIT: Duration = Duration::from_millis(250);

/// The separator between a server's name and its tool's.
pub const SEPARATOR: &str = "__";

/// What the supervisor and the calls share.
struct Shared {
    config: McpServerConfig,
    source: String,
    /// The live connection and its number (1, 2, … as it is restarted).
    peer: watch::Sender<Option<(u64, Peer<RoleClient>)>>,
    /// The number of the last connection a call saw end: calls wait for a newer one.
    dead: AtomicU64,
    tools: Mutex<Vec<Arc<dyn Tool>>>,
    generation: AtomicU64,
    /// Where progress notifications go.
    progress: Mutex<Routes>,
    /// The server said its tools changed.
    refresh: Notify,
    /// A call found the server hung: drop the connection and start again.
    restart: Notify,
    /// How many connections were made (1 after start-up; more after restarts).
    connections: AtomicU64,
    stop: CancellationToken,
}

/// One MCP server: a [`ToolSource`] of its tools, kept connected by a supervisor task.
pub struct McpServer {
    shared: Arc<Shared>,
}

impl Drop for McpServer {
    fn drop(&mut self) {
        self.shared.stop.cancel();
    }
}

impl McpServer {
    /// Starts supervising the server and waits for its first tool listing (up to 20 s; a server
    /// that is not up by then is retried in the background, its tools appearing when it is).
    /// Must be called within a tokio runtime.
    pub async fn start(config: McpServerConfig) -> Arc<Self> {
        let (peer, _) = watch::channel(None);
        let shared = Arc::new(Shared {
            source: format!("mcp:{}", config.name),
            config,
            peer,
            tools: Mutex::new(Vec::new()),
            generation: AtomicU64::new(0),
            progress: Mutex::new(Routes::default()),
            refresh: Notify::new(),
            restart: Notify::new(),
            connections: AtomicU64::new(0),
            dead: AtomicU64::new(0),
            stop: CancellationToken::new(),
        });
        let listed = Arc::new(Notify::new());
        tokio::spawn(supervise(Arc::clone(&shared), Arc::clone(&listed)));
        if tokio::time::timeout(START_WAIT, listed.notified()).await.is_err() {
            tracing::warn!(server = %shared.config.name, "MCP server not up yet; its tools appear once it is");
        }
        Arc::new(Self { shared })
    }

    /// How many times the server was connected (more than 1: it was restarted).
    pub fn connections(&self) -> u64 {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Whether a connection is up now.
    pub fn is_connected(&self) -> bool {
        self.shared.peer.borrow().is_some()
    }

    /// Waits until the tool set's generation passes `generation` (a relisting happened), up to
    /// `timeout`; returns whether it did.
    pub async fn wait_for_generation(&self, generation: u64, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        while self.shared.generation.load(Ordering::SeqCst) <= generation {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }
}

impl ToolSource for McpServer {
    fn name(&self) -> &str {
        &self.shared.source
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.shared.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone()
    }

    fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::SeqCst)
    }
}

/// The client side's handler: progress goes to the call it belongs to, a changed tool list
/// wakes the supervisor.
struct Handler {
    shared: Arc<Shared>,
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let call = {
            let mut routes = self.shared.routes();
            let call = routes.calls.get(&params.progress_token).cloned();
            if call.is_none() {
                // The server may report progress before the call that sent the request has
                // registered its token (it is registered once the request is out): kept for it,
                // a few at most.
                if routes.early.len() == EARLY_KEPT {
                    routes.early.pop_front();
                }
                routes.early.push_back(params.clone());
            }
            call
        };
        if let Some(call) = call {
            deliver(&call, &params).await;
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.shared.refresh.notify_one();
    }
}

/// A call's delta channel, and where its progress stands.
type CallProgress = (mpsc::Sender<ToolEvent>, watch::Sender<Counted>);

/// How many progress notifications of calls not registered (yet) are kept.
const EARLY_KEPT: usize = 32;

/// Where progress notifications go: progress token → the call's delta channel and where its
/// progress stands; and the last few that came before their call registered its token.
#[derive(Default)]
struct Routes {
    calls: HashMap<ProgressToken, CallProgress>,
    early: std::collections::VecDeque<ProgressNotificationParam>,
}

impl Shared {
    fn routes(&self) -> std::sync::MutexGuard<'_, Routes> {
        self.progress.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One progress notification to its call: an output delta, and where the progress stands.
async fn deliver((sender, counted): &CallProgress, params: &ProgressNotificationParam) {
    let _ = sender.send(ToolEvent::Delta(progress_text(params))).await;
    if let Some(total) = params.total {
        counted.send_modify(|c| {
            c.total_known = true;
            c.last_step_seen |= params.progress >= total;
        });
    }
}

/// Where a call's progress stands, as its notifications have been handled.
#[derive(Debug, Clone, Copy, Default)]
struct Counted {
    /// A notification gave a `total`.
    total_known: bool,
    /// A notification reached it.
    last_step_seen: bool,
}

/// A progress notification as a line of output: its message, else `progress P/T`.
fn progress_text(params: &ProgressNotificationParam) -> String {
    match (&params.message, params.total) {
        (Some(message), _) => format!("{message}\n"),
        (None, Some(total)) => format!("progress {}/{}\n", params.progress, total),
        (None, None) => format!("progress {}\n", params.progress),
    }
}

type Service = RunningService<RoleClient, Handler>;

async fn connect(shared: &Arc<Shared>) -> Result<Service, String> {
    // A new connection numbers its progress tokens from the start again.
    shared.routes().early.clear();
    let handler = Handler { shared: Arc::clone(shared) };
    let config = &shared.config;
    if let Some(command) = &config.command {
        let mut cmd = tokio::process::Command::new(command);
        cmd.args(&config.args).envs(&config.env).kill_on_drop(true);
        if let Some(cwd) = &config.cwd {
            cmd.current_dir(cwd);
        }
        let (transport, _stderr) = rmcp::transport::TokioChildProcess::builder(cmd)
            .stderr(std::process::Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {command}: {e}"))?;
        handler.serve(transport).await.map_err(|e| e.to_string())
    } else if let Some(url) = &config.url {
        use rmcp::transport::StreamableHttpClientTransport;
        use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
        let mut headers = HashMap::new();
        for (name, value) in &config.headers {
            let name = reqwest::header::HeaderName::try_from(name.as_str())
                .map_err(|e| format!("header {name:?}: {e}"))?;
            let value = reqwest::header::HeaderValue::try_from(value.as_str())
                .map_err(|e| format!("header {name}: {e}"))?;
            headers.insert(name, value);
        }
        let transport_config =
            StreamableHttpClientTransportConfig::with_uri(url.as_str()).custom_headers(headers);
        let transport = StreamableHttpClientTransport::from_config(transport_config);
        handler.serve(transport).await.map_err(|e| e.to_string())
    } else {
        Err("neither command nor url is set".to_string())
    }
}

/// Lists the server's tools and publishes them.
async fn relist(shared: &Arc<Shared>, peer: &Peer<RoleClient>) {
    match peer.list_all_tools().await {
        Ok(listed) => {
            let mut tools: Vec<Arc<dyn Tool>> = Vec::with_capacity(listed.len());
            for tool in listed {
                let parameters = Value::Object((*tool.input_schema).clone());
                if let Err(e) = jsonschema::validator_for(&parameters) {
                    tracing::warn!(server = %shared.config.name, tool = %tool.name, error = %e, "MCP tool skipped: its input schema is not a valid JSON Schema");
                    continue;
                }
                let name = format!("{}{SEPARATOR}{}", shared.config.name, tool.name);
                if !weft_core::valid_tool_name(&name) {
                    // A name a provider refuses would fail every model call of every run.
                    tracing::warn!(server = %shared.config.name, tool = %tool.name, "MCP tool skipped: its name {name:?} is not one model providers accept (1 to {} of A-Z a-z 0-9 _ -)", weft_core::MAX_TOOL_NAME);
                    continue;
                }
                let description = tool.description.as_deref().unwrap_or_default().to_string();
                let mut spec = ToolSpec::new(name, description, parameters);
                if let Some(title) = tool.title.clone() {
                    spec = spec.with_label(title);
                }
                let read_only =
                    tool.annotations.as_ref().and_then(|a| a.read_only_hint).unwrap_or(false);
                tools.push(Arc::new(McpTool {
                    shared: Arc::clone(shared),
                    remote: tool.name.to_string(),
                    spec,
                    read_only,
                }));
            }
            *shared.tools.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = tools;
            shared.generation.fetch_add(1, Ordering::SeqCst);
        }
        Err(error) => {
            tracing::warn!(server = %shared.config.name, %error, "listing the MCP server's tools failed");
        }
    }
}

/// Keeps the server connected until the [`McpServer`] is dropped.
async fn supervise(shared: Arc<Shared>, listed: Arc<Notify>) {
    let mut backoff = BACKOFF.0;
    loop {
        if shared.stop.is_cancelled() {
            return;
        }
        match connect(&shared).await {
            Ok(service) => {
                backoff = BACKOFF.0;
                let peer = service.peer().clone();
                relist(&shared, &peer).await;
                let number = shared.connections.fetch_add(1, Ordering::SeqCst) + 1;
                shared.peer.send_replace(Some((number, peer.clone())));
                listed.notify_one();
                let mut cancel = Some(service.cancellation_token());
                let closed = service.waiting();
                tokio::pin!(closed);
                loop {
                    tokio::select! {
                        _ = &mut closed => break,
                        () = shared.refresh.notified() => relist(&shared, &peer).await,
                        () = shared.restart.notified() => {
                            // A stale request (about an earlier connection) is ignored.
                            if shared.dead.load(Ordering::SeqCst) < number { continue; }
                            tracing::warn!(server = %shared.config.name, "MCP server does not answer: restarting it");
                            if let Some(cancel) = cancel.take() { cancel.cancel(); }
                        }
                        () = shared.stop.cancelled() => {
                            if let Some(cancel) = cancel.take() { cancel.cancel(); }
                            let _ = tokio::time::timeout(Duration::from_secs(2), &mut closed).await;
                            return;
                        }
                    }
                }
                shared.peer.send_replace(None);
                tracing::warn!(server = %shared.config.name, "MCP server connection ended; reconnecting");
            }
            Err(error) => {
                tracing::warn!(server = %shared.config.name, %error, "cannot connect to the MCP server");
                listed.notify_one();
            }
        }
        tokio::select! {
            () = tokio::time::sleep(backoff) => {}
            () = shared.stop.cancelled() => return,
        }
        backoff = (backoff * 2).min(BACKOFF.1);
    }
}

/// One tool of an MCP server.
struct McpTool {
    shared: Arc<Shared>,
    remote: String,
    spec: ToolSpec,
    read_only: bool,
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn timeout(&self) -> Option<Duration> {
        self.shared.config.timeout
    }

    fn replay_safe(&self) -> bool {
        self.read_only
    }

    fn execute(&self, args: Value, ctx: ToolContext) -> ToolStream {
        let (tx, rx) = mpsc::channel(weft_tool_api::SINK_CAPACITY);
        let shared = Arc::clone(&self.shared);
        let remote = self.remote.clone();
        tokio::spawn(async move {
            let last = match call(&shared, remote, args, &ctx, &tx).await {
                Ok(output) => ToolEvent::Complete(output),
                Err(error) => ToolEvent::Error(error),
            };
            let _ = tx.send(last).await;
        });
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|e| (e, rx)) })
            .boxed()
    }
}

/// Removes a call's progress channel however the call ends.
struct ProgressGuard<'a> {
    shared: &'a Shared,
    token: ProgressToken,
}

impl Drop for ProgressGuard<'_> {
    fn drop(&mut self) {
        self.shared.routes().calls.remove(&self.token);
    }
}

/// The current connection, once one is up and not closed (waiting up to 10 s for a restart).
async fn live_peer(
    shared: &Shared,
    ctx: &ToolContext,
) -> Result<(u64, Peer<RoleClient>), ToolError> {
    let name = &shared.config.name;
    let mut rx = shared.peer.subscribe();
    let dead = shared.dead.load(Ordering::SeqCst);
    let wait =
        rx.wait_for(|p| p.as_ref().is_some_and(|(n, p)| *n > dead && !p.is_transport_closed()));
    tokio::select! {
        peer = tokio::time::timeout(CONNECT_WAIT, wait) => match peer {
            Ok(Ok(peer)) => peer.clone().ok_or_else(|| ToolError::failed(format!("MCP server {name} is not available"))),
            _ => Err(ToolError::failed(format!("MCP server {name} is not available (it is being restarted)"))),
        },
        () = ctx.cancel.cancelled() => Err(ToolError::Cancelled("the run was aborted".into())),
    }
}

async fn call(
    shared: &Arc<Shared>,
    remote: String,
    args: Value,
    ctx: &ToolContext,
    tx: &mpsc::Sender<ToolEvent>,
) -> Result<ToolOutput, ToolError> {
    let name = &shared.config.name;
    let arguments = match args {
        Value::Object(map) => map,
        Value::Null => serde_json::Map::new(),
        other => {
            return Err(ToolError::invalid(format!("arguments must be an object, not {other}")));
        }
    };
    // A connection that just ended may still be published: one more try on the next one.
    let mut tries = 0;
    let handle = loop {
        tries += 1;
        let (number, peer) = live_peer(shared, ctx).await?;
        let params = CallToolRequestParams::new(remote.clone()).with_arguments(arguments.clone());
        let request = ClientRequest::CallToolRequest(Request::new(params));
        match peer.send_cancellable_request(request, PeerRequestOptions::no_options()).await {
            Ok(handle) => break (handle, peer, number),
            Err(rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_))
                if tries < 2 =>
            {
                shared.dead.fetch_max(number, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(ToolError::failed(format!("MCP server {name}: {e}"))),
        }
    };
    let (handle, peer, number) = handle;
    let id = handle.id.clone();
    let (counted, mut progress) = watch::channel(Counted::default());
    let route: CallProgress = (tx.clone(), counted);
    let early: std::collections::VecDeque<ProgressNotificationParam> = {
        let mut routes = shared.routes();
        routes.calls.insert(handle.progress_token.clone(), route.clone());
        let token = &handle.progress_token;
        let (mine, rest) = routes.early.drain(..).partition(|p| p.progress_token == *token);
        routes.early = rest;
        mine
    };
    let _guard = ProgressGuard { shared, token: handle.progress_token.clone() };
    // What the server reported before the token was registered comes first.
    for params in &early {
        deliver(&route, params).await;
    }
    tokio::select! {
        response = handle.await_response() => match response {
            Ok(ServerResult::CallToolResult(result)) => {
                // Progress notifications are handled on tasks of their own: the last ones may
                // still be on their way when the result arrives. A moment lets them land, and
                // a counted progress whose last step is missing is given longer.
                tokio::time::sleep(PROGRESS_SETTLE).await;
                let last = progress.wait_for(|c| !c.total_known || c.last_step_seen);
                let _ = tokio::time::timeout(PROGRESS_LAST_STEP_WAIT, last).await;
                map_result(&result)
            }
            Ok(_) => Err(ToolError::failed(format!("MCP server {name} answered the call with something other than a tool result"))),
            Err(rmcp::ServiceError::TransportClosed | rmcp::ServiceError::TransportSend(_) | rmcp::ServiceError::Cancelled { .. }) => {
                shared.dead.fetch_max(number, Ordering::SeqCst);
                Err(ToolError::failed(format!("MCP server {name} stopped during the call; it is being restarted")))
            }
            Err(e) => Err(ToolError::failed(format!("MCP server {name}: {e}"))),
        },
        () = ctx.cancel.cancelled() => {
            let reason = "the run was aborted or the call timed out".to_string();
            let _ = peer.notify_cancelled(CancelledNotificationParam::new(Some(id), Some(reason))).await;
            // A server that cannot answer a listing now is hung: restart it.
            let shared = Arc::clone(shared);
            tokio::spawn(async move {
                let healthy = tokio::time::timeout(HEALTH_WAIT, peer.list_all_tools()).await;
                if !matches!(healthy, Ok(Ok(_))) {
                    shared.dead.fetch_max(number, Ordering::SeqCst);
                    shared.restart.notify_one();
                }
            });
            Err(ToolError::Cancelled("the call was cancelled".into()))
        }
    }
}
