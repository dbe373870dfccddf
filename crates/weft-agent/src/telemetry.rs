//! Traces of runs in the OpenTelemetry GenAI semantic conventions, as `tracing` spans: one
//! `invoke_agent` span per run, a `chat` span per model call in it, an `execute_tool` span per
//! local tool call. Each carries the conventions' `gen_ai.*` attributes and, for what they lack,
//! `weft.*` ones (the run's id, mode, node run, sequence range, cost).
//!
//! The spans are plain `tracing` spans of this module's target ([`SPAN_TARGET`], level INFO):
//! with no subscriber interested in them (the default: logs show warnings), they cost nothing;
//! `weft-telemetry`'s layer exports them over OTLP and derives the GenAI metrics from them. A
//! run's span is a child of the span current where the run was started
//! ([`Agent::execute`](crate::Agent::execute)), so a caller's trace (an HTTP request's
//! `traceparent`) continues into it.
//!
//! Message content (`gen_ai.input.messages`, `gen_ai.output.messages`,
//! `gen_ai.system_instructions`, `gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) is
//! recorded only when [`AgentConfig::capture_content`](crate::AgentConfig::capture_content) is
//! on. Nothing here runs per delta except one branch for the first chunk of a model call.

use serde_json::{Value, json};
use std::sync::OnceLock;
use std::time::Instant;

use tracing::Span;
use tracing::field::Empty;
use weft_core::{
    AssistantContent, AssistantMessage, Cost, Message, SessionStatus, StopReason, ToolCall, Usage,
    UserContent,
};
use weft_llm::ModelRequest;

use crate::outcome::{FailureKind, RunOutcome};

/// The target of every GenAI span: what a subscriber filters on to export them.
pub const SPAN_TARGET: &str = module_path!();

/// Records a list of strings as one attribute of a span (`tracing` fields are scalars).
pub type ListRecorder = fn(&Span, &'static str, &[&str]);

static LIST_RECORDER: OnceLock<ListRecorder> = OnceLock::new();

/// Installs what records the spans' list attributes (`gen_ai.response.finish_reasons`): an
/// exporter's, which can make them arrays. Without one they are not recorded. The first
/// installed stays.
pub fn record_lists_with(recorder: ListRecorder) {
    let _ = LIST_RECORDER.set(recorder);
}

/// The `gen_ai.provider.name` of a Weft provider: the conventions' well-known value for the
/// services Weft speaks to, the provider's own name otherwise.
pub fn provider_name(weft_name: &str) -> &str {
    match weft_name {
        "openai" | "openai-responses" => "openai",
        "anthropic" => "anthropic",
        "gemini" => "gcp.gemini",
        other => other,
    }
}

/// What a run's span is made of.
pub(crate) struct RunInfo<'a> {
    pub(crate) session_id: &'a str,
    pub(crate) run_id: &'a str,
    pub(crate) mode: &'a str,
    pub(crate) provider: &'a str,
    pub(crate) model: &'a str,
    /// The run whose process died, that this run recovers.
    pub(crate) recovers: Option<&'a str>,
}

/// The `invoke_agent` span of a run, a child of the current span.
pub(crate) fn invoke_agent(run: &RunInfo<'_>) -> Span {
    tracing::info_span!(
        "invoke_agent",
        otel.name = "invoke_agent",
        otel.kind = "internal",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = "invoke_agent",
        gen_ai.provider.name = provider_name(run.provider),
        gen_ai.request.model = non_empty(run.model),
        gen_ai.conversation.id = run.session_id,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        error.type = Empty,
        weft.run.id = run.run_id,
        weft.mode = run.mode,
        weft.recovers = run.recovers,
        weft.status = Empty,
        weft.seq.first = Empty,
        weft.seq.last = Empty,
        weft.cost.usd = Empty,
        weft.model_calls = Empty,
    )
}

/// Records how run `span` ended: its status, usage, cost, the sequence numbers of its events,
/// and `error.type` (the status, or `store` when its end could not be stored) when it failed.
pub(crate) fn run_ended(
    span: &Span,
    status: SessionStatus,
    failure: Option<&'static str>,
    (usage, cost): (&Usage, &Cost),
    seqs: Option<(u64, u64)>,
) {
    if span.is_disabled() {
        return;
    }
    span.record("weft.status", status.as_str());
    span.record("gen_ai.usage.input_tokens", count(usage.total_input()));
    span.record("gen_ai.usage.output_tokens", count(usage.output));
    span.record("weft.cost.usd", cost.total);
    if let Some((first, last)) = seqs {
        span.record("weft.seq.first", count(first));
        span.record("weft.seq.last", count(last));
    }
    if let Some(kind) = failure {
        span.record("error.type", kind);
        span.record("otel.status_code", "ERROR");
        span.record("otel.status_description", status.as_str());
    }
}

