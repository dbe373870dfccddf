//! # weft-telemetry
//!
//! Weft's runs exported to OpenTelemetry: the GenAI spans `weft-agent` makes
//! ([`weft_agent::telemetry`]: `invoke_agent` per run, `chat` per model call, `execute_tool` per
//! tool call) and the server's request spans, over OTLP/HTTP, with the GenAI metrics derived
//! from the spans ([`metrics`]).
//!
//! ```no_run
//! use tracing_subscriber::layer::SubscriberExt;
//! use tracing_subscriber::util::SubscriberInitExt;
//! use weft_telemetry::{Telemetry, TelemetryConfig};
//!
//! // OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4318 (or `[telemetry] endpoint`) turns it on.
//! let telemetry = Telemetry::start(&TelemetryConfig::default())?;
//! let layer = telemetry.as_ref().map(Telemetry::layer);
//! tracing_subscriber::registry().with(layer).init();
//! // … run agents …
//! if let Some(telemetry) = telemetry {
//!     telemetry.shutdown(); // sends what is still buffered
//! }
//! # Ok::<(), weft_telemetry::TelemetryError>(())
//! ```
//!
//! **Configuration** ([`TelemetryConfig`], the `[telemetry]` section of `weft.toml`) and the
//! standard variables, which override it: `OTEL_SDK_DISABLED`, `OTEL_EXPORTER_OTLP_ENDPOINT`
//! (a base: `/v1/traces` and `/v1/metrics` are appended), `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`
//! and `…_METRICS_ENDPOINT` (as they are), `OTEL_EXPORTER_OTLP[_TRACES|_METRICS]_HEADERS`,
//! `…_TIMEOUT`, `…_PROTOCOL` (`http/protobuf`, the default, or `http/json`; `grpc` is refused),
//! `OTEL_TRACES_EXPORTER`/`OTEL_METRICS_EXPORTER` (`none` turns one off),
//! `OTEL_METRIC_EXPORT_INTERVAL`, `OTEL_SERVICE_NAME`, `OTEL_RESOURCE_ATTRIBUTES`, and
//! `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` (message content on the spans).
//!
//! **Traces continue**: [`continue_trace`] makes a span (an HTTP request's) the child of the
//! caller's `traceparent`; the runs it starts are its children.

pub mod config;
pub mod metrics;

use std::time::Duration;

use opentelemetry::global;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{
    MetricExporter, Protocol, SpanExporter, WithExportConfig, WithHttpConfig,
};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::metrics::{PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::SdkTracerProvider;
use tracing::Subscriber;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::registry::LookupSpan;

pub use config::{Env, TelemetryConfig};

/// The target of the HTTP server's request spans (exported with the GenAI spans).
pub const HTTP_SPAN_TARGET: &str = "weft_server::http";

/// The instrumentation scope of Weft's spans and metrics.
const SCOPE: &str = "weft";

/// Telemetry that could not be started: a configuration the exporter refuses.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` (or `[telemetry] protocol`) names what Weft does not send.
    #[error(
        "OTLP protocol {0:?} is not supported: use http/protobuf (the default) or http/json \
         (gRPC is not built in; an OpenTelemetry Collector takes OTLP/HTTP on port 4318)"
    )]
    Protocol(String),
    /// The exporter could not be built.
    #[error("the OTLP {signal} exporter could not be built: {message}")]
    Exporter {
        /// `traces` or `metrics`.
        signal: &'static str,
        /// The exporter's words.
        message: String,
    },
}

/// Telemetry started: the providers that export spans and metrics, until [`shutdown`](Self::shutdown).
pub struct Telemetry {
    tracer: Option<SdkTracerProvider>,
    meter: Option<SdkMeterProvider>,
    capture_content: bool,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Telemetry")
            .field("traces", &self.tracer.is_some())
            .field("metrics", &self.meter.is_some())
            .field("capture_content", &self.capture_content)
            .finish()
    }
}

impl Telemetry {
    /// Starts exporting as `config` and the process's environment say, or `None` when
    /// telemetry is off (no endpoint configured, `enabled = false` or `OTEL_SDK_DISABLED=true`).
    pub fn start(config: &TelemetryConfig) -> Result<Option<Self>, TelemetryError> {
        Self::start_with(config, &Env::process())
    }

    /// [`start`](Self::start) with `env` for the environment.
    pub fn start_with(config: &TelemetryConfig, env: &Env) -> Result<Option<Self>, TelemetryError> {
        let settings = config.resolve(env)?;
        if !settings.enabled {
            return Ok(None);
        }
        // `OTEL_SERVICE_NAME` and `OTEL_RESOURCE_ATTRIBUTES` are read by the builder.
        let mut resource = Resource::builder();
        if let Some(name) = &settings.service_name {
            resource = resource.with_service_name(name.clone());
        }
        let resource = resource.build();
        let tracer = match &settings.traces {
            Some(endpoint) => {
                let exporter = http(SpanExporter::builder().with_http(), endpoint, &settings)
                    .build()
                    .map_err(|e| exporter_error("traces", &e))?;
                Some(
                    SdkTracerProvider::builder()
                        .with_batch_exporter(exporter)
                        .with_resource(resource.clone())
                        .build(),
                )
            }
            None => None,
        };
        let meter = match &settings.metrics {
            Some(endpoint) => {
                let exporter = http(MetricExporter::builder().with_http(), endpoint, &settings)
                    .build()
                    .map_err(|e| exporter_error("metrics", &e))?;
                let mut reader = PeriodicReader::builder(exporter);
                if let Some(every) = settings.metrics_interval {
                    reader = reader.with_interval(every);
                }
                Some(
                    SdkMeterProvider::builder()
                        .with_reader(reader.build())
                        .with_resource(resource)
                        .build(),
                )
            }
            None => None,
        };
        Ok(Some(Self::from_providers(tracer, meter, settings.capture_content)))
    }

