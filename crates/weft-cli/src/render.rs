//! Showing a run as it happens: [`Renderer`] turns [`AgentEvent`]s into text for a person,
//! [`JsonLines`] writes each event as one line of JSON (the native canonical form).
//!
//! Both write to any [`Write`] and never flush on their own: the caller flushes whenever the run
//! has nothing more to say for the moment (see [`Sink::flush`]), so output appears as it happens
//! without a system call per token.
//!
//! What the renderer writes:
//!
//! ```text
//! thinking: The user wants an echo.          thinking (dimmed instead, with colour)
//! Let me echo that.                          text, as it streams
//! [tool] echo {"text":"hello world"}         a tool call, once its arguments are complete
//!   hello world                              the tool's output, indented, as it streams
//! [tool] echo: ok                            its result (`error` when it failed)
//! It said hello world.
//! ```
//!
//! Text the renderer did not write itself (the model's text and thinking, tool names, arguments
//! and output) goes through [`write_visible`]: control characters other than `\n` and `\t` are
//! shown as `^[`, `^M`, `<U+009B>` … rather than reaching the terminal (see [`crate::sanitize`]).

use std::collections::{HashMap, HashSet};
use std::io::{self, Write};

use weft_protocol::{Encoder, Framing, Protocol};

use weft_core::{AgentEvent, Message, ToolCall};

use crate::sanitize::write_visible;

const DIM: &str = "\x1b[2m";
const CYAN: &str = "\x1b[36m";
const RED_BOLD: &str = "\x1b[1;31m";
const RESET: &str = "\x1b[0m";

/// What the plain (colourless) renderer puts before each line of thinking.
pub(crate) const THINKING_PREFIX: &str = "thinking: ";
/// How a tool's output is indented.
const INDENT: &str = "  ";

/// Where run events go.
pub(crate) trait Sink {
    /// Shows one event, the session's event `seq`.
    fn event(&mut self, seq: u64, event: &AgentEvent) -> io::Result<()>;

    /// The node run the next event belongs to, as the session's log records it.
    fn node(&mut self, node: Option<&std::sync::Arc<str>>) {
        let _ = node;
    }

    /// Ends an unfinished line, so what follows (a shell prompt, an error) starts on its own.
    fn finish(&mut self) -> io::Result<()> {
        Ok(())
    }

    /// Hands everything written so far to the output.
    fn flush(&mut self) -> io::Result<()>;

    /// Whether the output is in the middle of a line (so a status line drawn on the same
    /// terminal would overwrite it).
    fn mid_line(&self) -> bool {
        false
    }
}

/// Each event in a wire format, one JSON object per line, written straight into one reused
/// buffer ([`Encoder::encode_to`]).
pub(crate) struct JsonLines<W: Write> {
    out: W,
    encoder: Box<dyn Encoder>,
    buf: Vec<u8>,
}

impl<W: Write> JsonLines<W> {
    /// Writes `protocol`'s frames to `out`.
    pub(crate) fn new(out: W, protocol: Protocol) -> Self {
        Self { out, encoder: protocol.encoder(), buf: Vec::with_capacity(1 << 12) }
    }

    fn write_buf(&mut self) -> io::Result<()> {
        let written = self.out.write_all(&self.buf);
        self.buf.clear();
        written
    }
}

impl<W: Write> Sink for JsonLines<W> {
    fn node(&mut self, node: Option<&std::sync::Arc<str>>) {
        self.encoder.set_node(node);
    }

    fn event(&mut self, seq: u64, event: &AgentEvent) -> io::Result<()> {
        // NDJSON framing: terminal markers that are not JSON objects (the Vercel stream's
        // `[DONE]`) belong to SSE and are left out.
        self.encoder.encode_to(seq, event, Framing::Ndjson, &mut self.buf);
        self.write_buf()
    }

    fn finish(&mut self) -> io::Result<()> {
        self.encoder.finish_to(Framing::Ndjson, &mut self.buf);
        self.write_buf()
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }
}

/// What the last thing written belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Section {
    /// Nothing yet, or a finished line that belongs to nothing in particular.
    None,
    /// The model's text.
    Text,
    /// The model's thinking.
    Thinking,
    /// A tool call's line or output (by call id).
    Tool(String),
    /// A tool call's arguments, streaming onto its line (by block index).
    Args(u32),
}

