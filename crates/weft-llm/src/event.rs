//! What a provider adapter emits: content changes and the call's end, from which
//! [`ProviderStream`](crate::ProviderStream) builds the message.

use weft_core::{StopReason, Usage};

/// A change to one content block of the message being streamed.
///
/// `index` is the block's position in the assistant message's content: a block is started with
/// the next free index and then referred to by it, so deltas of several blocks may interleave.
#[derive(Debug, Clone, PartialEq)]
pub enum ContentDelta {
    /// A text block starts.
    TextStart {
        /// The block's position.
        index: u32,
    },
    /// More text.
    TextDelta {
        /// The block's position.
        index: u32,
        /// The new text.
        delta: String,
    },
    /// A text block ends.
    TextEnd {
        /// The block's position.
        index: u32,
    },
    /// A thinking block starts.
    ThinkingStart {
        /// The block's position.
        index: u32,
    },
    /// More thinking.
    ThinkingDelta {
        /// The block's position.
        index: u32,
        /// The new thinking text.
        delta: String,
    },
    /// Part of a thinking block's signature (appended to what came before).
    ThinkingSignature {
        /// The block's position.
        index: u32,
        /// The signature text.
        signature: String,
    },
    /// A thinking block ends.
    ThinkingEnd {
        /// The block's position.
        index: u32,
    },
    /// A tool call starts.
    ToolCallStart {
        /// The block's position.
        index: u32,
        /// The call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// More of a tool call's JSON arguments.
    ToolCallDelta {
        /// The block's position.
        index: u32,
        /// The new argument text.
        delta: String,
    },
    /// A tool call ends.
    ToolCallEnd {
        /// The block's position.
        index: u32,
    },
}

/// What a provider adapter emits; [`ProviderStream`](crate::ProviderStream) builds the message from it.
#[derive(Debug, Clone, PartialEq)]
pub enum ProviderEvent {
    /// A content change.
    Content(ContentDelta),
    /// Usage so far (replaces what came before).
    Usage(Usage),
    /// The call ended normally.
    Done {
        /// Why the model stopped (`stop`, `length` or `tool_use`).
        stop_reason: StopReason,
    },
    /// The call failed.
    Error {
        /// `error` or `aborted`.
        reason: StopReason,
        /// What went wrong, readable by a person.
        message: String,
    },
}
