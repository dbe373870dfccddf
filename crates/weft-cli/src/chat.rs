//! `weft chat`: an interactive loop over one session at a time, run in this process (the
//! provider flags of `weft run`, sessions in the same store) or on a server (`--server URL`).
//!
//! Each line typed is a user message; the run streams through the terminal renderer of
//! `weft run` (a spinner until the first token, dimmed thinking, tool lines with their output)
//! and ends with the summary line. A run that stops for approval asks at the prompt, one call
//! at a time (`approve NAME ARGS? [y/n]`), and resumes with the decisions. Ctrl-C during a run
//! aborts that run (locally its abort, on a server `POST …/abort`) and the loop goes on; at the
//! prompt Ctrl-C clears the line and Ctrl-D quits, as in a shell. Lines starting with `/` are
//! commands (see [`HELP`]). Every failure is one line on stderr (`weft: …`) and the loop goes
//! on. The prompt's history is kept in `$WEFT_HOME/chat_history`.

use std::io::{self, BufWriter};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use clap::Args;
use futures::FutureExt;
use rustyline::error::ReadlineError;
use rustyline::{Config, DefaultEditor};
use weft_agent::{
    Agent, AgentError, DEFAULT_MAX_TURNS, ExecuteResult, SessionHandle, SessionOptions,
};
use weft_core::{ApprovalDecision, Input, Message, SessionStatus, ToolCall};
use weft_llm::models::ModelRegistry;

use crate::args::{ModeArgs, RunArgs};
use crate::drive::{Driven, drive};
use crate::render::Renderer;
use crate::signals::Signals;
use crate::store::StoreArgs;
use crate::term::Spinner;
use crate::{Failure, remote, sanitize, summary, term};

/// What `/help` prints.
const HELP: &str = "\
Type a message and press Enter to send it. Commands:
  /session      show the current session's id
  /session ID   switch to an existing session (its conversation goes on)
  /new          start a new session with the next message
  /model        show the model of the next runs
  /model ID     use this model for the next runs (a session keeps its model: a new one starts)
  /help         this help
  /quit         leave (Ctrl-D too)
Ctrl-C aborts a running run; at the prompt it clears the line.";

/// What a denial tells the model.
const DENIED: &str = "denied by the user at the prompt";

/// The flags of `weft chat`.
#[derive(Debug, Args)]
pub(crate) struct ChatArgs {
    #[command(flatten)]
    store: StoreArgs,

    #[command(flatten)]
    remote: remote::ServerArgs,

    /// The model provider of local runs, as for `weft run`: openai, openai-responses,
    /// anthropic, gemini, or faux (the default when --script is given).
    #[arg(long, value_name = "NAME")]
    provider: Option<String>,

    /// The faux provider's script: a JSON file of turns (each session plays it from its first
    /// turn).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,

    /// The system prompt of new sessions.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,

    /// The model of new sessions [default: faux for the faux provider; with --server, the
    /// server's]; `/model ID` changes it.
    #[arg(long, value_name = "ID")]
    model: Option<String>,

    /// The most model calls a run may make.
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_MAX_TURNS,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    max_turns: u32,

    /// A JSON file of models to add or override in the registry costs are computed from.
    #[arg(long, value_name = "FILE")]
    models: Option<PathBuf>,

    /// Ask at the prompt before running a call to this tool (local runs; repeatable; `all`
    /// asks for every tool). With --server, the server decides which calls need approval.
    #[arg(long, value_name = "TOOL")]
    approve: Vec<String>,

    /// The configuration file whose tools local runs get (`[[mcp]]`, `[builtins]`,
    /// `[tools.NAME]`) [default: ./weft.toml, else $WEFT_HOME/weft.toml].
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,

    #[command(flatten)]
    modes: ModeArgs,
}

impl ChatArgs {
    /// The configuration file it names (`--config`).
    pub(crate) fn config(&self) -> Option<&std::path::Path> {
        self.config.as_deref()
    }

    /// The flags as `weft run`'s, so the agent is built exactly as for a local run.
    fn run_args(&self) -> RunArgs {
        RunArgs {
            prompt: String::new(),
            session: None,
            store: self.store.clone(),
            remote: self.remote.clone(),
            provider: self.provider.clone(),
            script: self.script.clone(),
            system: self.system.clone(),
            model: self.model.clone(),
            json: false,
            protocol: None,
            response: false,
            max_turns: self.max_turns,
            models: self.models.clone(),
            connect_timeout: None,
            first_byte_timeout: None,
            idle_timeout: None,
            max_retries: None,
            config: self.config.clone(),
            modes: self.modes.clone(),
            durability: None,
        }
    }
}

