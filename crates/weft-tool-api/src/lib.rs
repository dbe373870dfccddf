//! # weft-tool-api
//!
//! The tool contract: the [`Tool`] trait, helpers that make one from an async fn, and
//! [`ToolSource`]s that supply tools to an agent (a static set, an MCP server). The agent
//! (`weft-agent`, which re-exports all of it as `weft_agent::tool`), the tool collection
//! (`weft-tools`) and the client SDK (`weft-client`) share it.
//!
//! A tool's execution is a stream: zero or more [`ToolEvent::Delta`]s of output as it is
//! produced, then exactly one [`ToolEvent::Complete`] (the whole output as content blocks, with
//! optional details) or [`ToolEvent::Error`] (a typed [`ToolError`]). The agent turns a stream
//! that ends without either, a panic, or a timeout into an error result the model sees, and cuts
//! output longer than the tool's [`Tool::max_output`] with a note saying so.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;
pub use weft_cancel::CancellationToken;
use weft_core::{ImageContent, ToolContent, ToolSpec, UserContent};

/// How much output (deltas, and the final text) a tool may produce when it sets no limit of its
/// own: 1 MiB.
pub const DEFAULT_MAX_OUTPUT: usize = 1024 * 1024;

/// How many output deltas a [`ToolOutputSink`] holds before its sender waits (backpressure).
pub const SINK_CAPACITY: usize = 64;

/// One event of a tool's execution.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolEvent {
    /// More output, shown as it arrives.
    Delta(String),
    /// Done: the whole output.
    Complete(ToolOutput),
    /// Failed: the model sees the error's text as an error result.
    Error(ToolError),
}

/// Why a tool call failed; its text is the error result the model sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the tool (beyond what its schema checks).
    #[error("{0}")]
    InvalidArguments(String),
    /// The tool ran and failed.
    #[error("{0}")]
    Failed(String),
    /// The call ran past its timeout.
    #[error("The tool timed out after {}", human_duration(*.0))]
    TimedOut(Duration),
    /// The call was cancelled (the run was aborted).
    #[error("Tool call aborted: {0}")]
    Cancelled(String),
    /// A guard of the tool refused the call (a path outside its root, a private address).
    #[error("Refused: {0}")]
    Denied(String),
}

impl ToolError {
    /// A failure with this text.
    pub fn failed(message: impl Into<String>) -> Self {
        Self::Failed(message.into())
    }

    /// A refusal with this reason.
    pub fn denied(reason: impl Into<String>) -> Self {
        Self::Denied(reason.into())
    }

    /// Invalid arguments, with what is wrong.
    pub fn invalid(problem: impl Into<String>) -> Self {
        Self::InvalidArguments(problem.into())
    }

    /// The error a tool fn's `Err` value stands for: a [`ToolError`] as it is, anything else
    /// as [`ToolError::Failed`] with its text.
    pub fn from_display<E: std::fmt::Display + 'static>(error: E) -> Self {
        match (&error as &dyn Any).downcast_ref::<ToolError>() {
            Some(typed) => typed.clone(),
            None => Self::Failed(error.to_string()),
        }
    }
}

impl From<String> for ToolError {
    fn from(message: String) -> Self {
        Self::Failed(message)
    }
}

impl From<&str> for ToolError {
    fn from(message: &str) -> Self {
        Self::Failed(message.to_string())
    }
}

/// A tool's whole output: content blocks (text, images, structured JSON) and details.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    /// What the model sees, in order.
    pub content: Vec<ToolContent>,
    /// Structured details for user interfaces (not sent to the model).
    pub details: Option<Value>,
}

impl ToolOutput {
    /// Text output with no details.
    pub fn text(output: impl Into<String>) -> Self {
        Self { content: vec![ToolContent::text(output)], details: None }
    }

    /// Output of these blocks.
    pub fn blocks(content: Vec<ToolContent>) -> Self {
        Self { content, details: None }
    }

    /// The same output with details.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// The output as one text (blocks joined by newlines; see [`ToolContent::to_text`]): what
    /// `tool_execution_end` and the step trace carry.
    pub fn text_output(&self) -> String {
        match self.content.as_slice() {
            [ToolContent::Text { text }] => text.clone(),
            blocks => blocks.iter().map(ToolContent::to_text).collect::<Vec<_>>().join("\n"),
        }
    }

    /// The content of the tool result the model sees: text and JSON as text, images as images.
    pub fn result_content(&self) -> Vec<UserContent> {
        let mut out = Vec::with_capacity(self.content.len().max(1));
        for block in &self.content {
            out.push(match block {
                ToolContent::Image { mime_type, data } => UserContent::Image(ImageContent {
                    data: data.clone(),
                    mime_type: mime_type.clone(),
                }),
                other => UserContent::text(other.to_text()),
            });
        }
        if out.is_empty() {
            out.push(UserContent::text(""));
        }
        out
    }

