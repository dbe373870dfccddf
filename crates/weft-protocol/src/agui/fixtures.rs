use serde_json::{Value, json};
use std::sync::Arc;

use crate::Frame;
use weft_core::{
    AgentEvent, AgentStep, AssistantContent, AssistantMessage, Message, Role, SessionStatus,
    StepAnnotations, StopReason, TextContent, ThinkingContent, ToolCall, ToolResultMessage, Usage,
    UserMessage,
};

/// One block of a scripted assistant message.
pub(crate) enum Block<'a> {
    /// Thinking, with an optional signature.
    Think(&'a str, Option<&'a str>),
    /// Text.
    Text(&'a str),
    /// A tool call: id, name, arguments.
    Call(&'a str, &'a str, Value),
}

/// Builds one run's canonical events.
pub(crate) struct Script {
    session: String,
    step: u32,
    chunk: usize,
    open_step: Option<AgentStep>,
    /// The events so far.
    pub(crate) events: Vec<AgentEvent>,
    messages: Vec<Message>,
}

fn chunks(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars.chunks(size.max(1)).map(|c| c.iter().collect()).collect()
}

impl Script {
    /// `session_start` of run `run` of session `session`; the run's first step is `step`.
    pub(crate) fn new(session: &str, run: &str, step: u32) -> Self {
        let events = vec![AgentEvent::SessionStart {
            session_id: session.into(),
            run_id: run.into(),
            agent: "react".into(),
            recovers: None,
        }];
        Self {
            session: session.into(),
            step,
            chunk: 4,
            open_step: None,
            events,
            messages: Vec::new(),
        }
    }

    /// The user's message.
    pub(crate) fn user(mut self, text: &str) -> Self {
        let mut m = UserMessage::text(text);
        m.timestamp = 1;
        self.events.push(AgentEvent::MessageStart { role: Role::User });
        self.events.push(AgentEvent::MessageEnd { message: Arc::new(m.clone().into()) });
        self.messages.push(m.into());
        self
    }