/// A line's failure: said in one line on stderr, then the loop goes on.
type Said = Result<(), String>;

/// Where runs happen.
enum Backend {
    Local(Local),
    Remote(Remote),
}

/// Runs in this process.
struct Local {
    agent: Agent,
    provider: String,
    registry: Arc<ModelRegistry>,
    /// The model of new sessions.
    model: String,
    /// The reasoning mode of new sessions.
    mode: Option<weft_agent::Mode>,
    /// The current session (none until the first message, or after `/new`).
    session: Option<SessionHandle>,
}

/// Runs on a server.
struct Remote {
    client: weft_client::Client,
    provider: Option<String>,
    system: Option<String>,
    max_turns: Option<u32>,
    /// The model of new sessions (`None`: the server's default).
    model: Option<String>,
    /// The model the current session runs, once known.
    session_model: Option<String>,
    /// The reasoning mode of new sessions and its parameters, as the server reads them.
    mode: Option<String>,
    mode_options: serde_json::Map<String, serde_json::Value>,
    session: Option<String>,
}

/// `weft chat`.
pub(crate) fn command(args: ChatArgs) -> Result<(), Failure> {
    let runtime = crate::runtime()?;
    let backend = match args.remote.client() {
        Some(client) => {
            let local_only = [
                ("--store", args.store.store.is_some()),
                ("--script", args.script.is_some()),
                ("--models", args.models.is_some()),
                ("--approve", !args.approve.is_empty()),
                ("--config", args.config.is_some()),
            ];
            if let Some((flag, _)) = local_only.into_iter().find(|(_, set)| *set) {
                return Err(Failure::usage(&anyhow!(
                    "{flag} is for local runs: with --server, the server's store, providers and \
                     settings are used"
                )));
            }
            Backend::Remote(Remote {
                client,
                provider: args.provider.clone(),
                system: args.system.clone(),
                max_turns: (args.max_turns != DEFAULT_MAX_TURNS).then_some(args.max_turns),
                model: args.model.clone(),
                session_model: None,
                mode: args.modes.mode.clone(),
                mode_options: args.modes.mode_parameters(),
                session: None,
            })
        }
        None => {
            let mut planned = crate::setup::build_agent(&args.run_args(), None)
                .map_err(|e| Failure::usage(&e))?;
            if !args.approve.is_empty() {
                let names = args.approve.clone();
                let all = names.iter().any(|n| n == "all");
                planned.builder = planned
                    .builder
                    .approval_policy(move |spec, _| all || names.contains(&spec.name));
            }
            let mode = args.modes.mode().map_err(|e| Failure::usage(&e))?;
            let store = runtime.block_on(args.store.open()).map_err(|e| Failure::usage(&e))?;
            let setup = runtime.block_on(planned.build(store)).map_err(|e| Failure::usage(&e))?;
            Backend::Local(Local {
                agent: setup.agent,
                provider: setup.provider,
                registry: setup.registry,
                model: setup.model,
                mode,
                session: None,
            })
        }
    };
    let config = Config::builder().auto_add_history(false).max_history_size(1000);
    let config = config.map_err(|e| Failure::run(format!("cannot set up line editing: {e}")))?;
    let editor = DefaultEditor::with_config(config.build())
        .map_err(|e| Failure::run(format!("cannot set up line editing: {e}")))?;
    let signals = {
        let _inside = runtime.enter();
        Signals::new()
    };
    let mut chat = Chat { runtime, backend, editor, signals, history: history_file() };
    if let Some(path) = &chat.history {
        // No history yet is fine.
        let _ = chat.editor.load_history(path);
    }
    println!("{}", chat.greeting());
    chat.repl();
    Ok(())
}

/// `$WEFT_HOME/chat_history` (where the default store lives), if that folder can be had.
fn history_file() -> Option<PathBuf> {
    let db = weft_store::default_path().ok()?;
    Some(db.with_file_name("chat_history"))
}

/// The loop's state.
struct Chat {
    runtime: tokio::runtime::Runtime,
    backend: Backend,
    editor: DefaultEditor,
    signals: Signals,
    history: Option<PathBuf>,
}

