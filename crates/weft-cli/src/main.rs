//! `weft`: run LLM agents from the terminal.
//!
//! This file holds the command line (clap) and the glue; `main` decides the exit code:
//!
//! | code | when |
//! | --- | --- |
//! | 0 | the run completed (or stdout was closed early, as by `weft run … \| head -1`); a `sessions` command did what it was asked |
//! | 1 | the run failed, was aborted, hit `--max-turns` or was suspended on tool calls; a continued session refused the prompt (it waits on tool calls, or runs elsewhere); the session store failed |
//! | 2 | a usage or configuration mistake (bad or contradictory flags, a bad environment variable, unknown provider, unreadable script or models file, a `--store` that cannot be opened, an unknown session ID) |
//! | 130 | the run was interrupted by Ctrl-C (SIGINT) |
//! | 143 | the run was ended by SIGTERM |
//!
//! Every failure is reported as one line on stderr, `weft: <reason>`. In the terminal view a
//! summary line (tokens, cost, model, time: see [`summary`]) comes before it on stderr.

mod chat;
mod remote;
mod render;
mod sanitize;
mod serve;
mod sessions;
mod signals;
mod store;
mod summary;
mod term;
mod tools;

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail};
use clap::{ArgAction, Args, Parser, Subcommand};
use futures::{FutureExt, Stream, StreamExt};
use weft_agent::{
    Agent, AgentBuilder, AgentError, DEFAULT_MAX_TURNS, ExecuteError, ExecuteResult, RunOutcome,
    SessionHandle, SessionOptions, TurnLimit,
};
use weft_core::store::SessionHead;
use weft_core::{EventRecord, Input, SessionStatus, SessionStore, ToolCall};
use weft_llm::config;
use weft_llm::faux::{FauxProvider, FauxScript};
use weft_llm::http::{HttpClient, RetryPolicy, Timeouts};
use weft_llm::models::ModelRegistry;
use weft_protocol::Protocol;

use crate::render::{JsonLines, Renderer, Sink};
use crate::sessions::SessionsCommand;
use crate::signals::{Signal, Signals};
use crate::store::StoreArgs;
use crate::term::Spinner;

/// The allocator of the binary (see Cargo.toml).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Weft: run LLM agents from the terminal.
#[derive(Debug, Parser)]
#[command(name = "weft", version, propagate_version = true)]
struct Cli {
    /// More log output on stderr: -v info, -vv debug, -vvv trace. Without it warnings and errors
    /// are shown, or what RUST_LOG selects (e.g. RUST_LOG=weft_llm=debug).
    #[arg(short, long, action = ArgAction::Count, global = true)]
    verbose: u8,

    #[command(subcommand)]
    command: Command,
}

// Parsed once per process: the size of `run`'s flags does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Run one prompt to its end, streaming the run to the terminal; the session is kept in
    /// the session store (--session ID continues one).
    #[command(after_help = RUN_AFTER_HELP)]
    Run(RunArgs),
    /// Chat interactively: each line is a message to the agent, run here (the flags of weft
    /// run) or on a server (--server URL); approvals are asked at the prompt.
    #[command(after_help = CHAT_AFTER_HELP)]
    Chat(chat::ChatArgs),
    /// The sessions kept in the session store: list, show, delete.
    #[command(subcommand, after_help = SESSIONS_AFTER_HELP)]
    Sessions(SessionsCommand),
    /// List the models Weft knows: prices per million tokens, context window, output limit.
    Models(ModelsArgs),
    /// Serve the agent API over HTTP (SSE and WebSocket): sessions kept in the session store,
    /// runs owned by the server, remote tools and approvals over HTTP.
    Serve(serve::ServeArgs),
    /// The tools runs get: MCP servers, built-in tools, policy (from weft.toml).
    #[command(subcommand)]
    Tools(ToolsCommand),
}

