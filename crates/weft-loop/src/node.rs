//! A graph node's own small ReAct loop ([`NodeLoop`]), decided here as the run's own loop is:
//! the model answers, its calls are admitted by the same [`Disposition`]s as a conversation's
//! (refused ones answered at once with why), the calls that run run together, and their results
//! go back to the model until it answers or the node's turns are spent. A graph node cannot
//! suspend: a call that would wait for a client or an approval is refused instead.

use weft_core::{
    AssistantMessage, History, Message, TimestampMs, ToolCall, ToolResultMessage, UserContent,
    UserMessage,
};

use crate::machine::{Disposition, NodeCall, ToolOutcome, rejected_execution};
use crate::modes::{NodeOutcome, Ready};

/// What a graph node does next.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeNext {
    /// Call the model with the node's conversation ([`NodeLoop::messages`]); report with
    /// [`NodeLoop::on_message`].
    CallModel,
    /// Run these calls (together, in the model's order); report with
    /// [`NodeLoop::on_tool_results`].
    RunTools(Vec<ToolCall>),
    /// Ask the model whether the node is to be expanded, on a scratch context (this prompt
    /// alone, no tools); report with [`NodeLoop::on_expansion`].
    Expand(String),
    /// The node is over: [`NodeLoop::finish`].
    Done,
}

/// A call of the open turn, and its answer once it has one.
#[derive(Debug, Clone)]
struct Slot {
    call: ToolCall,
    answer: Option<ToolOutcome>,
}

/// The state and decisions of one graph node's run.
#[derive(Debug, Clone)]
pub struct NodeLoop {
    node: Ready,
    node_id: String,
    /// Model calls it may make for its answer.
    turns: u32,
    /// Model calls made for its answer.
    made: u32,
    /// Its conversation: its task, then the model's messages and their results.
    messages: History,
    /// Its model calls, each with the calls it ran.
    calls: Vec<NodeCall>,
    /// The open turn's model call and its tool calls.
    open: Option<(NodeCall, Vec<Slot>)>,
    result: Option<Result<String, String>>,
    expansion: Option<String>,
}

impl NodeLoop {
    /// The run of graph node `node` in node run `node_id`, whose answer may take `turns` model
    /// calls; its task's prompt is stamped `now`.
    pub fn new(node: Ready, node_id: String, turns: u32, now: TimestampMs) -> Self {
        let mut messages = History::new();
        messages.push(Message::User(UserMessage {
            content: vec![UserContent::text(node.prompt.clone())],
            timestamp: now,
            id: None,
        }));
        Self {
            node,
            node_id,
            turns: turns.max(1),
            made: 0,
            messages,
            calls: Vec::new(),
            open: None,
            result: None,
            expansion: None,
        }
    }

    /// The node's conversation, for its next model call.
    pub fn messages(&self) -> &History {
        &self.messages
    }

    /// The graph node's id.
    pub fn id(&self) -> &str {
        &self.node.id
    }

    /// The model answered (`message`, made as step `step_id`); `dispositions` say how each of
    /// its calls is handled, in order.
    pub fn on_message(
        &mut self,
        message: AssistantMessage,
        dispositions: Vec<Disposition>,
        step_id: String,
        started_at: TimestampMs,
        latency_ms: u64,
    ) -> NodeNext {
        self.made += 1;
        let call = self.node_call(message.clone(), step_id, started_at, latency_ms);
        if message.stop_reason.is_failure() {
            self.calls.push(call);
            return self.answered(Err(message.failure_text().to_string()));
        }
        let tool_calls: Vec<ToolCall> = message.tool_calls().cloned().collect();
        if tool_calls.is_empty() {
            self.calls.push(call);
            return self.answered(Ok(message.text()));
        }
        self.messages.push(Message::Assistant(message));
        let now = started_at + latency_ms;
        let mut to_run = Vec::new();
        let dispositions = dispositions.into_iter().chain(std::iter::repeat(Disposition::Run));
        let slots = tool_calls
            .into_iter()
            .zip(dispositions)
            .map(|(call, disposition)| {
                let refusal = match disposition {
                    Disposition::Run => {
                        to_run.push(call.clone());
                        None
                    }
                    Disposition::Reject(error) => Some(error),
                    Disposition::Remote => {
                        Some(format!("Tool {} is not available inside a graph node", call.name))
                    }
                    Disposition::Approval => Some(format!(
                        "Refused: tool {} needs approval, which a graph node cannot wait for",
                        call.name
                    )),
                };
                let answer = refusal.map(|error| {
                    let result = ToolResultMessage::error_at(&call, error, now);
                    let execution = rejected_execution(&call, &result, now);
                    ToolOutcome { result, execution }
                });
                Slot { call, answer }
            })
            .collect();
        self.open = Some((call, slots));
        if to_run.is_empty() { self.turn_done() } else { NodeNext::RunTools(to_run) }
    }

