//! Named scenarios: real agent runs on the faux provider, each a session's whole event stream
//! (one run, or several when the scenario suspends and resumes), normalized.

use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use weft_agent::{Agent, SessionHandle, SessionOptions, streaming_tool_fn, tool_fn};
use weft_core::{AgentEvent, Input, ToolResultMessage, ToolSpec};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

use crate::normalize::normalize;

/// Every scenario's name.
pub const ALL: [&str; 7] = [
    "text_with_thinking",
    "tool_call",
    "remote_suspension",
    "approval",
    "provider_error",
    "abort",
    "multi_step",
];

#[derive(Deserialize, JsonSchema)]
struct Query {
    query: String,
}

#[derive(Deserialize, JsonSchema)]
struct Path {
    path: String,
}

fn agent(turns: Vec<FauxTurn>) -> Agent {
    let search = streaming_tool_fn("search", "Searches the docs", |q: Query, out| async move {
        out.send(format!("Searching for {:?}\n", q.query)).await;
        out.send("- DESIGN.md\n").await;
        out.send("- ARCHITECTURE.md\n").await;
        Ok::<_, String>("2 results: DESIGN.md, ARCHITECTURE.md")
    });
    let delete = tool_fn("delete_file", "Deletes a file", |p: Path| async move {
        Ok::<_, String>(format!("deleted {}", p.path))
    })
    .with_approval();
    Agent::builder(FauxProvider::new(FauxScript::new(turns)))
        .model("faux-1")
        .tool(search)
        .tool(delete)
        .build()
        .unwrap_or_else(|e| panic!("scenario agent: {e}"))
}

async fn session(agent: &Agent) -> SessionHandle {
    let read_page = ToolSpec::new(
        "read_page",
        "Reads the page open in the user's browser",
        json!({"type":"object","properties":{"selector":{"type":"string"}},"required":["selector"]}),
    );
    agent
        .create_session(SessionOptions {
            id: Some("session-1".into()),
            tools: vec![read_page],
            ..Default::default()
        })
        .await
        .unwrap_or_else(|e| panic!("scenario session: {e}"))
}

async fn run(agent: &Agent, session: &SessionHandle, input: Input, out: &mut Vec<AgentEvent>) {
    let (events, _) = agent
        .execute(session, input)
        .await
        .unwrap_or_else(|e| panic!("scenario input refused: {e}"))
        .collect_all()
        .await;
    out.extend(events);
}

/// The normalized events of scenario `name` (one of [`ALL`]).
pub async fn scenario(name: &str) -> Vec<AgentEvent> {
    let mut events = Vec::new();
    match name {
        "text_with_thinking" => {
            let a = agent(vec![
                FauxTurn::text("Paris is the capital of France.")
                    .with_thinking("A geography question.")
                    .with_chunk_size(8)
                    .with_usage(25, 12),
            ]);
            let s = session(&a).await;
            run(&a, &s, Input::text("What is the capital of France?"), &mut events).await;
        }
        "tool_call" => {
            let a = agent(vec![
                FauxTurn::text("Let me search.")
                    .with_tool_call("search", json!({"query": "streaming"}))
                    .with_chunk_size(7)
                    .with_usage(40, 20),
                FauxTurn::text("Two documents mention it.").with_chunk_size(12).with_usage(60, 8),
            ]);
            let s = session(&a).await;
            run(&a, &s, Input::text("Where is streaming described?"), &mut events).await;
        }
        "remote_suspension" => {
            let a = agent(vec![
                FauxTurn::text("Reading the page.")
                    .with_tool_call("read_page", json!({"selector": "h1"}))
                    .with_chunk_size(9),
                FauxTurn::text("The headline is Weft.").with_chunk_size(11),
            ]);
            let s = session(&a).await;
            run(&a, &s, Input::text("What is the headline?"), &mut events).await;
            let call = s.pending_tool_calls().remove(0);
            let result = ToolResultMessage::ok(&call, "Weft");
            run(&a, &s, Input::ToolResults(vec![result]), &mut events).await;
        }
        "approval" => {
            let a = agent(vec![
                FauxTurn::tool_call("delete_file", json!({"path": "/tmp/cache"})),
                FauxTurn::text("The cache is gone.").with_chunk_size(10),
            ]);
            let s = session(&a).await;
            run(&a, &s, Input::text("Clear the cache."), &mut events).await;
            let call = s.pending_approvals().remove(0);
            run(&a, &s, Input::approve(call.id), &mut events).await;
        }
        "provider_error" => {
            let a = agent(vec![
                FauxTurn::text("I was about to").with_chunk_size(6).with_error("overloaded"),
            ]);
            let s = session(&a).await;
            run(&a, &s, Input::text("Say something."), &mut events).await;
        }
        "abort" => {
            let a = agent(vec![FauxTurn::text("Once upon a time").with_chunk_size(5).stalled()]);
            let s = session(&a).await;
            let mut stream = a
                .execute(&s, Input::text("Tell me a story."))
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let mut text = String::new();
            while let Some(event) = stream.next().await {
                if let AgentEvent::TextDelta { delta, .. } = &event {
                    text.push_str(delta);
                    if text == "Once upon a time" {
                        stream.abort();
                    }
                }
                events.push(event);
            }
        }
        "multi_step" => {
            let a = agent(vec![
                FauxTurn::tool_call("search", json!({"query": "suspend"})),
                FauxTurn::default()
                    .with_tool_call("search", json!({"query": "resume"}))
                    .with_tool_call("teleport", json!({})),
                FauxTurn::text("Suspend and resume are both in DESIGN.md.")
                    .with_thinking("Both searches agree.")
                    .with_chunk_size(16),
            ]);
            let s = session(&a).await;
            run(&a, &s, Input::text("Find suspend and resume."), &mut events).await;
        }
        other => panic!("no scenario named {other}"),
    }
    normalize(&events)
}

/// Runs [`scenario`] on a fresh single-threaded runtime.
pub fn scenario_blocking(name: &str) -> Vec<AgentEvent> {
    tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"))
        .block_on(scenario(name))
}
