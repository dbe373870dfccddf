//! The tools a session's model may call: local tools (with executors), supplied by the agent's
//! [`ToolSource`]s, and the session's remote specs, each with its compiled argument validator.
//!
//! The agent's [`ToolCatalog`] keeps a snapshot of its sources' tools; a run takes the current
//! snapshot for each model call, so a source whose set changed (an MCP server's
//! `tools/list_changed`) is seen by the next call. Two tools of one name are refused: at build
//! time as an error, later (a server adding a tool that collides) by keeping the last good set
//! and logging which sources collide.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jsonschema::Validator;
use serde_json::Value;
use weft_core::ToolSpec;

use crate::error::AgentError;
use crate::tool::{StaticTools, Tool, ToolSource};

/// A tool's spec with its compiled parameter schema.
pub(crate) struct Checked {
    validator: Validator,
}

impl Checked {
    fn compile(spec: &ToolSpec) -> Result<Self, AgentError> {
        let validator = jsonschema::validator_for(&spec.parameters).map_err(|e| {
            AgentError::InvalidToolSchema { tool: spec.name.clone(), reason: e.to_string() }
        })?;
        Ok(Self { validator })
    }

    /// Checks `args` against the schema; `Err` is a message the model can act on.
    pub(crate) fn validate(&self, tool: &str, args: &Value) -> Result<(), String> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(args)
            .take(8)
            .map(|e| {
                let path = e.instance_path().to_string();
                if path.is_empty() { e.to_string() } else { format!("{path}: {e}") }
            })
            .collect();
        if problems.is_empty() {
            Ok(())
        } else {
            Err(format!("Invalid arguments for tool {tool}: {}", problems.join("; ")))
        }
    }
}

/// A local tool, its validator and the source it came from.
pub(crate) struct LocalTool {
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) checked: Checked,
    pub(crate) source: String,
}

/// The agent's local tools, by name, in registration order.
#[derive(Default)]
pub(crate) struct LocalTools {
    by_name: HashMap<String, LocalTool>,
    order: Vec<String>,
}

impl LocalTools {
    pub(crate) fn add(&mut self, tool: Arc<dyn Tool>, source: &str) -> Result<(), AgentError> {
        let name = tool.spec().name.clone();
        if !weft_core::valid_tool_name(&name) {
            return Err(AgentError::InvalidToolName { name });
        }
        if let Some(taken) = self.by_name.get(&name) {
            return Err(if taken.source == source {
                AgentError::DuplicateTool(name)
            } else {
                AgentError::ToolNameCollision {
                    name,
                    first: taken.source.clone(),
                    second: source.to_string(),
                }
            });
        }
        let checked = Checked::compile(tool.spec())?;
        self.order.push(name.clone());
        self.by_name.insert(name, LocalTool { tool, checked, source: source.to_string() });
        Ok(())
    }

    /// Every tool in order, with its source's name.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &LocalTool> {
        self.order.iter().filter_map(|n| self.by_name.get(n))
    }

    pub(crate) fn get(&self, name: &str) -> Option<&LocalTool> {
        self.by_name.get(name)
    }

    pub(crate) fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.order.iter().filter_map(|n| self.by_name.get(n)).map(|t| t.tool.spec())
    }
}

/// The agent's tool sources and the snapshot of their tools that runs use.
pub(crate) struct ToolCatalog {
    sources: Vec<Arc<dyn ToolSource>>,
    current: Mutex<Snapshot>,
}

struct Snapshot {
    generations: Vec<u64>,
    tools: Arc<LocalTools>,
}

impl ToolCatalog {
    /// The catalog of `tools` (the agent's own, as the source `agent`) and `sources`; fails on
    /// a name two tools share or an invalid parameter schema.
    pub(crate) fn new(
        tools: Vec<Arc<dyn Tool>>,
        mut sources: Vec<Arc<dyn ToolSource>>,
    ) -> Result<Self, AgentError> {
        if !tools.is_empty() || sources.is_empty() {
            sources.insert(0, Arc::new(StaticTools::new("agent", tools)));
        }
        let generations = sources.iter().map(|s| s.generation()).collect();
        let tools = Arc::new(build(&sources)?);
        Ok(Self { sources, current: Mutex::new(Snapshot { generations, tools }) })
    }

    /// The tools as the sources supply them now (rebuilt when a source's set changed; should
    /// the new set be invalid, the last good one is kept and the problem logged).
    pub(crate) fn snapshot(&self) -> Arc<LocalTools> {
        let generations: Vec<u64> = self.sources.iter().map(|s| s.generation()).collect();
        let mut current = self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if current.generations != generations {
            match build(&self.sources) {
                Ok(tools) => current.tools = Arc::new(tools),
                Err(error) => {
                    tracing::error!(%error, "a tool source's new tools were refused; the previous set is kept");
                }
            }
            current.generations = generations;
        }
        Arc::clone(&current.tools)
    }
}

fn build(sources: &[Arc<dyn ToolSource>]) -> Result<LocalTools, AgentError> {
    let mut tools = LocalTools::default();
    for source in sources {
        for tool in source.tools() {
            tools.add(tool, source.name())?;
        }
    }
    Ok(tools)
}

/// A session's remote tools: specs without executors, with their validators.
#[derive(Default)]
pub(crate) struct RemoteTools {
    by_name: HashMap<String, (ToolSpec, Checked)>,
}

impl RemoteTools {
    /// Compiles the session's specs; a name that a local tool already has is an error. (Names
    /// are checked against the providers' rule when a session is created, not here: a session
    /// stored before the rule still loads.)
    pub(crate) fn new(specs: &[ToolSpec], local: &LocalTools) -> Result<Self, AgentError> {
        let mut by_name = HashMap::new();
        for spec in specs {
            if local.get(&spec.name).is_some() || by_name.contains_key(&spec.name) {
                return Err(AgentError::DuplicateTool(spec.name.clone()));
            }
            by_name.insert(spec.name.clone(), (spec.clone(), Checked::compile(spec)?));
        }
        Ok(Self { by_name })
    }
}

/// What a tool name resolves to.
pub(crate) enum Resolved<'a> {
    Local(&'a LocalTool),
    Remote(&'a ToolSpec, &'a Checked),
    Unknown,
}

/// Local and remote tools seen together.
pub(crate) struct Catalog<'a> {
    pub(crate) local: &'a LocalTools,
    pub(crate) remote: &'a RemoteTools,
}

impl<'a> Catalog<'a> {
    pub(crate) fn resolve(&self, name: &str) -> Resolved<'a> {
        if let Some(local) = self.local.get(name) {
            Resolved::Local(local)
        } else if let Some((spec, checked)) = self.remote.by_name.get(name) {
            Resolved::Remote(spec, checked)
        } else {
            Resolved::Unknown
        }
    }
}
