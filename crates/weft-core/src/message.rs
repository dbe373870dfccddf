//! Messages and content blocks: the conversation a model sees.
//!
//! The JSON form is the agent plan's (camelCase fields, a `role` tag on messages and a `type`
//! tag on blocks). A user or tool-result `content` given as a plain string is accepted on input
//! and always written back as a list of blocks.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fmt;
use std::ops::Deref;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use crate::usage::{Cost, Usage};

/// Milliseconds since the Unix epoch; every timestamp in the canonical model uses it.
pub type TimestampMs = u64;

/// A short name that many messages repeat (a provider, a model id): one shared, immutable
/// string, interned, so ten thousand messages of `claude-sonnet-4-5` hold one copy of it and a
/// pointer each (16 bytes, against a `String`'s 24 plus its own allocation).
///
/// It reads as a `&str` (`Deref`, [`as_str`](Self::as_str), comparisons with `str` and
/// `String`), is made from either, and its JSON form is the plain string.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(Arc<str>);

/// At most this many distinct names are interned; past it (names come from outside input:
/// loaded sessions, client messages) a new name gets its own string, so the table stays small.
const INTERNED_MAX: usize = 1024;

static INTERNED: Mutex<Option<HashSet<Arc<str>>>> = Mutex::new(None);

impl Name {
    /// The name `s`, sharing the string of an equal name made before.
    pub fn new(s: &str) -> Self {
        // A poisoned table is still a valid set of strings.
        let mut table = INTERNED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let table = table.get_or_insert_with(HashSet::new);
        if let Some(shared) = table.get(s) {
            return Self(Arc::clone(shared));
        }
        let shared: Arc<str> = Arc::from(s);
        if table.len() < INTERNED_MAX {
            table.insert(Arc::clone(&shared));
        }
        Self(shared)
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The shared string.
    pub fn as_arc(&self) -> &Arc<str> {
        &self.0
    }
}

impl Default for Name {
    fn default() -> Self {
        Self::new("")
    }
}

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<&String> for Name {
    fn from(s: &String) -> Self {
        Self::new(s)
    }
}

impl From<String> for Name {
    fn from(s: String) -> Self {
        Self::new(&s)
    }
}

impl From<&Name> for Name {
    fn from(s: &Name) -> Self {
        s.clone()
    }
}

impl From<Arc<str>> for Name {
    fn from(s: Arc<str>) -> Self {
        Self::new(&s)
    }
}

impl From<Name> for String {
    fn from(n: Name) -> Self {
        n.0.to_string()
    }
}

impl From<Name> for Arc<str> {
    fn from(n: Name) -> Self {
        n.0
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Name> for str {
    fn eq(&self, other: &Name) -> bool {
        *self == *other.0
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        **self == *other.0
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, other: &Name) -> bool {
        **self == *other.0
    }
}

impl Serialize for Name {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Name {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = Name;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Name, E> {
                Ok(Name::new(v))
            }
        }
        d.deserialize_str(Visitor)
    }
}

/// Plain text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TextContent {
    /// The text.
    pub text: String,
}

/// A model's reasoning, with the provider's opaque signature when it sent one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThinkingContent {
    /// The reasoning text (or its summary, for providers that only give summaries).
    pub thinking: String,
    /// Opaque signature that must be sent back unchanged to the model that made it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// A call the model asks for: a tool name and its JSON arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id; tool results refer to it.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments, normally a JSON object. Arguments that were not valid JSON are kept as a
    /// JSON string holding the raw text, so nothing the model said is lost. Shared: the events,
    /// steps and messages that repeat a call (a large one: a whole file to write) hold one copy.
    pub arguments: Arc<Value>,
}

/// An image, base64-encoded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ImageContent {
    /// Base64 data.
    pub data: String,
    /// MIME type such as `image/png`.
    pub mime_type: String,
}

/// A block of a user message or a tool result: text or an image.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum UserContent {
    /// Text.
    Text(TextContent),
    /// An image.
    Image(ImageContent),
}

impl UserContent {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        Self::Text(TextContent { text: text.into() })
    }
}

/// A block of an assistant message: text, thinking or a tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum AssistantContent {
    /// Text.
    Text(TextContent),
    /// Reasoning.
    Thinking(ThinkingContent),
    /// A tool call.
    ToolCall(ToolCall),
}

/// Why a model stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub enum StopReason {
    /// A natural end.
    #[default]
    Stop,
    /// The output token limit was reached.
    Length,
    /// The model asked for tool calls.
    ToolUse,
    /// The provider failed, refused or stopped for safety; `error_message` says why.
    Error,
    /// The caller aborted; the partial content is kept.
    Aborted,
}

