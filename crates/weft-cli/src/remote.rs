//! The CLI as a client of a Weft server (`--server URL`), through `weft-client`: `weft run`,
//! `weft sessions`, and the runs of `weft chat`.
//!
//! A run's native events are shown by the same sinks as a local run's ([`Sink`]): the terminal
//! renderer, or `--protocol native` re-encoded from them (the native encoder closes each run
//! with its `execute_complete`, as the server does). Other formats (`--json`, `--protocol loom`
//! …) carry events the native format leaves out (node, step and state events), so they are
//! asked of the server (`?protocol=`) and written as it sends them, one JSON object per line.

use std::io::{self, Write};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use clap::Args;
use futures::StreamExt;
use weft_agent::{ExecuteResult, RunOutcome};
use weft_client::{Client, ExecuteOptions, ExecuteStream, NativeMessage};
use weft_core::{EventRecord, Input, Message, SessionStatus};
use weft_protocol::Protocol;

use crate::drive::{Driven, drive};
use crate::render::Sink;
use crate::signals::Signals;
use crate::term::Spinner;
use crate::{Failure, sanitize, summary, term};

/// `--server URL [--api-key KEY]`.
#[derive(Debug, Clone, Args)]
pub(crate) struct ServerArgs {
    /// Run against this Weft server (`weft serve`, e.g. http://127.0.0.1:8080) instead of in
    /// this process: sessions are the server's, and its providers run the model.
    #[arg(long, value_name = "URL")]
    pub(crate) server: Option<String>,

    /// The server's bearer API key (with --server) [default: $WEFT_API_KEY].
    #[arg(long, value_name = "KEY", requires = "server")]
    pub(crate) api_key: Option<String>,
}

impl ServerArgs {
    /// The client, when `--server` was given.
    pub(crate) fn client(&self) -> Option<Client> {
        let server = self.server.as_deref()?;
        let client = Client::new(server);
        let key = self.api_key.clone().or_else(|| std::env::var("WEFT_API_KEY").ok());
        Some(match key.filter(|k| !k.is_empty()) {
            Some(key) => client.api_key(key),
            None => client,
        })
    }
}

/// A client error as a failure: the server refusing the request (4xx) is exit 2 for an unknown
/// session, exit 1 otherwise.
pub(crate) fn failed(error: &weft_client::Error) -> Failure {
    match error.code() {
        Some("session_not_found") => Failure { code: 2, message: Some(error.to_string()) },
        _ => Failure::run(format!("the server: {error}")),
    }
}

/// What a remote run needs from `weft run`'s flags.
pub(crate) struct RemoteRun<'a> {
    pub(crate) client: Client,
    pub(crate) prompt: &'a str,
    pub(crate) options: ExecuteOptions,
    /// The model shown in the summary when the run does not say.
    pub(crate) model: Option<&'a str>,
}

/// A run on the server shown through `sink` (the terminal view when `terminal_view`), as
/// `weft run` shows a local one. Returns the run's outcome as the local run's
/// [`ExecuteResult`].
pub(crate) async fn run_native(
    run: RemoteRun<'_>,
    sink: &mut dyn Sink,
    signals: &mut Signals,
    terminal_view: bool,
) -> Result<(Option<ExecuteResult>, Driven), Failure> {
    let started = Instant::now();
    let mut stream = run.client.execute(Input::text(run.prompt), run.options);
    let outcome = show(&mut stream, sink, signals, Spinner::for_stderr(), true).await?;
    let result = stream.result().map(into_local);
    if terminal_view && let Some(result) = &result {
        let model = model_of(result).or(run.model).unwrap_or("?").to_string();
        let line = summary::line(result, &model, true, started.elapsed());
        term::eprint_line(&sanitize::visible(&line));
    }
    Ok((result, outcome))
}

