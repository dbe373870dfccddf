//! The UI message stream's rules, checked over a whole stream: what the strict schema of each
//! part allows, and how parts open and close ([`check`]).

use std::collections::{BTreeMap, HashSet};

use serde_json::{Value, json};

use super::super::DONE;
use crate::Frame;

/// (required fields, optional fields) of each chunk type, from AI SDK 6's strict
/// `uiMessageChunkSchema`.
fn schema(kind: &str) -> (&'static [&'static str], &'static [&'static str]) {
    match kind {
        "start" => (&[], &["messageId", "messageMetadata"]),
        "finish" => (&[], &["finishReason", "messageMetadata"]),
        "start-step" | "finish-step" | "abort" => (&[], &[]),
        "text-start" | "text-end" | "reasoning-start" | "reasoning-end" => {
            (&["id"], &["providerMetadata"])
        }
        "text-delta" | "reasoning-delta" => (&["id", "delta"], &["providerMetadata"]),
        "error" => (&["errorText"], &[]),
        "tool-input-start" => {
            (&["toolCallId", "toolName"], &["providerExecuted", "dynamic", "title"])
        }
        "tool-input-delta" => (&["toolCallId", "inputTextDelta"], &[]),
        "tool-input-available" => (
            &["toolCallId", "toolName", "input"],
            &["providerExecuted", "providerMetadata", "dynamic", "title"],
        ),
        "tool-approval-request" => (&["approvalId", "toolCallId"], &[]),
        "tool-output-available" => {
            (&["toolCallId", "output"], &["providerExecuted", "dynamic", "preliminary"])
        }
        "tool-output-error" => (&["toolCallId", "errorText"], &["providerExecuted", "dynamic"]),
        "tool-output-denied" => (&["toolCallId"], &[]),
        k if k.starts_with("data-") => (&["data"], &["id", "transient"]),
        other => panic!("not a UI message chunk type: {other}"),
    }
}

/// What a UI message stream says, after checking it the way `useChat` reads it.
#[derive(Debug, Default)]
pub(super) struct Seen {
    /// Text parts: (id, concatenated deltas), in start order.
    pub(super) texts: Vec<(String, String)>,
    /// Reasoning parts' text, in start order.
    pub(super) reasoning: Vec<String>,
    /// Streamed tool input text by call id.
    pub(super) input_text: BTreeMap<String, String>,
    /// `tool-input-available` inputs by call id.
    pub(super) inputs: BTreeMap<String, Value>,
    /// Outputs by call id: `output`, or `{"error": errorText}`.
    pub(super) outputs: BTreeMap<String, Value>,
    /// The `finish` parts.
    pub(super) finishes: Vec<Value>,
}

/// Checks a stream: only schema fields; `start` first and each message closed by `finish`;
/// `[DONE]` once, last; steps neither nested nor left open; text and reasoning deltas only
/// between their `*-start` and `*-end`, ids never reused, nothing open at `finish-step` or
/// `finish`; tool input deltas only for started calls; outputs and approvals only for calls
/// the client knows (streamed here, or `known` from an earlier response).
pub(super) fn check(frames: &[Frame], known: &[&str]) -> Seen {
    assert_eq!(frames.last().map(|f| f.data.as_str()), Some(DONE), "the stream ends with [DONE]");
    assert_eq!(frames.iter().filter(|f| !f.is_json()).count(), 1, "one terminator");
    let mut checker =
        Checker { calls: known.iter().map(|s| s.to_string()).collect(), ..Checker::default() };
    for (i, frame) in frames[..frames.len() - 1].iter().enumerate() {
        let v: Value = serde_json::from_str(&frame.data).unwrap();
        checker.frame(i, &v);
    }
    assert!(!checker.in_message, "the stream ended inside a message");
    checker.seen
}

/// What [`check`] keeps while it reads a stream.
#[derive(Default)]
struct Checker {
    seen: Seen,
    in_message: bool,
    step_open: bool,
    open: BTreeMap<String, String>,
    ids: HashSet<String>,
    calls: HashSet<String>,
    streaming_calls: HashSet<String>,
    reasoning_at: BTreeMap<String, usize>,
}

