//! Starting runs and attaching to them: what `POST /api/agent/execute`, `GET …/stream` and the
//! WebSocket share. Sessions are looked up for their owner only, by the ids the owner chose
//! (mapped to stored ids by `ids`: every function here takes and shows client ids); runs belong
//! to the server (tracked here until they end, whoever watches them).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use futures::StreamExt;
use weft_agent::{
    AbortHandle, AgentError, ExecuteError, ExecuteStream, SessionHandle, SessionOptions,
};
use weft_core::store::SessionHead;
use weft_core::{Input, SessionStatus, StoreError, now_ms};

use crate::AppState;
use crate::api::{ExecuteContext, ExecuteOptions, ExecuteRequest, Multitask, OnDisconnect};
use crate::auth::Caller;
use crate::error::{ApiError, shown};
use crate::ids::ShownId;
use crate::stream::{CancelOnDrop, Feed, run_start};

/// How many times an enqueued or interrupting input tries to start before giving up (each try
/// follows the end of a run that got the session first).
const START_TRIES: usize = 64;

/// A run started for a request.
pub(crate) struct Started {
    /// The session, by the id the client knows it by.
    pub(crate) session_id: String,
    pub(crate) run_id: Option<String>,
    pub(crate) feed: Feed,
}

/// A session id as clients may give it: 1 to 128 of `A-Z a-z 0-9 _ - . :`.
pub(crate) fn check_id(id: &str) -> Result<(), ApiError> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.:".contains(&b));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            "invalid_session_id",
            format!(
                "invalid session id {}: use 1 to 128 letters, digits, '_', '-', '.' or ':'",
                shown(id)
            ),
        ))
    }
}

fn agent_error(error: AgentError) -> ApiError {
    match error {
        AgentError::Store(store) => ApiError::store(&store),
        AgentError::InvalidToolName { .. } => {
            ApiError::bad_request("invalid_tool_name", error.to_string())
        }
        AgentError::UnknownProvider { name, allowed } => unknown_provider(&name, &allowed),
        other => ApiError::bad_request("invalid_tools", other.to_string()),
    }
}

fn unknown_provider(name: &str, allowed: &[String]) -> ApiError {
    ApiError::bad_request(
        "unknown_provider",
        format!("unknown provider {}: allowed: {}", shown(name), allowed.join(", ")),
    )
}

/// A store error about the session the client knows as `client_id`, said with that id.
fn store_error(error: &StoreError, client_id: &str) -> ApiError {
    match error {
        StoreError::NotFound(_) => ApiError::session_not_found(client_id),
        StoreError::Conflict { expected, found, .. } => ApiError::store(&StoreError::Conflict {
            session_id: client_id.to_string(),
            expected: *expected,
            found: *found,
        }),
        other => ApiError::store(other),
    }
}

/// A refused input of the session the client knows as `client_id`, said with that id.
fn execute_error(error: ExecuteError, client_id: &str) -> ApiError {
    match error {
        ExecuteError::AlreadyRunning(_) => ApiError::session_running(client_id, None),
        ExecuteError::AwaitingToolCalls { calls, .. } => {
            ExecuteError::AwaitingToolCalls { session: client_id.to_string(), calls }.into()
        }
        ExecuteError::NothingPending(_) => {
            ExecuteError::NothingPending(client_id.to_string()).into()
        }
        ExecuteError::Store(store) => store_error(&store, client_id),
        other => other.into(),
    }
}

/// The caller's session `id` (the id the caller chose), if there is one; another owner's and
/// a missing session alike: `None`, after the same lookups.
pub(crate) async fn load_owned(
    state: &AppState,
    caller: &Caller,
    id: &str,
) -> Result<Option<(SessionHandle, Option<SessionHead>)>, ApiError> {
    check_id(id)?;
    let started = Instant::now();
    let mut found = lookup(state, caller, &caller.namespace.store_id(id), id).await;
    if let (Ok(None), Some(legacy)) = (&found, caller.namespace.legacy_id(id)) {
        // Stored before owners had namespaces: found only if the caller owns it.
        found = lookup(state, caller, legacy, id).await;
    }
    state.metrics.store_call(started.elapsed());
    found
}

