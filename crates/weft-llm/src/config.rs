//! Picking providers from configuration or the environment.
//!
//! | provider | key | base URL variable | default base URL (Weft appends) |
//! | --- | --- | --- | --- |
//! | `openai` | `OPENAI_API_KEY` | `OPENAI_BASE_URL` | `https://api.openai.com/v1` (`/chat/completions`) |
//! | `openai-responses` | `OPENAI_API_KEY` | `OPENAI_BASE_URL` | `https://api.openai.com/v1` (`/responses`) |
//! | `anthropic` | `ANTHROPIC_API_KEY` | `ANTHROPIC_BASE_URL` | `https://api.anthropic.com` (`/v1/messages`) |
//! | `gemini` | `GEMINI_API_KEY` | `GEMINI_BASE_URL` | `https://generativelanguage.googleapis.com` (`/v1beta/models/…`) |
//! | `faux` | — | — | — (scripted, offline) |
//!
//! `OPENAI_BASE_URL` includes the version path (`http://127.0.0.1:11434/v1`), the others do not,
//! as in the providers' official SDKs; trailing slashes are trimmed. A variable set to an empty
//! string counts as unset. A key is required, except for `openai` when `OPENAI_BASE_URL` is set:
//! local OpenAI-compatible servers (Ollama, vLLM, llama.cpp) often need none.
//!
//! API keys never appear in errors or `Debug` output.

use std::sync::Arc;

use crate::http::HttpClient;
use crate::models::ModelRegistry;
use crate::provider::Provider;
use crate::providers::ProviderSettings;

/// Every provider name, as the CLI's `--provider` and configuration spell them.
pub const PROVIDER_NAMES: [&str; 5] = ["openai", "openai-responses", "anthropic", "gemini", "faux"];

/// Why a provider could not be configured. Messages are one line and never hold a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// The provider needs an API key and its variable is not set.
    #[error("{variable} is not set: the {provider} provider needs an API key")]
    MissingKey {
        /// The provider's name.
        provider: String,
        /// The environment variable that holds its key.
        variable: &'static str,
    },
    /// No provider has this name.
    #[error("unknown provider `{name}`: expected one of {}", PROVIDER_NAMES.join(", "))]
    UnknownProvider {
        /// The name given.
        name: String,
    },
    /// The provider cannot be built from settings alone.
    #[error("the {provider} provider cannot be built from settings: {reason}")]
    Unsupported {
        /// The provider's name.
        provider: String,
        /// Why.
        reason: &'static str,
    },
}

/// Where a provider's key and base URL come from.
struct Vars {
    key: Option<&'static str>,
    base_url: Option<&'static str>,
    default_base_url: &'static str,
}

fn vars(provider: &str) -> Option<Vars> {
    let (key, base_url, default_base_url) = match provider {
        "openai" | "openai-responses" => {
            (Some("OPENAI_API_KEY"), Some("OPENAI_BASE_URL"), "https://api.openai.com/v1")
        }
        "anthropic" => {
            (Some("ANTHROPIC_API_KEY"), Some("ANTHROPIC_BASE_URL"), "https://api.anthropic.com")
        }
        "gemini" => (
            Some("GEMINI_API_KEY"),
            Some("GEMINI_BASE_URL"),
            "https://generativelanguage.googleapis.com",
        ),
        "faux" => (None, None, ""),
        _ => return None,
    };
    Some(Vars { key, base_url, default_base_url })
}

/// The default base URL of `provider` (`None` for an unknown one; empty for `faux`).
pub fn default_base_url(provider: &str) -> Option<&'static str> {
    vars(provider).map(|v| v.default_base_url)
}

/// The environment variable holding `provider`'s API key (`None` for `faux` or an unknown one).
pub fn api_key_variable(provider: &str) -> Option<&'static str> {
    vars(provider).and_then(|v| v.key)
}