/// Shows an execution's events through `sink`; a first Ctrl-C aborts the run on the server, a
/// second stops waiting. The stream's error (if any) is the failure.
pub(crate) async fn show(
    stream: &mut ExecuteStream,
    sink: &mut dyn Sink,
    signals: &mut Signals,
    mut spinner: Spinner,
    announce: bool,
) -> Result<Driven, Failure> {
    let abort = stream.abort_handle();
    // The stream's error, as the failure it is (said once: not wrapped in another error).
    let error: Arc<Mutex<Option<Failure>>> = Arc::default();
    let slot = Arc::clone(&error);
    let mut announced = !announce;
    let handle = stream.abort_handle();
    let records = stream
        .by_ref()
        .take_while(move |item| {
            let go = match item {
                Ok(_) => true,
                Err(e) => {
                    *slot.lock().unwrap_or_else(|p| p.into_inner()) = Some(failed(e));
                    false
                }
            };
            futures::future::ready(go)
        })
        .filter_map(move |item| {
            let record = match item {
                Ok(event) => match event.message {
                    NativeMessage::Event(event_) => {
                        if !announced && let Some(id) = handle.session_id() {
                            term::eprint_line(&format!("session: {}", sanitize::visible(&id)));
                            announced = true;
                        }
                        Some(Arc::new(EventRecord {
                            session_id: Arc::from(""),
                            run_id: Arc::from(""),
                            seq: event.seq,
                            node_id: None,
                            at: 0,
                            event: event_,
                            messages: None,
                        }))
                    }
                    // The native sink writes its own `execute_complete` after `session_end`.
                    NativeMessage::Complete { .. } => None,
                },
                Err(_) => None,
            };
            futures::future::ready(record)
        });
    let mut records = Box::pin(records);
    let abort_run = || {
        let abort = abort.clone();
        tokio::spawn(async move {
            // Nothing to abort any more (the run ended meanwhile) is fine.
            let _ = abort.abort().await;
        });
    };
    let driven = drive(&mut records, abort_run, sink, signals, &mut spinner).await;
    drop(records);
    if let Some(failure) = error.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(failure);
    }
    match driven {
        Ok(driven) => Ok(driven),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(Driven::Ended(None)),
        Err(e) => Err(Failure::run(format!("cannot write to stdout: {e}"))),
    }
}

/// The model of the last assistant message.
fn model_of(result: &ExecuteResult) -> Option<&str> {
    result.messages.iter().rev().find_map(|m| match m {
        Message::Assistant(a) => Some(a.model.as_str()),
        _ => None,
    })
}

/// A client result as the local run's.
pub(crate) fn into_local(result: weft_client::ExecuteResult) -> ExecuteResult {
    ExecuteResult {
        session_id: result.session_id,
        status: result.status,
        // The wire says the status and the last model failure's text, not what ended the run.
        outcome: RunOutcome::from_status(result.status, result.error.as_deref()),
        messages: result.messages.iter().map(|m| m.as_ref().clone()).collect(),
        pending_tool_calls: result.pending_tool_calls,
        pending_approvals: result.pending_approvals,
        usage: result.usage,
        cost: result.cost,
        steps: Vec::new(),
        error: result.error,
    }
}

/// A run on the server in another wire format, written as the server sends it: one JSON object
/// per line. Returns the session's status once the stream has ended.
pub(crate) async fn run_frames(
    run: RemoteRun<'_>,
    protocol: Protocol,
    out: &mut dyn Write,
    signals: &mut Signals,
) -> Result<SessionStatus, Failure> {
    let mut frames = run.client.execute_frames(Input::text(run.prompt), &run.options, protocol);
    let mut signalled = false;
    loop {
        let frame = tokio::select! {
            frame = frames.next() => frame,
            _ = signals.next(), if !signalled => {
                signalled = true;
                if let Some(id) = frames.session_id() {
                    let client = run.client.clone();
                    tokio::spawn(async move { let _ = client.abort(&id).await; });
                }
                continue;
            }
        };
        let Some(frame) = frame else { break };
        let frame = frame.map_err(|e| failed(&e))?;
        // NDJSON carries JSON objects only (as a local run's --protocol output).
        if frame.data.starts_with('{') {
            let written = writeln!(out, "{}", frame.data).and_then(|()| out.flush());
            match written {
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                    return Ok(SessionStatus::Completed);
                }
                Err(e) => return Err(Failure::run(format!("cannot write to stdout: {e}"))),
                Ok(()) => {}
            }
        }
    }
    let Some(id) = frames.session_id() else {
        return Err(Failure::run("the server's stream named no session"));
    };
    let view = run.client.get_session(&id).await.map_err(|e| failed(&e))?;
    Ok(view.status)
}
