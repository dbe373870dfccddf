//! Local tools: the tool contract of [`weft_tool_api`] (the [`Tool`]
//! trait, its events, output and errors, tool sources, and the helpers that make a tool from an
//! async fn), re-exported here as it was before it became a crate of its own.

pub use weft_tool_api::*;
