//! The conversation as `UIMessage`s (`GET /api/chat/{id}`): what `useChat` restores on load.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};
use weft_core::{AssistantContent, Message, Session, ToolResultMessage};

/// `session`'s conversation as AI SDK `UIMessage`s, so a page can restore `useChat({ messages
/// })` (`chat`: the id its generated message ids start with). A user message keeps its id (or is
/// `<chat>-m<i>`, `i` its position); a run is one assistant message (`<chat>-m<i>`, `i` the
/// position of its first model call; the run under way's has the run's id, as its stream's
/// `start` says, so resuming replaces it instead of adding a second): a `step-start` per model
/// call, then its reasoning, text and tool parts, each tool part in the state the session has it
/// (`output-available`, `output-error`, `input-available` for a call the client must run,
/// `approval-requested`; a call never run is an `output-error`).
pub fn ui_messages(session: &Session, chat: &str) -> Vec<Value> {
    let approvals: HashSet<String> =
        session.pending_approvals().into_iter().map(|c| c.id).collect();
    let pending: HashSet<String> = session.pending_tool_calls().into_iter().map(|c| c.id).collect();
    let results: HashMap<&str, &ToolResultMessage> = session
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((r.tool_call_id.as_str(), r)),
            _ => None,
        })
        .collect();
    let mut out: Vec<Value> = Vec::new();
    let mut parts: Vec<Value> = Vec::new();
    let mut first = 0;
    let flush = |out: &mut Vec<Value>, parts: &mut Vec<Value>, first: usize, last: bool| {
        if parts.is_empty() {
            return;
        }
        let id = match (&session.run, last) {
            (Some(run), true) => run.run_id.clone(),
            _ => format!("{chat}-m{first}"),
        };
        out.push(json!({"id": id, "role": "assistant", "parts": std::mem::take(parts)}));
    };
    for (i, message) in session.messages.iter().enumerate() {
        match message {
            Message::User(user) => {
                flush(&mut out, &mut parts, first, false);
                let id = user.id.as_deref().map_or_else(|| format!("{chat}-m{i}"), str::to_string);
                out.push(json!({"id": id, "role": "user",
                    "parts": [{"type": "text", "text": user.text_content()}]}));
            }
            Message::Assistant(assistant) => {
                if parts.is_empty() {
                    first = i;
                }
                parts.push(json!({"type": "step-start"}));
                for block in &assistant.content {
                    match block {
                        AssistantContent::Text(t) if !t.text.is_empty() => {
                            parts.push(json!({"type": "text", "text": t.text, "state": "done"}));
                        }
                        AssistantContent::Thinking(t) if !t.thinking.is_empty() => parts.push(
                            json!({"type": "reasoning", "text": t.thinking, "state": "done"}),
                        ),
                        AssistantContent::ToolCall(call) => {
                            let mut part = json!({"type": format!("tool-{}", call.name),
                                "toolCallId": call.id, "input": call.arguments});
                            if let Some(result) = results.get(call.id.as_str()) {
                                let text = result.text_content();
                                if result.is_error {
                                    part["state"] = "output-error".into();
                                    part["errorText"] = text.into();
                                } else {
                                    part["state"] = "output-available".into();
                                    part["output"] = text.into();
                                }
                            } else if approvals.contains(&call.id) {
                                part["state"] = "approval-requested".into();
                                part["approval"] = json!({"id": call.id});
                            } else if pending.contains(&call.id) {
                                part["state"] = "input-available".into();
                            } else {
                                part["state"] = "output-error".into();
                                part["errorText"] = "The call was not run.".into();
                            }
                            parts.push(part);
                        }
                        _ => {}
                    }
                }
            }
            Message::ToolResult(_) => {}
        }
    }
    flush(&mut out, &mut parts, first, true);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;
    use weft_core::{
        AssistantContent, AssistantMessage, Message, Session, TextContent, ThinkingContent,
        ToolCall, ToolResultMessage, UserMessage,
    };

    use super::ui_messages;

    #[test]
    fn a_run_is_one_assistant_message_with_its_parts_in_the_sessions_state() {
        let mut session = Session::new("s1", "faux", "faux-1");
        let mut user = UserMessage::text("Look it up");
        user.id = Some("u1".into());
        session.messages.push(Message::User(user));
        let mut answer = AssistantMessage::empty("faux", "faux-1");
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "read_page".into(),
            arguments: json!({"selector": "h1"}).into(),
        };
        answer.content = vec![
            AssistantContent::Thinking(ThinkingContent { thinking: "Hm.".into(), signature: None }),
            AssistantContent::Text(TextContent { text: "Looking.".into() }),
            AssistantContent::ToolCall(call("c1")),
            AssistantContent::ToolCall(call("c2")),
        ];
        session.messages.push(Message::Assistant(answer));
        session.messages.push(Message::ToolResult(ToolResultMessage::new(
            "c1",
            "read_page",
            "Weft 0.1",
            false,
        )));
        session.messages.push(Message::User(UserMessage::text("Thanks")));
        assert_eq!(
            ui_messages(&session, "chat"),
            [
                json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Look it up"}]}),
                json!({"id": "chat-m1", "role": "assistant", "parts": [
                    {"type": "step-start"},
                    {"type": "reasoning", "text": "Hm.", "state": "done"},
                    {"type": "text", "text": "Looking.", "state": "done"},
                    {"type": "tool-read_page", "toolCallId": "c1", "input": {"selector": "h1"},
                     "state": "output-available", "output": "Weft 0.1"},
                    {"type": "tool-read_page", "toolCallId": "c2", "input": {"selector": "h1"},
                     "state": "output-error", "errorText": "The call was not run."},
                ]}),
                json!({"id": "chat-m3", "role": "user", "parts": [{"type": "text", "text": "Thanks"}]}),
            ]
        );
    }
}
