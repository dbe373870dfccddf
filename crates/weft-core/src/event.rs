//! [`AgentEvent`]: the one closed set of events a run emits. Every wire format is a projection
//! of it.
//!
//! The JSON form is the agent plan's: a `type` tag in snake_case (`text_delta`,
//! `tool_execution_start` …) and camelCase fields (`toolCallId`, `toolCalls` …). Events the plan
//! does not define (nodes, steps, approvals, state, checkpoints, tree- and graph-of-thought
//! progress) follow the same conventions.
//!
//! Order of one run (react mode), as the agent emits it:
//!
//! ```text
//! session_start
//!   message_start(user) message_end                      the input, when it is a message
//!   node_enter(think) step_start
//!     message_start(assistant)
//!       thinking_start thinking_delta… thinking_end       per thinking block
//!       text_start text_delta… text_end                   per text block
//!       toolcall_start toolcall_delta… toolcall_end       per tool call
//!     message_end
//!   node_exit(think)
//!   node_enter(act)                                       when the model called tools
//!     tool_execution_start tool_execution_delta… tool_execution_end   per executed call
//!   node_exit(act)
//!   node_enter(observe)
//!     message_start(toolResult) message_end               per result, in the model's order
//!   node_exit(observe)
//!   step_end
//!   … again from node_enter(think) until the model stops …
//! approval_required | awaiting_tool_execution             when the run suspends
//! session_end
//! ```

use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::message::{Message, Role, ToolCall};
use crate::state::SessionStatus;
use crate::step::AgentStep;
use crate::usage::{Cost, Usage};

/// Everything a run reports, as it happens.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
pub enum AgentEvent {
    /// A run starts.
    SessionStart {
        /// The session.
        session_id: String,
        /// This run's id.
        run_id: String,
        /// The agent mode (`react`, `tot`, `got`).
        agent: String,
        /// Set when this run takes over one whose process died: the id of the run whose
        /// answer it completes (that run's first execution, the id clients know the answer by).
        /// (Boxed: a thin pointer keeps every event within its size budget.)
        #[serde(default, skip_serializing_if = "Option::is_none")]
        recovers: Option<Box<String>>,
    },
    /// A run ends; `messages` are the messages it added.
    SessionEnd {
        /// The session.
        session_id: String,
        /// How the run ended.
        status: SessionStatus,
        /// The messages this run added, in order (the session log's own, shared).
        messages: Vec<Arc<Message>>,
        /// Tokens this run used. (Usage and cost are boxed: the end of a run is one event of
        /// thousands, and its size would be every event's.)
        usage: Box<Usage>,
        /// What this run cost.
        cost: Box<Cost>,
    },
    /// The run is suspended until these remote calls have results.
    AwaitingToolExecution {
        /// The session.
        session_id: String,
        /// The calls to run elsewhere.
        tool_calls: Vec<ToolCall>,
    },
    /// The run is suspended until these calls are approved or denied.
    ApprovalRequired {
        /// The session.
        session_id: String,
        /// The calls to decide on.
        tool_calls: Vec<ToolCall>,
    },

