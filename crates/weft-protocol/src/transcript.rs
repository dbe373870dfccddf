//! [`Transcript`]: what a stream says happened, independent of its format. Decoders produce one;
//! [`Transcript::from_events`] produces one from canonical events; round-trip checks compare
//! them.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_core::{AgentEvent, Message, SessionStatus};

/// A tool call as a transcript records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// The call id.
    pub id: String,
    /// The tool.
    pub name: String,
    /// The arguments.
    pub arguments: Value,
}

/// A tool result as a transcript records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResultRecord {
    /// The call it answers.
    pub id: String,
    /// Its text.
    pub output: String,
    /// Whether it is an error.
    pub is_error: bool,
}

/// What a stream says happened.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Transcript {
    /// Every text block's text, in order.
    pub texts: Vec<String>,
    /// Every thinking block's text, in order.
    pub thinking: Vec<String>,
    /// Every tool call the model made, in order.
    pub tool_calls: Vec<CallRecord>,
    /// Every tool result, in the order the model receives them.
    pub tool_results: Vec<ResultRecord>,
    /// Calls left waiting for a remote result or an approval when the stream ended.
    pub pending: Vec<String>,
    /// How the stream's last run ended.
    pub status: Option<SessionStatus>,
}

impl Transcript {
    /// The transcript of a canonical event stream.
    pub fn from_events<'a>(events: impl IntoIterator<Item = &'a AgentEvent>) -> Self {
        let mut t = Transcript::default();
        for event in events {
            match event {
                AgentEvent::TextEnd { text, .. } => t.texts.push(text.clone()),
                AgentEvent::ThinkingEnd { thinking, .. } => t.thinking.push(thinking.clone()),
                AgentEvent::ToolcallEnd { tool_call, .. } => t.tool_calls.push(CallRecord {
                    id: tool_call.id.clone(),
                    name: tool_call.name.clone(),
                    arguments: Value::clone(&tool_call.arguments),
                }),
                AgentEvent::MessageEnd { message } => {
                    if let Message::ToolResult(r) = &**message {
                        t.tool_results.push(ResultRecord {
                            id: r.tool_call_id.clone(),
                            output: r.text_content(),
                            is_error: r.is_error,
                        });
                    }
                }
                AgentEvent::AwaitingToolExecution { tool_calls, .. }
                | AgentEvent::ApprovalRequired { tool_calls, .. } => {
                    t.pending.extend(tool_calls.iter().map(|c| c.id.clone()));
                }
                AgentEvent::SessionStart { .. } => t.pending.clear(),
                AgentEvent::SessionEnd { status, .. } => t.status = Some(*status),
                _ => {}
            }
        }
        t
    }
}
