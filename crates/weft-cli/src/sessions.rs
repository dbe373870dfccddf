//! `weft sessions list|show|delete`: the sessions a session store keeps.
//!
//! `show` prints the conversation, then the step trace read from the session's event log (its
//! `step_end` events), then the totals:
//!
//! ```text
//! session 5c1d…
//! status: completed · provider: faux · model: faux-pro · 4 messages · 2 steps
//! created: 2025-01-31T12:00:00Z · updated: 2025-01-31T12:00:02Z
//!
//! user:
//!   Echo please
//! assistant (faux-pro):
//!   thinking: The user wants an echo.        (dimmed instead, with colour)
//!   Let me echo that.
//!   [tool] echo {"text":"hi"} (c1)
//! tool result (echo, c1): ok
//!   hi
//! assistant (faux-pro):
//!   It said hi.
//!
//! steps:
//!   step 0 · model faux-pro · 12ms · tokens: 10 in, 5 out · cost: $0.0035
//!     tool echo (c1) · 2ms · ok
//!   step 1 · model faux-pro · 9ms · tokens: 20 in, 4 out · cost: $0.0028
//! total: tokens: 30 in, 9 out · cost: $0.0063 · status: completed
//! ```
//!
//! Everything a model, a tool or a client wrote (text, thinking, names, arguments, ids, even
//! model names) goes through [`crate::sanitize`]. `--json` prints the stored session (head,
//! messages, the run state if one is under way or suspended, and the steps) for scripts.

use std::fmt::Write as _;
use std::io::{self, BufWriter, Write};
use std::time::{Duration, SystemTime};

use clap::{Args, Subcommand};
use serde::Serialize;
use weft_core::History;
use weft_core::store::{OwnerScope, RunState, SessionHead, StoredSession};
use weft_core::{
    AgentEvent, AgentStep, AssistantContent, Message, SessionStatus, SessionStore, StopReason,
    UserContent,
};

use crate::Failure;
use crate::sanitize::{visible, write_visible};
use crate::store::StoreArgs;
use crate::summary::{dollars, tokens};

const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";
/// How many events one read of the event log asks for.
const EVENT_PAGE: usize = 1000;

/// `weft sessions …`.
#[derive(Debug, Subcommand)]
pub(crate) enum SessionsCommand {
    /// List the sessions, most recently updated first: id, status, model, message count, last
    /// update (UTC) and cost.
    List(ListArgs),
    /// Show a session: its conversation (each message by role: text, thinking, tool calls with
    /// their arguments, tool results), its steps (model, latency, tokens, cost, tool executions
    /// with their durations) and its totals.
    Show(ShowArgs),
    /// Delete a session with everything it has (messages, events, run state).
    Delete(DeleteArgs),
}

#[derive(Debug, Args)]
pub(crate) struct ListArgs {
    /// Show at most N sessions.
    #[arg(
        long,
        value_name = "N",
        default_value_t = 20,
        value_parser = clap::value_parser!(u32).range(1..)
    )]
    limit: u32,

    /// Print the sessions' heads as one JSON array instead.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    store: StoreArgs,

    #[command(flatten)]
    remote: crate::remote::ServerArgs,
}

#[derive(Debug, Args)]
pub(crate) struct ShowArgs {
    /// The session's id (`weft run` prints it on stderr; `weft sessions list` lists them).
    id: String,

    /// Print the session as JSON (head, messages, run state, steps) instead.
    #[arg(long)]
    json: bool,

    #[command(flatten)]
    store: StoreArgs,

    #[command(flatten)]
    remote: crate::remote::ServerArgs,
}

#[derive(Debug, Args)]
pub(crate) struct DeleteArgs {
    /// The session's id.
    id: String,

    /// Delete it even while it is running (for a session left `running` by a process that
    /// died).
    #[arg(long)]
    force: bool,

    #[command(flatten)]
    store: StoreArgs,

    #[command(flatten)]
    remote: crate::remote::ServerArgs,
}