impl StopReason {
    /// Whether the message ended in failure (`error` or `aborted`).
    pub fn is_failure(self) -> bool {
        matches!(self, Self::Error | Self::Aborted)
    }

    /// The JSON name (`"toolUse"` …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stop => "stop",
            Self::Length => "length",
            Self::ToolUse => "toolUse",
            Self::Error => "error",
            Self::Aborted => "aborted",
        }
    }
}

/// A message from the user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserMessage {
    /// Its blocks; a plain string is accepted on input.
    #[serde(deserialize_with = "user_content")]
    pub content: Vec<UserContent>,
    /// When it was made.
    #[serde(default)]
    pub timestamp: TimestampMs,
    /// The id a client gave it (a front end's message id: the AI SDK's `UIMessage.id`, an
    /// AG-UI message id), kept so that a message the client sends again is recognised.
    /// Absent when the client gave none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Box<str>>,
}

impl UserMessage {
    /// A text-only user message stamped now.
    pub fn text(text: impl Into<String>) -> Self {
        Self { content: vec![UserContent::text(text)], timestamp: now_ms(), id: None }
    }

    /// The message with the client's id `id`.
    #[must_use]
    pub fn with_id(mut self, id: impl Into<Box<str>>) -> Self {
        self.id = Some(id.into());
        self
    }

    /// The concatenated text of its text blocks.
    pub fn text_content(&self) -> String {
        join_text(&self.content)
    }
}

/// A message from the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AssistantMessage {
    /// Its blocks in the order the model produced them.
    pub content: Vec<AssistantContent>,
    /// Why the model stopped.
    pub stop_reason: StopReason,
    /// What went wrong, when `stop_reason` is `error` or `aborted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<Box<str>>,
    /// Tokens used by this call.
    #[serde(default)]
    pub usage: Usage,
    /// What this call cost, when the model's prices are known. Boxed: 40 bytes every message
    /// of a session would otherwise carry, whatever its role (a [`Message`] is the size of its
    /// largest variant), for a figure only priced models have.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost: Option<Box<Cost>>,
    /// The provider that made it (`openai`, `anthropic`, `faux` …), shared by every message
    /// of that provider.
    pub provider: Name,
    /// The model id, shared by every message of that model.
    pub model: Name,
    /// When it started.
    #[serde(default)]
    pub timestamp: TimestampMs,
}

impl AssistantMessage {
    /// An empty message of `provider`/`model`, stamped now, as a stream begins.
    pub fn empty(provider: impl Into<Name>, model: impl Into<Name>) -> Self {
        Self {
            content: Vec::new(),
            stop_reason: StopReason::Stop,
            error_message: None,
            usage: Usage::default(),
            cost: None,
            provider: provider.into(),
            model: model.into(),
            timestamp: now_ms(),
        }
    }

    /// The concatenated text of its text blocks.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for block in &self.content {
            if let AssistantContent::Text(t) = block {
                out.push_str(&t.text);
            }
        }
        out
    }

    /// What this call cost: its `cost`, or zero when the model's prices are not known.
    pub fn cost_or_zero(&self) -> Cost {
        self.cost.as_deref().copied().unwrap_or_default()
    }

    /// What went wrong, for a failed call: its `error_message`, or "the model call failed" when
    /// the provider said nothing.
    pub fn failure_text(&self) -> &str {
        self.error_message.as_deref().unwrap_or("the model call failed")
    }

    /// Its tool calls, in order.
    pub fn tool_calls(&self) -> impl Iterator<Item = &ToolCall> {
        self.content.iter().filter_map(|b| match b {
            AssistantContent::ToolCall(call) => Some(call),
            _ => None,
        })
    }
}

/// The result of one tool call, as the model sees it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultMessage {
    /// The call it answers.
    pub tool_call_id: String,
    /// The tool's name. May be left out on input (a client posting a remote tool's result): the
    /// agent takes it from the call the result answers.
    #[serde(default)]
    pub tool_name: String,
    /// The output; a plain string is accepted on input.
    #[serde(deserialize_with = "user_content")]
    pub content: Vec<UserContent>,
    /// Structured details for user interfaces; never sent to the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub details: Option<Value>,
    /// Whether the call failed.
    #[serde(default)]
    pub is_error: bool,
    /// When it was made.
    #[serde(default)]
    pub timestamp: TimestampMs,
}