/// The stored session `stored` if the caller owns it (`client_id` names it in errors).
async fn lookup(
    state: &AppState,
    caller: &Caller,
    stored: &str,
    client_id: &str,
) -> Result<Option<(SessionHandle, Option<SessionHead>)>, ApiError> {
    let head = match state.agent.store() {
        Some(store) => match store.head(stored).await.map_err(|e| store_error(&e, client_id))? {
            Some(head) if caller.scope().admits(head.owner.as_deref()) => Some(head),
            _ => return Ok(None),
        },
        None => None,
    };
    let handle = state.agent.session(stored).await.map_err(|e| match e {
        AgentError::Store(store) => store_error(&store, client_id),
        other => agent_error(other),
    })?;
    let Some(handle) = handle else { return Ok(None) };
    if head.is_none() && !caller.scope().admits(handle.snapshot().owner.as_deref()) {
        return Ok(None);
    }
    Ok(Some((handle, head)))
}

pub(crate) fn check_options(state: &AppState, options: &ExecuteOptions) -> Result<(), ApiError> {
    if let Some(provider) = options.provider.as_deref() {
        let allowed = state.agent.provider_names();
        if !allowed.iter().any(|p| p == provider) {
            return Err(unknown_provider(provider, &allowed));
        }
    }
    mode_of(state, options)?;
    if let Some(turns) = options.max_turns
        && !(1..=state.settings.max_turns).contains(&turns)
    {
        return Err(ApiError::bad_request(
            "invalid_max_turns",
            format!(
                "options.maxTurns must be from 1 to {} (this server's limits.max_turns), not {turns}",
                state.settings.max_turns
            ),
        ));
    }
    Ok(())
}

/// The mode `options` ask for (`None`: the default), with its parameters, read by the
/// agent's modes (the built-in ones and any the agent was built with).
pub(crate) fn mode_of(
    state: &AppState,
    options: &ExecuteOptions,
) -> Result<Option<weft_agent::Mode>, ApiError> {
    if options.mode.is_none() && options.mode_options.is_none() {
        return Ok(None);
    }
    let modes = state.agent.modes();
    let name = options.mode.as_deref().unwrap_or("react");
    let parameters = options.mode_options.clone().unwrap_or_default();
    modes.parse(name, &parameters).map(Some).map_err(|e| match e {
        weft_agent::ModeError::Unknown { known, .. } => ApiError::bad_request(
            "unknown_mode",
            format!("unknown mode {}: allowed: {}", shown(name), known.join(", ")),
        ),
        e => ApiError::bad_request("invalid_mode_options", format!("options.modeOptions: {e}")),
    })
}

/// An existing session (`client_id` to its client) keeps its provider, model, system prompt
/// and turn limit.
pub(crate) fn check_same(
    state: &AppState,
    head: Option<&SessionHead>,
    options: &ExecuteOptions,
    client_id: &str,
) -> Result<(), ApiError> {
    let Some(head) = head else { return Ok(()) };
    let differs = |given: Option<&str>, kept: Option<&str>| given.is_some() && given != kept;
    let kept = weft_agent::SessionSettings::read(&head.options, state.agent.modes());
    let max_turns = kept.max_turns.unwrap_or(state.settings.max_turns).to_string();
    let given_turns = options.max_turns.map(|n| n.to_string());
    for (name, given, kept) in [
        ("provider", options.provider.as_deref(), Some(head.provider.as_str())),
        ("model", options.model.as_deref(), Some(head.model.as_str())),
        ("systemPrompt", options.system_prompt.as_deref(), head.system_prompt.as_deref()),
        ("maxTurns", given_turns.as_deref(), Some(max_turns.as_str())),
        ("mode", options.mode.as_deref(), Some(kept.mode.name())),
    ] {
        if differs(given, kept) {
            return Err(ApiError::bad_request(
                "session_option_fixed",
                format!(
                    "session {} keeps the {name} it was created with; leave options.{name} out",
                    shown(client_id)
                ),
            ));
        }
    }
    Ok(())
}