#[derive(Debug, Subcommand)]
enum ToolsCommand {
    /// List every tool with its source (weft, builtin, mcp:NAME), whether it needs approval,
    /// and its parameters (`name?` is optional). MCP servers are started to list theirs.
    List {
        /// The configuration file [default: ./weft.toml, else $WEFT_HOME/weft.toml].
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
struct ModelsArgs {
    /// Only this provider's models (openai, openai-responses, anthropic, gemini, faux).
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,

    /// A JSON file of models to add or override (the format of the built-in registry).
    #[arg(long, value_name = "FILE")]
    models: Option<PathBuf>,
}

const RUN_AFTER_HELP: &str = concat!(
    "Output: the model's text as it streams; thinking dimmed (on a terminal, unless NO_COLOR is \
     set) or prefixed with \"thinking: \"; each tool call as \"[tool] NAME ARGS\", its output \
     indented, then \"[tool] NAME: ok\" or \"[tool] NAME: error\". Control characters in what the \
     model or a tool says are shown as ^[, ^M, <U+009B> … and never reach the terminal. At the \
     end, one line on stderr: \"tokens: IN in (C cached), OUT out (R reasoning) · cost: $X · \
     model: ID · time: T\", with \"· stopped: REASON (…)\" when the last model call did not end \
     normally (length: the answer was cut at the output limit). While the model has not said \
     anything yet and stderr is a terminal, a spinner on stderr shows the time waited. With \
     --json: the Loom stream protocol's NDJSON; with --protocol FORMAT: that wire format, one \
     JSON object per line (no summary line).\n\n",
    "HTTP (every provider but faux): --connect-timeout, --first-byte-timeout, --idle-timeout \
     (DURATION: 30s, 2m, 500ms, or plain seconds such as 30 or 0.5) and --max-retries override \
     WEFT_CONNECT_TIMEOUT, WEFT_FIRST_BYTE_TIMEOUT, WEFT_IDLE_TIMEOUT and WEFT_MAX_RETRIES. \
     Requests that fail before anything streams (connect errors, timeouts, 408/429/5xx) are \
     retried; nothing is retried once content has streamed.\n\n",
    "Built-in tools (local, available to every run):\n",
    "  echo          {\"text\": string}: streams the text back word by word, then returns it\n",
    "  current_time  no arguments: the current UTC time in RFC 3339 (2025-01-31T12:00:00Z)\n",
    "More tools come from the configuration file (--config FILE, else ./weft.toml, else \
     $WEFT_HOME/weft.toml): MCP servers ([[mcp]]), opt-in built-in tools ([builtins]: read_file, \
     list_dir, write_file, fetch_url, shell, current_time, calculator) and per-tool policy \
     ([tools.NAME]); weft tools list shows them all.\n",
    "A call to any other tool gets the error result \"Tool NAME not found\"; the run goes on.\n\n",
    "Faux script (--script): {\"turns\":[{\"thinking\":\"…\",\"text\":\"…\",\"toolCalls\":[{\"name\":\
     \"echo\",\"arguments\":{\"text\":\"hi\"}}],\"chunkSize\":4,\"delayMs\":0},{\"error\":\
     \"overloaded\"}]}; each model call plays the next turn.\n\n",
    "Sessions: every run is kept in a session store, the SQLite file $WEFT_HOME/weft.db by \
     default (WEFT_HOME defaults to ~/.weft); --store memory|sqlite:PATH|postgres://… picks \
     another. When the run starts, its session's id is printed on stderr (\"session: ID\"). \
     --session ID continues that session: the prompt becomes a new user message in it and the \
     model sees the whole conversation; the provider, model and system prompt stay the \
     session's (leave them out, or give the same). A session waiting on remote tool calls or \
     approvals, or running in another process, refuses a new prompt (exit 1). See weft \
     sessions --help.\n\n",
    "The faux provider plays its script's turns per session, counting them within one process: \
     a session continued by a new weft run --session plays the script from its first turn \
     again (the model still sees the whole conversation). Fine for demos and tests.\n\n",
    "Exit status: 0 completed; 1 failed, aborted, max turns reached or suspended on tool calls, \
     or a continued session refused the prompt; 2 usage or configuration error (including \
     contradictory flags, bad WEFT_* or *_BASE_URL variables, a --store that cannot be opened \
     and an unknown session ID); 130 interrupted (Ctrl-C); 143 terminated (SIGTERM). Both \
     signals abort the run first, so --json output still ends with its reply frame. A \
     failure's reason is one line on stderr."
);

const CHAT_AFTER_HELP: &str = "Commands at the prompt: /session (the current session's id), \
     /session ID (switch to an existing session), /new (a new session), /model [ID] (show or set \
     the model of the next runs), /help, /quit. Ctrl-C aborts a running run and the chat goes \
     on; at the prompt Ctrl-C clears the line and Ctrl-D quits. Calls that need approval (--approve \
     TOOL locally, the server's tools with --server) are asked at the prompt: y runs the call, n \
     denies it (the model sees the denial). Sessions are kept in the session store as for weft \
     run (see weft run --help). The prompt's history is kept in $WEFT_HOME/chat_history.";

const SESSIONS_AFTER_HELP: &str = "Every command takes --store URL: memory, sqlite:PATH or \
     postgres://… [default: the SQLite file $WEFT_HOME/weft.db, WEFT_HOME defaulting to \
     ~/.weft]. Exit status: 0 done; 1 the store failed (or delete refused a running session); \
     2 usage error, a --store that cannot be opened or an unknown session ID.";

/// The providers that call a model over HTTP, with a model to suggest when none is given.
const HTTP_PROVIDERS: [(&str, &str); 4] = [
    ("openai", "gpt-4.1-mini"),
    ("openai-responses", "gpt-5-mini"),
    ("anthropic", "claude-sonnet-4-20250514"),
    ("gemini", "gemini-2.5-flash"),
];

#[derive(Debug, Args)]
struct RunArgs {
    /// The user message that starts the run.
    prompt: String,

    /// Continue this session (its id, as `weft run` printed it on stderr): the prompt becomes a
    /// new user message in it, and the model sees the whole conversation. Without it, a new
    /// session is created.
    #[arg(long, value_name = "ID")]
    session: Option<String>,

    #[command(flatten)]
    store: StoreArgs,

    #[command(flatten)]
    remote: remote::ServerArgs,

    /// The model provider: openai (Chat Completions, also any OpenAI-compatible server through
    /// OPENAI_BASE_URL), openai-responses, anthropic, gemini, or faux (a scripted provider for
    /// tests and offline demos; the default when --script is given). Keys and base URLs come from
    /// OPENAI_API_KEY/OPENAI_BASE_URL, ANTHROPIC_API_KEY/ANTHROPIC_BASE_URL,
    /// GEMINI_API_KEY/GEMINI_BASE_URL. With --session, the session's provider is the default
    /// (and the only one accepted).
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,

    /// The faux provider's script: a JSON file of turns (required with --provider faux, refused
    /// with any other provider).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,

    /// The configuration file whose tools the run gets (`[[mcp]]`, `[builtins]`,
    /// `[tools.NAME]`) [default: ./weft.toml, else $WEFT_HOME/weft.toml].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    /// The system prompt of a new session (a continued session keeps its own).
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,

    /// The model id [default: faux for the faux provider; with --session, the session's model,
    /// the only one accepted].
    #[arg(long, value_name = "ID")]
    model: Option<String>,

    /// Write the run as the Loom stream protocol's NDJSON (one JSON object per line: envelope,
    /// node runs, the reply frame last) and nothing else on stdout. Cannot be combined with
    /// --protocol.
    #[arg(long, conflicts_with = "protocol")]
    json: bool,

    /// Write the run in this wire format, one JSON object per line: native (the agent plan's
    /// events), loom (what --json writes), loom-export, aceai, ag-ui or vercel.
    #[arg(long, value_name = "FORMAT")]
    protocol: Option<Protocol>,

    /// The most model calls the run may make.
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_MAX_TURNS,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    max_turns: u32,

    #[command(flatten)]
    modes: ModeArgs,

    /// A JSON file of models to add or override in the registry costs are computed from (the
    /// format of crates/weft-llm/models.json; entries for known models change only the fields
    /// they give). Applies to every provider, faux included.
    #[arg(long, value_name = "FILE")]
    models: Option<PathBuf>,

    // The help says what it bounds and its default: see `http_help`.
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = duration_arg,
        allow_hyphen_values = true,
        help = http_help("connect-timeout"),
    )]
    connect_timeout: Option<Duration>,

