//! The model registry: prices per million tokens for each usage bucket, context window, output
//! limit and capabilities of the main models of each provider, overridable from configuration.
//!
//! The built-in data is the file `crates/weft-llm/models.json` (its header names the sources and
//! the date the prices were checked), compiled in and parsed once. Users add or override models
//! with [`ModelRegistry::with_overrides`] (the same JSON format) or [`ModelRegistry::insert`].
//!
//! Lookup ([`ModelRegistry::get`]) tries, for the provider's models: the exact id, then an alias
//! (`claude-sonnet-4-0` → `claude-sonnet-4-20250514`), then the id without a date suffix
//! (`gpt-4o-2024-08-06` → `gpt-4o`, `claude-3-5-haiku-20991231` → `claude-3-5-haiku`) or a
//! `models/` prefix (Gemini's resource names). The provider names `openai` and
//! `openai-responses` share OpenAI's models.
//!
//! An unknown model is never an error: [`ModelRegistry::prices`] gives `None`, and
//! [`ModelRegistry::cost_or_warn`] gives a zero cost and logs a warning once per
//! (provider, model).
//!
//! The JSON format:
//!
//! ```json
//! { "models": [ {
//!     "provider": "openai", "id": "gpt-4o", "aliases": ["gpt-4o-latest"],
//!     "prices": { "input": 2.5, "output": 10, "cacheRead": 1.25, "cacheWrite": 0 },
//!     "contextWindow": 128000, "maxOutput": 16384,
//!     "capabilities": { "reasoning": false, "images": true, "tools": true }
//! } ] }
//! ```
//!
//! A bare array of models is accepted too. In overrides, an entry naming a model that already
//! exists (same provider and id) changes only the fields it gives; any other entry is a new
//! model, whose missing fields default to zero / `false` / empty.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_core::{Cost, Prices, Usage};

/// The built-in data file.
const BUILTIN_JSON: &str = include_str!("../models.json");

static BUILTIN: LazyLock<Arc<ModelRegistry>> = LazyLock::new(|| {
    Arc::new(ModelRegistry::from_json(BUILTIN_JSON).unwrap_or_else(|error| {
        tracing::error!(%error, "the built-in model registry does not parse; no prices known");
        ModelRegistry::empty()
    }))
});

/// The (provider, model) pairs already warned about as unknown.
static WARNED: LazyLock<Mutex<HashSet<(String, String)>>> =
    LazyLock::new(|| Mutex::new(HashSet::new()));

/// What a model can do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Capabilities {
    /// It reasons (thinking blocks, reasoning tokens).
    pub reasoning: bool,
    /// It accepts images as input.
    pub images: bool,
    /// It calls tools.
    pub tools: bool,
}

/// One model: its prices, limits and capabilities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ModelInfo {
    /// The provider whose API serves it (`openai`, `anthropic`, `gemini` …); `openai-responses`
    /// is stored as `openai`.
    pub provider: String,
    /// The model id, as sent to the API.
    pub id: String,
    /// Other ids the provider accepts for the same model.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aliases: Vec<String>,
    /// US dollars per million tokens, per bucket.
    #[serde(default)]
    pub prices: Prices,
    /// The context window in tokens (input and output together); 0 when unknown.
    #[serde(default)]
    pub context_window: u64,
    /// The most output tokens one call may produce; 0 when unknown.
    #[serde(default)]
    pub max_output: u64,
    /// What it can do.
    #[serde(default)]
    pub capabilities: Capabilities,
}

/// Why model data could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// The text is not JSON of the registry's format.
    #[error("model registry: {0}")]
    Json(#[from] serde_json::Error),
    /// An entry lacks its provider or id.
    #[error("model registry: entry {index} needs a non-empty `provider` and `id`")]
    MissingName {
        /// The entry's position in the `models` list.
        index: usize,
    },
    /// A price is negative or not a number: it would turn costs into credits.
    #[error(
        "model registry: {provider}/{id} has the price {field} {price}; prices are US dollars per \
         million tokens, 0 or more"
    )]
    InvalidPrice {
        /// The model's provider.
        provider: String,
        /// The model's id.
        id: String,
        /// The price's field (`input`, `output`, `cacheRead`, `cacheWrite`).
        field: &'static str,
        /// The price given.
        price: f64,
    },
}