/// Messages stamped now when the client left their time out.
pub(crate) fn stamp(mut input: Input) -> Input {
    let now = now_ms();
    match &mut input {
        Input::User(message) if message.timestamp == 0 => message.timestamp = now,
        Input::ToolResults(results) => {
            for result in results.iter_mut().filter(|r| r.timestamp == 0) {
                result.timestamp = now;
            }
        }
        _ => {}
    }
    input
}

/// Creates the caller's session `id` (a client id; `None`: a new one) from `context`.
pub(crate) async fn create(
    state: &AppState,
    caller: &Caller,
    id: Option<String>,
    context: ExecuteContext,
    options: &ExecuteOptions,
) -> Result<(SessionHandle, Option<SessionHead>), ApiError> {
    let wanted = id.clone();
    // In an owner's namespace the server names a new session itself, so that its stored id
    // has the namespace too; without one the agent does.
    let stored = match (caller.namespace.is_owned(), id) {
        (true, id) => {
            Some(caller.namespace.store_id(&id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string())))
        }
        (false, id) => id,
    };
    let created = state
        .agent
        .create_session(SessionOptions {
            id: stored,
            model: options.model.clone(),
            system_prompt: options.system_prompt.clone().or(context.system_prompt).map(Into::into),
            tools: context.tools,
            messages: context.messages,
            owner: caller.owner.clone(),
            provider: options.provider.clone(),
            max_turns: options.max_turns,
            mode: mode_of(state, options)?,
        })
        .await;
    match created {
        Ok(handle) => Ok((handle, None)),
        // Created a moment ago by another request of the caller's (another owner's sessions
        // are in another namespace): the same answer as for a session that does not exist.
        Err(AgentError::Store(weft_core::StoreError::AlreadyExists(_))) => {
            Err(ApiError::session_not_found(wanted.as_deref().unwrap_or("")))
        }
        Err(other) => Err(agent_error(other)),
    }
}

/// The id of the session's current run, if it has one.
pub(crate) fn run_id(session: &SessionHandle) -> Option<String> {
    session.snapshot().run.map(|run| run.run_id)
}

/// Waits until the session's current run (in this process or another) has ended.
pub(crate) async fn wait_for_end(session: &SessionHandle) {
    let mut events = Box::pin(session.subscribe(session.last_seq()));
    while events.next().await.is_some() {}
}

/// The caller's session `session_id`, or a new one made from `context` when there is none
/// (a new session starts with a user message).
async fn open_or_create(
    state: &AppState,
    caller: &Caller,
    session_id: Option<String>,
    context: Option<ExecuteContext>,
    options: &ExecuteOptions,
    input: &Input,
) -> Result<(SessionHandle, Option<SessionHead>), ApiError> {
    let new_session_input = || {
        if matches!(input, Input::User(_)) {
            Ok(())
        } else {
            Err(ApiError::bad_request(
                "user_message_required",
                "a new session starts with a user message (tool results and approvals resume an \
                 existing session: send its sessionId)",
            ))
        }
    };
    match session_id {
        Some(id) => match load_owned(state, caller, &id).await? {
            Some(found) => Ok(found),
            None => match context {
                Some(context) => {
                    new_session_input()?;
                    create(state, caller, Some(id), context, options).await
                }
                None => Err(ApiError::session_not_found(&id)),
            },
        },
        None => match context {
            Some(context) => {
                new_session_input()?;
                create(state, caller, None, context, options).await
            }
            None => Err(ApiError::bad_request(
                "context_required",
                "a new session needs a context ({\"messages\": [], \"tools\": []}); to \
                 continue a session, send its sessionId",
            )),
        },
    }
}

