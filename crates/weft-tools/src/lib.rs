//! # weft-tools
//!
//! Tools from outside and built in, as [`weft_tool_api::ToolSource`]s:
//!
//! - [`mcp`]: MCP servers (stdio or streamable HTTP) through the official SDK, `rmcp`; each
//!   server's tools are named `SERVER__TOOL`, listed at start-up and again when the server says
//!   they changed, and a server that crashes or hangs is restarted with backoff;
//! - [`builtin`]: a safe standard set, each opt-in: `read_file`, `list_dir`, `write_file`
//!   (confined to a root), `fetch_url` (public addresses only), `shell` (approval by default),
//!   `current_time`, `calculator`;
//! - [`policy`]: `[tools.NAME]` (enabled, approval, timeout, max_output, replay_safe);
//! - [`config`]: the tools' part of `weft.toml`.
//!
//! [`configured`] turns a [`ToolsConfig`] into the sources an agent is given:
//!
//! ```
//! use weft_tools::{ToolsConfig, configured};
//!
//! # tokio::runtime::Runtime::new().unwrap().block_on(async {
//! let mut config = ToolsConfig::default();
//! config.builtins.tools = vec!["calculator".into()];
//! let tools = configured(&config).await.unwrap();
//! use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
//! let provider = FauxProvider::new(FauxScript::new([FauxTurn::text("hi")]));
//! let agent = tools
//!     .apply(weft_agent::Agent::builder(provider))
//!     .build()
//!     .unwrap();
//! assert_eq!(agent.tool_specs()[0].name, "calculator");
//! # });
//! ```

pub mod builtin;
pub mod config;
pub mod fixture;
pub mod mcp;
pub mod policy;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;
use weft_agent::AgentBuilder;
use weft_tool_api::{StaticTools, ToolSource};

pub use config::{Approval, BuiltinsConfig, McpServerConfig, ToolPolicy, ToolsConfig};
pub use mcp::McpServer;

/// The tool sources a configuration describes, started (MCP servers connected and listed).
pub struct Configured {
    /// Every source, under its policy: the built-in tools (`builtin`), then each MCP server.
    pub sources: Vec<Arc<dyn ToolSource>>,
    /// The MCP servers, by name (to watch their state).
    pub servers: BTreeMap<String, Arc<McpServer>>,
}

impl Configured {
    /// Gives `builder` every source.
    pub fn apply(&self, mut builder: AgentBuilder) -> AgentBuilder {
        for source in &self.sources {
            builder = builder.tool_source(Arc::clone(source));
        }
        builder
    }

    /// Whether a built-in tool (or any source's tool) of this name is configured.
    pub fn provides(&self, name: &str) -> bool {
        self.sources.iter().any(|s| s.tools().iter().any(|t| t.spec().name == name))
    }
}

/// Starts what `config` describes: the built-in tools it enables, and its MCP servers (each
/// waited for until its tools are listed, or 20 s). Must be called within a tokio runtime.
/// `Err` names the configuration key at fault.
pub async fn configured(config: &ToolsConfig) -> Result<Configured, String> {
    config.check()?;
    let policy = Arc::new(config.tools.clone());
    let mut sources: Vec<Arc<dyn ToolSource>> = Vec::new();
    let builtins = builtin::tools(&config.builtins)?;
    if !builtins.is_empty() {
        let source = Arc::new(StaticTools::new("builtin", builtins));
        sources.push(Arc::new(policy::PolicySource::new(source, Arc::clone(&policy))));
    }
    let started = futures::future::join_all(config.mcp.iter().cloned().map(McpServer::start)).await;
    let mut servers = BTreeMap::new();
    for server in started {
        let name = server.name().trim_start_matches("mcp:").to_string();
        servers.insert(name, Arc::clone(&server));
        sources.push(Arc::new(policy::PolicySource::new(server, Arc::clone(&policy))));
    }
    Ok(Configured { sources, servers })
}

/// A parameter schema in one line: `{a: number, b?: string}` (required properties without `?`).
pub fn schema_summary(schema: &Value) -> String {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return "{}".to_string();
    };
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let fields: Vec<String> = properties
        .iter()
        .map(|(name, prop)| {
            let ty = match prop.get("type") {
                Some(Value::String(t)) => t.clone(),
                Some(Value::Array(ts)) => {
                    ts.iter().filter_map(Value::as_str).collect::<Vec<_>>().join("|")
                }
                _ => "any".to_string(),
            };
            let optional = if required.contains(&name.as_str()) { "" } else { "?" };
            format!("{name}{optional}: {ty}")
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}