    /// The calls that ran ended (in any order).
    pub fn on_tool_results(&mut self, outcomes: Vec<ToolOutcome>) -> NodeNext {
        if let Some((_, slots)) = self.open.as_mut() {
            for outcome in outcomes {
                if let Some(slot) = slots
                    .iter_mut()
                    .find(|s| s.answer.is_none() && s.call.id == outcome.result.tool_call_id)
                {
                    slot.answer = Some(outcome);
                }
            }
        }
        self.turn_done()
    }

    /// The model answered the expansion prompt ([`NodeNext::Expand`]).
    pub fn on_expansion(
        &mut self,
        message: AssistantMessage,
        step_id: String,
        started_at: TimestampMs,
        latency_ms: u64,
    ) -> NodeNext {
        if !message.stop_reason.is_failure() {
            self.expansion = Some(message.text());
        }
        let call = self.node_call(message, step_id, started_at, latency_ms);
        self.calls.push(call);
        NodeNext::Done
    }

    /// How the node ended, and its model calls (each a step outside the conversation).
    pub fn finish(self) -> (NodeOutcome, Vec<NodeCall>) {
        let result = self.result.unwrap_or_else(|| Err("the node ended without an answer".into()));
        let outcome = NodeOutcome {
            result,
            model_calls: u32::try_from(self.calls.len()).unwrap_or(u32::MAX),
            expansion: self.expansion,
        };
        (outcome, self.calls)
    }

    /// The open turn, once every call has its answer: the results join the node's
    /// conversation in the model's order, and the model is called again unless the node's
    /// turns are spent.
    fn turn_done(&mut self) -> NodeNext {
        let Some((mut call, slots)) = self.open.take() else { return NodeNext::Done };
        if slots.iter().any(|s| s.answer.is_none()) {
            let waiting = slots.iter().filter(|s| s.answer.is_none()).map(|s| s.call.clone());
            let waiting: Vec<ToolCall> = waiting.collect();
            self.open = Some((call, slots));
            return NodeNext::RunTools(waiting);
        }
        for slot in slots {
            if let Some(ToolOutcome { result, execution }) = slot.answer {
                call.tool_results.push(execution);
                self.messages.push(Message::ToolResult(result));
            }
        }
        self.calls.push(call);
        if self.made >= self.turns {
            let error = format!("the node made {} model calls without an answer", self.turns);
            return self.answered(Err(error));
        }
        NodeNext::CallModel
    }

    /// The node has its answer (or failed): it may be asked whether to expand.
    fn answered(&mut self, result: Result<String, String>) -> NodeNext {
        let expand = match (&result, &self.node.expand_prompt) {
            (Ok(answer), Some(prompt)) => Some(format!("{prompt}{answer}")),
            _ => None,
        };
        self.result = Some(result);
        match expand {
            Some(prompt) => NodeNext::Expand(prompt),
            None => NodeNext::Done,
        }
    }

