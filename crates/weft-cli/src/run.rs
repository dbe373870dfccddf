//! `weft run`: one prompt run to its end, locally or on a server (`--server URL`), and the exit
//! its end makes.

use std::io::{self, BufWriter, Write};
use std::sync::Arc;
use std::time::Instant;

use anyhow::anyhow;
use weft_agent::{
    AgentError, DEFAULT_MAX_TURNS, ExecuteError, ExecuteResult, RunOutcome, SessionHandle,
    SessionOptions, TurnLimit,
};
use weft_core::{Input, SessionStatus, SessionStore, ToolCall};
use weft_protocol::Protocol;

use crate::args::RunArgs;
use crate::drive::{Driven, drive};
use crate::render::{JsonLines, Renderer, Sink};
use crate::setup::{Planned, Setup, build_agent};
use crate::signals::{Signal, Signals};
use crate::term::Spinner;
use crate::{Failure, remote, runtime, sanitize, sessions, summary, term, use_color};

/// What `weft run` does with a session.
enum Plan<'a> {
    /// Creates one, for this agent.
    New(Box<Planned>),
    /// Continues the one with this id.
    Continue(&'a str),
}

/// `weft run`.
pub(crate) fn command(args: RunArgs) -> Result<(), Failure> {
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
        let (setup, session) = open_session(&args, plan, store).await?;
        let started = Instant::now();
        let agent = &setup.agent;
        let options =
            weft_agent::RunOptions::default().durability(args.durability.unwrap_or_default());
        let input = Input::text(args.prompt.clone());
        if args.response {
            return respond(agent, &session, input, args.max_turns, &mut signals).await;
        }
        let stream = agent.execute_with(&session, input, options).await.map_err(|e| match e {
            // The session's own reasons, as they are.
            ExecuteError::AwaitingToolCalls { .. } | ExecuteError::AlreadyRunning(_) => {
                Failure::run(e.to_string())
            }
            other => Failure::run(format!("cannot start the run: {other}")),
        })?;
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

/// `weft run --response`: the run to its end without streaming, then its step trace on stdout.
async fn respond(
    agent: &weft_agent::Agent,
    session: &SessionHandle,
    input: Input,
    max_turns: u32,
    signals: &mut Signals,
) -> Result<(), Failure> {
    term::eprint_line(&format!("session: {}", sanitize::visible(&session.id())));
    let responded = tokio::select! {
        responded = agent.respond(session, input) => responded,
        // Nothing was written: the process ends as an interrupted run does (the store keeps
        // the run as interrupted; `--session` continues it).
        signal = signals.next() => {
            return Err(Failure { code: signal.exit_code(), message: Some(signal.describe().into()) });
        }
    };
    let (response, result) = responded.map_err(|e| match e {
        ExecuteError::AwaitingToolCalls { .. } | ExecuteError::AlreadyRunning(_) => {
            Failure::run(e.to_string())
        }
        other => Failure::run(format!("cannot start the run: {other}")),
    })?;
    let json = serde_json::to_string(&response)
        .map_err(|e| Failure::run(format!("cannot write the response: {e}")))?;
    let mut out = io::stdout().lock();
    match writeln!(out, "{json}").and_then(|()| out.flush()) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {}
        Err(e) => return Err(Failure::run(format!("cannot write to stdout: {e}"))),
    }
    outcome(&result, None, max_turns)
}

/// The agent and the session `plan` asks for, on `store`: a new session created, or the
/// continued one loaded (said on stderr when a previous run of it was interrupted).
async fn open_session(
    args: &RunArgs,
    plan: Plan<'_>,
    store: Arc<dyn SessionStore>,
) -> Result<(Setup, SessionHandle), Failure> {
    match plan {
        Plan::New(planned) => {
            let setup = planned.build(store).await.map_err(|e| Failure::usage(&e))?;
            let mode = args.modes.mode().map_err(|e| Failure::usage(&e))?;
            let session = setup
                .agent
                .create_session(SessionOptions { mode, ..SessionOptions::default() })
                .await
                .map_err(|e| Failure::run(format!("cannot create the session: {e}")))?;
            Ok((setup, session))
        }
        Plan::Continue(id) => {
            let (setup, session) = continued(args, id, store).await?;
            if session.is_recovering() {
                // A process that ran it died mid-run: that run goes on to its end first
                // (calls it left running are answered as interrupted), then the prompt runs.
                term::eprint_line(&format!(
                    "session {}: the previous run was interrupted; continuing",
                    sanitize::visible(id)
                ));
            }
            Ok((setup, session))
        }
    }
}

/// `weft run --server URL`: the run is the server's; its events are shown as a local run's.
fn remote_run_command(args: &RunArgs, client: weft_client::Client) -> Result<(), Failure> {
    let local_only = [
        ("--store", args.store.store.is_some()),
        ("--script", args.script.is_some()),
        ("--models", args.models.is_some()),
        ("--config", args.config.is_some()),
        ("--response", args.response),
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
    if let Some(durability) = args.durability {
        options = options.durability(durability);
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
pub(crate) fn describe(calls: &[ToolCall]) -> String {
    let names: Vec<String> = calls.iter().map(|c| format!("{} ({})", c.name, c.id)).collect();
    names.join(", ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

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
}
