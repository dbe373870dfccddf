//! What telemetry exports and where: the `[telemetry]` section of `weft.toml`
//! ([`TelemetryConfig`]) and the standard `OTEL_*` variables ([`Env`]), which override it.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use opentelemetry_otlp::Protocol;
use serde::Deserialize;

use crate::{TelemetryError, protocol};

/// The `[telemetry]` section of `weft.toml`. Every key is optional:
///
/// ```toml
/// [telemetry]
/// endpoint = "http://127.0.0.1:4318"   # OTLP/HTTP base: /v1/traces and /v1/metrics appended
/// # traces_endpoint = "http://collector:4318/v1/traces"   # as it is (so is metrics_endpoint)
/// # protocol = "http/protobuf"         # or http/json
/// # headers = { authorization = "Bearer …" }
/// # service_name = "weft"
/// # capture_content = false            # message content on the spans
/// # traces = true                      # false: no spans exported
/// # metrics = true                     # false: no metrics exported
/// # metrics_interval = "60s"
/// # enabled = true                     # on by default once an endpoint is configured
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// On or off; by default on when an OTLP endpoint is configured (here or in the
    /// environment).
    pub enabled: Option<bool>,
    /// The OTLP/HTTP base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`): `/v1/traces` and `/v1/metrics`
    /// are appended.
    pub endpoint: Option<String>,
    /// The URL spans are posted to, as it is (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`).
    pub traces_endpoint: Option<String>,
    /// The URL metrics are posted to, as it is (`OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`).
    pub metrics_endpoint: Option<String>,
    /// `http/protobuf` (the default) or `http/json` (`OTEL_EXPORTER_OTLP_PROTOCOL`).
    pub protocol: Option<String>,
    /// Headers sent with every export (`OTEL_EXPORTER_OTLP_HEADERS`, whose keys win).
    pub headers: BTreeMap<String, String>,
    /// The resource's `service.name` (`OTEL_SERVICE_NAME`; default `weft`).
    pub service_name: Option<String>,
    /// Whether spans carry message content (`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`;
    /// default off).
    pub capture_content: Option<bool>,
    /// Whether spans are exported (`OTEL_TRACES_EXPORTER=none` turns them off; default on).
    pub traces: Option<bool>,
    /// Whether metrics are exported (`OTEL_METRICS_EXPORTER=none` turns them off; default on).
    pub metrics: Option<bool>,
    /// How often metrics are exported, as `60s` or `500ms` (`OTEL_METRIC_EXPORT_INTERVAL`, in
    /// milliseconds; default 60 s).
    #[serde(default, deserialize_with = "duration")]
    pub metrics_interval: Option<Duration>,
}

fn duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(&text).map(Some).map_err(serde::de::Error::custom)
}

/// The `OTEL_*` variables telemetry reads.
#[derive(Debug, Clone, Default)]
pub struct Env(HashMap<String, String>);

impl Env {
    /// This process's environment.
    pub fn process() -> Self {
        Self(std::env::vars().filter(|(k, _)| k.starts_with("OTEL_")).collect())
    }

    /// An environment of `pairs` only (for tests, and for a caller that reads its own).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self(pairs.into_iter().map(|(k, v)| (k.into(), v.into())).collect())
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(|v| v.trim()).filter(|v| !v.is_empty())
    }

    fn is(&self, key: &str, value: &str) -> bool {
        self.get(key).is_some_and(|v| v.eq_ignore_ascii_case(value))
    }
}

/// Where one signal goes: `None` (off), `Some(None)` (where the exporter's environment says:
/// the variables, else `localhost:4318`), `Some(Some(url))` (there).
pub(crate) type Destination = Option<Option<String>>;

/// The configuration and the environment, resolved.
#[derive(Debug)]
pub(crate) struct Settings {
    pub(crate) enabled: bool,
    pub(crate) traces: Destination,
    pub(crate) metrics: Destination,
    pub(crate) protocol: Protocol,
    pub(crate) headers: HashMap<String, String>,
    /// `None` when `OTEL_SERVICE_NAME` says it (the resource reads it).
    pub(crate) service_name: Option<String>,
    pub(crate) capture_content: bool,
    /// `None`: the exporter's default, or `OTEL_METRIC_EXPORT_INTERVAL`.
    pub(crate) metrics_interval: Option<Duration>,
}

