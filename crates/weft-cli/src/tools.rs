//! The built-in local tools `weft run` gives every agent, so that scripted (faux) runs can
//! exercise tool calls end to end:
//!
//! - `echo` (`{"text": string}`): streams the text back word by word as output deltas, then
//!   completes with the whole text;
//! - `current_time` (no arguments): the current UTC time in RFC 3339 (`2025-01-31T12:00:00Z`).

use std::time::{SystemTime, UNIX_EPOCH};

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
                let secs = SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_err(|_| "the system clock is set before 1970".to_string())?
                    .as_secs();
                Ok::<_, String>(rfc3339(secs))
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

/// Seconds since the Unix epoch as an RFC 3339 UTC timestamp (`YYYY-MM-DDTHH:MM:SSZ`).
fn rfc3339(secs: u64) -> String {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_of_known_instants() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(951_868_799), "2000-02-29T23:59:59Z");
        assert_eq!(rfc3339(1_700_000_000), "2023-11-14T22:13:20Z");
        assert_eq!(rfc3339(4_107_542_400), "2100-03-01T00:00:00Z");
        assert_eq!(rfc3339(1_735_689_599), "2024-12-31T23:59:59Z");
    }

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