/// The tool call whose arguments are streaming onto the current line.
struct StreamingArgs {
    /// Its block index in the assistant message.
    index: u32,
    /// The arguments' text so far, as the model sends it.
    text: String,
}

/// The terminal renderer: fed one event at a time.
pub(crate) struct Renderer<W: Write> {
    out: W,
    color: bool,
    /// Whether nothing has been written on the current line yet.
    at_line_start: bool,
    section: Section,
    /// Tool names by call id.
    names: HashMap<String, String>,
    /// Output each running call has streamed so far.
    streamed: HashMap<String, String>,
    /// Calls whose result has been shown.
    shown: HashSet<String>,
    /// The call whose arguments are being shown as they stream (one at a time: the arguments
    /// of calls streamed in parallel appear whole at their end).
    args: Option<StreamingArgs>,
}

impl<W: Write> Renderer<W> {
    /// Writes to `out`; `color` allows ANSI escapes (dimmed thinking, coloured tool lines).
    pub(crate) fn new(out: W, color: bool) -> Self {
        Self {
            out,
            color,
            at_line_start: true,
            section: Section::None,
            names: HashMap::new(),
            streamed: HashMap::new(),
            shown: HashSet::new(),
            args: None,
        }
    }

    /// The output, for tests.
    #[cfg(test)]
    fn into_inner(self) -> W {
        self.out
    }

    /// Writes `text`, the renderer's own, as is, keeping track of line starts.
    fn raw(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        self.out.write_all(text.as_bytes())?;
        self.at_line_start = text.ends_with('\n');
        Ok(())
    }

    /// Writes `text` from elsewhere (the model, a tool) with its control characters made
    /// visible, keeping track of line starts.
    fn foreign(&mut self, text: &str) -> io::Result<()> {
        if text.is_empty() {
            return Ok(());
        }
        write_visible(&mut self.out, text)?;
        self.at_line_start = text.ends_with('\n');
        Ok(())
    }

    /// Ends the current line if something is on it.
    fn end_line(&mut self) -> io::Result<()> {
        if !self.at_line_start {
            self.raw("\n")?;
        }
        Ok(())
    }

    /// Writes `text` (from elsewhere: its controls are made visible), starting each new line
    /// with `prefix` and wrapping each piece in `style` (with colour on).
    fn lines(&mut self, text: &str, prefix: &str, style: Option<&str>) -> io::Result<()> {
        for piece in text.split_inclusive('\n') {
            if self.at_line_start {
                self.out.write_all(prefix.as_bytes())?;
            }
            match style {
                Some(style) if self.color => {
                    // Every piece is closed on its own, so an interrupted run never leaves the
                    // terminal styled.
                    let (body, newline) = match piece.strip_suffix('\n') {
                        Some(body) => (body, "\n"),
                        None => (piece, ""),
                    };
                    self.out.write_all(style.as_bytes())?;
                    write_visible(&mut self.out, body)?;
                    write!(self.out, "{RESET}{newline}")?;
                }
                _ => write_visible(&mut self.out, piece)?,
            }
            self.at_line_start = piece.ends_with('\n');
        }
        Ok(())
    }

    /// Starts writing for `section`: a new line unless the output continues what is there.
    fn enter(&mut self, section: Section) -> io::Result<()> {
        if self.section != section {
            self.end_line()?;
            self.section = section;
        }
        Ok(())
    }

    /// The `[tool]` marker that starts every tool line.
    fn tool_marker(&mut self) -> io::Result<()> {
        if self.color {
            write!(self.out, "{CYAN}[tool]{RESET}")
        } else {
            write!(self.out, "[tool]")
        }
    }

    /// A tool call starts: its line opens, and its arguments stream onto it.
    fn tool_call_start(&mut self, index: u32, id: &str, name: &str) -> io::Result<()> {
        self.names.insert(id.to_string(), name.to_string());
        if self.args.is_some() && matches!(self.section, Section::Args(_)) {
            // Another call's arguments are on the line: this one's appear whole at its end.
            return Ok(());
        }
        self.end_line()?;
        self.tool_marker()?;
        self.raw(" ")?;
        self.foreign(name)?;
        self.raw(" ")?;
        self.section = Section::Args(index);
        self.args = Some(StreamingArgs { index, text: String::new() });
        Ok(())
    }

    fn tool_call_delta(&mut self, index: u32, delta: &str) -> io::Result<()> {
        if self.section != Section::Args(index) {
            return Ok(());
        }
        match &mut self.args {
            Some(args) if args.index == index => args.text.push_str(delta),
            _ => return Ok(()),
        }
        self.foreign(delta)
    }

