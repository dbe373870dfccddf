//! What the handlers do with a request body before anything is stored or run, callable one
//! body at a time: the entry points of the fuzz targets (`crates/weft-fuzz`). Not an API: hidden
//! from the docs, and it changes with the handlers.
//!
//! Each entry point reads a body with the handler's own extractor code (`parse_json`, the
//! WebSocket's `parse_message`) and runs the checks and conversions its handler runs on it
//! (options, ids, the front ends' conversations, tool parts and approval decisions), then does
//! what a request for a new session does up to its first run: the session is created on the
//! server's agent (the client's tool schemas compiled). Nothing is stored, no run starts. A
//! refusal is the handler's [`ApiError`]; a client's mistake must never be a 5xx.

use std::sync::Arc;

use weft_core::Input;

use crate::api::{ExecuteContext, ExecuteRequest, parse_json};
use crate::auth::Caller;
use crate::error::ApiError;
use crate::execute::{check_id, check_options, check_same, create, stamp};
use crate::frontends::Plan;
use crate::ws::ClientMessage;
use crate::{AppState, Server, agui, chat};

/// The body handling of a [`Server`]. Give it an agent without a store (nothing is kept between
/// bodies) and `keep_open(0)` (a session is dropped with its handle).
pub struct Bodies {
    state: Arc<AppState>,
    caller: Caller,
}

impl Bodies {
    /// The body handling of `server`, for a caller of a server without keys.
    pub fn new(server: &Server) -> Self {
        Self { state: Arc::clone(&server.state), caller: Caller::new(None) }
    }

    /// `POST /api/agent/execute`.
    pub fn execute(&self, body: &[u8]) -> Result<(), ApiError> {
        self.start(parse_json(body)?)
    }

    /// A text frame of `GET /api/agent/ws`.
    pub fn websocket(&self, text: &str) -> Result<(), ApiError> {
        match crate::ws::parse_message(text)? {
            ClientMessage::Execute(request) => self.start(*request),
            ClientMessage::Attach(message) => check_id(&message.session_id),
            ClientMessage::Abort(message) => check_id(&message.session_id),
        }
    }

    /// `POST /api/ag-ui`, for a thread that does not exist yet.
    pub fn ag_ui(&self, body: &[u8]) -> Result<(), ApiError> {
        let input: agui::RunAgentInput = parse_json(body)?;
        let options = agui::options(&input)?;
        check_id(&input.thread_id)?;
        let (conversation, system) = agui::conversation(&input);
        // An existing thread's answers: read the way `run` reads them.
        let _ = input.resume.iter().map(agui::decision).count();
        let Some(user) = conversation.last_user else {
            return Err(ApiError::bad_request("user_message_required", "a new thread"));
        };
        let tools = input.tools.iter().map(agui::AgUiTool::spec).collect();
        let context =
            ExecuteContext { messages: conversation.history, tools, system_prompt: system };
        self.run(&input.thread_id, Plan::Run(Input::User(user)), context, options)
    }

    /// `POST /api/chat`, for a chat that does not exist yet.
    pub fn chat(&self, body: &[u8]) -> Result<(), ApiError> {
        let request: chat::ChatRequest = parse_json(body)?;
        chat::regenerates(request.trigger.as_deref())?;
        check_id(&request.id)?;
        let (conversation, system) = chat::conversation(&request);
        // An existing chat's answers: the last assistant message's tool parts, as `post` reads
        // them.
        let last = request.messages.iter().rev().find(|m| m.role == chat::UiRole::Assistant);
        for part in last.iter().flat_map(|m| m.parts.iter().filter_map(chat::tool_part)) {
            let _ = chat::part_result(&part);
        }
        let Some(user) = conversation.last_user else {
            return Err(ApiError::bad_request("user_message_required", "a new chat"));
        };
        let system = request.system.or_else(|| (!system.is_empty()).then(|| system.join("\n\n")));
        let context = ExecuteContext {
            messages: conversation.history,
            tools: request.tools,
            system_prompt: system,
        };
        self.run(&request.id, Plan::Run(Input::User(user)), context, request.options)
    }

