//! The built-in local tools `weft run` gives every agent, so that scripted (faux) runs can
//! exercise tool calls end to end:
//!
//! - `echo` (`{"text": string}`): streams the text back word by word as output deltas, then
//!   completes with the whole text;
//! - `current_time` (no arguments): the current UTC time in RFC 3339 (`2025-01-31T12:00:00Z`).

use std::time::SystemTime;

use schemars::JsonSchema;
use serde::Deserialize;
use weft_agent::{AgentBuilder, ToolOutputSink, streaming_tool_fn, tool_fn};

/// The arguments of `echo`.
#[derive(Debug, Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to echo back.
    text: String,
}

/// `current_time` takes no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
struct NoArgs {}

/// Adds the built-in tools to an agent being built.
pub(crate) fn register(builder: AgentBuilder) -> AgentBuilder {
    builder
        .tool(streaming_tool_fn(
            "echo",
            "Echoes the given text back, streaming it word by word.",
            |args: EchoArgs, sink: ToolOutputSink| async move {
                for word in words(&args.text) {
                    if !sink.send(word) {
                        // The run was aborted; nobody reads the output any more.
                        break;
                    }
                    tokio::task::yield_now().await;
                }
                Ok::<_, String>(args.text)
            },
        ))
        .tool(tool_fn(
            "current_time",
            "Returns the current UTC date and time in RFC 3339 format.",
            |_: NoArgs| async move {
                Ok::<_, String>(humantime::format_rfc3339_seconds(SystemTime::now()).to_string())
            },
        ))
}

/// `text` cut after each run of whitespace, so the pieces concatenate back to `text`.
fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            in_space = true;
        } else if in_space {
            out.push(&text[start..i]);
            start = i;
            in_space = false;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_the_whitespace_and_concatenate_back() {
        assert_eq!(words("hello brave  new\nworld"), ["hello ", "brave  ", "new\n", "world"]);
        assert_eq!(words("  lead"), ["  ", "lead"]);
        assert_eq!(words("trail "), ["trail "]);
        assert!(words("").is_empty());
        let text = "a b\tc  d ";
        assert_eq!(words(text).concat(), text);
    }
}