/// The settings of `provider` from the variables `env` gives (see the [module docs](self)), with
/// the built-in model registry. `env` is `std::env::var` in production
/// ([`settings_from_process_env`]) and a map in tests.
pub fn settings_from_env(
    provider: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ProviderSettings, ConfigError> {
    let vars =
        vars(provider).ok_or_else(|| ConfigError::UnknownProvider { name: provider.to_owned() })?;
    let get = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    let base_override = vars.base_url.and_then(get);
    let api_key = vars.key.and_then(get);
    if let Some(variable) = vars.key
        && api_key.is_none()
        && !(provider == "openai" && base_override.is_some())
    {
        return Err(ConfigError::MissingKey { provider: provider.to_owned(), variable });
    }
    let base_url = base_override
        .map(|url| url.trim().trim_end_matches('/').to_owned())
        .unwrap_or_else(|| vars.default_base_url.to_owned());
    Ok(ProviderSettings {
        api_key,
        base_url,
        extra_headers: Vec::new(),
        models: ModelRegistry::builtin(),
    })
}

/// [`settings_from_env`] with the process environment.
pub fn settings_from_process_env(provider: &str) -> Result<ProviderSettings, ConfigError> {
    settings_from_env(provider, &|name| std::env::var(name).ok())
}

/// The provider `name` built from `settings`, sharing `client`.
///
/// `faux` is not built here: it plays a script, so build it with
/// [`FauxProvider::new`](crate::faux::FauxProvider::new).
pub fn provider_from_settings(
    name: &str,
    settings: ProviderSettings,
    client: HttpClient,
) -> Result<Arc<dyn Provider>, ConfigError> {
    use crate::providers::{anthropic, gemini, openai_chat, openai_responses};
    Ok(match name {
        "openai" => Arc::new(openai_chat::OpenAiChat::new(settings, client)),
        "openai-responses" => Arc::new(openai_responses::OpenAiResponses::new(settings, client)),
        "anthropic" => Arc::new(anthropic::Anthropic::new(settings, client)),
        "gemini" => Arc::new(gemini::Gemini::new(settings, client)),
        "faux" => {
            return Err(ConfigError::Unsupported {
                provider: name.to_owned(),
                reason: "it plays a script; build it with FauxProvider::new",
            });
        }
        _ => return Err(ConfigError::UnknownProvider { name: name.to_owned() }),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashMap;

    use super::*;

    const KEY: &str = "sk-test-SECRET-0123456789";

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> =
            pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect();
        move |name| map.get(name).cloned()
    }

    fn keys() -> impl Fn(&str) -> Option<String> {
        env(&[("OPENAI_API_KEY", KEY), ("ANTHROPIC_API_KEY", KEY), ("GEMINI_API_KEY", KEY)])
    }

    #[test]
    fn defaults_for_every_provider() {
        let vars = keys();
        for (provider, url) in [
            ("openai", "https://api.openai.com/v1"),
            ("openai-responses", "https://api.openai.com/v1"),
            ("anthropic", "https://api.anthropic.com"),
            ("gemini", "https://generativelanguage.googleapis.com"),
        ] {
            let s = settings_from_env(provider, &vars).unwrap();
            assert_eq!(s.base_url, url, "{provider}");
            assert_eq!(default_base_url(provider), Some(url));
            assert_eq!(s.api_key.as_deref(), Some(KEY));
            assert!(s.extra_headers.is_empty());
            assert!(s.models.get("openai", "gpt-4o").is_some());
        }
        let faux = settings_from_env("faux", &env(&[])).unwrap();
        assert_eq!((faux.api_key, faux.base_url.as_str()), (None, ""));
        assert_eq!(api_key_variable("openai-responses"), Some("OPENAI_API_KEY"));
        assert_eq!(api_key_variable("faux"), None);
        assert_eq!(default_base_url("nope"), None);
        assert_eq!(PROVIDER_NAMES.len(), 5);
        for name in PROVIDER_NAMES {
            assert!(settings_from_env(name, &keys()).is_ok(), "{name}");
        }
    }

    #[test]
    fn base_urls_from_the_environment_are_trimmed() {
        let env = env(&[
            ("OPENAI_API_KEY", KEY),
            ("OPENAI_BASE_URL", "http://127.0.0.1:4000/v1/"),
            ("ANTHROPIC_API_KEY", KEY),
            ("ANTHROPIC_BASE_URL", " http://127.0.0.1:4001// "),
            ("GEMINI_API_KEY", KEY),
            ("GEMINI_BASE_URL", "http://127.0.0.1:4002"),
        ]);
        let url = |p: &str| settings_from_env(p, &env).unwrap().base_url;
        assert_eq!(url("openai"), "http://127.0.0.1:4000/v1");
        assert_eq!(url("openai-responses"), "http://127.0.0.1:4000/v1");
        assert_eq!(url("anthropic"), "http://127.0.0.1:4001");
        assert_eq!(url("gemini"), "http://127.0.0.1:4002");
    }

    #[test]
    fn a_missing_key_is_a_one_line_error() {
        let err = settings_from_env("anthropic", &env(&[])).unwrap_err();
        assert_eq!(
            err,
            ConfigError::MissingKey { provider: "anthropic".into(), variable: "ANTHROPIC_API_KEY" }
        );
        assert_eq!(
            err.to_string(),
            "ANTHROPIC_API_KEY is not set: the anthropic provider needs an API key"
        );
        // An empty variable counts as unset.
        let err = settings_from_env("gemini", &env(&[("GEMINI_API_KEY", "")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "GEMINI_API_KEY is not set: the gemini provider needs an API key"
        );
        let err = settings_from_env("openai-responses", &env(&[])).unwrap_err();
        assert!(err.to_string().starts_with("OPENAI_API_KEY is not set: the openai-responses"));
        // A key for another provider does not count.
        assert!(settings_from_env("anthropic", &env(&[("OPENAI_API_KEY", KEY)])).is_err());
    }

    #[test]
    fn a_local_openai_compatible_server_needs_no_key() {
        let local = env(&[("OPENAI_BASE_URL", "http://localhost:11434/v1")]);
        let s = settings_from_env("openai", &local).unwrap();
        assert_eq!((s.api_key, s.base_url.as_str()), (None, "http://localhost:11434/v1"));
        // Only the Chat Completions dialect: the Responses API is OpenAI's own.
        assert!(matches!(
            settings_from_env("openai-responses", &local),
            Err(ConfigError::MissingKey { variable: "OPENAI_API_KEY", .. })
        ));
        // Without the override the key is required.
        assert!(settings_from_env("openai", &env(&[])).is_err());
        assert!(settings_from_env("openai", &env(&[("OPENAI_BASE_URL", " ")])).is_err());
        // Another dialect's override does not waive its key.
        let proxied = env(&[("ANTHROPIC_BASE_URL", "http://127.0.0.1:4000")]);
        assert!(settings_from_env("anthropic", &proxied).is_err());
    }

    #[test]
    fn unknown_providers_are_named_with_the_known_ones() {
        let err = settings_from_env("openia", &keys()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown provider `openia`: expected one of openai, openai-responses, anthropic, \
             gemini, faux"
        );
        for name in PROVIDER_NAMES {
            assert!(err.to_string().contains(name));
        }
    }

    #[test]
    fn keys_never_show_in_debug_or_errors() {
        let s = settings_from_env("openai", &keys()).unwrap();
        let debug = format!("{s:?}");
        assert!(!debug.contains(KEY) && !debug.contains("SECRET"), "{debug}");
        assert!(debug.contains("<set>"));
        let err = settings_from_env("anthropic", &env(&[("OPENAI_API_KEY", KEY)])).unwrap_err();
        assert!(!format!("{err:?} {err}").contains(KEY));
    }

    #[test]
    fn providers_from_settings() {
        let client = HttpClient::new(Default::default(), Default::default()).unwrap();
        for name in ["openai", "openai-responses", "anthropic", "gemini"] {
            let settings = settings_from_env(name, &keys()).unwrap();
            let provider = provider_from_settings(name, settings, client.clone()).unwrap();
            assert_eq!(provider.name(), name);
        }
        let settings = settings_from_env("faux", &keys()).unwrap();
        let err = provider_from_settings("faux", settings.clone(), client.clone()).err().unwrap();
        assert!(matches!(err, ConfigError::Unsupported { .. }));
        assert!(err.to_string().contains("FauxProvider::new"));
        let err = provider_from_settings("nope", settings, client).err().unwrap();
        assert!(matches!(err, ConfigError::UnknownProvider { .. }));
    }
}
