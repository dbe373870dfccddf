//! The API's request and response bodies (their JSON is the agent plan's: camelCase), and the
//! JSON body extractor that turns every mistake into a 400 saying where.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use weft_core::{Cost, History, Input, Message, SessionStatus, ToolCall, ToolSpec, Usage};

use crate::error::ApiError;

/// `POST /api/agent/execute`: the plan's `ExecuteRequest`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecuteRequest {
    /// The session; without one (or with an id that does not exist yet, given `context`) a new
    /// session is created. Ids are the caller's own (1 to 128 of `A-Z a-z 0-9 _ - . :`): with
    /// API keys, each owner has a namespace, so two owners may use the same id for two sessions.
    #[serde(default)]
    pub session_id: Option<String>,
    /// A user message (`{"role":"user","content":"…"}`, which starts a run), an array of
    /// tool-result messages (`[{"role":"toolResult","toolCallId","toolName","content"}]`, which
    /// resume a run awaiting remote tools) or approval decisions
    /// (`{"approvals":[{"toolCallId","approved","reason?"}]}`).
    #[schema(schema_with = input_schema)]
    pub input: Input,
    /// For a new session: the messages it starts with and its tools. A tool without a local
    /// executor of the same name is a remote tool, run by the client.
    #[serde(default, deserialize_with = "optional_object")]
    pub context: Option<ExecuteContext>,
    /// Options.
    #[serde(default, deserialize_with = "object")]
    pub options: ExecuteOptions,
}

/// Reads `T` from a JSON object only: serde reads a struct from an array of its fields too
/// (`"options": [null, null]`), which the API's schema does not allow.
fn object<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct ObjectOnly<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for ObjectOnly<T> {
        type Value = T;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
            T::deserialize(serde::de::value::MapAccessDeserializer::new(map))
        }
    }
    deserializer.deserialize_map(ObjectOnly(std::marker::PhantomData))
}

/// [`object`], or `null`.
fn optional_object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    struct Optional<T>(std::marker::PhantomData<T>);
    impl<'de, T: Deserialize<'de>> serde::de::Visitor<'de> for Optional<T> {
        type Value = Option<T>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("an object or null")
        }
        fn visit_none<E: serde::de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_unit<E: serde::de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }
        fn visit_some<D2: serde::Deserializer<'de>>(self, d: D2) -> Result<Option<T>, D2::Error> {
            object(d).map(Some)
        }
    }
    deserializer.deserialize_option(Optional(std::marker::PhantomData))
}

/// The schema of `ExecuteRequest.input`: one of its three forms, as the server reads them.
fn input_schema() -> utoipa::openapi::schema::Schema {
    use utoipa::openapi::schema::{ArrayBuilder, ObjectBuilder, OneOfBuilder, Type};
    let string = || ObjectBuilder::new().schema_type(Type::String);
    let tag =
        |value: &str| ObjectBuilder::new().schema_type(Type::String).enum_values(Some([value]));
    let text_block = || {
        ObjectBuilder::new()
            .property("type", tag("text"))
            .required("type")
            .property("text", string())
            .required("text")
    };
    let image_block = || {
        ObjectBuilder::new()
            .property("type", tag("image"))
            .required("type")
            .property("data", string())
            .required("data")
            .property("mimeType", string())
            .required("mimeType")
    };
    let content = || {
        OneOfBuilder::new().item(string()).item(
            ArrayBuilder::new().items(OneOfBuilder::new().item(text_block()).item(image_block())),
        )
    };
    let user = ObjectBuilder::new()
        .property("role", tag("user"))
        .required("role")
        .property("content", content())
        .required("content");
    let result = ObjectBuilder::new()
        .property("role", tag("toolResult"))
        .required("role")
        .property("toolCallId", string().min_length(Some(1)))
        .required("toolCallId")
        .property("toolName", string())
        .property("content", content())
        .required("content")
        .property("isError", ObjectBuilder::new().schema_type(Type::Boolean));
    let decision = ObjectBuilder::new()
        .property("toolCallId", string().min_length(Some(1)))
        .required("toolCallId")
        .property("approved", ObjectBuilder::new().schema_type(Type::Boolean))
        .required("approved")
        .property("reason", string());
    let approvals = ObjectBuilder::new()
        .property("approvals", ArrayBuilder::new().items(decision).min_items(Some(1)))
        .required("approvals");
    OneOfBuilder::new()
        .item(user)
        .item(ArrayBuilder::new().items(result).min_items(Some(1)))
        .item(approvals)
        .into()
}

