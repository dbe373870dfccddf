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
//! - [`session`]: [`Session`], its status, and the [`Input`] that starts or resumes a run;
//! - [`store`]: the durable shape of a session ([`SessionHead`], [`RunState`], [`Commit`],
//!   [`EventRecord`]) and the [`SessionStore`] contract its backends implement.
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
pub mod step;
pub mod store;
pub mod tool;
pub mod usage;

pub use event::{AgentEvent, CheckpointTaken, ModeProgress};
pub use history::History;
pub use message::{
    AssistantContent, AssistantMessage, ImageContent, Message, Name, Role, StopReason, TextContent,
    ThinkingContent, TimestampMs, ToolCall, ToolResultMessage, UserContent, UserMessage, now_ms,
};
pub use session::{ApprovalDecision, CallSlot, CallState, Input, OpenTurn, Session, SessionStatus};
pub use step::{
    AgentResponse, AgentStep, CitationRef, SafetyNote, SafetyVerdict, StepAnnotations,
    ToolExecutionResult,
};
pub use store::{
    Checkpoint, Commit, EventRecord, MessageSpan, OwnerScope, RunChange, RunState, SessionHead,
    SessionStore, StoreError, StoreFuture, StoredSession,
};
pub use tool::{MAX_TOOL_NAME, ToolContent, ToolSpec, valid_tool_name};
pub use usage::{Cost, Prices, Usage};