/// Runs a `weft sessions` command.
pub(crate) fn command(command: SessionsCommand, color: bool) -> Result<(), Failure> {
    let runtime = crate::runtime()?;
    runtime.block_on(async {
        let remote = match &command {
            SessionsCommand::List(a) => &a.remote,
            SessionsCommand::Show(a) => &a.remote,
            SessionsCommand::Delete(a) => &a.remote,
        };
        if let Some(client) = remote.client() {
            return remote_command(&client, &command, color).await;
        }
        let store_args = match &command {
            SessionsCommand::List(a) => &a.store,
            SessionsCommand::Show(a) => &a.store,
            SessionsCommand::Delete(a) => &a.store,
        };
        let store = store_args.open().await.map_err(|e| Failure::usage(&e))?;
        match &command {
            SessionsCommand::List(args) => list(store.as_ref(), args).await,
            SessionsCommand::Show(args) => show(store.as_ref(), args, color).await,
            SessionsCommand::Delete(args) => delete(store.as_ref(), args).await,
        }
    })
}

/// `weft sessions … --server URL`: the server's sessions (those the API key owns).
async fn remote_command(
    client: &weft_client::Client,
    command: &SessionsCommand,
    color: bool,
) -> Result<(), Failure> {
    use crate::remote::failed;
    match command {
        SessionsCommand::List(args) => {
            let limit = usize::try_from(args.limit).unwrap_or(usize::MAX);
            let heads =
                client.list_sessions(Some(limit.min(1000))).await.map_err(|e| failed(&e))?;
            if args.json {
                let json = serde_json::to_string(&heads)
                    .map_err(|e| Failure::run(format!("cannot encode the sessions: {e}")))?;
                return to_stdout(|out| writeln!(out, "{}", json_safe(&json)));
            }
            to_stdout(|out| write_list(out, &heads))
        }
        SessionsCommand::Show(args) => {
            let view = client.get_session(&args.id).await.map_err(|e| failed(&e))?;
            if args.json {
                let json = serde_json::to_string_pretty(&view)
                    .map_err(|e| Failure::run(format!("cannot encode the session: {e}")))?;
                return to_stdout(|out| writeln!(out, "{}", json_safe(&json)));
            }
            to_stdout(|out| {
                writeln!(out, "session {}", visible(&view.id))?;
                writeln!(
                    out,
                    "status: {} · provider: {} · model: {} · {} messages · {} steps",
                    view.status,
                    visible(&view.provider),
                    visible(&view.model),
                    view.messages.len(),
                    view.step_count
                )?;
                for message in &view.messages {
                    writeln!(out)?;
                    write_message(out, message, color)?;
                }
                writeln!(out)?;
                writeln!(
                    out,
                    "total: tokens {} · cost ${:.6}",
                    crate::summary::tokens(&view.usage),
                    view.cost.total
                )
            })
        }
        SessionsCommand::Delete(args) => {
            client.delete_session(&args.id).await.map_err(|e| failed(&e))?;
            to_stdout(|out| writeln!(out, "deleted session {}", visible(&args.id)))
        }
    }
}

/// A failure of the store itself (not a mistake in the command): exit 1.
fn store_failed(error: &weft_core::StoreError) -> Failure {
    Failure::run(error.to_string())
}

/// The one line for an id no session has (exit 2).
pub(crate) fn unknown_session(id: &str) -> Failure {
    Failure { code: 2, message: Some(format!("unknown session ID {id}")) }
}

/// Writes with `write` to a buffered stdout; a reader that went away (`| head`) is not an error.
fn to_stdout(write: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<(), Failure> {
    let mut out = BufWriter::new(io::stdout());
    match write(&mut out).and_then(|()| out.flush()) {
        Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
            Err(Failure::run(format!("cannot write to stdout: {e}")))
        }
        _ => Ok(()),
    }
}

async fn list(store: &dyn SessionStore, args: &ListArgs) -> Result<(), Failure> {
    let limit = usize::try_from(args.limit).unwrap_or(usize::MAX);
    let heads = store.list_sessions(OwnerScope::Any, limit).await.map_err(|e| store_failed(&e))?;
    if args.json {
        let json = serde_json::to_string(&heads)
            .map_err(|e| Failure::run(format!("cannot encode the sessions: {e}")))?;
        return to_stdout(|out| writeln!(out, "{}", json_safe(&json)));
    }
    to_stdout(|out| write_list(out, &heads))
}

