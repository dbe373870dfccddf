//! Model calls: one request builder for every call a run makes (its conversation's, its scratch
//! calls', its graph nodes'), and one way to open them: in the session's
//! [scope](weft_llm::scope), which is how a provider that keeps state per conversation (the faux
//! provider's script cursor) tells sessions apart without the request naming one.

use std::sync::Arc;

use weft_core::{History, Session, ToolSpec};
use weft_llm::{CancellationToken, ModelRequest, Provider, ProviderStream};

use crate::context::AgentInner;
use crate::telemetry::{CallInfo, Chat};

/// A request to session `session`'s model with `messages` and `tools`, and the agent's sampling
/// settings.
pub(crate) fn request(
    agent: &AgentInner,
    session: &Session,
    messages: History,
    tools: Vec<ToolSpec>,
) -> ModelRequest {
    ModelRequest {
        model: session.model.clone(),
        system_prompt: session.system_prompt.clone(),
        messages,
        tools,
        temperature: agent.config.temperature,
        max_tokens: agent.config.max_tokens,
        prices: None,
    }
}

/// Opens model call `request` on `provider` in the scope of session `scope`, with its `chat`
/// span (`call`).
pub(crate) fn open(
    provider: &dyn Provider,
    scope: &Arc<str>,
    request: ModelRequest,
    cancel: CancellationToken,
    call: &CallInfo<'_>,
) -> (ProviderStream, Chat) {
    let chat = Chat::open(call, &request);
    (weft_llm::scope::in_scope(scope, || provider.stream(request, cancel)), chat)
}
