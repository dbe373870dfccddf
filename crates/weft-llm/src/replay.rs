//! Replaying a conversation to a provider or model other than the one that made it.
//!
//! Every adapter applies [`prepare`] to [`ModelRequest::messages`](crate::ModelRequest) before
//! converting them to its wire format. It is pure (no clock, no randomness) and its rules are:
//!
//! 1. **Failed turns are skipped.** An assistant message whose stop reason is `error` or
//!    `aborted` is left out, and so are the tool results answering calls that only it made.
//! 2. **Thinking stays with its model.** When the message was made by the target provider *and*
//!    model (both names equal), its thinking blocks are kept as they are, signatures included
//!    (a block with neither text nor signature is dropped). Otherwise a thinking block with text
//!    becomes a text block `<thinking>\n{text}\n</thinking>` and one whose text is blank is
//!    dropped; its signature is never sent. The tags tell the target model the text was earlier
//!    reasoning rather than something said to the user.
//! 3. **Every call gets exactly one result, right after its message.** A kept assistant message
//!    is followed immediately by the results of its calls, in the order of the calls: the
//!    recorded result (wherever it was in the history; the first one if there are several), or
//!    a synthetic error result ([`NO_RESULT`]) when there is none. A result belongs to the
//!    latest earlier kept assistant message that made a call with its id; a result no such
//!    call matches is dropped, since no dialect accepts one. User messages keep their order.
//! 4. **Tool call ids fit the target.** The ids of calls and of their results (the same mapping on
//!    both sides) go through [`normalize_tool_call_id`], which leaves valid ids unchanged, so a
//!    history relayed by a proxy or a compatible server cannot carry an id the target refuses.
//!    The one exception is the Responses API's own `call_id|item_id` pairs, kept whole for it:
//!    the item id must come back exactly. Gemini takes any id, so its own come back to it
//!    unchanged (its adapter sends back only those: see
//!    [`providers::gemini`](crate::providers::gemini)).
//!
//! An assistant message left with no content (it only held blank thinking) is dropped.

use std::collections::HashMap;

use weft_core::{
    AssistantContent, AssistantMessage, Message, TextContent, ToolResultMessage, UserContent,
};

/// The text of the synthetic error result given to a call that has no result.
pub const NO_RESULT: &str = "No result was provided for this tool call";

/// The messages to send to `target_provider`/`target_model`, following the
/// [module's rules](self).
pub fn prepare<M: AsRef<Message>>(
    messages: &[M],
    target_provider: &str,
    target_model: &str,
) -> Vec<Message> {
    // Pass 1: which kept assistant message owns each tool result.
    let mut latest_caller: HashMap<&str, usize> = HashMap::new();
    // owner index → call id → the first result's index
    let mut results: HashMap<usize, HashMap<&str, usize>> = HashMap::new();
    for (i, message) in messages.iter().enumerate() {
        match message.as_ref() {
            // Calls of failed turns answer nothing: their results stay unmatched.
            Message::Assistant(a) if a.stop_reason.is_failure() => {}
            Message::Assistant(a) => {
                for call in a.tool_calls() {
                    latest_caller.insert(call.id.as_str(), i);
                }
            }
            Message::ToolResult(r) => {
                if let Some(&owner) = latest_caller.get(r.tool_call_id.as_str()) {
                    results.entry(owner).or_default().entry(r.tool_call_id.as_str()).or_insert(i);
                }
            }
            Message::User(_) => {}
        }
    }

    // Pass 2: emit.
    let mut out = Vec::with_capacity(messages.len());
    for (i, message) in messages.iter().enumerate() {
        let assistant = match message.as_ref() {
            Message::User(user) => {
                out.push(Message::User(user.clone()));
                continue;
            }
            // Emitted after their owner, or dropped.
            Message::ToolResult(_) => continue,
            Message::Assistant(a) if a.stop_reason.is_failure() => continue,
            Message::Assistant(a) => a,
        };
        let same_model = assistant.provider == target_provider && assistant.model == target_model;
        // Ids are made acceptable even when the target made them (a proxy or an older history
        // may hold ids it would now refuse); valid ids pass unchanged. The Responses API's own
        // `call_id|item_id` pairs are kept whole for it: the item id must come back exactly.
        let rename = |id: &str| {
            if assistant.provider == target_provider && target_provider == "openai-responses" {
                id.to_owned()
            } else {
                normalize_tool_call_id(id, target_provider)
            }
        };
        let converted = convert_assistant(assistant, same_model, &rename);
        if converted.content.is_empty() {
            continue;
        }
        out.push(Message::Assistant(converted));
        let owned = results.get(&i);
        for call in assistant.tool_calls() {
            let recorded =
                owned.and_then(|o| o.get(call.id.as_str())).and_then(|&j| {
                    match messages[j].as_ref() {
                        Message::ToolResult(r) => Some(r),
                        _ => None,
                    }
                });
            let result = match recorded {
                Some(r) => ToolResultMessage { tool_call_id: rename(&r.tool_call_id), ..r.clone() },
                None => ToolResultMessage {
                    tool_call_id: rename(&call.id),
                    tool_name: call.name.clone(),
                    content: vec![UserContent::text(NO_RESULT)],
                    details: None,
                    is_error: true,
                    timestamp: assistant.timestamp,
                },
            };
            out.push(Message::ToolResult(result));
        }
    }
    out
}

