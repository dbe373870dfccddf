//! Tool specifications: what a model is told about a tool.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as the model sees it: a name, a description and a JSON Schema for its arguments.
///
/// A spec alone describes a *remote* tool: one that runs outside the agent (in a browser, another
/// service, a human's hands). A local tool is a spec plus an executor, which lives in
/// `weft-agent`; what JSON drops (the executor) is what marks a tool as remote.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolSpec {
    /// The name the model calls it by.
    pub name: String,
    /// A human-readable label for user interfaces (defaults to the name).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
    /// What it does, for the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of its arguments.
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
    /// Whether each call must be approved before it runs.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub requires_approval: bool,
}

impl ToolSpec {
    /// A spec with a name, a description and a parameter schema.
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            label: String::new(),
            description: description.into(),
            parameters,
            requires_approval: false,
        }
    }

    /// The same spec, requiring approval for every call.
    pub fn with_approval(mut self) -> Self {
        self.requires_approval = true;
        self
    }

    /// The same spec with a label for user interfaces.
    pub fn with_label(mut self, label: impl Into<String>) -> Self {
        self.label = label.into();
        self
    }

    /// The label, or the name when no label was given.
    pub fn display_label(&self) -> &str {
        if self.label.is_empty() { &self.name } else { &self.label }
    }
}

/// The longest tool name every provider accepts.
pub const MAX_TOOL_NAME: usize = 64;

/// Whether every provider accepts `name` as a tool's name: 1 to [`MAX_TOOL_NAME`] characters of
/// `A-Z a-z 0-9 _ -`. That is the strictest of their rules (OpenAI's and Anthropic's
/// `^[a-zA-Z0-9_-]{1,64}$`; Gemini also allows `.` and `:`), so a tool with a valid name works
/// with any of them, and one without would make every model call of its session fail.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// A block of a local tool's output: what the tool produced, before it becomes the content of
/// the tool result the model sees (text and images as they are, structured JSON as its text).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ToolContent {
    /// Text.
    Text {
        /// The text.
        text: String,
    },
    /// An image (an MCP server's chart, a screenshot).
    #[serde(rename_all = "camelCase")]
    Image {
        /// MIME type such as `image/png`.
        mime_type: String,
        /// Base64 data.
        data: String,
    },
    /// Structured JSON (an MCP server's `structuredContent`).
    Json {
        /// The value.
        value: Value,
    },
}

impl ToolContent {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text { text: text.into() }
    }

    /// The block as the model reads it: text as is, JSON as its compact text, an image as a
    /// placeholder naming its type (the image itself goes to the model as an image block).
    pub fn to_text(&self) -> String {
        match self {
            Self::Text { text } => text.clone(),
            Self::Json { value } => value.to_string(),
            Self::Image { mime_type, .. } => format!("[image: {mime_type}]"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_follow_the_strictest_provider_rule() {
        for name in ["get_weather", "files__read-file", "a", &"x".repeat(MAX_TOOL_NAME)] {
            assert!(valid_tool_name(name), "{name}");
        }
        for name in ["", "get.weather", "get weather", "ns:tool", "wetter_ä", &"x".repeat(65)] {
            assert!(!valid_tool_name(name), "{name}");
        }
    }
}