/// The context of a new session.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecuteContext {
    /// Messages the conversation starts with.
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub messages: Vec<Message>,
    /// Tools (`{name, label?, description, parameters, requiresApproval?}`).
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<ToolSpec>,
    /// The plan's context may carry the system prompt too.
    #[serde(default)]
    pub system_prompt: Option<String>,
}

/// What to do with an input while the session's run is under way.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Multitask {
    /// Refuse it: 409 with the running run's id.
    #[default]
    Reject,
    /// Wait for the run to end, then start (the response begins then).
    Enqueue,
    /// Abort the run, wait for its end, then start.
    Interrupt,
}

/// What a client's disconnection does to the run it started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum OnDisconnect {
    /// The run goes on; attach again with `GET …/stream`.
    #[default]
    Continue,
    /// The run is aborted.
    Cancel,
}

/// The schema of `ExecuteOptions.modeOptions`: the built-in modes' parameters, as the library
/// describes and reads them (`weft_agent::Modes`), so the document never differs from what
/// the server accepts.
fn mode_options_schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    let mut schema = weft_agent::Modes::builtin().parameters_schema();
    // The field is optional and may be `null`, as the server reads it.
    schema["type"] = serde_json::json!(["object", "null"]);
    serde_json::from_value(schema).unwrap_or_else(|_| {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::Object)
            .into()
    })
}

/// Options of an execute request. `provider`, `model`, `systemPrompt`, `maxTurns` and `mode`
/// apply to a new session (an existing one keeps its own; a different value is refused).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExecuteOptions {
    /// The provider, one of those this server is configured with (default: its first); an
    /// unknown one is refused naming the allowed values.
    #[serde(default)]
    pub provider: Option<String>,
    /// The model id (default: the provider's configured model).
    #[serde(default)]
    pub model: Option<String>,
    /// The system prompt.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// The most model calls a run of this session may make, from 1 to the server's
    /// `limits.max_turns` (its default); kept with the session, so it holds across resumes.
    #[serde(default)]
    pub max_turns: Option<u32>,
    /// The agent mode: `react` (default), `tot` (tree of thoughts), `got` (graph of
    /// thoughts), or one the agent was built with.
    #[serde(default)]
    pub mode: Option<String>,
    /// The mode's parameters (each optional; defaults as documented); one that no mode has is
    /// refused.
    #[serde(default)]
    #[schema(schema_with = mode_options_schema)]
    pub mode_options: Option<serde_json::Map<String, serde_json::Value>>,
    /// While a run is under way: `reject` (the default of `/api/agent/execute`), `enqueue` or
    /// `interrupt` (the default of the front-end endpoints: see `[frontends] multitask`).
    #[serde(default)]
    pub multitask: Option<Multitask>,
    /// When the client goes away: `continue` (default) or `cancel`.
    #[serde(default)]
    pub on_disconnect: OnDisconnect,
    /// How durably this run is stored (default: the server's `durability`, itself `async` by
    /// default): `sync` (no event is streamed before the store has it), `async` (events stream
    /// at once and are stored just behind), `exit` (stored when the run ends or suspends).
    #[serde(default)]
    #[schema(schema_with = durability_schema)]
    pub durability: Option<weft_core::Durability>,
}

/// The OpenAPI schema of `options.durability`: one of its names, or `null`.
fn durability_schema() -> utoipa::openapi::schema::Schema {
    let mut names: Vec<serde_json::Value> =
        weft_core::Durability::ALL.iter().map(|d| d.as_str().into()).collect();
    names.push(serde_json::Value::Null);
    let schema = serde_json::json!({ "type": ["string", "null"], "enum": names });
    serde_json::from_value(schema).unwrap_or_else(|_| {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .into()
    })
}

