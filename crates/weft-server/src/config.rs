//! Configuration: the server's [`Settings`] (plain data the router runs on) and [`ServeConfig`],
//! what `weft serve` reads from its configuration file and the environment.
//!
//! The file is TOML, found at `--config FILE`, else `./weft.toml`, else `$WEFT_HOME/weft.toml`
//! (no file is fine: everything has a default). The environment overrides the file, and flags
//! override both (the CLI applies them). Every key:
//!
//! ```toml
//! addr = "127.0.0.1:8080"          # WEFT_ADDR
//! store = "sqlite:/var/lib/weft.db" # WEFT_STORE (memory | sqlite:PATH | postgres://…)
//! durability = "async"             # WEFT_DURABILITY: how runs whose request names none are stored
//!                                   # (every endpoint, the front ends too): "sync" (nothing is
//!                                   # streamed before the store has it), "async", "exit" (stored
//!                                   # when the run ends or suspends)
//! threads = 2                       # WEFT_THREADS: threads serving connections, each with its own
//!                                   # event loop (default: one per core; 0: the shared runtime)
//!
//! [provider]
//! name = "faux"                     # WEFT_PROVIDER: openai, openai-responses, anthropic, gemini, faux
//! model = "faux"                    # WEFT_MODEL
//! script = "examples/scripts/weather.json"  # the faux provider's script (relative to the file)
//! models = "models.json"            # extra model prices (relative to the file)
//!
//! [providers.anthropic]             # more providers sessions may pick (options.provider);
//! model = "claude-sonnet-4-5"       # WEFT_PROVIDERS="anthropic=claude-sonnet-4-5,openai=gpt-4o"
//! [providers.faux]                  # the faux provider needs its script
//! script = "examples/scripts/serve.json"
//!
//! [api_keys]                        # WEFT_API_KEYS="key1=alice,key2=bob" (replaces the table)
//! "a-long-random-key" = "alice"     # bearer key = owner
//!
//! [limits]
//! body_bytes = 1048576              # larger request bodies: 413
//! requests_per_minute = 600         # per API key; over it: 429 with Retry-After
//! burst = 60                        # requests a key may make at once
//! failed_keys_per_minute = 30       # wrong API keys per client address; over it: 429, any key
//! max_turns = 50                    # model calls per run
//! remote_tool_timeout = "10m"       # a remote call unanswered this long gets an error result
//! shutdown_grace = "10s"            # how long a shutdown waits for runs before aborting them
//! lease_ttl = "15s"                 # a run whose replica stopped is taken over after this
//! end_commit_timeout = "10s"        # how long a run tries to store its end while the store fails
//! header_timeout = "10s"            # a request head must arrive whole within this (slowloris)
//! body_timeout = "60s"              # a request body must arrive whole within this; else 408
//! idle_timeout = "60s"              # a keep-alive connection with no request (a WebSocket with no
//!                                   # stream) is closed after this
//! write_timeout = "60s"             # a response whose client takes no data this long is closed
//! max_connections = 16384           # open connections; at the cap the longest-idle one is closed
//! ws_sockets_per_key = 64           # WebSockets one API key may have open at once
//! ws_streams_per_socket = 16        # streams one WebSocket may carry at once
//! ws_streams_per_key = 128          # WebSocket streams one API key may have open at once
//! ws_send_queue = 1048576           # bytes waiting to be sent on one WebSocket; streams wait past it
//! ws_send_timeout = "30s"           # a WebSocket that takes no data this long is closed (1008)
//!
//! [metrics]
//! public = false                    # true: GET /metrics needs no API key (it shows every owner's use)
//!
//! [cors]
//! origins = ["http://localhost:3000"]  # WEFT_CORS_ORIGINS (comma-separated); "*" for any
//!
//! [frontends]
//! multitask = "interrupt"           # a new message on /api/chat or /api/ag-ui while a run goes on:
//!                                   # "interrupt" (abort it), "enqueue" or "reject" (409)
//!
//! [telemetry]                       # OpenTelemetry over OTLP/HTTP (see weft_telemetry::TelemetryConfig;
//! endpoint = "http://127.0.0.1:4318" # the OTEL_EXPORTER_OTLP_* variables override these keys)
//! capture_content = false           # message content on the GenAI spans
//!
//! [[mcp]]                           # MCP servers, built-in tools and per-tool policy:
//! name = "files"                    # see weft_tools::config for every key
//! command = "npx"
//! [builtins]
//! tools = ["calculator", "current_time"]
//! [tools.files__write]
//! approval = "always"
//! ```
//!
//! Provider API keys are never read from this file: they come from the environment
//! (`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`), so a configuration file can be
//! shared without leaking them. A mistake in the file is one line naming the file, the line and
//! the key (`weft.toml:12: limits.body_bytes: invalid type: string "x", expected usize`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// The default listen address: loopback only.
pub const DEFAULT_ADDR: &str = "127.0.0.1:8080";
/// The default request body limit (1 MiB).
pub const DEFAULT_BODY_BYTES: usize = 1024 * 1024;
/// The default rate limit per API key.
pub const DEFAULT_REQUESTS_PER_MINUTE: u32 = 600;
/// The default burst per API key.
pub const DEFAULT_BURST: u32 = 60;
/// The default limit of wrong API keys per client address and minute.
pub const DEFAULT_FAILED_KEYS_PER_MINUTE: u32 = 30;
/// How long a shutdown waits for runs to end by default.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// How long a request head may take to arrive by default.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a request body may take to arrive by default.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a keep-alive connection may wait for its next request by default.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a response may wait for its client to take data by default.
pub const DEFAULT_WRITE_TIMEOUT: Duration = Duration::from_secs(60);
/// The default cap on open connections (lowered to the open-file limit's room, see `conn`).
pub const DEFAULT_MAX_CONNECTIONS: usize = 16_384;
/// The default number of WebSockets one API key may have open at once.
pub const DEFAULT_WS_SOCKETS_PER_KEY: usize = 64;
/// The default number of streams one WebSocket may carry at once.
pub const DEFAULT_WS_STREAMS_PER_SOCKET: usize = 16;
/// The default number of WebSocket streams one API key may have open at once.
pub const DEFAULT_WS_STREAMS_PER_KEY: usize = 128;
/// The default bound of a WebSocket's send queue, in bytes.
pub const DEFAULT_WS_SEND_QUEUE: usize = 1024 * 1024;
/// How long a WebSocket may take no data before it is closed, by default.
pub const DEFAULT_WS_SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// What the router runs on: keys, limits, CORS and the provider sessions run on.
#[derive(Clone)]
pub struct Settings {
    /// Bearer API key → owner. Empty: no authentication (then the server binds loopback only).
    pub api_keys: BTreeMap<String, String>,
    /// The largest request body, in bytes.
    pub body_bytes: usize,
    /// Requests per minute per API key (0: unlimited).
    pub requests_per_minute: u32,
    /// How many requests a key may make at once before the rate applies.
    pub burst: u32,
    /// Wrong API keys a client address may send per minute (as many at once); past them every
    /// keyed request from it gets 429 until the bucket refills (0: unlimited).
    pub failed_keys_per_minute: u32,
    /// Whether `GET /metrics` is open to anyone; otherwise, on a server with keys, it needs one.
    pub metrics_public: bool,
    /// Origins allowed by CORS (`*`: any). Empty: no CORS headers.
    pub cors_origins: Vec<String>,
    /// How long a shutdown waits for runs to end before aborting them.
    pub shutdown_grace: Duration,
    /// How often an idle SSE stream sends a comment, so proxies keep it open.
    pub keep_alive: Duration,
    /// The name of the default provider (for logs: the providers sessions may pick are the
    /// agent's, [`weft_agent::Agent::provider_names`]).
    pub provider: String,
    /// The agent's limit of model calls per run: the default and the largest per-session
    /// `options.maxTurns`.
    pub max_turns: u32,
    /// How long a request head may take to arrive, from the connection's accept or from the
    /// first byte after an idle keep-alive wait (zero: no limit).
    pub header_timeout: Duration,
    /// How long a request body may take to arrive, from the request's start; then 408 (zero: no
    /// limit).
    pub body_timeout: Duration,
    /// How long a connection with no request in flight (a WebSocket: with no stream open) is
    /// kept open (zero: no limit).
    pub idle_timeout: Duration,
    /// How long a connection's writes may make no progress (its client takes no data) before it
    /// is closed; such a connection may also be replaced at the cap (zero: no limit).
    pub write_timeout: Duration,
    /// The most connections open at once, lowered to what the open-file limit allows (zero: that
    /// limit alone).
    pub max_connections: usize,
    /// Threads that serve connections, each with an event loop of its own: a connection, the
    /// runs its requests start and their streams stay on one thread (see `shards.rs`). Zero:
    /// connections are served on the runtime [`Server::serve`](crate::Server::serve) runs on
    /// (the default of the library; `weft serve` starts one per core).
    pub connection_threads: usize,
    /// The most WebSockets one API key may have open at once (zero: no limit).
    pub ws_sockets_per_key: usize,
    /// The most streams one WebSocket may carry at once (zero: no limit).
    pub ws_streams_per_socket: usize,
    /// The most WebSocket streams one API key may have open at once (zero: no limit).
    pub ws_streams_per_key: usize,
    /// The most bytes waiting to be sent on one WebSocket; streams wait past it.
    pub ws_send_queue: usize,
    /// How long a WebSocket may take no data before it is closed (zero: no limit).
    pub ws_send_timeout: Duration,
    /// What a front end's new message (`/api/chat`, `/api/ag-ui`) does while the session's run
    /// goes on, unless the request's options say: interrupt it (the default), wait, or refuse.
    pub frontend_multitask: crate::api::Multitask,
    /// How durably a run is stored when its request's `options.durability` names nothing.
    pub durability: weft_core::Durability,
    /// The model registry (`GET /api/agent/models` lists its models of each provider); the
    /// built-in one by default, with a `--models` file's additions when the CLI was given one.
    pub models: std::sync::Arc<weft_llm::models::ModelRegistry>,
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Keys are secrets: only their owners are shown.
        f.debug_struct("Settings")
            .field("api_key_owners", &self.api_keys.values().collect::<Vec<_>>())
            .field("body_bytes", &self.body_bytes)
            .field("requests_per_minute", &self.requests_per_minute)
            .field("burst", &self.burst)
            .field("failed_keys_per_minute", &self.failed_keys_per_minute)
            .field("metrics_public", &self.metrics_public)
            .field("cors_origins", &self.cors_origins)
            .field("shutdown_grace", &self.shutdown_grace)
            .field("provider", &self.provider)
            .field("header_timeout", &self.header_timeout)
            .field("body_timeout", &self.body_timeout)
            .field("idle_timeout", &self.idle_timeout)
            .field("write_timeout", &self.write_timeout)
            .field("max_connections", &self.max_connections)
            .field("connection_threads", &self.connection_threads)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// Defaults for a server running sessions on `provider`.
    pub fn new(provider: impl Into<String>) -> Self {
        Self {
            api_keys: BTreeMap::new(),
            body_bytes: DEFAULT_BODY_BYTES,
            requests_per_minute: DEFAULT_REQUESTS_PER_MINUTE,
            burst: DEFAULT_BURST,
            failed_keys_per_minute: DEFAULT_FAILED_KEYS_PER_MINUTE,
            metrics_public: false,
            cors_origins: Vec::new(),
            shutdown_grace: DEFAULT_SHUTDOWN_GRACE,
            keep_alive: Duration::from_secs(15),
            provider: provider.into(),
            max_turns: weft_agent::DEFAULT_MAX_TURNS,
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
            write_timeout: DEFAULT_WRITE_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            connection_threads: 0,
            ws_sockets_per_key: DEFAULT_WS_SOCKETS_PER_KEY,
            ws_streams_per_socket: DEFAULT_WS_STREAMS_PER_SOCKET,
            ws_streams_per_key: DEFAULT_WS_STREAMS_PER_KEY,
            ws_send_queue: DEFAULT_WS_SEND_QUEUE,
            ws_send_timeout: DEFAULT_WS_SEND_TIMEOUT,
            frontend_multitask: crate::api::Multitask::Interrupt,
            durability: weft_core::Durability::default(),
            models: weft_llm::models::ModelRegistry::builtin(),
        }
    }
}

