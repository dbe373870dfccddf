//! The HTTP handlers, each described for `/openapi.json`.

use std::sync::Arc;

use axum::Extension;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use utoipa::IntoParams;

use crate::AppState;
use crate::api::{
    AbortResponse, ExecuteRequest, ForkRequest, FormatQuery, Health, JsonBody, ProtocolName,
    QueryParams, SessionList, SessionView,
};
use crate::auth::Caller;
use crate::error::{ApiError, ErrorBody};
use crate::execute::{self, load_owned};
use crate::stream::{self, Feed, WireFormat};

/// Where an attached stream resumes.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct StreamQuery {
    /// The wire format (see `execute`).
    #[param(value_type = Option<ProtocolName>)]
    protocol: Option<String>,
    /// Resume after this event seq (as the `Last-Event-ID` header does; the header wins).
    #[param(value_type = Option<u64>, minimum = 0)]
    after: Option<String>,
}

/// How many sessions a list shows.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct ListQuery {
    /// At most this many (1 to 1000, default 100).
    #[param(value_type = Option<u32>, minimum = 1, maximum = 1000)]
    limit: Option<String>,
}

fn stream_response(
    state: Arc<AppState>,
    feed: Feed,
    format: WireFormat,
    session_id: &str,
    run_id: Option<&str>,
) -> Response {
    let mut response = Response::new(stream::body(state, feed, format));
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(format.content_type()));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    if format.protocol == weft_protocol::Protocol::Vercel {
        let (name, value) = weft_protocol::vercel::HEADER;
        headers.insert(name, HeaderValue::from_static(value));
    }
    if let Ok(value) = HeaderValue::from_str(session_id) {
        headers.insert("x-session-id", value);
    }
    if let Some(value) = run_id.and_then(|r| HeaderValue::from_str(r).ok()) {
        headers.insert("x-run-id", value);
    }
    response
}

