//! Sessions: a conversation the runtime keeps, its status, and what it waits for.

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;
use std::sync::Arc;

use crate::history::History;
use crate::message::{TimestampMs, ToolCall, ToolResultMessage, UserMessage};
use crate::state::{RunState, SessionHead, StoredSession};
use crate::tool::ToolSpec;
use crate::usage::{Cost, Usage};

pub use crate::state::{CallSlot, CallState, OpenTurn, SessionStatus};

/// A decision on a tool call that needs approval.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalDecision {
    /// The call decided on.
    pub tool_call_id: String,
    /// Approve (the tool runs) or deny (the model sees an error result).
    pub approved: bool,
    /// Why, shown to the model on a denial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ApprovalDecision {
    /// Approve a call.
    pub fn approve(tool_call_id: impl Into<String>) -> Self {
        Self { tool_call_id: tool_call_id.into(), approved: true, reason: None }
    }

    /// Deny a call, saying why.
    pub fn deny(tool_call_id: impl Into<String>, reason: impl Into<String>) -> Self {
        Self { tool_call_id: tool_call_id.into(), approved: false, reason: Some(reason.into()) }
    }
}

/// What starts or resumes a run.
///
/// JSON: a user message object, an array of tool-result messages, or `{"approvals": [...]}`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Input {
    /// A new user message: starts a new run.
    User(UserMessage),
    /// Results of remote tool calls: resumes a suspended run.
    ToolResults(Vec<ToolResultMessage>),
    /// Decisions on calls awaiting approval: resumes a suspended run.
    Approvals {
        /// The decisions.
        approvals: Vec<ApprovalDecision>,
    },
}

impl Input {
    /// A text user message.
    pub fn text(text: impl Into<String>) -> Self {
        Self::User(UserMessage::text(text))
    }
}

impl Input {
    /// Approves one call awaiting approval.
    pub fn approve(tool_call_id: impl Into<String>) -> Self {
        Self::Approvals { approvals: vec![ApprovalDecision::approve(tool_call_id)] }
    }

    /// Denies one call awaiting approval, saying why (the model sees the reason).
    pub fn deny(tool_call_id: impl Into<String>, reason: impl Into<String>) -> Self {
        Self::Approvals { approvals: vec![ApprovalDecision::deny(tool_call_id, reason)] }
    }
}

impl From<Vec<ToolResultMessage>> for Input {
    fn from(results: Vec<ToolResultMessage>) -> Self {
        Self::ToolResults(results)
    }
}

impl From<ToolResultMessage> for Input {
    fn from(result: ToolResultMessage) -> Self {
        Self::ToolResults(vec![result])
    }
}

impl From<Vec<ApprovalDecision>> for Input {
    fn from(approvals: Vec<ApprovalDecision>) -> Self {
        Self::Approvals { approvals }
    }
}

impl From<UserMessage> for Input {
    fn from(m: UserMessage) -> Self {
        Self::User(m)
    }
}

impl<'de> Deserialize<'de> for Input {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = Value::deserialize(d)?;
        match &value {
            Value::Array(_) => {
                serde_json::from_value(value).map(Input::ToolResults).map_err(D::Error::custom)
            }
            Value::Object(map) if map.contains_key("approvals") => {
                #[derive(Deserialize)]
                struct Approvals {
                    approvals: Vec<ApprovalDecision>,
                }
                serde_json::from_value::<Approvals>(value)
                    .map(|a| Input::Approvals { approvals: a.approvals })
                    .map_err(D::Error::custom)
            }
            Value::Object(map) => match map.get("role").and_then(Value::as_str) {
                Some("user") => {
                    serde_json::from_value(value).map(Input::User).map_err(D::Error::custom)
                }
                Some("toolResult") => serde_json::from_value(value)
                    .map(|r| Input::ToolResults(vec![r]))
                    .map_err(D::Error::custom),
                Some(other) => Err(D::Error::custom(format!(
                    "input role must be \"user\" or \"toolResult\", not {other:?}"
                ))),
                None => Err(D::Error::custom(
                    "input must be a user message, an array of tool results or {\"approvals\": [...]}",
                )),
            },
            _ => Err(D::Error::custom(
                "input must be a user message, an array of tool results or {\"approvals\": [...]}",
            )),
        }
    }
}