/// A configuration mistake, as one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ConfigError(pub String);

/// What `weft serve` is configured with, before flags.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServeConfig {
    /// The file read, if any.
    pub file: Option<PathBuf>,
    /// The listen address.
    pub addr: Option<String>,
    /// The session store URL.
    pub store: Option<String>,
    /// How durably runs are stored by default (`durability`, `WEFT_DURABILITY`).
    pub durability: Option<weft_core::Durability>,
    /// Threads serving connections (`threads`, `WEFT_THREADS`; see
    /// [`Settings::connection_threads`]).
    pub threads: Option<usize>,
    /// The provider's name.
    pub provider: Option<String>,
    /// The default model.
    pub model: Option<String>,
    /// The faux provider's script.
    pub script: Option<PathBuf>,
    /// A models file (extra prices).
    pub models: Option<PathBuf>,
    /// More providers sessions may pick, by name (`[providers.NAME]`, `WEFT_PROVIDERS`).
    pub providers: BTreeMap<String, ProviderEntry>,
    /// API key → owner.
    pub api_keys: BTreeMap<String, String>,
    /// Request body limit.
    pub body_bytes: Option<usize>,
    /// Rate limit per key.
    pub requests_per_minute: Option<u32>,
    /// Burst per key.
    pub burst: Option<u32>,
    /// Wrong keys per client address and minute.
    pub failed_keys_per_minute: Option<u32>,
    /// `[metrics] public`.
    pub metrics_public: bool,
    /// Model calls per run.
    pub max_turns: Option<u32>,
    /// Remote call deadline.
    pub remote_tool_timeout: Option<Duration>,
    /// Shutdown grace.
    pub shutdown_grace: Option<Duration>,
    /// How long a run's lease lasts without renewal.
    pub lease_ttl: Option<Duration>,
    /// How long a run tries to store its end while the store fails transiently.
    pub end_commit_timeout: Option<Duration>,
    /// Connection and WebSocket limits (`[limits]`: `header_timeout` … `ws_send_timeout`).
    pub connections: ConnectionLimits,
    /// CORS origins.
    pub cors_origins: Vec<String>,
    /// `[frontends] multitask`: what a front end's new message does to a run under way.
    pub frontend_multitask: Option<crate::api::Multitask>,
    /// MCP servers, built-in tools and per-tool policy (`[[mcp]]`, `[builtins]`,
    /// `[tools.NAME]`; see `weft_tools::config`), paths made relative to the file.
    pub tools: weft_tools::ToolsConfig,
    /// `[telemetry]`: OpenTelemetry export (the `OTEL_*` variables override it).
    pub telemetry: weft_telemetry::TelemetryConfig,
}

