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
//! A base URL must be an `http` or `https` URL with a host (`localhost:8080` without its scheme
//! is refused): anything else is [`ProviderConfigError::InvalidBaseUrl`], naming the variable and the
//! value (without any user, password or query it holds).
//!
//! API keys never appear in errors or `Debug` output.
//!
//! # Timeouts and retries
//!
//! [`http_from_env`] reads the HTTP client's [`Timeouts`] and [`RetryPolicy`] from these
//! variables; an unset (or empty) one keeps its default:
//!
//! | variable | meaning | default |
//! | --- | --- | --- |
//! | `WEFT_CONNECT_TIMEOUT` | establishing the connection | 10 s |
//! | `WEFT_FIRST_BYTE_TIMEOUT` | from sending a request to the response's headers, per attempt | 60 s |
//! | `WEFT_IDLE_TIMEOUT` | the longest silence within a response's body | 120 s |
//! | `WEFT_MAX_RETRIES` | how often a request that failed before streaming is tried again | 2 |
//!
//! Durations are a number of seconds (`30`, `0.5`) or numbers with units (`500ms`, `30s`, `2m`,
//! `1h`, `1m30s`), as [`parse_duration`] reads them; a timeout must be more than zero. An
//! invalid value is [`ProviderConfigError::InvalidSetting`] naming the variable. See
//! [`Timeouts`] for what the defaults bound.

use std::sync::Arc;
use std::time::Duration;

use crate::http::{HttpClient, RetryPolicy, Timeouts};
use crate::models::ModelRegistry;
use crate::provider::Provider;
use crate::providers::ProviderSettings;

/// Every provider name, as the CLI's `--provider` and configuration spell them.
pub const PROVIDER_NAMES: [&str; 5] = ["openai", "openai-responses", "anthropic", "gemini", "faux"];

/// Why a provider could not be configured. Messages are one line and never hold a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderConfigError {
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
    /// A base URL variable is set to something that is not an `http`/`https` URL.
    #[error("{variable} is not a valid base URL ({value:?}): {reason}")]
    InvalidBaseUrl {
        /// The environment variable.
        variable: &'static str,
        /// Its value, without any user, password or query (see [`crate::http::shown_url`]).
        value: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A setting's variable (a timeout, the retry count) has a value that cannot be read.
    #[error("{variable} is invalid ({value:?}): {reason}")]
    InvalidSetting {
        /// The environment variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What is wrong with it.
        reason: String,
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
) -> Result<ProviderSettings, ProviderConfigError> {
    let vars = vars(provider)
        .ok_or_else(|| ProviderConfigError::UnknownProvider { name: provider.to_owned() })?;
    let get = |name: &str| env(name).filter(|value| !value.trim().is_empty());
    let base_override = match vars.base_url {
        Some(variable) => match get(variable) {
            Some(url) => Some(checked_base_url(variable, &url)?),
            None => None,
        },
        None => None,
    };
    let api_key = vars.key.and_then(get);
    if let Some(variable) = vars.key
        && api_key.is_none()
        && !(provider == "openai" && base_override.is_some())
    {
        return Err(ProviderConfigError::MissingKey { provider: provider.to_owned(), variable });
    }
    let base_url = base_override.unwrap_or_else(|| vars.default_base_url.to_owned());
    Ok(ProviderSettings {
        api_key,
        base_url,
        extra_headers: Vec::new(),
        models: ModelRegistry::builtin(),
    })
}

/// `value` of `variable` trimmed (spaces, trailing slashes), if it is an `http`/`https` URL with a
/// host.
fn checked_base_url(variable: &'static str, value: &str) -> Result<String, ProviderConfigError> {
    let raw = value.trim();
    let url = raw.trim_end_matches('/');
    let invalid = |reason: String| ProviderConfigError::InvalidBaseUrl {
        variable,
        value: crate::http::shown_url(value),
        reason,
    };
    if url.is_empty() {
        return Err(invalid("it is empty".to_owned()));
    }
    let example = "expected an http:// or https:// URL such as http://localhost:8080";
    // `localhost:8080` would parse with the scheme `localhost`.
    if !raw.contains("://") {
        return Err(invalid(format!("it has no scheme: {example}")));
    }
    let parsed = reqwest::Url::parse(raw).map_err(|e| invalid(format!("{e}: {example}")))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        let scheme = parsed.scheme();
        return Err(invalid(format!("the scheme `{scheme}` is not supported: {example}")));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(invalid(format!("it has no host: {example}")));
    }
    if parsed.query().is_some() {
        return Err(invalid(
            "it must not have a query (`?…`): Weft appends paths to it".to_owned(),
        ));
    }
    Ok(url.to_owned())
}