    // The help says what it bounds and its default: see `http_help`.
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = duration_arg,
        allow_hyphen_values = true,
        help = http_help("first-byte-timeout"),
    )]
    first_byte_timeout: Option<Duration>,

    // The help says what it bounds and its default: see `http_help`.
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = duration_arg,
        allow_hyphen_values = true,
        help = http_help("idle-timeout"),
    )]
    idle_timeout: Option<Duration>,

    // The help says what it bounds and its default: see `http_help`.
    #[arg(long, value_name = "N", allow_negative_numbers = true, help = http_help("max-retries"))]
    max_retries: Option<u32>,
}

impl RunArgs {
    /// The HTTP flags given, with the environment variable each overrides.
    fn http_flags(&self) -> [(&'static str, &'static str, bool); 4] {
        [
            ("--connect-timeout", config::CONNECT_TIMEOUT_VAR, self.connect_timeout.is_some()),
            (
                "--first-byte-timeout",
                config::FIRST_BYTE_TIMEOUT_VAR,
                self.first_byte_timeout.is_some(),
            ),
            ("--idle-timeout", config::IDLE_TIMEOUT_VAR, self.idle_timeout.is_some()),
            ("--max-retries", config::MAX_RETRIES_VAR, self.max_retries.is_some()),
        ]
    }
}

/// The help of an HTTP flag, with the default it overrides (`weft-llm`'s, so never stale).
fn http_help(flag: &str) -> String {
    let (timeouts, retry) = (Timeouts::default(), RetryPolicy::default());
    let duration = |d: Duration| humantime::format_duration(d).to_string();
    let (what, variable, default) = match flag {
        "connect-timeout" => (
            "the longest wait to connect to the server (DURATION: 30s, 2m, 500ms, or plain \
             seconds)",
            config::CONNECT_TIMEOUT_VAR,
            duration(timeouts.connect),
        ),
        "first-byte-timeout" => (
            "the longest wait from sending a request to the response's headers, per try",
            config::FIRST_BYTE_TIMEOUT_VAR,
            duration(timeouts.first_byte),
        ),
        "idle-timeout" => (
            "the longest silence inside a streaming response",
            config::IDLE_TIMEOUT_VAR,
            duration(timeouts.idle),
        ),
        _ => (
            "how many times a request that failed before anything streamed is tried again \
             (0: never)",
            config::MAX_RETRIES_VAR,
            retry.max_retries.to_string(),
        ),
    };
    format!("HTTP providers: {what}. Overrides {variable} [default: {default}]")
}

/// A timeout flag's value: a duration as `weft-llm` reads them, longer than zero.
fn duration_arg(text: &str) -> Result<Duration, String> {
    let duration = config::parse_duration(text).map_err(|e| e.reason.to_string())?;
    if duration.is_zero() {
        return Err("a timeout must be more than zero".into());
    }
    Ok(duration)
}

/// Why `weft` exits non-zero.
#[derive(Debug)]
struct Failure {
    code: u8,
    /// The one line for stderr (without the `weft: ` prefix); `None` exits quietly.
    message: Option<String>,
}

impl Failure {
    /// A usage or configuration mistake (exit 2).
    fn usage(error: &anyhow::Error) -> Self {
        // `{:#}` would repeat sources that the errors used here already print themselves.
        Self { code: 2, message: Some(format!("{error}")) }
    }

    /// A run that did not complete (exit 1).
    fn run(message: impl Into<String>) -> Self {
        Self { code: 1, message: Some(message.into()) }
    }
}

fn main() -> ExitCode {
    // `weft --weft-shell-reaper COMMAND`: the process a `shell` call runs under (never returns).
    weft_tools::builtin::shell::reaper::run_if_asked();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return clap_failure(&error),
    };
    term::init_logging(cli.verbose);
    let outcome = match cli.command {
        Command::Run(args) => run_command(args),
        Command::Chat(args) => chat::command(args),
        Command::Sessions(command) => sessions::command(command, use_color()),
        Command::Models(args) => models_command(&args).map_err(|e| Failure::usage(&e)),
        Command::Serve(args) => serve::command(args),
        Command::Tools(ToolsCommand::List { config }) => tools::list_command(config.as_deref()),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if let Some(message) = failure.message {
                // One line, whatever the message holds, and nothing in it (a server's error
                // body, a model's words) may drive the terminal.
                let line = sanitize::visible(&message.replace('\n', " "));
                term::eprint_line(&format!("weft: {line}"));
            }
            ExitCode::from(failure.code)
        }
    }
}

/// A command line clap refused, as one line (exit 2); help and version print as clap does.
fn clap_failure(error: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        error.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        error.exit();
    }
    // The rendered error: "error: WHAT", maybe "  tip: …" lines, then usage; keep what and tips.
    let rendered = error.render().to_string();
    let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
    let what = lines.next().unwrap_or("invalid arguments");
    let what = what.strip_prefix("error: ").unwrap_or(what);
    let mut line = format!("weft: {what}");
    for tip in lines.filter(|l| l.starts_with("tip: ")) {
        line.push_str("; ");
        line.push_str(tip);
    }
    line.push_str(" (see --help)");
    let _ = writeln!(io::stderr(), "{}", sanitize::visible(&line));
    ExitCode::from(2)
}

/// The built-in model registry, with the overrides of `file` if one is given.
fn registry(file: Option<&Path>) -> anyhow::Result<Arc<ModelRegistry>> {
    let builtin = ModelRegistry::builtin();
    let Some(path) = file else { return Ok(builtin) };
    let json = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("cannot read models file {}: {e}", path.display()))?;
    let merged = builtin
        .with_overrides(&json)
        .map_err(|e| anyhow!("invalid models file {}: {e}", path.display()))?;
    Ok(Arc::new(merged))
}

