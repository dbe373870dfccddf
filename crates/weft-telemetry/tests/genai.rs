//! A run of a real agent (faux provider, a local tool and one that fails) under the telemetry
//! layer, with the OpenTelemetry SDK's in-memory exporters in place of OTLP: the spans it
//! exports (names, kinds, parents, attributes, statuses), the caller's `traceparent`
//! continued, and the GenAI metrics derived from them. (`weft-cli`'s `otel` test sends the same
//! over OTLP to a real receiver.)

#![allow(clippy::unwrap_used)]

use std::collections::HashMap;

use futures::StreamExt;
use opentelemetry::trace::{SpanKind, Status, TraceId};
use opentelemetry::{Array, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, HistogramDataPoint, MetricData};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde::Deserialize;
use tracing::Instrument;
use tracing_subscriber::layer::SubscriberExt;
use weft_agent::{Agent, SessionOptions, tool_fn};
use weft_core::{Input, SessionStatus};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_telemetry::{HTTP_SPAN_TARGET, Telemetry, continue_trace};

#[derive(Deserialize, schemars::JsonSchema)]
struct Text {
    text: String,
}

const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER_SPAN: &str = "00f067aa0ba902b7";

struct Exported {
    spans: Vec<SpanData>,
    metrics: Vec<(String, String, Vec<HistogramPoint>)>,
    session_id: String,
}

/// A histogram data point: its attributes, count and sum.
#[derive(Debug)]
struct HistogramPoint {
    attributes: HashMap<String, String>,
    count: u64,
    sum: f64,
}

fn point<T: Into<f64> + Copy>(p: &HistogramDataPoint<T>) -> HistogramPoint {
    HistogramPoint {
        attributes: p.attributes().map(|kv| (kv.key.to_string(), kv.value.to_string())).collect(),
        count: p.count(),
        sum: p.sum().into(),
    }
}

/// Runs "Echo please" (a call to `echo` and one to `fail`, then an answer) in a
/// request span that continues trace [`TRACE`], and returns what the exporters received.
async fn run(capture_content: bool, with_metrics: bool) -> Exported {
    let spans = InMemorySpanExporter::default();
    let tracer = SdkTracerProvider::builder().with_simple_exporter(spans.clone()).build();
    let metrics = InMemoryMetricExporter::default();
    let meter = SdkMeterProvider::builder()
        .with_reader(PeriodicReader::builder(metrics.clone()).build())
        .build();
    let telemetry = Telemetry::from_providers(
        Some(tracer.clone()),
        with_metrics.then(|| meter.clone()),
        capture_content,
    );
    let subscriber = tracing_subscriber::registry().with(telemetry.layer());
    let _default = tracing::subscriber::set_default(subscriber);

    let script = FauxScript::new([
        FauxTurn::text("Let me echo that.")
            .with_thinking("Echo, then answer.")
            .with_tool_call_id("c1", "echo", serde_json::json!({"text": "hello"}))
            .with_tool_call_id("c2", "fail", serde_json::json!({"text": "x"}))
            .with_usage(120, 30),
        FauxTurn::text("It said hello.").with_usage(160, 8),
    ]);
    let agent = Agent::builder(FauxProvider::new(script))
        .model("faux-1")
        .capture_content(telemetry.capture_content())
        .tool(tool_fn("echo", "Echoes its text", |a: Text| async move { Ok::<_, String>(a.text) }))
        .tool(tool_fn("fail", "Always fails", |a: Text| async move {
            Err::<String, _>(format!("cannot {}", a.text))
        }))
        .build()
        .unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();

    let request = tracing::info_span!(target: HTTP_SPAN_TARGET, "request", otel.kind = "server");
    let mut headers = http::HeaderMap::new();
    let traceparent = format!("00-{TRACE}-{CALLER_SPAN}-01");
    headers.insert("traceparent", traceparent.parse().unwrap());
    continue_trace(&request, &headers);
    let mut stream = agent
        .execute(&session, Input::text("Echo please"))
        .instrument(request.clone())
        .await
        .unwrap();
    drop(request);
    while stream.next().await.is_some() {}
    let result = stream.result().await;
    assert_eq!(result.status, SessionStatus::Completed, "{:?}", result.error);

    tracer.force_flush().unwrap();
    meter.force_flush().unwrap();
    let mut histograms = Vec::new();
    for resource in metrics.get_finished_metrics().unwrap() {
        for scope in resource.scope_metrics() {
            for metric in scope.metrics() {
                let points: Vec<HistogramPoint> = match metric.data() {
                    AggregatedMetrics::F64(MetricData::Histogram(h)) => {
                        h.data_points().map(point).collect()
                    }
                    AggregatedMetrics::U64(MetricData::Histogram(h)) => h
                        .data_points()
                        .map(|p| HistogramPoint {
                            attributes: p
                                .attributes()
                                .map(|kv| (kv.key.to_string(), kv.value.to_string()))
                                .collect(),
                            count: p.count(),
                            sum: p.sum() as f64,
                        })
                        .collect(),
                    other => panic!("{}: not a histogram: {other:?}", metric.name()),
                };
                histograms.push((metric.name().to_string(), metric.unit().to_string(), points));
            }
        }
    }
    Exported {
        spans: spans.get_finished_spans().unwrap(),
        metrics: histograms,
        session_id: session.id(),
    }
}

