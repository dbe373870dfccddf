//! Admission of a model's tool calls: the one place a call is checked before it runs — a tool
//! of that name exists, its arguments match the tool's schema, the agent's `before_tool_call`
//! hook allows it, and whether it needs an approval — for the conversation's calls and a graph
//! node's alike. What a [`Disposition`] then leads to is the machine's to decide.

use weft_core::AssistantMessage;
use weft_loop::Disposition;

use crate::catalog::{Catalog, Resolved};
use crate::config::ToolGate;
use crate::context::AgentInner;

/// How each tool call of `message` is to be handled, in order, against `catalog`.
pub(crate) async fn dispositions(
    agent: &AgentInner,
    catalog: Catalog<'_>,
    message: &AssistantMessage,
) -> Vec<Disposition> {
    let mut out = Vec::new();
    for call in message.tool_calls() {
        let (spec, checked, local) = match catalog.resolve(&call.name) {
            Resolved::Unknown => {
                out.push(Disposition::Reject(format!("Tool {} not found", call.name)));
                continue;
            }
            Resolved::Local(tool) => (tool.tool.spec(), &tool.checked, true),
            Resolved::Remote(spec, checked) => (spec, checked, false),
        };
        if let Err(problem) = checked.validate(&call.name, &call.arguments) {
            out.push(Disposition::Reject(problem));
            continue;
        }
        if let ToolGate::Block(reason) = agent.hooks.before_tool_call(call).await {
            out.push(Disposition::Reject(format!("Tool call blocked: {reason}")));
            continue;
        }
        let approval = spec.requires_approval
            || agent.approval.as_ref().is_some_and(|policy| policy(spec, call));
        out.push(if approval {
            Disposition::Approval
        } else if local {
            Disposition::Run
        } else {
            Disposition::Remote
        });
    }
    out
}