impl Checker {
    fn frame(&mut self, i: usize, v: &Value) {
        let kind = v["type"].as_str().unwrap();
        let (required, optional) = schema(kind);
        for key in v.as_object().unwrap().keys() {
            assert!(
                key == "type"
                    || required.contains(&key.as_str())
                    || optional.contains(&key.as_str()),
                "{kind} has a field the strict schema rejects: {key}"
            );
        }
        for key in required {
            assert!(v.get(*key).is_some(), "{kind} lacks {key}");
        }
        if kind == "start" {
            assert!(!self.in_message, "start at {i} inside a message");
            self.in_message = true;
            return;
        }
        assert!(self.in_message, "{kind} at {i} outside start … finish");
        if kind.starts_with("tool-") {
            return self.tool(kind, v);
        }
        let id = |field: &str| v[field].as_str().unwrap().to_string();
        match kind {
            "finish" => {
                assert!(!self.step_open, "finish with a step open");
                assert!(self.open.is_empty(), "finish with parts open: {:?}", self.open);
                let reason = v["finishReason"].as_str().unwrap();
                assert!(
                    ["stop", "length", "content-filter", "tool-calls", "error", "other", "unknown"]
                        .contains(&reason)
                );
                self.in_message = false;
                self.seen.finishes.push(v.clone());
            }
            "start-step" => {
                assert!(!self.step_open, "start-step at {i} inside a step");
                self.step_open = true;
            }
            "finish-step" => {
                assert!(self.step_open, "finish-step at {i} without a step");
                assert!(self.open.is_empty(), "finish-step with parts open: {:?}", self.open);
                self.step_open = false;
            }
            "text-start" | "reasoning-start" => {
                let id = id("id");
                assert!(self.step_open, "{kind} outside a step");
                assert!(self.ids.insert(id.clone()), "part id {id} reused");
                self.open.insert(id.clone(), kind.to_string());
                if kind == "text-start" {
                    self.seen.texts.push((id, String::new()));
                } else {
                    self.reasoning_at.insert(id, self.seen.reasoning.len());
                    self.seen.reasoning.push(String::new());
                }
            }
            "text-delta" | "reasoning-delta" => {
                let id = id("id");
                let started = if kind == "text-delta" { "text-start" } else { "reasoning-start" };
                assert_eq!(
                    self.open.get(&id).map(String::as_str),
                    Some(started),
                    "{kind} for a part not open: {id}"
                );
                let delta = v["delta"].as_str().unwrap();
                assert!(!delta.is_empty());
                if kind == "text-delta" {
                    self.seen.texts.iter_mut().find(|(t, _)| *t == id).unwrap().1.push_str(delta);
                } else {
                    self.seen.reasoning[self.reasoning_at[&id]].push_str(delta);
                }
            }
            "text-end" | "reasoning-end" => {
                let id = id("id");
                assert!(self.open.remove(&id).is_some(), "{kind} for a part not open: {id}");
            }
            "error" | "abort" => {}
            data => assert!(data.starts_with("data-")),
        }
    }

    /// Tool inputs, outputs and approval requests.
    fn tool(&mut self, kind: &str, v: &Value) {
        let id = |field: &str| v[field].as_str().unwrap().to_string();
        match kind {
            "tool-input-start" => {
                let id = id("toolCallId");
                assert!(self.calls.insert(id.clone()), "call {id} started twice");
                self.streaming_calls.insert(id.clone());
                self.seen.input_text.insert(id, String::new());
            }
            "tool-input-delta" => {
                let id = id("toolCallId");
                assert!(self.streaming_calls.contains(&id), "input delta for a call not started");
                self.seen
                    .input_text
                    .get_mut(&id)
                    .unwrap()
                    .push_str(v["inputTextDelta"].as_str().unwrap());
            }
            "tool-input-available" => {
                let id = id("toolCallId");
                self.streaming_calls.remove(&id);
                self.calls.insert(id.clone());
                self.seen.inputs.insert(id, v["input"].clone());
            }
            "tool-output-available"
            | "tool-output-error"
            | "tool-output-denied"
            | "tool-approval-request" => {
                let id = id("toolCallId");
                assert!(
                    self.calls.contains(&id),
                    "{kind} for a call the client does not know: {id}"
                );
                if kind == "tool-output-available" {
                    self.seen.outputs.insert(id, v["output"].clone());
                } else if kind == "tool-output-error" {
                    self.seen.outputs.insert(id, json!({ "error": v["errorText"] }));
                } else if kind == "tool-output-denied" {
                    self.seen.outputs.insert(id, json!("denied"));
                }
            }
            other => panic!("unexpected part type {other}"),
        }
    }
}
