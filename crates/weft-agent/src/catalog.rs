//! The tools a session's model may call: local tools (with executors) and the session's remote
//! specs, each with its compiled argument validator.

use std::collections::HashMap;
use std::sync::Arc;

use jsonschema::Validator;
use serde_json::Value;
use weft_core::ToolSpec;

use crate::error::AgentError;
use crate::tool::Tool;

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

/// A local tool and its validator.
pub(crate) struct LocalTool {
    pub(crate) tool: Arc<dyn Tool>,
    pub(crate) checked: Checked,
}

/// The agent's local tools, by name, in registration order.
#[derive(Default)]
pub(crate) struct LocalTools {
    by_name: HashMap<String, LocalTool>,
    order: Vec<String>,
}

impl LocalTools {
    pub(crate) fn add(&mut self, tool: Arc<dyn Tool>) -> Result<(), AgentError> {
        let name = tool.spec().name.clone();
        if self.by_name.contains_key(&name) {
            return Err(AgentError::DuplicateTool(name));
        }
        let checked = Checked::compile(tool.spec())?;
        self.order.push(name.clone());
        self.by_name.insert(name, LocalTool { tool, checked });
        Ok(())
    }

    pub(crate) fn get(&self, name: &str) -> Option<&LocalTool> {
        self.by_name.get(name)
    }

    pub(crate) fn specs(&self) -> impl Iterator<Item = &ToolSpec> {
        self.order.iter().filter_map(|n| self.by_name.get(n)).map(|t| t.tool.spec())
    }
}

/// A session's remote tools: specs without executors, with their validators.
#[derive(Default)]
pub(crate) struct RemoteTools {
    by_name: HashMap<String, (ToolSpec, Checked)>,
}

impl RemoteTools {
    /// Compiles the session's specs; a name that a local tool already has is an error.
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