/// `weft models`: one line per model.
fn models_command(args: &ModelsArgs) -> anyhow::Result<()> {
    if let Some(name) = args.provider.as_deref()
        && !config::PROVIDER_NAMES.contains(&name)
    {
        bail!("unknown provider {name:?}: expected one of {}", config::PROVIDER_NAMES.join(", "));
    }
    let registry = registry(args.models.as_deref())?;
    let wanted =
        args.provider.as_deref().map(|p| if p == "openai-responses" { "openai" } else { p });
    let mut out = BufWriter::new(io::stdout());
    let line = writeln!(
        out,
        "{:<10} {:<28} {:>8} {:>8} {:>10} {:>11} {:>9} {:>8}",
        "provider", "model", "in $/M", "out $/M", "cached $/M", "c-write $/M", "context", "max-out"
    );
    let mut result = line.and_then(|()| {
        for m in registry.list().iter().filter(|m| wanted.is_none_or(|p| m.provider == p)) {
            let p = &m.prices;
            writeln!(
                out,
                "{:<10} {:<28} {:>8} {:>8} {:>10} {:>11} {:>9} {:>8}",
                sanitize::visible(&m.provider),
                sanitize::visible(&m.id),
                p.input,
                p.output,
                p.cache_read,
                p.cache_write,
                m.context_window,
                m.max_output
            )?;
        }
        out.flush()
    });
    if matches!(&result, Err(e) if e.kind() == io::ErrorKind::BrokenPipe) {
        result = Ok(());
    }
    result.map_err(|e| anyhow!("cannot write to stdout: {e}"))
}

/// What `weft run` set up: the agent, and what the summary line needs.
struct Setup {
    agent: Agent,
    /// The provider's name, as `--provider` spells it.
    provider: String,
    /// The model asked for.
    model: String,
    /// The registry costs come from.
    registry: Arc<ModelRegistry>,
}

/// The agent `weft run` is about to build: everything but its store.
struct Planned {
    builder: AgentBuilder,
    /// The configured tools, started when the agent is built.
    tools: weft_tools::ToolsConfig,
    provider: String,
    model: String,
    registry: Arc<ModelRegistry>,
}

impl Planned {
    /// Builds the agent on `store`, with its tools (MCP servers started).
    async fn build(self, store: Arc<dyn SessionStore>) -> anyhow::Result<Setup> {
        let builder = tools::with_tools(self.builder, &self.tools).await?;
        let identity = crate::store::identity(&*store);
        let agent = builder
            .identity(identity)
            .store(store)
            .build()
            .map_err(|e| anyhow!("cannot set up the agent: {e}"))?;
        Ok(Setup { agent, provider: self.provider, model: self.model, registry: self.registry })
    }
}

/// What `weft run` does with a session.
enum Plan<'a> {
    /// Creates one, for this agent.
    New(Box<Planned>),
    /// Continues the one with this id.
    Continue(&'a str),
}

/// The async runtime of a command.
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::run(format!("cannot start the async runtime: {e}")))
}

/// The reasoning mode of a new session and its parameters (`weft run`, `weft chat`).
#[derive(Debug, Clone, Args)]
pub(crate) struct ModeArgs {
    /// The reasoning mode of a new session: react (think, act, observe), tot (tree of
    /// thoughts) or got (graph of thoughts).
    #[arg(
        long,
        value_name = "MODE",
        value_parser = clap::builder::PossibleValuesParser::new(weft_agent::Modes::builtin().names())
    )]
    pub(crate) mode: Option<String>,

    /// tot: candidate thoughts asked for at each expansion [default: 3].
    #[arg(long, value_name = "K", value_parser = clap::value_parser!(u32).range(1..))]
    breadth: Option<u32>,

    /// tot: the deepest a path may go [default: 3].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    depth: Option<u32>,

    /// tot: how the tree is searched on backtracking: dfs or bfs [default: dfs].
    #[arg(long, value_name = "ORDER", value_parser = ["dfs", "bfs"])]
    search: Option<String>,

    /// tot, got: model calls the run may make in all [default: 30 for tot, 40 for got].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    max_model_calls: Option<u32>,

    /// got: graph nodes that run at once [default: 4].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    concurrency: Option<u32>,

    /// got: completed nodes may be expanded into sub-graphs (adaptive graph of thoughts).
    #[arg(long)]
    adaptive: bool,

    /// got: the most graph nodes the plan and its expansions may have [default: 12].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    node_budget: Option<u32>,
}

impl ModeArgs {
    /// The mode's parameters given on the command line (camelCase, as the server reads them).
    pub(crate) fn mode_parameters(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut map = serde_json::Map::new();
        let mut put = |key: &str, value: Option<serde_json::Value>| {
            if let Some(value) = value {
                map.insert(key.to_string(), value);
            }
        };
        put("breadth", self.breadth.map(Into::into));
        put("depth", self.depth.map(Into::into));
        put("search", self.search.clone().map(Into::into));
        put("maxModelCalls", self.max_model_calls.map(Into::into));
        put("concurrency", self.concurrency.map(Into::into));
        put("adaptive", self.adaptive.then_some(true.into()));
        put("nodeBudget", self.node_budget.map(Into::into));
        map
    }

    /// The mode of a new session, when flags ask for one.
    pub(crate) fn mode(&self) -> anyhow::Result<Option<weft_agent::Mode>> {
        let parameters = self.mode_parameters();
        if self.mode.is_none() && parameters.is_empty() {
            return Ok(None);
        }
        let name = self.mode.as_deref().unwrap_or("react");
        weft_agent::Modes::builtin()
            .parse(name, &parameters)
            .map(Some)
            .map_err(|e| anyhow!("invalid mode flags: {e}"))
    }
}

