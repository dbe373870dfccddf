//! # weft-cancel
//!
//! The cancellation type every layer of Weft shares: a run's abort, a model call, a tool call
//! and an MCP request are all cancelled through a [`CancellationToken`]. Cloning a token shares
//! it; [`CancellationToken::child_token`] makes one that fires with its parent (a tool call's
//! token is a child of its run's).
//!
//! It lives below the model layer (`weft-llm`) and the tool layer (`weft-agent`, `weft-tools`)
//! so that neither borrows it from the other, and outside `weft-core`, which stays plain data
//! without async machinery. The token is `tokio-util`'s: it needs tokio's synchronisation
//! primitives only (no runtime, no IO), and it is the type the MCP SDK and the HTTP server
//! already cancel with, so no conversion sits on any path.
//!
//! ```
//! use weft_cancel::CancellationToken;
//!
//! let run = CancellationToken::new();
//! let call = run.child_token();
//! run.cancel();
//! assert!(call.is_cancelled());
//! ```

/// Cancels a run, a model call or a tool call; cloning shares it.
pub use tokio_util::sync::CancellationToken;
