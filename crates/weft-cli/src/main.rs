//! `weft`: run LLM agents from the terminal.
//!
//! This file holds the command line's top (clap; the flags are in [`args`]) and the glue; `main`
//! decides the exit code:
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

mod args;
mod chat;
mod drive;
mod models;
mod otel;
mod remote;
mod render;
mod run;
mod sanitize;
mod serve;
mod sessions;
mod setup;
mod signals;
mod store;
mod summary;
mod term;
mod tools;

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use clap::{ArgAction, Parser, Subcommand};

use crate::args::{
    CHAT_AFTER_HELP, ModelsArgs, RUN_AFTER_HELP, RunArgs, SESSIONS_AFTER_HELP, ToolsCommand,
};
use crate::sessions::SessionsCommand;

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
    let telemetry = match otel::start(&cli.command) {
        Ok(telemetry) => telemetry,
        Err(failure) => {
            term::init_logging(cli.verbose, None);
            return fail(failure);
        }
    };
    term::init_logging(cli.verbose, telemetry.as_ref().map(weft_telemetry::Telemetry::layer));
    let outcome = match cli.command {
        Command::Run(args) => run::command(args),
        Command::Chat(args) => chat::command(args),
        Command::Sessions(command) => sessions::command(command, use_color()),
        Command::Models(args) => models::command(&args).map_err(|e| Failure::usage(&e)),
        Command::Serve(args) => serve::command(args),
        Command::Tools(ToolsCommand::List { config }) => tools::list_command(config.as_deref()),
    };
    if let Some(telemetry) = telemetry {
        // What is buffered is sent before the process exits.
        telemetry.shutdown();
    }
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => fail(failure),
    }
}

/// Says why the command failed, in one line, and gives its exit code.
fn fail(failure: Failure) -> ExitCode {
    if let Some(message) = failure.message {
        // One line, whatever the message holds, and nothing in it (a server's error body, a
        // model's words) may drive the terminal.
        let line = sanitize::visible(&message.replace('\n', " "));
        term::eprint_line(&format!("weft: {line}"));
    }
    ExitCode::from(failure.code)
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

/// The async runtime of a command.
fn runtime() -> Result<tokio::runtime::Runtime, Failure> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::run(format!("cannot start the async runtime: {e}")))
}

/// Colour on stdout: only on a terminal, and never when `NO_COLOR` is set to anything.
fn use_color() -> bool {
    io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::setup::build_agent;

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
}