    /// A tool call is complete: its line ends when its streamed arguments were shown
    /// uninterrupted and are what the call holds; otherwise it is written whole.
    fn tool_call_end(&mut self, index: u32, call: &ToolCall) -> io::Result<()> {
        let streamed = match self.args.take() {
            Some(args) if args.index == index => Some(args),
            other => {
                self.args = other;
                None
            }
        };
        if self.section == Section::Args(index) {
            let shown = streamed.is_some_and(|args| {
                !args.text.is_empty()
                    && serde_json::from_str::<serde_json::Value>(&args.text)
                        .is_ok_and(|value| value == *call.arguments)
            });
            if shown {
                self.names.insert(call.id.clone(), call.name.clone());
                self.raw("\n")?;
                self.section = Section::Tool(call.id.clone());
                return Ok(());
            }
            // What streamed is not the call's arguments (cut, or repaired): the line is
            // ended and the call written whole below it.
            self.end_line()?;
            self.section = Section::None;
        }
        self.tool_call(call)
    }

    fn tool_call(&mut self, call: &ToolCall) -> io::Result<()> {
        self.names.insert(call.id.clone(), call.name.clone());
        self.end_line()?;
        self.tool_marker()?;
        let args = serde_json::to_string(&call.arguments).map_err(io::Error::from)?;
        self.raw(" ")?;
        self.foreign(&call.name)?;
        self.raw(" ")?;
        self.foreign(&args)?;
        self.raw("\n")?;
        self.section = Section::Tool(call.id.clone());
        Ok(())
    }

    /// Output of call `id` follows: when something else was written since its last line, a
    /// header says whose output it is.
    fn enter_tool_output(&mut self, id: &str) -> io::Result<()> {
        if matches!(&self.section, Section::Tool(current) if current == id) {
            return Ok(());
        }
        self.end_line()?;
        let name = self.names.get(id).cloned().unwrap_or_else(|| id.to_string());
        self.tool_marker()?;
        self.raw(" ")?;
        self.foreign(&name)?;
        self.raw(" output:\n")?;
        self.section = Section::Tool(id.to_string());
        Ok(())
    }

    fn tool_delta(&mut self, id: &str, delta: &str) -> io::Result<()> {
        if delta.is_empty() {
            return Ok(());
        }
        self.enter_tool_output(id)?;
        // No allocation per delta but the output's own growth.
        match self.streamed.get_mut(id) {
            Some(streamed) => streamed.push_str(delta),
            None => {
                self.streamed.insert(id.to_string(), delta.to_string());
            }
        }
        self.lines(delta, INDENT, None)
    }

    /// A call's result: whatever of its output was not streamed yet, then a status line.
    fn tool_result(
        &mut self,
        id: &str,
        name: &str,
        output: &str,
        is_error: bool,
    ) -> io::Result<()> {
        self.shown.insert(id.to_string());
        self.names.entry(id.to_string()).or_insert_with(|| name.to_string());
        let streamed = self.streamed.remove(id).unwrap_or_default();
        let rest = match output.strip_prefix(streamed.as_str()) {
            Some(rest) => rest,
            None => {
                // The final output is not a continuation of what streamed: show it whole.
                self.end_line()?;
                output
            }
        };
        if !rest.is_empty() {
            self.enter_tool_output(id)?;
            self.lines(rest, INDENT, None)?;
        }
        self.end_line()?;
        self.tool_marker()?;
        self.raw(" ")?;
        self.foreign(name)?;
        self.raw(": ")?;
        match (is_error, self.color) {
            (true, true) => write!(self.out, "{RED_BOLD}error{RESET}")?,
            (true, false) => self.raw("error")?,
            (false, _) => self.raw("ok")?,
        }
        self.raw("\n")?;
        self.section = Section::None;
        Ok(())
    }

    /// A suspension: the calls the run waits for, one line each.
    fn waiting(&mut self, what: &str, calls: &[ToolCall]) -> io::Result<()> {
        self.end_line()?;
        for call in calls {
            let args = serde_json::to_string(&call.arguments).map_err(io::Error::from)?;
            self.raw(&format!("[{what}] "))?;
            self.foreign(&call.name)?;
            self.raw(" ")?;
            self.foreign(&args)?;
            self.raw("\n")?;
        }
        self.section = Section::None;
        Ok(())
    }
}