    /// The output cut to `limit` bytes of text (at a character boundary), with a note saying
    /// how much was left out; images count by the length of their data and are dropped whole.
    pub fn truncated(mut self, limit: usize) -> Self {
        let mut used = 0usize;
        let mut cut = false;
        let mut kept = Vec::with_capacity(self.content.len());
        for block in std::mem::take(&mut self.content) {
            let size = match &block {
                ToolContent::Text { text } => text.len(),
                ToolContent::Image { data, .. } => data.len(),
                ToolContent::Json { value } => value.to_string().len(),
            };
            if used + size <= limit {
                used += size;
                kept.push(block);
                continue;
            }
            cut = true;
            let room = limit - used;
            match block {
                ToolContent::Text { text } => kept
                    .push(ToolContent::text(text[..floor_char_boundary(&text, room)].to_string())),
                ToolContent::Json { value } => {
                    let text = value.to_string();
                    kept.push(ToolContent::text(
                        text[..floor_char_boundary(&text, room)].to_string(),
                    ))
                }
                ToolContent::Image { .. } => {}
            }
            used = limit;
        }
        if cut {
            kept.push(ToolContent::text(truncation_note(limit)));
        }
        self.content = kept;
        self
    }

    /// Whether the output is longer than `limit` bytes.
    pub fn exceeds(&self, limit: usize) -> bool {
        let mut used = 0usize;
        for block in &self.content {
            used += match block {
                ToolContent::Text { text } => text.len(),
                ToolContent::Image { data, .. } => data.len(),
                ToolContent::Json { value } => value.to_string().len(),
            };
        }
        used > limit
    }
}

/// The note that ends output cut at `limit` bytes.
pub fn truncation_note(limit: usize) -> String {
    format!("\n[output truncated: the tool's output is limited to {limit} bytes]")
}

/// The largest index `<= at` that is a character boundary of `text`.
pub fn floor_char_boundary(text: &str, at: usize) -> usize {
    let mut at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

impl From<String> for ToolOutput {
    fn from(output: String) -> Self {
        Self::text(output)
    }
}

impl From<&str> for ToolOutput {
    fn from(output: &str) -> Self {
        Self::text(output)
    }
}

/// What a tool's execution knows of its call: its ids (a tool may act for the session's owner,
/// e.g. to pick credentials) and its cancellation.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The call's id.
    pub call_id: String,
    /// The session the call belongs to (empty outside a session, e.g. a client-side tool).
    pub session_id: String,
    /// The run the call belongs to (empty outside a run).
    pub run_id: String,
    /// The session's owner, when it has one.
    pub owner_id: Option<String>,
    /// Cancelled when the run is aborted or the call times out; long-running tools should stop
    /// when it fires (they are dropped anyway).
    pub cancel: CancellationToken,
}

impl ToolContext {
    /// A context for call `call_id`, outside any session.
    pub fn new(call_id: impl Into<String>, cancel: CancellationToken) -> Self {
        Self {
            call_id: call_id.into(),
            session_id: String::new(),
            run_id: String::new(),
            owner_id: None,
            cancel,
        }
    }
}

/// A tool's execution.
pub type ToolStream = BoxStream<'static, ToolEvent>;

/// A tool that runs in the agent's process.
pub trait Tool: Send + Sync + 'static {
    /// What the model is told about it.
    fn spec(&self) -> &ToolSpec;

    /// Runs one call. `args` have been validated against the spec's parameter schema.
    fn execute(&self, args: Value, ctx: ToolContext) -> ToolStream;

    /// How long a call may run; `None` uses the agent's default (5 minutes).
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Whether a call may safely run again when the process running it died before it
    /// finished (it has no effect that must not happen twice: a read, a lookup). Such calls
    /// are run again when the session is recovered; others are answered with an error saying
    /// the run was interrupted.
    fn replay_safe(&self) -> bool {
        false
    }

    /// How many bytes of output (streamed deltas, and the final output) a call may produce;
    /// more is cut with a note. `None` is [`DEFAULT_MAX_OUTPUT`].
    fn max_output(&self) -> Option<usize> {
        None
    }
}

