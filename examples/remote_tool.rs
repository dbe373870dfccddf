//! A remote tool: one that runs somewhere else (here, "in the user's browser").
//!
//! A remote tool is only a [`ToolSpec`] (name, description, JSON Schema), given to the session in
//! [`SessionOptions::tools`]; the agent has no code for it. When the model calls it, the run
//! cannot go on by itself, so it *suspends*:
//!
//! 1. run 1 ends with status `awaiting_tool_execution`, the call in `pending_tool_calls` (and in
//!    an `awaiting_tool_execution` event);
//! 2. the client executes the call wherever the tool lives and sends the result back with
//!    `execute(&session, Input::ToolResults(..))`;
//! 3. run 2 resumes the same turn: the model sees the result and answers.
//!
//! Over HTTP this is the same exchange: the spec travels as JSON (what JSON drops, the function,
//! is what makes it remote), and the result is POSTed back to `/api/agent/execute`.
//!
//! Run it with `cargo run -p weft-examples --example remote_tool`.

use anyhow::{Context, ensure};
use serde::Deserialize;
use serde_json::json;
use weft_agent::{Agent, SessionOptions};
use weft_core::{AgentEvent, Input, SessionStatus, ToolCall, ToolResultMessage, ToolSpec};
use weft_examples::{print_summary, run_printed};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

/// The page "open in the user's browser": CSS selector → text.
const PAGE: &[(&str, &str)] = &[
    ("title", "Weft blog"),
    ("h1", "Weft 0.1: agents that pause and resume"),
    ("p.lead", "Remote tools let the browser do the work."),
];

/// Stands in for the browser: executes one `read_page` call and answers it. In a real client this
/// is JavaScript reading the DOM; all the agent ever sees is the [`ToolResultMessage`].
fn browser_execute(call: &ToolCall) -> anyhow::Result<ToolResultMessage> {
    #[derive(Deserialize)]
    struct ReadPage {
        selector: String,
    }
    let args = ReadPage::deserialize(&*call.arguments)
        .with_context(|| format!("bad arguments for {}", call.name))?;
    Ok(match PAGE.iter().find(|(selector, _)| *selector == args.selector) {
        Some((_, text)) => ToolResultMessage::ok(call, *text),
        // A failure is still an answer: the model sees it as an error result.
        None => ToolResultMessage::error(call, format!("no element matches {:?}", args.selector)),
    })
}

const ANSWER: &str = "The headline is \"Weft 0.1: agents that pause and resume\".";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let script = FauxScript::new([
        FauxTurn::text("I'll read the headline from your page.")
            .with_tool_call("read_page", json!({ "selector": "h1" }))
            .with_chunk_size(6)
            .with_delay_ms(5)
            .with_usage(96, 22),
        FauxTurn::text(ANSWER).with_chunk_size(8).with_delay_ms(5).with_usage(140, 17),
    ]);
    // No local tools: the agent knows nothing of `read_page` ...
    let agent = Agent::builder(FauxProvider::new(script)).build()?;

    // ... the session does, as a spec without an executor: a remote tool.
    let read_page = ToolSpec::new(
        "read_page",
        "Reads the text of an element of the page open in the user's browser",
        json!({
            "type": "object",
            "properties": { "selector": { "type": "string", "description": "A CSS selector" } },
            "required": ["selector"]
        }),
    );
    let session = agent
        .create_session(SessionOptions { tools: vec![read_page], ..Default::default() })
        .await?;

    // Run 1: the model calls the remote tool, and the run suspends.
    println!("# run 1");
    let stream = agent.execute(&session, Input::text("What's the headline of this page?")).await?;
    let (events, result) = run_printed(stream).await?;
    println!("run 1 status: {}\n", result.status);
    ensure!(
        result.status == SessionStatus::AwaitingToolExecution,
        "run 1 should wait for the browser, but its status is {}",
        result.status
    );
    ensure!(
        events.iter().any(|e| matches!(e, AgentEvent::AwaitingToolExecution { .. })),
        "no awaiting_tool_execution event"
    );
    ensure!(
        !events.iter().any(|e| matches!(e, AgentEvent::ToolExecutionStart { .. })),
        "a remote tool must not run in the agent"
    );
    // The session keeps the pending calls too (a server stores them between requests).
    ensure!(session.status() == SessionStatus::AwaitingToolExecution);
    ensure!(session.pending_tool_calls() == result.pending_tool_calls);

    // "Elsewhere": execute every pending call and collect the results.
    let mut results = Vec::new();
    for call in &result.pending_tool_calls {
        println!("browser executes {} [{}] {}", call.name, call.id, call.arguments);
        let answer = browser_execute(call)?;
        println!("browser answers: {}\n", answer.text_content());
        results.push(answer);
    }
    ensure!(results.len() == 1, "expected one pending call, got {}", results.len());

    // Run 2: the results resume the suspended run; the model answers.
    println!("# run 2");
    let (_, result) =
        run_printed(agent.execute(&session, Input::ToolResults(results)).await?).await?;
    println!("run 2 status: {}\n", result.status);
    print_summary(&result)?;

    ensure!(result.status == SessionStatus::Completed, "run 2 status is {}", result.status);
    ensure!(session.pending_tool_calls().is_empty(), "calls still pending");
    // The step the call belonged to ends in run 2, with the browser's result in its trace.
    let step = result.steps.first().context("run 2 finished no step")?;
    ensure!(step.tool_results.first().is_some_and(|r| r.output.starts_with("Weft 0.1")));
    ensure!(result.response().final_output == ANSWER, "unexpected final output");
    Ok(())
}
