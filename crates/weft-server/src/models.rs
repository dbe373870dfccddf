//! `GET /api/agent/models`: what a new session may run on. The providers this server is
//! configured with (`options.provider`), the default first, each with the model its new sessions
//! get when they name none and the models the registry knows for it (`options.model` may name
//! any other id the provider accepts; its cost then reads 0).

use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use serde::Serialize;
use utoipa::ToSchema;
use weft_llm::models::ModelInfo;

use crate::AppState;
use crate::error::ErrorBody;

/// `GET /api/agent/models`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ModelList {
    /// The providers sessions may pick, the default first.
    pub providers: Vec<ProviderModels>,
}

/// One provider a session may pick.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProviderModels {
    /// Its name, as `options.provider` takes it.
    pub name: String,
    /// Whether sessions that name no provider run on it.
    pub default: bool,
    /// The model a new session on it gets when it names none.
    pub model: String,
    /// The models the registry knows for it (prices, limits, capabilities), in registry order.
    pub models: Vec<ModelEntry>,
}

/// A model the registry knows.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ModelEntry {
    /// The id `options.model` takes.
    pub id: String,
    /// Other ids of the same model.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// US dollars per million tokens: `input`, `output`, `cacheRead`, `cacheWrite`.
    #[schema(value_type = Object)]
    pub prices: weft_core::Prices,
    /// The context window in tokens; 0 when unknown.
    pub context_window: u64,
    /// The most output tokens a call may produce; 0 when unknown.
    pub max_output: u64,
    /// What it can do: `reasoning`, `images`, `tools`.
    #[schema(value_type = Object)]
    pub capabilities: weft_llm::models::Capabilities,
}

impl From<&ModelInfo> for ModelEntry {
    fn from(info: &ModelInfo) -> Self {
        Self {
            id: info.id.clone(),
            aliases: info.aliases.clone(),
            prices: info.prices,
            context_window: info.context_window,
            max_output: info.max_output,
            capabilities: info.capabilities,
        }
    }
}

/// The registry keeps `openai-responses` models as `openai`'s.
fn registry_name(provider: &str) -> &str {
    match provider {
        "openai-responses" => "openai",
        other => other,
    }
}

/// The providers and models a new session may pick.
#[utoipa::path(
    get,
    path = "/api/agent/models",
    tag = "agent",
    responses(
        (status = 200, description = "The providers, the default first, with their default model and the models the registry knows for each", body = ModelList),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 429, description = "Rate limited", body = ErrorBody),
    ),
    security(("bearer" = []))
)]
pub(crate) async fn list(State(state): State<Arc<AppState>>) -> Json<ModelList> {
    let registry = &state.settings.models;
    let providers = state
        .agent
        .provider_models()
        .into_iter()
        .enumerate()
        .map(|(index, (name, model))| {
            let listed = registry_name(&name);
            let models = registry
                .list()
                .iter()
                .filter(|m| m.provider == listed)
                .map(ModelEntry::from)
                .collect();
            ProviderModels { default: index == 0, name, model, models }
        })
        .collect();
    Json(ModelList { providers })
}