/// Starts (or resumes) a run for `request`.
pub(crate) async fn start(
    state: &Arc<AppState>,
    caller: &Caller,
    request: ExecuteRequest,
) -> Result<Started, ApiError> {
    let ExecuteRequest { session_id, input, context, options } = request;
    check_options(state, &options)?;
    let input = stamp(input);
    let multitask = options.multitask.unwrap_or_default();
    let (session, head) =
        open_or_create(state, caller, session_id, context, &options, &input).await?;
    let id = session.id();
    let shown_id = caller.namespace.client_id(&id).to_string();
    check_same(state, head.as_ref(), &options, &shown_id)?;
    tracing::Span::current().record("session_id", id.as_str());
    // Enqueued inputs of one session start in the order they arrived (in this process).
    let _queued = match multitask {
        Multitask::Enqueue => Some(state.queue(&id).lock_owned().await),
        _ => None,
    };
    let durability = options.durability.unwrap_or(state.settings.durability);
    let run_options = weft_agent::RunOptions::default().durability(durability);
    let mut tries = 0;
    let (stream, after) = loop {
        tries += 1;
        // A run being recovered (its process died) is waited for whatever the strategy: the
        // agent queues the input behind it.
        if session.status() == SessionStatus::Running && !session.is_recovering() {
            match multitask {
                Multitask::Reject => {
                    return Err(ApiError::session_running(&shown_id, run_id(&session)));
                }
                Multitask::Enqueue => wait_for_end(&session).await,
                Multitask::Interrupt => {
                    session.abort().await;
                    wait_for_end(&session).await;
                }
            }
        }
        match state.agent.execute_with(&session, input.clone(), run_options).await {
            Ok(stream) => {
                let after = stream.after_seq();
                break (stream, after);
            }
            Err(ExecuteError::AlreadyRunning(_))
                if multitask != Multitask::Reject && tries < START_TRIES =>
            {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(ExecuteError::AlreadyRunning(_)) => {
                return Err(ApiError::session_running(&shown_id, run_id(&session)));
            }
            Err(other) => return Err(execute_error(other, &shown_id)),
        }
    };
    let run_id = run_id(&session);
    if let Some(run_id) = &run_id {
        tracing::Span::current().record("run_id", run_id.as_str());
    }
    tracing::info!(session_id = %id, run_id = run_id.as_deref().unwrap_or(""), "run started");
    let abort = stream.abort_handle();
    track(Arc::clone(state), stream, id.clone(), run_id.clone());
    let cancel = (options.on_disconnect == OnDisconnect::Cancel).then(|| CancelOnDrop::new(abort));
    let feed = Feed {
        records: Box::pin(session.subscribe(after)),
        seen: after,
        cancel,
        ids: Some(ShownId::new(&id, &shown_id)),
    };
    Ok(Started { session_id: shown_id, run_id, feed })
}

/// A stream of the session's live or last run; `seen`: the client has every event up to it.
pub(crate) async fn attach(
    state: &Arc<AppState>,
    caller: &Caller,
    id: &str,
    seen: Option<u64>,
) -> Result<Feed, ApiError> {
    let Some((session, head)) = load_owned(state, caller, id).await? else {
        return Err(ApiError::session_not_found(id));
    };
    let stored = session.id();
    tracing::Span::current().record("session_id", stored.as_str());
    let running = session.status() == SessionStatus::Running;
    // Where the live or last run starts, as the session holds it now: loading it may have
    // recovered a dead run (this process took over its identity), which starts after the dead
    // run's events; the head read before the load still names the dead run.
    let recorded = weft_agent::run_after_seq(&session.snapshot().options)
        .or_else(|| head.as_ref().and_then(|h| weft_agent::run_after_seq(&h.options)));
    let from = run_start(state, &stored, seen, running, recorded).await?;
    Ok(Feed {
        records: Box::pin(session.subscribe(from)),
        seen: seen.unwrap_or(from).max(from),
        cancel: None,
        ids: Some(ShownId::new(&stored, id)),
    })
}

/// Forks the caller's session `id` at `at_message` into a new session (`new_id`, a client id;
/// default: a new UUID); the new session's client id.
pub(crate) async fn fork(
    state: &AppState,
    caller: &Caller,
    id: &str,
    at_message: Option<usize>,
    new_id: Option<String>,
) -> Result<String, ApiError> {
    if let Some(new_id) = &new_id {
        check_id(new_id)?;
    }
    let Some((parent, _)) = load_owned(state, caller, id).await? else {
        return Err(ApiError::session_not_found(id));
    };
    let client_id = new_id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let options =
        weft_agent::ForkOptions { id: Some(caller.namespace.store_id(&client_id)), at_message };
    match state.agent.fork_session(&parent, options).await {
        Ok(_) => Ok(client_id),
        Err(AgentError::InvalidFork(reason)) => Err(ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_fork",
            reason.replace(&parent.id(), id),
        )),
        Err(AgentError::Store(StoreError::AlreadyExists(_))) => Err(ApiError::new(
            StatusCode::CONFLICT,
            "session_exists",
            format!("a session {} exists already; fork under another id", shown(&client_id)),
        )),
        Err(other) => Err(agent_error(other)),
    }
}