/// `GET /api/agent/session/{id}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    /// Its id.
    pub id: String,
    /// Where it stands: `idle`, `running`, `completed`, `awaiting_tool_execution`,
    /// `awaiting_approval`, `error`, `aborted`, `max_turns`.
    #[schema(value_type = String)]
    pub status: SessionStatus,
    /// The provider.
    pub provider: String,
    /// The model.
    pub model: String,
    /// The system prompt.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Its tools (remote ones: the client runs them).
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<ToolSpec>,
    /// The whole conversation (shared with the session, not copied).
    #[schema(value_type = Vec<Object>)]
    pub messages: History,
    /// Calls waiting for remote results.
    #[schema(value_type = Vec<Object>)]
    pub pending_tool_calls: Vec<ToolCall>,
    /// Calls waiting for approval.
    #[schema(value_type = Vec<Object>)]
    pub pending_approvals: Vec<ToolCall>,
    /// Tokens over the session's life.
    #[schema(value_type = Object)]
    pub usage: Usage,
    /// Cost over the session's life.
    #[schema(value_type = Object)]
    pub cost: Cost,
    /// The current or suspended run's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The sequence number of its last event (`Last-Event-ID` of a stream that saw everything).
    pub last_event_seq: u64,
    /// Model calls made.
    pub step_count: u32,
    /// Created (ms since the epoch).
    pub created_at: u64,
    /// Last changed (ms since the epoch).
    pub updated_at: u64,
    /// The session it was forked from (`POST …/fork`, or a front end's edit or regenerate).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_id: Option<String>,
    /// How many of the parent's messages it kept: its history before its own.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub forked_at: Option<usize>,
    /// The newest branch forked for a front end from this session: `POST /api/chat` and
    /// `POST /api/ag-ui` requests naming this id go there.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub branch_id: Option<String>,
}

/// `POST /api/agent/session/{id}/fork`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkRequest {
    /// How many of the session's messages the fork keeps (default: all). It may not fall
    /// between a tool call and its result.
    #[serde(default)]
    pub at_message: Option<usize>,
    /// The new session's id (default: a new UUID).
    #[serde(default)]
    pub session_id: Option<String>,
}

/// `GET /api/agent/sessions`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct SessionList {
    /// The caller's sessions, most recently updated first.
    #[schema(value_type = Vec<Object>)]
    pub sessions: Vec<weft_core::store::SessionHead>,
}

/// `POST /api/agent/session/{id}/abort`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AbortResponse {
    /// Always `true` (a session with nothing to abort is a 409).
    pub aborted: bool,
}

/// `GET /healthz`, `GET /readyz`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `unavailable` (readiness: the store did not answer).
    pub status: String,
}

/// A JSON request body. Malformed JSON is a 400 naming the line, column and field; a body over
/// the limit is a 413; any content type is read as JSON (so `curl -d` works).
pub(crate) struct JsonBody<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state).await.map_err(|rejection| {
            if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    "the request body is larger than this server accepts",
                )
            } else {
                ApiError::bad_request("bad_body", format!("cannot read the body: {rejection}"))
            }
        })?;
        parse_json(&bytes).map(JsonBody)
    }
}

/// The wire format of a stream.
#[derive(Debug, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub(crate) struct FormatQuery {
    /// `native`, `loom`, `loom-export`, `aceai`, `ag-ui` or `vercel` (default: from `Accept`:
    /// `application/x-ndjson` → `loom` as NDJSON, otherwise `native` as SSE).
    #[param(value_type = Option<ProtocolName>)]
    protocol: Option<String>,
}

/// The wire formats, as `?protocol=` names them (the OpenAPI document's enumeration; the
/// server parses the query as text and answers 400 for anything else).
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub(crate) enum ProtocolName {
    /// The agent plan's events.
    #[schema(rename = "native")]
    Native,
    /// Loom NDJSON.
    #[schema(rename = "loom")]
    Loom,
    /// Loom's single-key export form.
    #[schema(rename = "loom-export")]
    LoomExport,
    /// AceAI step events.
    #[schema(rename = "aceai")]
    Aceai,
    /// AG-UI events.
    #[schema(rename = "ag-ui")]
    AgUi,
    /// The Vercel AI SDK UI message stream.
    #[schema(rename = "vercel")]
    Vercel,
}

