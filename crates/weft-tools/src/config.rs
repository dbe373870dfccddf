//! The tools' part of `weft.toml`: MCP servers (`[[mcp]]`), the built-in tools (`[builtins]`)
//! and per-tool policy (`[tools.NAME]`).
//!
//! ```toml
//! [[mcp]]                          # a server over stdio
//! name = "files"                   # its tools are called files__TOOL
//! command = "npx"
//! args = ["-y", "@modelcontextprotocol/server-filesystem", "/srv/data"]
//! env = { LOG_LEVEL = "warn" }
//! cwd = "/srv"                     # relative to the file
//! timeout = "60s"                  # one call's limit (default: the agent's tool timeout)
//!
//! [[mcp]]                          # a server over streamable HTTP
//! name = "search"
//! url = "http://127.0.0.1:9000/mcp"
//! headers = { Authorization = "Bearer …" }
//!
//! [builtins]                       # every built-in tool is opt-in
//! tools = ["calculator", "current_time", "read_file", "list_dir", "write_file", "fetch_url", "shell"]
//! root = "workspace"               # read_file, list_dir, write_file: confined here (relative to the file)
//! fetch_max_bytes = 1048576        # fetch_url: the largest body read
//! fetch_timeout = "20s"            # fetch_url: the whole fetch, redirects and HTML-to-text included
//! fetch_allow_loopback = false     # fetch_url: true lets tests fetch 127.0.0.1 (private ranges stay refused)
//! shell_cwd = "workspace"          # shell: its working directory (default: root, else the current one)
//! shell_env = ["CARGO_HOME"]       # shell: variables passed on besides PATH, HOME, LANG (all else is cleared)
//! shell_allow_with_api_keys = false  # shell: offer it on a server with API keys (refused at start-up otherwise)
//!
//! [tools.shell]                    # policy for one tool (built-in or MCP: [tools.files__read])
//! enabled = true
//! approval = "always"              # always | never | auto (the tool's own default)
//! timeout = "30s"
//! max_output = 65536               # bytes; more is cut with a note
//! replay_safe = false
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

/// Everything `weft.toml` says about tools.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// MCP servers (`[[mcp]]`).
    #[serde(default)]
    pub mcp: Vec<McpServerConfig>,
    /// The built-in tools (`[builtins]`).
    #[serde(default)]
    pub builtins: BuiltinsConfig,
    /// Policy per tool name (`[tools.NAME]`).
    #[serde(default)]
    pub tools: BTreeMap<String, ToolPolicy>,
}

/// One MCP server: `command` (stdio) or `url` (streamable HTTP).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The server's name: its tools are exposed as `NAME__TOOL`.
    pub name: String,
    /// The program to start (stdio transport).
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment variables it gets (on top of this process's).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Its working directory.
    pub cwd: Option<PathBuf>,
    /// The server's URL (streamable HTTP transport).
    pub url: Option<String>,
    /// HTTP headers sent with every request (an `Authorization`, for instance).
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// How long one call may take (default: the agent's tool timeout).
    #[serde(default, deserialize_with = "duration")]
    pub timeout: Option<Duration>,
}

/// The built-in tools, each opt-in by name in `tools`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinsConfig {
    /// The built-in tools to offer: `read_file`, `list_dir`, `write_file`, `fetch_url`,
    /// `shell`, `current_time`, `calculator`.
    #[serde(default)]
    pub tools: Vec<String>,
    /// The directory the file tools are confined to (required by them).
    pub root: Option<PathBuf>,
    /// `fetch_url`: the largest body read, in bytes (default 1 MiB).
    pub fetch_max_bytes: Option<usize>,
    /// `fetch_url`: how long a fetch may take, redirects and the HTML-to-text conversion
    /// included (default 20 s).
    #[serde(default, deserialize_with = "duration")]
    pub fetch_timeout: Option<Duration>,
    /// `fetch_url`: allow loopback addresses (for tests against a local server; private,
    /// link-local and metadata addresses stay refused).
    #[serde(default)]
    pub fetch_allow_loopback: bool,
    /// `shell`: its working directory (default: `root`, else the current directory).
    pub shell_cwd: Option<PathBuf>,
    /// `shell`: the variables of this process a command gets besides `PATH`, `HOME` and
    /// `LANG`; every other variable is cleared (the server's and providers' keys among them).
    #[serde(default)]
    pub shell_env: Vec<String>,
    /// `shell`: offer it on a server with API keys. There the person approving a call is the
    /// client asking for it, so `weft serve` refuses to start with `shell` unless this is set.
    #[serde(default)]
    pub shell_allow_with_api_keys: bool,
    /// `shell`: the program that runs each command below a reaper process (see
    /// `builtin::shell::reaper`). Not read from the file: the program that offers `shell` names
    /// itself (`weft` does); `None` runs `sh` in a process group of its own.
    #[serde(skip)]
    pub shell_reaper: Option<PathBuf>,
}