/// Refuses a model whose prices are negative or not finite.
fn check_prices(info: &ModelInfo) -> Result<(), RegistryError> {
    let p = &info.prices;
    let prices = [
        ("input", p.input),
        ("output", p.output),
        ("cacheRead", p.cache_read),
        ("cacheWrite", p.cache_write),
    ];
    match prices.into_iter().find(|(_, price)| !(price.is_finite() && *price >= 0.0)) {
        Some((field, price)) => Err(RegistryError::InvalidPrice {
            provider: info.provider.clone(),
            id: info.id.clone(),
            field,
            price,
        }),
        None => Ok(()),
    }
}

/// Known models, looked up by provider and id. [`Default`] is the built-in data.
#[derive(Debug, Clone)]
pub struct ModelRegistry {
    models: Vec<ModelInfo>,
    /// (provider, id or alias) → position in `models`.
    index: HashMap<(String, String), usize>,
}

impl Default for ModelRegistry {
    fn default() -> Self {
        (*Self::builtin()).clone()
    }
}

impl ModelRegistry {
    /// The built-in registry (the repo's `models.json`), shared.
    pub fn builtin() -> Arc<ModelRegistry> {
        Arc::clone(&BUILTIN)
    }

    /// A registry that knows no model.
    pub fn empty() -> Self {
        Self { models: Vec::new(), index: HashMap::new() }
    }

    /// A registry of exactly the models in `json` (the [module](self)'s format).
    pub fn from_json(json: &str) -> Result<Self, RegistryError> {
        let mut registry = Self::empty();
        for entry in entries(json)? {
            let info: ModelInfo = serde_json::from_value(entry)?;
            check_prices(&info)?;
            registry.insert(info);
        }
        Ok(registry)
    }

    /// This registry with the models of `json` added or changed: an entry naming an existing
    /// model (same provider and id) changes only the fields it gives; others are added.
    pub fn with_overrides(&self, json: &str) -> Result<ModelRegistry, RegistryError> {
        let mut registry = self.clone();
        for entry in entries(json)? {
            // `entries` checked that both are non-empty strings.
            let provider = entry.get("provider").and_then(Value::as_str).unwrap_or_default();
            let id = entry.get("id").and_then(Value::as_str).unwrap_or_default();
            let provider = canonical_provider(provider);
            let merged = match registry.models.iter().find(|m| m.provider == provider && m.id == id)
            {
                Some(existing) => {
                    let mut base = serde_json::to_value(existing)?;
                    merge(&mut base, entry);
                    base
                }
                None => entry,
            };
            let info: ModelInfo = serde_json::from_value(merged)?;
            check_prices(&info)?;
            registry.insert(info);
        }
        Ok(registry)
    }

    /// Adds `info`, replacing the model of the same provider and id if there is one.
    pub fn insert(&mut self, mut info: ModelInfo) {
        info.provider = canonical_provider(&info.provider).to_owned();
        match self.models.iter().position(|m| m.provider == info.provider && m.id == info.id) {
            Some(position) => self.models[position] = info,
            None => self.models.push(info),
        }
        self.reindex();
    }

    /// The model `model` of `provider`: exact id, then alias, then the id without a date suffix
    /// or a `models/` prefix. See the [module docs](self).
    pub fn get(&self, provider: &str, model: &str) -> Option<&ModelInfo> {
        let provider = canonical_provider(provider);
        let find = |id: &str| {
            self.index.get(&(provider.to_owned(), id.to_owned())).map(|&i| &self.models[i])
        };
        let model = model.strip_prefix("models/").unwrap_or(model);
        find(model).or_else(|| undated(model).and_then(find))
    }

    /// The prices of `provider`/`model`, if known.
    pub fn prices(&self, provider: &str, model: &str) -> Option<Prices> {
        self.get(provider, model).map(|m| m.prices)
    }

    /// What `usage` costs on `provider`/`model`, if its prices are known.
    pub fn cost(&self, provider: &str, model: &str, usage: &Usage) -> Option<Cost> {
        self.prices(provider, model).map(|prices| Cost::of(usage, &prices))
    }

    /// What `usage` costs on `provider`/`model`; zero for an unknown model, with a warning
    /// logged the first time each (provider, model) is seen. Never fails.
    pub fn cost_or_warn(&self, provider: &str, model: &str, usage: &Usage) -> Cost {
        match self.cost(provider, model, usage) {
            Some(cost) => cost,
            None => {
                if first_warning(provider, model) {
                    tracing::warn!(
                        provider,
                        model,
                        "unknown model: its cost is counted as 0 (add it to the model registry)"
                    );
                }
                Cost::default()
            }
        }
    }