/// The connection and WebSocket limits of `[limits]`, each unset when the file does not give it
/// (see [`Settings`] for what each means).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// [`Settings::header_timeout`].
    pub header_timeout: Option<Duration>,
    /// [`Settings::body_timeout`].
    pub body_timeout: Option<Duration>,
    /// [`Settings::idle_timeout`].
    pub idle_timeout: Option<Duration>,
    /// [`Settings::write_timeout`].
    pub write_timeout: Option<Duration>,
    /// [`Settings::max_connections`].
    pub max_connections: Option<usize>,
    /// [`Settings::ws_sockets_per_key`].
    pub ws_sockets_per_key: Option<usize>,
    /// [`Settings::ws_streams_per_socket`].
    pub ws_streams_per_socket: Option<usize>,
    /// [`Settings::ws_streams_per_key`].
    pub ws_streams_per_key: Option<usize>,
    /// [`Settings::ws_send_queue`].
    pub ws_send_queue: Option<usize>,
    /// [`Settings::ws_send_timeout`].
    pub ws_send_timeout: Option<Duration>,
}

impl ConnectionLimits {
    /// Puts the limits that are set into `settings`.
    pub fn apply(&self, settings: &mut Settings) {
        let set = |value: Option<Duration>, field: &mut Duration| {
            if let Some(value) = value {
                *field = value;
            }
        };
        set(self.header_timeout, &mut settings.header_timeout);
        set(self.body_timeout, &mut settings.body_timeout);
        set(self.idle_timeout, &mut settings.idle_timeout);
        set(self.write_timeout, &mut settings.write_timeout);
        set(self.ws_send_timeout, &mut settings.ws_send_timeout);
        let count = |value: Option<usize>, field: &mut usize| {
            if let Some(value) = value {
                *field = value;
            }
        };
        count(self.max_connections, &mut settings.max_connections);
        count(self.ws_sockets_per_key, &mut settings.ws_sockets_per_key);
        count(self.ws_streams_per_socket, &mut settings.ws_streams_per_socket);
        count(self.ws_streams_per_key, &mut settings.ws_streams_per_key);
        count(self.ws_send_queue, &mut settings.ws_send_queue);
    }
}

