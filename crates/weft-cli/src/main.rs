//! `weft`: run LLM agents from the terminal.
//!
//! This file holds the command line (clap) and the glue; `main` decides the exit code:
//!
//! | code | when |
//! | --- | --- |
//! | 0 | the run completed (or stdout was closed early, as by `weft run … \| head -1`) |
//! | 1 | the run failed, was aborted, hit `--max-turns` or was suspended on tool calls |
//! | 2 | a usage or configuration mistake (bad flags, unknown provider, unreadable script) |
//! | 130 | the run was interrupted by Ctrl-C |
//!
//! Every failure is reported as one line on stderr, `weft: <reason>`.

mod render;
mod tools;

use std::future::Future;
use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;

use anyhow::{anyhow, bail};
use clap::{Args, Parser, Subcommand};
use futures::{FutureExt, StreamExt};
use weft_agent::{Agent, DEFAULT_MAX_TURNS, ExecuteResult, SessionOptions};
use weft_core::{Input, SessionStatus, ToolCall};
use weft_llm::config;
use weft_llm::faux::{FauxProvider, FauxScript};
use weft_llm::http::{HttpClient, RetryPolicy, Timeouts};
use weft_llm::models::ModelRegistry;
use weft_protocol::Protocol;

use crate::render::{JsonLines, Renderer, Sink};

/// Weft: run LLM agents from the terminal.
#[derive(Debug, Parser)]
#[command(name = "weft", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one prompt to its end, streaming the run to the terminal.
    #[command(after_help = RUN_AFTER_HELP)]
    Run(RunArgs),
    /// List the models Weft knows: prices per million tokens, context window, output limit.
    Models(ModelsArgs),
}

#[derive(Debug, Args)]
struct ModelsArgs {
    /// Only this provider's models.
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,

    /// A JSON file of models to add or override (the format of the built-in registry).
    #[arg(long, value_name = "FILE")]
    models: Option<PathBuf>,
}

const RUN_AFTER_HELP: &str = concat!(
    "Output: the model's text as it streams; thinking dimmed (on a terminal, unless NO_COLOR is \
     set) or prefixed with \"thinking: \"; each tool call as \"[tool] NAME ARGS\", its output \
     indented, then \"[tool] NAME: ok\" or \"[tool] NAME: error\". With --json: the Loom stream \
     protocol's NDJSON; with --protocol FORMAT: that wire format, one JSON object per line.\n\n",
    "Built-in tools (local, available to every run):\n",
    "  echo          {\"text\": string}: streams the text back word by word, then returns it\n",
    "  current_time  no arguments: the current UTC time in RFC 3339 (2025-01-31T12:00:00Z)\n",
    "A call to any other tool gets the error result \"Tool NAME not found\"; the run goes on.\n\n",
    "Faux script (--script): {\"turns\":[{\"thinking\":\"…\",\"text\":\"…\",\"toolCalls\":[{\"name\":\
     \"echo\",\"arguments\":{\"text\":\"hi\"}}],\"chunkSize\":4,\"delayMs\":0},{\"error\":\
     \"overloaded\"}]}; each model call plays the next turn.\n\n",
    "Exit status: 0 completed; 1 failed, aborted, max turns reached or suspended on tool calls; \
     2 usage or configuration error; 130 interrupted (Ctrl-C). A failure's reason is one line \
     on stderr."
);

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

    /// The model provider: openai (Chat Completions, also any OpenAI-compatible server through
    /// OPENAI_BASE_URL), openai-responses, anthropic, gemini, or faux (a scripted provider for
    /// tests and offline demos; the default when --script is given). Keys and base URLs come from
    /// OPENAI_API_KEY/OPENAI_BASE_URL, ANTHROPIC_API_KEY/ANTHROPIC_BASE_URL,
    /// GEMINI_API_KEY/GEMINI_BASE_URL.
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,

    /// The faux provider's script: a JSON file of turns (required with --provider faux).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,

    /// The system prompt.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,

    /// The model id [default: faux for the faux provider].
    #[arg(long, value_name = "ID")]
    model: Option<String>,

    /// Write the run as the Loom stream protocol's NDJSON (one JSON object per line: envelope,
    /// node runs, the reply frame last) and nothing else on stdout.
    #[arg(long)]
    json: bool,

    /// Write the run in this wire format, one JSON object per line: native (the agent plan's
    /// events), loom, loom-export, aceai, ag-ui or vercel. Implies JSON output.
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

    /// A JSON file of models to add or override in the registry costs are computed from (the
    /// format of crates/weft-llm/models.json; entries for known models change only the fields
    /// they give).
    #[arg(long, value_name = "FILE")]
    models: Option<PathBuf>,
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
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Run(args) => run_command(args),
        Command::Models(args) => models_command(&args).map_err(|e| Failure::usage(&e)),
    };
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if let Some(message) = failure.message {
                // One line, whatever the message holds.
                let line = message.replace('\n', " ");
                let _ = writeln!(io::stderr(), "weft: {line}");
            }
            ExitCode::from(failure.code)
        }
    }
}

