//! The README's library snippet ("Using the library"), verbatim between the markers below, so
//! that it cannot rot: `tests/readme.rs` checks that the README's ```rust block is exactly the
//! text between `// README:begin` and `// README:end`, and CI runs this program.
//!
//! Run it from the repository's root with `cargo run -p weft-examples --example readme`.

use anyhow::ensure;
use weft_core::SessionStatus;

#[rustfmt::skip] // the snippet keeps the README's layout
#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // README:begin
    use futures::StreamExt;
    use weft_agent::{Agent, SessionOptions, tool_fn};
    use weft_core::Input;
    use weft_llm::faux::{FauxProvider, FauxScript};

    #[derive(serde::Deserialize, schemars::JsonSchema)]
    struct City { city: String }

    let agent = Agent::builder(FauxProvider::new(FauxScript::from_file("examples/scripts/readme.json")?))
        .system_prompt("You are terse.")
        .tool(tool_fn("get_weather", "Weather of a city", |a: City| async move {
            Ok::<_, String>(format!("Sunny in {}", a.city))
        }))
        .build()?;
    let session = agent.create_session(SessionOptions::default()).await?;
    let mut stream = agent.execute(&session, Input::text("Weather in Paris?")).await?;
    while let Some(event) = stream.next().await {
        println!("{}", serde_json::to_string(&event)?);   // text_delta, toolcall_delta, …
    }
    let result = stream.result().await;                    // status, new messages, pending calls,
                                                           // usage, cost, steps
    // README:end

    ensure!(result.status == SessionStatus::Completed, "the run ended {}", result.status);
    ensure!(result.response().final_output == "It is sunny in Paris.", "unexpected answer");
    let tool_output = result.steps.first().and_then(|s| s.tool_results.first());
    ensure!(
        tool_output.is_some_and(|r| r.output.contains("Sunny in Paris")),
        "the tool did not run: {tool_output:?}"
    );
    Ok(())
}
