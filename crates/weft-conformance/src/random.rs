//! Random runs: random faux scripts (text, thinking, tool calls to local, failing, remote,
//! unknown and approval-gated tools, random chunking, errors) played by a real agent, resumed
//! until they rest. Their event streams feed the round-trip properties.

use proptest::prelude::*;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_agent::{Agent, SessionOptions, streaming_tool_fn, tool_fn};
use weft_core::{AgentEvent, ApprovalDecision, Input, SessionStatus, ToolResultMessage, ToolSpec};
use weft_llm::faux::{FauxProvider, FauxScript, FauxToolCall, FauxTurn};

/// Text with the characters that break naive encoders: quotes, backslashes, newlines, control
/// characters, non-ASCII.
pub fn arb_text() -> impl Strategy<Value = String> {
    prop_oneof!["[a-zA-Z ,.!?]{0,40}", "[a-z\"\\\\\n\t\r/{}\\[\\]:é漢😀\u{1}]{0,30}",]
}

fn arb_call() -> impl Strategy<Value = FauxToolCall> {
    let args = prop_oneof![
        arb_text().prop_map(|t| json!({ "text": t })),
        any::<i64>().prop_map(|n| json!({ "text": n })),
        Just(json!({})),
    ];
    (prop_oneof![Just("echo"), Just("fail"), Just("remote"), Just("unknown"), Just("gated")], args)
        .prop_map(|(name, arguments)| FauxToolCall { id: None, name: name.into(), arguments })
}

fn arb_turn() -> impl Strategy<Value = FauxTurn> {
    (
        proptest::option::of(arb_text()),
        proptest::option::of(arb_text()),
        proptest::collection::vec(arb_call(), 0..3),
        1usize..9,
        proptest::option::weighted(0.15, "[a-z ]{1,12}"),
        proptest::option::of((0u64..50, 0u64..50)),
    )
        .prop_map(|(thinking, text, tool_calls, chunk, error, usage)| {
            let mut turn = FauxTurn { thinking, text, tool_calls, ..FauxTurn::default() };
            turn.chunk_size = Some(chunk);
            turn.error = error;
            if let Some((input, output)) = usage {
                turn = turn.with_usage(input, output);
            }
            turn
        })
}

/// A random script of one to five turns.
pub fn arb_script() -> impl Strategy<Value = FauxScript> {
    proptest::collection::vec(arb_turn(), 1..6).prop_map(FauxScript::new)
}

#[derive(Deserialize, JsonSchema)]
struct Text {
    text: String,
}

/// Plays `script` to rest: the user's message, then, while the run is suspended, results for
/// remote calls and alternating approve/deny decisions (at most eight runs). Returns the
/// session's whole event stream.
pub async fn play(script: FauxScript) -> Vec<AgentEvent> {
    let echo = streaming_tool_fn("echo", "Echoes text", |t: Text, out| async move {
        for word in t.text.split_inclusive(' ') {
            out.send(word).await;
        }
        Ok::<_, String>(t.text)
    });
    let fail = tool_fn("fail", "Always fails", |t: Text| async move {
        Err::<String, _>(format!("failed on {:?}", t.text))
    });
    let gated = tool_fn("gated", "Needs approval", |t: Text| async move {
        Ok::<_, String>(format!("approved: {}", t.text))
    })
    .with_approval();
    let agent = Agent::builder(FauxProvider::new(script))
        .tool(echo)
        .tool(fail)
        .tool(gated)
        .max_turns(8)
        .build()
        .unwrap_or_else(|e| panic!("agent: {e}"));
    let remote = ToolSpec::new(
        "remote",
        "Runs in the client",
        json!({"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}),
    );
    let session = agent
        .create_session(SessionOptions { tools: vec![remote], ..Default::default() })
        .await
        .unwrap_or_else(|e| panic!("session: {e}"));
    let mut events = Vec::new();
    let mut input = Input::text("go");
    for round in 0..8 {
        let (mut run, result) = agent
            .execute(&session, input)
            .await
            .unwrap_or_else(|e| panic!("input refused: {e}"))
            .collect_all()
            .await;
        events.append(&mut run);
        input = match result.status {
            SessionStatus::AwaitingApproval => Input::Approvals {
                approvals: result
                    .pending_approvals
                    .iter()
                    .map(|c| {
                        if round % 2 == 0 {
                            ApprovalDecision::approve(&c.id)
                        } else {
                            ApprovalDecision::deny(&c.id, "not now")
                        }
                    })
                    .collect(),
            },
            SessionStatus::AwaitingToolExecution => Input::ToolResults(
                result
                    .pending_tool_calls
                    .iter()
                    .map(|c| {
                        let text = c.arguments.get("text").and_then(Value::as_str).unwrap_or("");
                        ToolResultMessage::ok(c, format!("client says {text}"))
                    })
                    .collect(),
            ),
            _ => break,
        };
    }
    events
}

/// [`play`] on a fresh single-threaded runtime.
pub fn play_blocking(script: FauxScript) -> Vec<AgentEvent> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
        .block_on(play(script))
}
