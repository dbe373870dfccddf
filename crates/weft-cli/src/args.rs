//! The flags of `weft run`, `weft models` and `weft tools` (clap), with their long help: what
//! `weft chat` shares with `weft run` ([`RunArgs`], [`ModeArgs`]) is defined here too.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::anyhow;
use clap::{Args, Subcommand};
use weft_agent::DEFAULT_MAX_TURNS;
use weft_llm::config;
use weft_llm::http::{RetryPolicy, Timeouts};
use weft_protocol::Protocol;

use crate::remote;
use crate::store::StoreArgs;

#[derive(Debug, Subcommand)]
pub(crate) enum ToolsCommand {
    /// List every tool with its source (weft, builtin, mcp:NAME), whether it needs approval,
    /// and its parameters (`name?` is optional). MCP servers are started to list theirs.
    List {
        /// The configuration file [default: ./weft.toml, else $WEFT_HOME/weft.toml].
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
    },
}

#[derive(Debug, Args)]
pub(crate) struct ModelsArgs {
    /// Only this provider's models (openai, openai-responses, anthropic, gemini, faux).
    #[arg(long, value_name = "NAME")]
    pub(crate) provider: Option<String>,

    /// A JSON file of models to add or override (the format of the built-in registry).
    #[arg(long, value_name = "FILE")]
    pub(crate) models: Option<PathBuf>,
}

pub(crate) const RUN_AFTER_HELP: &str = concat!(
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

pub(crate) const CHAT_AFTER_HELP: &str = "Commands at the prompt: /session (the current session's id), \
     /session ID (switch to an existing session), /new (a new session), /model [ID] (show or set \
     the model of the next runs), /help, /quit. Ctrl-C aborts a running run and the chat goes \
     on; at the prompt Ctrl-C clears the line and Ctrl-D quits. Calls that need approval (--approve \
     TOOL locally, the server's tools with --server) are asked at the prompt: y runs the call, n \
     denies it (the model sees the denial). Sessions are kept in the session store as for weft \
     run (see weft run --help). The prompt's history is kept in $WEFT_HOME/chat_history.";

pub(crate) const SESSIONS_AFTER_HELP: &str = "Every command takes --store URL: memory, sqlite:PATH or \
     postgres://… [default: the SQLite file $WEFT_HOME/weft.db, WEFT_HOME defaulting to \
     ~/.weft]. Exit status: 0 done; 1 the store failed (or delete refused a running session); \
     2 usage error, a --store that cannot be opened or an unknown session ID.";

#[derive(Debug, Args)]
pub(crate) struct RunArgs {
    /// The user message that starts the run.
    pub(crate) prompt: String,

    /// Continue this session (its id, as `weft run` printed it on stderr): the prompt becomes a
    /// new user message in it, and the model sees the whole conversation. Without it, a new
    /// session is created.
    #[arg(long, value_name = "ID")]
    pub(crate) session: Option<String>,

    #[command(flatten)]
    pub(crate) store: StoreArgs,

    #[command(flatten)]
    pub(crate) remote: remote::ServerArgs,

    /// The model provider: openai (Chat Completions, also any OpenAI-compatible server through
    /// OPENAI_BASE_URL), openai-responses, anthropic, gemini, or faux (a scripted provider for
    /// tests and offline demos; the default when --script is given). Keys and base URLs come from
    /// OPENAI_API_KEY/OPENAI_BASE_URL, ANTHROPIC_API_KEY/ANTHROPIC_BASE_URL,
    /// GEMINI_API_KEY/GEMINI_BASE_URL. With --session, the session's provider is the default
    /// (and the only one accepted).
    #[arg(long, value_name = "NAME")]
    pub(crate) provider: Option<String>,

    /// The faux provider's script: a JSON file of turns (required with --provider faux, refused
    /// with any other provider).
    #[arg(long, value_name = "FILE")]
    pub(crate) script: Option<PathBuf>,

    /// The configuration file whose tools the run gets (`[[mcp]]`, `[builtins]`,
    /// `[tools.NAME]`) [default: ./weft.toml, else $WEFT_HOME/weft.toml].
    #[arg(long, value_name = "FILE")]
    pub(crate) config: Option<PathBuf>,

    /// The system prompt of a new session (a continued session keeps its own).
    #[arg(long, value_name = "TEXT")]
    pub(crate) system: Option<String>,

    /// The model id [default: faux for the faux provider; with --session, the session's model,
    /// the only one accepted].
    #[arg(long, value_name = "ID")]
    pub(crate) model: Option<String>,

    /// Write the run as the Loom stream protocol's NDJSON (one JSON object per line: envelope,
    /// node runs, the reply frame last) and nothing else on stdout. Cannot be combined with
    /// --protocol.
    #[arg(long, conflicts_with = "protocol")]
    pub(crate) json: bool,

    /// Write the run in this wire format, one JSON object per line: native (the agent plan's
    /// events), loom (what --json writes), loom-export, aceai, ag-ui or vercel.
    #[arg(long, value_name = "FORMAT")]
    pub(crate) protocol: Option<Protocol>,

    /// Write nothing while the run goes, then its step trace as one JSON object: the library's
    /// `AgentResponse` (`{"steps": [...], "finalOutput": "..."}`, every model call with the
    /// tool executions it caused). Cannot be combined with --json, --protocol or --server.
    #[arg(long, conflicts_with_all = ["json", "protocol"])]
    pub(crate) response: bool,

    /// The most model calls the run may make.
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_MAX_TURNS,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    pub(crate) max_turns: u32,

    #[command(flatten)]
    pub(crate) modes: ModeArgs,

    /// How durably the run is stored: sync (nothing is shown before the store has it), async
    /// (shown at once, stored just behind) or exit (stored when the run ends) [default: async;
    /// with --server, the server's].
    #[arg(long, value_name = "MODE")]
    pub(crate) durability: Option<weft_agent::Durability>,

    /// A JSON file of models to add or override in the registry costs are computed from (the
    /// format of crates/weft-llm/models.json; entries for known models change only the fields
    /// they give). Applies to every provider, faux included.
    #[arg(long, value_name = "FILE")]
    pub(crate) models: Option<PathBuf>,

    // The help says what it bounds and its default: see `http_help`.
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = duration_arg,
        allow_hyphen_values = true,
        help = http_help("connect-timeout"),
    )]
    pub(crate) connect_timeout: Option<Duration>,

    // The help says what it bounds and its default: see `http_help`.
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = duration_arg,
        allow_hyphen_values = true,
        help = http_help("first-byte-timeout"),
    )]
    pub(crate) first_byte_timeout: Option<Duration>,

    // The help says what it bounds and its default: see `http_help`.
    #[arg(
        long,
        value_name = "DURATION",
        value_parser = duration_arg,
        allow_hyphen_values = true,
        help = http_help("idle-timeout"),
    )]
    pub(crate) idle_timeout: Option<Duration>,

    // The help says what it bounds and its default: see `http_help`.
    #[arg(long, value_name = "N", allow_negative_numbers = true, help = http_help("max-retries"))]
    pub(crate) max_retries: Option<u32>,
}

impl RunArgs {
    /// The HTTP flags given, with the environment variable each overrides.
    pub(crate) fn http_flags(&self) -> [(&'static str, &'static str, bool); 4] {
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
