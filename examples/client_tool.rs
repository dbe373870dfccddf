//! A Rust service that exposes a local tool to a Weft server through `weft-client`.
//!
//! The server (`weft serve`; here one started in this process on 127.0.0.1 with the faux
//! provider, or the one `WEFT_SERVER` names) knows the tool only by its spec: when the model
//! calls it, the run suspends (`awaiting_tool_execution`). The client runs the call here — the
//! tool is an ordinary [`weft_agent::Tool`] made with `tool_fn` — posts the result and goes on
//! reading the resumed run, all inside one stream of events.
//!
//! Run it with `cargo run -p weft-examples --example client_tool`.

use anyhow::{Context, ensure};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;
use weft_agent::{Agent, tool_fn};
use weft_client::{Client, ExecuteOptions};
use weft_core::{AgentEvent, Input, SessionStatus};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

/// The tool's arguments; its JSON Schema is derived from this type.
#[derive(Deserialize, schemars::JsonSchema)]
struct Stock {
    /// The product's SKU.
    sku: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // A server to talk to: WEFT_SERVER, or one of our own on 127.0.0.1.
    let (base, _server) = match std::env::var("WEFT_SERVER") {
        Ok(url) => (url, None),
        Err(_) => {
            let script = FauxScript::new([
                FauxTurn::text("Checking the warehouse.").with_tool_call_id(
                    "call-1",
                    "stock_level",
                    json!({"sku": "A-42"}),
                ),
                FauxTurn::text("There are 17 units of A-42 in stock."),
            ]);
            let agent = Agent::builder(FauxProvider::new(script))
                .model("faux")
                .store(weft_store::connect("memory").await?)
                .build()?;
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let base = format!("http://{}", listener.local_addr()?);
            let server = weft_server::Server::new(agent, weft_server::Settings::new("faux"));
            (base, Some(tokio::spawn(server.serve(listener, std::future::pending()))))
        }
    };

    // The service's own tool: it reads the service's data, which never leaves it but as the
    // tool's answer.
    let stock = tool_fn("stock_level", "Units in stock for a SKU", |args: Stock| async move {
        let units = if args.sku == "A-42" { 17 } else { 0 };
        Ok::<_, String>(format!("{units} units of {}", args.sku))
    });

    let client = Client::new(&base);
    let mut stream =
        client.execute(Input::text("How many A-42 do we have?"), ExecuteOptions::new().tool(stock));
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event?.event() {
            Some(AgentEvent::TextDelta { delta, .. }) => text.push_str(delta),
            Some(AgentEvent::AwaitingToolExecution { tool_calls, .. }) => {
                let names: Vec<&str> = tool_calls.iter().map(|c| c.name.as_str()).collect();
                println!("[server waits for] {}", names.join(", "));
            }
            _ => {}
        }
    }
    let result = stream.result().context("the stream ended without a result")?;
    println!("{text}");
    println!("session {} ended {}", result.session_id, result.status);
    ensure!(result.status == SessionStatus::Completed, "the run did not complete");
    ensure!(text.contains("17 units"), "unexpected answer: {text}");
    Ok(())
}