/// `weft run`.
fn run_command(args: RunArgs) -> Result<(), Failure> {
    if let Some(client) = args.remote.client() {
        return remote_run_command(&args, client);
    }
    // A new session: every mistake in the flags is found before the store is touched. A
    // continued one: the session's head says which provider and model the flags must match.
    let plan = match args.session.as_deref() {
        None => Plan::New(Box::new(build_agent(&args, None).map_err(|e| Failure::usage(&e))?)),
        Some(id) => Plan::Continue(id),
    };
    let runtime = runtime()?;
    let stdout = BufWriter::new(io::stdout());
    let protocol = args.protocol.or(args.json.then_some(Protocol::Loom));
    let terminal_view = protocol.is_none();
    let mut sink: Box<dyn Sink> = if let Some(protocol) = protocol {
        Box::new(JsonLines::new(stdout, protocol))
    } else {
        Box::new(Renderer::new(stdout, use_color()))
    };
    runtime.block_on(async {
        let mut signals = Signals::new();
        let store = args.store.open().await.map_err(|e| Failure::usage(&e))?;
        let (setup, session) = match plan {
            Plan::New(planned) => {
                let setup = planned.build(store).await.map_err(|e| Failure::usage(&e))?;
                let mode = args.modes.mode().map_err(|e| Failure::usage(&e))?;
                let session = setup
                    .agent
                    .create_session(SessionOptions { mode, ..SessionOptions::default() })
                    .await
                    .map_err(|e| Failure::run(format!("cannot create the session: {e}")))?;
                (setup, session)
            }
            Plan::Continue(id) => {
                let (setup, session) = continued(&args, id, store).await?;
                if session.is_recovering() {
                    // A process that ran it died mid-run: that run goes on to its end first
                    // (calls it left running are answered as interrupted), then the prompt runs.
                    term::eprint_line(&format!(
                        "session {}: the previous run was interrupted; continuing",
                        sanitize::visible(id)
                    ));
                }
                (setup, session)
            }
        };
        let started = Instant::now();
        let agent = &setup.agent;
        let stream = agent.execute(&session, Input::text(args.prompt.clone())).await.map_err(
            |e| match e {
                // The session's own reasons, as they are.
                ExecuteError::AwaitingToolCalls { .. } | ExecuteError::AlreadyRunning(_) => {
                    Failure::run(e.to_string())
                }
                other => Failure::run(format!("cannot start the run: {other}")),
            },
        )?;
        term::eprint_line(&format!("session: {}", sanitize::visible(&session.id())));
        let abort = stream.abort_handle();
        // The log's own records: nothing is copied on the way to the output.
        let mut stream = stream.records();
        let mut spinner = Spinner::for_stderr();
        let driven =
            drive(&mut stream, || abort.abort(), sink.as_mut(), &mut signals, &mut spinner).await;
        let ended = match driven {
            Ok(Driven::Ended(signal)) => {
                let result = stream.result().await;
                if terminal_view {
                    let priced = setup.registry.get(&setup.provider, &setup.model).is_some();
                    let line = summary::line(&result, &setup.model, priced, started.elapsed());
                    term::eprint_line(&sanitize::visible(&line));
                }
                outcome(&result, signal, args.max_turns)
            }
            Ok(Driven::Abandoned(signal)) => {
                abort.abort();
                Err(Failure { code: signal.exit_code(), message: Some(signal.describe().into()) })
            }
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                // Whoever read our output has seen enough (`| head`): not an error.
                abort.abort();
                Ok(())
            }
            Err(e) => {
                abort.abort();
                Err(Failure::run(format!("cannot write to stdout: {e}")))
            }
        };
        if args.store.in_memory() {
            // Sessions in memory end with the process, which is about to exit: freeing a long
            // run's log one event at a time (a million records for a million deltas) would only
            // delay the exit. Stores on disk are dropped as usual, so they close cleanly.
            std::mem::forget(setup);
        }
        ended
    })
}

/// `weft run --server URL`: the run is the server's; its events are shown as a local run's.
fn remote_run_command(args: &RunArgs, client: weft_client::Client) -> Result<(), Failure> {
    let local_only = [
        ("--store", args.store.store.is_some()),
        ("--script", args.script.is_some()),
        ("--models", args.models.is_some()),
        ("--config", args.config.is_some()),
    ];
    let http = args.http_flags().into_iter().map(|(flag, _, set)| (flag, set));
    if let Some((flag, _)) = local_only.into_iter().chain(http).find(|(_, set)| *set) {
        return Err(Failure::usage(&anyhow!(
            "{flag} is for local runs: with --server, the server's store, providers and \
             settings are used"
        )));
    }
    let mut options = weft_client::ExecuteOptions::new();
    if let Some(id) = &args.session {
        options = options.continue_session(id.clone());
    }
    if let Some(provider) = &args.provider {
        options = options.provider(provider.clone());
    }
    if let Some(model) = &args.model {
        options = options.model(model.clone());
    }
    if let Some(system) = &args.system {
        options = options.system_prompt(system.clone());
    }
    if args.max_turns != DEFAULT_MAX_TURNS {
        options = options.max_turns(args.max_turns);
    }
    if let Some(mode) = &args.modes.mode {
        options = options.mode(mode.clone());
    }
    let parameters = args.modes.mode_parameters();
    if !parameters.is_empty() {
        options = options.mode_options(serde_json::Value::Object(parameters));
    }
    let protocol = args.protocol.or(args.json.then_some(Protocol::Loom));
    let run =
        remote::RemoteRun { client, prompt: &args.prompt, options, model: args.model.as_deref() };
    let runtime = runtime()?;
    runtime.block_on(async {
        let mut signals = Signals::new();
        let stdout = BufWriter::new(io::stdout());
        match protocol {
            Some(protocol) if protocol != Protocol::Native => {
                let mut out = stdout;
                let status = remote::run_frames(run, protocol, &mut out, &mut signals).await?;
                match status {
                    SessionStatus::Completed => Ok(()),
                    status => Err(Failure::run(format!("the run ended {status}"))),
                }
            }
            _ => {
                let mut sink: Box<dyn Sink> = match protocol {
                    Some(protocol) => Box::new(JsonLines::new(stdout, protocol)),
                    None => Box::new(Renderer::new(stdout, use_color())),
                };
                let (result, driven) =
                    remote::run_native(run, sink.as_mut(), &mut signals, protocol.is_none())
                        .await?;
                match (driven, result) {
                    (Driven::Abandoned(signal), _) => Err(Failure {
                        code: signal.exit_code(),
                        message: Some(signal.describe().into()),
                    }),
                    (Driven::Ended(signal), Some(result)) => {
                        outcome(&result, signal, args.max_turns)
                    }
                    // Whoever read the output has seen enough (`| head`): not an error.
                    (Driven::Ended(_), None) => Ok(()),
                }
            }
        }
    })
}

