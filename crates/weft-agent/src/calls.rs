//! One tool call run to its terminal event (output cut at the tool's limit, a panic or a
//! timeout made an error), and its end reported: what the run and a graph node's loop share.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Instant;

use futures::{FutureExt, StreamExt};
use tokio::sync::mpsc;
use weft_core::{
    AgentEvent, ToolCall, ToolExecutionResult, ToolResultMessage, UserContent, now_ms,
};

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

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".to_string()
    }
}
