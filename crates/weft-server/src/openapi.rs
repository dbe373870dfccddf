//! `/openapi.json`: the API description, generated from the handlers' annotations and the
//! request and response types, and its handler. This module names the other handlers (for their
//! descriptions); none of them imports it.

use std::sync::Arc;

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::AppState;
use crate::api::{
    AbortResponse, ExecuteContext, ExecuteOptions, ExecuteRequest, ForkRequest, Health, Multitask,
    OnDisconnect, SessionList, SessionView,
};
use crate::error::{ApiError, ErrorBody, ErrorDetail};

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(title = "Weft agent API", description = "The agent plan's HTTP API: sessions kept by the server, runs streamed as events (SSE `id:` = the event's seq), remote tools and approvals over HTTP. Session ids (`sessionId`, chat ids, AG-UI `threadId`) are chosen per API key owner: two owners may use the same id for two sessions, and another owner's session is answered as one that does not exist."),
    paths(
        crate::routes::execute,
        crate::routes::get_session,
        crate::routes::attach,
        crate::routes::abort,
        crate::routes::fork,
        crate::routes::list_sessions,
        crate::routes::delete_session,
        crate::models::list,
        crate::ws::upgrade,
        crate::agui::run,
        crate::agui::stop,
        crate::chat::post,
        crate::chat::get,
        crate::chat::resume,
        crate::chat::stop,
        crate::routes::healthz,
        crate::routes::readyz,
        crate::routes::metrics,
        openapi,
    ),
    components(schemas(
        ExecuteRequest, ExecuteContext, ExecuteOptions, Multitask, OnDisconnect,
        SessionView, ForkRequest,
        SessionList, AbortResponse, Health, ErrorBody, ErrorDetail,
        crate::models::ModelList, crate::models::ProviderModels, crate::models::ModelEntry
    )),
    modifiers(&BearerAuth),
)]
struct ApiDoc;

/// The OpenAPI document.
pub(crate) fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}

/// The OpenAPI document as this server serves it, in JSON: with `options.maxTurns` bounded by the
/// server's `max_turns`, and no parameter typed as nullable (a query string or a header carries a
/// value or nothing, never JSON `null`).
pub(crate) fn served(max_turns: u32) -> Result<serde_json::Value, serde_json::Error> {
    let mut doc = serde_json::to_value(document())?;
    if let Some(turns) = doc.pointer_mut("/components/schemas/ExecuteOptions/properties/maxTurns")
        && let Some(turns) = turns.as_object_mut()
    {
        turns.insert("minimum".into(), 1.into());
        turns.insert("maximum".into(), max_turns.into());
    }
    // Which requests name a session: one with `sessionId`, or a new one (`context`, started by a
    // user message). Anything else is a 400 the schema says in advance.
    if let Some(request) = doc.pointer_mut("/components/schemas/ExecuteRequest")
        && let Some(request) = request.as_object_mut()
    {
        request.insert(
            "anyOf".into(),
            serde_json::json!([
                {"required": ["sessionId"], "properties": {"sessionId": {"type": "string"}}},
                {
                    "required": ["context"],
                    "properties": {
                        "context": {"type": "object"},
                        "input": {"type": "object", "required": ["role", "content"],
                                  "properties": {"role": {"const": "user"},
                                                 "content": {"type": ["string", "array"]}},
                                  "not": {"required": ["approvals"]}}
                    }
                }
            ]),
        );
    }
    // Approval decisions are an object without a `role` (the server reads an object with
    // `approvals` as decisions): the three forms of `input` do not overlap.
    if let Some(approvals) =
        doc.pointer_mut("/components/schemas/ExecuteRequest/properties/input/oneOf/2")
        && let Some(approvals) = approvals.as_object_mut()
    {
        approvals.insert("not".into(), serde_json::json!({"required": ["role"]}));
    }
    if let Some(user) =
        doc.pointer_mut("/components/schemas/ExecuteRequest/properties/input/oneOf/0")
        && let Some(user) = user.as_object_mut()
    {
        user.insert("not".into(), serde_json::json!({"required": ["approvals"]}));
    }
    if let Some(paths) = doc.get_mut("paths").and_then(|p| p.as_object_mut()) {
        for operation in
            paths.values_mut().filter_map(|p| p.as_object_mut()).flat_map(|p| p.values_mut())
        {
            // A stream's schema is that of one Server-Sent Event (its `data:` holds a frame's
            // JSON; `id:` the event's seq).
            if let Some(responses) = operation.get_mut("responses").and_then(|r| r.as_object_mut())
            {
                for stream in responses
                    .values_mut()
                    .filter_map(|r| r.pointer_mut("/content/text~1event-stream"))
                {
                    stream["schema"] = serde_json::json!({
                        "type": "object",
                        "properties": {
                            "data": {"type": "string"},
                            "id": {"type": "string"},
                            "event": {"type": "string"},
                            "retry": {"type": "integer"}
                        }
                    });
                }
            }
            let Some(parameters) = operation.get_mut("parameters").and_then(|p| p.as_array_mut())
            else {
                continue;
            };
            for schema in parameters.iter_mut().filter_map(|p| p.get_mut("schema")) {
                if let Some(types) = schema.get_mut("type").and_then(|t| t.as_array_mut()) {
                    types.retain(|t| t != "null");
                    if types.len() == 1 {
                        let only = types.remove(0);
                        schema["type"] = only;
                    }
                }
            }
        }
    }
    Ok(doc)
}

/// This API's OpenAPI description.
#[utoipa::path(get, path = "/openapi.json", tag = "operations",
    responses((status = 200, description = "OpenAPI 3.1", content_type = "application/json", body = Object)))]
pub(crate) async fn openapi(State(state): State<Arc<AppState>>) -> Response {
    match served(state.settings.max_turns).and_then(|doc| serde_json::to_vec(&doc)) {
        Ok(json) => {
            let mut response = Response::new(Body::from(json));
            response
                .headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
            response
        }
        Err(error) => ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("cannot render the API description: {error}"),
        )
        .into_response(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// What schemathesis relies on: the server's own `maxTurns` bound, parameters that are never
    /// `null`, streams described as SSE events, and the three forms of `input` kept apart.
    #[test]
    fn the_served_document_says_what_the_server_checks() {
        let doc = served(7).unwrap();
        let turns = &doc["components"]["schemas"]["ExecuteOptions"]["properties"]["maxTurns"];
        assert_eq!((turns["minimum"].as_u64(), turns["maximum"].as_u64()), (Some(1), Some(7)));
        let mut parameters = 0;
        for operation in doc["paths"].as_object().unwrap().values() {
            for operation in operation.as_object().unwrap().values() {
                for parameter in operation["parameters"].as_array().into_iter().flatten() {
                    parameters += 1;
                    let kind = &parameter["schema"]["type"];
                    assert!(!kind.is_array(), "nullable parameter: {parameter}");
                }
                for response in
                    operation["responses"].as_object().into_iter().flat_map(|r| r.values())
                {
                    if let Some(stream) = response.pointer("/content/text~1event-stream") {
                        assert_eq!(stream["schema"]["properties"]["data"]["type"], "string");
                    }
                }
            }
        }
        assert!(parameters >= 8, "{parameters}");
        let input = &doc["components"]["schemas"]["ExecuteRequest"]["properties"]["input"]["oneOf"];
        assert_eq!(input[0]["not"]["required"][0], "approvals");
        assert_eq!(input[2]["not"]["required"][0], "role");
        assert_eq!(
            doc["components"]["schemas"]["ExecuteRequest"]["anyOf"].as_array().unwrap().len(),
            2
        );
    }
}
