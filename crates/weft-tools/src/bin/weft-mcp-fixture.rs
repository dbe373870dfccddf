//! The fixture MCP server of `weft_tools::fixture` over stdio: for tests and offline demos.

#[tokio::main(flavor = "current_thread")]
async fn main() {
    if let Err(error) = weft_tools::fixture::serve_stdio().await {
        eprintln!("weft-mcp-fixture: {error}");
        std::process::exit(1);
    }
}