    /// The prices of `provider`/`model`; for a model the registry does not know, zero prices
    /// (so its cost reads 0) and a warning, logged once per model: never a failure.
    pub fn prices_or_warn(&self, provider: &str, model: &str) -> Prices {
        self.prices(provider, model).unwrap_or_else(|| {
            if first_warning(provider, model) {
                tracing::warn!(
                    provider,
                    model,
                    "unknown model: its cost is counted as 0 (add it to the model registry)"
                );
            }
            Prices::default()
        })
    }

    /// Every model, in the order they were added.
    pub fn list(&self) -> &[ModelInfo] {
        &self.models
    }

    fn reindex(&mut self) {
        self.index.clear();
        // Ids first, so an id always wins over another model's alias.
        for (i, m) in self.models.iter().enumerate() {
            self.index.insert((m.provider.clone(), m.id.clone()), i);
        }
        for (i, m) in self.models.iter().enumerate() {
            for alias in &m.aliases {
                self.index.entry((m.provider.clone(), alias.clone())).or_insert(i);
            }
        }
    }
}

/// The registry's name for a provider: `openai-responses` shares `openai`'s models.
fn canonical_provider(provider: &str) -> &str {
    match provider {
        "openai-responses" => "openai",
        other => other,
    }
}

/// The `models` entries of `json` (an object with `models`, or a bare array).
fn entries(json: &str) -> Result<Vec<Value>, RegistryError> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum File {
        List(Vec<Value>),
        Object { models: Vec<Value> },
    }
    let list = match serde_json::from_str::<File>(json)? {
        File::List(list) | File::Object { models: list } => list,
    };
    for (index, entry) in list.iter().enumerate() {
        let named =
            |key: &str| entry.get(key).and_then(Value::as_str).is_some_and(|s| !s.is_empty());
        if !named("provider") || !named("id") {
            return Err(RegistryError::MissingName { index });
        }
    }
    Ok(list)
}

/// Merges `patch` into `base`: objects key by key (recursively), anything else replaced.
fn merge(base: &mut Value, patch: Value) {
    match (base, patch) {
        (Value::Object(base), Value::Object(patch)) => {
            for (key, value) in patch {
                match base.get_mut(&key) {
                    Some(slot) => merge(slot, value),
                    None => {
                        base.insert(key, value);
                    }
                }
            }
        }
        (base, patch) => *base = patch,
    }
}

/// `model` without a trailing date (`-2024-08-06`, `-20250514`), if it has one.
fn undated(model: &str) -> Option<&str> {
    let b = model.as_bytes();
    let digits = |s: &[u8]| s.iter().all(u8::is_ascii_digit);
    let n = b.len();
    // -YYYY-MM-DD (the tail is ASCII, so its start is a char boundary)
    if n > 11 {
        let t = &b[n - 11..];
        if t[0] == b'-'
            && digits(&t[1..5])
            && t[5] == b'-'
            && digits(&t[6..8])
            && t[8] == b'-'
            && digits(&t[9..11])
        {
            return Some(&model[..n - 11]);
        }
    }
    // -YYYYMMDD
    if n > 9 {
        let t = &b[n - 9..];
        if t[0] == b'-' && digits(&t[1..]) {
            return Some(&model[..n - 9]);
        }
    }
    None
}