/// `assistant` with its thinking converted and its call ids renamed.
fn convert_assistant(
    assistant: &AssistantMessage,
    same_model: bool,
    rename: &dyn Fn(&str) -> String,
) -> AssistantMessage {
    let mut content = Vec::with_capacity(assistant.content.len());
    for block in &assistant.content {
        match block {
            AssistantContent::Thinking(t) if same_model => {
                if !t.thinking.is_empty() || t.signature.as_deref().is_some_and(|s| !s.is_empty()) {
                    content.push(block.clone());
                }
            }
            AssistantContent::Thinking(t) => {
                if !t.thinking.trim().is_empty() {
                    content.push(AssistantContent::Text(TextContent {
                        text: format!("<thinking>\n{}\n</thinking>", t.thinking),
                    }));
                }
            }
            AssistantContent::ToolCall(call) => {
                let mut call = call.clone();
                call.id = rename(&call.id);
                content.push(AssistantContent::ToolCall(call));
            }
            AssistantContent::Text(_) => content.push(block.clone()),
        }
    }
    AssistantMessage { content, ..assistant.clone() }
}

/// `id` made acceptable to `target_provider`'s API, deterministically (the same id always maps
/// to the same result, so calls and results stay matched):
///
/// - `anthropic`: `^[a-zA-Z0-9_-]{1,64}$`;
/// - `openai`, `openai-responses`: at most 40 characters;
/// - `gemini` and any other provider: unchanged.
///
/// A valid id is returned unchanged. An invalid one becomes its first characters, with every
/// character outside `[a-zA-Z0-9_-]` replaced by `_`, then `_` and 16 hex digits of a 64-bit
/// FNV-1a hash of the whole original id, within the limit; distinct ids thus stay distinct.
pub fn normalize_tool_call_id(id: &str, target_provider: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
    let max = match target_provider {
        "anthropic" => {
            if !id.is_empty() && id.len() <= 64 && id.chars().all(safe) {
                return id.to_owned();
            }
            64
        }
        "openai" | "openai-responses" => {
            if !id.is_empty() && id.chars().count() <= 40 {
                return id.to_owned();
            }
            40
        }
        _ => return id.to_owned(),
    };
    let prefix: String = id.chars().map(|c| if safe(c) { c } else { '_' }).take(max - 17).collect();
    format!("{prefix}_{:016x}", fnv1a64(id.as_bytes()))
}

