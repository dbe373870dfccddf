//! The step trace: one [`AgentStep`] per model call, with the tool executions it caused.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::message::{AssistantMessage, TimestampMs, ToolCall};

/// One tool execution in a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolExecutionResult {
    /// The call that was executed.
    pub call: ToolCall,
    /// What the tool returned (on failure, the error text the model saw).
    pub output: String,
    /// Why it failed, when it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The tool's structured details, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// When the execution started.
    pub started_at: TimestampMs,
    /// How long it took, in milliseconds (for remote tools: until the result arrived).
    pub latency_ms: u64,
}

/// A safety verdict attached to a step.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SafetyNote {
    /// `allow`, `review` or `block`.
    pub verdict: SafetyVerdict,
    /// The policy category.
    pub category: String,
}

/// A safety verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum SafetyVerdict {
    /// Allowed.
    #[default]
    Allow,
    /// Needs a human's review.
    Review,
    /// Blocked.
    Block,
}

/// A citation attached to a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CitationRef {
    /// What is cited.
    pub label: String,
    /// Where, if it has an address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The provider's own citation record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider_ref: Option<Value>,
}

/// Annotations of a step: safety verdicts, citations and anything else.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct StepAnnotations {
    /// Safety verdicts.
    pub safety: Vec<SafetyNote>,
    /// Citations.
    pub citations: Vec<CitationRef>,
    /// Anything else.
    pub extra: Map<String, Value>,
}

impl StepAnnotations {
    /// Whether nothing is annotated.
    pub fn is_empty(&self) -> bool {
        self.safety.is_empty() && self.citations.is_empty() && self.extra.is_empty()
    }
}

/// One model call and the tool executions it caused.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentStep {
    /// A stable id.
    pub step_id: String,
    /// 0-based index among the session's steps.
    pub step_index: u32,
    /// When the model call started.
    pub timestamp: TimestampMs,
    /// The whole assistant message, with its usage.
    pub llm_response: AssistantMessage,
    /// How long the model call took, in milliseconds.
    pub latency_ms: u64,
    /// The tool executions, in the model's order.
    #[serde(default)]
    pub tool_results: Vec<ToolExecutionResult>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "StepAnnotations::is_empty")]
    pub annotations: StepAnnotations,
}

/// What a caller that does not stream gets: the steps and the final answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AgentResponse {
    /// Every step of the run.
    pub steps: Vec<AgentStep>,
    /// The text of the last assistant message.
    pub final_output: String,
}

impl AgentResponse {
    /// The response made of `steps`: `final_output` is the last assistant text among them.
    pub fn from_steps(steps: Vec<AgentStep>) -> Self {
        let final_output = steps
            .iter()
            .rev()
            .map(|s| s.llm_response.text())
            .find(|text| !text.is_empty())
            .unwrap_or_default();
        Self { steps, final_output }
    }
}
