//! How a new session is asked for ([`SessionOptions`]), and the keys of its `options` that are
//! not run settings (those are `weft_loop::SessionSettings`, typed).

use std::sync::Arc;

use weft_core::{Durability, Message, ToolSpec};

pub use weft_loop::{OPTION_MAX_TURNS, OPTION_RUN_AFTER_SEQ};
/// The checkpoint namespace of abort requests: a checkpoint `(session, ABORT_NAMESPACE, run id)`
/// asks the process running that run to abort it.
pub const ABORT_NAMESPACE: &str = "weft.abort";

/// The seq after which the current or last execution's events start, as recorded in a session's
/// `options` ([`OPTION_RUN_AFTER_SEQ`]); `None` for a session that has not recorded it.
pub fn run_after_seq(options: &serde_json::Value) -> Option<u64> {
    weft_loop::run_after_seq(options)
}

/// A session's own limit of model calls per run ([`OPTION_MAX_TURNS`]), if it has one.
pub fn session_max_turns(options: &serde_json::Value) -> Option<u32> {
    weft_loop::max_turns(options)
}

/// Removes `key` from a session's `options`.
pub(crate) fn remove_option(options: &mut serde_json::Value, key: &str) {
    if let Some(map) = options.as_object_mut() {
        map.remove(key);
    }
}

/// Sets `key` in a session's `options` (made an object if it is not one).
pub(crate) fn set_option(options: &mut serde_json::Value, key: &str, value: serde_json::Value) {
    if !options.is_object() {
        *options = serde_json::Value::Object(serde_json::Map::new());
    }
    if let Some(map) = options.as_object_mut() {
        map.insert(key.to_string(), value);
    }
}

/// How to create a session; everything is optional.
#[derive(Debug, Clone, Default)]
pub struct SessionOptions {
    /// Its id (default: a new UUID).
    pub id: Option<String>,
    /// The model (default: the agent's).
    pub model: Option<String>,
    /// The system prompt (default: the agent's).
    pub system_prompt: Option<Arc<str>>,
    /// Remote tools: specs without executors, run by the client.
    pub tools: Vec<ToolSpec>,
    /// Messages the conversation starts with.
    pub messages: Vec<Message>,
    /// The owner.
    pub owner: Option<String>,
    /// The provider, by the name the agent knows it by (default: the agent's default
    /// provider). A name the agent does not have is refused ([`AgentError::UnknownProvider`](crate::AgentError::UnknownProvider)).
    pub provider: Option<String>,
    /// The session's own limit of model calls per run (default: the agent's `max_turns`).
    /// Kept in the session's options, so it holds across resumes in any process.
    pub max_turns: Option<u32>,
    /// The reasoning mode of the session's runs (default: react), kept in its options.
    pub mode: Option<crate::Mode>,
}

/// How one execution runs ([`Agent::execute_with`](crate::Agent::execute_with)); everything has
/// a default, and a later execution of the session does not inherit it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunOptions {
    /// How durably the run is stored (default `async`); kept with the session while the run
    /// lasts, so a run recovered in another process keeps it.
    pub durability: Durability,
}

impl RunOptions {
    /// These options with `durability`.
    #[must_use]
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }
}