/// The agent and the session of `weft run --session ID`: the flags are checked against the
/// stored session (its provider, model and system prompt), then the session is loaded.
async fn continued(
    args: &RunArgs,
    id: &str,
    store: Arc<dyn SessionStore>,
) -> Result<(Setup, SessionHandle), Failure> {
    let head = match store.head(id).await {
        Ok(Some(head)) => head,
        Ok(None) => return Err(sessions::unknown_session(id)),
        Err(e) => return Err(Failure::run(e.to_string())),
    };
    let planned = build_agent(args, Some(&head)).map_err(|e| Failure::usage(&e))?;
    let setup = planned.build(store).await.map_err(|e| Failure::usage(&e))?;
    let session = match setup.agent.session(id).await {
        Ok(Some(session)) => session,
        // Deleted in between.
        Ok(None) => return Err(sessions::unknown_session(id)),
        Err(AgentError::Store(e)) => return Err(Failure::run(e.to_string())),
        // The session's own tools clash with the built-in ones.
        Err(e) => return Err(Failure::usage(&anyhow!("cannot continue session {id}: {e}"))),
    };
    Ok((setup, session))
}

/// The agent `args` describe: provider, model, system prompt, limits and the built-in tools.
/// Every mistake in them (contradictory flags, a bad file or environment variable) is found
/// here, before anything runs. `head` is the session `--session` continues: its provider and
/// model are the defaults, and flags that contradict it (another provider, model or system
/// prompt) are refused, since a stored session keeps its own.
fn build_agent(args: &RunArgs, head: Option<&SessionHead>) -> anyhow::Result<Planned> {
    let provider = match (args.provider.as_deref(), &args.script, head) {
        (Some(name), _, _) => name,
        (None, Some(_), _) => "faux",
        (None, None, Some(head)) => head.provider.as_str(),
        (None, None, None) => bail!(
            "no provider: use --provider openai|openai-responses|anthropic|gemini --model ID, \
             or --provider faux --script FILE"
        ),
    };
    if let Some(head) = head {
        check_continuation(args, provider, head)?;
    }
    let http = HTTP_PROVIDERS.iter().find(|(n, _)| *n == provider);
    if provider != "faux" && http.is_none() {
        bail!(
            "unknown provider {provider:?}: expected one of {}",
            config::PROVIDER_NAMES.join(", ")
        );
    }
    // The models file applies to every provider, so its mistakes are every provider's.
    let registry = registry(args.models.as_deref())?;
    let (builder, model) = match http {
        None => {
            if let Some((flag, _, _)) = args.http_flags().into_iter().find(|(_, _, set)| *set) {
                bail!("{flag} is for HTTP providers: the faux provider makes no HTTP calls");
            }
            let Some(path) = &args.script else {
                if let Some(head) = head {
                    bail!(
                        "session {} was run by the faux provider: continue it with --script FILE",
                        sanitize::visible(&head.id)
                    );
                }
                bail!("--provider faux needs --script FILE (a JSON script of the model's turns)");
            };
            let script = FauxScript::from_file(path)?;
            let model = match head {
                Some(head) => head.model.clone(),
                None => args.model.clone().unwrap_or_else(|| "faux".to_string()),
            };
            let faux = FauxProvider::new(script).with_registry(registry.clone());
            (Agent::builder(faux), model)
        }
        Some((name, example)) => {
            if args.script.is_some() {
                bail!(
                    "--script is for the faux provider, not {name} (drop --script, or use \
                     --provider faux)"
                );
            }
            let Some(model) = args.model.clone().or_else(|| head.map(|h| h.model.clone())) else {
                bail!("--provider {name} needs --model ID (for example --model {example})");
            };
            let mut settings = config::settings_from_process_env(name)?;
            settings.models = registry.clone();
            let provider = config::provider_from_settings(name, settings, http_client(args)?)?;
            (Agent::builder_shared(provider), model)
        }
    };
    let tools = tools::load_config(args.config.as_deref())?;
    let mut builder = builder.model(model.clone()).max_turns(args.max_turns);
    if let Some(system) = &args.system {
        builder = builder.system_prompt(system.clone());
    }
    Ok(Planned { builder, tools, provider: provider.to_string(), model, registry })
}

/// Refuses flags that contradict the session `--session` continues: a stored session keeps the
/// provider, model and system prompt it was created with.
fn check_continuation(args: &RunArgs, provider: &str, head: &SessionHead) -> anyhow::Result<()> {
    let id = sanitize::visible(&head.id);
    let shown = |text: &str| sanitize::visible(text);
    if provider != head.provider {
        bail!(
            "session {id} was run by provider {}: continue it with --provider {} (or without \
             --provider); a session cannot change provider",
            shown(&head.provider),
            shown(&head.provider)
        );
    }
    if let Some(model) = args.model.as_deref()
        && model != head.model
    {
        bail!(
            "session {id} uses model {}: continue it with that model (or without --model); a \
             session cannot change model",
            shown(&head.model)
        );
    }
    if let Some(mode) = args.modes.mode()?
        && mode != weft_agent::Mode::of_options(&head.options)
    {
        let kept = weft_agent::Mode::of_options(&head.options);
        bail!(
            "session {id} runs in mode {} with the parameters it was created with: continue it              without mode flags (--mode, --breadth, …); a session cannot change mode",
            kept.name()
        );
    }
    if let Some(system) = args.system.as_deref()
        && Some(system) != head.system_prompt.as_deref()
    {
        bail!(
            "session {id} keeps the system prompt it was created with: continue it without \
             --system"
        );
    }
    Ok(())
}