fn attribute<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes.iter().find(|kv| kv.key.as_str() == key).map(|kv| &kv.value)
}

fn text(span: &SpanData, key: &str) -> String {
    match attribute(span, key) {
        Some(Value::String(s)) => s.to_string(),
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

fn int(span: &SpanData, key: &str) -> i64 {
    match attribute(span, key) {
        Some(Value::I64(n)) => *n,
        other => panic!("{}: {key} is {other:?}", span.name),
    }
}

fn named<'a>(spans: &'a [SpanData], name: &str) -> Vec<&'a SpanData> {
    spans.iter().filter(|s| s.name == name).collect()
}

#[tokio::test(flavor = "current_thread")]
async fn a_run_is_traced_in_the_genai_conventions_under_the_callers_trace() {
    let Exported { spans, metrics, session_id } = run(false, true).await;
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    let trace = TraceId::from_hex(TRACE).unwrap();
    assert!(spans.iter().all(|s| s.span_context.trace_id() == trace), "{names:?}");

    // The request continues the caller's trace; the run is its child.
    let [request] = named(&spans, "request")[..] else { panic!("{names:?}") };
    assert_eq!(request.parent_span_id.to_string(), CALLER_SPAN);
    assert_eq!(request.span_kind, SpanKind::Server);
    let [run] = named(&spans, "invoke_agent")[..] else { panic!("{names:?}") };
    assert_eq!(run.parent_span_id, request.span_context.span_id());
    assert_eq!(run.span_kind, SpanKind::Internal);
    assert_eq!(text(run, "gen_ai.operation.name"), "invoke_agent");
    assert_eq!(text(run, "gen_ai.provider.name"), "faux");
    assert_eq!(text(run, "gen_ai.request.model"), "faux-1");
    assert_eq!(text(run, "gen_ai.conversation.id"), session_id);
    assert_eq!(text(run, "weft.status"), "completed");
    assert_eq!(text(run, "weft.mode"), "react");
    assert!(!text(run, "weft.run.id").is_empty());
    assert_eq!(int(run, "gen_ai.usage.input_tokens"), 280);
    assert_eq!(int(run, "gen_ai.usage.output_tokens"), 38);
    assert!(
        int(run, "weft.seq.first") >= 1 && int(run, "weft.seq.last") > int(run, "weft.seq.first")
    );
    assert!(attribute(run, "error.type").is_none());
    assert_eq!(run.status, Status::Unset);

    // Two model calls, in the run.
    let chats = named(&spans, "chat faux-1");
    assert_eq!(chats.len(), 2, "{names:?}");
    let reasons: Vec<&Value> =
        chats.iter().map(|c| attribute(c, "gen_ai.response.finish_reasons").unwrap()).collect();
    let list = |s: &str| Value::Array(Array::String(vec![s.to_string().into()]));
    assert_eq!(reasons, [&list("tool_call"), &list("stop")]);
    for chat in &chats {
        assert_eq!(chat.parent_span_id, run.span_context.span_id());
        assert_eq!(chat.span_kind, SpanKind::Client);
        assert_eq!(text(chat, "gen_ai.operation.name"), "chat");
        assert_eq!(text(chat, "gen_ai.response.model"), "faux-1");
        assert_eq!(text(chat, "gen_ai.conversation.id"), session_id);
        assert!(
            matches!(attribute(chat, "gen_ai.response.time_to_first_chunk"), Some(Value::F64(s)) if *s >= 0.0)
        );
        // No content unless asked for.
        assert!(attribute(chat, "gen_ai.input.messages").is_none());
        assert!(attribute(chat, "gen_ai.output.messages").is_none());
    }
    assert_eq!(
        (int(chats[0], "gen_ai.usage.input_tokens"), int(chats[0], "gen_ai.usage.output_tokens")),
        (120, 30)
    );

    // One span per tool call; the failed one's is an error.
    let [echo] = named(&spans, "execute_tool echo")[..] else { panic!("{names:?}") };
    let [failed_call] = named(&spans, "execute_tool fail")[..] else { panic!("{names:?}") };
    for (tool, id) in [(echo, "c1"), (failed_call, "c2")] {
        assert_eq!(tool.parent_span_id, run.span_context.span_id());
        assert_eq!(tool.span_kind, SpanKind::Internal);
        assert_eq!(text(tool, "gen_ai.operation.name"), "execute_tool");
        assert_eq!(text(tool, "gen_ai.tool.call.id"), id);
        assert_eq!(text(tool, "gen_ai.tool.type"), "function");
        assert!(attribute(tool, "gen_ai.tool.call.arguments").is_none());
    }
    assert!(attribute(echo, "error.type").is_none());
    assert_eq!(text(failed_call, "error.type"), "tool_error");
    assert!(matches!(failed_call.status, Status::Error { .. }), "{:?}", failed_call.status);

    // The metrics, from the same spans.
    let metric = |name: &str| {
        let (_, unit, points) = metrics.iter().find(|(n, _, _)| n == name).unwrap_or_else(|| {
            panic!("no {name} in {:?}", metrics.iter().map(|m| &m.0).collect::<Vec<_>>())
        });
        (unit.as_str(), points)
    };
    let (unit, usage) = metric("gen_ai.client.token.usage");
    assert_eq!(unit, "{token}");
    let tokens = |kind: &str| {
        let p = usage.iter().find(|p| p.attributes["gen_ai.token.type"] == kind).unwrap();
        assert_eq!(p.attributes["gen_ai.provider.name"], "faux");
        assert_eq!(p.attributes["gen_ai.operation.name"], "chat");
        (p.count, p.sum)
    };
    assert_eq!(tokens("input"), (2, 280.0));
    assert_eq!(tokens("output"), (2, 38.0));
    let (unit, durations) = metric("gen_ai.client.operation.duration");
    assert_eq!((unit, durations.iter().map(|p| p.count).sum::<u64>()), ("s", 2));
    let (_, first_chunks) = metric("gen_ai.client.operation.time_to_first_chunk");
    assert_eq!(first_chunks.iter().map(|p| p.count).sum::<u64>(), 2);
    let (unit, tools) = metric("gen_ai.execute_tool.duration");
    assert_eq!(unit, "s");
    let failed = tools.iter().find(|p| p.attributes["gen_ai.tool.name"] == "fail").unwrap();
    assert_eq!(failed.attributes.get("error.type").map(String::as_str), Some("tool_error"));
    let ok = tools.iter().find(|p| p.attributes["gen_ai.tool.name"] == "echo").unwrap();
    assert_eq!((ok.count, ok.attributes.get("error.type")), (1, None));
    let (_, runs) = metric("gen_ai.invoke_agent.duration");
    assert_eq!(runs.iter().map(|p| p.count).sum::<u64>(), 1);
}