impl ToolResultMessage {
    /// The text of its text blocks, one per line (images left out): what a tool role that
    /// takes text only is given.
    pub fn text(&self) -> String {
        let texts: Vec<&str> = self
            .content
            .iter()
            .filter_map(|c| match c {
                UserContent::Text(t) => Some(t.text.as_str()),
                UserContent::Image(_) => None,
            })
            .collect();
        texts.join("\n")
    }

    /// A successful text result stamped now.
    pub fn ok(call: &ToolCall, output: impl Into<String>) -> Self {
        Self::new(call.id.clone(), call.name.clone(), output, false)
    }

    /// An error result stamped now: the model sees `message` as the tool's output.
    pub fn error(call: &ToolCall, message: impl Into<String>) -> Self {
        Self::new(call.id.clone(), call.name.clone(), message, true)
    }

    /// An error result stamped `timestamp` (for code that is handed the time instead of
    /// reading a clock): the model sees `message` as the tool's output.
    pub fn error_at(call: &ToolCall, message: impl Into<String>, timestamp: TimestampMs) -> Self {
        Self {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            content: vec![UserContent::text(message)],
            details: None,
            is_error: true,
            timestamp,
        }
    }

    /// A text result stamped now.
    pub fn new(
        tool_call_id: impl Into<String>,
        tool_name: impl Into<String>,
        output: impl Into<String>,
        is_error: bool,
    ) -> Self {
        Self {
            tool_call_id: tool_call_id.into(),
            tool_name: tool_name.into(),
            content: vec![UserContent::text(output)],
            details: None,
            is_error,
            timestamp: now_ms(),
        }
    }

    /// The concatenated text of its text blocks.
    pub fn text_content(&self) -> String {
        join_text(&self.content)
    }
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "camelCase")]
pub enum Message {
    /// From the user.
    User(UserMessage),
    /// From the model.
    Assistant(AssistantMessage),
    /// A tool's result.
    ToolResult(ToolResultMessage),
}

impl Message {
    /// The role name as it appears in JSON.
    pub fn role(&self) -> Role {
        match self {
            Self::User(_) => Role::User,
            Self::Assistant(_) => Role::Assistant,
            Self::ToolResult(_) => Role::ToolResult,
        }
    }
}

impl Message {
    /// Gives back the room its vectors and strings hold beyond their length: a message parsed
    /// from JSON or built up while streaming keeps spare capacity (a one-block content vector
    /// with room for four, a text grown by doubling) that a message kept for a session's life
    /// does not need. [`History`](crate::History) does this to the messages it takes.
    pub fn shrink_to_fit(&mut self) {
        fn shrink_user(content: &mut Vec<UserContent>) {
            content.shrink_to_fit();
            for block in content {
                match block {
                    UserContent::Text(t) => t.text.shrink_to_fit(),
                    UserContent::Image(i) => {
                        i.data.shrink_to_fit();
                        i.mime_type.shrink_to_fit();
                    }
                }
            }
        }
        match self {
            Self::User(m) => shrink_user(&mut m.content),
            Self::Assistant(m) => {
                m.content.shrink_to_fit();
                for block in &mut m.content {
                    match block {
                        AssistantContent::Text(t) => t.text.shrink_to_fit(),
                        AssistantContent::Thinking(t) => {
                            t.thinking.shrink_to_fit();
                            if let Some(signature) = &mut t.signature {
                                signature.shrink_to_fit();
                            }
                        }
                        AssistantContent::ToolCall(call) => {
                            call.id.shrink_to_fit();
                            call.name.shrink_to_fit();
                        }
                    }
                }
            }
            Self::ToolResult(m) => {
                shrink_user(&mut m.content);
                m.tool_call_id.shrink_to_fit();
                m.tool_name.shrink_to_fit();
            }
        }
    }
}

impl AsRef<Message> for Message {
    fn as_ref(&self) -> &Message {
        self
    }
}

impl From<UserMessage> for Message {
    fn from(m: UserMessage) -> Self {
        Self::User(m)
    }
}
impl From<AssistantMessage> for Message {
    fn from(m: AssistantMessage) -> Self {
        Self::Assistant(m)
    }
}
impl From<ToolResultMessage> for Message {
    fn from(m: ToolResultMessage) -> Self {
        Self::ToolResult(m)
    }
}

/// A message's role.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Role {
    /// The user.
    User,
    /// The model.
    Assistant,
    /// A tool result.
    ToolResult,
}

std::thread_local! {
    /// The clock [`now_ms`] reads on this thread instead of the system's, if one is set.
    static CLOCK: std::cell::Cell<Option<fn() -> TimestampMs>> = const { std::cell::Cell::new(None) };
}