impl TelemetryConfig {
    /// This configuration under `env`.
    pub(crate) fn resolve(&self, env: &Env) -> Result<Settings, TelemetryError> {
        let env_endpoint = |signal: &str| {
            env.get(&format!("OTEL_EXPORTER_OTLP_{signal}_ENDPOINT"))
                .or_else(|| env.get("OTEL_EXPORTER_OTLP_ENDPOINT"))
                .is_some()
        };
        let configured = env_endpoint("TRACES")
            || env_endpoint("METRICS")
            || self.endpoint.is_some()
            || self.traces_endpoint.is_some()
            || self.metrics_endpoint.is_some();
        let enabled = !env.is("OTEL_SDK_DISABLED", "true") && self.enabled.unwrap_or(configured);
        // What the environment says wins; else the file's own URL; else the base plus the
        // signal's path; else the exporter's default.
        let destination = |signal: &str, own: &Option<String>, path: &str, on: Option<bool>| {
            let off = env.is(&format!("OTEL_{signal}_EXPORTER"), "none") || on == Some(false);
            if off {
                return None;
            }
            if env_endpoint(signal) {
                return Some(None);
            }
            let base =
                || self.endpoint.as_ref().map(|b| format!("{}{path}", b.trim_end_matches('/')));
            Some(own.clone().or_else(base))
        };
        let protocol_name = env
            .get("OTEL_EXPORTER_OTLP_PROTOCOL")
            .map(str::to_string)
            .or_else(|| self.protocol.clone());
        let protocol = match protocol_name {
            Some(name) => protocol(&name)?,
            None => Protocol::HttpBinary,
        };
        let capture_content = match env.get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT") {
            Some(value) => matches!(
                value.to_ascii_lowercase().as_str(),
                "true" | "1" | "span_only" | "span_and_event"
            ),
            None => self.capture_content.unwrap_or(false),
        };
        Ok(Settings {
            enabled,
            traces: destination("TRACES", &self.traces_endpoint, "/v1/traces", self.traces),
            metrics: destination("METRICS", &self.metrics_endpoint, "/v1/metrics", self.metrics),
            protocol,
            headers: self.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            service_name: match env.get("OTEL_SERVICE_NAME") {
                Some(_) => None,
                None => Some(self.service_name.clone().unwrap_or_else(|| "weft".into())),
            },
            capture_content,
            metrics_interval: match env.get("OTEL_METRIC_EXPORT_INTERVAL") {
                Some(_) => None,
                None => self.metrics_interval,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(toml_text: &str) -> TelemetryConfig {
        toml::from_str(toml_text).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn off_unless_an_endpoint_is_configured() {
        let none = TelemetryConfig::default().resolve(&Env::default()).unwrap();
        assert!(!none.enabled);
        let env = Env::from_pairs([("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")]);
        let on = TelemetryConfig::default().resolve(&env).unwrap();
        assert!(on.enabled);
        // The exporter reads the variable itself (and appends the signal's path).
        assert_eq!((on.traces, on.metrics), (Some(None), Some(None)));
        let file =
            config("endpoint = \"http://collector:4318/\"").resolve(&Env::default()).unwrap();
        assert!(file.enabled);
        assert_eq!(file.traces, Some(Some("http://collector:4318/v1/traces".into())));
        assert_eq!(file.metrics, Some(Some("http://collector:4318/v1/metrics".into())));
        let disabled = Env::from_pairs([
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ]);
        assert!(!TelemetryConfig::default().resolve(&disabled).unwrap().enabled);
        let explicit_off = config("enabled = false\nendpoint = \"http://c:4318\"");
        assert!(!explicit_off.resolve(&env).unwrap().enabled);
    }

    #[test]
    fn the_environment_overrides_the_file() {
        let file = config(
            "traces_endpoint = \"http://file/v1/traces\"\nprotocol = \"http/json\"\n\
             capture_content = true\nservice_name = \"agents\"\nmetrics_interval = \"5s\"",
        );
        let from_file = file.resolve(&Env::default()).unwrap();
        assert_eq!(from_file.traces, Some(Some("http://file/v1/traces".into())));
        assert_eq!(from_file.metrics, Some(None));
        assert_eq!(from_file.protocol, Protocol::HttpJson);
        assert!(from_file.capture_content);
        assert_eq!(from_file.service_name.as_deref(), Some("agents"));
        assert_eq!(from_file.metrics_interval, Some(Duration::from_secs(5)));
        let env = Env::from_pairs([
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://env/v1/traces"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
            ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "false"),
            ("OTEL_SERVICE_NAME", "from-env"),
            ("OTEL_METRIC_EXPORT_INTERVAL", "1000"),
            ("OTEL_METRICS_EXPORTER", "none"),
        ]);
        let from_env = file.resolve(&env).unwrap();
        assert_eq!(from_env.traces, Some(None));
        assert_eq!(from_env.metrics, None);
        assert_eq!(from_env.protocol, Protocol::HttpBinary);
        assert!(!from_env.capture_content);
        assert_eq!(from_env.service_name, None);
        assert_eq!(from_env.metrics_interval, None);
        let span_only =
            Env::from_pairs([("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")]);
        assert!(TelemetryConfig::default().resolve(&span_only).unwrap().capture_content);
    }

    #[test]
    fn grpc_and_unknown_keys_are_refused() {
        let env = Env::from_pairs([("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]);
        let error = TelemetryConfig::default().resolve(&env).unwrap_err();
        assert!(error.to_string().contains("\"grpc\" is not supported"), "{error}");
        assert!(toml::from_str::<TelemetryConfig>("endpiont = \"x\"").is_err());
        assert!(toml::from_str::<TelemetryConfig>("metrics_interval = \"soon\"").is_err());
    }
}