/// A supply of tools for an agent: a static set, an MCP server's tools, a session's specs.
///
/// Its tools' names are final (a source that namespaces them, such as an MCP server's
/// `server__tool`, does so itself). The agent builds its catalog from every source and refuses
/// two tools of the same name; a source whose set changes (an MCP server's
/// `notifications/tools/list_changed`) bumps its [`generation`](ToolSource::generation), and the
/// next model call sees the new set.
pub trait ToolSource: Send + Sync + 'static {
    /// The source's name, for listings and error messages (`agent`, `mcp:github`).
    fn name(&self) -> &str;

    /// The tools it supplies now.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;

    /// A number that changes whenever the set [`tools`](ToolSource::tools) returns changes.
    fn generation(&self) -> u64 {
        0
    }
}

/// A fixed set of tools as a [`ToolSource`].
pub struct StaticTools {
    name: String,
    tools: Vec<Arc<dyn Tool>>,
}

impl StaticTools {
    /// A source named `name` supplying `tools`.
    pub fn new(name: impl Into<String>, tools: Vec<Arc<dyn Tool>>) -> Self {
        Self { name: name.into(), tools }
    }
}

impl ToolSource for StaticTools {
    fn name(&self) -> &str {
        &self.name
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.tools.clone()
    }
}

/// Sends a streaming tool's output as it is produced, and tells the tool about its call.
///
/// The channel is bounded ([`SINK_CAPACITY`] deltas): a tool that produces output faster than
/// the run can pass it on waits in [`send`](ToolOutputSink::send).
#[derive(Debug, Clone)]
pub struct ToolOutputSink {
    tx: mpsc::Sender<ToolEvent>,
    ctx: ToolContext,
}

impl ToolOutputSink {
    /// A sink for the call `ctx` describes, and the receiving end of its deltas.
    pub fn channel(ctx: ToolContext) -> (Self, mpsc::Receiver<ToolEvent>) {
        let (tx, rx) = mpsc::channel(SINK_CAPACITY);
        (Self { tx, ctx }, rx)
    }

    /// The call's id.
    pub fn call_id(&self) -> &str {
        &self.ctx.call_id
    }

    /// The call's context (session, run and owner ids).
    pub fn context(&self) -> &ToolContext {
        &self.ctx
    }

    /// Fires when the call is aborted or times out; long-running work should stop then.
    pub fn cancelled(&self) -> &CancellationToken {
        &self.ctx.cancel
    }

    /// Sends more output, waiting while the channel is full. Returns `false` once nobody
    /// listens any more (the call was aborted).
    pub async fn send(&self, delta: impl Into<String>) -> bool {
        self.tx.send(ToolEvent::Delta(delta.into())).await.is_ok()
    }
}

/// The future a [`FnTool`] runs.
pub type ToolFuture = futures::future::BoxFuture<'static, Result<ToolOutput, ToolError>>;

type RunFn<A> = Arc<dyn Fn(A, ToolOutputSink) -> ToolFuture + Send + Sync>;

/// A tool made from an async fn; see [`tool_fn`] and [`streaming_tool_fn`].
pub struct FnTool<A> {
    spec: ToolSpec,
    timeout: Option<Duration>,
    replay_safe: bool,
    max_output: Option<usize>,
    run: RunFn<A>,
}

impl<A> FnTool<A> {
    /// The same tool, requiring approval for every call.
    pub fn with_approval(mut self) -> Self {
        self.spec.requires_approval = true;
        self
    }

    /// The same tool, marked safe to run again after a crash (see [`Tool::replay_safe`]).
    pub fn replay_safe(mut self) -> Self {
        self.replay_safe = true;
        self
    }

    /// The same tool with its own timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The same tool with its own output limit (see [`Tool::max_output`]).
    pub fn with_max_output(mut self, bytes: usize) -> Self {
        self.max_output = Some(bytes);
        self
    }

    /// The same tool with a label for user interfaces.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.spec.label = label.into();
        self
    }
}

/// The JSON Schema of `A`, as a tool's `parameters`.
pub fn parameters_schema<A: JsonSchema>() -> Value {
    let mut schema = serde_json::to_value(schemars::schema_for!(A)).unwrap_or(Value::Null);
    if let Some(map) = schema.as_object_mut() {
        // Models do not need the meta-schema or the Rust type's name.
        map.remove("$schema");
        map.remove("title");
    }
    schema
}

/// A non-streaming tool from an async fn of typed arguments (use [`streaming_tool_fn`] for a
/// tool that needs its call id or cancellation).
///
/// The parameter schema is derived from `A` (schemars); arguments are validated against it and
/// deserialized before `run` is called. `Err` becomes an error result the model sees (a
/// [`ToolError`] keeps its kind; any other error is [`ToolError::Failed`]).
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use weft_tool_api::tool_fn;
///
/// #[derive(Deserialize, JsonSchema)]
/// struct Add { a: i64, b: i64 }
///
/// let add = tool_fn("add", "Adds two integers", |args: Add| async move {
///     Ok::<_, String>(format!("{}", args.a + args.b))
/// });
/// # let _ = add;
/// ```
pub fn tool_fn<A, F, Fut, O, E>(
    name: impl Into<String>,
    description: impl Into<String>,
    run: F,
) -> FnTool<A>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
    O: Into<ToolOutput>,
    E: std::fmt::Display + 'static,
{
    streaming_tool_fn(name, description, move |args: A, _sink| run(args))
}