/// Reads a duration: a number of seconds (`30`, `0.5`), or one or more numbers each with a unit
/// (`500ms`, `30s`, `2m`, `1h`, `1m30s`, `1m 30s`, `1.5h`). Units: `ns`, `us`, `ms`, `s`/`sec`/
/// `secs`/`second(s)`, `m`/`min`/`mins`/`minute(s)`, `h`/`hr`/`hrs`/`hour(s)`, `d`/`day(s)`, in
/// any case. Decimal fractions are exact to the nanosecond. For the CLI's flags as well as the
/// `WEFT_*_TIMEOUT` variables.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let error = |reason: &'static str| DurationError { value: text.to_owned(), reason };
    const SYNTAX: &str = "expected a number of seconds (30, 0.5) or numbers with units \
                          (500ms, 30s, 2m, 1h, 1m30s)";
    let s = text.trim();
    if s.is_empty() {
        return Err(error("it is empty"));
    }
    if s.starts_with('-') {
        return Err(error("it must not be negative"));
    }
    let mut total: u128 = 0;
    let mut rest = s;
    let mut first = true;
    while !rest.is_empty() {
        let number_len =
            rest.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(rest.len());
        let (number, after) = rest.split_at(number_len);
        let after = after.trim_start();
        let unit_len = after.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        let nanos_per: u128 = match unit.to_ascii_lowercase().as_str() {
            // A bare number is seconds, alone only.
            "" if first && next.is_empty() => 1_000_000_000,
            "ns" | "nsec" | "nanos" => 1,
            "us" | "usec" | "micros" => 1_000,
            "ms" | "msec" | "millis" => 1_000_000,
            "s" | "sec" | "secs" | "second" | "seconds" => 1_000_000_000,
            "m" | "min" | "mins" | "minute" | "minutes" => 60_000_000_000,
            "h" | "hr" | "hrs" | "hour" | "hours" => 3_600_000_000_000,
            "d" | "day" | "days" => 86_400_000_000_000,
            _ => return Err(error(SYNTAX)),
        };
        let nanos = decimal_times(number, nanos_per).ok_or_else(|| error(SYNTAX))?;
        total = total.checked_add(nanos).ok_or_else(|| error("it is too large"))?;
        rest = next.trim_start();
        first = false;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| error("it is too large"))?;
    // The remainder is below 10^9.
    let nanos = u32::try_from(total % 1_000_000_000).unwrap_or(0);
    Ok(Duration::new(secs, nanos))
}

/// `number` (digits with at most one `.`, digits on at least one side) times `unit`, rounded to
/// an integer; `None` if it is not such a number or the product is absurdly large.
fn decimal_times(number: &str, unit: u128) -> Option<u128> {
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() || fraction.contains('.') {
        return None;
    }
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if !digits(whole) || !digits(fraction) || whole.len() > 30 {
        return None;
    }
    let whole: u128 = if whole.is_empty() { 0 } else { whole.parse().ok()? };
    // Digits beyond the 18th cannot change a nanosecond count of any unit here.
    let fraction = &fraction[..fraction.len().min(18)];
    let scale = 10u128.pow(fraction.len() as u32);
    let fraction: u128 = if fraction.is_empty() { 0 } else { fraction.parse().ok()? };
    let part = (fraction * unit + scale / 2) / scale;
    whole.checked_mul(unit)?.checked_add(part)
}