/// The `error.type` of a run that ended with `outcome`: `None` when it did not fail (it
/// completed, suspended or was aborted).
pub(crate) fn error_type(outcome: &RunOutcome) -> Option<&'static str> {
    match outcome {
        RunOutcome::Completed | RunOutcome::Suspended { .. } | RunOutcome::Aborted => None,
        RunOutcome::MaxTurns { .. } => Some("max_turns"),
        RunOutcome::EndNotDurable { .. } => Some("end_not_durable"),
        RunOutcome::Failed { kind, .. } => Some(match kind {
            FailureKind::Model => "model",
            FailureKind::Mode => "mode",
            FailureKind::Store => "store",
            FailureKind::Panic => "panic",
            FailureKind::Lost => "lost",
            FailureKind::Unknown => "_OTHER",
        }),
    }
}

/// What a model call's span is made of.
pub(crate) struct CallInfo<'a> {
    /// The run's span: the call's parent.
    pub(crate) parent: &'a Span,
    pub(crate) session_id: &'a str,
    pub(crate) provider: &'a str,
    /// Its node run.
    pub(crate) node_id: &'a str,
    /// Its step, when the call is one of the conversation's.
    pub(crate) step_index: Option<u32>,
    pub(crate) capture_content: bool,
}

/// A model call's `chat` span while the call streams: opened before the request is sent, told
/// of the first chunk, ended with the answer.
pub(crate) struct Chat {
    span: Span,
    opened: Instant,
    first_seen: bool,
    capture_content: bool,
}

impl Chat {
    /// The span of model call `request`, a child of the run's.
    pub(crate) fn open(call: &CallInfo<'_>, request: &ModelRequest) -> Self {
        let span = tracing::info_span!(
            parent: call.parent,
            "chat",
            otel.name = match non_empty(&request.model) {
                Some(model) => format!("chat {model}"),
                None => "chat".to_string(),
            },
            otel.kind = "client",
            otel.status_code = Empty,
            otel.status_description = Empty,
            gen_ai.operation.name = "chat",
            gen_ai.provider.name = provider_name(call.provider),
            gen_ai.request.model = non_empty(&request.model),
            gen_ai.request.max_tokens = request.max_tokens.map(i64::from),
            gen_ai.request.temperature = request.temperature,
            gen_ai.conversation.id = call.session_id,
            gen_ai.response.model = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
            gen_ai.usage.cache_creation.input_tokens = Empty,
            gen_ai.input.messages = Empty,
            gen_ai.output.messages = Empty,
            gen_ai.system_instructions = Empty,
            error.type = Empty,
            weft.node.run = call.node_id,
            weft.step.index = call.step_index.map(i64::from),
            weft.cost.usd = Empty,
            gen_ai.response.time_to_first_chunk = Empty,
        );
        if call.capture_content && !span.is_disabled() {
            let input: Vec<Value> = request.messages.iter().map(input_message).collect();
            span.record("gen_ai.input.messages", Value::Array(input).to_string());
            if let Some(system) = &request.system_prompt {
                let parts = json!([{"type": "text", "content": &**system}]);
                span.record("gen_ai.system_instructions", parts.to_string());
            }
        }
        Self {
            span,
            opened: Instant::now(),
            first_seen: false,
            capture_content: call.capture_content,
        }
    }

    /// A chunk of the answer arrived: the first one's time is recorded (one branch after it).
    #[inline]
    pub(crate) fn chunk(&mut self) {
        if !self.first_seen {
            self.first_seen = true;
            self.span
                .record("gen_ai.response.time_to_first_chunk", self.opened.elapsed().as_secs_f64());
        }
    }