/// Whether a tool's calls need approval.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Approval {
    /// Every call is approved first.
    Always,
    /// No call needs approval (even a tool that asks for it by default, such as `shell`).
    Never,
    /// The tool's own default.
    #[default]
    Auto,
}

/// Policy for one tool (`[tools.NAME]`); what is left out keeps the tool's default.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolPolicy {
    /// `false` hides the tool from the model.
    pub enabled: Option<bool>,
    /// Whether calls need approval.
    #[serde(default)]
    pub approval: Approval,
    /// How long a call may run.
    #[serde(default, deserialize_with = "duration")]
    pub timeout: Option<Duration>,
    /// How many bytes of output a call may produce; more is cut with a note.
    pub max_output: Option<usize>,
    /// Whether a call may run again after a crash (see `weft_tool_api::Tool::replay_safe`).
    pub replay_safe: Option<bool>,
}

/// The names of the built-in tools.
pub const BUILTIN_NAMES: [&str; 7] =
    ["read_file", "list_dir", "write_file", "fetch_url", "shell", "current_time", "calculator"];

fn duration<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    humantime::parse_duration(text.trim()).map(Some).map_err(|e| {
        serde::de::Error::custom(format!(
            "invalid duration {text:?} ({e}); write e.g. 30s, 2m, 500ms"
        ))
    })
}

impl ToolsConfig {
    /// Makes relative paths (`cwd`, `root`, `shell_cwd`) relative to `base`, the directory of the
    /// file they were read from.
    pub fn resolve_paths(&mut self, base: &Path) {
        let relative = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        for server in &mut self.mcp {
            server.cwd.as_mut().map(relative);
        }
        self.builtins.root.as_mut().map(relative);
        self.builtins.shell_cwd.as_mut().map(relative);
    }

    /// Checks what serde cannot: each server has one transport and a usable name, names are
    /// unique, built-in names are known, and the file tools have a root. `Err` names the key.
    pub fn check(&self) -> Result<(), String> {
        let mut seen = std::collections::BTreeSet::new();
        for (i, server) in self.mcp.iter().enumerate() {
            let name = &server.name;
            if name.is_empty()
                || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                || name.contains("__")
            {
                return Err(format!(
                    "mcp[{i}].name: {name:?} must be letters, digits, - and _ (no \"__\"): its tools are named {name}__TOOL"
                ));
            }
            if !seen.insert(name.clone()) {
                return Err(format!("mcp[{i}].name: two servers are named {name:?}"));
            }
            match (&server.command, &server.url) {
                (Some(_), Some(_)) => {
                    return Err(format!("mcp[{i}]: give command (stdio) or url (HTTP), not both"));
                }
                (None, None) => {
                    return Err(format!("mcp[{i}]: give command (stdio) or url (streamable HTTP)"));
                }
                (None, Some(url))
                    if !(url.starts_with("http://") || url.starts_with("https://")) =>
                {
                    return Err(format!("mcp[{i}].url: {url:?} is not an http(s) URL"));
                }
                _ => {}
            }
        }
        for name in &self.builtins.tools {
            if !BUILTIN_NAMES.contains(&name.as_str()) {
                return Err(format!(
                    "builtins.tools: unknown tool {name:?}; expected one of {}",
                    BUILTIN_NAMES.join(", ")
                ));
            }
            let file_tool = matches!(name.as_str(), "read_file" | "list_dir" | "write_file");
            if file_tool && self.builtins.root.is_none() {
                return Err(format!(
                    "builtins.root: {name} needs a root directory to confine it to"
                ));
            }
        }
        Ok(())
    }

    /// Checks what serving with API keys adds: `shell` only with
    /// `builtins.shell_allow_with_api_keys = true`, since the client asking for a command is
    /// then the one approving it. `api_keys`: whether the server has any.
    pub fn check_served(&self, api_keys: bool) -> Result<(), String> {
        let shell = self.builtins.tools.iter().any(|t| t == "shell")
            && self.tools.get("shell").is_none_or(|p| p.enabled != Some(false));
        if api_keys && shell && !self.builtins.shell_allow_with_api_keys {
            return Err("builtins.tools: shell is refused on a server with API keys: its clients \
                        would approve their own commands, run as this server's user; set \
                        builtins.shell_allow_with_api_keys = true to offer it anyway"
                .into());
        }
        Ok(())
    }

    /// Whether the file names no tools at all.
    pub fn is_empty(&self) -> bool {
        self.mcp.is_empty() && self.builtins.tools.is_empty() && self.tools.is_empty()
    }
}
