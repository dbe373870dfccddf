//! `[tools.NAME]` applied: a [`ToolSource`] that hides disabled tools and gives the others the
//! configured approval, timeout, output limit and replay safety.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use weft_core::ToolSpec;
use weft_tool_api::{Tool, ToolContext, ToolSource, ToolStream};

use crate::config::{Approval, ToolPolicy};

/// A source whose tools follow per-tool policy.
pub struct PolicySource {
    inner: Arc<dyn ToolSource>,
    policy: Arc<BTreeMap<String, ToolPolicy>>,
}

impl PolicySource {
    /// `inner`'s tools under `policy`.
    pub fn new(inner: Arc<dyn ToolSource>, policy: Arc<BTreeMap<String, ToolPolicy>>) -> Self {
        Self { inner, policy }
    }
}

impl ToolSource for PolicySource {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn generation(&self) -> u64 {
        self.inner.generation()
    }

    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.inner
            .tools()
            .into_iter()
            .filter_map(|tool| match self.policy.get(&tool.spec().name) {
                None => Some(tool),
                Some(policy) if policy.enabled == Some(false) => None,
                Some(policy) => {
                    Some(Arc::new(Policied::new(tool, policy.clone())) as Arc<dyn Tool>)
                }
            })
            .collect()
    }
}

/// One tool under its policy.
pub struct Policied {
    tool: Arc<dyn Tool>,
    spec: ToolSpec,
    policy: ToolPolicy,
}

impl Policied {
    /// `tool` under `policy`.
    pub fn new(tool: Arc<dyn Tool>, policy: ToolPolicy) -> Self {
        let mut spec = tool.spec().clone();
        match policy.approval {
            Approval::Always => spec.requires_approval = true,
            Approval::Never => spec.requires_approval = false,
            Approval::Auto => {}
        }
        Self { tool, spec, policy }
    }
}

impl Tool for Policied {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn execute(&self, args: Value, ctx: ToolContext) -> ToolStream {
        self.tool.execute(args, ctx)
    }

    fn timeout(&self) -> Option<Duration> {
        self.policy.timeout.or_else(|| self.tool.timeout())
    }

    fn replay_safe(&self) -> bool {
        self.policy.replay_safe.unwrap_or_else(|| self.tool.replay_safe())
    }

    fn max_output(&self) -> Option<usize> {
        self.policy.max_output.or_else(|| self.tool.max_output())
    }
}
