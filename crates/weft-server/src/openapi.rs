//! `/openapi.json`: the API description, generated from the handlers' annotations and the
//! request and response types.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::api::{
    AbortResponse, ExecuteContext, ExecuteOptions, ExecuteRequest, Health, Multitask, OnDisconnect,
    SessionList, SessionView,
};
use crate::error::{ErrorBody, ErrorDetail};

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
    info(title = "Weft agent API", description = "The agent plan's HTTP API: sessions kept by the server, runs streamed as events (SSE `id:` = the event's seq), remote tools and approvals over HTTP."),
    paths(
        crate::routes::execute,
        crate::routes::get_session,
        crate::routes::attach,
        crate::routes::abort,
        crate::routes::list_sessions,
        crate::routes::delete_session,
        crate::ws::upgrade,
        crate::agui::run,
        crate::chat::post,
        crate::chat::resume,
        crate::routes::healthz,
        crate::routes::readyz,
        crate::routes::metrics,
        crate::routes::openapi,
    ),
    components(schemas(
        ExecuteRequest, ExecuteContext, ExecuteOptions, Multitask, OnDisconnect, SessionView,
        SessionList, AbortResponse, Health, ErrorBody, ErrorDetail
    )),
    modifiers(&BearerAuth),
)]
struct ApiDoc;

/// The OpenAPI document.
pub(crate) fn document() -> utoipa::openapi::OpenApi {
    ApiDoc::openapi()
}