/// One line of failure on stderr.
fn say_error(message: &str) {
    let line = sanitize::visible(&message.replace('\n', " "));
    term::eprint_line(&format!("weft: {line}"));
}

impl Chat {
    fn greeting(&self) -> String {
        let where_ = match &self.backend {
            Backend::Local(local) => {
                format!("provider {}, model {}", local.provider, sanitize::visible(&local.model))
            }
            Backend::Remote(remote) => format!("server {}", remote.client.base_url()),
        };
        format!("weft chat ({where_}): /help for commands, Ctrl-D to quit")
    }

    /// Reads lines until Ctrl-D or `/quit`.
    fn repl(&mut self) {
        loop {
            let line = match self.editor.readline("> ") {
                Ok(line) => line,
                // Ctrl-C at the prompt: the line is dropped, a new prompt comes.
                Err(ReadlineError::Interrupted) => continue,
                Err(ReadlineError::Eof) => break,
                Err(e) => {
                    say_error(&format!("cannot read the terminal: {e}"));
                    break;
                }
            };
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let _ = self.editor.add_history_entry(line);
            if let Some(path) = &self.history {
                let _ = self.editor.save_history(path);
            }
            let said = match line.strip_prefix('/') {
                Some(command) => match self.command(command) {
                    Ok(true) => break,
                    Ok(false) => Ok(()),
                    Err(e) => Err(e),
                },
                None => self.send(Input::text(line)),
            };
            if let Err(message) = said {
                say_error(&message);
            }
        }
    }

    /// A `/command`; `Ok(true)` quits.
    fn command(&mut self, command: &str) -> Result<bool, String> {
        let (name, argument) = match command.split_once(char::is_whitespace) {
            Some((name, rest)) => (name, Some(rest.trim()).filter(|r| !r.is_empty())),
            None => (command, None),
        };
        match (name, argument) {
            ("quit" | "exit", _) => return Ok(true),
            ("help", _) => println!("{HELP}"),
            ("new", _) => {
                match &mut self.backend {
                    Backend::Local(local) => local.session = None,
                    Backend::Remote(remote) => {
                        remote.session = None;
                        remote.session_model = None;
                    }
                }
                println!("new session: the next message starts it");
            }
            ("session", None) => match self.session_id() {
                Some(id) => println!("session: {}", sanitize::visible(&id)),
                None => println!("no session yet: the next message starts one"),
            },
            ("session", Some(id)) => {
                let (id, model) = self.switch(id)?;
                println!(
                    "session: {} (model {})",
                    sanitize::visible(&id),
                    sanitize::visible(&model)
                );
            }
            ("model", None) => println!("model: {}", sanitize::visible(&self.model())),
            ("model", Some(model)) => {
                let restarted = self.set_model(model);
                let model = sanitize::visible(model);
                if restarted {
                    println!(
                        "model: {model} (a session keeps its model: the next message starts a \
                         new session)"
                    );
                } else {
                    println!("model: {model}");
                }
            }
            _ => {
                return Err(format!(
                    "unknown command /{}: /help lists the commands",
                    sanitize::visible(name)
                ));
            }
        }
        Ok(false)
    }

    fn session_id(&self) -> Option<String> {
        match &self.backend {
            Backend::Local(local) => local.session.as_ref().map(SessionHandle::id),
            Backend::Remote(remote) => remote.session.clone(),
        }
    }

    /// The model of the next run.
    fn model(&self) -> String {
        match &self.backend {
            Backend::Local(local) => match &local.session {
                Some(session) => session.snapshot().model,
                None => local.model.clone(),
            },
            Backend::Remote(remote) => match (&remote.session, &remote.session_model) {
                (Some(_), Some(model)) => model.clone(),
                _ => remote.model.clone().unwrap_or_else(|| "the server's default".into()),
            },
        }
    }

    /// Uses `model` for the next runs; true when the current session had another model (so the
    /// next message starts a new session).
    fn set_model(&mut self, model: &str) -> bool {
        let current = self.session_id().map(|_| self.model());
        let restart = current.as_deref().is_some_and(|m| m != model);
        match &mut self.backend {
            Backend::Local(local) => {
                local.model = model.to_string();
                if restart {
                    local.session = None;
                }
            }
            Backend::Remote(remote) => {
                remote.model = Some(model.to_string());
                if restart {
                    remote.session = None;
                    remote.session_model = None;
                }
            }
        }
        restart
    }