    /// Telemetry over providers made elsewhere (an exporter of the caller's choice: a stdout
    /// exporter, an in-memory one in tests): [`layer`](Self::layer) exports through them.
    pub fn from_providers(
        tracer: Option<SdkTracerProvider>,
        meter: Option<SdkMeterProvider>,
        capture_content: bool,
    ) -> Self {
        global::set_text_map_propagator(TraceContextPropagator::new());
        weft_agent::telemetry::record_lists_with(record_list);
        Self { tracer, meter, capture_content }
    }

    /// Whether the spans may carry message content (`capture_content`, or
    /// `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`): what the agent's
    /// [`AgentConfig::capture_content`](weft_agent::AgentConfig::capture_content) is set to.
    pub fn capture_content(&self) -> bool {
        self.capture_content
    }

    /// The layer that exports Weft's spans (the GenAI spans and the server's requests, nothing
    /// else: logs stay logs) and records the GenAI metrics, for a `tracing_subscriber` registry.
    pub fn layer<S>(&self) -> Box<dyn Layer<S> + Send + Sync + 'static>
    where
        S: Subscriber + for<'a> LookupSpan<'a> + Send + Sync,
    {
        // A vector of layers, not `Option`s: a `None` layer beside per-layer filters makes the
        // subscriber's level hint OFF, which disables every span.
        let mut layers: Vec<Box<dyn Layer<S> + Send + Sync>> = Vec::with_capacity(2);
        if let Some(provider) = &self.tracer {
            let traces = tracing_opentelemetry::layer()
                .with_tracer(provider.tracer(SCOPE))
                .with_tracked_inactivity(false)
                .with_threads(false)
                .with_location(false)
                .with_target(false)
                .with_filter(spans_filter());
            layers.push(Box::new(traces));
        }
        if let Some(provider) = &self.meter {
            let meter = opentelemetry::metrics::MeterProvider::meter(provider, SCOPE);
            layers.push(Box::new(metrics::GenAiMetrics::new(&meter).with_filter(spans_filter())));
        }
        Box::new(layers)
    }

    /// Sends what is buffered and stops the exporters (waiting at most a few seconds for each).
    /// Blocking: call it outside an async task (or in `spawn_blocking`).
    pub fn shutdown(self) {
        const WAIT: Duration = Duration::from_secs(5);
        if let Some(Err(error)) = self.tracer.map(|t| t.shutdown_with_timeout(WAIT)) {
            tracing::warn!(%error, "telemetry: the last spans could not be sent");
        }
        if let Some(Err(error)) = self.meter.map(|m| m.shutdown_with_timeout(WAIT)) {
            tracing::warn!(%error, "telemetry: the last metrics could not be sent");
        }
    }
}

/// An OTLP/HTTP exporter's builder set up as `settings` say, posting to `endpoint` (`None`: where
/// the exporter's environment says).
fn http<B: WithExportConfig + WithHttpConfig>(
    builder: B,
    endpoint: &Option<String>,
    settings: &config::Settings,
) -> B {
    let mut builder = builder.with_protocol(settings.protocol);
    if let Some(endpoint) = endpoint {
        builder = builder.with_endpoint(endpoint.clone());
    }
    if !settings.headers.is_empty() {
        builder = builder.with_headers(settings.headers.clone());
    }
    builder
}

fn exporter_error(signal: &'static str, error: &dyn std::fmt::Display) -> TelemetryError {
    TelemetryError::Exporter { signal, message: error.to_string() }
}

/// What is exported: the GenAI spans and the HTTP server's request spans, at INFO.
fn spans_filter() -> Targets {
    Targets::new()
        .with_target(weft_agent::telemetry::SPAN_TARGET, tracing::Level::INFO)
        .with_target(HTTP_SPAN_TARGET, tracing::Level::INFO)
}

/// Records `values` as a string-array attribute `key` of `span` (what
/// [`weft_agent::telemetry::record_lists_with`] is given).
fn record_list(span: &tracing::Span, key: &'static str, values: &[&str]) {
    let values = values.iter().map(|v| opentelemetry::StringValue::from(v.to_string())).collect();
    span.set_attribute(key, opentelemetry::Value::Array(opentelemetry::Array::String(values)));
}

/// Makes `span` (not yet entered) the child of the trace `headers` carry (`traceparent`,
/// `tracestate`), when they carry one and telemetry is on; otherwise nothing changes.
pub fn continue_trace(span: &tracing::Span, headers: &http::HeaderMap) {
    if span.is_disabled() || !headers.contains_key("traceparent") {
        return;
    }
    let context = global::get_text_map_propagator(|propagator| {
        propagator.extract(&opentelemetry_http::HeaderExtractor(headers))
    });
    // Refused only when no exporting layer is installed: nothing to continue then.
    let _ = span.set_parent(context);
}

/// The OTLP protocol named by `name` (`http/protobuf`, `http/json`).
fn protocol(name: &str) -> Result<Protocol, TelemetryError> {
    match name.trim().to_ascii_lowercase().as_str() {
        "http/protobuf" => Ok(Protocol::HttpBinary),
        "http/json" => Ok(Protocol::HttpJson),
        _ => Err(TelemetryError::Protocol(name.to_string())),
    }
}