/// The table of `weft sessions list`.
fn write_list(out: &mut dyn Write, heads: &[SessionHead]) -> io::Result<()> {
    let rows: Vec<[String; 6]> = heads
        .iter()
        .map(|h| {
            [
                visible(&h.id),
                h.status.as_str().to_string(),
                visible(&h.model),
                h.message_count.to_string(),
                timestamp(h.updated_at),
                dollars(h.cost.total),
            ]
        })
        .collect();
    let header = ["id", "status", "model", "messages", "updated", "cost"];
    let width = |i: usize| {
        rows.iter().map(|r| r[i].chars().count()).chain([header[i].len()]).max().unwrap_or(0)
    };
    let widths: Vec<usize> = (0..header.len()).map(width).collect();
    let line = |cells: [&str; 6]| {
        let mut line = String::new();
        for (i, cell) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            // The message count is a number: right-aligned.
            if i == 3 {
                let _ = write!(line, "{}{cell}  ", " ".repeat(pad));
            } else if i + 1 == cells.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell}{}  ", " ".repeat(pad));
            }
        }
        line
    };
    if heads.is_empty() {
        return writeln!(out, "no sessions");
    }
    writeln!(out, "{}", line(header))?;
    for row in &rows {
        let cells = [&*row[0], &*row[1], &*row[2], &*row[3], &*row[4], &*row[5]];
        writeln!(out, "{}", line(cells))?;
    }
    Ok(())
}

/// What `show --json` prints.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ShownSession<'a> {
    head: &'a SessionHead,
    messages: &'a History,
    #[serde(skip_serializing_if = "Option::is_none")]
    run: Option<&'a RunState>,
    steps: &'a [AgentStep],
}

async fn show(store: &dyn SessionStore, args: &ShowArgs, color: bool) -> Result<(), Failure> {
    let stored = store.load(&args.id).await.map_err(|e| store_failed(&e))?;
    let Some(stored) = stored else { return Err(unknown_session(&args.id)) };
    let steps = steps(store, &args.id).await.map_err(|e| store_failed(&e))?;
    if args.json {
        let shown = ShownSession {
            head: &stored.head,
            messages: &stored.messages,
            run: stored.run.as_ref(),
            steps: &steps,
        };
        let json = serde_json::to_string_pretty(&shown)
            .map_err(|e| Failure::run(format!("cannot encode the session: {e}")))?;
        return to_stdout(|out| writeln!(out, "{}", json_safe(&json)));
    }
    to_stdout(|out| write_session(out, &stored, &steps, color))
}

/// The session's steps: the `step_end` events of its log, read page by page.
async fn steps(
    store: &dyn SessionStore,
    id: &str,
) -> Result<Vec<AgentStep>, weft_core::StoreError> {
    let mut steps = Vec::new();
    let mut after = 0;
    loop {
        let page = store.read_events(id, after, EVENT_PAGE).await?;
        let Some(last) = page.last() else { break };
        if last.seq <= after {
            // A store that does not move forward would loop forever.
            break;
        }
        after = last.seq;
        for record in &page {
            if let AgentEvent::StepEnd { step } = &record.event {
                steps.push((**step).clone());
            }
        }
    }
    Ok(steps)
}

async fn delete(store: &dyn SessionStore, args: &DeleteArgs) -> Result<(), Failure> {
    let head = store.head(&args.id).await.map_err(|e| store_failed(&e))?;
    let Some(head) = head else { return Err(unknown_session(&args.id)) };
    if head.status == SessionStatus::Running && !args.force {
        return Err(Failure::run(format!(
            "session {} is running; wait for its run to end, or delete it anyway with --force",
            args.id
        )));
    }
    let deleted =
        store.delete_session(&args.id, OwnerScope::Any).await.map_err(|e| store_failed(&e))?;
    if !deleted {
        return Err(unknown_session(&args.id));
    }
    to_stdout(|out| writeln!(out, "deleted session {}", visible(&args.id)))
}

/// A stored time (milliseconds since the epoch) in UTC, `2025-01-31T12:00:00Z`; a time no
/// calendar of four-digit years holds is shown as its milliseconds.
fn timestamp(ms: u64) -> String {
    // 10000-01-01T00:00:00Z.
    const YEAR_10000_MS: u64 = 253_402_300_800_000;
    let time = (ms < YEAR_10000_MS)
        .then(|| SystemTime::UNIX_EPOCH.checked_add(Duration::from_millis(ms)))
        .flatten();
    match time {
        Some(time) => humantime::format_rfc3339_seconds(time).to_string(),
        None => format!("{ms} ms"),
    }
}

