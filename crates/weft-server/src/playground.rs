//! The web playground: the page at `/` and its assets under `/playground/`. They are the
//! committed build of `clients/typescript` (its `playground/` page and the compiled `dist/`
//! modules), copied into this crate's `playground/` by its `npm run build` (so the crate builds
//! from its published package) and embedded in the binary: nothing is read from disk and nothing
//! is built at `cargo build` time. `tests/playground.rs` checks the copy is current. The page talks to the API like any other client (its API key, if any, is
//! typed into the page), so these routes need no key.

use std::sync::Arc;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use crate::AppState;
use crate::error::ApiError;

macro_rules! client_file {
    ($path:literal) => {
        include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/playground/", $path))
    };
}

const INDEX: &str = client_file!("index.html");

const JS: &str = "text/javascript; charset=utf-8";

/// The assets under `/playground/`: name, content type, content.
const ASSETS: [(&str, &str, &str); 12] = [
    ("style.css", "text/css; charset=utf-8", client_file!("style.css")),
    ("playground.js", JS, client_file!("playground.js")),
    ("client.js", JS, client_file!("client.js")),
    ("sse.js", JS, client_file!("sse.js")),
    ("pg-chat.js", JS, client_file!("pg-chat.js")),
    ("pg-inspector.js", JS, client_file!("pg-inspector.js")),
    ("pg-reasoning.js", JS, client_file!("pg-reasoning.js")),
    ("pg-sessions.js", JS, client_file!("pg-sessions.js")),
    ("pg-settings.js", JS, client_file!("pg-settings.js")),
    ("pg-tools.js", JS, client_file!("pg-tools.js")),
    ("pg-trace.js", JS, client_file!("pg-trace.js")),
    ("pg-util.js", JS, client_file!("pg-util.js")),
];

/// Only the page's own scripts and styles; it talks to this origin only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /` and `GET /playground/{file}`.
pub(crate) fn routes() -> Router<Arc<AppState>> {
    Router::new().route("/", get(index)).route("/playground/{file}", get(asset))
}

fn respond(content_type: &'static str, body: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(header::CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    response
}

async fn index() -> Response {
    respond("text/html; charset=utf-8", INDEX)
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => respond(content_type, body),
        None => {
            ApiError::new(axum::http::StatusCode::NOT_FOUND, "not_found", "no such playground file")
                .into_response()
        }
    }
}
