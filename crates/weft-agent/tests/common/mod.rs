//! Helpers shared by the agent's integration tests.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::sync::{Arc, Mutex};

use weft_agent::{Agent, ExecuteResult, SessionHandle};
use weft_core::{AgentEvent, Input, Message};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_llm::{CancellationToken, ModelRequest, Provider, ProviderStream};

/// A faux provider that also records every request it is sent.
#[derive(Clone)]
pub struct Recording {
    pub faux: Arc<FauxProvider>,
    pub requests: Arc<Mutex<Vec<ModelRequest>>>,
}

impl Recording {
    pub fn new(turns: impl IntoIterator<Item = FauxTurn>) -> Self {
        Self {
            faux: Arc::new(FauxProvider::new(FauxScript::new(turns))),
            requests: Arc::new(Mutex::new(Vec::new())),
        }
    }

    pub fn calls(&self) -> usize {
        self.requests.lock().unwrap().len()
    }

    pub fn last_request(&self) -> ModelRequest {
        self.requests.lock().unwrap().last().cloned().expect("no request")
    }
}

impl Provider for Recording {
    fn name(&self) -> &str {
        "faux"
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ProviderStream {
        self.requests.lock().unwrap().push(request.clone());
        self.faux.stream(request, cancel)
    }
}

/// Runs `input` to its end, collecting every event.
pub async fn run(
    agent: &Agent,
    session: &SessionHandle,
    input: impl Into<Input>,
) -> (Vec<AgentEvent>, ExecuteResult) {
    agent.execute(session, input).await.expect("input accepted").collect_all().await
}

/// The `type` tags of `events`.
pub fn kinds(events: &[AgentEvent]) -> Vec<&'static str> {
    events.iter().map(AgentEvent::kind).collect()
}

/// The tags of the events the agent plan defines (nodes and steps left out).
pub fn plan_kinds(events: &[AgentEvent]) -> Vec<&'static str> {
    events.iter().filter(|e| e.is_plan_event()).map(AgentEvent::kind).collect()
}

/// The tool results among `messages`, as (text, is_error), in order.
pub fn tool_results<'a>(messages: impl IntoIterator<Item = &'a Message>) -> Vec<(String, bool)> {
    messages
        .into_iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some((r.text_content(), r.is_error)),
            _ => None,
        })
        .collect()
}