    /// Switches to the existing session `id`: its id and model.
    fn switch(&mut self, id: &str) -> Result<(String, String), String> {
        let unknown = || format!("unknown session {}", sanitize::visible(id));
        match &mut self.backend {
            Backend::Local(local) => {
                let session = self.runtime.block_on(local.agent.session(id));
                let session = match session {
                    Ok(Some(session)) => session,
                    Ok(None) => return Err(unknown()),
                    Err(AgentError::Store(e)) => return Err(e.to_string()),
                    Err(e) => return Err(format!("cannot open session {id}: {e}")),
                };
                let snapshot = session.snapshot();
                if snapshot.provider != local.provider {
                    return Err(format!(
                        "session {} was run by provider {}: chat with it with weft chat \
                         --provider {}",
                        sanitize::visible(id),
                        sanitize::visible(&snapshot.provider),
                        sanitize::visible(&snapshot.provider)
                    ));
                }
                local.session = Some(session);
                Ok((id.to_string(), snapshot.model))
            }
            Backend::Remote(remote) => {
                let view = self.runtime.block_on(remote.client.get_session(id));
                let view = match view {
                    Ok(view) => view,
                    Err(e) if e.code() == Some("session_not_found") => return Err(unknown()),
                    Err(e) => return Err(format!("the server: {e}")),
                };
                remote.session = Some(view.id.clone());
                remote.session_model = Some(view.model.clone());
                Ok((view.id, view.model))
            }
        }
    }

    /// Sends `input` and follows the runs it leads to: approvals are asked at the prompt and
    /// the run resumed with the decisions.
    fn send(&mut self, mut input: Input) -> Said {
        loop {
            // Signals that came while nobody ran (none should: the prompt reads Ctrl-C as a
            // key) must not abort the run about to start.
            while self.signals.next().now_or_never().is_some() {}
            let started = Instant::now();
            let ran = match &mut self.backend {
                Backend::Local(local) => {
                    self.runtime.block_on(local.run(input, &mut self.signals, started))?
                }
                Backend::Remote(remote) => {
                    self.runtime.block_on(remote.run(input, &mut self.signals, started))?
                }
            };
            let Some((result, interrupted)) = ran else {
                return Err("interrupted: stopped waiting for the aborted run".into());
            };
            match result.status {
                SessionStatus::Completed => return Ok(()),
                SessionStatus::AwaitingApproval => {
                    let decisions = self.ask(&result.pending_approvals)?;
                    input = Input::Approvals { approvals: decisions };
                }
                SessionStatus::Aborted if interrupted => {
                    return Err("interrupted: the run was aborted".into());
                }
                SessionStatus::Aborted => {
                    return Err(match result.error {
                        Some(e) => format!("the run was aborted: {e}"),
                        None => "the run was aborted".into(),
                    });
                }
                SessionStatus::Error => {
                    return Err(format!(
                        "the model call failed: {}",
                        result.error.as_deref().unwrap_or("unknown error")
                    ));
                }
                SessionStatus::MaxTurns => return Err("run stopped: max_turns reached".into()),
                SessionStatus::AwaitingToolExecution => {
                    return Err(format!(
                        "run suspended: it awaits results of remote tool calls {}, which weft \
                         chat cannot supply",
                        crate::run::describe(&result.pending_tool_calls)
                    ));
                }
                status @ (SessionStatus::Idle | SessionStatus::Running) => {
                    return Err(format!("the run ended with unexpected status {status}"));
                }
            }
        }
    }

    /// Asks for a decision on each call, at the prompt. Ctrl-C or Ctrl-D denies.
    fn ask(&mut self, calls: &[ToolCall]) -> Result<Vec<ApprovalDecision>, String> {
        let mut decisions = Vec::with_capacity(calls.len());
        for call in calls {
            let args = serde_json::to_string(&call.arguments).unwrap_or_default();
            let question = format!(
                "approve {} {}? [y/n] ",
                sanitize::visible(&call.name),
                sanitize::visible(&args)
            );
            let approved = loop {
                match self.editor.readline(&question) {
                    Ok(answer) => match answer.trim().to_ascii_lowercase().as_str() {
                        "y" | "yes" => break true,
                        "n" | "no" => break false,
                        _ => println!("answer y or n"),
                    },
                    Err(ReadlineError::Interrupted | ReadlineError::Eof) => break false,
                    Err(e) => return Err(format!("cannot read the terminal: {e}")),
                }
            };
            println!(
                "{} {}",
                if approved { "approved" } else { "denied" },
                sanitize::visible(&call.name)
            );
            decisions.push(if approved {
                ApprovalDecision::approve(call.id.clone())
            } else {
                ApprovalDecision::deny(call.id.clone(), DENIED)
            });
        }
        Ok(decisions)
    }
}