    /// What `frontends::start` makes of a front end's plan for a new session.
    fn run(
        &self,
        id: &str,
        plan: Plan,
        context: ExecuteContext,
        options: crate::api::ExecuteOptions,
    ) -> Result<(), ApiError> {
        match plan {
            Plan::Attach => check_id(id),
            Plan::Run(input) => self.start(ExecuteRequest {
                session_id: Some(id.to_string()),
                input,
                context: Some(context),
                options,
            }),
        }
    }

    /// What `execute::start` does before a run: options checked, input stamped, and a new
    /// session created from the context (a request without one names a session this server
    /// does not have).
    fn start(&self, request: ExecuteRequest) -> Result<(), ApiError> {
        let ExecuteRequest { session_id, input, context, options } = request;
        check_options(&self.state, &options)?;
        let input = stamp(input);
        if let Some(id) = &session_id {
            check_id(id)?;
        }
        let Some(context) = context else {
            return Err(ApiError::session_not_found(session_id.as_deref().unwrap_or("")));
        };
        if !matches!(input, Input::User(_)) {
            return Err(ApiError::bad_request("user_message_required", "a new session"));
        }
        let shown = session_id.clone().unwrap_or_default();
        let created = futures::executor::block_on(create(
            &self.state,
            &self.caller,
            session_id,
            context,
            &options,
        ))?;
        check_same(&self.state, created.1.as_ref(), &options, &shown)
    }
}

#[cfg(test)]
mod tests {
    use weft_agent::Agent;
    use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

    use super::*;
    use crate::Settings;

    fn bodies() -> Bodies {
        let provider = FauxProvider::new(FauxScript::new([FauxTurn::text("ok")]));
        let agent = Agent::builder(provider).keep_open(0).build().expect("an agent");
        Bodies::new(&Server::new(agent, Settings::new("faux")))
    }

    fn code(result: Result<(), ApiError>) -> String {
        result.err().map(|e| format!("{} {}", e.status.as_u16(), e.detail.code)).unwrap_or_default()
    }

    #[test]
    fn bodies_go_as_far_as_creating_the_session() {
        let b = bodies();
        let tools = r#"[{"name":"t","description":"d","parameters":{"type":"object"}}]"#;
        let bad_tools = r#"[{"name":"t","description":"d","parameters":{"type":7}}]"#;
        let execute = |tools: &str| {
            format!(r#"{{"input":{{"role":"user","content":"hi"}},"context":{{"tools":{tools}}}}}"#)
        };
        assert_eq!(code(b.execute(execute(tools).as_bytes())), "");
        // The schema is compiled where the session is created.
        assert_eq!(code(b.execute(execute(bad_tools).as_bytes())), "400 invalid_tools");
        assert_eq!(code(b.execute(b"{")), "400 bad_request");
        assert_eq!(
            code(b.websocket(&format!(r#"{{"type":"execute",{}"#, &execute(tools)[1..]))),
            ""
        );
        assert_eq!(
            code(b.websocket(r#"{"type":"attach","sessionId":"a b"}"#)),
            "400 invalid_session_id"
        );
        assert_eq!(code(b.websocket(r#"{"type":"nap"}"#)), "400 bad_request");
        let agui = |tools: &str| {
            format!(
                r#"{{"threadId":"t","messages":[{{"role":"user","content":"hi"}}],"tools":{tools}}}"#
            )
        };
        assert_eq!(code(b.ag_ui(agui("[]").as_bytes())), "");
        assert_eq!(
            code(b.ag_ui(agui(r#"[{"name":"t","parameters":{"type":7}}]"#).as_bytes())),
            "400 invalid_tools"
        );
        let chat = |tools: &str| {
            format!(
                r#"{{"id":"c","messages":[{{"role":"user","parts":[{{"type":"text","text":"hi"}}]}}],"tools":{tools}}}"#
            )
        };
        assert_eq!(code(b.chat(chat(tools).as_bytes())), "");
        assert_eq!(code(b.chat(chat(bad_tools).as_bytes())), "400 invalid_tools");
    }
}
