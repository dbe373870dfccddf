//! Local tools: the [`Tool`] trait and helpers that make one from an async fn.
//!
//! A tool's execution is a stream: zero or more [`ToolEvent::Delta`]s of output as it is
//! produced, then exactly one [`ToolEvent::Complete`] (the whole output, with optional details)
//! or [`ToolEvent::Error`]. The agent turns a stream that ends without either, a panic, or a
//! timeout into an error result the model sees.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use futures::stream::BoxStream;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::mpsc;
use weft_core::ToolSpec;
use weft_llm::CancellationToken;

/// One event of a tool's execution.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolEvent {
    /// More output, shown as it arrives.
    Delta(String),
    /// Done: the whole output.
    Complete(ToolOutput),
    /// Failed: the model sees this text as an error result.
    Error(String),
}

/// A tool's whole output.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ToolOutput {
    /// The text the model sees.
    pub output: String,
    /// Structured details for user interfaces (not sent to the model).
    pub details: Option<Value>,
}

impl ToolOutput {
    /// Output with no details.
    pub fn text(output: impl Into<String>) -> Self {
        Self { output: output.into(), details: None }
    }

    /// The same output with details.
    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }
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

/// What a tool's execution knows of its call.
#[derive(Debug, Clone)]
pub struct ToolContext {
    /// The call's id.
    pub call_id: String,
    /// Cancelled when the run is aborted or the call times out; long-running tools should stop
    /// when it fires (they are dropped anyway).
    pub cancel: CancellationToken,
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
}

/// Sends a streaming tool's output as it is produced, and tells the tool about its call.
#[derive(Debug, Clone)]
pub struct ToolOutputSink {
    tx: mpsc::UnboundedSender<ToolEvent>,
    ctx: ToolContext,
}

impl ToolOutputSink {
    /// The call's id.
    pub fn call_id(&self) -> &str {
        &self.ctx.call_id
    }

    /// Fires when the call is aborted or times out; long-running work should stop then.
    pub fn cancelled(&self) -> &CancellationToken {
        &self.ctx.cancel
    }

    /// Sends more output. Returns `false` once nobody listens any more (the call was aborted).
    pub fn send(&self, delta: impl Into<String>) -> bool {
        self.tx.send(ToolEvent::Delta(delta.into())).is_ok()
    }
}

/// The future a [`FnTool`] runs.
pub type ToolFuture = futures::future::BoxFuture<'static, Result<ToolOutput, String>>;

type RunFn<A> = Arc<dyn Fn(A, ToolOutputSink) -> ToolFuture + Send + Sync>;

/// A tool made from an async fn; see [`tool_fn`] and [`streaming_tool_fn`].
pub struct FnTool<A> {
    spec: ToolSpec,
    timeout: Option<Duration>,
    replay_safe: bool,
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
/// deserialized before `run` is called. `Err` becomes an error result the model sees.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use weft_agent::tool::tool_fn;
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
    E: std::fmt::Display,
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
    E: std::fmt::Display,
{
    let run: RunFn<A> = Arc::new(move |args, sink| {
        let fut = run(args, sink);
        Box::pin(async move { fut.await.map(Into::into).map_err(|e| e.to_string()) })
    });
    FnTool {
        spec: ToolSpec::new(name, description, parameters_schema::<A>()),
        timeout: None,
        replay_safe: false,
        run,
    }
}

/// A running [`FnTool`]: its fn, and the channel its output deltas arrive on.
struct FnRun {
    fut: Option<ToolFuture>,
    rx: mpsc::UnboundedReceiver<ToolEvent>,
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

    fn execute(&self, args: Value, ctx: ToolContext) -> ToolStream {
        let args: A = match serde_json::from_value(args) {
            Ok(args) => args,
            Err(e) => {
                let message = format!("invalid arguments for {}: {e}", self.spec.name);
                return futures::stream::iter([ToolEvent::Error(message)]).boxed();
            }
        };
        let (tx, rx) = mpsc::unbounded_channel();
        let fut = (self.run)(args, ToolOutputSink { tx, ctx });
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
