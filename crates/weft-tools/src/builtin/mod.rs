//! The built-in tools, each opt-in (`[builtins] tools = [...]`): `read_file`, `list_dir`,
//! `write_file` (confined to a root), `fetch_url` (public addresses only), `shell` (approval
//! required by default; a cleared environment; nothing it starts outlives the call),
//! `current_time`, `calculator`.

pub mod calc;
pub mod fetch;
pub mod fs;
pub mod shell;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use schemars::JsonSchema;
use serde::Deserialize;
use weft_tool_api::{Tool, ToolError, ToolOutputSink, streaming_tool_fn, tool_fn};

use crate::config::BuiltinsConfig;

/// `shell`'s default output limit (bytes): more is cut with a note.
pub const SHELL_MAX_OUTPUT: usize = 64 * 1024;
/// `shell`'s default timeout.
pub const SHELL_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Deserialize, JsonSchema)]
struct PathArgs {
    /// A path relative to the tool's root directory.
    path: String,
}

#[derive(Deserialize, JsonSchema)]
struct DirArgs {
    /// A directory relative to the tool's root (default: the root itself).
    #[serde(default)]
    path: String,
}

#[derive(Deserialize, JsonSchema)]
struct WriteArgs {
    /// A path relative to the tool's root directory; its directory must exist.
    path: String,
    /// The file's new content.
    content: String,
}

#[derive(Deserialize, JsonSchema)]
struct UrlArgs {
    /// An http:// or https:// URL.
    url: String,
}

#[derive(Deserialize, JsonSchema)]
struct ShellArgs {
    /// The command line, run by `sh -c`.
    command: String,
}

#[derive(Deserialize, JsonSchema)]
struct ExprArgs {
    /// An arithmetic expression: numbers, + - * / % ^, parentheses, pi, e, and sqrt abs sin cos
    /// tan ln log10 exp floor ceil round min max.
    expression: String,
}

#[derive(Deserialize, JsonSchema)]
struct NoArgs {}

/// The built-in tools `config` enables; `Err` names what is wrong (a root that does not exist).
pub fn tools(config: &BuiltinsConfig) -> Result<Vec<Arc<dyn Tool>>, String> {
    let mut out: Vec<Arc<dyn Tool>> = Vec::new();
    let root = match &config.root {
        Some(dir)
            if config
                .tools
                .iter()
                .any(|t| matches!(t.as_str(), "read_file" | "list_dir" | "write_file")) =>
        {
            Some(Arc::new(fs::Root::new(dir)?))
        }
        _ => None,
    };
    let root_of = |name: &str| {
        root.clone().ok_or_else(|| format!("builtins.root: {name} needs a root directory"))
    };
    for name in &config.tools {
        match name.as_str() {
            "read_file" => out.push(read_file_tool(root_of(name)?)),
            "list_dir" => out.push(list_dir_tool(root_of(name)?)),
            "write_file" => out.push(write_file_tool(root_of(name)?)),
            "fetch_url" => out.push(fetch_url_tool(config)),
            "shell" => out.push(shell_tool(config)),
            "current_time" => out.push(Arc::new(
                tool_fn(
                    "current_time",
                    "Returns the current UTC date and time in RFC 3339 format.",
                    |_: NoArgs| async move {
                        Ok::<_, ToolError>(
                            humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
                        )
                    },
                )
                .replay_safe(),
            )),
            "calculator" => out.push(Arc::new(
                tool_fn(
                    "calculator",
                    "Evaluates an arithmetic expression.",
                    |a: ExprArgs| async move {
                        calc::evaluate(&a.expression).map(calc::format_number).map_err(|e| {
                            ToolError::invalid(format!("cannot evaluate {:?}: {e}", a.expression))
                        })
                    },
                )
                .replay_safe(),
            )),
            other => return Err(format!("builtins.tools: unknown tool {other:?}")),
        }
    }
    Ok(out)
}

/// `read_file`: reads a text file under `root`.
fn read_file_tool(root: Arc<fs::Root>) -> Arc<dyn Tool> {
    Arc::new(
        tool_fn(
            "read_file",
            "Reads a text file under the tool's root directory.",
            move |a: PathArgs| {
                let root = Arc::clone(&root);
                async move { root.read(&a.path).await }
            },
        )
        .replay_safe(),
    )
}

/// `list_dir`: lists a directory under `root`.
fn list_dir_tool(root: Arc<fs::Root>) -> Arc<dyn Tool> {
    Arc::new(
        tool_fn(
            "list_dir",
            "Lists a directory under the tool's root directory (directories end in /).",
            move |a: DirArgs| {
                let root = Arc::clone(&root);
                async move { root.list(&a.path).await }
            },
        )
        .replay_safe(),
    )
}

/// `write_file`: writes a text file under `root`.
fn write_file_tool(root: Arc<fs::Root>) -> Arc<dyn Tool> {
    Arc::new(tool_fn(
        "write_file",
        "Writes a text file under the tool's root directory (replacing it if it exists).",
        move |a: WriteArgs| {
            let root = Arc::clone(&root);
            async move {
                let n = root.write(&a.path, &a.content).await?;
                Ok::<_, ToolError>(format!("wrote {n} bytes to {}", a.path))
            }
        },
    ))
}

/// `fetch_url`: fetches a public URL, within the limits `config` sets.
fn fetch_url_tool(config: &BuiltinsConfig) -> Arc<dyn Tool> {
    let policy = Arc::new(fetch::FetchPolicy {
        max_bytes: config.fetch_max_bytes.unwrap_or(1024 * 1024),
        timeout: config.fetch_timeout.unwrap_or(Duration::from_secs(20)),
        allow_loopback: config.fetch_allow_loopback,
    });
    Arc::new(
        tool_fn(
            "fetch_url",
            "Fetches a public http(s) URL and returns its text (HTML converted to text).",
            move |a: UrlArgs| {
                let policy = Arc::clone(&policy);
                async move { fetch::fetch(&a.url, &policy).await }
            },
        )
        .replay_safe(),
    )
}

/// `shell`: runs a command in the directory and environment `config` sets, with approval.
fn shell_tool(config: &BuiltinsConfig) -> Arc<dyn Tool> {
    let cwd: PathBuf = config
        .shell_cwd
        .clone()
        .or_else(|| config.root.clone())
        .unwrap_or_else(|| PathBuf::from("."));
    let setup =
        Arc::new(shell::ShellSetup::new(cwd, &config.shell_env, config.shell_reaper.clone()));
    Arc::new(
        streaming_tool_fn(
            "shell",
            "Runs a shell command (sh -c) and returns its output (stdout and stderr).",
            move |a: ShellArgs, sink: ToolOutputSink| {
                let setup = Arc::clone(&setup);
                async move { shell::run(&a.command, &setup, &sink, SHELL_MAX_OUTPUT + 1).await }
            },
        )
        .with_approval()
        .with_timeout(SHELL_TIMEOUT)
        .with_max_output(SHELL_MAX_OUTPUT),
    )
}