/// Why a duration could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid duration {value:?}: {reason}")]
pub struct DurationError {
    /// The text given.
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// The variable setting the connect timeout.
pub const CONNECT_TIMEOUT_VAR: &str = "WEFT_CONNECT_TIMEOUT";
/// The variable setting the first-byte timeout.
pub const FIRST_BYTE_TIMEOUT_VAR: &str = "WEFT_FIRST_BYTE_TIMEOUT";
/// The variable setting the idle timeout.
pub const IDLE_TIMEOUT_VAR: &str = "WEFT_IDLE_TIMEOUT";
/// The variable setting the retry count.
pub const MAX_RETRIES_VAR: &str = "WEFT_MAX_RETRIES";

/// The HTTP client's timeouts and retries from the variables `get` gives, each unset (or empty)
/// one keeping its default ([`Timeouts::default`], [`RetryPolicy::default`]); see the
/// [module docs](self#timeouts-and-retries). `get` is `|name| std::env::var(name).ok()` in
/// production and a map in tests.
pub fn http_from_env(
    get: impl Fn(&str) -> Option<String>,
) -> Result<(Timeouts, RetryPolicy), ProviderConfigError> {
    let value = |variable: &str| get(variable).filter(|v| !v.trim().is_empty());
    let timeout =
        |variable: &'static str, default: Duration| -> Result<Duration, ProviderConfigError> {
            let Some(text) = value(variable) else { return Ok(default) };
            let invalid = |reason: String| ProviderConfigError::InvalidSetting {
                variable,
                value: text.clone(),
                reason,
            };
            match parse_duration(&text) {
                Ok(d) if d.is_zero() => Err(invalid("a timeout must be more than zero".to_owned())),
                Ok(d) => Ok(d),
                Err(e) => Err(invalid(e.reason.to_owned())),
            }
        };
    let defaults = Timeouts::default();
    let timeouts = Timeouts {
        connect: timeout(CONNECT_TIMEOUT_VAR, defaults.connect)?,
        first_byte: timeout(FIRST_BYTE_TIMEOUT_VAR, defaults.first_byte)?,
        idle: timeout(IDLE_TIMEOUT_VAR, defaults.idle)?,
    };
    let mut retry = RetryPolicy::default();
    if let Some(text) = value(MAX_RETRIES_VAR) {
        retry.max_retries =
            text.trim().parse::<u32>().map_err(|_| ProviderConfigError::InvalidSetting {
                variable: MAX_RETRIES_VAR,
                value: text.clone(),
                reason: "expected a whole number of retries (0 for none), such as 2".to_owned(),
            })?;
    }
    Ok((timeouts, retry))
}

/// [`http_from_env`] with the process environment.
pub fn http_from_process_env() -> Result<(Timeouts, RetryPolicy), ProviderConfigError> {
    http_from_env(|name| std::env::var(name).ok())
}