/// The HTTP client of a run: timeouts and retries from the WEFT_* variables, each overridden by
/// its flag (a variable whose flag is given is not read at all).
fn http_client(args: &RunArgs) -> anyhow::Result<HttpClient> {
    let flags = args.http_flags();
    let overridden = |name: &str| flags.iter().any(|(_, var, set)| *set && *var == name);
    let (mut timeouts, mut retry) =
        config::http_from_env(|name| (!overridden(name)).then(|| std::env::var(name).ok())?)?;
    if let Some(d) = args.connect_timeout {
        timeouts.connect = d;
    }
    if let Some(d) = args.first_byte_timeout {
        timeouts.first_byte = d;
    }
    if let Some(d) = args.idle_timeout {
        timeouts.idle = d;
    }
    if let Some(n) = args.max_retries {
        retry.max_retries = n;
    }
    HttpClient::new(timeouts, retry).map_err(|e| anyhow!("cannot set up the HTTP client: {e}"))
}

/// Colour on stdout: only on a terminal, and never when `NO_COLOR` is set to anything.
fn use_color() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// How the stream of a run ended.
#[derive(Debug, PartialEq, Eq)]
enum Driven {
    /// It ran to its end (after a signal had aborted it, if one came).
    Ended(Option<Signal>),
    /// A second signal: stop waiting for the aborted run.
    Abandoned(Signal),
}

/// What woke [`drive`] up while the run had nothing to say.
enum Wake {
    Event(Option<Arc<EventRecord>>),
    Signal(Signal),
    Tick,
}

/// Shows the run as it happens; a first signal (Ctrl-C, SIGTERM) calls `abort` (what streamed
/// until then is kept and the run's end still shown), a second one stops waiting. However the
/// events end (the run's end, a panicked run task, a second signal), the sink is finished, so
/// JSON output always ends with its format's closing frames.
async fn drive<S>(
    stream: &mut S,
    abort: impl Fn(),
    sink: &mut dyn Sink,
    signals: &mut Signals,
    spinner: &mut Spinner,
) -> io::Result<Driven>
where
    S: Stream<Item = Arc<EventRecord>> + Unpin,
{
    let mut signalled = None;
    let driven = loop {
        let event = match stream.next().now_or_never() {
            Some(event) => event,
            None => {
                // The run has nothing more for now: show what it said before waiting.
                sink.flush()?;
                let ticking = spinner.waiting();
                let wake = tokio::select! {
                    event = stream.next() => Wake::Event(event),
                    signal = signals.next() => Wake::Signal(signal),
                    () = tokio::time::sleep(term::TICK), if ticking => Wake::Tick,
                };
                match wake {
                    Wake::Event(event) => event,
                    Wake::Tick => {
                        spinner.tick(sink.mid_line());
                        continue;
                    }
                    Wake::Signal(signal) => match signalled {
                        Some(first) => break Driven::Abandoned(first),
                        None => {
                            signalled = Some(signal);
                            spinner.erase();
                            abort();
                            continue;
                        }
                    },
                }
            }
        };
        let Some(record) = event else { break Driven::Ended(signalled) };
        spinner.observe(&record.event);
        sink.node(record.node_id.as_ref());
        sink.event(record.seq, &record.event)?;
    };
    spinner.erase();
    sink.finish()?;
    sink.flush()?;
    Ok(driven)
}

/// The exit of a run that ended: success only when it completed.
fn outcome(result: &ExecuteResult, signal: Option<Signal>, max_turns: u32) -> Result<(), Failure> {
    let error = result.error.as_deref();
    match result.status {
        SessionStatus::Completed => Ok(()),
        SessionStatus::Aborted => Err(match signal {
            Some(signal) => Failure {
                code: signal.exit_code(),
                message: Some(format!("{}: the run was aborted", signal.describe())),
            },
            None => Failure::run(match error {
                Some(e) => format!("the run was aborted: {e}"),
                None => "the run was aborted".to_string(),
            }),
        }),
        // A reasoning mode's own failure (every path failed, a refused plan) says so itself.
        SessionStatus::Error
            if result
                .steps
                .iter()
                .any(|s| s.annotations.extra.get("mode").is_some_and(|m| m != "react")) =>
        {
            Err(Failure::run(format!("the run failed: {}", error.unwrap_or("unknown error"))))
        }
        SessionStatus::Error => Err(Failure::run(format!(
            "the model call failed: {}",
            error.unwrap_or("unknown error")
        ))),
        // A mode's bound of model calls names itself.
        SessionStatus::MaxTurns
            if matches!(result.outcome, RunOutcome::MaxTurns { limit: TurnLimit::ModelCalls }) =>
        {
            Err(Failure::run(format!("run stopped: {}", error.unwrap_or_default())))
        }
        SessionStatus::MaxTurns => {
            Err(Failure::run(format!("run stopped: max_turns ({max_turns}) reached")))
        }
        SessionStatus::AwaitingToolExecution => Err(Failure::run(format!(
            "run suspended: it awaits results of remote tool calls {}, which weft run cannot \
             supply yet",
            describe(&result.pending_tool_calls)
        ))),
        SessionStatus::AwaitingApproval => Err(Failure::run(format!(
            "run suspended: tool calls {} need approval, which weft run cannot ask for yet",
            describe(&result.pending_approvals)
        ))),
        status @ (SessionStatus::Idle | SessionStatus::Running) => {
            Err(Failure::run(format!("the run ended with unexpected status {status}")))
        }
    }
}

