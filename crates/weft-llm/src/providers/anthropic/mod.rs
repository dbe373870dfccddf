//! The Anthropic Messages adapter: `POST {base_url}/v1/messages` with `stream: true`.
//!
//! - Request: top-level `system`; `messages` of content blocks (text, image,
//!   thinking with its signature, redacted thinking, `tool_use`, `tool_result`), consecutive
//!   messages of one role merged, after [`replay::prepare`]; `tools` (`name`, `description`,
//!   `input_schema`); `max_tokens` (the request's, else the registry's `max_output` for the
//!   model, else 8192, or 4096 for the Claude 3 models); `temperature`; and, with
//!   [`Anthropic::with_thinking`], `thinking: {type: enabled, budget_tokens}`. Headers:
//!   `x-api-key`, `anthropic-version: 2023-06-01`, then the configured extra headers.
//! - Stream ([`AnthropicDecoder`]): the documented event sequence to canonical events, usage
//!   normalised (`input` = `input_tokens`, which Anthropic already counts without the cache;
//!   `cache_read` = `cache_read_input_tokens`; `cache_write` = `cache_creation_input_tokens`;
//!   `output` = `output_tokens`), stop reasons mapped (`refusal`, `pause_turn` → `error` naming
//!   the reason).
//! - Redacted thinking is kept as a thinking block with empty text whose signature is
//!   [`REDACTED_THINKING_MARKER`] followed by the opaque data, and is sent back as
//!   `redacted_thinking` to the model that made it.
//! - An `overloaded_error` (or `api_error`) event before any content is retried like an HTTP 529,
//!   within the client's [`RetryPolicy`](crate::http::RetryPolicy).

mod decode;
mod request;

pub use decode::{AnthropicDecoder, REDACTED_THINKING_MARKER};

use super::ProviderSettings;
use crate::CancellationToken;
use crate::http::{HttpClient, HttpRequest, sse_call};
use crate::provider::{ModelRequest, Provider};
use crate::replay;
use crate::stream::ProviderStream;

/// The `anthropic-version` header value sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// The Anthropic Messages provider. See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Anthropic {
    settings: ProviderSettings,
    client: HttpClient,
    thinking_budget: Option<u32>,
}

impl Anthropic {
    /// An adapter sending requests to `settings.base_url` (without the version path, e.g.
    /// `https://api.anthropic.com`) through `client`.
    pub fn new(settings: ProviderSettings, client: HttpClient) -> Self {
        Self { settings, client, thinking_budget: None }
    }

    /// Enables extended thinking with this token budget (Anthropic's minimum is 1024). The
    /// request's temperature is then not sent, as extended thinking requires.
    pub fn with_thinking(mut self, budget_tokens: u32) -> Self {
        self.thinking_budget = Some(budget_tokens);
        self
    }

    /// The JSON body this adapter would send for `request`.
    pub fn request_body(&self, request: &ModelRequest) -> serde_json::Value {
        let max_tokens = request.max_tokens.unwrap_or_else(|| {
            let known = self.settings.models.get(request::PROVIDER, &request.model);
            match known.map(|m| m.max_output).filter(|&n| n > 0) {
                Some(n) => u32::try_from(n).unwrap_or(u32::MAX),
                None => default_max_tokens(&request.model),
            }
        });
        let options = request::BodyOptions { max_tokens, thinking_budget: self.thinking_budget };
        let messages =
            replay::prepare(request.messages.shared(), request::PROVIDER, &request.model);
        request::body(request, &messages, &options)
    }

    fn http_request(&self, request: &ModelRequest) -> HttpRequest {
        let base = self.settings.base_url.trim_end_matches('/');
        let mut headers = Vec::with_capacity(2 + self.settings.extra_headers.len());
        if let Some(key) = &self.settings.api_key {
            headers.push(("x-api-key".to_string(), key.clone()));
        }
        headers.push(("anthropic-version".to_string(), ANTHROPIC_VERSION.to_string()));
        headers.extend(self.settings.extra_headers.iter().cloned());
        HttpRequest {
            url: format!("{base}/v1/messages"),
            headers,
            body: self.request_body(request),
        }
    }
}

impl Provider for Anthropic {
    fn name(&self) -> &str {
        request::PROVIDER
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ProviderStream {
        let prices = self.settings.prices_for(request::PROVIDER, &request.model, request.prices);
        let http = self.http_request(&request);
        let inner = sse_call(self.client.clone(), http, AnthropicDecoder::new);
        ProviderStream::new(request::PROVIDER, &request.model, prices, cancel, inner)
    }
}

/// The output limit sent when neither the request nor the model registry gives one: 4096 for
/// the Claude 3 models that cannot go higher, else 8192.
fn default_max_tokens(model: &str) -> u32 {
    let old = ["claude-3-opus", "claude-3-sonnet", "claude-3-haiku"];
    if old.iter().any(|p| model.starts_with(p)) { 4096 } else { 8192 }
}
