//! Forks: a new session made from a prefix of another's conversation, linked to it. A front end
//! forks when a client edits a message or regenerates an answer; the old branch stays as it
//! was. The link lives in the new session's `options` ([`OPTION_FORKED_FROM`]); the session a
//! front end's chat id names records its newest branch ([`OPTION_BRANCH`]), so the chat id
//! keeps leading to the conversation the client sees.

use std::collections::HashSet;

use serde::{Deserialize, Serialize};
use weft_core::{AssistantContent, Message, Session, SessionStatus, now_ms};

use crate::driver::Driver;
use crate::error::{AgentError, ExecuteError};
use crate::options::{OPTION_RUN_AFTER_SEQ, remove_option, set_option};
use crate::session::SessionHandle;

/// The key of a session's `options` that holds where it was forked from ([`ForkedFrom`]).
pub const OPTION_FORKED_FROM: &str = "forkedFrom";
/// The key of a session's `options` that holds the id of its newest branch: the session a
/// front end's requests for this one's id go to.
pub const OPTION_BRANCH: &str = "branch";

/// Where a forked session comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ForkedFrom {
    /// The session it was forked from.
    pub session_id: String,
    /// How many of that session's messages it kept (its history is those messages).
    pub at_message: usize,
}

/// Where the session whose `options` these are was forked from, if it is a fork.
pub fn forked_from(options: &serde_json::Value) -> Option<ForkedFrom> {
    serde_json::from_value(options.get(OPTION_FORKED_FROM)?.clone()).ok()
}

/// The newest branch of the session whose `options` these are, if it has one.
pub fn latest_branch(options: &serde_json::Value) -> Option<&str> {
    options.get(OPTION_BRANCH)?.as_str()
}

/// How to fork.
#[derive(Debug, Clone, Default)]
pub struct ForkOptions {
    /// The new session's id (default: a new UUID).
    pub id: Option<String>,
    /// How many of the parent's messages the fork keeps (default: all of them). The cut may not
    /// fall between a tool call and its result.
    pub at_message: Option<usize>,
}

/// Why `at` cannot be a fork point of `session`, if it cannot.
fn check_cut(session: &Session, at: usize) -> Result<(), String> {
    let messages: &[std::sync::Arc<Message>] = &session.messages;
    if at > messages.len() {
        return Err(format!(
            "session {} has {} messages; it cannot be forked at message {at}",
            session.id,
            messages.len()
        ));
    }
    if at == messages.len() && session.status == SessionStatus::Running {
        return Err(format!(
            "session {} is running: fork it at one of its messages, not after its last",
            session.id
        ));
    }
    let mut open: HashSet<&str> = HashSet::new();
    for message in &messages[..at] {
        match message.as_ref() {
            Message::Assistant(m) => {
                for block in &m.content {
                    if let AssistantContent::ToolCall(call) = block {
                        open.insert(call.id.as_str());
                    }
                }
            }
            Message::ToolResult(r) => {
                open.remove(r.tool_call_id.as_str());
            }
            Message::User(_) => {}
        }
    }
    if open.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "message {at} of session {} falls between a tool call and its result; fork before \
             the call or after its result",
            session.id
        ))
    }
}

impl Driver {
    /// What [`Agent::fork_session`](crate::Agent::fork_session) does.
    pub(crate) async fn fork_session(
        &self,
        parent: &SessionHandle,
        options: ForkOptions,
    ) -> Result<SessionHandle, AgentError> {
        if !self.made(parent) {
            return Err(AgentError::ForeignSession(parent.id()));
        }
        let source = parent.snapshot();
        let at = options.at_message.unwrap_or(source.messages.len());
        check_cut(&source, at).map_err(AgentError::InvalidFork)?;
        let id = options.id.unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
        let mut session = Session::new(id, source.provider.clone(), source.model.clone());
        session.system_prompt = source.system_prompt.clone();
        session.tools = source.tools.clone();
        session.owner = source.owner.clone();
        session.options = source.options.clone();
        remove_option(&mut session.options, OPTION_RUN_AFTER_SEQ);
        remove_option(&mut session.options, OPTION_BRANCH);
        let link = ForkedFrom { session_id: source.id.clone(), at_message: at };
        set_option(
            &mut session.options,
            OPTION_FORKED_FROM,
            serde_json::to_value(link).unwrap_or_default(),
        );
        // The messages are shared with the parent, not copied.
        session.messages = source.messages[..at].to_vec().into();
        self.insert_new(session).await
    }
}

impl SessionHandle {
    /// Records `branch` as this session's newest branch ([`latest_branch`]). Refused while a run
    /// has the session.
    pub async fn set_branch(&self, branch: &str) -> Result<(), ExecuteError> {
        self.refresh_if_stale().await;
        let commit = {
            let mut state = self.lock();
            if state.run.is_some() || state.session.status == SessionStatus::Running {
                return Err(ExecuteError::AlreadyRunning(state.session.id.clone()));
            }
            set_option(&mut state.session.options, OPTION_BRANCH, branch.into());
            if self.shared.store.is_none() {
                state.session.version += 1;
                state.session.updated_at = now_ms();
                return Ok(());
            }
            state.prepare_commit()
        };
        if let Err(error) = self.apply(commit).await {
            self.reload().await;
            return Err(ExecuteError::Store(error));
        }
        Ok(())
    }
}