/// The current time in milliseconds since the Unix epoch (0 if the clock is before it): the
/// system's, or the clock [`set_thread_clock`] set on this thread.
pub fn now_ms() -> TimestampMs {
    if let Some(clock) = CLOCK.with(std::cell::Cell::get) {
        return clock();
    }
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// Makes [`now_ms`] read `clock` on this thread (`None`: the system's clock again). For a
/// simulation that runs a whole process on one thread in virtual time (a one-thread Tokio
/// runtime with paused time): timestamps, remote-call deadlines and their sweeps then follow
/// the simulated clock. Other threads are not affected.
pub fn set_thread_clock(clock: Option<fn() -> TimestampMs>) {
    CLOCK.with(|c| c.set(clock));
}

fn join_text(blocks: &[UserContent]) -> String {
    let mut out = String::new();
    for block in blocks {
        if let UserContent::Text(t) = block {
            out.push_str(&t.text);
        }
    }
    out
}

fn user_content<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<UserContent>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Text(String),
        Blocks(Vec<UserContent>),
    }
    Ok(match Either::deserialize(d)? {
        Either::Text(text) => vec![UserContent::text(text)],
        Either::Blocks(blocks) => blocks,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_string_content_is_accepted_and_written_as_blocks() {
        let m: Message =
            serde_json::from_str(r#"{"role":"user","content":"hi","timestamp":5}"#).unwrap();
        assert_eq!(
            serde_json::to_string(&m).unwrap(),
            r#"{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":5}"#
        );
        let r: Message = serde_json::from_str(
            r#"{"role":"toolResult","toolCallId":"c1","toolName":"t","content":"out","isError":true}"#,
        )
        .unwrap();
        let Message::ToolResult(r) = r else { panic!("not a tool result") };
        assert!(r.is_error);
        assert_eq!(r.text_content(), "out");
    }

    #[test]
    fn assistant_message_json_uses_the_plans_names() {
        let mut m = AssistantMessage::empty("faux", "m1");
        m.timestamp = 1;
        m.stop_reason = StopReason::ToolUse;
        m.content.push(AssistantContent::Thinking(ThinkingContent {
            thinking: "hm".into(),
            signature: Some("sig".into()),
        }));
        m.content.push(AssistantContent::ToolCall(ToolCall {
            id: "c1".into(),
            name: "get".into(),
            arguments: serde_json::json!({"a":1}).into(),
        }));
        let json = serde_json::to_value(Message::Assistant(m.clone())).unwrap();
        assert_eq!(json["role"], "assistant");
        assert_eq!(json["stopReason"], "toolUse");
        assert_eq!(json["content"][0]["type"], "thinking");
        assert_eq!(json["content"][0]["signature"], "sig");
        assert_eq!(json["content"][1]["type"], "toolCall");
        assert_eq!(json["usage"]["cacheRead"], 0);
        let back: Message = serde_json::from_value(json).unwrap();
        assert_eq!(back, Message::Assistant(m));
    }

    #[test]
    fn names_are_shared_and_read_as_strings() {
        let a: Message = serde_json::from_str(
            r#"{"role":"assistant","content":[],"stopReason":"stop","provider":"p-shared","model":"m-shared"}"#,
        )
        .unwrap();
        let b = AssistantMessage::empty("p-shared", String::from("m-shared"));
        let Message::Assistant(a) = a else { panic!("not an assistant message") };
        assert!(Arc::ptr_eq(a.provider.as_arc(), b.provider.as_arc()), "one string, shared");
        assert!(Arc::ptr_eq(a.model.as_arc(), b.model.as_arc()));
        assert_eq!(a.model, "m-shared");
        assert_eq!(a.model, String::from("m-shared"));
        assert_eq!(a.model.as_str(), "m-shared");
        assert_ne!(a.provider, a.model);
        assert_eq!(serde_json::to_value(&a.provider).unwrap(), "p-shared");
        assert!(serde_json::from_str::<Name>("42").is_err());
        // Every message a session keeps is this size (its largest variant's): 152 bytes, with
        // the `Arc` header a 176-byte chunk in glibc's malloc.
        assert!(std::mem::size_of::<Message>() <= 152, "{}", std::mem::size_of::<Message>());
    }

    #[test]
    fn unknown_role_is_a_clear_error() {
        let err = serde_json::from_str::<Message>(r#"{"role":"robot","content":"x"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("robot"), "{err}");
    }
}
