//! The GenAI metrics, derived from the spans when they close ([`GenAiMetrics`]), with the
//! semantic conventions' names, units and bucket boundaries:
//!
//! | metric | unit | from | attributes |
//! | --- | --- | --- | --- |
//! | `gen_ai.client.token.usage` | `{token}` | each `chat` span's usage, once per token type | operation, provider, request and response model, `gen_ai.token.type` (`input`, `output`) |
//! | `gen_ai.client.operation.duration` | `s` | each `chat` span | operation, provider, request and response model, `error.type` |
//! | `gen_ai.client.operation.time_to_first_chunk` | `s` | each `chat` span that streamed a chunk | operation, provider, request and response model |
//! | `gen_ai.execute_tool.duration` | `s` | each `execute_tool` span | `gen_ai.tool.name`, `gen_ai.tool.type`, `error.type` |
//! | `gen_ai.invoke_agent.duration` | `s` | each `invoke_agent` span (a run) | operation, request model, `error.type` |

use std::time::Instant;

use opentelemetry::KeyValue;
use opentelemetry::metrics::{Histogram, Meter};
use tracing::Subscriber;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing_subscriber::Layer;
use tracing_subscriber::layer::Context;
use tracing_subscriber::registry::LookupSpan;

/// Duration buckets of the conventions' client operations and tools, in seconds.
const DURATION_BUCKETS: [f64; 14] =
    [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
/// Duration buckets of agent invocations, in seconds.
const AGENT_BUCKETS: [f64; 13] =
    [0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6];
/// Token count buckets.
const TOKEN_BUCKETS: [f64; 14] = [
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// A layer that records the GenAI metrics of the spans it sees close (give it only the GenAI
/// spans: [`Telemetry::layer`](crate::Telemetry::layer) filters them).
pub struct GenAiMetrics {
    token_usage: Histogram<u64>,
    operation_duration: Histogram<f64>,
    time_to_first_chunk: Histogram<f64>,
    tool_duration: Histogram<f64>,
    agent_duration: Histogram<f64>,
}

impl GenAiMetrics {
    /// The instruments, made on `meter`.
    pub fn new(meter: &Meter) -> Self {
        let seconds = |name: &'static str, description: &'static str, buckets: &[f64]| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(buckets.to_vec())
                .build()
        };
        Self {
            token_usage: meter
                .u64_histogram("gen_ai.client.token.usage")
                .with_unit("{token}")
                .with_description("Number of input and output tokens used.")
                .with_boundaries(TOKEN_BUCKETS.to_vec())
                .build(),
            operation_duration: seconds(
                "gen_ai.client.operation.duration",
                "GenAI operation duration.",
                &DURATION_BUCKETS,
            ),
            time_to_first_chunk: seconds(
                "gen_ai.client.operation.time_to_first_chunk",
                "Time to receive the first chunk of a streamed response, from the request.",
                &DURATION_BUCKETS,
            ),
            tool_duration: seconds(
                "gen_ai.execute_tool.duration",
                "Duration of a tool execution.",
                &DURATION_BUCKETS,
            ),
            agent_duration: seconds(
                "gen_ai.invoke_agent.duration",
                "Duration of an agent invocation.",
                &AGENT_BUCKETS,
            ),
        }
    }

    fn record(&self, span: &Observed) {
        let seconds = span.start.elapsed().as_secs_f64();
        let mut attributes = Vec::with_capacity(6);
        fn add(attributes: &mut Vec<KeyValue>, key: &'static str, value: &Option<String>) {
            if let Some(value) = value {
                attributes.push(KeyValue::new(key, value.clone()));
            }
        }
        let a = &mut attributes;
        match span.operation.as_deref() {
            Some("chat") => {
                add(a, "gen_ai.operation.name", &span.operation);
                add(a, "gen_ai.provider.name", &span.provider);
                add(a, "gen_ai.request.model", &span.request_model);
                add(a, "gen_ai.response.model", &span.response_model);
                if let Some(first) = span.first_chunk {
                    self.time_to_first_chunk.record(first, &attributes);
                }
                for (kind, tokens) in [("input", span.input_tokens), ("output", span.output_tokens)]
                {
                    if let Some(tokens) = tokens {
                        let mut with_type = attributes.clone();
                        with_type.push(KeyValue::new("gen_ai.token.type", kind));
                        self.token_usage.record(tokens, &with_type);
                    }
                }
                add(&mut attributes, "error.type", &span.error_type);
                self.operation_duration.record(seconds, &attributes);
            }
            Some("execute_tool") => {
                add(a, "gen_ai.tool.name", &span.tool_name);
                add(a, "gen_ai.tool.type", &span.tool_type);
                add(a, "error.type", &span.error_type);
                self.tool_duration.record(seconds, &attributes);
            }
            Some("invoke_agent") => {
                add(a, "gen_ai.operation.name", &span.operation);
                add(a, "gen_ai.request.model", &span.request_model);
                add(a, "error.type", &span.error_type);
                self.agent_duration.record(seconds, &attributes);
            }
            _ => {}
        }
    }
}

/// What a GenAI span said, as far as its metrics need.
struct Observed {
    start: Instant,
    operation: Option<String>,
    provider: Option<String>,
    request_model: Option<String>,
    response_model: Option<String>,
    error_type: Option<String>,
    tool_name: Option<String>,
    tool_type: Option<String>,
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    first_chunk: Option<f64>,
}

impl Observed {
    fn new() -> Self {
        Self {
            start: Instant::now(),
            operation: None,
            provider: None,
            request_model: None,
            response_model: None,
            error_type: None,
            tool_name: None,
            tool_type: None,
            input_tokens: None,
            output_tokens: None,
            first_chunk: None,
        }
    }
}

impl Visit for Observed {
    fn record_str(&mut self, field: &Field, value: &str) {
        let slot = match field.name() {
            "gen_ai.operation.name" => &mut self.operation,
            "gen_ai.provider.name" => &mut self.provider,
            "gen_ai.request.model" => &mut self.request_model,
            "gen_ai.response.model" => &mut self.response_model,
            "error.type" => &mut self.error_type,
            "gen_ai.tool.name" => &mut self.tool_name,
            "gen_ai.tool.type" => &mut self.tool_type,
            _ => return,
        };
        *slot = Some(value.to_string());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        match field.name() {
            "gen_ai.usage.input_tokens" => self.input_tokens = Some(value),
            "gen_ai.usage.output_tokens" => self.output_tokens = Some(value),
            _ => {}
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if let Ok(value) = u64::try_from(value) {
            self.record_u64(field, value);
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if field.name() == "gen_ai.response.time_to_first_chunk" {
            self.first_chunk = Some(value);
        }
    }

    fn record_debug(&mut self, _field: &Field, _value: &dyn std::fmt::Debug) {}
}

impl<S> Layer<S> for GenAiMetrics
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut observed = Observed::new();
        attrs.record(&mut observed);
        if observed.operation.is_none() {
            return;
        }
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().insert(observed);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(id)
            && let Some(observed) = span.extensions_mut().get_mut::<Observed>()
        {
            values.record(observed);
        }
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        if let Some(span) = ctx.span(&id)
            && let Some(observed) = span.extensions_mut().remove::<Observed>()
        {
            self.record(&observed);
        }
    }
}
