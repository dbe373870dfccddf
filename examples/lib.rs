//! Shared bits of the examples: [`EventPrinter`], which shows a run's events as they happen,
//! [`run_printed`], which drives one run through it, and [`print_summary`].
//!
//! Nothing here is part of Weft's API; it is the kind of code an application writes around
//! [`weft_agent::Agent::execute`].

use std::io::{self, Write};

use futures::StreamExt;
use weft_agent::{ExecuteResult, ExecuteStream};
use weft_core::{AgentEvent, Message, ToolCall};

/// Prints a run's [`AgentEvent`]s as readable lines, as they arrive.
///
/// Text, thinking and tool-call arguments are printed inline, delta by delta, so the output grows
/// the way a chat UI would; a local tool's output deltas are printed indented under it. Events a
/// plain transcript does not need (`node_enter`/`node_exit`, `step_end`, graph-mode progress)
/// are skipped.
pub struct EventPrinter<W: Write> {
    out: W,
    /// Whether an inline stream (text, arguments, tool output) left the cursor mid-line.
    mid_line: bool,
    /// Whether the next tool-output delta starts a new, indented line.
    output_at_line_start: bool,
}

impl EventPrinter<io::Stdout> {
    /// A printer writing to standard output.
    pub fn stdout() -> Self {
        Self::new(io::stdout())
    }
}

impl<W: Write> EventPrinter<W> {
    /// A printer writing to `out`.
    pub fn new(out: W) -> Self {
        Self { out, mid_line: false, output_at_line_start: true }
    }

    /// Prints one event (and flushes, so inline deltas show up immediately).
    pub fn print(&mut self, event: &AgentEvent) -> io::Result<()> {
        match event {
            AgentEvent::SessionStart { session_id, .. } => {
                self.line(&format!("== run started (session {})", short(session_id)))?;
            }
            AgentEvent::SessionEnd { status, usage, .. } => {
                self.line(&format!("== run ended: {status} ({} tokens)", usage.total))?;
            }
            AgentEvent::AwaitingToolExecution { tool_calls, .. } => {
                self.line(&format!(
                    "|| suspended: waiting for {} remote tool result(s)",
                    tool_calls.len()
                ))?;
                self.calls(tool_calls)?;
            }
            AgentEvent::ApprovalRequired { tool_calls, .. } => {
                self.line(&format!(
                    "|| suspended: {} tool call(s) need approval",
                    tool_calls.len()
                ))?;
                self.calls(tool_calls)?;
            }
            AgentEvent::StepStart { step_index, .. } => {
                self.line(&format!("-- step {step_index}"))?;
            }

            AgentEvent::MessageEnd { message } => match message.as_ref() {
                Message::User(m) => self.line(&format!("user: {}", m.text_content()))?,
                Message::Assistant(m) => {
                    let u = &m.usage;
                    let mut note = format!(
                        "   (stop: {}; tokens: {} in, {} out)",
                        m.stop_reason.as_str(),
                        u.input,
                        u.output
                    );
                    if let Some(error) = &m.error_message {
                        note.push_str(&format!(" error: {error}"));
                    }
                    self.line(&note)?;
                }
                Message::ToolResult(r) => {
                    let kind = if r.is_error { "error result" } else { "result" };
                    let text = one_line(&r.text_content(), 72);
                    self.line(&format!("tool {kind} [{}] -> model: {text}", r.tool_call_id))?;
                }
            },

            AgentEvent::TextStart { .. } => self.open("assistant: ")?,
            AgentEvent::ThinkingStart { .. } => self.open("thinking: ")?,
            AgentEvent::ToolcallStart { id, name, .. } => {
                self.open(&format!("assistant calls {name} [{id}] "))?;
            }
            AgentEvent::TextDelta { delta, .. }
            | AgentEvent::ThinkingDelta { delta, .. }
            | AgentEvent::ToolcallDelta { delta, .. } => self.inline(delta)?,
            AgentEvent::TextEnd { .. }
            | AgentEvent::ThinkingEnd { .. }
            | AgentEvent::ToolcallEnd { .. } => self.end_line()?,

            AgentEvent::ToolExecutionStart { tool_call_id, tool_name, args } => {
                self.line(&format!("{tool_name} [{tool_call_id}] running with {args}"))?;
                self.output_at_line_start = true;
            }
            AgentEvent::ToolExecutionDelta { delta, .. } => self.tool_output(delta)?,
            AgentEvent::ToolExecutionEnd { tool_call_id, tool_name, output, is_error, .. } => {
                let what = if *is_error {
                    format!("failed: {}", one_line(output, 72))
                } else {
                    format!("finished ({} bytes of output)", output.len())
                };
                self.line(&format!("{tool_name} [{tool_call_id}] {what}"))?;
            }

            AgentEvent::Error { error, .. } => self.line(&format!("!! error: {error}"))?,
            // Node brackets, step ends, state and graph-mode progress: not for a transcript.
            _ => {}
        }
        self.out.flush()
    }