    /// One model call (the think node), its blocks streamed in chunks of 4 characters. A
    /// failed stop reason adds the `error` event and ends the step, as the agent does.
    pub(crate) fn model(mut self, blocks: &[Block<'_>], stop: StopReason) -> Self {
        let node_id = format!("think-{}", self.step);
        self.events.push(AgentEvent::NodeEnter { name: "think".into(), node_id: node_id.clone() });
        self.events.push(AgentEvent::StepStart {
            step_id: format!("step-{}", self.step),
            step_index: self.step,
        });
        self.events.push(AgentEvent::MessageStart { role: Role::Assistant });
        let mut m = AssistantMessage::empty("faux", "faux-1");
        m.timestamp = 1;
        m.usage = Usage::new(10, 5, 2, 0);
        for (i, block) in blocks.iter().enumerate() {
            let index = u32::try_from(i).unwrap_or(u32::MAX);
            match block {
                Block::Text(text) => {
                    self.events.push(AgentEvent::TextStart { index });
                    for delta in chunks(text, self.chunk) {
                        self.events.push(AgentEvent::TextDelta { index, delta });
                    }
                    self.events.push(AgentEvent::TextEnd { index, text: text.to_string() });
                    m.content.push(AssistantContent::Text(TextContent { text: text.to_string() }));
                }
                Block::Think(thinking, signature) => {
                    self.events.push(AgentEvent::ThinkingStart { index });
                    for delta in chunks(thinking, self.chunk) {
                        self.events.push(AgentEvent::ThinkingDelta { index, delta });
                    }
                    self.events.push(AgentEvent::ThinkingEnd {
                        index,
                        thinking: thinking.to_string(),
                        signature: signature.map(str::to_string),
                    });
                    m.content.push(AssistantContent::Thinking(ThinkingContent {
                        thinking: thinking.to_string(),
                        signature: signature.map(str::to_string),
                    }));
                }
                Block::Call(id, name, arguments) => {
                    self.events.push(AgentEvent::ToolcallStart {
                        index,
                        id: id.to_string(),
                        name: name.to_string(),
                    });
                    for delta in chunks(&arguments.to_string(), 5) {
                        self.events.push(AgentEvent::ToolcallDelta { index, delta });
                    }
                    let call = ToolCall {
                        id: id.to_string(),
                        name: name.to_string(),
                        arguments: arguments.clone().into(),
                    };
                    self.events.push(AgentEvent::ToolcallEnd { index, tool_call: call.clone() });
                    m.content.push(AssistantContent::ToolCall(call));
                }
            }
        }
        m.stop_reason = stop;
        if stop.is_failure() {
            m.error_message = Some(if stop == StopReason::Aborted {
                "aborted".into()
            } else {
                "upstream 500".into()
            });
        }
        let message = Message::Assistant(m.clone());
        self.events.push(AgentEvent::MessageEnd { message: Arc::new(message.clone()) });
        self.messages.push(message.clone());
        let failure = m.error_message.as_deref().map(String::from);
        if let Some(error) = &failure {
            self.events
                .push(AgentEvent::Error { error: error.clone(), message: Some(Arc::new(message)) });
        }
        self.events.push(AgentEvent::NodeExit { name: "think".into(), node_id, error: failure });
        self.open_step = Some(AgentStep {
            step_id: format!("step-{}", self.step),
            step_index: self.step,
            timestamp: 1,
            llm_response: m,
            latency_ms: 1,
            tool_results: Vec::new(),
            annotations: StepAnnotations::default(),
        });
        self.step += 1;
        if stop.is_failure() {
            self = self.step_end();
        }
        self
    }

    /// The act node: each local call `(id, name, output deltas, is_error)` runs, streaming
    /// its output.
    pub(crate) fn act(mut self, calls: &[(&str, &str, &[&str], bool)]) -> Self {
        let node_id = format!("act-{}", self.step - 1);
        self.events.push(AgentEvent::NodeEnter { name: "act".into(), node_id: node_id.clone() });
        for (id, name, _, _) in calls {
            self.events.push(AgentEvent::ToolExecutionStart {
                tool_call_id: id.to_string(),
                tool_name: name.to_string(),
                args: Value::Object(Default::default()).into(),
            });
        }
        for (id, name, deltas, is_error) in calls {
            for delta in *deltas {
                self.events.push(AgentEvent::ToolExecutionDelta {
                    tool_call_id: id.to_string(),
                    delta: delta.to_string(),
                });
            }
            self.events.push(AgentEvent::ToolExecutionEnd {
                tool_call_id: id.to_string(),
                tool_name: name.to_string(),
                output: deltas.concat(),
                details: None,
                is_error: *is_error,
            });
        }
        self.events.push(AgentEvent::NodeExit { name: "act".into(), node_id, error: None });
        self
    }

    /// The observe node with results `(id, name, output, is_error)`, then `step_end`.
    pub(crate) fn observe(mut self, results: &[(&str, &str, &str, bool)]) -> Self {
        let node_id = format!("observe-{}", self.step.saturating_sub(1));
        self.events
            .push(AgentEvent::NodeEnter { name: "observe".into(), node_id: node_id.clone() });
        for (id, name, output, is_error) in results {
            let mut r = ToolResultMessage::new(*id, *name, *output, *is_error);
            r.timestamp = 1;
            self.events.push(AgentEvent::MessageStart { role: Role::ToolResult });
            self.events.push(AgentEvent::MessageEnd { message: Arc::new(r.clone().into()) });
            self.messages.push(r.into());
        }
        self.events.push(AgentEvent::NodeExit { name: "observe".into(), node_id, error: None });
        self.step_end()
    }

    /// `step_end` of the open step (a resumed run has none open: a placeholder is used).
    pub(crate) fn step_end(mut self) -> Self {
        let step = self.open_step.take().unwrap_or_else(|| AgentStep {
            step_id: "earlier".into(),
            step_index: self.step.saturating_sub(1),
            timestamp: 1,
            llm_response: AssistantMessage::empty("faux", "faux-1"),
            latency_ms: 1,
            tool_results: Vec::new(),
            annotations: StepAnnotations::default(),
        });
        self.events.push(AgentEvent::StepEnd { step: Arc::new(step) });
        self
    }

    /// Any event.
    pub(crate) fn event(mut self, event: AgentEvent) -> Self {
        self.events.push(event);
        self
    }

    /// The run suspends for these remote calls.
    pub(crate) fn awaiting(mut self, calls: &[(&str, &str, Value)]) -> Self {
        let tool_calls = calls
            .iter()
            .map(|(id, name, arguments)| ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                arguments: arguments.clone().into(),
            })
            .collect();
        self.events.push(AgentEvent::AwaitingToolExecution {
            session_id: self.session.clone(),
            tool_calls,
        });
        self
    }

    /// The run suspends for these approvals.
    pub(crate) fn approval(mut self, calls: &[(&str, &str, Value)]) -> Self {
        let tool_calls = calls
            .iter()
            .map(|(id, name, arguments)| ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                arguments: arguments.clone().into(),
            })
            .collect();
        self.events
            .push(AgentEvent::ApprovalRequired { session_id: self.session.clone(), tool_calls });
        self
    }

    /// `session_end` with `status`; the run's events.
    pub(crate) fn end(mut self, status: SessionStatus) -> Vec<AgentEvent> {
        let mut usage = Usage::default();
        for m in &self.messages {
            if let Message::Assistant(a) = m {
                usage += a.usage;
            }
        }
        self.events.push(AgentEvent::SessionEnd {
            session_id: self.session.clone(),
            status,
            messages: self.messages.into_iter().map(Arc::new).collect(),
            usage: Box::new(usage),
            cost: Box::default(),
        });
        self.events
    }
}

