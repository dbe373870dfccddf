//! One graph-of-thoughts node run, in a task of its own: a small ReAct loop on a scratch
//! context (its task with its dependencies' results), whose events go to the driver
//! ([`crate::run`]) tagged with the node run's id, so concurrent nodes keep their own.

use std::sync::Arc;
use std::time::Instant;

use futures::StreamExt;
use tokio::sync::mpsc;
use weft_core::{
    AgentEvent, AssistantMessage, Message, Role, StopReason, ToolExecutionResult,
    ToolResultMessage, now_ms,
};
use weft_llm::{CancellationToken, ModelRequest, Provider, ProviderStream, StreamEvent};

use crate::calls::{finish_call, run_one};
use crate::config::ToolGate;
use crate::content::{content_event, end_event};
use crate::context::AgentInner;
use crate::tool::{ToolContext, ToolError, ToolEvent};
use weft_loop::NodeCall;
use weft_loop::{NodeOutcome, Ready};

/// What a graph node's task tells the driver.
pub(crate) enum GraphMsg {
    /// An event of node run `.0`.
    Event(Arc<str>, AgentEvent),
    /// The node's run ended.
    Done {
        /// The graph node.
        id: String,
        /// Its node run.
        node_id: String,
        /// How it ended.
        outcome: NodeOutcome,
        /// Its model calls.
        calls: Vec<NodeCall>,
    },
}

/// A graph node to run.
pub(crate) struct GraphNodeRun {
    pub(crate) agent: Arc<AgentInner>,
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) request: ModelRequest,
    pub(crate) node: Ready,
    pub(crate) node_id: String,
    pub(crate) node_ref: Arc<str>,
    /// Model calls it may make for its answer.
    pub(crate) turns: u32,
    pub(crate) cancel: CancellationToken,
    pub(crate) tx: mpsc::Sender<GraphMsg>,
    /// What the node's tool calls are told of their run: session, run and owner ids (the call
    /// id and cancellation are each call's own).
    pub(crate) tool_context: ToolContext,
}

impl GraphNodeRun {
    async fn send(&self, event: AgentEvent) {
        let _ = self.tx.send(GraphMsg::Event(self.node_ref.clone(), event)).await;
    }

    /// Runs the node to its end, starting with the model call `first` (made by the driver).
    pub(crate) async fn run(mut self, first: ProviderStream, started_at: u64) {
        let mut calls = Vec::new();
        let mut stream = Some((first, started_at));
        let mut result: Result<String, String> =
            Err(format!("the node made {} model calls without an answer", self.turns));
        for turn in 0..self.turns {
            let (s, started_at) = match stream.take() {
                Some(first) => first,
                None => (self.provider.stream(self.request.clone(), self.cancel.clone()), now_ms()),
            };
            let clock = Instant::now();
            let (message, step_id) = self.model_call(s, turn).await;
            let latency_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
            let failure =
                message.stop_reason.is_failure().then(|| message.failure_text().to_string());
            let tool_calls: Vec<_> = message.tool_calls().cloned().collect();
            let text = message.text();
            let mut call = NodeCall {
                message: message.clone(),
                step_id,
                started_at,
                latency_ms,
                node_id: self.node_id.clone(),
                tool_results: Vec::new(),
            };
            if let Some(error) = failure {
                calls.push(call);
                result = Err(error);
                break;
            }
            if tool_calls.is_empty() {
                calls.push(call);
                result = Ok(text);
                break;
            }
            self.request.messages.push(Message::Assistant(message));
            for tool_call in tool_calls {
                let (out, execution) = self.run_tool(&tool_call).await;
                call.tool_results.push(execution);
                self.request.messages.push(Message::ToolResult(out));
            }
            calls.push(call);
        }
        let mut expansion = None;
        if let (Ok(answer), Some(prompt)) = (&result, &self.node.expand_prompt) {
            let mut messages = weft_core::History::new();
            messages.push(Message::User(weft_core::UserMessage::text(format!("{prompt}{answer}"))));
            let request = ModelRequest { messages, tools: Vec::new(), ..self.request.clone() };
            let started_at = now_ms();
            let clock = Instant::now();
            let s = self.provider.stream(request, self.cancel.clone());
            let (message, step_id) = self.model_call(s, u32::MAX).await;
            let latency_ms = u64::try_from(clock.elapsed().as_millis()).unwrap_or(u64::MAX);
            if !message.stop_reason.is_failure() {
                expansion = Some(message.text());
            }
            calls.push(NodeCall {
                message,
                step_id,
                started_at,
                latency_ms,
                node_id: self.node_id.clone(),
                tool_results: Vec::new(),
            });
        }
        let outcome = NodeOutcome { result, model_calls: calls.len() as u32, expansion };
        let done = GraphMsg::Done {
            id: self.node.id.clone(),
            node_id: self.node_id.clone(),
            outcome,
            calls,
        };
        let _ = self.tx.send(done).await;
    }