/// Whether this is the first unknown-model warning for (provider, model).
fn first_warning(provider: &str, model: &str) -> bool {
    match WARNED.lock() {
        Ok(mut warned) => warned.insert((provider.to_owned(), model.to_owned())),
        // A poisoned set only means another thread panicked while inserting: warn again.
        Err(poisoned) => poisoned.into_inner().insert((provider.to_owned(), model.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    const EXPECTED: [(&str, &str); 14] = [
        ("openai", "gpt-4o"),
        ("openai", "gpt-4o-mini"),
        ("openai", "gpt-4.1"),
        ("openai", "gpt-4.1-mini"),
        ("openai", "o3"),
        ("openai", "o4-mini"),
        ("openai", "gpt-5"),
        ("openai", "gpt-5-mini"),
        ("anthropic", "claude-opus-4-20250514"),
        ("anthropic", "claude-sonnet-4-20250514"),
        ("anthropic", "claude-3-5-haiku-20241022"),
        ("gemini", "gemini-2.5-pro"),
        ("gemini", "gemini-2.5-flash"),
        ("gemini", "gemini-2.0-flash"),
    ];

    #[test]
    fn the_data_file_parses_and_holds_every_main_model() {
        // from_json, not builtin(): builtin() would hide a parse error behind an empty registry.
        let registry = ModelRegistry::from_json(BUILTIN_JSON).unwrap();
        let ids: Vec<(&str, &str)> =
            registry.list().iter().map(|m| (m.provider.as_str(), m.id.as_str())).collect();
        assert_eq!(ids, EXPECTED);
        for m in registry.list() {
            assert!(m.prices.input > 0.0 && m.prices.output > m.prices.input, "{}", m.id);
            assert!(m.prices.cache_read < m.prices.input, "{}", m.id);
            assert!(m.context_window >= 128_000 && m.max_output >= 8192, "{}", m.id);
            assert!(m.capabilities.tools && m.capabilities.images, "{}", m.id);
        }
        assert_eq!(ModelRegistry::builtin().list(), registry.list());
        assert_eq!(ModelRegistry::default().list(), registry.list());
    }

    #[test]
    fn known_prices_per_bucket() {
        let r = ModelRegistry::builtin();
        let sonnet = r.prices("anthropic", "claude-sonnet-4-20250514").unwrap();
        assert_eq!(sonnet, Prices { input: 3.0, output: 15.0, cache_read: 0.3, cache_write: 3.75 });
        let gpt5 = r.prices("openai", "gpt-5").unwrap();
        assert_eq!(gpt5, Prices { input: 1.25, output: 10.0, cache_read: 0.125, cache_write: 0.0 });
        let flash = r.get("gemini", "gemini-2.5-flash").unwrap();
        assert_eq!((flash.prices.input, flash.prices.output), (0.3, 2.5));
        assert!(flash.capabilities.reasoning);
        assert!(!r.get("openai", "gpt-4o").unwrap().capabilities.reasoning);
        assert!(r.get("openai", "o3").unwrap().capabilities.reasoning);
    }

    #[test]
    fn lookup_by_id_alias_date_suffix_and_prefix() {
        let r = ModelRegistry::builtin();
        let id = |p: &str, m: &str| r.get(p, m).map(|m| m.id.as_str());
        assert_eq!(id("openai", "gpt-4o"), Some("gpt-4o"));
        assert_eq!(id("openai", "gpt-4o-2024-08-06"), Some("gpt-4o"));
        assert_eq!(id("openai", "gpt-4o-mini-2024-07-18"), Some("gpt-4o-mini"));
        assert_eq!(id("openai", "gpt-4.1-mini-2025-04-14"), Some("gpt-4.1-mini"));
        assert_eq!(id("openai-responses", "o4-mini-2025-04-16"), Some("o4-mini"));
        assert_eq!(id("anthropic", "claude-sonnet-4-0"), Some("claude-sonnet-4-20250514"));
        assert_eq!(id("anthropic", "claude-3-5-haiku-latest"), Some("claude-3-5-haiku-20241022"));
        assert_eq!(id("anthropic", "claude-opus-4-20991231"), Some("claude-opus-4-20250514"));
        assert_eq!(id("gemini", "models/gemini-2.5-pro"), Some("gemini-2.5-pro"));
        assert_eq!(id("gemini", "gemini-2.0-flash-001"), Some("gemini-2.0-flash"));
        // Providers keep their own models; prefixes of a different model do not match.
        assert_eq!(id("anthropic", "gpt-4o"), None);
        assert_eq!(id("openai", "gpt-4o-audio-preview"), None);
        assert_eq!(id("openai", "gpt-5-nano"), None);
        assert_eq!(id("faux", "gpt-4o"), None);
        assert_eq!(undated("gpt-4o-2024-08-06"), Some("gpt-4o"));
        assert_eq!(undated("x-20250514"), Some("x"));
        assert_eq!(undated("-20250514"), None);
        assert_eq!(undated("gpt-4o"), None);
        assert_eq!(undated("modèle-2024-08-0é"), None);
    }

    #[test]
    fn unknown_models_cost_zero_and_warn_once() {
        let r = ModelRegistry::builtin();
        let usage = Usage::new(1_000_000, 1_000_000, 0, 0);
        assert_eq!(r.prices("openai", "llama3.1:8b"), None);
        assert_eq!(r.cost("openai", "llama3.1:8b", &usage), None);
        assert_eq!(r.cost_or_warn("openai", "llama3.1:8b", &usage), Cost::default());
        // The warning above was the first for this pair; later ones are not logged.
        assert!(!first_warning("openai", "llama3.1:8b"));
        assert!(first_warning("openai", "never-seen-before"));
        assert!(!first_warning("openai", "never-seen-before"));
        let known = r.cost_or_warn("openai", "gpt-4o-mini", &usage);
        assert!((known.total - 0.75).abs() < 1e-12, "{known:?}");
    }

    #[test]
    fn overrides_change_given_fields_and_add_models() {
        let base = ModelRegistry::builtin();
        let r = base
            .with_overrides(
                r#"{"models":[
                    {"provider":"openai-responses","id":"gpt-4o","prices":{"input":1.0}},
                    {"provider":"openai","id":"llama3.1:8b","contextWindow":131072,
                     "capabilities":{"tools":true}}
                ]}"#,
            )
            .unwrap();
        let gpt4o = r.get("openai", "gpt-4o").unwrap();
        assert_eq!(gpt4o.prices.input, 1.0);
        assert_eq!(gpt4o.prices.output, 10.0, "fields not given are kept");
        assert_eq!(gpt4o.context_window, 128_000);
        assert_eq!(gpt4o.provider, "openai");
        let llama = r.get("openai-responses", "llama3.1:8b").unwrap();
        assert_eq!(llama.prices, Prices::default());
        assert_eq!(llama.context_window, 131_072);
        assert!(llama.capabilities.tools && !llama.capabilities.images);
        assert_eq!(r.list().len(), base.list().len() + 1);
        // The shared registry is untouched.
        assert_eq!(base.prices("openai", "gpt-4o").unwrap().input, 2.5);

        // A bare array works too; errors are errors, never panics.
        let r = ModelRegistry::empty()
            .with_overrides(r#"[{"provider":"gemini","id":"g","prices":{"output":2}}]"#)
            .unwrap();
        assert_eq!(r.prices("gemini", "g").unwrap().output, 2.0);
        assert!(matches!(base.with_overrides("{"), Err(RegistryError::Json(_))));
        assert!(matches!(
            base.with_overrides(r#"[{"id":"x"}]"#),
            Err(RegistryError::MissingName { index: 0 })
        ));
        assert!(matches!(
            base.with_overrides(r#"[{"provider":"openai","id":"gpt-4o","prices":{"input":"x"}}]"#),
            Err(RegistryError::Json(_))
        ));
        assert!(ModelRegistry::from_json(r#"{"models":[{"provider":"a","id":""}]}"#).is_err());
        // Negative prices would be credits: refused, in new entries and in overrides.
        let negative = r#"[{"provider":"openai","id":"gpt-4o","prices":{"output":-1}}]"#;
        let err = base.with_overrides(negative).unwrap_err();
        assert!(matches!(err, RegistryError::InvalidPrice { field: "output", .. }), "{err}");
        assert!(err.to_string().contains("openai/gpt-4o has the price output -1"), "{err}");
        let negative =
            r#"[{"provider":"x","id":"y","prices":{"input":0,"output":0,"cacheRead":-0.5}}]"#;
        assert!(matches!(
            ModelRegistry::from_json(negative),
            Err(RegistryError::InvalidPrice { field: "cacheRead", .. })
        ));
    }

    #[test]
    fn insert_adds_or_replaces_and_ids_beat_aliases() {
        let mut r = ModelRegistry::empty();
        let model = |id: &str, aliases: &[&str], input: f64| ModelInfo {
            provider: "anthropic".into(),
            id: id.into(),
            aliases: aliases.iter().map(|a| (*a).to_owned()).collect(),
            prices: Prices { input, ..Prices::default() },
            context_window: 0,
            max_output: 0,
            capabilities: Capabilities::default(),
        };
        r.insert(model("a", &["b"], 1.0));
        r.insert(model("b", &[], 2.0));
        assert_eq!(r.prices("anthropic", "b").unwrap().input, 2.0);
        r.insert(model("a", &["c"], 3.0));
        assert_eq!(r.list().len(), 2);
        assert_eq!(r.prices("anthropic", "c").unwrap().input, 3.0);
        assert_eq!(r.prices("anthropic", "a").unwrap().input, 3.0);
    }
}