/// `name (id), …` of some tool calls.
fn describe(calls: &[ToolCall]) -> String {
    let names: Vec<String> = calls.iter().map(|c| format!("{} ({})", c.name, c.id)).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use weft_core::AgentEvent;

    use super::*;

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }

    #[test]
    fn max_turns_must_be_positive_and_provider_is_free_text() {
        let err = Cli::try_parse_from(["weft", "run", "hi", "--max-turns", "0"]).unwrap_err();
        assert_eq!(err.kind(), clap::error::ErrorKind::ValueValidation);
        let Ok(Cli { command: Command::Run(args), .. }) =
            Cli::try_parse_from(["weft", "run", "hi", "--provider", "anthropic"])
        else {
            panic!("a provider name is parsed as text, and checked later")
        };
        let err = build_agent(&args, None).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(
            err,
            "--provider anthropic needs --model ID (for example --model claude-sonnet-4-20250514)"
        );
    }

    fn result(status: SessionStatus, error: Option<&str>) -> ExecuteResult {
        ExecuteResult {
            session_id: "s".into(),
            status,
            outcome: RunOutcome::from_status(status, error),
            messages: vec![],
            pending_tool_calls: vec![],
            pending_approvals: vec![],
            usage: Default::default(),
            cost: Default::default(),
            steps: vec![],
            error: error.map(str::to_string),
        }
    }

    fn exit(result: &ExecuteResult, signal: Option<Signal>) -> (u8, String) {
        match outcome(result, signal, 7) {
            Ok(()) => (0, String::new()),
            Err(f) => (f.code, f.message.unwrap_or_default()),
        }
    }

    #[test]
    fn only_a_completed_run_exits_0() {
        let int = Some(Signal::Interrupt);
        assert_eq!(exit(&result(SessionStatus::Completed, None), None), (0, String::new()));
        // A signal that came too late to stop the run does not fail it.
        assert_eq!(exit(&result(SessionStatus::Completed, None), int), (0, String::new()));
        assert_eq!(
            exit(&result(SessionStatus::Error, Some("overloaded")), None),
            (1, "the model call failed: overloaded".into())
        );
        assert_eq!(
            exit(&result(SessionStatus::MaxTurns, Some("whatever")), None),
            (1, "run stopped: max_turns (7) reached".into())
        );
        assert_eq!(
            exit(&result(SessionStatus::Aborted, None), int),
            (130, "interrupted: the run was aborted".into())
        );
        assert_eq!(
            exit(&result(SessionStatus::Aborted, None), Some(Signal::Terminate)),
            (143, "terminated: the run was aborted".into())
        );
        assert_eq!(exit(&result(SessionStatus::Aborted, None), None).0, 1);
    }

    #[test]
    fn a_modes_bound_of_model_calls_names_itself() {
        let error = "the run stopped after 3 model calls (tot maxModelCalls)";
        let mut r = result(SessionStatus::MaxTurns, Some(error));
        r.outcome = RunOutcome::MaxTurns { limit: TurnLimit::ModelCalls };
        assert_eq!(exit(&r, None), (1, format!("run stopped: {error}")));
        // The session's max_turns says so in the CLI's words, whatever the error's.
        r.outcome = RunOutcome::MaxTurns { limit: TurnLimit::MaxTurns };
        assert_eq!(exit(&r, None), (1, "run stopped: max_turns (7) reached".into()));
    }

    #[test]
    fn a_suspended_run_exits_1_naming_what_it_waits_for() {
        let call = ToolCall {
            id: "c9".into(),
            name: "read_page".into(),
            arguments: serde_json::json!({}).into(),
        };
        let mut r = result(SessionStatus::AwaitingToolExecution, None);
        r.pending_tool_calls = vec![call.clone()];
        let (code, message) = exit(&r, None);
        assert_eq!(code, 1);
        assert!(message.starts_with("run suspended") && message.contains("read_page (c9)"));
        let mut r = result(SessionStatus::AwaitingApproval, None);
        r.pending_approvals = vec![call];
        let (code, message) = exit(&r, None);
        assert_eq!(code, 1);
        assert!(message.contains("read_page (c9) need approval"), "{message}");
    }

    /// A sink that records what it was asked to do.
    #[derive(Default)]
    struct Recorder {
        events: Vec<&'static str>,
        finished: bool,
    }

    impl Sink for Recorder {
        fn event(&mut self, _seq: u64, event: &AgentEvent) -> io::Result<()> {
            self.events.push(event.kind());
            Ok(())
        }

        fn finish(&mut self) -> io::Result<()> {
            self.finished = true;
            Ok(())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn the_output_is_finished_however_the_events_end() {
        // A run task that died without its closing events: the events just stop.
        let events = vec![
            AgentEvent::SessionStart {
                session_id: "s".into(),
                run_id: "r".into(),
                agent: "react".into(),
                recovers: None,
            },
            AgentEvent::TextStart { index: 0 },
        ];
        let mut stream = futures::stream::iter((1..).zip(events).map(|(seq, event)| {
            Arc::new(EventRecord {
                session_id: "s".into(),
                run_id: "r".into(),
                seq,
                node_id: None,
                at: 0,
                event,
                messages: None,
            })
        }));
        let mut sink = Recorder::default();
        let mut signals = Signals::new();
        let driven =
            drive(&mut stream, || {}, &mut sink, &mut signals, &mut Spinner::new(false)).await;
        assert_eq!(driven.unwrap(), Driven::Ended(None));
        assert_eq!(sink.events, ["session_start", "text_start"]);
        assert!(sink.finished, "the encoder's closing frames were not written");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn a_second_signal_abandons_the_run_and_still_finishes_the_output() {
        let mut signals = Signals::new();
        // A run that never ends, even aborted.
        let mut stream = futures::stream::pending::<Arc<EventRecord>>();
        let mut sink = Recorder::default();
        let aborts = std::sync::atomic::AtomicUsize::new(0);
        let abort = || {
            aborts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        };
        let pid = std::process::id().to_string();
        let kill = || {
            std::process::Command::new("kill").args(["-TERM", &pid]).status().map(|s| s.success())
        };
        let signalling = async {
            for _ in 0..2 {
                tokio::time::sleep(Duration::from_millis(50)).await;
                assert!(kill().unwrap());
            }
        };
        let mut spinner = Spinner::new(false);
        let (driven, ()) = tokio::join!(
            drive(&mut stream, abort, &mut sink, &mut signals, &mut spinner),
            signalling
        );
        assert_eq!(driven.unwrap(), Driven::Abandoned(Signal::Terminate));
        assert_eq!(aborts.load(std::sync::atomic::Ordering::SeqCst), 1);
        assert!(sink.finished);
    }
}
