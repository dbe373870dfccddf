//! # weft-core
//!
//! The canonical model of Weft: the types every other crate speaks.
//!
//! - [`message`]: messages and content blocks ([`Message`], [`AssistantMessage`], [`ToolCall`] …)
//!   and [`StopReason`];
//! - [`usage`]: [`Usage`] and [`Cost`];
//! - [`tool`]: [`ToolSpec`], what a model is told about a tool, and [`ToolContent`], a block of
//!   a local tool's output;
//! - [`event`]: [`AgentEvent`], the one closed set of events a run emits;
//! - [`step`]: the step trace ([`AgentStep`], [`ToolExecutionResult`], [`AgentResponse`]);
//! - [`history`]: [`History`], the conversation shared (not copied) by the session, model
//!   requests and events;
//! - [`state`]: what a session is as it is stored: its status ([`SessionStatus`]), its head
//!   ([`SessionHead`]) and the state of its run ([`RunState`], [`OpenTurn`] …);
//! - [`session`]: [`Session`] and the [`Input`] that starts or resumes a run;
//! - [`store`]: how a session is stored ([`Commit`], [`EventRecord`]), the [`SessionStore`]
//!   contract its backends implement, and [`ForwardingStore`] for wrappers of a store.
//!
//! The modules depend on each other one way: `message`, `usage`, `tool`, `step` and `history` at
//! the bottom, `state` on them, `event` and `session` on `state`, and `store` on top. (`session`
//! and `store` re-export the `state` types they used to define, so their old paths still work.)
//!
//! This crate is plain data: it does no IO and uses no async runtime. Its JSON form is the agent
//! plan's (camelCase fields, `type`/`role` tags), specified on each type.
//!
//! ```
//! use std::sync::Arc;
//!
//! use weft_core::{AgentEvent, Message, UserMessage};
//!
//! let event = AgentEvent::MessageEnd { message: Arc::new(Message::User(UserMessage::text("hi"))) };
//! let json = serde_json::to_value(&event).unwrap();
//! assert_eq!(json["type"], "message_end");
//! assert_eq!(json["message"]["role"], "user");
//! ```

pub mod event;
pub mod history;
pub mod message;
pub mod session;
pub mod state;
pub mod step;
pub mod store;
pub mod tool;
pub mod usage;

pub use event::{AgentEvent, CheckpointTaken, ModeProgress};
pub use history::History;
pub use message::{
    AssistantContent, AssistantMessage, ImageContent, Message, Name, Role, StopReason, TextContent,
    ThinkingContent, TimestampMs, ToolCall, ToolResultMessage, UserContent, UserMessage, now_ms,
    set_thread_clock,
};
pub use session::{ApprovalDecision, Input, Session};
pub use state::{
    CallSlot, CallState, OpenTurn, RunChange, RunState, SessionHead, SessionStatus, StoredSession,
};
pub use step::{
    AgentResponse, AgentStep, CitationRef, SafetyNote, SafetyVerdict, StepAnnotations,
    ToolExecutionResult,
};
pub use store::{
    BackendSource, Checkpoint, Commit, Durability, EventRecord, ForwardingStore, MessageSpan,
    OwnerScope, SessionStore, StoreError, StoreFuture,
};
pub use tool::{MAX_TOOL_NAME, ToolContent, ToolSpec, valid_tool_name};
pub use usage::{Cost, Prices, Usage};