    fn node_call(
        &self,
        message: AssistantMessage,
        step_id: String,
        started_at: TimestampMs,
        latency_ms: u64,
    ) -> NodeCall {
        NodeCall {
            message,
            step_id,
            started_at,
            latency_ms,
            node_id: self.node_id.clone(),
            tool_results: Vec::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use weft_core::{AssistantContent, StopReason, ToolExecutionResult};

    use super::*;

    fn ready(expand: bool) -> Ready {
        Ready {
            id: "a".into(),
            prompt: "Solve a".into(),
            expand_prompt: expand.then(|| "Expand? ".to_string()),
        }
    }

    fn say(text: &str) -> AssistantMessage {
        let mut m = AssistantMessage::empty("faux", "faux");
        m.content.push(AssistantContent::Text(weft_core::TextContent { text: text.into() }));
        m
    }

    fn call(id: &str, name: &str) -> ToolCall {
        ToolCall { id: id.into(), name: name.into(), arguments: Arc::new(serde_json::json!({})) }
    }

    fn calling(calls: &[ToolCall]) -> AssistantMessage {
        let mut m = AssistantMessage::empty("faux", "faux");
        m.content.extend(calls.iter().cloned().map(AssistantContent::ToolCall));
        m.stop_reason = StopReason::ToolUse;
        m
    }

    fn ran(call: &ToolCall, output: &str) -> ToolOutcome {
        let result = ToolResultMessage::error_at(call, output, 5);
        let result = ToolResultMessage { is_error: false, ..result };
        let execution = ToolExecutionResult {
            call: call.clone(),
            output: output.into(),
            error: None,
            details: None,
            started_at: 5,
            latency_ms: 1,
        };
        ToolOutcome { result, execution }
    }

    #[test]
    fn refused_calls_are_answered_at_once_and_the_rest_run_together() {
        let mut node = NodeLoop::new(ready(true), "got-a-3".into(), 4, 1);
        let calls =
            [call("c1", "echo"), call("c2", "wipe"), call("c3", "page"), call("c4", "echo")];
        let dispositions =
            vec![Disposition::Run, Disposition::Approval, Disposition::Remote, Disposition::Run];
        let next = node.on_message(calling(&calls), dispositions, "s1".into(), 10, 2);
        assert_eq!(next, NodeNext::RunTools(vec![calls[0].clone(), calls[3].clone()]));
        // The last to finish is reported first: the results still follow the model's order.
        let next = node.on_tool_results(vec![ran(&calls[3], "four")]);
        assert_eq!(next, NodeNext::RunTools(vec![calls[0].clone()]), "c1 still runs");
        assert_eq!(node.on_tool_results(vec![ran(&calls[0], "one")]), NodeNext::CallModel);
        let results: Vec<(String, bool)> = node
            .messages()
            .iter()
            .filter_map(|m| match m {
                Message::ToolResult(r) => Some((r.text_content(), r.is_error)),
                _ => None,
            })
            .collect();
        assert_eq!(results[0], ("one".to_string(), false));
        assert!(results[1].1 && results[1].0.contains("needs approval"), "{results:?}");
        assert!(results[2].1 && results[2].0.contains("not available inside a graph node"));
        assert_eq!(results[3], ("four".to_string(), false));
        // The answer is asked about expansion, with the answer appended to the prompt.
        let next = node.on_message(say("done"), Vec::new(), "s2".into(), 20, 2);
        assert_eq!(next, NodeNext::Expand("Expand? done".into()));
        assert_eq!(node.on_expansion(say("{\"nodes\":[]}"), "s3".into(), 30, 1), NodeNext::Done);
        let (outcome, calls) = node.finish();
        assert_eq!(outcome.result, Ok("done".into()));
        assert_eq!(outcome.expansion.as_deref(), Some("{\"nodes\":[]}"));
        assert_eq!(outcome.model_calls, 3);
        assert_eq!(calls[0].tool_results.len(), 4, "every call of the turn has its record");
        assert!(calls.iter().all(|c| c.node_id == "got-a-3"));
    }

    #[test]
    fn a_node_without_an_answer_within_its_turns_fails() {
        let mut node = NodeLoop::new(ready(true), "got-a-1".into(), 1, 1);
        let calls = [call("c1", "echo")];
        let next = node.on_message(calling(&calls), vec![Disposition::Run], "s1".into(), 10, 2);
        assert_eq!(next, NodeNext::RunTools(calls.to_vec()));
        // No expansion for a failed node.
        assert_eq!(node.on_tool_results(vec![ran(&calls[0], "one")]), NodeNext::Done);
        let (outcome, _) = node.finish();
        assert_eq!(outcome.result, Err("the node made 1 model calls without an answer".into()));
        assert_eq!(outcome.model_calls, 1);
    }

    #[test]
    fn a_failed_model_call_fails_the_node() {
        let mut node = NodeLoop::new(ready(false), "got-a-1".into(), 3, 1);
        let mut failed = say("partial");
        failed.stop_reason = StopReason::Error;
        failed.error_message = Some("overloaded".into());
        assert_eq!(node.on_message(failed, Vec::new(), "s1".into(), 10, 2), NodeNext::Done);
        assert_eq!(node.finish().0.result, Err("overloaded".into()));
    }
}
