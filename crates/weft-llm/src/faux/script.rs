//! The faux provider's script: turns built in Rust or read from JSON.

use std::path::Path;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use weft_core::{StopReason, Usage};

/// A script: each model call plays the next turn.
///
/// JSON form:
/// `{"turns":[{"thinking":"…","text":"…","toolCalls":[{"name":"get_weather","arguments":{"city":"Paris"}}],"chunkSize":4,"delayMs":0,"usage":{"input":10,"output":5}},{"error":"overloaded"}]}`
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FauxScript {
    /// The turns, played in order.
    pub turns: Vec<FauxTurn>,
}

/// One model call's worth of output.
///
/// Played in this order: thinking, text, tool calls (arguments streamed as compact JSON), then
/// the end. An `error` ends the turn with stop reason `error` right after the last delta, before
/// the open block is closed (a stream cut mid-block); `stall` stops at the same point and waits
/// until the call is aborted.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct FauxTurn {
    /// Reasoning streamed first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<String>,
    /// The thinking block's signature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
    /// Text streamed after the thinking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Tool calls streamed after the text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<FauxToolCall>,
    /// Characters per delta (default 4; at least 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chunk_size: Option<usize>,
    /// Delay before each delta, in milliseconds.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub delay_ms: u64,
    /// Usage reported at the end of the turn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<FauxUsage>,
    /// Fail the call with this message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Hang after the content until aborted.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stall: bool,
    /// The stop reason of a normal end (default `toolUse` when there are tool calls, else `stop`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<StopReason>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FauxToolCall {
    /// The call id (default `call_<turn>_<n>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// The tool's name.
    pub name: String,
    /// The arguments, streamed as compact JSON. A string value is streamed verbatim instead, so
    /// scripts can produce invalid JSON.
    #[serde(default)]
    pub arguments: Value,
}

/// Scripted usage (missing buckets are 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct FauxUsage {
    /// Non-cached input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Cache reads.
    pub cache_read: u64,
    /// Cache writes.
    pub cache_write: u64,
    /// Reasoning tokens.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<u64>,
}

impl From<FauxUsage> for Usage {
    fn from(u: FauxUsage) -> Self {
        let mut usage = Usage::new(u.input, u.output, u.cache_read, u.cache_write);
        usage.reasoning = u.reasoning;
        usage
    }
}

fn is_zero(v: &u64) -> bool {
    *v == 0
}

/// Why a script could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// The file could not be read.
    #[error("cannot read faux script {path}: {error}")]
    Io {
        /// The file.
        path: String,
        /// Why (already part of the message, so not reported again as a cause).
        error: std::io::Error,
    },
    /// The JSON is not a script.
    #[error("invalid faux script{}: {error}", .path.as_deref().map(|p| format!(" {p}")).unwrap_or_default())]
    Json {
        /// The file, if read from one.
        path: Option<String>,
        /// Why (already part of the message).
        error: serde_json::Error,
    },
    /// A turn's value is out of range (such as `chunkSize: 0`).
    #[error("invalid faux script{}: turns[{turn}].{field} {reason}", .path.as_deref().map(|p| format!(" {p}")).unwrap_or_default())]
    Invalid {
        /// The file, if read from one.
        path: Option<String>,
        /// The turn's position in `turns` (from 0).
        turn: usize,
        /// The field, as the JSON spells it.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
}

impl FauxScript {
    /// A script of these turns.
    pub fn new(turns: impl IntoIterator<Item = FauxTurn>) -> Self {
        Self { turns: turns.into_iter().collect() }
    }

    /// Parses a script from JSON, and [checks](Self::check) it.
    pub fn from_json(json: &str) -> Result<Self, ScriptError> {
        let script: Self =
            serde_json::from_str(json).map_err(|error| ScriptError::Json { path: None, error })?;
        script.check()?;
        Ok(script)
    }

    /// Reads a script from a JSON file, and [checks](Self::check) it.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ScriptError> {
        let path = path.as_ref();
        let display = path.display().to_string();
        let json = std::fs::read_to_string(path)
            .map_err(|error| ScriptError::Io { path: display.clone(), error })?;
        let script: Self = serde_json::from_str(&json)
            .map_err(|error| ScriptError::Json { path: Some(display.clone()), error })?;
        script.check().map_err(|e| match e {
            ScriptError::Invalid { turn, field, reason, .. } => {
                ScriptError::Invalid { path: Some(display), turn, field, reason }
            }
            other => other,
        })?;
        Ok(script)
    }

    /// Checks what the JSON form cannot say by itself: every `chunkSize` is at least 1. (A
    /// script built in Rust is not checked; it plays a `chunkSize` of 0 as 1.)
    pub fn check(&self) -> Result<(), ScriptError> {
        for (turn, t) in self.turns.iter().enumerate() {
            if t.chunk_size == Some(0) {
                return Err(ScriptError::Invalid {
                    path: None,
                    turn,
                    field: "chunkSize",
                    reason: "is 0: it must be at least 1 (characters per delta)".to_string(),
                });
            }
        }
        Ok(())
    }
}

