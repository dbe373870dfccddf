//! The caller's trace continues into the runs it starts: over HTTP (`POST /api/agent/execute`
//! with a `traceparent`) and over a WebSocket (the upgrade request's `traceparent`), each run's
//! `invoke_agent` span is in the caller's trace, under the request's span. The spans go to the
//! OpenTelemetry SDK's in-memory exporter (`weft-cli`'s `otel` test sends them over OTLP).
#![allow(clippy::unwrap_used)]

mod common;

use std::time::{Duration, Instant};

use common::*;
use futures::{SinkExt, StreamExt};
use opentelemetry::trace::{SpanId, TraceId};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use serde_json::json;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tracing_subscriber::layer::SubscriberExt;
use weft_telemetry::Telemetry;

const HTTP_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const WS_TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CALLER: &str = "b7ad6b7169203331";

fn traceparent(trace: &str) -> String {
    format!("00-{trace}-{CALLER}-01")
}

/// The exported spans once every one of `names` has ended (a span ends when the last of its
/// handles goes: a request's once its connection is done with it).
async fn ended(exporter: &InMemorySpanExporter, names: &[&str]) -> Vec<SpanData> {
    let started = Instant::now();
    loop {
        let spans = exporter.get_finished_spans().unwrap();
        if names.iter().all(|name| spans.iter().any(|s| s.name == *name)) {
            return spans;
        }
        let seen: Vec<&str> = spans.iter().map(|s| s.name.as_ref()).collect();
        assert!(started.elapsed() < Duration::from_secs(10), "{seen:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The run of trace `trace`, and the span it is a child of.
fn run_in<'a>(spans: &'a [SpanData], trace: &str) -> (&'a SpanData, &'a SpanData) {
    let trace = TraceId::from_hex(trace).unwrap();
    let run = spans
        .iter()
        .find(|s| s.name == "invoke_agent" && s.span_context.trace_id() == trace)
        .unwrap_or_else(|| panic!("no run in trace {trace}"));
    let parent = spans
        .iter()
        .find(|s| s.span_context.span_id() == run.parent_span_id)
        .unwrap_or_else(|| panic!("the run's parent was not exported"));
    (run, parent)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_callers_trace_continues_into_its_runs_over_http_and_websocket() {
    let exporter = InMemorySpanExporter::default();
    let tracer = SdkTracerProvider::builder().with_simple_exporter(exporter.clone()).build();
    let telemetry = Telemetry::from_providers(Some(tracer), None, false);
    tracing::subscriber::set_global_default(tracing_subscriber::registry().with(telemetry.layer()))
        .unwrap();
    let server = start(weather_script()).await;

    // Over HTTP.
    let response = server
        .post("/api/agent/execute", None)
        .header("traceparent", traceparent(HTTP_TRACE))
        .json(&json!({"input": user("Weather?"), "context": {"tools": [remote_weather_tool()]}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body = response.text().await.unwrap();
    assert!(body.contains("awaiting_tool_execution"), "{body}");

    // Over a WebSocket whose upgrade request carries the trace.
    let url = server.url("/api/agent/ws").replace("http://", "ws://");
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert("traceparent", traceparent(WS_TRACE).parse().unwrap());
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await.unwrap();
    let execute = json!({"type": "execute", "input": user("Weather?"),
                         "context": {"tools": [remote_weather_tool()]}});
    socket.send(Message::text(execute.to_string())).await.unwrap();
    loop {
        let message = socket.next().await.unwrap().unwrap();
        let message: serde_json::Value = serde_json::from_str(message.to_text().unwrap()).unwrap();
        assert!(message.get("error").is_none(), "{message}");
        if message["type"] == "end" {
            break;
        }
    }

    socket.close(None).await.unwrap();
    drop(socket);
    let spans = ended(&exporter, &["POST /api/agent/execute", "GET /api/agent/ws"]).await;
    let caller = SpanId::from_hex(CALLER).unwrap();
    let (run, request) = run_in(&spans, HTTP_TRACE);
    assert_eq!(request.name, "POST /api/agent/execute");
    assert_eq!(request.parent_span_id, caller);
    assert!(run.attributes.iter().any(
        |kv| kv.key.as_str() == "weft.status" && kv.value.as_str() == "awaiting_tool_execution"
    ));
    let (_, upgrade) = run_in(&spans, WS_TRACE);
    assert_eq!(upgrade.name, "GET /api/agent/ws");
    assert_eq!(upgrade.parent_span_id, caller);
}