#[tokio::test(flavor = "current_thread")]
async fn message_content_is_on_the_spans_only_when_asked_for() {
    let Exported { spans, .. } = run(true, true).await;
    let chats = named(&spans, "chat faux-1");
    let input: serde_json::Value =
        serde_json::from_str(&text(chats[0], "gen_ai.input.messages")).unwrap();
    assert_eq!(
        input,
        serde_json::json!([{"role": "user", "parts": [{"type": "text", "content": "Echo please"}]}])
    );
    let output: serde_json::Value =
        serde_json::from_str(&text(chats[0], "gen_ai.output.messages")).unwrap();
    assert_eq!(output[0]["finish_reason"], "tool_call");
    let parts = &output[0]["parts"];
    assert_eq!(parts[0], serde_json::json!({"type": "reasoning", "content": "Echo, then answer."}));
    assert_eq!(parts[1], serde_json::json!({"type": "text", "content": "Let me echo that."}));
    assert_eq!(
        parts[2],
        serde_json::json!({"type": "tool_call", "id": "c1", "name": "echo", "arguments": {"text": "hello"}})
    );
    // The second call sees the results.
    let input: serde_json::Value =
        serde_json::from_str(&text(chats[1], "gen_ai.input.messages")).unwrap();
    let roles: Vec<&str> =
        input.as_array().unwrap().iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
    assert_eq!(
        input[2]["parts"][0],
        serde_json::json!({"type": "tool_call_response", "id": "c1", "response": "hello"})
    );
    let [echo] = named(&spans, "execute_tool echo")[..] else { panic!() };
    assert_eq!(text(echo, "gen_ai.tool.call.arguments"), r#"{"text":"hello"}"#);
    assert_eq!(text(echo, "gen_ai.tool.call.result"), "hello");
}

/// Spans alone (metrics off, as `OTEL_METRICS_EXPORTER=none` makes it): still every span. (A
/// layer left out as `None` beside filtered layers once turned every span off.)
#[tokio::test(flavor = "current_thread")]
async fn spans_are_exported_with_metrics_off() {
    let Exported { spans, metrics, .. } = run(false, false).await;
    let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "chat faux-1",
            "chat faux-1",
            "execute_tool echo",
            "execute_tool fail",
            "invoke_agent",
            "request"
        ]
    );
    assert!(metrics.is_empty());
}