    /// Prints a whole line, ending any inline stream first.
    fn line(&mut self, text: &str) -> io::Result<()> {
        self.end_line()?;
        writeln!(self.out, "{text}")
    }

    /// Starts an inline stream with a prefix.
    fn open(&mut self, prefix: &str) -> io::Result<()> {
        self.end_line()?;
        self.inline(prefix)
    }

    /// Continues an inline stream.
    fn inline(&mut self, text: &str) -> io::Result<()> {
        self.mid_line = true;
        write!(self.out, "{text}")
    }

    /// Ends an inline stream, if one is open.
    fn end_line(&mut self) -> io::Result<()> {
        if self.mid_line {
            self.mid_line = false;
            writeln!(self.out)?;
        }
        Ok(())
    }

    /// Prints a tool-output delta, indenting every line it starts.
    fn tool_output(&mut self, delta: &str) -> io::Result<()> {
        for piece in delta.split_inclusive('\n') {
            if self.output_at_line_start {
                self.end_line()?;
                write!(self.out, "  | ")?;
            }
            write!(self.out, "{piece}")?;
            self.output_at_line_start = piece.ends_with('\n');
            self.mid_line = !self.output_at_line_start;
        }
        Ok(())
    }

    /// Lists calls, one per line.
    fn calls(&mut self, calls: &[ToolCall]) -> io::Result<()> {
        for call in calls {
            self.line(&format!("     {} [{}] {}", call.name, call.id, call.arguments))?;
        }
        Ok(())
    }
}

/// Reads a run's events to the end, printing each as it arrives, then waits for the run's
/// result. Returns the events too, so a caller can check what happened.
///
/// This is the loop `local_tool.rs` spells out: `while let Some(event) = stream.next().await`,
/// then `stream.result().await`.
pub async fn run_printed(
    mut stream: ExecuteStream,
) -> io::Result<(Vec<AgentEvent>, ExecuteResult)> {
    let mut printer = EventPrinter::stdout();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        printer.print(&event)?;
        events.push(event);
    }
    Ok((events, stream.result().await))
}

/// Prints what a run did: its status, steps, usage, cost and final answer.
pub fn print_summary(result: &ExecuteResult) -> io::Result<()> {
    let mut out = io::stdout().lock();
    let u = &result.usage;
    writeln!(out, "summary")?;
    writeln!(out, "  status:       {}", result.status)?;
    writeln!(out, "  steps:        {}", result.steps.len())?;
    writeln!(out, "  new messages: {}", result.messages.len())?;
    writeln!(out, "  usage:        {} in + {} out = {} tokens", u.input, u.output, u.total)?;
    writeln!(out, "  cost:         ${:.6}", result.cost.total)?;
    writeln!(out, "  final output: {}", result.response().final_output)?;
    if let Some(error) = &result.error {
        writeln!(out, "  error:        {error}")?;
    }
    Ok(())
}

/// The first eight characters of an id (session ids are UUIDs).
fn short(id: &str) -> &str {
    id.char_indices().nth(8).map_or(id, |(i, _)| &id[..i])
}

/// The first line of `text`, cut to `max` characters.
fn one_line(text: &str, max: usize) -> String {
    let first = text.lines().next().unwrap_or_default();
    let mut line: String = first.chars().take(max).collect();
    if line.len() < text.len() {
        line.push_str(" ...");
    }
    line
}