/// Start or resume a run and stream its events.
#[utoipa::path(
    post,
    path = "/api/agent/execute",
    tag = "agent",
    params(FormatQuery),
    request_body = ExecuteRequest,
    responses(
        (status = 200, description = "The run's events (SSE, `id:` = seq; or NDJSON), ending with `execute_complete { status, pendingToolCalls, pendingApprovals }` in the native format. Headers `X-Session-Id`, `X-Run-Id`.",
         content_type = "text/event-stream", body = String),
        (status = 400, description = "Malformed request, new session without `context`, unknown provider, mode or protocol", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 404, description = "Unknown session", body = ErrorBody),
        (status = 409, description = "The session is running (`multitask: reject`, with `runId`), waits on tool calls (`awaiting_tool_calls`), has nothing pending (`nothing_pending`), or a call was answered already (`already_answered`)", body = ErrorBody),
        (status = 413, description = "Body too large", body = ErrorBody),
        (status = 422, description = "A tool result or approval for an unknown call (`unknown_tool_call`), an answer of the wrong kind (`wrong_answer_kind`), or a call answered twice in one input or under another tool's name (`invalid_tool_result`)", body = ErrorBody),
        (status = 429, description = "Rate limited (`Retry-After`)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn execute(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    QueryParams(query): QueryParams<FormatQuery>,
    headers: HeaderMap,
    JsonBody(request): JsonBody<ExecuteRequest>,
) -> Result<Response, ApiError> {
    let format = WireFormat::negotiate(query.protocol(), &headers)?;
    let started = execute::start(&state, &caller, request).await?;
    Ok(stream_response(state, started.feed, format, &started.session_id, started.run_id.as_deref()))
}

/// The session: messages, status, pending calls, usage and cost.
#[utoipa::path(
    get,
    path = "/api/agent/session/{id}",
    tag = "agent",
    params(("id" = String, Path, description = "The session id", pattern = "^[A-Za-z0-9_.:-]{1,128}$")),
    responses(
        (status = 200, description = "The session", body = SessionView),
        (status = 400, description = "Invalid session id", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 404, description = "No such session for this caller", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn get_session(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<axum::Json<SessionView>, ApiError> {
    let Some((handle, _)) = load_owned(&state, &caller, &id).await? else {
        return Err(ApiError::session_not_found(&id));
    };
    let last_event_seq = handle.last_seq();
    let s = handle.snapshot();
    let fork = weft_agent::forked_from(&s.options);
    let branch =
        weft_agent::latest_branch(&s.options).map(|b| caller.namespace.client_id(b).to_string());
    Ok(axum::Json(SessionView {
        pending_tool_calls: s.pending_tool_calls(),
        pending_approvals: s.pending_approvals(),
        run_id: s.run.as_ref().map(|r| r.run_id.clone()),
        last_event_seq: last_event_seq.max(s.last_event_seq),
        id: caller.namespace.client_id(&s.id).to_string(),
        status: s.status,
        provider: s.provider,
        model: s.model,
        system_prompt: s.system_prompt.as_deref().map(str::to_owned),
        tools: s.tools,
        messages: s.messages,
        usage: s.usage,
        cost: s.cost,
        step_count: s.step_count,
        created_at: s.created_at,
        updated_at: s.updated_at,
        parent_id: fork.as_ref().map(|f| caller.namespace.client_id(&f.session_id).to_string()),
        forked_at: fork.map(|f| f.at_message),
        branch_id: branch,
    }))
}

/// Fork the session: a new session whose history is its first `atMessage` messages.
#[utoipa::path(
    post,
    path = "/api/agent/session/{id}/fork",
    tag = "agent",
    params(("id" = String, Path, description = "The session to fork", pattern = "^[A-Za-z0-9_.:-]{1,128}$")),
    request_body = ForkRequest,
    responses(
        (status = 201, description = "The new session (with `parentId` and `forkedAt`)", body = SessionView),
        (status = 400, description = "Invalid id or body", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 404, description = "No such session for this caller", body = ErrorBody),
        (status = 409, description = "The new id is taken", body = ErrorBody),
        (status = 422, description = "`atMessage` is past the end, or between a tool call and its result", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn fork(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    JsonBody(request): JsonBody<ForkRequest>,
) -> Result<Response, ApiError> {
    let forked =
        execute::fork(&state, &caller, &id, request.at_message, request.session_id).await?;
    let view = get_session(State(state), Extension(caller), Path(forked)).await?;
    Ok((StatusCode::CREATED, view).into_response())
}

/// Attach to the session's live or last run.
#[utoipa::path(
    get,
    path = "/api/agent/session/{id}/stream",
    tag = "agent",
    params(
        ("id" = String, Path, description = "The session id", pattern = "^[A-Za-z0-9_.:-]{1,128}$"),
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this event seq: no gap, no duplicate", minimum = 0),
        StreamQuery,
    ),
    responses(
        (status = 200, description = "The run's events from its start (or after the cursor) to its end", content_type = "text/event-stream", body = String),
        (status = 400, description = "Invalid id, cursor or protocol", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 404, description = "No such session for this caller", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn attach(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    QueryParams(query): QueryParams<StreamQuery>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let format = WireFormat::negotiate(query.protocol.as_deref(), &headers)?;
    let header = headers.get("last-event-id").map(|v| v.to_str().unwrap_or("?").to_string());
    let seen = match header.or(query.after) {
        None => None,
        Some(text) => Some(text.trim().parse::<u64>().map_err(|_| {
            ApiError::bad_request(
                "invalid_cursor",
                format!("Last-Event-ID / after must be an event seq (a number), not {text:?}"),
            )
        })?),
    };
    let feed = execute::attach(&state, &caller, &id, seen).await?;
    Ok(stream_response(state, feed, format, &id, None))
}

/// Abort the session's run.
#[utoipa::path(
    post,
    path = "/api/agent/session/{id}/abort",
    tag = "agent",
    params(("id" = String, Path, description = "The session id", pattern = "^[A-Za-z0-9_.:-]{1,128}$")),
    responses(
        (status = 200, description = "Aborted: every attached stream ends with the aborted run's end", body = AbortResponse),
        (status = 400, description = "Invalid session id", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 404, description = "No such session for this caller", body = ErrorBody),
        (status = 409, description = "Nothing to abort", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn abort(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<axum::Json<AbortResponse>, ApiError> {
    execute::abort(&state, &caller, &id).await?;
    Ok(axum::Json(AbortResponse { aborted: true }))
}

/// The caller's sessions, most recently updated first.
#[utoipa::path(
    get,
    path = "/api/agent/sessions",
    tag = "agent",
    params(ListQuery),
    responses(
        (status = 200, description = "Session heads", body = SessionList),
        (status = 400, description = "Invalid limit", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn list_sessions(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    QueryParams(query): QueryParams<ListQuery>,
) -> Result<axum::Json<SessionList>, ApiError> {
    let limit = match query.limit.as_deref() {
        None => 100,
        Some(text) => {
            text.trim().parse::<usize>().ok().filter(|n| (1..=1000).contains(n)).ok_or_else(
                || ApiError::bad_request("invalid_limit", "limit must be a number from 1 to 1000"),
            )?
        }
    };
    let mut sessions =
        state.agent.list_sessions(caller.scope(), limit).await.map_err(|e| match e {
            weft_agent::AgentError::Store(s) => ApiError::store(&s),
            other => {
                ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", other.to_string())
            }
        })?;
    for head in &mut sessions {
        head.id = caller.namespace.client_id(&head.id).to_string();
        // Links to other sessions, by the ids the caller knows them by.
        if let Some(options) = head.options.as_object_mut() {
            if let Some(parent) =
                options.get_mut(weft_agent::OPTION_FORKED_FROM).and_then(|f| f.get_mut("sessionId"))
                && let Some(stored) = parent.as_str()
            {
                *parent = caller.namespace.client_id(stored).into();
            }
            if let Some(branch) = options.get_mut(weft_agent::OPTION_BRANCH)
                && let Some(stored) = branch.as_str()
            {
                *branch = caller.namespace.client_id(stored).into();
            }
        }
    }
    Ok(axum::Json(SessionList { sessions }))
}

/// Delete a session with its messages and events (a running one is aborted first).
#[utoipa::path(
    delete,
    path = "/api/agent/session/{id}",
    tag = "agent",
    params(("id" = String, Path, description = "The session id", pattern = "^[A-Za-z0-9_.:-]{1,128}$")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, description = "Invalid session id", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 404, description = "No such session for this caller", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn delete_session(
    State(state): State<Arc<AppState>>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    execute::check_id(&id)?;
    let delete = |stored: String| async {
        let deleted =
            state.agent.delete_session(&stored, caller.scope()).await.map_err(|e| match e {
                weft_agent::AgentError::Store(s) => ApiError::store(&s),
                other => {
                    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", other.to_string())
                }
            })?;
        Ok::<_, ApiError>(deleted.then_some(stored))
    };
    let mut deleted = delete(caller.namespace.store_id(&id)).await?;
    if let (None, Some(legacy)) = (&deleted, caller.namespace.legacy_id(&id)) {
        // Stored before owners had namespaces (the scope keeps it to its owner).
        deleted = delete(legacy.to_string()).await?;
    }
    let Some(stored) = deleted else {
        return Err(ApiError::session_not_found(&id));
    };
    state.forget(&stored);
    tracing::info!(session_id = %stored, "session deleted");
    Ok(StatusCode::NO_CONTENT)
}

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "Alive", body = Health)))]
pub(crate) async fn healthz() -> axum::Json<Health> {
    axum::Json(Health { status: "ok".into() })
}

/// Readiness: the session store takes a write (one that leaves nothing behind), in 2 s.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "The store cannot write (a full disk, a lost database) or does not answer", body = Health),
    ))]
pub(crate) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let Some(store) = state.agent.store() else {
        return axum::Json(Health { status: "ok".into() }).into_response();
    };
    let started = std::time::Instant::now();
    let probe = tokio::time::timeout(std::time::Duration::from_secs(2), store.probe_write()).await;
    state.metrics.store_call(started.elapsed());
    match probe {
        Ok(Ok(())) => axum::Json(Health { status: "ok".into() }).into_response(),
        Ok(Err(error)) => {
            tracing::warn!(%error, "readiness: the store cannot write");
            (StatusCode::SERVICE_UNAVAILABLE, axum::Json(Health { status: "unavailable".into() }))
                .into_response()
        }
        Err(_) => {
            tracing::warn!("readiness: the store did not answer in 2 s");
            (StatusCode::SERVICE_UNAVAILABLE, axum::Json(Health { status: "unavailable".into() }))
                .into_response()
        }
    }
}

/// Prometheus metrics (text exposition format). They show every owner's use: on a server with
/// API keys a key is needed, unless the configuration makes them public (`[metrics] public`).
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses(
        (status = 200, description = "Metrics", content_type = "text/plain", body = String),
        (status = 401, description = "Missing or invalid API key (a server with keys, metrics not public)", body = ErrorBody),
        (status = 429, description = "Rate limited (the key's rate, or too many wrong keys from this address)", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn metrics(State(state): State<Arc<AppState>>) -> Response {
    let mut response = Response::new(Body::from(state.metrics.render()));
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}

/// Anything else: 404 in JSON.
pub(crate) async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint")
}

/// A known path with another method: 405 in JSON.
pub(crate) async fn method_not_allowed() -> ApiError {
    ApiError::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", "method not allowed here")
}