/// A duration in milliseconds, for a step or a tool: `412ms`, `3.4s`, `2m 3s`.
fn millis(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        crate::summary::elapsed_text(Duration::from_millis(ms))
    }
}

/// JSON text with DEL and the C1 controls escaped too (`serde_json` escapes only U+0000–U+001F),
/// so that printed to a terminal it cannot drive it. The JSON means the same: outside strings
/// JSON text is ASCII without controls.
fn json_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if matches!(c, '\u{7f}'..='\u{9f}') {
            let _ = write!(out, "\\u{:04x}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

/// The human view of a stored session (see the [module docs](self)).
fn write_session(
    out: &mut dyn Write,
    stored: &StoredSession,
    steps: &[AgentStep],
    color: bool,
) -> io::Result<()> {
    let head = &stored.head;
    writeln!(out, "session {}", visible(&head.id))?;
    writeln!(
        out,
        "status: {} · provider: {} · model: {} · {} messages · {} steps",
        head.status,
        visible(&head.provider),
        visible(&head.model),
        head.message_count,
        head.step_count
    )?;
    writeln!(
        out,
        "created: {} · updated: {}",
        timestamp(head.created_at),
        timestamp(head.updated_at)
    )?;
    if let Some(system) = &head.system_prompt {
        writeln!(out, "system:")?;
        indented(out, system, "  ", None)?;
    }
    if !head.tools.is_empty() {
        let names: Vec<String> = head.tools.iter().map(|t| visible(&t.name)).collect();
        writeln!(out, "remote tools: {}", names.join(", "))?;
    }
    writeln!(out)?;
    for message in &stored.messages {
        write_message(out, message, color)?;
    }
    writeln!(out)?;
    if steps.is_empty() {
        writeln!(out, "steps: none recorded")?;
    } else {
        writeln!(out, "steps:")?;
    }
    for step in steps {
        write_step(out, step)?;
    }
    let mut total = format!(
        "total: tokens: {} · cost: {} · status: {}",
        tokens(&head.usage),
        dollars(head.cost.total),
        head.status
    );
    if let Some(turn) = stored.run.as_ref().and_then(|r| r.open_turn.as_ref()) {
        let calls = |calls: Vec<String>| calls.join(", ");
        let results: Vec<String> =
            turn.pending_tool_calls().map(|c| format!("{} ({})", c.name, c.id)).collect();
        let approvals: Vec<String> =
            turn.pending_approvals().map(|c| format!("{} ({})", c.name, c.id)).collect();
        if !results.is_empty() {
            let _ = write!(total, " · awaiting results of {}", calls(results));
        }
        if !approvals.is_empty() {
            let _ = write!(total, " · awaiting approval of {}", calls(approvals));
        }
    }
    writeln!(out, "{}", visible(&total))
}

/// `text` (from elsewhere: its controls made visible), each line after `prefix`, each line
/// wrapped in `style` when given.
fn indented(out: &mut dyn Write, text: &str, prefix: &str, style: Option<&str>) -> io::Result<()> {
    for line in text.lines() {
        out.write_all(prefix.as_bytes())?;
        match style {
            Some(style) => {
                out.write_all(style.as_bytes())?;
                write_visible(out, line)?;
                out.write_all(RESET.as_bytes())?;
            }
            None => write_visible(out, line)?,
        }
        out.write_all(b"\n")?;
    }
    Ok(())
}

fn write_user_content(out: &mut dyn Write, content: &[UserContent]) -> io::Result<()> {
    for block in content {
        match block {
            UserContent::Text(t) => indented(out, &t.text, "  ", None)?,
            UserContent::Image(image) => writeln!(
                out,
                "  [image {}, {} bytes]",
                visible(&image.mime_type),
                image.data.len()
            )?,
        }
    }
    Ok(())
}

fn write_message(out: &mut dyn Write, message: &Message, color: bool) -> io::Result<()> {
    match message {
        Message::User(m) => {
            writeln!(out, "user:")?;
            write_user_content(out, &m.content)
        }
        Message::Assistant(m) => {
            let mut label = visible(&m.model);
            if !matches!(m.stop_reason, StopReason::Stop | StopReason::ToolUse) {
                let _ = write!(label, ", stopped: {}", m.stop_reason.as_str());
            }
            writeln!(out, "assistant ({label}):")?;
            for block in &m.content {
                match block {
                    AssistantContent::Text(t) => indented(out, &t.text, "  ", None)?,
                    AssistantContent::Thinking(t) if color => {
                        indented(out, &t.thinking, "  ", Some(DIM))?
                    }
                    AssistantContent::Thinking(t) => {
                        indented(out, &t.thinking, "  thinking: ", None)?
                    }
                    AssistantContent::ToolCall(call) => {
                        let args =
                            serde_json::to_string(&call.arguments).map_err(io::Error::from)?;
                        writeln!(
                            out,
                            "  [tool] {} {} ({})",
                            visible(&call.name),
                            visible(&args),
                            visible(&call.id)
                        )?;
                    }
                }
            }
            if let Some(error) = &m.error_message {
                indented(out, error, "  error: ", None)?;
            }
            Ok(())
        }
        Message::ToolResult(r) => {
            let outcome = if r.is_error { "error" } else { "ok" };
            writeln!(
                out,
                "tool result ({}, {}): {outcome}",
                visible(&r.tool_name),
                visible(&r.tool_call_id)
            )?;
            write_user_content(out, &r.content)
        }
    }
}

fn write_step(out: &mut dyn Write, step: &AgentStep) -> io::Result<()> {
    let response = &step.llm_response;
    let cost = response.cost_or_zero();
    writeln!(
        out,
        "  step {} · model {} · {} · tokens: {} · cost: {}",
        step.step_index,
        visible(&response.model),
        millis(step.latency_ms),
        tokens(&response.usage),
        dollars(cost.total)
    )?;
    for execution in &step.tool_results {
        let outcome = match &execution.error {
            Some(error) => format!("error: {}", first_line(error)),
            None => "ok".to_string(),
        };
        writeln!(
            out,
            "    tool {} ({}) · {} · {}",
            visible(&execution.call.name),
            visible(&execution.call.id),
            millis(execution.latency_ms),
            visible(&outcome)
        )?;
    }
    Ok(())
}

/// The first line of `text`, marked as cut when there is more.
fn first_line(text: &str) -> String {
    match text.split_once('\n') {
        Some((first, _)) => format!("{first} …"),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;
    use weft_core::{
        AssistantMessage, Cost, TextContent, ThinkingContent, ToolCall, ToolExecutionResult,
        ToolResultMessage, Usage, UserMessage,
    };

    use super::*;

    fn head() -> SessionHead {
        SessionHead {
            id: "s-1".into(),
            owner: None,
            status: SessionStatus::Completed,
            provider: "faux".into(),
            model: "faux-pro".into(),
            system_prompt: Some("Be terse.".into()),
            tools: vec![],
            options: serde_json::Value::Null,
            usage: Usage::new(30, 9, 0, 0),
            cost: Cost { total: 0.0063, ..Cost::default() },
            message_count: 4,
            step_count: 2,
            next_deadline: None,
            version: 5,
            created_at: 1_738_324_800_000,
            updated_at: 1_738_324_802_500,
        }
    }

    fn assistant(content: Vec<AssistantContent>, stop: StopReason) -> AssistantMessage {
        let mut m = AssistantMessage::empty("faux", "faux-pro");
        m.content = content;
        m.stop_reason = stop;
        m
    }

    #[test]
    fn a_session_shows_its_conversation_steps_and_totals() {
        let call = ToolCall {
            id: "c1".into(),
            name: "echo".into(),
            arguments: json!({"text": "hi"}).into(),
        };
        let first = assistant(
            vec![
                AssistantContent::Thinking(ThinkingContent {
                    thinking: "An echo.\nEasy.".into(),
                    signature: None,
                }),
                AssistantContent::Text(TextContent { text: "Let me echo that.".into() }),
                AssistantContent::ToolCall(call.clone()),
            ],
            StopReason::ToolUse,
        );
        let mut last = assistant(
            vec![AssistantContent::Text(TextContent { text: "Partial".into() })],
            StopReason::Error,
        );
        last.error_message = Some("overloaded".into());
        let stored = StoredSession {
            head: head(),
            messages: vec![
                Message::User(UserMessage::text("Echo please")),
                Message::Assistant(first.clone()),
                Message::ToolResult(ToolResultMessage::ok(&call, "hi")),
                Message::Assistant(last),
            ]
            .into(),
            run: None,
            last_seq: 40,
            reserved_seq: 4096,
        };
        let mut response = first;
        response.usage = Usage::new(10, 5, 0, 0);
        response.cost = Some(Box::new(Cost { total: 0.0035, ..Cost::default() }));
        let step = AgentStep {
            step_id: "st".into(),
            step_index: 0,
            timestamp: 0,
            llm_response: response,
            latency_ms: 1234,
            tool_results: vec![ToolExecutionResult {
                call,
                output: "hi".into(),
                error: None,
                details: None,
                started_at: 0,
                latency_ms: 2,
            }],
            annotations: Default::default(),
        };
        let mut out = Vec::new();
        write_session(&mut out, &stored, &[step], false).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            "session s-1\n\
             status: completed · provider: faux · model: faux-pro · 4 messages · 2 steps\n\
             created: 2025-01-31T12:00:00Z · updated: 2025-01-31T12:00:02Z\n\
             system:\n  Be terse.\n\n\
             user:\n  Echo please\n\
             assistant (faux-pro):\n  thinking: An echo.\n  thinking: Easy.\n  Let me echo that.\n\
             \x20 [tool] echo {\"text\":\"hi\"} (c1)\n\
             tool result (echo, c1): ok\n  hi\n\
             assistant (faux-pro, stopped: error):\n  Partial\n  error: overloaded\n\n\
             steps:\n\
             \x20 step 0 · model faux-pro · 1.23s · tokens: 10 in, 5 out · cost: $0.0035\n\
             \x20   tool echo (c1) · 2ms · ok\n\
             total: tokens: 30 in, 9 out · cost: $0.0063 · status: completed\n"
        );
    }

    #[test]
    fn nothing_stored_can_drive_the_terminal() {
        let evil = "a\x1b[31mb\u{9b}c\rd";
        let mut h = head();
        h.id = evil.into();
        h.model = evil.into();
        let call =
            ToolCall { id: evil.into(), name: evil.into(), arguments: json!({"k": evil}).into() };
        let stored = StoredSession {
            head: h.clone(),
            messages: vec![
                Message::User(UserMessage::text(evil)),
                Message::Assistant(assistant(
                    vec![
                        AssistantContent::Thinking(ThinkingContent {
                            thinking: evil.into(),
                            signature: None,
                        }),
                        AssistantContent::ToolCall(call.clone()),
                    ],
                    StopReason::ToolUse,
                )),
                Message::ToolResult(ToolResultMessage::error(&call, evil)),
            ]
            .into(),
            run: None,
            last_seq: 0,
            reserved_seq: 0,
        };
        for color in [false, true] {
            let mut out = Vec::new();
            write_session(&mut out, &stored, &[], color).unwrap();
            write_list(&mut out, std::slice::from_ref(&h)).unwrap();
            let text = String::from_utf8(out).unwrap().replace(DIM, "").replace(RESET, "");
            assert!(!text.contains(['\x1b', '\u{9b}', '\r']), "{text:?}");
            assert!(text.contains("a^[[31mb<U+009B>c^Md"), "{text}");
        }
        let json = json_safe(&serde_json::to_string(&json!({"t": "\u{9b}\u{7f}é"})).unwrap());
        assert_eq!(json, r#"{"t":"\u009b\u007fé"}"#);
        assert_eq!(serde_json::from_str::<serde_json::Value>(&json).unwrap()["t"], "\u{9b}\u{7f}é");
    }

    #[test]
    fn the_list_is_a_table_and_times_never_panic() {
        let mut out = Vec::new();
        write_list(&mut out, &[head()]).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "id   status     model     messages  updated               cost\n\
             s-1  completed  faux-pro         4  2025-01-31T12:00:02Z  $0.0063\n"
        );
        let mut out = Vec::new();
        write_list(&mut out, &[]).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "no sessions\n");
        assert_eq!(timestamp(u64::MAX), format!("{} ms", u64::MAX));
        assert_eq!(timestamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(millis(412), "412ms");
        assert_eq!(millis(3400), "3.40s");
    }
}