impl FormatQuery {
    /// The `protocol` asked for.
    pub(crate) fn protocol(&self) -> Option<&str> {
        self.protocol.as_deref()
    }
}

/// A query string. One that does not parse (a repeated or malformed parameter) is a JSON 400,
/// like every other mistake of a client.
pub(crate) struct QueryParams<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> axum::extract::FromRequestParts<S> for QueryParams<T> {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        state: &S,
    ) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Query(value)| QueryParams(value))
            .map_err(|rejection| ApiError::bad_request("bad_query", rejection.body_text()))
    }
}

/// Parses JSON, saying where it is wrong.
pub(crate) fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|error| {
        let path = error.path().to_string();
        let inner = error.inner();
        let at = format!("line {} column {}", inner.line(), inner.column());
        let message = match (inner.classify(), path.as_str()) {
            (serde_json::error::Category::Eof, _) if bytes.iter().all(u8::is_ascii_whitespace) => {
                "the request body is empty; send a JSON object".to_string()
            }
            (serde_json::error::Category::Syntax | serde_json::error::Category::Eof, _) => {
                format!("malformed JSON at {at}: {inner}")
            }
            (_, ".") => format!("invalid request at {at}: {inner}"),
            _ => format!("invalid request: {path}: {inner}"),
        };
        ApiError::bad_request("bad_request", message)
    })?;
    deserializer.end().map_err(|e| {
        ApiError::bad_request("bad_request", format!("malformed JSON: trailing characters ({e})"))
    })?;
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(body: &str) -> String {
        parse_json::<ExecuteRequest>(body.as_bytes())
            .err()
            .map(|e| e.detail.message)
            .unwrap_or_default()
    }

    #[test]
    fn options_and_context_are_objects_never_arrays_of_their_fields() {
        let input = r#""input": {"role": "user", "content": "hi"}"#;
        let said = message(&format!(r#"{{{input}, "options": [null, null]}}"#));
        assert!(said.contains("options") && said.contains("expected an object"), "{said}");
        let said = message(&format!(r#"{{{input}, "context": [[], []]}}"#));
        assert!(said.contains("context") && said.contains("expected an object"), "{said}");
        for ok in [
            format!(r#"{{{input}}}"#),
            format!(r#"{{{input}, "context": null, "options": {{}}}}"#),
            format!(r#"{{{input}, "context": {{}}, "options": {{"maxTurns": 2}}}}"#),
        ] {
            assert_eq!(message(&ok), "", "{ok}");
        }
    }

    #[test]
    fn mistakes_say_where() {
        assert!(
            message("{\"input\": ").starts_with("malformed JSON at line 1 column"),
            "{}",
            message("{\"input\": ")
        );
        assert_eq!(message(""), "the request body is empty; send a JSON object");
        let m =
            message(r#"{"input":{"role":"user","content":"hi"},"options":{"multitask":"later"}}"#);
        assert!(
            m.starts_with("invalid request: options.multitask: unknown variant `later`"),
            "{m}"
        );
        let m = message(r#"{"input":{"role":"user","content":"hi"},"option":{}}"#);
        assert!(m.contains("unknown field `option`"), "{m}");
        let m = message(r#"{"input":{"role":"assistant"}}"#);
        assert!(m.contains("input") && m.contains("\"assistant\""), "{m}");
        assert!(message(r#"{"input":{"role":"user","content":"hi"}} x"#).contains("trailing"));
    }

    #[test]
    fn the_plans_request_parses() -> Result<(), ApiError> {
        let request: ExecuteRequest = parse_json(
            br#"{"input":{"role":"user","content":"Hello"},
                "context":{"messages":[],"tools":[{"name":"get_weather","label":"Weather",
                  "description":"d","parameters":{"type":"object"}}]},
                "options":{"model":"gpt-4o-mini","multitask":"enqueue","onDisconnect":"cancel"}}"#,
        )?;
        assert!(matches!(request.input, Input::User(_)));
        assert_eq!(request.context.map(|c| c.tools.len()), Some(1));
        assert_eq!(request.options.multitask, Some(Multitask::Enqueue));
        assert_eq!(request.options.on_disconnect, OnDisconnect::Cancel);
        Ok(())
    }
}
