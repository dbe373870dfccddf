//! Tool calls run: a batch of a turn's calls together ([`run_batch`]), each to its terminal event
//! (output cut at the tool's limit, a panic or a timeout made an error), and its end reported:
//! what the run and a graph node's loop share.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use tokio::time::Instant;

use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use weft_core::{
    AgentEvent, ToolCall, ToolExecutionResult, ToolResultMessage, UserContent, now_ms,
};
use weft_llm::CancellationToken;

use tracing::{Instrument, Span};

use crate::content::EventSink;
use crate::context::AgentInner;
use crate::telemetry;

use crate::tool::{
    DEFAULT_MAX_OUTPUT, ToolContext, ToolError, ToolEvent, ToolOutput, floor_char_boundary,
    truncation_note,
};
use weft_loop::ToolOutcome;

/// A finished call's `tool_execution_end` event, and its result and trace record.
pub(crate) fn finish_call(
    call: &ToolCall,
    result: Result<ToolOutput, ToolError>,
    (started_at, clock): (u64, Instant),
) -> (AgentEvent, ToolOutcome) {
    let (output, content, details, is_error) = match result {
        Ok(out) => (out.text_output(), out.result_content(), out.details, false),
        Err(error) => {
            let text = error.to_string();
            (text.clone(), vec![UserContent::text(text)], None, true)
        }
    };
    let end = AgentEvent::ToolExecutionEnd {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        output: output.clone(),
        details: details.clone().map(Box::new),
        is_error,
    };
    let result = ToolResultMessage {
        tool_call_id: call.id.clone(),
        tool_name: call.name.clone(),
        content,
        details: details.clone(),
        is_error,
        timestamp: now_ms(),
    };
    let execution = ToolExecutionResult {
        call: call.clone(),
        error: is_error.then(|| output.clone()),
        output,
        details,
        started_at,
        latency_ms: u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX),
    };
    (end, ToolOutcome { result, execution })
}

/// Runs one tool call to its terminal event, whatever happens to it; output past the tool's
/// limit is cut with a note (the deltas once, the final output again).
pub(crate) async fn run_one(
    i: usize,
    tool: Arc<dyn crate::tool::Tool>,
    args: serde_json::Value,
    ctx: ToolContext,
    timeout: std::time::Duration,
    tx: mpsc::Sender<(usize, ToolEvent)>,
) {
    let cancel = ctx.cancel.clone();
    let limit = tool.max_output().unwrap_or(DEFAULT_MAX_OUTPUT);
    let forward = {
        let tx = tx.clone();
        async move {
            let mut stream = tool.execute(args, ctx);
            let (mut streamed, mut cut) = (0usize, false);
            while let Some(event) = stream.next().await {
                let event = match event {
                    ToolEvent::Delta(_) if cut => continue,
                    ToolEvent::Delta(mut delta) if streamed + delta.len() > limit => {
                        cut = true;
                        delta.truncate(floor_char_boundary(&delta, limit - streamed));
                        delta.push_str(&truncation_note(limit));
                        ToolEvent::Delta(delta)
                    }
                    ToolEvent::Delta(delta) => {
                        streamed += delta.len();
                        ToolEvent::Delta(delta)
                    }
                    ToolEvent::Complete(out) if out.exceeds(limit) => {
                        ToolEvent::Complete(out.truncated(limit))
                    }
                    other => other,
                };
                let terminal = matches!(event, ToolEvent::Complete(_) | ToolEvent::Error(_));
                if tx.send((i, event)).await.is_err() || terminal {
                    return;
                }
            }
            let error = ToolError::failed("The tool ended without a result");
            let _ = tx.send((i, ToolEvent::Error(error))).await;
        }
    };
    let outcome = tokio::time::timeout(timeout, AssertUnwindSafe(forward).catch_unwind()).await;
    let error = match outcome {
        Ok(Ok(())) => return,
        Ok(Err(panic)) => {
            ToolError::Failed(format!("The tool panicked: {}", panic_message(&*panic)))
        }
        Err(_) => {
            cancel.cancel();
            ToolError::TimedOut(timeout)
        }
    };
    let _ = tx.send((i, ToolEvent::Error(error))).await;
}

/// A call of a batch under way: when it started, and its `execute_tool` span.
struct Started {
    at: (u64, Instant),
    span: Span,
}