/// One more provider sessions may pick (`[providers.NAME]`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProviderEntry {
    /// The model of new sessions on it that name none.
    pub model: Option<String>,
    /// The faux provider's script (relative to the file).
    pub script: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    addr: Option<String>,
    store: Option<String>,
    durability: Option<weft_core::Durability>,
    threads: Option<usize>,
    #[serde(default)]
    provider: ProviderSection,
    #[serde(default)]
    providers: BTreeMap<String, ProviderEntry>,
    #[serde(default)]
    api_keys: BTreeMap<String, String>,
    #[serde(default)]
    limits: LimitsSection,
    #[serde(default)]
    cors: CorsSection,
    #[serde(default)]
    metrics: MetricsSection,
    #[serde(default)]
    frontends: FrontendsSection,
    #[serde(default)]
    mcp: Vec<weft_tools::McpServerConfig>,
    #[serde(default)]
    builtins: weft_tools::BuiltinsConfig,
    #[serde(default)]
    tools: BTreeMap<String, weft_tools::ToolPolicy>,
    #[serde(default)]
    telemetry: weft_telemetry::TelemetryConfig,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProviderSection {
    name: Option<String>,
    model: Option<String>,
    script: Option<PathBuf>,
    models: Option<PathBuf>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct LimitsSection {
    body_bytes: Option<usize>,
    requests_per_minute: Option<u32>,
    burst: Option<u32>,
    failed_keys_per_minute: Option<u32>,
    max_turns: Option<u32>,
    #[serde(default, deserialize_with = "duration")]
    remote_tool_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    shutdown_grace: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    lease_ttl: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    end_commit_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    header_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    body_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    idle_timeout: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    write_timeout: Option<Duration>,
    max_connections: Option<usize>,
    ws_sockets_per_key: Option<usize>,
    ws_streams_per_socket: Option<usize>,
    ws_streams_per_key: Option<usize>,
    ws_send_queue: Option<usize>,
    #[serde(default, deserialize_with = "duration")]
    ws_send_timeout: Option<Duration>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct MetricsSection {
    #[serde(default)]
    public: bool,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct FrontendsSection {
    multitask: Option<crate::api::Multitask>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct CorsSection {
    #[serde(default)]
    origins: Vec<String>,
}

fn duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text).map(Some).map_err(serde::de::Error::custom)
}

/// A duration as `30s`, `2m`, `500ms`, `1m30s`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim())
        .map_err(|e| format!("invalid duration {text:?} ({e}); write e.g. 30s, 2m, 500ms"))
}

/// Where the configuration file is: `explicit` (which must exist), else `./weft.toml`, else
/// `$WEFT_HOME/weft.toml` (`WEFT_HOME` defaulting to `~/.weft`); `None` when there is none.
pub fn find_file(
    explicit: Option<&Path>,
    cwd: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<PathBuf>, ConfigError> {
    if let Some(path) = explicit {
        if !path.is_file() {
            return Err(ConfigError(format!("config file {} not found", path.display())));
        }
        return Ok(Some(path.to_path_buf()));
    }
    let local = cwd.join("weft.toml");
    if local.is_file() {
        return Ok(Some(local));
    }
    let home = env("WEFT_HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .or_else(|| env("HOME").filter(|h| !h.is_empty()).map(|h| Path::new(&h).join(".weft")));
    Ok(home.map(|h| h.join("weft.toml")).filter(|p| p.is_file()))
}

impl ServeConfig {
    /// Reads `file` (if any), then applies the environment (`WEFT_ADDR`, `WEFT_STORE`,
    /// `WEFT_DURABILITY`, `WEFT_THREADS`, `WEFT_PROVIDER`, `WEFT_MODEL`, `WEFT_PROVIDERS`, `WEFT_API_KEYS`,
    /// `WEFT_CORS_ORIGINS`).
    pub fn load(
        file: Option<&Path>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut config = match file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ConfigError(format!("cannot read config file {}: {e}", path.display()))
                })?;
                Self::parse(&text, path)?
            }
            None => Self::default(),
        };
        let var = |name: &str| env(name).filter(|v| !v.trim().is_empty());
        if let Some(addr) = var("WEFT_ADDR") {
            config.addr = Some(addr);
        }
        if let Some(store) = var("WEFT_STORE") {
            config.store = Some(store);
        }
        if let Some(durability) = var("WEFT_DURABILITY") {
            config.durability = Some(
                durability
                    .trim()
                    .parse()
                    .map_err(|e| ConfigError(format!("WEFT_DURABILITY: {e}")))?,
            );
        }
        if let Some(threads) = var("WEFT_THREADS") {
            config.threads = Some(threads.trim().parse().map_err(|_| {
                ConfigError(format!("WEFT_THREADS: {threads:?} is not a number of threads"))
            })?);
        }
        if let Some(provider) = var("WEFT_PROVIDER") {
            config.provider = Some(provider);
        }
        if let Some(model) = var("WEFT_MODEL") {
            config.model = Some(model);
        }
        if let Some(list) = var("WEFT_PROVIDERS") {
            config.providers =
                parse_providers(&list).map_err(|e| ConfigError(format!("WEFT_PROVIDERS: {e}")))?;
        }
        if let Some(keys) = var("WEFT_API_KEYS") {
            config.api_keys =
                parse_api_keys(&keys).map_err(|e| ConfigError(format!("WEFT_API_KEYS: {e}")))?;
        }
        if let Some(origins) = var("WEFT_CORS_ORIGINS") {
            config.cors_origins = origins
                .split(',')
                .map(str::trim)
                .filter(|o| !o.is_empty())
                .map(String::from)
                .collect();
        }
        Ok(config)
    }

    /// Parses a configuration file's text; `path` names it in errors and anchors its relative
    /// paths.
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        let located = |span: Option<std::ops::Range<usize>>| -> String {
            let line = span
                .map(|s| text.get(..s.start).unwrap_or(text).matches('\n').count() + 1)
                .map(|l| format!(":{l}"))
                .unwrap_or_default();
            format!("{}{line}", path.display())
        };
        let deserializer = toml::de::Deserializer::parse(text).map_err(|e| {
            ConfigError(format!("{}: {}", located(e.span()), one_line(e.message())))
        })?;
        let file: FileConfig = serde_path_to_error::deserialize(deserializer).map_err(|e| {
            let key = e.path().to_string();
            let inner = e.inner();
            ConfigError(format!("{}: {key}: {}", located(inner.span()), one_line(inner.message())))
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        let relative = |p: PathBuf| if p.is_relative() { base.join(p) } else { p };
        for (key, owner) in &file.api_keys {
            check_key(key, owner).map_err(|e| {
                let at = text.find("[api_keys]").map(|s| s..s + 1);
                ConfigError(format!("{}: api_keys: {e}", located(at)))
            })?;
        }
        let mut tools =
            weft_tools::ToolsConfig { mcp: file.mcp, builtins: file.builtins, tools: file.tools };
        tools.resolve_paths(base);
        tools.check().map_err(|e| {
            let key = e.split([':', '[', '.']).next().unwrap_or_default();
            let at = text
                .find(&format!("[{key}"))
                .or_else(|| text.find(&format!("[[{key}")))
                .map(|s| s..s + 1);
            ConfigError(format!("{}: {e}", located(at)))
        })?;
        Ok(Self {
            file: Some(path.to_path_buf()),
            tools,
            addr: file.addr,
            store: file.store,
            durability: file.durability,
            threads: file.threads,
            provider: file.provider.name,
            model: file.provider.model,
            script: file.provider.script.map(relative),
            models: file.provider.models.map(relative),
            providers: file
                .providers
                .into_iter()
                .map(|(name, entry)| {
                    (name, ProviderEntry { script: entry.script.map(relative), ..entry })
                })
                .collect(),
            api_keys: file.api_keys,
            body_bytes: file.limits.body_bytes,
            requests_per_minute: file.limits.requests_per_minute,
            burst: file.limits.burst,
            failed_keys_per_minute: file.limits.failed_keys_per_minute,
            metrics_public: file.metrics.public,
            max_turns: file.limits.max_turns,
            remote_tool_timeout: file.limits.remote_tool_timeout,
            shutdown_grace: file.limits.shutdown_grace,
            lease_ttl: file.limits.lease_ttl,
            end_commit_timeout: file.limits.end_commit_timeout,
            connections: ConnectionLimits {
                header_timeout: file.limits.header_timeout,
                body_timeout: file.limits.body_timeout,
                idle_timeout: file.limits.idle_timeout,
                write_timeout: file.limits.write_timeout,
                max_connections: file.limits.max_connections,
                ws_sockets_per_key: file.limits.ws_sockets_per_key,
                ws_streams_per_socket: file.limits.ws_streams_per_socket,
                ws_streams_per_key: file.limits.ws_streams_per_key,
                ws_send_queue: file.limits.ws_send_queue,
                ws_send_timeout: file.limits.ws_send_timeout,
            },
            cors_origins: file.cors.origins,
            frontend_multitask: file.frontends.multitask,
            telemetry: file.telemetry,
        })
    }
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The shortest API key accepted: shorter ones are guessable.
const MIN_KEY_LEN: usize = 8;

fn check_key(key: &str, owner: &str) -> Result<(), String> {
    if key.len() < MIN_KEY_LEN {
        return Err(format!(
            "an API key must have at least {MIN_KEY_LEN} characters (owner {owner:?})"
        ));
    }
    if !key.chars().all(|c| c.is_ascii_graphic()) {
        return Err(format!("an API key must be printable ASCII without spaces (owner {owner:?})"));
    }
    if owner.trim().is_empty() {
        return Err("every API key needs an owner (key=owner)".into());
    }
    Ok(())
}

/// Parses `anthropic=claude-sonnet-4-5,openai=gpt-4o` (a provider without `=MODEL` gets its
/// model from the request or the server's default).
pub fn parse_providers(text: &str) -> Result<BTreeMap<String, ProviderEntry>, String> {
    let mut providers = BTreeMap::new();
    for (index, item) in text.split(',').map(str::trim).filter(|p| !p.is_empty()).enumerate() {
        let (name, model) = match item.split_once('=') {
            Some((name, model)) => (name.trim(), Some(model.trim().to_string())),
            None => (item, None),
        };
        if name.is_empty() {
            return Err(format!("entry {} has no provider name", index + 1));
        }
        let entry = ProviderEntry { model: model.filter(|m| !m.is_empty()), script: None };
        if providers.insert(name.to_string(), entry).is_some() {
            return Err(format!("entry {}: provider {name:?} is given twice", index + 1));
        }
    }
    Ok(providers)
}

/// Parses `key1=alice,key2=bob`. Messages never repeat a key.
pub fn parse_api_keys(text: &str) -> Result<BTreeMap<String, String>, String> {
    let mut keys = BTreeMap::new();
    for (index, pair) in text.split(',').map(str::trim).filter(|p| !p.is_empty()).enumerate() {
        let Some((key, owner)) = pair.split_once('=') else {
            return Err(format!("entry {} is not KEY=OWNER", index + 1));
        };
        let (key, owner) = (key.trim(), owner.trim());
        check_key(key, owner).map_err(|e| format!("entry {}: {e}", index + 1))?;
        if keys.insert(key.to_string(), owner.to_string()).is_some() {
            return Err(format!("entry {}: the same key is given twice", index + 1));
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests;