impl<W: Write> Sink for Renderer<W> {
    fn event(&mut self, _seq: u64, event: &AgentEvent) -> io::Result<()> {
        match event {
            AgentEvent::ThinkingStart { .. } => self.enter(Section::Thinking),
            AgentEvent::ThinkingDelta { delta, .. } => {
                self.enter(Section::Thinking)?;
                let prefix = if self.color { "" } else { THINKING_PREFIX };
                self.lines(delta, prefix, Some(DIM))
            }
            AgentEvent::ThinkingEnd { .. } => {
                self.end_line()?;
                self.section = Section::None;
                Ok(())
            }
            AgentEvent::TextStart { .. } => self.enter(Section::Text),
            AgentEvent::TextDelta { delta, .. } => {
                self.enter(Section::Text)?;
                self.foreign(delta)
            }
            AgentEvent::ToolcallStart { index, id, name } => self.tool_call_start(*index, id, name),
            AgentEvent::ToolcallDelta { index, delta } => self.tool_call_delta(*index, delta),
            AgentEvent::ToolcallEnd { index, tool_call } => self.tool_call_end(*index, tool_call),
            AgentEvent::ToolExecutionStart { tool_call_id, tool_name, .. } => {
                self.names.entry(tool_call_id.clone()).or_insert_with(|| tool_name.clone());
                Ok(())
            }
            AgentEvent::ToolExecutionDelta { tool_call_id, delta } => {
                self.tool_delta(tool_call_id, delta)
            }
            AgentEvent::ToolExecutionEnd { tool_call_id, tool_name, output, is_error, .. } => {
                self.tool_result(tool_call_id, tool_name, output, *is_error)
            }
            // Calls refused before running (unknown tool, invalid arguments) have no
            // tool_execution_* events: their result message is all there is.
            AgentEvent::MessageEnd { message } => match &**message {
                Message::ToolResult(r) if !self.shown.contains(&r.tool_call_id) => {
                    self.tool_result(&r.tool_call_id, &r.tool_name, &r.text_content(), r.is_error)
                }
                _ => Ok(()),
            },
            AgentEvent::AwaitingToolExecution { tool_calls, .. } => {
                self.waiting("awaiting remote result", tool_calls)
            }
            AgentEvent::ApprovalRequired { tool_calls, .. } => {
                self.waiting("awaiting approval", tool_calls)
            }
            AgentEvent::Error { .. } | AgentEvent::SessionEnd { .. } => self.finish(),
            _ => Ok(()),
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        self.end_line()?;
        self.section = Section::None;
        self.args = None;
        Ok(())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    fn mid_line(&self) -> bool {
        !self.at_line_start
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::Arc;

    use serde_json::json;
    use weft_core::{Role, ToolResultMessage};

    use super::*;

    fn render(color: bool, events: &[AgentEvent]) -> String {
        let mut r = Renderer::new(Vec::new(), color);
        for e in events {
            r.event(0, e).unwrap();
        }
        String::from_utf8(r.into_inner()).unwrap()
    }

    fn thinking_then_text() -> Vec<AgentEvent> {
        vec![
            AgentEvent::MessageStart { role: Role::Assistant },
            AgentEvent::ThinkingStart { index: 0 },
            AgentEvent::ThinkingDelta { index: 0, delta: "Let me ".into() },
            AgentEvent::ThinkingDelta { index: 0, delta: "think.\nSecond".into() },
            AgentEvent::ThinkingDelta { index: 0, delta: " line.".into() },
            AgentEvent::ThinkingEnd {
                index: 0,
                thinking: "Let me think.\nSecond line.".into(),
                signature: None,
            },
            AgentEvent::TextStart { index: 1 },
            AgentEvent::TextDelta { index: 1, delta: "Hello".into() },
            AgentEvent::TextDelta { index: 1, delta: ", world".into() },
            AgentEvent::TextEnd { index: 1, text: "Hello, world".into() },
        ]
    }

    fn call(id: &str, name: &str, args: serde_json::Value) -> ToolCall {
        ToolCall { id: id.into(), name: name.into(), arguments: args.into() }
    }

    #[test]
    fn plain_thinking_is_prefixed_on_every_line_and_text_follows_on_its_own_line() {
        let out = render(false, &thinking_then_text());
        assert_eq!(out, "thinking: Let me think.\nthinking: Second line.\nHello, world");
        assert!(!out.contains('\x1b'), "no escapes without colour: {out:?}");
    }

    #[test]
    fn coloured_thinking_is_dimmed_piece_by_piece_and_text_is_not() {
        let out = render(true, &thinking_then_text());
        assert_eq!(
            out,
            "\x1b[2mLet me \x1b[0m\x1b[2mthink.\x1b[0m\n\x1b[2mSecond\x1b[0m\x1b[2m line.\x1b[0m\n\
             Hello, world"
        );
        assert!(!out.contains(THINKING_PREFIX));
    }

    #[test]
    fn session_end_ends_the_last_line() {
        let mut events = thinking_then_text();
        events.push(AgentEvent::SessionEnd {
            session_id: "s".into(),
            status: weft_core::SessionStatus::Completed,
            messages: vec![],
            usage: Box::default(),
            cost: Box::default(),
        });
        assert!(render(false, &events).ends_with("Hello, world\n"));
    }

    #[test]
    fn tool_call_with_arguments_streamed_output_and_result() {
        let c = call("c1", "echo", json!({"text": "hello big world"}));
        let events = [
            AgentEvent::TextStart { index: 0 },
            AgentEvent::TextDelta { index: 0, delta: "Let me echo.".into() },
            AgentEvent::TextEnd { index: 0, text: "Let me echo.".into() },
            AgentEvent::ToolcallStart { index: 1, id: "c1".into(), name: "echo".into() },
            AgentEvent::ToolcallDelta { index: 1, delta: "{\"text\"".into() },
            AgentEvent::ToolcallDelta { index: 1, delta: ": \"hello big world\"}".into() },
            AgentEvent::ToolcallEnd { index: 1, tool_call: c.clone() },
            AgentEvent::ToolExecutionStart {
                tool_call_id: "c1".into(),
                tool_name: "echo".into(),
                args: c.arguments.clone(),
            },
            AgentEvent::ToolExecutionDelta { tool_call_id: "c1".into(), delta: "hello ".into() },
            AgentEvent::ToolExecutionDelta { tool_call_id: "c1".into(), delta: "big ".into() },
            AgentEvent::ToolExecutionDelta { tool_call_id: "c1".into(), delta: "world".into() },
            AgentEvent::ToolExecutionEnd {
                tool_call_id: "c1".into(),
                tool_name: "echo".into(),
                output: "hello big world".into(),
                details: None,
                is_error: false,
            },
            // The result message that follows is not shown twice.
            AgentEvent::MessageEnd {
                message: Arc::new(Message::ToolResult(ToolResultMessage::ok(
                    &c,
                    "hello big world",
                ))),
            },
            AgentEvent::TextStart { index: 0 },
            AgentEvent::TextDelta { index: 0, delta: "Done.".into() },
        ];
        assert_eq!(
            render(false, &events),
            "Let me echo.\n\
             [tool] echo {\"text\": \"hello big world\"}\n  \
             hello big world\n\
             [tool] echo: ok\n\
             Done."
        );
    }

    #[test]
    fn arguments_appear_on_the_tool_line_as_they_stream() {
        let mut r = Renderer::new(Vec::new(), false);
        let c = call("c1", "search", json!({"q": "rust"}));
        r.event(0, &AgentEvent::ToolcallStart { index: 0, id: "c1".into(), name: "search".into() })
            .unwrap();
        r.event(0, &AgentEvent::ToolcallDelta { index: 0, delta: "{\"q\":".into() }).unwrap();
        assert_eq!(String::from_utf8_lossy(&r.out), "[tool] search {\"q\":");
        assert!(r.mid_line());
        r.event(0, &AgentEvent::ToolcallDelta { index: 0, delta: "\"rust\"}".into() }).unwrap();
        r.event(0, &AgentEvent::ToolcallEnd { index: 0, tool_call: c }).unwrap();
        assert_eq!(String::from_utf8_lossy(&r.into_inner()), "[tool] search {\"q\":\"rust\"}\n");
    }

    #[test]
    fn arguments_that_were_cut_or_interleaved_are_written_whole_at_the_end() {
        let a = call("a", "search", json!({"q": "rust"}));
        let b = call("b", "fetch", json!({"url": "u"}));
        let events = [
            // a's stream is not its arguments (a repaired cut): its line is ended, then written
            // whole.
            AgentEvent::ToolcallStart { index: 0, id: "a".into(), name: "search".into() },
            AgentEvent::ToolcallDelta { index: 0, delta: "{\"q\": \"ru".into() },
            AgentEvent::ToolcallEnd { index: 0, tool_call: a },
            // b streams while c's start interleaves: c's arguments never stream live.
            AgentEvent::ToolcallStart { index: 1, id: "b".into(), name: "fetch".into() },
            AgentEvent::ToolcallStart { index: 2, id: "c".into(), name: "echo".into() },
            AgentEvent::ToolcallDelta { index: 2, delta: "{}".into() },
            AgentEvent::ToolcallDelta { index: 1, delta: "{\"url\":\"u\"}".into() },
            AgentEvent::ToolcallEnd { index: 1, tool_call: b },
            AgentEvent::ToolcallEnd { index: 2, tool_call: call("c", "echo", json!({})) },
            // Text interrupting a streaming call ends its line; the call is written whole.
            AgentEvent::ToolcallStart { index: 3, id: "d".into(), name: "echo".into() },
            AgentEvent::ToolcallDelta { index: 3, delta: "{\"te".into() },
            AgentEvent::TextDelta { index: 4, delta: "hm".into() },
            AgentEvent::ToolcallDelta { index: 3, delta: "xt\":1}".into() },
            AgentEvent::ToolcallEnd { index: 3, tool_call: call("d", "echo", json!({"text": 1})) },
        ];
        assert_eq!(
            render(false, &events),
            "[tool] search {\"q\": \"ru\n\
             [tool] search {\"q\":\"rust\"}\n\
             [tool] fetch {\"url\":\"u\"}\n\
             [tool] echo {}\n\
             [tool] echo {\"te\n\
             hm\n\
             [tool] echo {\"text\":1}\n"
        );
    }

    #[test]
    fn unstreamed_output_is_shown_whole_and_errors_are_marked() {
        let c = call("c1", "current_time", json!({}));
        let events = [
            AgentEvent::ToolcallEnd { index: 0, tool_call: c },
            AgentEvent::ToolExecutionEnd {
                tool_call_id: "c1".into(),
                tool_name: "current_time".into(),
                output: "2025-01-01T00:00:00Z".into(),
                details: None,
                is_error: false,
            },
        ];
        assert_eq!(
            render(false, &events),
            "[tool] current_time {}\n  2025-01-01T00:00:00Z\n[tool] current_time: ok\n"
        );

        // A call refused before it ran: only its result message tells.
        let c = call("c2", "nope", json!({"x": 1}));
        let events = [
            AgentEvent::ToolcallEnd { index: 0, tool_call: c.clone() },
            AgentEvent::MessageEnd {
                message: Arc::new(Message::ToolResult(ToolResultMessage::error(
                    &c,
                    "Tool nope not found",
                ))),
            },
        ];
        assert_eq!(
            render(false, &events),
            "[tool] nope {\"x\":1}\n  Tool nope not found\n[tool] nope: error\n"
        );
        let coloured = render(true, &events);
        assert!(coloured.contains("nope: \x1b[1;31merror\x1b[0m\n"), "{coloured:?}");
    }

    #[test]
    fn interleaved_outputs_of_parallel_calls_say_whose_they_are() {
        let events = [
            AgentEvent::ToolcallEnd {
                index: 0,
                tool_call: call("a", "echo", json!({"text": "x"})),
            },
            AgentEvent::ToolcallEnd {
                index: 1,
                tool_call: call("b", "echo", json!({"text": "y"})),
            },
            AgentEvent::ToolExecutionDelta { tool_call_id: "a".into(), delta: "x".into() },
            AgentEvent::ToolExecutionDelta { tool_call_id: "b".into(), delta: "y".into() },
        ];
        assert_eq!(
            render(false, &events),
            "[tool] echo {\"text\":\"x\"}\n[tool] echo {\"text\":\"y\"}\n\
             [tool] echo output:\n  x\n[tool] echo output:\n  y"
        );
    }

    #[test]
    fn final_output_that_differs_from_the_stream_is_shown() {
        let events = [
            AgentEvent::ToolcallEnd { index: 0, tool_call: call("a", "build", json!({})) },
            AgentEvent::ToolExecutionDelta { tool_call_id: "a".into(), delta: "step 1".into() },
            AgentEvent::ToolExecutionEnd {
                tool_call_id: "a".into(),
                tool_name: "build".into(),
                output: "built".into(),
                details: None,
                is_error: true,
            },
        ];
        assert_eq!(
            render(false, &events),
            "[tool] build {}\n  step 1\n  built\n[tool] build: error\n"
        );
    }

    #[test]
    fn suspensions_list_the_calls() {
        let events = [AgentEvent::AwaitingToolExecution {
            session_id: "s".into(),
            tool_calls: vec![call("r", "read_page", json!({"selector": "h1"}))],
        }];
        assert_eq!(
            render(false, &events),
            "[awaiting remote result] read_page {\"selector\":\"h1\"}\n"
        );
    }

    #[test]
    fn control_characters_from_the_model_and_tools_never_reach_the_terminal() {
        let evil = "a\x1b[31mb\0c\u{9b}d\re\x7f";
        let c = call("c1", &format!("echo{evil}"), json!({"text": evil}));
        let events = [
            AgentEvent::ThinkingStart { index: 0 },
            AgentEvent::ThinkingDelta { index: 0, delta: format!("{evil}\n{evil}") },
            AgentEvent::ThinkingEnd { index: 0, thinking: String::new(), signature: None },
            AgentEvent::TextStart { index: 1 },
            AgentEvent::TextDelta { index: 1, delta: evil.into() },
            AgentEvent::ToolcallEnd { index: 2, tool_call: c.clone() },
            AgentEvent::ToolExecutionDelta { tool_call_id: "c1".into(), delta: evil.into() },
            AgentEvent::ToolExecutionEnd {
                tool_call_id: "c1".into(),
                tool_name: c.name.clone(),
                output: format!("{evil}!"),
                details: None,
                is_error: false,
            },
            AgentEvent::AwaitingToolExecution {
                session_id: "s".into(),
                tool_calls: vec![c.clone()],
            },
        ];
        let shown = "a^[[31mb^@c<U+009B>d^Me^?";
        let plain = render(false, &events);
        assert!(!plain.contains(['\x1b', '\0', '\u{9b}', '\r', '\x7f']), "{plain:?}");
        assert_eq!(
            plain,
            format!(
                "thinking: {shown}\nthinking: {shown}\n{shown}\n\
                 [tool] echo{shown} {{\"text\":\"a\\u001b[31mb\\u0000c<U+009B>d\\re^?\"}}\n\
                 \x20 {shown}!\n[tool] echo{shown}: ok\n\
                 [awaiting remote result] echo{shown} {{\"text\":\"a\\u001b[31mb\\u0000c<U+009B>d\\re^?\"}}\n"
            )
        );
        // With colour, the only escapes are the renderer's own.
        let coloured = render(true, &events);
        let own = coloured.replace(DIM, "").replace(CYAN, "").replace(RESET, "");
        assert!(!own.contains(['\x1b', '\0', '\u{9b}', '\r', '\x7f']), "{coloured:?}");
        assert!(coloured.starts_with(&format!("{DIM}{shown}{RESET}\n{DIM}{shown}{RESET}\n")));
    }

    #[test]
    fn json_lines_are_the_protocols_frames_one_per_line() {
        let events = thinking_then_text();
        let mut sink = JsonLines::new(Vec::new(), Protocol::Native);
        for (seq, e) in (1..).zip(&events) {
            sink.event(seq, e).unwrap();
        }
        sink.finish().unwrap();
        let text = String::from_utf8(sink.out).unwrap();
        let plan: Vec<&AgentEvent> = events.iter().filter(|e| e.is_plan_event()).collect();
        let lines: Vec<&str> = text.lines().collect();
        // `execute_complete` follows a `session_end`, when the stream has one.
        let ends = events.iter().filter(|e| e.kind() == "session_end").count();
        assert_eq!(lines.len(), plan.len() + ends, "{text}");
        for (line, event) in lines.iter().zip(&plan) {
            assert_eq!(serde_json::from_str::<AgentEvent>(line).unwrap(), **event);
        }

        // The Vercel stream's `[DONE]` marker is SSE framing: JSON lines carry objects only.
        let mut sink = JsonLines::new(Vec::new(), Protocol::Vercel);
        for (seq, e) in (1..).zip(&events) {
            sink.event(seq, e).unwrap();
        }
        sink.finish().unwrap();
        let text = String::from_utf8(sink.out).unwrap();
        assert!(text.lines().all(|l| l.starts_with('{')), "{text}");
        assert!(text.lines().last().unwrap().contains("\"finish\""), "{text}");
    }
}
