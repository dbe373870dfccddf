//! A small MCP server (rmcp's server side) for tests and offline demos, served over stdio by the
//! `weft-mcp-fixture` binary or over streamable HTTP by [`serve_http`].
//!
//! Its tools: `add {a, b}` (text and `structuredContent {sum}`), `image` (a 1×1 PNG), `fail`
//! (`isError`), `slow {steps}` (a progress notification per step, 50 ms apart), `hang` (waits
//! until cancelled), `crash` (the process exits: stdio only), `freeze` (blocks the server's only
//! thread: stdio only), `cancellations` (how many
//! `notifications/cancelled` this server received), `grow` (adds the tool `extra` and sends
//! `notifications/tools/list_changed`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelledNotificationParam,
    ContentBlock, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};

/// A 1×1 transparent PNG, base64.
pub const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg==";

/// The fixture server's state (shared by its sessions).
#[derive(Clone, Default)]
pub struct Fixture {
    cancellations: Arc<AtomicU64>,
    grown: Arc<AtomicBool>,
}

fn tool(name: &'static str, description: &'static str, schema: Value) -> Tool {
    let schema = match schema {
        Value::Object(map) => map,
        _ => serde_json::Map::new(),
    };
    Tool::new(name, description, Arc::new(schema))
}

fn object(properties: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": properties, "required": required})
}

impl Fixture {
    fn tools(&self) -> Vec<Tool> {
        let none = object(json!({}), &[]);
        let mut tools = vec![
            tool(
                "add",
                "Adds two numbers",
                object(json!({"a": {"type": "number"}, "b": {"type": "number"}}), &["a", "b"]),
            ),
            tool("image", "Returns a tiny PNG", none.clone()),
            tool("fail", "Always fails", none.clone()),
            tool(
                "slow",
                "Reports progress for each step",
                object(
                    json!({"steps": {"type": "integer", "minimum": 1, "maximum": 100}}),
                    &["steps"],
                ),
            ),
            tool("hang", "Waits until cancelled", none.clone()),
            tool("crash", "Exits the server process", none.clone()),
            tool(
                "freeze",
                "Blocks the whole server (stdio only: its runtime has one thread); writes the \
                 file `marker`, if given, just before",
                object(json!({"marker": {"type": "string"}}), &[]),
            ),
            tool("cancellations", "How many cancellations this server received", none.clone()),
            tool("grow", "Adds the tool extra", none.clone()),
        ];
        if self.grown.load(Ordering::SeqCst) {
            tools.push(tool("extra", "Appears after grow", none));
        }
        tools
    }
}

fn text(text: impl Into<String>) -> Result<CallToolResponse, ErrorData> {
    Ok(CallToolResult::success(vec![ContentBlock::text(text.into())]).into())
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder().enable_tools().enable_tool_list_changed().build(),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(self.tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.unwrap_or_default();
        let number = |key: &str| args.get(key).and_then(Value::as_f64).unwrap_or(0.0);
        match request.name.as_ref() {
            "add" => {
                let sum = number("a") + number("b");
                let mut result = CallToolResult::success(vec![ContentBlock::text(sum.to_string())]);
                result.structured_content = Some(json!({"sum": sum}));
                Ok(result.into())
            }
            "image" => Ok(CallToolResult::success(vec![
                ContentBlock::text("a pixel:"),
                ContentBlock::image(PNG, "image/png"),
            ])
            .into()),
            "fail" => {
                Ok(CallToolResult::error(vec![ContentBlock::text("it failed on purpose")]).into())
            }
            "slow" => {
                let steps = number("steps").max(1.0) as u32;
                let token = context.meta.get_progress_token();
                for step in 1..=steps {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    if let Some(token) = &token {
                        let _ = context
                            .peer
                            .notify_progress(
                                ProgressNotificationParam::new(token.clone(), f64::from(step))
                                    .with_total(f64::from(steps))
                                    .with_message(format!("step {step} of {steps}")),
                            )
                            .await;
                    }
                }
                text(format!("done after {steps} steps"))
            }
            "hang" => {
                started(&context).await;
                context.ct.cancelled().await;
                text("cancelled")
            }
            "crash" => std::process::exit(3),
            "freeze" => {
                // Said through a file, with no await between it and the block: after a
                // notification's await the caller could cancel before the server blocked, and
                // the server went on answering.
                if let Some(marker) = args.get("marker").and_then(Value::as_str) {
                    let _ = std::fs::write(marker, "frozen");
                }
                // Blocks the thread: a single-threaded server stops answering anything.
                std::thread::sleep(Duration::from_secs(600));
                text("thawed")
            }
            "cancellations" => text(self.cancellations.load(Ordering::SeqCst).to_string()),
            "grow" => {
                self.grown.store(true, Ordering::SeqCst);
                let _ = context.peer.notify_tool_list_changed().await;
                text("grown")
            }
            "extra" => text("extra here"),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }

    async fn on_cancelled(
        &self,
        _notification: CancelledNotificationParam,
        _context: NotificationContext<RoleServer>,
    ) {
        self.cancellations.fetch_add(1, Ordering::SeqCst);
    }
}

/// Tells the caller the call has begun (a progress notification `started`, when it asked for
/// progress): a test cancels a call once it is surely running, not after a guessed delay.
async fn started(context: &RequestContext<RoleServer>) {
    if let Some(token) = context.meta.get_progress_token() {
        let progress = ProgressNotificationParam::new(token, 0.0).with_message("started");
        let _ = context.peer.notify_progress(progress).await;
    }
}

/// Serves the fixture over stdio until the client goes away.
pub async fn serve_stdio() -> Result<(), String> {
    use rmcp::ServiceExt;
    let service =
        Fixture::default().serve(rmcp::transport::stdio()).await.map_err(|e| e.to_string())?;
    service.waiting().await.map_err(|e| e.to_string())?;
    Ok(())
}

/// Serves the fixture over streamable HTTP at `/mcp` on `listener` (one state for every
/// session), until the task is dropped.
pub async fn serve_http(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    };
    let fixture = Fixture::default();
    let service: StreamableHttpService<Fixture, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(fixture.clone()),
        Default::default(),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service("/mcp", service);
    axum::serve(listener, router).await
}