/// Aborts the session's run; 409 when there is nothing to abort.
pub(crate) async fn abort(state: &AppState, caller: &Caller, id: &str) -> Result<(), ApiError> {
    let Some((session, _)) = load_owned(state, caller, id).await? else {
        return Err(ApiError::session_not_found(id));
    };
    let stored = session.id();
    tracing::Span::current().record("session_id", stored.as_str());
    if session.abort().await {
        tracing::info!(session_id = %stored, "run aborted by request");
        Ok(())
    } else {
        Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_running",
            format!("session {} has no run to abort", shown(id)),
        ))
    }
}

/// The runs this server started and that have not ended yet.
#[derive(Default)]
pub(crate) struct Runs {
    next: AtomicU64,
    active: Mutex<HashMap<u64, AbortHandle>>,
    changed: tokio::sync::Notify,
}

impl Runs {
    fn add(&self, abort: AbortHandle) -> u64 {
        let token = self.next.fetch_add(1, Ordering::Relaxed);
        self.active.lock().unwrap_or_else(|e| e.into_inner()).insert(token, abort);
        token
    }

    fn remove(&self, token: u64) {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).remove(&token);
        self.changed.notify_waiters();
    }

    fn count(&self) -> usize {
        self.active.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// Waits up to `limit` for every run to end; says whether they did.
    async fn wait_idle(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.count() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.count() == 0;
            }
        }
    }

    /// At shutdown: lets runs end for `grace`, then aborts the rest (an abort is saved, so
    /// every run rests at a durable point and gives its lease back) and waits for them.
    pub(crate) async fn drain(&self, grace: Duration) {
        if self.wait_idle(grace).await {
            return;
        }
        let left: Vec<AbortHandle> =
            self.active.lock().unwrap_or_else(|e| e.into_inner()).values().cloned().collect();
        tracing::warn!(runs = left.len(), "shutting down: aborting runs still under way");
        for abort in left {
            abort.abort();
        }
        if !self.wait_idle(Duration::from_secs(10)).await {
            tracing::error!(runs = self.count(), "runs did not end after their abort");
        }
    }
}

/// Follows a run to its end for the metrics and the shutdown, whoever watches it.
fn track(state: Arc<AppState>, stream: ExecuteStream, session_id: String, run_id: Option<String>) {
    let token = state.runs.add(stream.abort_handle());
    state.metrics.run_started();
    tokio::spawn(async move {
        let result = stream.result().await;
        tracing::info!(
            session_id = %session_id,
            run_id = run_id.as_deref().unwrap_or(""),
            status = %result.status,
            "run ended"
        );
        state.metrics.run_finished(&result);
        state.runs.remove(token);
    });
}