/// 64-bit FNV-1a: small, stable across runs and platforms.
fn fnv1a64(bytes: &[u8]) -> u64 {
    use std::hash::Hasher as _;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;
    use weft_core::{StopReason, ThinkingContent, ToolCall, UserMessage};

    use super::*;

    const SONNET: (&str, &str) = ("anthropic", "claude-sonnet-4-20250514");
    const GPT5: (&str, &str) = ("openai-responses", "gpt-5");
    const BAD_ID: &str = "call.with:bad|chars";
    const LONG_ID: &str = "call_0123456789012345678901234567890123456789_long";

    fn user(text: &str) -> Message {
        Message::User(UserMessage {
            content: vec![UserContent::text(text)],
            timestamp: 1,
            id: None,
        })
    }

    fn assistant(
        (provider, model): (&str, &str),
        stop_reason: StopReason,
        content: Vec<AssistantContent>,
    ) -> Message {
        let mut m = AssistantMessage::empty(provider, model);
        m.timestamp = 7;
        m.stop_reason = stop_reason;
        m.content = content;
        Message::Assistant(m)
    }

    fn thinking(text: &str, signature: Option<&str>) -> AssistantContent {
        AssistantContent::Thinking(ThinkingContent {
            thinking: text.into(),
            signature: signature.map(Into::into),
        })
    }

    fn text(text: &str) -> AssistantContent {
        AssistantContent::Text(TextContent { text: text.into() })
    }

    fn call(id: &str, name: &str) -> AssistantContent {
        AssistantContent::ToolCall(ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: json!({}).into(),
        })
    }

    fn result(id: &str, name: &str, output: &str) -> Message {
        let mut r = ToolResultMessage::new(id, name, output, false);
        r.timestamp = 9;
        Message::ToolResult(r)
    }

    /// Thinking with signatures, tool calls and results, an aborted and an errored turn, and a
    /// dangling call.
    fn history() -> Vec<Message> {
        vec![
            user("read a.txt and b.txt"),
            // 1: Sonnet thinks (one block redacted: no text, only its signature) and calls two
            // tools; BAD_ID never gets a result (dangling).
            assistant(
                SONNET,
                StopReason::ToolUse,
                vec![
                    thinking("I should read both.", Some("sig-sonnet")),
                    thinking("", Some("redacted-data")),
                    text("Reading."),
                    call("toolu_01", "read"),
                    call(BAD_ID, "read"),
                ],
            ),
            result("toolu_01", "read", "contents of a"),
            user("now summarise"),
            // 4: aborted GPT-5 turn with a call, then its result: both skipped.
            assistant(
                GPT5,
                StopReason::Aborted,
                vec![text("partial"), call("call_aborted", "sum")],
            ),
            result("call_aborted", "sum", "late result"),
            // 6: errored turn: skipped.
            assistant(GPT5, StopReason::Error, vec![text("oops")]),
            // 7: GPT-5 reasons and calls a tool whose id is too long for OpenAI Chat; blank
            // thinking alongside.
            assistant(
                GPT5,
                StopReason::ToolUse,
                vec![
                    thinking("Summing up.", Some("enc-gpt5")),
                    thinking("  ", None),
                    call(LONG_ID, "sum"),
                ],
            ),
            result(LONG_ID, "sum", "a and b"),
            assistant(("gemini", "gemini-2.5-pro"), StopReason::Stop, vec![text("Done.")]),
        ]
    }

    fn assistants(messages: &[Message]) -> Vec<&AssistantMessage> {
        messages
            .iter()
            .filter_map(|m| match m {
                Message::Assistant(a) => Some(a),
                _ => None,
            })
            .collect()
    }

    fn roles(messages: &[Message]) -> Vec<&'static str> {
        messages
            .iter()
            .map(|m| match m {
                Message::User(_) => "user",
                Message::Assistant(_) => "assistant",
                Message::ToolResult(_) => "toolResult",
            })
            .collect()
    }

    fn tool_result(m: &Message) -> &ToolResultMessage {
        match m {
            Message::ToolResult(r) => r,
            other => panic!("not a tool result: {other:?}"),
        }
    }

    /// Every call is answered right after its message, in order, and every result answers a call
    /// of the message just before: the rule every dialect needs.
    fn assert_calls_answered_in_place(messages: &[Message]) {
        let mut i = 0;
        while i < messages.len() {
            match &messages[i] {
                Message::Assistant(a) => {
                    for (k, call) in a.tool_calls().enumerate() {
                        let r = tool_result(&messages[i + 1 + k]);
                        assert_eq!(r.tool_call_id, call.id);
                        assert_eq!(r.tool_name, call.name);
                    }
                    i += 1 + a.tool_calls().count();
                }
                Message::ToolResult(r) => panic!("result {} not after its call", r.tool_call_id),
                Message::User(_) => i += 1,
            }
        }
    }

    #[test]
    fn replay_to_the_same_model_keeps_thinking_and_signatures() {
        let out = prepare(&history(), SONNET.0, SONNET.1);
        assert_eq!(
            roles(&out),
            [
                "user",
                "assistant",
                "toolResult",
                "toolResult",
                "user",
                "assistant",
                "toolResult",
                "assistant"
            ]
        );
        assert_calls_answered_in_place(&out);
        let a = assistants(&out);
        // Sonnet's own blocks come back exactly, the redacted one included.
        let Message::Assistant(original) = &history()[1] else { unreachable!() };
        assert_eq!(a[0].content[..3], original.content[..3]);
        // Its dangling call gets the synthetic error result, normalised like the call.
        let dangling = tool_result(&out[3]);
        assert!(dangling.is_error);
        assert_eq!(dangling.text_content(), NO_RESULT);
        assert_eq!(dangling.timestamp, 7);
        // Even an id Anthropic made is made acceptable to it (valid ids pass unchanged).
        assert_eq!(dangling.tool_call_id, normalize_tool_call_id(BAD_ID, "anthropic"));
        assert_ne!(dangling.tool_call_id, BAD_ID);
        // GPT-5's thinking becomes text for Sonnet; its signature is gone; blank thinking dropped.
        assert_eq!(
            a[1].content,
            vec![text("<thinking>\nSumming up.\n</thinking>"), a[1].content[1].clone()]
        );
        let AssistantContent::ToolCall(c) = &a[1].content[1] else { panic!("not a call") };
        assert!(c.id.len() <= 64 && c.id.starts_with("call_0123"));
        assert_eq!(tool_result(&out[6]).text_content(), "a and b");
        // The aborted and errored turns, and the aborted turn's result, are gone.
        assert!(
            out.iter()
                .all(|m| !matches!(m, Message::ToolResult(r) if r.tool_call_id == "call_aborted"))
        );
        assert!(a.iter().all(|a| a.stop_reason != StopReason::Error && a.text() != "oops"));
    }

    #[test]
    fn replay_to_another_model_of_the_same_provider_drops_signatures() {
        let out = prepare(&history(), "anthropic", "claude-opus-4-20250514");
        assert_calls_answered_in_place(&out);
        let a = assistants(&out);
        assert_eq!(
            a[0].content[..2],
            [text("<thinking>\nI should read both.\n</thinking>"), text("Reading.")]
        );
        // Same provider: the id is still made acceptable, and matches its result.
        let AssistantContent::ToolCall(c) = &a[0].content[3] else { panic!("not a call") };
        assert_eq!(c.id, normalize_tool_call_id(BAD_ID, "anthropic"));
        let json = serde_json::to_string(&out).unwrap();
        assert!(!json.contains("sig-sonnet") && !json.contains("redacted-data"), "{json}");
        assert!(!json.contains("enc-gpt5"));
    }

    #[test]
    fn replay_to_every_other_target_applies_every_rule() {
        for (provider, model) in [
            ("openai", "gpt-4.1"),
            ("openai-responses", "o3"),
            ("gemini", "gemini-2.5-flash"),
            ("faux", "faux-1"),
        ] {
            let out = prepare(&history(), provider, model);
            assert_eq!(roles(&out).len(), 8, "{provider}");
            assert_calls_answered_in_place(&out);
            let json = serde_json::to_string(&out).unwrap();
            for secret in
                ["sig-sonnet", "redacted-data", "enc-gpt5", "partial", "oops", "late result"]
            {
                assert!(!json.contains(secret), "{provider}: {secret} in {json}");
            }
            let a = assistants(&out);
            assert!(a.iter().all(|a| {
                a.content.iter().all(|b| !matches!(b, AssistantContent::Thinking(_)))
            }));
            assert_eq!(a[1].content[0], text("<thinking>\nSumming up.\n</thinking>"));
            // Calls made by another provider than the target fit the target.
            for call in a.iter().filter(|a| a.provider != provider).flat_map(|a| a.tool_calls()) {
                assert_eq!(call.id, normalize_tool_call_id(&call.id, provider), "{provider}");
            }
            let ids: Vec<&str> =
                a.iter().flat_map(|a| a.tool_calls()).map(|c| c.id.as_str()).collect();
            match provider {
                "openai" => {
                    assert_eq!(ids[0], "toolu_01");
                    assert_eq!(ids[1], BAD_ID, "short enough for OpenAI");
                    assert_ne!(ids[2], LONG_ID);
                    assert_eq!(ids[2].chars().count(), 40);
                }
                // OpenAI Responses made LONG_ID: kept verbatim.
                "openai-responses" => assert_eq!(ids, ["toolu_01", BAD_ID, LONG_ID]),
                _ => assert_eq!(ids, ["toolu_01", BAD_ID, LONG_ID]),
            }
        }
    }

    #[test]
    fn results_move_next_to_their_call_and_orphans_are_dropped() {
        let messages = vec![
            user("go"),
            assistant(SONNET, StopReason::ToolUse, vec![call("a", "t"), call("b", "t")]),
            result("b", "t", "b1"),
            user("interjection"),
            result("a", "t", "a1"),
            result("a", "t", "a2 (duplicate)"),
            result("nobody", "t", "orphan"),
        ];
        let out = prepare(&messages, "gemini", "gemini-2.5-pro");
        assert_eq!(roles(&out), ["user", "assistant", "toolResult", "toolResult", "user"]);
        assert_eq!(tool_result(&out[2]).text_content(), "a1");
        assert_eq!(tool_result(&out[3]).text_content(), "b1");
        // Ids reused across turns: each result answers the latest call with its id.
        let messages = vec![
            assistant(SONNET, StopReason::ToolUse, vec![call("c", "t")]),
            result("c", "t", "first"),
            assistant(SONNET, StopReason::ToolUse, vec![call("c", "t")]),
            result("c", "t", "second"),
        ];
        let out = prepare(&messages, "openai", "gpt-4o");
        assert_eq!(tool_result(&out[1]).text_content(), "first");
        assert_eq!(tool_result(&out[3]).text_content(), "second");
        // An assistant message left empty is dropped.
        let messages =
            vec![user("hi"), assistant(SONNET, StopReason::Stop, vec![thinking(" ", None)])];
        assert_eq!(prepare(&messages, "openai", "gpt-4o").len(), 1);
        assert!(prepare::<Message>(&[], "openai", "gpt-4o").is_empty());
    }

    #[test]
    fn tool_call_ids_are_normalised_deterministically() {
        let valid = "toolu_01A09q90qw90lq917835lq9";
        for provider in ["anthropic", "openai", "openai-responses", "gemini", "faux"] {
            assert_eq!(normalize_tool_call_id(valid, provider), valid);
        }
        let anthropic_ok = |id: &str| {
            !id.is_empty()
                && id.len() <= 64
                && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        let tricky = [
            "",
            "call.with:bad|chars",
            "call_abc|fc_0123456789abcdef0123456789abcdef0123456789abcdef",
            "функция-1",
            &"x".repeat(200),
            "a b",
            "a_b",
        ];
        let mut seen = std::collections::HashSet::new();
        for id in tricky {
            let a = normalize_tool_call_id(id, "anthropic");
            assert!(anthropic_ok(&a), "{id:?} -> {a:?}");
            assert_eq!(a, normalize_tool_call_id(id, "anthropic"), "deterministic");
            assert!(seen.insert(a), "distinct ids stay distinct");
            let o = normalize_tool_call_id(id, "openai");
            assert!(!o.is_empty() && o.chars().count() <= 40, "{id:?} -> {o:?}");
            assert_eq!(o, normalize_tool_call_id(id, "openai-responses"));
            assert_eq!(normalize_tool_call_id(id, "gemini"), id);
        }
        assert_eq!(normalize_tool_call_id("a_b", "anthropic"), "a_b");
        assert_eq!(normalize_tool_call_id("a b", "openai"), "a b");
        // The mapping is a fixed function (FNV-1a), stable across runs and builds.
        assert_eq!(normalize_tool_call_id("a b", "anthropic"), "a_b_e63f991904833892");
    }
}