/// A streaming tool from an async fn of typed arguments and a [`ToolOutputSink`] to send output
/// through as it is produced; the fn's `Ok` value is the whole output.
pub fn streaming_tool_fn<A, F, Fut, O, E>(
    name: impl Into<String>,
    description: impl Into<String>,
    run: F,
) -> FnTool<A>
where
    A: DeserializeOwned + JsonSchema + Send + 'static,
    F: Fn(A, ToolOutputSink) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<O, E>> + Send + 'static,
    O: Into<ToolOutput>,
    E: std::fmt::Display + 'static,
{
    let run: RunFn<A> = Arc::new(move |args, sink| {
        let fut = run(args, sink);
        Box::pin(async move { fut.await.map(Into::into).map_err(ToolError::from_display) })
    });
    FnTool {
        spec: ToolSpec::new(name, description, parameters_schema::<A>()),
        timeout: None,
        replay_safe: false,
        max_output: None,
        run,
    }
}

/// A running [`FnTool`]: its fn, and the channel its output deltas arrive on.
struct FnRun {
    fut: Option<ToolFuture>,
    rx: mpsc::Receiver<ToolEvent>,
    last: Option<ToolEvent>,
}

impl<A: DeserializeOwned + Send + 'static> Tool for FnTool<A> {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }

    fn replay_safe(&self) -> bool {
        self.replay_safe
    }

    fn max_output(&self) -> Option<usize> {
        self.max_output
    }

    fn execute(&self, args: Value, ctx: ToolContext) -> ToolStream {
        let args: A = match serde_json::from_value(args) {
            Ok(args) => args,
            Err(e) => {
                let message = format!("invalid arguments for {}: {e}", self.spec.name);
                let error = ToolEvent::Error(ToolError::InvalidArguments(message));
                return futures::stream::iter([error]).boxed();
            }
        };
        let (sink, rx) = ToolOutputSink::channel(ctx);
        let fut = (self.run)(args, sink);
        let run = FnRun { fut: Some(fut), rx, last: None };
        // Deltas are passed on while the fn runs; once it returns, the deltas it sent before
        // returning are drained, then its value ends the stream.
        futures::stream::unfold(run, |mut run| async move {
            loop {
                if let Some(fut) = run.fut.as_mut() {
                    tokio::select! {
                        biased;
                        Some(event) = run.rx.recv() => return Some((event, run)),
                        result = fut => {
                            run.fut = None;
                            run.last = Some(match result {
                                Ok(output) => ToolEvent::Complete(output),
                                Err(message) => ToolEvent::Error(message),
                            });
                        }
                    }
                } else {
                    if let Ok(event) = run.rx.try_recv() {
                        return Some((event, run));
                    }
                    let last = run.last.take()?;
                    return Some((last, run));
                }
            }
        })
        .boxed()
    }
}

/// `250ms`, `1.5s`, `300s`.
pub(crate) fn human_duration(d: Duration) -> String {
    if d.as_millis() < 1000 {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_cuts_at_a_char_boundary_and_says_so() {
        let out = ToolOutput::text("héllo world").truncated(2);
        assert_eq!(out.content[0], ToolContent::text("h"));
        assert_eq!(out.content[1], ToolContent::text(truncation_note(2)));
        let whole = ToolOutput::text("short").truncated(5);
        assert_eq!(whole.content, vec![ToolContent::text("short")]);
    }

    #[test]
    fn a_typed_error_keeps_its_kind_and_others_fail() {
        assert_eq!(ToolError::from_display(ToolError::denied("no")), ToolError::denied("no"));
        assert_eq!(ToolError::from_display("boom".to_string()), ToolError::failed("boom"));
        assert_eq!(
            ToolError::TimedOut(Duration::from_millis(250)).to_string(),
            "The tool timed out after 250ms"
        );
    }

    #[test]
    fn images_stay_images_in_the_result() {
        let out = ToolOutput::blocks(vec![
            ToolContent::text("chart:"),
            ToolContent::Image { mime_type: "image/png".into(), data: "AAAA".into() },
        ]);
        assert_eq!(out.text_output(), "chart:\n[image: image/png]");
        assert!(matches!(out.result_content()[1], UserContent::Image(_)));
    }
}
