//! The line that ends the terminal view of a run, on stderr: what the run used and cost.
//!
//! ```text
//! tokens: 1200 in (1000 cached), 56 out (20 reasoning) · cost: $0.0123 · model: gpt-4o · time: 3.4s
//! tokens: 10 in, 4096 out · cost: $0.04 · model: m · time: 1m 2s · stopped: length (the answer was cut at the output limit)
//! ```
//!
//! `in` counts every input token (cached reads and writes included), `out` every output token
//! (reasoning included); the parentheses appear only when their counts are not zero. A model
//! the registry does not know costs `$0 (unknown model)`. `stopped:` appears when the last model
//! call ended neither normally (its answer, tool calls) nor in failure (a failure, an abort: the
//! `weft: …` line that follows says why): today that is `length`.

use std::fmt::Write as _;
use std::time::Duration;

use weft_agent::ExecuteResult;
use weft_core::{Message, StopReason, Usage};

/// The summary line of `result` (without a newline): `model` is the model asked for, `priced`
/// whether the registry knows its prices, `elapsed` the run's wall time.
pub(crate) fn line(result: &ExecuteResult, model: &str, priced: bool, elapsed: Duration) -> String {
    let mut line = format!("tokens: {}", tokens(&result.usage));
    let _ = write!(line, " · cost: {}", dollars(result.cost.total));
    if !priced {
        line.push_str(" (unknown model)");
    }
    let _ = write!(line, " · model: {model} · time: {}", elapsed_text(elapsed));
    if let Some(reason) = stop_reason(result) {
        let _ = write!(line, " · stopped: {} ({})", reason.as_str(), why(reason));
    }
    line
}

/// `1200 in (1000 cached, 200 cache writes), 56 out (20 reasoning)`.
pub(crate) fn tokens(usage: &Usage) -> String {
    let input = usage.input.saturating_add(usage.cache_read).saturating_add(usage.cache_write);
    let mut text = format!("{input} in");
    let cached: Vec<String> = [(usage.cache_read, "cached"), (usage.cache_write, "cache writes")]
        .into_iter()
        .filter(|(n, _)| *n > 0)
        .map(|(n, what)| format!("{n} {what}"))
        .collect();
    if !cached.is_empty() {
        let _ = write!(text, " ({})", cached.join(", "));
    }
    let _ = write!(text, ", {} out", usage.output);
    if let Some(reasoning @ 1..) = usage.reasoning {
        let _ = write!(text, " ({reasoning} reasoning)");
    }
    text
}

/// US dollars: `$0`, `$15.00`, `$0.0035`, `$1.234568` (at most six decimals, at least two), or
/// `<$0.000001` for a cost too small to show.
pub(crate) fn dollars(amount: f64) -> String {
    if amount == 0.0 || !amount.is_finite() {
        return if amount.is_finite() { "$0".into() } else { format!("${amount}") };
    }
    if amount.abs() < 0.000_000_5 {
        return "<$0.000001".into();
    }
    let mut text = format!("{amount:.6}");
    while text.ends_with('0') && text.find('.').is_some_and(|dot| text.len() - dot > 3) {
        text.pop();
    }
    match text.strip_prefix('-') {
        Some(positive) => format!("-${positive}"),
        None => format!("${text}"),
    }
}

/// `0.25s`, `3.4s`, `42s`, `2m 3s`, `1h 2m`.
pub(crate) fn elapsed_text(d: Duration) -> String {
    let secs = d.as_secs();
    match secs {
        0..10 => format!("{:.2}s", d.as_secs_f64()).replace(".00s", "s"),
        10..60 => format!("{:.1}s", d.as_secs_f64()),
        60..3600 => format!("{}m {}s", secs / 60, secs % 60),
        _ => format!("{}h {}m", secs / 3600, secs % 3600 / 60),
    }
}

/// How the run's last model call ended, when that was neither a normal end nor a failure.
fn stop_reason(result: &ExecuteResult) -> Option<StopReason> {
    let last = result.messages.iter().rev().find_map(|m| match m {
        Message::Assistant(a) => Some(a.stop_reason),
        _ => None,
    })?;
    (!matches!(last, StopReason::Stop | StopReason::ToolUse) && !last.is_failure()).then_some(last)
}

fn why(reason: StopReason) -> &'static str {
    match reason {
        StopReason::Length => "the answer was cut at the output limit",
        StopReason::Error => "the model call failed",
        StopReason::Aborted => "the model call was aborted",
        StopReason::Stop | StopReason::ToolUse => "a normal end",
    }
}

#[cfg(test)]
mod tests {
    use weft_core::{AssistantMessage, Cost, SessionStatus};

    use super::*;

    fn result(usage: Usage, cost: f64, stop: Option<StopReason>) -> ExecuteResult {
        let messages = stop
            .map(|stop_reason| {
                let mut message = AssistantMessage::empty("p", "m");
                message.stop_reason = stop_reason;
                vec![Message::Assistant(message)]
            })
            .unwrap_or_default();
        ExecuteResult {
            session_id: "s".into(),
            status: SessionStatus::Completed,
            outcome: weft_agent::RunOutcome::Completed,
            messages,
            pending_tool_calls: vec![],
            pending_approvals: vec![],
            usage,
            cost: Cost { total: cost, ..Cost::default() },
            steps: vec![],
            error: None,
        }
    }

    #[test]
    fn the_line_has_tokens_cost_model_and_time() {
        let r = result(Usage::new(10, 5, 0, 0), 0.000_35, Some(StopReason::Stop));
        assert_eq!(
            line(&r, "gpt-4o", true, Duration::from_millis(1234)),
            "tokens: 10 in, 5 out · cost: $0.00035 · model: gpt-4o · time: 1.23s"
        );
        let mut usage = Usage::new(200, 56, 1000, 30);
        usage.reasoning = Some(20);
        let r = result(usage, 15.0, Some(StopReason::Length));
        assert_eq!(
            line(&r, "m", true, Duration::from_secs(62)),
            "tokens: 1230 in (1000 cached, 30 cache writes), 56 out (20 reasoning) · cost: $15.00 \
             · model: m · time: 1m 2s · stopped: length (the answer was cut at the output limit)"
        );
        // A failure is told by the line that follows, not here.
        let r = result(Usage::new(1, 0, 0, 0), 0.0, Some(StopReason::Error));
        assert!(!line(&r, "m", true, Duration::ZERO).contains("stopped"));
        let r = result(Usage::default(), 0.0, None);
        assert_eq!(
            line(&r, "faux", false, Duration::ZERO),
            "tokens: 0 in, 0 out · cost: $0 (unknown model) · model: faux · time: 0s"
        );
    }

    #[test]
    fn amounts_and_durations_read_well() {
        assert_eq!(dollars(0.0), "$0");
        assert_eq!(dollars(15.0), "$15.00");
        assert_eq!(dollars(0.0035), "$0.0035");
        assert_eq!(dollars(1.234_567_891), "$1.234568");
        assert_eq!(dollars(0.000_000_01), "<$0.000001");
        assert_eq!(dollars(-2.5), "-$2.50");
        assert_eq!(dollars(1e20), "$100000000000000000000.00");
        assert_eq!(elapsed_text(Duration::from_millis(250)), "0.25s");
        assert_eq!(elapsed_text(Duration::from_secs(3)), "3s");
        assert_eq!(elapsed_text(Duration::from_millis(42_340)), "42.3s");
        assert_eq!(elapsed_text(Duration::from_secs(3723)), "1h 2m");
    }
}
