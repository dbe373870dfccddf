//! Real providers: one adapter per streaming dialect.
//!
//! | name | dialect | module |
//! | --- | --- | --- |
//! | `openai` | OpenAI Chat Completions (and OpenAI-compatible servers) | [`openai_chat`] |
//! | `openai-responses` | OpenAI Responses | [`openai_responses`] |
//! | `anthropic` | Anthropic Messages | [`anthropic`] |
//! | `gemini` | Google Gemini `streamGenerateContent` | [`gemini`] |
//!
//! Each adapter builds its request from a [`ModelRequest`](crate::ModelRequest) (replaying a
//! history made by any provider, see [`crate::replay`]), sends it with
//! [`http::sse_call`](crate::http::sse_call), and decodes the stream with its
//! [`SseDecoder`](crate::dialect::SseDecoder).

use std::sync::Arc;

use crate::models::ModelRegistry;

pub mod anthropic;
pub mod gemini;
pub mod openai_chat;
pub mod openai_responses;

/// What every adapter is configured with.
#[derive(Clone)]
pub struct ProviderSettings {
    /// The API key (sent in a header, never printed).
    pub api_key: Option<String>,
    /// The base URL: for `openai`/`openai-responses` it includes the version path
    /// (`https://api.openai.com/v1`); for `anthropic` and `gemini` it does not
    /// (`https://api.anthropic.com`, `https://generativelanguage.googleapis.com`).
    pub base_url: String,
    /// Headers added to every request (proxies, OpenRouter's `HTTP-Referer` …).
    pub extra_headers: Vec<(String, String)>,
    /// Prices and limits of models, for cost.
    pub models: Arc<ModelRegistry>,
}

impl ProviderSettings {
    /// The prices a call to `provider`/`model` is costed at: the request's own if it gives some,
    /// else the registry's (zero, with one warning, for a model the registry does not know).
    pub fn prices_for(
        &self,
        provider: &str,
        model: &str,
        request_prices: Option<weft_core::Prices>,
    ) -> Option<weft_core::Prices> {
        request_prices.or_else(|| Some(self.models.prices_or_warn(provider, model)))
    }

    /// A request to `path` under the base URL, with the key as a bearer token (when one is set)
    /// and the extra headers: how the OpenAI-style APIs authenticate.
    pub fn bearer_request(&self, path: &str, body: serde_json::Value) -> crate::http::HttpRequest {
        let base = self.base_url.trim_end_matches('/');
        let mut headers = Vec::new();
        if let Some(key) = self.api_key.as_deref().filter(|k| !k.is_empty()) {
            headers.push(("authorization".to_string(), format!("Bearer {key}")));
        }
        headers.extend(self.extra_headers.iter().cloned());
        crate::http::HttpRequest { url: format!("{base}{path}"), headers, body }
    }
}

/// A token count as a provider sent it: a non-negative integer; a number too large for `u64`
/// (JSON allows it; serde reads it as a float) saturates at `u64::MAX`, and a fraction is cut to
/// its whole part. Anything else (negative, not a number) is no count. Every usage computation
/// from these saturates too, so no count can panic a run.
pub(crate) fn token_count(v: &serde_json::Value) -> Option<u64> {
    match v.as_u64() {
        Some(n) => Some(n),
        // `as` saturates: 1e30 becomes u64::MAX.
        None => v.as_f64().filter(|f| f.is_finite() && *f >= 0.0).map(|f| f as u64),
    }
}

impl std::fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<&str> = self.extra_headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("ProviderSettings")
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("base_url", &self.base_url)
            .field("extra_headers", &headers)
            .finish()
    }
}