/// The texts of a canonical stream's text blocks, in order.
pub(crate) fn texts(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::TextEnd { text, .. } => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// Recorded from `weft run hi --script weather.json --json` with the turns of
/// `examples/scripts/weather.json` shortened and streamed in chunks of 8 characters (the two
/// `step_end` lines trimmed to the fields they need): thinking, text, two local tool calls
/// (one with streamed output), their results, then the answer.
pub(crate) const REAL_WEATHER_RUN: &str = r##"{"type":"session_start","sessionId":"5f03c57a-2c77-4c2d-bfa8-5580ea0e3911","runId":"d1d1f092-f35a-47b4-8010-888be12201dc","agent":"react"}
{"type":"message_start","role":"user"}
{"type":"message_end","message":{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1795306142218}}
{"type":"node_enter","name":"think","nodeId":"think-0"}
{"type":"step_start","stepId":"3066067d-1ce6-4908-bee4-ba00988536c9","stepIndex":0}
{"type":"message_start","role":"assistant"}
{"type":"thinking_start","index":0}
{"type":"thinking_delta","index":0,"delta":"The user"}
{"type":"thinking_delta","index":0,"delta":" wants t"}
{"type":"thinking_delta","index":0,"delta":"he weath"}
{"type":"thinking_delta","index":0,"delta":"er."}
{"type":"thinking_end","index":0,"thinking":"The user wants the weather."}
{"type":"text_start","index":1}
{"type":"text_delta","index":1,"delta":"Let me c"}
{"type":"text_delta","index":1,"delta":"heck."}
{"type":"text_end","index":1,"text":"Let me check."}
{"type":"toolcall_start","index":2,"id":"call_0_0","name":"echo"}
{"type":"toolcall_delta","index":2,"delta":"{\"text\":"}
{"type":"toolcall_delta","index":2,"delta":"\"Paris: "}
{"type":"toolcall_delta","index":2,"delta":"sunny\"}"}
{"type":"toolcall_end","index":2,"toolCall":{"id":"call_0_0","name":"echo","arguments":{"text":"Paris: sunny"}}}
{"type":"toolcall_start","index":3,"id":"call_0_1","name":"current_time"}
{"type":"toolcall_delta","index":3,"delta":"{}"}
{"type":"toolcall_end","index":3,"toolCall":{"id":"call_0_1","name":"current_time","arguments":{}}}
{"type":"message_end","message":{"role":"assistant","content":[{"type":"thinking","thinking":"The user wants the weather."},{"type":"text","text":"Let me check."},{"type":"toolCall","id":"call_0_0","name":"echo","arguments":{"text":"Paris: sunny"}},{"type":"toolCall","id":"call_0_1","name":"current_time","arguments":{}}],"stopReason":"toolUse","usage":{"input":120,"output":48,"cacheRead":0,"cacheWrite":0,"total":168},"provider":"faux","model":"faux","timestamp":1795306142218}}
{"type":"node_exit","name":"think","nodeId":"think-0"}
{"type":"node_enter","name":"act","nodeId":"act-0"}
{"type":"tool_execution_start","toolCallId":"call_0_0","toolName":"echo","args":{"text":"Paris: sunny"}}
{"type":"tool_execution_start","toolCallId":"call_0_1","toolName":"current_time","args":{}}
{"type":"tool_execution_end","toolCallId":"call_0_1","toolName":"current_time","output":"2026-11-22T00:09:02Z","isError":false}
{"type":"tool_execution_delta","toolCallId":"call_0_0","delta":"Paris: "}
{"type":"tool_execution_delta","toolCallId":"call_0_0","delta":"sunny"}
{"type":"tool_execution_end","toolCallId":"call_0_0","toolName":"echo","output":"Paris: sunny","isError":false}
{"type":"node_exit","name":"act","nodeId":"act-0"}
{"type":"node_enter","name":"observe","nodeId":"observe-0"}
{"type":"message_start","role":"toolResult"}
{"type":"message_end","message":{"role":"toolResult","toolCallId":"call_0_0","toolName":"echo","content":[{"type":"text","text":"Paris: sunny"}],"isError":false,"timestamp":1795306142219}}
{"type":"message_start","role":"toolResult"}
{"type":"message_end","message":{"role":"toolResult","toolCallId":"call_0_1","toolName":"current_time","content":[{"type":"text","text":"2026-11-22T00:09:02Z"}],"isError":false,"timestamp":1795306142219}}
{"type":"node_exit","name":"observe","nodeId":"observe-0"}
{"type":"step_end","step":{"stepId":"3066067d-1ce6-4908-bee4-ba00988536c9","stepIndex":0,"timestamp":1795306142218,"llmResponse":{"content":[{"type":"text","text":"Let me check."}],"stopReason":"toolUse","provider":"faux","model":"faux"},"latencyMs":1,"toolResults":[]}}
{"type":"node_enter","name":"think","nodeId":"think-1"}
{"type":"step_start","stepId":"c2f96802-0d29-4878-9474-7b8b28f18327","stepIndex":1}
{"type":"message_start","role":"assistant"}
{"type":"text_start","index":0}
{"type":"text_delta","index":0,"delta":"It is su"}
{"type":"text_delta","index":0,"delta":"nny in P"}
{"type":"text_delta","index":0,"delta":"aris."}
{"type":"text_end","index":0,"text":"It is sunny in Paris."}
{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"It is sunny in Paris."}],"stopReason":"stop","usage":{"input":190,"output":31,"cacheRead":0,"cacheWrite":0,"total":221},"provider":"faux","model":"faux","timestamp":1795306142219}}
{"type":"node_exit","name":"think","nodeId":"think-1"}
{"type":"step_end","step":{"stepId":"c2f96802-0d29-4878-9474-7b8b28f18327","stepIndex":1,"timestamp":1795306142219,"llmResponse":{"content":[{"type":"text","text":"It is sunny in Paris."}],"stopReason":"stop","provider":"faux","model":"faux"},"latencyMs":1,"toolResults":[]}}
{"type":"session_end","sessionId":"5f03c57a-2c77-4c2d-bfa8-5580ea0e3911","status":"completed","messages":[{"role":"user","content":[{"type":"text","text":"hi"}],"timestamp":1795306142218},{"role":"assistant","content":[{"type":"thinking","thinking":"The user wants the weather."},{"type":"text","text":"Let me check."},{"type":"toolCall","id":"call_0_0","name":"echo","arguments":{"text":"Paris: sunny"}},{"type":"toolCall","id":"call_0_1","name":"current_time","arguments":{}}],"stopReason":"toolUse","usage":{"input":120,"output":48,"cacheRead":0,"cacheWrite":0,"total":168},"provider":"faux","model":"faux","timestamp":1795306142218},{"role":"toolResult","toolCallId":"call_0_0","toolName":"echo","content":[{"type":"text","text":"Paris: sunny"}],"isError":false,"timestamp":1795306142219},{"role":"toolResult","toolCallId":"call_0_1","toolName":"current_time","content":[{"type":"text","text":"2026-11-22T00:09:02Z"}],"isError":false,"timestamp":1795306142219},{"role":"assistant","content":[{"type":"text","text":"It is sunny in Paris."}],"stopReason":"stop","usage":{"input":190,"output":31,"cacheRead":0,"cacheWrite":0,"total":221},"provider":"faux","model":"faux","timestamp":1795306142219}],"usage":{"input":310,"output":79,"cacheRead":0,"cacheWrite":0,"total":389},"cost":{"input":0.0,"output":0.0,"cacheRead":0.0,"cacheWrite":0.0,"total":0.0}}
"##;