    /// A node run starts (`think`, `act`, `observe` in react mode).
    NodeEnter {
        /// The node's name.
        name: String,
        /// This node run's id, shared by everything until its `node_exit`.
        node_id: String,
    },
    /// A node run ends.
    NodeExit {
        /// The node's name.
        name: String,
        /// The node run's id.
        node_id: String,
        /// Why it failed, when it did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A step (a model call and its tools) starts.
    StepStart {
        /// The step's id.
        step_id: String,
        /// 0-based index among the session's steps.
        step_index: u32,
    },
    /// A step ends, with all of its tool results.
    StepEnd {
        /// The whole step (shared with the run's step trace).
        step: Arc<AgentStep>,
    },

    /// A message starts.
    MessageStart {
        /// Whose message.
        role: Role,
    },
    /// A message ends; for assistant messages it carries usage and cost.
    MessageEnd {
        /// The whole message (the session log's own, shared).
        message: Arc<Message>,
    },

    /// A text block starts.
    TextStart {
        /// Position of the block in the assistant message's content.
        index: u32,
    },
    /// More text.
    TextDelta {
        /// The block's position.
        index: u32,
        /// The new text.
        delta: String,
    },
    /// A text block ends.
    TextEnd {
        /// The block's position.
        index: u32,
        /// The block's whole text.
        text: String,
    },

    /// A thinking block starts.
    ThinkingStart {
        /// The block's position.
        index: u32,
    },
    /// More thinking.
    ThinkingDelta {
        /// The block's position.
        index: u32,
        /// The new thinking text.
        delta: String,
    },
    /// A thinking block ends.
    ThinkingEnd {
        /// The block's position.
        index: u32,
        /// The block's whole thinking text.
        thinking: String,
        /// The provider's signature, if it sent one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },

    /// A tool call starts.
    ToolcallStart {
        /// The block's position.
        index: u32,
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of a tool call's JSON arguments.
    ToolcallDelta {
        /// The block's position.
        index: u32,
        /// The new argument text.
        delta: String,
    },
    /// A tool call is complete.
    ToolcallEnd {
        /// The block's position.
        index: u32,
        /// The whole call with its parsed arguments.
        tool_call: ToolCall,
    },

    /// A local tool starts running.
    ToolExecutionStart {
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// Its arguments (the call's, shared).
        args: Arc<Value>,
    },
    /// A running tool's output so far.
    ToolExecutionDelta {
        /// The call.
        tool_call_id: String,
        /// The new output.
        delta: String,
    },
    /// A local tool that started has finished: completed, failed, panicked, timed out or was
    /// aborted. Calls answered without running (unknown tool, invalid arguments, blocked,
    /// denied) have no execution events; their error result is the `toolResult` message.
    ToolExecutionEnd {
        /// The call.
        tool_call_id: String,
        /// The tool.
        tool_name: String,
        /// The whole output (on failure, the error text the model sees).
        output: String,
        /// Structured details, if the tool gave any (boxed: most calls give none).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        details: Option<Box<Value>>,
        /// Whether it failed.
        is_error: bool,
    },

    /// A full snapshot of the run's state (graph modes).
    StateSnapshot {
        /// The state.
        state: Value,
    },
    /// The state after a node merged its output.
    StateUpdate {
        /// The node's name.
        name: String,
        /// The state.
        state: Value,
    },
    /// The run's state was checkpointed. (Boxed: a rare event, kept out of the size of every
    /// event; on the wire its fields sit beside `type` as for any other.)
    Checkpoint(Box<CheckpointTaken>),
    /// Progress of a reasoning mode (tree or graph of thoughts): one variant for all of them,
    /// so each wire format handles them once.
    Progress(ModeProgress),
    /// Anything else.
    Custom {
        /// The value.
        value: Value,
    },

    /// Something failed; for a model failure, `message` is the partial assistant message.
    Error {
        /// What went wrong.
        error: String,
        /// The message it happened in, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<Arc<Message>>,
    },
}

// Every event of a session's log is this size (an `EventRecord` holds one): a new variant or
// field that grows it grows every text delta kept. Box what is large and rare.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<AgentEvent>() <= 88);

/// A checkpoint of the run's state ([`AgentEvent::Checkpoint`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointTaken {
    /// The checkpoint's id.
    pub checkpoint_id: String,
    /// The thread (the session's id).
    pub thread_id: String,
    /// The checkpoint namespace.
    pub checkpoint_ns: String,
    /// The step it was taken after.
    pub step: u32,
    /// When.
    pub timestamp: u64,
    /// The state.
    pub state: Value,
}

/// Progress of a reasoning mode, with the stream protocol's names (`kind`) and fields
/// (snake_case, as §4.2 lists them).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ModeProgress {
    /// Tree of thoughts: candidate next thoughts proposed.
    TotExpand {
        /// The candidates.
        candidates: Vec<String>,
    },
    /// Tree of thoughts: candidates scored, one chosen.
    TotEvaluate {
        /// Index of the chosen candidate.
        chosen: u32,
        /// One score per candidate.
        scores: Vec<f64>,
        /// The model's scores could not be parsed: these are the rule-based fallback's.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        rule_based: bool,
    },
    /// Tree of thoughts: backtracking.
    TotBacktrack {
        /// Why.
        reason: String,
        /// The depth returned to.
        to_depth: u32,
    },
    /// Graph of thoughts: a plan was made.
    GotPlan {
        /// Number of nodes.
        node_count: u32,
        /// Number of edges.
        edge_count: u32,
        /// The nodes' ids.
        node_ids: Vec<String>,
    },
    /// Graph of thoughts: a node starts.
    GotNodeStart {
        /// The node.
        id: String,
    },
    /// Graph of thoughts: a node completed.
    GotNodeComplete {
        /// The node.
        id: String,
        /// A summary of its result.
        result_summary: String,
    },
    /// Graph of thoughts: a node failed, or was skipped because a dependency failed.
    GotNodeFailed {
        /// The node.
        id: String,
        /// Why.
        error: String,
    },
    /// Graph of thoughts (adaptive): a node was expanded into a sub-graph.
    GotExpand {
        /// The expanded node.
        node_id: String,
        /// Nodes added.
        nodes_added: u32,
        /// Edges added.
        edges_added: u32,
    },
}

impl ModeProgress {
    /// The protocol's event type (`tot_expand`, `got_node_start` …).
    pub fn kind(&self) -> &'static str {
        match self {
            Self::TotExpand { .. } => "tot_expand",
            Self::TotEvaluate { .. } => "tot_evaluate",
            Self::TotBacktrack { .. } => "tot_backtrack",
            Self::GotPlan { .. } => "got_plan",
            Self::GotNodeStart { .. } => "got_node_start",
            Self::GotNodeComplete { .. } => "got_node_complete",
            Self::GotNodeFailed { .. } => "got_node_failed",
            Self::GotExpand { .. } => "got_expand",
        }
    }

