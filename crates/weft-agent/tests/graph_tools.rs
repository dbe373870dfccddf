//! A graph-of-thoughts node's tool calls are checked as a conversation's are: arguments against
//! the tool's schema, the agent's `before_tool_call` hook, approval (which a graph node cannot
//! wait for, so such a call is refused). Refused calls never run, and the node's model sees
//! why; a call that passes runs.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::Recording;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use weft_agent::{Agent, AgentHooks, Mode, SessionOptions, ToolGate, tool_fn};
use weft_core::{AgentEvent, Input, Message, SessionStatus, ToolCall};
use weft_llm::faux::FauxTurn;

#[derive(Deserialize, JsonSchema)]
struct Args {
    text: String,
}

struct BlockSecrets;
impl AgentHooks for BlockSecrets {
    fn before_tool_call<'a>(&'a self, call: &'a ToolCall) -> BoxFuture<'a, ToolGate> {
        let secret = call.arguments["text"].as_str().is_some_and(|t| t.contains("secret"));
        Box::pin(async move {
            if secret { ToolGate::Block("no secrets".into()) } else { ToolGate::Allow }
        })
    }
}

#[tokio::test]
async fn a_graph_nodes_calls_are_validated_hooked_and_never_wait_for_approval() {
    let plan = json!({"nodes": [{"id": "only", "task": "Use the tools"}]}).to_string();
    let calls = FauxTurn::default()
        .with_tool_call_id("c1", "echo", json!({"wrong": 1}))
        .with_tool_call_id("c2", "echo", json!({"text": "a secret"}))
        .with_tool_call_id("c3", "wipe", json!({"text": "disk"}))
        .with_tool_call_id("c4", "echo", json!({"text": "fine"}));
    let provider = Recording::new([
        FauxTurn::text(plan),
        calls,
        FauxTurn::text("Only echo worked."),
        FauxTurn::text("Done: only echo worked."),
    ]);
    let ran = Arc::new(AtomicUsize::new(0));
    let (echoes, wipes) = (ran.clone(), ran.clone());
    let agent = Agent::builder(provider.clone())
        .tool(tool_fn("echo", "Echoes", move |a: Args| {
            echoes.fetch_add(1, Ordering::SeqCst);
            async move { Ok::<_, String>(a.text) }
        }))
        .tool(
            tool_fn("wipe", "Wipes", move |_: Args| {
                wipes.fetch_add(100, Ordering::SeqCst);
                async move { Ok::<_, String>("wiped".to_string()) }
            })
            .with_approval(),
        )
        .hooks(BlockSecrets)
        .build()
        .unwrap();
    let options = SessionOptions { mode: Some(Mode::named("got").unwrap()), ..Default::default() };
    let session = agent.create_session(options).await.unwrap();
    let (events, result) = common::run(&agent, &session, Input::text("Go")).await;
    assert_eq!(result.status, SessionStatus::Completed, "{:?}", result.error);
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only the valid, allowed call ran");

    // The node's second model call saw each refusal.
    let requests = provider.requests.lock().unwrap();
    let node_request = &requests[2];
    let results: Vec<(String, bool)> = node_request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((r.text_content(), r.is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(results[0].1 && results[0].0.contains("text"), "invalid arguments: {results:?}");
    assert_eq!(results[1], ("Tool call blocked: no secrets".to_string(), true));
    assert!(results[2].1 && results[2].0.contains("needs approval"), "{results:?}");
    assert_eq!(results[3], ("fine".to_string(), false));
    // Only local tools are offered to a graph node.
    let offered: Vec<&str> = node_request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(offered, ["echo", "wipe"]);
    // Refused calls have no execution events.
    let started: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionStart { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["c4"]);
}