/// Starts each of `calls` (`tool_execution_start` first), each in a task of its own that
/// reports to `tx`; a call to a tool this agent does not have is answered at once. `parent`: the
/// run's span.
async fn start_calls(
    agent: &AgentInner,
    calls: &[ToolCall],
    (base, parent): (&ToolContext, &Span),
    cancel: &CancellationToken,
    events: &mut impl EventSink,
    tx: mpsc::Sender<(usize, ToolEvent)>,
) -> (JoinSet<()>, Vec<Started>) {
    let local_tools = agent.tools.snapshot();
    let capture = agent.config.capture_content;
    let mut tasks = JoinSet::new();
    let mut started = Vec::with_capacity(calls.len());
    for (i, call) in calls.iter().enumerate() {
        events.emit(AgentEvent::ToolExecutionStart {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            args: call.arguments.clone(),
        });
        events.pace().await;
        let span = telemetry::execute_tool(parent, &base.session_id, call, capture);
        started.push(Started { at: (now_ms(), Instant::now()), span: span.clone() });
        let Some(local) = local_tools.get(&call.name) else {
            let error = ToolError::failed(format!("Tool {} not found", call.name));
            let _ = tx.try_send((i, ToolEvent::Error(error)));
            continue;
        };
        let tool = local.tool.clone();
        let timeout = tool.timeout().unwrap_or(agent.config.tool_timeout);
        let ctx =
            ToolContext { call_id: call.id.clone(), cancel: cancel.child_token(), ..base.clone() };
        // The tool takes its arguments by value (a typed tool moves them into its own type).
        let args = serde_json::Value::clone(&call.arguments);
        tasks.spawn(run_one(i, tool, args, ctx, timeout, tx.clone()).instrument(span));
    }
    (tasks, started)
}

/// Ends a call's `execute_tool` span with what it returned.
fn ended(span: &mut Span, outcome: &ToolOutcome, capture: bool) {
    let execution = &outcome.execution;
    telemetry::tool_ended(span, &execution.output, execution.error.is_some(), capture);
    *span = Span::none();
}

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}

/// Runs `calls` together, each in a task of its own (a panic, a timeout or an abort touches only
/// that call), reporting their events to `events` as they come. `base` is what every call is
/// told of its run (its call id and cancellation are its own, a child of `cancel`). Returns one
/// outcome per call, in the model's order, and whether `cancel` aborted the batch (calls it
/// stopped are answered "the run was aborted").
///
/// Each call has an `execute_tool` span, a child of `parent` (the run's), ended with the call.
pub(crate) async fn run_batch(
    agent: &AgentInner,
    calls: &[ToolCall],
    base: &ToolContext,
    parent: &Span,
    cancel: &CancellationToken,
    events: &mut impl EventSink,
) -> (Vec<ToolOutcome>, bool) {
    let capture = agent.config.capture_content;
    let (tx, mut rx) = mpsc::channel::<(usize, ToolEvent)>(256);
    let (mut tasks, mut started) =
        start_calls(agent, calls, (base, parent), cancel, events, tx).await;

    let mut outcomes: Vec<Option<ToolOutcome>> = vec![None; calls.len()];
    let mut remaining = calls.len();
    let mut aborted = false;
    while remaining > 0 {
        let next = match rx.try_recv() {
            Ok(item) => Some(item),
            Err(_) => {
                events.idle().await;
                tokio::select! {
                    item = rx.recv() => item,
                    () = cancel.cancelled() => { aborted = true; None }
                }
            }
        };
        let Some((i, event)) = next else { break };
        let call = &calls[i];
        let result = match event {
            ToolEvent::Delta(delta) => {
                let tool_call_id = call.id.clone();
                events.emit(AgentEvent::ToolExecutionDelta { tool_call_id, delta });
                events.pace().await;
                continue;
            }
            ToolEvent::Complete(out) => Ok(out),
            // A tool that stopped because the run was aborted: the abort answers it, not the
            // tool's own words, whichever of the two this loop happened to see first.
            ToolEvent::Error(ToolError::Cancelled(_)) if cancel.is_cancelled() => {
                aborted = true;
                break;
            }
            ToolEvent::Error(error) => Err(error),
        };
        if outcomes[i].is_none() {
            remaining -= 1;
            let (end, outcome) = finish_call(call, result, started[i].at);
            ended(&mut started[i].span, &outcome, capture);
            events.emit(end);
            events.pace().await;
            outcomes[i] = Some(outcome);
        }
    }
    if aborted {
        tasks.abort_all();
    }
    // Every call has its outcome: those the abort stopped (or, should a task end without a
    // word, those it left) are answered here.
    let mut answered = Vec::with_capacity(calls.len());
    for ((call, outcome), mut started) in calls.iter().zip(outcomes).zip(started) {
        let outcome = match outcome {
            Some(outcome) => outcome,
            None => {
                let error = if aborted {
                    ToolError::Cancelled("the run was aborted".into())
                } else {
                    ToolError::failed("The tool ended without a result")
                };
                let (end, outcome) = finish_call(call, Err(error), started.at);
                ended(&mut started.span, &outcome, capture);
                events.emit(end);
                events.pace().await;
                outcome
            }
        };
        answered.push(outcome);
    }
    (answered, aborted)
}
