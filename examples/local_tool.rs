//! A local, streaming tool.
//!
//! The agent has one tool of its own, `search_docs`, which runs in this process and streams its
//! output while it works. The model is the faux provider playing a two-turn script:
//!
//! 1. the model says it will search and calls `search_docs` (its arguments arrive in pieces);
//!    the agent validates them, runs the tool, and shows its output as it is produced;
//! 2. the model answers from the tool's result.
//!
//! The program prints every event as it happens, then a summary, and fails (non-zero exit) if
//! the run did not go as described.
//!
//! Run it with `cargo run -p weft-examples --example local_tool`.

use std::time::Duration;

use anyhow::ensure;
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use weft_agent::{Agent, SessionOptions, ToolOutput, ToolOutputSink, streaming_tool_fn};
use weft_core::{AgentEvent, Input, SessionStatus};
use weft_examples::{EventPrinter, print_summary};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

/// The tool's arguments. The JSON Schema the model is given is derived from this type
/// (schemars): field names, types, and the doc comments as descriptions. Arguments are validated
/// against it before the tool runs.
#[derive(Deserialize, JsonSchema)]
struct SearchArgs {
    /// Words to look for, case-insensitively.
    query: String,
    /// At most this many hits (default 5).
    #[serde(default)]
    limit: Option<usize>,
}

/// What the tool searches: a tiny in-memory "documentation" corpus.
const DOCS: &[(&str, &str)] = &[
    ("DESIGN.md", "A remote tool call suspends the run with status awaiting_tool_execution."),
    ("DESIGN.md", "Independent local calls run in parallel; results keep the model's order."),
    ("agent-api-plan.md", "Tools can progressively stream output via tool_execution_delta."),
    ("agent-api-plan.md", "execute(session, toolResults) resumes a suspended run."),
    ("README.md", "Every event of a session gets a sequence number."),
];

/// The tool's body: finds matching lines and sends each hit as soon as it is "found" (with a
/// short sleep standing in for real work). The returned value is the whole output, which is what
/// the model sees; the deltas are for whoever watches the run.
async fn search_docs(args: SearchArgs, out: ToolOutputSink) -> Result<ToolOutput, String> {
    let query = args.query.to_lowercase();
    let limit = args.limit.unwrap_or(5);
    let mut output = format!("Searching {} documents for {:?}\n", DOCS.len(), args.query);
    out.send(output.clone()).await;

    let mut hits = 0;
    for (file, line) in DOCS {
        tokio::time::sleep(Duration::from_millis(40)).await;
        if hits == limit || !line.to_lowercase().contains(&query) {
            continue;
        }
        hits += 1;
        let hit = format!("- {file}: {line}\n");
        // `send` waits while the run is behind (backpressure) and returns false once nobody
        // listens (the run was aborted): stop working then.
        if !out.send(hit.as_str()).await {
            return Err("search cancelled".into());
        }
        output.push_str(&hit);
    }
    output.push_str(&format!("{hits} hit(s)"));
    out.send(format!("{hits} hit(s)")).await;
    // Details travel with the result to user interfaces; the model never sees them.
    Ok(ToolOutput::text(output).with_details(json!({ "hits": hits })))
}

const ANSWER: &str = "Two places mention it: a call to a remote tool suspends the run \
(status awaiting_tool_execution), and execute() with the tool results resumes it.";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // The model: a script. Each turn streams its text and tool-call arguments a few characters
    // at a time with a small delay, like a real provider.
    let script = FauxScript::new([
        FauxTurn::text("Let me search the docs.")
            .with_tool_call("search_docs", json!({ "query": "suspend" }))
            .with_chunk_size(5)
            .with_delay_ms(8)
            .with_usage(112, 31),
        FauxTurn::text(ANSWER).with_chunk_size(8).with_delay_ms(8).with_usage(205, 38),
    ]);

    // The agent: the provider plus a local tool. `streaming_tool_fn` makes a tool from an async
    // fn of typed arguments and an output sink.
    let tool = streaming_tool_fn(
        "search_docs",
        "Searches Weft's documentation and returns matching lines",
        search_docs,
    )
    .with_label("Search the docs");
    let agent = Agent::builder(FauxProvider::new(script))
        .system_prompt("You answer questions about Weft using its documentation.")
        .tool(tool)
        .build()?;
    let session = agent.create_session(SessionOptions::default()).await?;

    // Run it. `execute` returns at once; the run goes on in a task of its own and its events
    // arrive on the stream as they happen.
    let mut stream =
        agent.execute(&session, Input::text("How does a run wait for a tool?")).await?;
    let mut printer = EventPrinter::stdout();
    let mut output_deltas = 0;
    while let Some(event) = stream.next().await {
        printer.print(&event)?;
        if matches!(event, AgentEvent::ToolExecutionDelta { .. }) {
            output_deltas += 1;
        }
    }
    // After the last event: what the run did, as one value.
    let result = stream.result().await;
    println!();
    print_summary(&result)?;

    // Check the outcome, so CI catches a regression.
    ensure!(result.status == SessionStatus::Completed, "status is {}", result.status);
    ensure!(result.steps.len() == 2, "expected 2 steps, got {}", result.steps.len());
    let call = result.steps[0].tool_results.first();
    ensure!(
        call.is_some_and(|r| r.error.is_none() && r.output.ends_with("2 hit(s)")),
        "the search did not run as expected: {call:?}"
    );
    ensure!(output_deltas >= 3, "expected streamed tool output, got {output_deltas} deltas");
    ensure!(result.response().final_output == ANSWER, "unexpected final output");
    ensure!(result.usage.total == 112 + 31 + 205 + 38, "usage not summed: {:?}", result.usage);
    Ok(())
}