    /// The call answered `message`: the span records it and ends.
    pub(crate) fn end(self, message: &AssistantMessage) {
        let span = &self.span;
        if span.is_disabled() {
            return;
        }
        span.record("gen_ai.response.model", &*message.model);
        let reason = finish_reason(message.stop_reason);
        if let Some(record) = LIST_RECORDER.get() {
            record(span, "gen_ai.response.finish_reasons", &[reason]);
        }
        let usage = &message.usage;
        span.record("gen_ai.usage.input_tokens", count(usage.total_input()));
        span.record("gen_ai.usage.output_tokens", count(usage.output));
        span.record("gen_ai.usage.cache_read.input_tokens", count(usage.cache_read));
        span.record("gen_ai.usage.cache_creation.input_tokens", count(usage.cache_write));
        if let Some(cost) = &message.cost {
            span.record("weft.cost.usd", cost.total);
        }
        if message.stop_reason == StopReason::Error {
            span.record("error.type", "model");
            span.record("otel.status_code", "ERROR");
            span.record("otel.status_description", message.failure_text());
        }
        if self.capture_content {
            let output = json!([{
                "role": "assistant",
                "parts": assistant_parts(message),
                "finish_reason": reason,
            }]);
            span.record("gen_ai.output.messages", output.to_string());
        }
    }
}

/// The `execute_tool` span of local tool call `call`, a child of the run's span.
pub(crate) fn execute_tool(
    parent: &Span,
    session_id: &str,
    call: &ToolCall,
    capture_content: bool,
) -> Span {
    let span = tracing::info_span!(
        parent: parent,
        "execute_tool",
        otel.name = format_args!("execute_tool {}", call.name).to_string(),
        otel.kind = "internal",
        otel.status_code = Empty,
        otel.status_description = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = &*call.name,
        gen_ai.tool.call.id = &*call.id,
        gen_ai.tool.type = "function",
        gen_ai.conversation.id = session_id,
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        error.type = Empty,
    );
    if capture_content && !span.is_disabled() {
        span.record("gen_ai.tool.call.arguments", call.arguments.to_string());
    }
    span
}

/// Records how tool call `span` ended: its output (when content is captured) and, when it
/// failed, `error.type` (`tool_error`).
pub(crate) fn tool_ended(span: &Span, output: &str, is_error: bool, capture_content: bool) {
    if span.is_disabled() {
        return;
    }
    if capture_content {
        span.record("gen_ai.tool.call.result", output);
    }
    if is_error {
        span.record("error.type", "tool_error");
        span.record("otel.status_code", "ERROR");
    }
}

/// A count as an attribute: OpenTelemetry's integers are signed (`tracing`'s unsigned values
/// would reach it as text).
fn count(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// `text`, unless it is empty (an agent with no default model: the provider picks).
fn non_empty(text: &str) -> Option<&str> {
    (!text.is_empty()).then_some(text)
}

/// The conventions' finish reason for a stop reason.
fn finish_reason(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Stop => "stop",
        StopReason::Length => "length",
        StopReason::ToolUse => "tool_call",
        StopReason::Error => "error",
        StopReason::Aborted => "aborted",
    }
}

/// A message of the conversation as the conventions' input message (`role`, `parts`).
fn input_message(message: &Message) -> Value {
    match message {
        Message::User(user) => {
            json!({"role": "user", "parts": user_parts(&user.content)})
        }
        Message::Assistant(assistant) => {
            json!({"role": "assistant", "parts": assistant_parts(assistant)})
        }
        Message::ToolResult(result) => {
            json!({"role": "tool", "parts": [{
                "type": "tool_call_response",
                "id": result.tool_call_id,
                "response": result.text(),
            }]})
        }
    }
}

/// An assistant message's blocks as the conventions' parts.
fn assistant_parts(message: &AssistantMessage) -> Vec<Value> {
    message
        .content
        .iter()
        .map(|block| match block {
            AssistantContent::Text(t) => json!({"type": "text", "content": t.text}),
            AssistantContent::Thinking(t) => json!({"type": "reasoning", "content": t.thinking}),
            AssistantContent::ToolCall(call) => json!({
                "type": "tool_call",
                "id": call.id,
                "name": call.name,
                "arguments": call.arguments,
            }),
        })
        .collect()
}

/// A user message's blocks as the conventions' parts (an image by its media type only).
fn user_parts(content: &[UserContent]) -> Vec<Value> {
    content
        .iter()
        .map(|c| match c {
            UserContent::Text(t) => json!({"type": "text", "content": t.text}),
            UserContent::Image(image) => {
                json!({"type": "blob", "modality": "image", "mime_type": image.mime_type})
            }
        })
        .collect()
}