    /// Streams one model call's events; returns its message and step id.
    async fn model_call(
        &self,
        mut stream: ProviderStream,
        _turn: u32,
    ) -> (AssistantMessage, String) {
        let step_id = uuid::Uuid::new_v4().to_string();
        self.send(AgentEvent::MessageStart { role: Role::Assistant }).await;
        let mut open: Vec<u32> = Vec::new();
        let message = loop {
            let Some(event) = stream.next().await else {
                let mut message = stream.partial().clone();
                message.stop_reason = StopReason::Error;
                message.error_message = Some("the model's stream ended early".into());
                break message;
            };
            match event {
                StreamEvent::Content(delta) => {
                    use weft_llm::ContentDelta as D;
                    match &delta {
                        D::TextStart { index }
                        | D::ThinkingStart { index }
                        | D::ToolCallStart { index, .. } => {
                            open.push(*index);
                        }
                        D::TextEnd { index }
                        | D::ThinkingEnd { index }
                        | D::ToolCallEnd { index } => {
                            open.retain(|i| i != index);
                        }
                        _ => {}
                    }
                    if let Some(event) = content_event(delta, &stream.partial().content) {
                        self.send(event).await;
                    }
                }
                StreamEvent::Done(message) | StreamEvent::Error(message) => {
                    for index in open {
                        if let Some(event) = end_event(index, &message.content) {
                            self.send(event).await;
                        }
                    }
                    break *message;
                }
            }
        };
        let shared = Arc::new(Message::Assistant(message.clone()));
        self.send(AgentEvent::MessageEnd { message: shared }).await;
        (message, step_id)
    }

    /// Runs one tool call of the node (local tools only: a graph node cannot suspend), checked
    /// as a conversation's calls are: its arguments against the tool's schema, then the
    /// agent's `before_tool_call` hook. A call that needs approval is refused (a graph node
    /// cannot wait for one). A refused call has no execution events; its error result is what
    /// the node's model sees.
    async fn run_tool(
        &self,
        call: &weft_core::ToolCall,
    ) -> (ToolResultMessage, ToolExecutionResult) {
        let started = (now_ms(), Instant::now());
        let refuse = |error: ToolError| {
            let (_, outcome) = finish_call(call, Err(error), started);
            (outcome.result, outcome.execution)
        };
        let tools = self.agent.tools.snapshot();
        let Some(local) = tools.get(&call.name) else {
            return refuse(ToolError::failed(format!(
                "Tool {} is not available inside a graph node",
                call.name
            )));
        };
        if let Err(problem) = local.checked.validate(&call.name, &call.arguments) {
            return refuse(ToolError::InvalidArguments(problem));
        }
        if let ToolGate::Block(reason) = self.agent.hooks.before_tool_call(call).await {
            return refuse(ToolError::failed(format!("Tool call blocked: {reason}")));
        }
        let spec = local.tool.spec();
        let approval = spec.requires_approval
            || self.agent.approval.as_ref().is_some_and(|policy| policy(spec, call));
        if approval {
            return refuse(ToolError::denied(format!(
                "tool {} needs approval, which a graph node cannot wait for",
                call.name
            )));
        }
        let tool = local.tool.clone();
        self.send(AgentEvent::ToolExecutionStart {
            tool_call_id: call.id.clone(),
            tool_name: call.name.clone(),
            args: call.arguments.clone(),
        })
        .await;
        let timeout = tool.timeout().unwrap_or(self.agent.config.tool_timeout);
        let ctx = ToolContext {
            call_id: call.id.clone(),
            cancel: self.cancel.child_token(),
            ..self.tool_context.clone()
        };
        let (tx, mut rx) = mpsc::channel(64);
        tokio::spawn(run_one(0, tool, serde_json::Value::clone(&call.arguments), ctx, timeout, tx));
        let mut result = Err(ToolError::failed("The tool ended without a result"));
        while let Some((_, event)) = rx.recv().await {
            match event {
                ToolEvent::Delta(delta) => {
                    self.send(AgentEvent::ToolExecutionDelta {
                        tool_call_id: call.id.clone(),
                        delta,
                    })
                    .await;
                }
                ToolEvent::Complete(out) => {
                    result = Ok(out);
                    break;
                }
                ToolEvent::Error(error) => {
                    result = Err(error);
                    break;
                }
            }
        }
        let (end, outcome) = finish_call(call, result, started);
        self.send(end).await;
        (outcome.result, outcome.execution)
    }
}