/// The recorded run's events.
pub(crate) fn real_weather_run() -> Vec<AgentEvent> {
    REAL_WEATHER_RUN
        .lines()
        .map(|line| match serde_json::from_str(line) {
            Ok(event) => event,
            Err(e) => panic!("fixture line does not parse ({e}): {line}"),
        })
        .collect()
}

/// A run with thinking, text, two tool calls (streamed output), their results and an answer.
pub(crate) fn weather(run: &str) -> Vec<AgentEvent> {
    Script::new("s1", run, 0)
        .user("What's the weather in Paris?")
        .model(
            &[
                Block::Think("Use the tools.", None),
                Block::Text("Let me look."),
                Block::Call("c1", "echo", json!({"text": "Paris"})),
                Block::Call("c2", "clock", json!({})),
            ],
            StopReason::ToolUse,
        )
        .act(&[("c1", "echo", &["Par", "is"], false), ("c2", "clock", &["12:00"], false)])
        .observe(&[("c1", "echo", "Paris", false), ("c2", "clock", "12:00", false)])
        .model(&[Block::Text("It is sunny in Paris.")], StopReason::Stop)
        .step_end()
        .end(SessionStatus::Completed)
}

/// The frames' texts.
pub(crate) fn lines(frames: &[Frame]) -> Vec<&str> {
    frames.iter().map(|f| f.data.as_str()).collect()
}

/// The frames whose `type` is `kind`.
pub(crate) fn of_type<'a>(frames: &'a [Value], kind: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["type"] == kind).collect()
}