    /// The payload's members as compact JSON text, in the protocol's order and without the
    /// `kind` tag: `"candidates":["a","b"]`.
    pub fn fields(&self) -> String {
        let json = serde_json::to_string(self).unwrap_or_default();
        let tag = format!("{{\"kind\":\"{}\"", self.kind());
        match json.strip_prefix(&tag).and_then(|rest| rest.strip_suffix('}')) {
            Some(rest) => rest.strip_prefix(',').unwrap_or(rest).to_string(),
            None => String::new(),
        }
    }
}

impl AgentEvent {
    /// The `type` tag as it appears in JSON.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::SessionStart { .. } => "session_start",
            Self::SessionEnd { .. } => "session_end",
            Self::AwaitingToolExecution { .. } => "awaiting_tool_execution",
            Self::ApprovalRequired { .. } => "approval_required",
            Self::NodeEnter { .. } => "node_enter",
            Self::NodeExit { .. } => "node_exit",
            Self::StepStart { .. } => "step_start",
            Self::StepEnd { .. } => "step_end",
            Self::MessageStart { .. } => "message_start",
            Self::MessageEnd { .. } => "message_end",
            Self::TextStart { .. } => "text_start",
            Self::TextDelta { .. } => "text_delta",
            Self::TextEnd { .. } => "text_end",
            Self::ThinkingStart { .. } => "thinking_start",
            Self::ThinkingDelta { .. } => "thinking_delta",
            Self::ThinkingEnd { .. } => "thinking_end",
            Self::ToolcallStart { .. } => "toolcall_start",
            Self::ToolcallDelta { .. } => "toolcall_delta",
            Self::ToolcallEnd { .. } => "toolcall_end",
            Self::ToolExecutionStart { .. } => "tool_execution_start",
            Self::ToolExecutionDelta { .. } => "tool_execution_delta",
            Self::ToolExecutionEnd { .. } => "tool_execution_end",
            Self::StateSnapshot { .. } => "state_snapshot",
            Self::StateUpdate { .. } => "state_update",
            Self::Checkpoint { .. } => "checkpoint",
            Self::Progress(progress) => progress.kind(),
            Self::Custom { .. } => "custom",
            Self::Error { .. } => "error",
        }
    }

    /// Whether the agent plan's own taxonomy has this event (the native wire format sends only
    /// these, plus `approval_required`).
    pub fn is_plan_event(&self) -> bool {
        !matches!(
            self,
            Self::NodeEnter { .. }
                | Self::NodeExit { .. }
                | Self::StepStart { .. }
                | Self::StepEnd { .. }
                | Self::StateSnapshot { .. }
                | Self::StateUpdate { .. }
                | Self::Checkpoint { .. }
                | Self::Progress(_)
                | Self::Custom { .. }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_uses_the_plans_tags_and_fields() {
        let e = AgentEvent::ToolExecutionStart {
            tool_call_id: "c1".into(),
            tool_name: "get".into(),
            args: serde_json::json!({"city": "Paris"}).into(),
        };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"type":"tool_execution_start","toolCallId":"c1","toolName":"get","args":{"city":"Paris"}}"#
        );
        let e = AgentEvent::TextDelta { index: 0, delta: "hi".into() };
        assert_eq!(
            serde_json::to_string(&e).unwrap(),
            r#"{"type":"text_delta","index":0,"delta":"hi"}"#
        );
        let e = AgentEvent::AwaitingToolExecution { session_id: "s".into(), tool_calls: vec![] };
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(json, r#"{"type":"awaiting_tool_execution","sessionId":"s","toolCalls":[]}"#);
        assert_eq!(serde_json::from_str::<AgentEvent>(&json).unwrap(), e);
    }

    #[test]
    fn kind_matches_the_json_tag() {
        let events = [
            AgentEvent::NodeEnter { name: "think".into(), node_id: "n".into() },
            AgentEvent::ToolcallDelta { index: 1, delta: "{".into() },
            AgentEvent::Progress(ModeProgress::GotExpand {
                node_id: "a".into(),
                nodes_added: 1,
                edges_added: 2,
            }),
            AgentEvent::Error { error: "x".into(), message: None },
        ];
        for e in events {
            let json = serde_json::to_value(&e).unwrap();
            let kind = json.get("kind").unwrap_or(&json["type"]);
            assert_eq!(kind, e.kind());
        }
    }

    #[test]
    fn progress_keeps_the_protocols_names_and_fields() {
        let e = AgentEvent::Progress(ModeProgress::GotNodeComplete {
            id: "g1".into(),
            result_summary: "done".into(),
        });
        let json = serde_json::to_string(&e).unwrap();
        assert_eq!(
            json,
            r#"{"type":"progress","kind":"got_node_complete","id":"g1","result_summary":"done"}"#
        );
        assert_eq!(serde_json::from_str::<AgentEvent>(&json).unwrap(), e);
        if let AgentEvent::Progress(p) = &e {
            assert_eq!(p.fields(), r#""id":"g1","result_summary":"done""#);
        }
        let evaluate =
            ModeProgress::TotEvaluate { chosen: 1, scores: vec![0.5, 0.25], rule_based: false };
        assert_eq!(
            serde_json::to_value(&evaluate).unwrap(),
            serde_json::json!({"kind": "tot_evaluate", "chosen": 1, "scores": [0.5, 0.25]})
        );
    }
}
