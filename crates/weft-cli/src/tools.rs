//! The tools of `weft run`, `weft serve` and `weft chat`: [`with_tools`] gives an agent the
//! tools `weft.toml` configures (MCP servers, built-in tools, per-tool policy; see
//! `weft_tools::config`) and the two local tools every agent has, so that scripted (faux) runs
//! can exercise tool calls end to end:
//!
//! - `echo` (`{"text": string}`): streams the text back word by word as output deltas, then
//!   completes with the whole text;
//! - `current_time` (no arguments): the current UTC time in RFC 3339 (`2025-01-31T12:00:00Z`)
//!   (the configured built-in of that name replaces it when `[builtins]` enables it).
//!
//! `weft tools list` shows them all ([`list_command`]).

use std::path::Path;
use std::time::SystemTime;

use anyhow::anyhow;
use weft_tools::ToolsConfig;

use schemars::JsonSchema;
use serde::Deserialize;
use weft_agent::{AgentBuilder, ToolOutputSink, streaming_tool_fn, tool_fn};

/// The arguments of `echo`.
#[derive(Debug, Deserialize, JsonSchema)]
struct EchoArgs {
    /// The text to echo back.
    text: String,
}

/// `current_time` takes no arguments.
#[derive(Debug, Deserialize, JsonSchema)]
struct NoArgs {}

/// Gives `builder` the tools `config` describes (MCP servers started and listed, built-in tools,
/// `[tools.NAME]` policy) and the local tools every agent has. Must run within a tokio
/// runtime; `Err` is a configuration mistake (a root that does not exist). `weft run`,
/// `weft serve` and `weft chat` all build their tool set here.
pub(crate) async fn with_tools(
    builder: AgentBuilder,
    config: &ToolsConfig,
) -> anyhow::Result<AgentBuilder> {
    let mut config = config.clone();
    // `shell` runs each command below this very program as its reaper (see `main`).
    config.builtins.shell_reaper = std::env::current_exe().ok();
    let config = &config;
    let configured = weft_tools::configured(config).await.map_err(|e| anyhow!("{e}"))?;
    let builder = configured.apply(builder);
    Ok(register(builder, !configured.provides("current_time"), config))
}

/// The tools part of the configuration file `--config` names (else `./weft.toml`, else
/// `$WEFT_HOME/weft.toml`; none is an empty configuration).
pub(crate) fn load_config(explicit: Option<&Path>) -> anyhow::Result<ToolsConfig> {
    let env = |name: &str| std::env::var(name).ok();
    let cwd = std::env::current_dir().unwrap_or_else(|_| ".".into());
    let file = weft_server::find_file(explicit, &cwd, &env).map_err(|e| anyhow!("{e}"))?;
    let config =
        weft_server::ServeConfig::load(file.as_deref(), &env).map_err(|e| anyhow!("{e}"))?;
    Ok(config.tools)
}

/// `weft tools list`: every tool with its source, whether it needs approval, and a summary of
/// its parameters.
pub(crate) fn list_command(config: Option<&Path>) -> Result<(), crate::Failure> {
    let tools = load_config(config).map_err(|e| crate::Failure::usage(&e))?;
    let runtime = crate::runtime()?;
    runtime.block_on(async move {
        let provider = weft_llm::faux::FauxProvider::new(weft_llm::faux::FauxScript::new([]));
        let builder = weft_agent::Agent::builder(provider);
        let builder = with_tools(builder, &tools).await.map_err(|e| crate::Failure::usage(&e))?;
        let agent = builder
            .build()
            .map_err(|e| crate::Failure::usage(&anyhow!("cannot set up the tools: {e}")))?;
        let rows: Vec<[String; 4]> = agent
            .tool_sources()
            .into_iter()
            .map(|(spec, source)| {
                let approval = if spec.requires_approval { "approval" } else { "-" };
                let source = if source == "agent" { "weft".to_string() } else { source };
                [
                    spec.name.clone(),
                    source,
                    approval.to_string(),
                    weft_tools::schema_summary(&spec.parameters),
                ]
            })
            .collect();
        let width = |i: usize| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0).max(6);
        let (w0, w1, w2) = (width(0), width(1), width(2));
        let mut out = format!("{:w0$}  {:w1$}  {:w2$}  PARAMETERS\n", "NAME", "SOURCE", "APPROVAL");
        for [name, source, approval, params] in &rows {
            out.push_str(&format!("{name:w0$}  {source:w1$}  {approval:w2$}  {params}\n"));
        }
        print!("{}", crate::sanitize::visible(&out));
        Ok(())
    })
}

/// Adds the local tools every agent has (`current_time` only when `with_time`).
fn register(builder: AgentBuilder, with_time: bool, config: &ToolsConfig) -> AgentBuilder {
    let policy = |name: &str| config.tools.get(name).cloned();
    let echo = streaming_tool_fn(
        "echo",
        "Echoes the given text back, streaming it word by word.",
        |args: EchoArgs, sink: ToolOutputSink| async move {
            for word in words(&args.text) {
                if !sink.send(word).await {
                    // The run was aborted; nobody reads the output any more.
                    break;
                }
                tokio::task::yield_now().await;
            }
            Ok::<_, String>(args.text)
        },
    );
    let time = tool_fn(
        "current_time",
        "Returns the current UTC date and time in RFC 3339 format.",
        |_: NoArgs| async move {
            Ok::<_, String>(humantime::format_rfc3339_seconds(SystemTime::now()).to_string())
        },
    );
    let mut tools: Vec<std::sync::Arc<dyn weft_agent::Tool>> = vec![std::sync::Arc::new(echo)];
    if with_time {
        tools.push(std::sync::Arc::new(time));
    }
    let mut builder = builder;
    for tool in tools {
        let name = tool.spec().name.clone();
        builder = match policy(&name) {
            Some(p) if p.enabled == Some(false) => builder,
            Some(p) => builder.tool(weft_tools::policy::Policied::new(tool, p)),
            None => builder.shared_tool(tool),
        };
    }
    builder
}

/// `text` cut after each run of whitespace, so the pieces concatenate back to `text`.
fn words(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_space = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            in_space = true;
        } else if in_space {
            out.push(&text[start..i]);
            start = i;
            in_space = false;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_the_whitespace_and_concatenate_back() {
        assert_eq!(words("hello brave  new\nworld"), ["hello ", "brave  ", "new\n", "world"]);
        assert_eq!(words("  lead"), ["  ", "lead"]);
        assert_eq!(words("trail "), ["trail "]);
        assert!(words("").is_empty());
        let text = "a b\tc  d ";
        assert_eq!(words(text).concat(), text);
    }
}