/// [`settings_from_env`] with the process environment.
pub fn settings_from_process_env(provider: &str) -> Result<ProviderSettings, ProviderConfigError> {
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
) -> Result<Arc<dyn Provider>, ProviderConfigError> {
    use crate::providers::{anthropic, gemini, openai_chat, openai_responses};
    Ok(match name {
        "openai" => Arc::new(openai_chat::OpenAiChat::new(settings, client)),
        "openai-responses" => Arc::new(openai_responses::OpenAiResponses::new(settings, client)),
        "anthropic" => Arc::new(anthropic::Anthropic::new(settings, client)),
        "gemini" => Arc::new(gemini::Gemini::new(settings, client)),
        "faux" => {
            return Err(ProviderConfigError::Unsupported {
                provider: name.to_owned(),
                reason: "it plays a script; build it with FauxProvider::new",
            });
        }
        _ => return Err(ProviderConfigError::UnknownProvider { name: name.to_owned() }),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::collections::HashMap;

    use super::*;

    const KEY: &str = "sk-test-SECRET-0123456789";

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
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
            ProviderConfigError::MissingKey {
                provider: "anthropic".into(),
                variable: "ANTHROPIC_API_KEY"
            }
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
            Err(ProviderConfigError::MissingKey { variable: "OPENAI_API_KEY", .. })
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
    fn invalid_base_urls_name_the_variable_and_the_value() {
        let cases = [
            ("openai", "OPENAI_BASE_URL", "localhost:8080", "it has no scheme"),
            ("openai", "OPENAI_BASE_URL", "127.0.0.1:11434/v1", "it has no scheme"),
            ("anthropic", "ANTHROPIC_BASE_URL", "ftp://x", "the scheme `ftp` is not supported"),
            ("gemini", "GEMINI_BASE_URL", "/", "it is empty"),
            ("gemini", "GEMINI_BASE_URL", "http://", "empty host"),
            ("openai-responses", "OPENAI_BASE_URL", "https://exa mple.com", "invalid"),
            ("openai", "OPENAI_BASE_URL", "http://h/v1?api-version=1", "must not have a query"),
        ];
        for (provider, variable, value, reason) in cases {
            let vars = env(&[
                ("OPENAI_API_KEY", KEY),
                ("ANTHROPIC_API_KEY", KEY),
                ("GEMINI_API_KEY", KEY),
                (variable, value),
            ]);
            let err = settings_from_env(provider, &vars).unwrap_err();
            let ProviderConfigError::InvalidBaseUrl { variable: v, value: shown, reason: why } =
                &err
            else {
                panic!("{provider} {value}: {err:?}")
            };
            assert_eq!(*v, variable);
            assert!(why.contains(reason), "{value}: {why}");
            let message = err.to_string();
            assert!(
                message.starts_with(&format!("{variable} is not a valid base URL (")),
                "{message}"
            );
            assert!(!message.contains('\n'), "{message}");
            if !value.contains('?') {
                assert_eq!(shown, value);
                assert!(message.contains(&format!("{value:?}")), "{message}");
            }
        }
        // Without a key, the URL is still what is reported for `openai` (it waives the key).
        let err = settings_from_env("openai", &env(&[("OPENAI_BASE_URL", "localhost:11434")]))
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "OPENAI_BASE_URL is not a valid base URL (\"localhost:11434\"): it has no scheme: \
             expected an http:// or https:// URL such as http://localhost:8080"
        );
        // Credentials and queries in a value are not shown.
        let err = settings_from_env(
            "anthropic",
            &env(&[("ANTHROPIC_API_KEY", KEY), ("ANTHROPIC_BASE_URL", "ftp://user:pw@h/x?key=k")]),
        )
        .unwrap_err();
        let message = err.to_string();
        assert!(!message.contains("pw") && !message.contains("key=k"), "{message}");
        assert!(message.contains("ftp://<credentials>@h/x"), "{message}");
        // Valid ones, with ports, paths and upper-case schemes.
        for url in ["http://localhost:8080", "HTTPS://proxy.internal/openai/v1/", "http://[::1]:80"]
        {
            let vars = env(&[("OPENAI_BASE_URL", url)]);
            let s = settings_from_env("openai", &vars).unwrap();
            assert_eq!(s.base_url, url.trim_end_matches('/'));
        }
    }

    #[test]
    fn durations_in_seconds_or_with_units() {
        let ms = Duration::from_millis;
        for (text, expected) in [
            ("30", Duration::from_secs(30)),
            ("0.5", ms(500)),
            (" 2 ", Duration::from_secs(2)),
            (".25", ms(250)),
            ("500ms", ms(500)),
            ("30s", Duration::from_secs(30)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("1m30s", Duration::from_secs(90)),
            ("1m 30s", Duration::from_secs(90)),
            ("1.5h", Duration::from_secs(5400)),
            ("0.3s", ms(300)),
            ("2 min", Duration::from_secs(120)),
            ("10 Seconds", Duration::from_secs(10)),
            ("1d", Duration::from_secs(86_400)),
            ("250us", Duration::from_micros(250)),
            ("7ns", Duration::from_nanos(7)),
            ("0", Duration::ZERO),
            ("0.0000000015", Duration::from_nanos(2)),
        ] {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
        for (text, reason) in [
            ("", "it is empty"),
            ("  ", "it is empty"),
            ("-5", "it must not be negative"),
            ("5 parsecs", "expected a number"),
            ("1.2.3s", "expected a number"),
            ("s", "expected a number"),
            ("5s 3", "expected a number"),
            ("1e3", "expected a number"),
            ("abc", "expected a number"),
            (".", "expected a number"),
            ("99999999999999999999999d", "it is too large"),
        ] {
            let err = parse_duration(text).unwrap_err();
            assert!(err.reason.contains(reason), "{text}: {err}");
            assert_eq!(err.value, text);
            assert!(err.to_string().starts_with(&format!("invalid duration {text:?}: ")), "{err}");
        }
    }

    #[test]
    fn timeouts_and_retries_from_the_environment() {
        let (timeouts, retry) = http_from_env(env(&[])).unwrap();
        assert_eq!((timeouts, retry), (Timeouts::default(), RetryPolicy::default()));
        let (timeouts, retry) = http_from_env(env(&[
            ("WEFT_CONNECT_TIMEOUT", "500ms"),
            ("WEFT_FIRST_BYTE_TIMEOUT", "30"),
            ("WEFT_IDLE_TIMEOUT", "5m"),
            ("WEFT_MAX_RETRIES", " 0 "),
        ]))
        .unwrap();
        assert_eq!(
            timeouts,
            Timeouts {
                connect: Duration::from_millis(500),
                first_byte: Duration::from_secs(30),
                idle: Duration::from_secs(300),
            }
        );
        assert_eq!(retry, RetryPolicy { max_retries: 0, ..RetryPolicy::default() });
        // Empty counts as unset.
        let (timeouts, _) = http_from_env(env(&[("WEFT_IDLE_TIMEOUT", "")])).unwrap();
        assert_eq!(timeouts.idle, Timeouts::default().idle);
        for (variable, value, reason) in [
            ("WEFT_CONNECT_TIMEOUT", "ten", "expected a number of seconds"),
            ("WEFT_FIRST_BYTE_TIMEOUT", "-1", "must not be negative"),
            ("WEFT_IDLE_TIMEOUT", "0s", "a timeout must be more than zero"),
            ("WEFT_MAX_RETRIES", "3.5", "expected a whole number of retries"),
            ("WEFT_MAX_RETRIES", "-1", "expected a whole number of retries"),
        ] {
            let err = http_from_env(env(&[(variable, value)])).unwrap_err();
            assert!(
                matches!(&err, ProviderConfigError::InvalidSetting { variable: v, value: shown, .. }
                    if *v == variable && shown == value),
                "{err:?}"
            );
            let message = err.to_string();
            assert!(
                message.starts_with(&format!("{variable} is invalid ({value:?}): ")),
                "{message}"
            );
            assert!(message.contains(reason), "{message}");
        }
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
        assert!(matches!(err, ProviderConfigError::Unsupported { .. }));
        assert!(err.to_string().contains("FauxProvider::new"));
        let err = provider_from_settings("nope", settings, client).err().unwrap();
        assert!(matches!(err, ProviderConfigError::UnknownProvider { .. }));
    }
}