/// The built-in model registry, with the overrides of `file` if one is given.
fn registry(file: Option<&std::path::Path>) -> anyhow::Result<std::sync::Arc<ModelRegistry>> {
    let builtin = ModelRegistry::builtin();
    let Some(path) = file else { return Ok(builtin) };
    let json = std::fs::read_to_string(path)
        .map_err(|e| anyhow!("cannot read models file {}: {e}", path.display()))?;
    let merged = builtin
        .with_overrides(&json)
        .map_err(|e| anyhow!("invalid models file {}: {e}", path.display()))?;
    Ok(std::sync::Arc::new(merged))
}

/// `weft models`: one line per model.
fn models_command(args: &ModelsArgs) -> anyhow::Result<()> {
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
                m.provider,
                m.id,
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

/// `weft run`.
fn run_command(args: RunArgs) -> Result<(), Failure> {
    let agent = build_agent(&args).map_err(|e| Failure::usage(&e))?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::run(format!("cannot start the async runtime: {e}")))?;
    let stdout = BufWriter::new(io::stdout());
    let protocol = args.protocol.or(args.json.then_some(Protocol::Loom));
    let mut sink: Box<dyn Sink> = if let Some(protocol) = protocol {
        Box::new(JsonLines::new(stdout, protocol))
    } else {
        Box::new(Renderer::new(stdout, use_color()))
    };
    runtime.block_on(async {
        let interrupts = Interrupts::new();
        let session = agent
            .create_session(SessionOptions::default())
            .map_err(|e| Failure::usage(&e.into()))?;
        let stream = agent
            .execute(&session, Input::text(args.prompt.clone()))
            .map_err(|e| Failure::run(format!("cannot start the run: {e}")))?;
        let abort = stream.abort_handle();
        match drive(stream, sink.as_mut(), interrupts).await {
            Ok(Driven::Ended { result, interrupted }) => {
                outcome(&result, interrupted, args.max_turns)
            }
            Ok(Driven::Abandoned) => {
                abort.abort();
                let _ = sink.flush();
                Err(Failure { code: 130, message: Some("interrupted".into()) })
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
        }
    })
}

/// The agent `args` describe: provider, model, system prompt, limits and the built-in tools.
fn build_agent(args: &RunArgs) -> anyhow::Result<Agent> {
    let provider = match (args.provider.as_deref(), &args.script) {
        (Some(name), _) => name,
        (None, Some(_)) => "faux",
        (None, None) => bail!(
            "no provider: use --provider openai|openai-responses|anthropic|gemini --model ID, \
             or --provider faux --script FILE"
        ),
    };
    let builder = match provider {
        "faux" => {
            let Some(path) = &args.script else {
                bail!("--provider faux needs --script FILE (a JSON script of the model's turns)");
            };
            let script = FauxScript::from_file(path)?;
            let model = args.model.clone().unwrap_or_else(|| "faux".to_string());
            Agent::builder(FauxProvider::new(script)).model(model)
        }
        name => match HTTP_PROVIDERS.iter().find(|(n, _)| *n == name) {
            Some((name, example)) => {
                let Some(model) = args.model.clone() else {
                    bail!("--provider {name} needs --model ID (for example --model {example})");
                };
                let mut settings = config::settings_from_process_env(name)?;
                settings.models = registry(args.models.as_deref())?;
                let client = HttpClient::new(Timeouts::default(), RetryPolicy::default())
                    .map_err(|e| anyhow!("cannot set up the HTTP client: {e}"))?;
                let provider = config::provider_from_settings(name, settings, client)?;
                Agent::builder_shared(provider).model(model)
            }
            None => bail!(
                "unknown provider {name:?}: expected one of {}",
                config::PROVIDER_NAMES.join(", ")
            ),
        },
    };
    let mut builder = tools::register(builder.max_turns(args.max_turns));
    if let Some(system) = &args.system {
        builder = builder.system_prompt(system.clone());
    }
    builder.build().map_err(|e| anyhow!("cannot set up the agent: {e}"))
}

/// Colour on stdout: only on a terminal, and never when `NO_COLOR` is set to anything.
fn use_color() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// How the stream of a run ended.
enum Driven {
    /// It ran to its end (`interrupted`: after a Ctrl-C had aborted it).
    Ended { result: Box<ExecuteResult>, interrupted: bool },
    /// A second Ctrl-C: stop waiting for the aborted run.
    Abandoned,
}

/// Shows the run as it happens; a first Ctrl-C aborts it (what it streamed until then is kept
/// and its end still shown), a second one stops waiting.
async fn drive(
    mut stream: weft_agent::ExecuteStream,
    sink: &mut dyn Sink,
    mut interrupts: Interrupts,
) -> io::Result<Driven> {
    let mut interrupted = false;
    loop {
        let event = match stream.next().now_or_never() {
            Some(event) => event,
            None => {
                // The run has nothing more for now: show what it said before waiting.
                sink.flush()?;
                let next = tokio::select! {
                    event = stream.next() => Some(event),
                    () = interrupts.next() => None,
                };
                match next {
                    Some(event) => event,
                    None if interrupted => return Ok(Driven::Abandoned),
                    None => {
                        interrupted = true;
                        stream.abort();
                        continue;
                    }
                }
            }
        };
        let Some(event) = event else { break };
        sink.event(&event)?;
    }
    sink.finish()?;
    sink.flush()?;
    Ok(Driven::Ended { result: Box::new(stream.result().await), interrupted })
}

/// The exit of a run that ended: success only when it completed.
fn outcome(result: &ExecuteResult, interrupted: bool, max_turns: u32) -> Result<(), Failure> {
    let error = result.error.as_deref();
    match result.status {
        SessionStatus::Completed => Ok(()),
        SessionStatus::Aborted if interrupted => {
            Err(Failure { code: 130, message: Some("interrupted: the run was aborted".into()) })
        }
        SessionStatus::Aborted => Err(Failure::run(match error {
            Some(e) => format!("the run was aborted: {e}"),
            None => "the run was aborted".to_string(),
        })),
        SessionStatus::Error => Err(Failure::run(format!(
            "the model call failed: {}",
            error.unwrap_or("unknown error")
        ))),
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

/// Ctrl-C presses. The handler is installed when this is made, so an early Ctrl-C is caught
/// too rather than killing the process with the run's output half written.
struct Interrupts {
    signal: Option<Pin<Box<dyn Future<Output = io::Result<()>> + Send>>>,
}

impl Interrupts {
    fn new() -> Self {
        let mut signal: Pin<Box<dyn Future<Output = io::Result<()>> + Send>> =
            Box::pin(tokio::signal::ctrl_c());
        // The first poll installs the handler; a handler that cannot be installed means no
        // Ctrl-C handling (the default: the process ends).
        let installed = signal.as_mut().now_or_never().is_none();
        Self { signal: installed.then_some(signal) }
    }

    /// The next Ctrl-C (never, when none can be caught).
    async fn next(&mut self) {
        let Some(signal) = self.signal.as_mut() else {
            return std::future::pending().await;
        };
        if signal.await.is_err() {
            self.signal = None;
            return std::future::pending().await;
        }
        // Listen again for the next press.
        let mut again: Pin<Box<dyn Future<Output = io::Result<()>> + Send>> =
            Box::pin(tokio::signal::ctrl_c());
        self.signal = again.as_mut().now_or_never().is_none().then_some(again);
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

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
        let Ok(Cli { command: Command::Run(args) }) =
            Cli::try_parse_from(["weft", "run", "hi", "--provider", "anthropic"])
        else {
            panic!("a provider name is parsed as text, and checked later")
        };
        let err = build_agent(&args).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(
            err,
            "--provider anthropic needs --model ID (for example --model claude-sonnet-4-20250514)"
        );
    }

    fn result(status: SessionStatus, error: Option<&str>) -> ExecuteResult {
        ExecuteResult {
            session_id: "s".into(),
            status,
            messages: vec![],
            pending_tool_calls: vec![],
            pending_approvals: vec![],
            usage: Default::default(),
            cost: Default::default(),
            steps: vec![],
            error: error.map(str::to_string),
        }
    }

    fn exit(result: &ExecuteResult, interrupted: bool) -> (u8, String) {
        match outcome(result, interrupted, 7) {
            Ok(()) => (0, String::new()),
            Err(f) => (f.code, f.message.unwrap_or_default()),
        }
    }

    #[test]
    fn only_a_completed_run_exits_0() {
        assert_eq!(exit(&result(SessionStatus::Completed, None), false), (0, String::new()));
        // A Ctrl-C that came too late to stop the run does not fail it.
        assert_eq!(exit(&result(SessionStatus::Completed, None), true), (0, String::new()));
        assert_eq!(
            exit(&result(SessionStatus::Error, Some("overloaded")), false),
            (1, "the model call failed: overloaded".into())
        );
        assert_eq!(
            exit(&result(SessionStatus::MaxTurns, Some("whatever")), false),
            (1, "run stopped: max_turns (7) reached".into())
        );
        assert_eq!(
            exit(&result(SessionStatus::Aborted, None), true),
            (130, "interrupted: the run was aborted".into())
        );
        assert_eq!(exit(&result(SessionStatus::Aborted, None), false).0, 1);
    }

    #[test]
    fn a_suspended_run_exits_1_naming_what_it_waits_for() {
        let call = ToolCall {
            id: "c9".into(),
            name: "read_page".into(),
            arguments: serde_json::json!({}),
        };
        let mut r = result(SessionStatus::AwaitingToolExecution, None);
        r.pending_tool_calls = vec![call.clone()];
        let (code, message) = exit(&r, false);
        assert_eq!(code, 1);
        assert!(message.starts_with("run suspended") && message.contains("read_page (c9)"));
        let mut r = result(SessionStatus::AwaitingApproval, None);
        r.pending_approvals = vec![call];
        let (code, message) = exit(&r, false);
        assert_eq!(code, 1);
        assert!(message.contains("read_page (c9) need approval"), "{message}");
    }
}