/// What a run ended as: its result and whether Ctrl-C aborted it; `None` when a second Ctrl-C
/// stopped waiting for it.
type Ran = Option<(ExecuteResult, bool)>;

/// The terminal view of a run, on stdout.
fn renderer() -> Renderer<BufWriter<io::Stdout>> {
    Renderer::new(BufWriter::new(io::stdout()), crate::use_color())
}

impl Local {
    async fn run(
        &mut self,
        input: Input,
        signals: &mut Signals,
        started: Instant,
    ) -> Result<Ran, String> {
        let session = match &self.session {
            Some(session) => session.clone(),
            None => {
                let options = SessionOptions {
                    model: Some(self.model.clone()),
                    mode: self.mode.clone(),
                    ..SessionOptions::default()
                };
                let session = self
                    .agent
                    .create_session(options)
                    .await
                    .map_err(|e| format!("cannot create the session: {e}"))?;
                term::eprint_line(&format!("session: {}", sanitize::visible(&session.id())));
                self.session = Some(session.clone());
                session
            }
        };
        let stream = self.agent.execute(&session, input).await.map_err(|e| e.to_string())?;
        let abort = stream.abort_handle();
        let mut records = stream.records();
        let mut sink = renderer();
        let driven =
            drive(&mut records, || abort.abort(), &mut sink, signals, &mut Spinner::for_stderr())
                .await
                .map_err(|e| format!("cannot write to stdout: {e}"))?;
        let interrupted = match driven {
            Driven::Ended(signal) => signal.is_some(),
            Driven::Abandoned(_) => {
                abort.abort();
                return Ok(None);
            }
        };
        let result = records.result().await;
        let model = session.snapshot().model;
        let priced = self.registry.get(&self.provider, &model).is_some();
        let line = summary::line(&result, &model, priced, started.elapsed());
        term::eprint_line(&sanitize::visible(&line));
        Ok(Some((result, interrupted)))
    }
}

impl Remote {
    async fn run(
        &mut self,
        input: Input,
        signals: &mut Signals,
        started: Instant,
    ) -> Result<Ran, String> {
        let new = self.session.is_none();
        let mut options = weft_client::ExecuteOptions::new();
        match &self.session {
            Some(id) => options = options.continue_session(id.clone()),
            None => {
                if let Some(model) = &self.model {
                    options = options.model(model.clone());
                }
                if let Some(provider) = &self.provider {
                    options = options.provider(provider.clone());
                }
                if let Some(system) = &self.system {
                    options = options.system_prompt(system.clone());
                }
                if let Some(turns) = self.max_turns {
                    options = options.max_turns(turns);
                }
                if let Some(mode) = &self.mode {
                    options = options.mode(mode.clone());
                }
                if !self.mode_options.is_empty() {
                    options =
                        options.mode_options(serde_json::Value::Object(self.mode_options.clone()));
                }
            }
        }
        let mut stream = self.client.execute(input, options);
        let mut sink = renderer();
        let shown = remote::show(&mut stream, &mut sink, signals, Spinner::for_stderr(), new).await;
        let driven = shown.map_err(|f| f.message.unwrap_or_else(|| "the run failed".into()))?;
        let interrupted = match driven {
            Driven::Ended(signal) => signal.is_some(),
            Driven::Abandoned(_) => return Ok(None),
        };
        let Some(result) = stream.result().map(remote::into_local) else {
            return Err("the server's stream ended before the run did".into());
        };
        self.session = Some(result.session_id.clone());
        let model = last_model(&result).map(str::to_string).or_else(|| self.session_model.clone());
        if model.is_some() {
            self.session_model.clone_from(&model);
        }
        let model = model.or_else(|| self.model.clone()).unwrap_or_else(|| "?".into());
        let line = summary::line(&result, &model, true, started.elapsed());
        term::eprint_line(&sanitize::visible(&line));
        Ok(Some((result, interrupted)))
    }
}

/// The model of the run's last assistant message.
fn last_model(result: &ExecuteResult) -> Option<&str> {
    result.messages.iter().rev().find_map(|m| match m {
        Message::Assistant(a) => Some(a.model.as_str()),
        _ => None,
    })
}