/// A conversation the runtime keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Session {
    /// Its id.
    pub id: String,
    /// Where it stands.
    pub status: SessionStatus,
    /// The provider of the last (or next) model call.
    pub provider: String,
    /// The model of the last (or next) model call.
    pub model: String,
    /// The system prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<Arc<str>>,
    /// The session's own tools: specs given by the client. Those without a local executor of
    /// the same name are remote.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// The whole conversation, append-only; shared, not copied, by model requests and events.
    #[serde(default)]
    pub messages: History,
    /// Tokens used over the session's life.
    #[serde(default)]
    pub usage: Usage,
    /// Cost over the session's life.
    #[serde(default)]
    pub cost: Cost,
    /// The state of the current or suspended run (its open turn, turn count, steps …); `None`
    /// when no run is under way. Boxed: an idle session (most of those a server holds) does
    /// not carry its ~460 bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<Box<RunState>>,
    /// Other options the session was created with (mode, limits …), kept as given.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub options: Value,
    /// Bumped on every change (optimistic concurrency).
    #[serde(default)]
    pub version: u64,
    /// The sequence number of the session's last event (0: none yet).
    #[serde(default)]
    pub last_event_seq: u64,
    /// How many steps (model calls) the session has made.
    #[serde(default)]
    pub step_count: u32,
    /// When it was created.
    pub created_at: TimestampMs,
    /// When it last changed.
    pub updated_at: TimestampMs,
    /// Who owns it (an API key's owner), if anyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl Session {
    /// A new idle session.
    pub fn new(
        id: impl Into<String>,
        provider: impl Into<String>,
        model: impl Into<String>,
    ) -> Self {
        let now = crate::message::now_ms();
        Self {
            id: id.into(),
            status: SessionStatus::Idle,
            provider: provider.into(),
            model: model.into(),
            system_prompt: None,
            tools: Vec::new(),
            messages: History::new(),
            usage: Usage::default(),
            cost: Cost::default(),
            run: None,
            options: Value::Null,
            version: 0,
            last_event_seq: 0,
            step_count: 0,
            created_at: now,
            updated_at: now,
            owner: None,
        }
    }

    /// The turn whose tool calls are not all answered, if a run is on one.
    pub fn open_turn(&self) -> Option<&OpenTurn> {
        self.run.as_ref()?.open_turn.as_ref()
    }

    /// The open turn, to change it.
    pub fn open_turn_mut(&mut self) -> Option<&mut OpenTurn> {
        self.run.as_mut()?.open_turn.as_mut()
    }

    /// Calls waiting for a remote result.
    pub fn pending_tool_calls(&self) -> Vec<ToolCall> {
        self.open_turn().iter().flat_map(|t| t.pending_tool_calls().cloned()).collect()
    }

    /// Calls waiting for approval.
    pub fn pending_approvals(&self) -> Vec<ToolCall> {
        self.open_turn().iter().flat_map(|t| t.pending_approvals().cloned()).collect()
    }

    /// The earliest deadline among the remote calls the open turn waits for.
    pub fn next_deadline(&self) -> Option<TimestampMs> {
        self.open_turn()?
            .calls
            .iter()
            .filter_map(|slot| match slot.state {
                CallState::AwaitingResult { deadline, .. } => Some(deadline),
                _ => None,
            })
            .min()
    }

    /// The session's head: what a store rewrites on every commit.
    pub fn head(&self) -> SessionHead {
        SessionHead {
            id: self.id.clone(),
            owner: self.owner.clone(),
            status: self.status,
            provider: self.provider.clone(),
            model: self.model.clone(),
            system_prompt: self.system_prompt.clone(),
            tools: self.tools.clone(),
            options: self.options.clone(),
            usage: self.usage,
            cost: self.cost,
            message_count: self.messages.len() as u64,
            step_count: self.step_count,
            next_deadline: self.next_deadline(),
            version: self.version,
            created_at: self.created_at,
            updated_at: self.updated_at,
        }
    }

    /// The session a store loaded.
    pub fn from_stored(stored: StoredSession) -> Self {
        let StoredSession { head, messages, run, last_seq, .. } = stored;
        Self {
            id: head.id,
            status: head.status,
            provider: head.provider,
            model: head.model,
            system_prompt: head.system_prompt,
            tools: head.tools,
            messages,
            usage: head.usage,
            cost: head.cost,
            run: run.map(Box::new),
            options: head.options,
            version: head.version,
            last_event_seq: last_seq,
            step_count: head.step_count,
            created_at: head.created_at,
            updated_at: head.updated_at,
            owner: head.owner,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_forms() {
        let u: Input = serde_json::from_str(r#"{"role":"user","content":"hi"}"#).unwrap();
        assert!(matches!(u, Input::User(_)));
        let r: Input = serde_json::from_str(
            r#"[{"role":"toolResult","toolCallId":"c","toolName":"t","content":"ok"}]"#,
        )
        .unwrap();
        assert!(matches!(r, Input::ToolResults(v) if v.len() == 1));
        let a: Input =
            serde_json::from_str(r#"{"approvals":[{"toolCallId":"c","approved":false}]}"#).unwrap();
        assert!(matches!(a, Input::Approvals { approvals } if !approvals[0].approved));
        let bad = serde_json::from_str::<Input>(r#"{"role":"assistant"}"#).unwrap_err();
        assert!(bad.to_string().contains("\"assistant\""), "{bad}");
        let bad = serde_json::from_str::<Input>("42").unwrap_err();
        assert!(bad.to_string().contains("input must be"), "{bad}");
    }
}