impl FauxTurn {
    /// A turn answering with `text`.
    pub fn text(text: impl Into<String>) -> Self {
        Self { text: Some(text.into()), ..Self::default() }
    }

    /// A turn calling one tool.
    pub fn tool_call(name: impl Into<String>, arguments: Value) -> Self {
        Self::default().with_tool_call(name, arguments)
    }

    /// A turn failing with `message`.
    pub fn error(message: impl Into<String>) -> Self {
        Self { error: Some(message.into()), ..Self::default() }
    }

    /// Adds a tool call.
    pub fn with_tool_call(mut self, name: impl Into<String>, arguments: Value) -> Self {
        self.tool_calls.push(FauxToolCall { id: None, name: name.into(), arguments });
        self
    }

    /// Adds a tool call with a given id.
    pub fn with_tool_call_id(
        mut self,
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: Value,
    ) -> Self {
        self.tool_calls.push(FauxToolCall { id: Some(id.into()), name: name.into(), arguments });
        self
    }

    /// Sets the thinking.
    pub fn with_thinking(mut self, thinking: impl Into<String>) -> Self {
        self.thinking = Some(thinking.into());
        self
    }

    /// Sets the text.
    pub fn with_text(mut self, text: impl Into<String>) -> Self {
        self.text = Some(text.into());
        self
    }

    /// Sets the characters per delta.
    pub fn with_chunk_size(mut self, chunk_size: usize) -> Self {
        self.chunk_size = Some(chunk_size);
        self
    }

    /// Sets the delay before each delta.
    pub fn with_delay_ms(mut self, delay_ms: u64) -> Self {
        self.delay_ms = delay_ms;
        self
    }

    /// Sets the usage.
    pub fn with_usage(mut self, input: u64, output: u64) -> Self {
        self.usage = Some(FauxUsage { input, output, ..FauxUsage::default() });
        self
    }

    /// Fails the turn after its content.
    pub fn with_error(mut self, message: impl Into<String>) -> Self {
        self.error = Some(message.into());
        self
    }

    /// Hangs after the content until aborted.
    pub fn stalled(mut self) -> Self {
        self.stall = true;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_issue_example_parses() {
        let s = FauxScript::from_json(
            r#"{"turns":[{"thinking":"…","text":"…","toolCalls":[{"name":"get_weather","arguments":{"city":"Paris"}}],"chunkSize":4,"delayMs":0,"usage":{"input":10,"output":5}},{"error":"overloaded"}]}"#,
        )
        .unwrap();
        assert_eq!(s.turns.len(), 2);
        assert_eq!(s.turns[0].tool_calls[0].arguments["city"], "Paris");
        assert_eq!(s.turns[0].usage.unwrap().output, 5);
        assert_eq!(s.turns[1].error.as_deref(), Some("overloaded"));
    }

    #[test]
    fn a_chunk_size_of_zero_is_refused_at_load_time() {
        let err = FauxScript::from_json(r#"{"turns":[{"text":"a"},{"text":"hi","chunkSize":0}]}"#)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid faux script: turns[1].chunkSize is 0: it must be at least 1 (characters per \
             delta)"
        );
        let dir = std::env::temp_dir().join(format!("weft-faux-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("zero.json");
        std::fs::write(&file, r#"{"turns":[{"text":"hi","chunkSize":0}]}"#).unwrap();
        let err = FauxScript::from_file(&file).unwrap_err();
        let shown = err.to_string();
        assert!(
            shown.starts_with("invalid faux script ")
                && shown.contains("zero.json")
                && shown.ends_with(
                    "turns[0].chunkSize is 0: it must be at least 1 (characters per delta)"
                ),
            "{shown}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(FauxScript::from_json(r#"{"turns":[{"text":"hi","chunkSize":1}]}"#).is_ok());
    }

    #[test]
    fn unknown_fields_are_rejected_with_their_name() {
        let err = FauxScript::from_json(r#"{"turns":[{"txt":"hi"}]}"#).unwrap_err();
        assert!(err.to_string().contains("txt"), "{err}");
    }
}
