//! # weft-llm
//!
//! The model layer: the [`Provider`] contract, the [`ProviderStream`] that turns any adapter's
//! events into a message, the scripted [`FauxProvider`](faux::FauxProvider), and the incremental
//! [`PartialJson`](partial_json::PartialJson) parser for streamed tool arguments.
//!
//! A provider never panics and never fails mid-stream: every failure is a terminal
//! [`StreamEvent::Error`] carrying the partial message with stop reason `error` or `aborted`.
//!
//! ```
//! use futures::StreamExt;
//! use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
//! use weft_llm::{CancellationToken, ModelRequest, Provider, StreamEvent};
//!
//! # tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap().block_on(async {
//! let provider = FauxProvider::new(FauxScript::new([FauxTurn::text("Hello, world")]));
//! let mut stream = provider.stream(ModelRequest::default(), CancellationToken::new());
//! let mut last = None;
//! while let Some(event) = stream.next().await {
//!     last = Some(event);
//! }
//! let Some(StreamEvent::Done(message)) = last else { panic!("no message") };
//! assert_eq!(message.text(), "Hello, world");
//! # });
//! ```

pub mod config;
pub mod dialect;
mod event;
pub mod faux;
pub mod http;
pub mod models;
pub mod partial_json;
mod provider;
pub mod providers;
pub mod replay;
pub mod scope;
pub mod sse;
mod stream;

pub use event::{ContentDelta, ProviderEvent};
pub use provider::{ModelRequest, Provider};
pub use stream::{ProviderStream, StreamEvent};
/// Cancels a model call or a run; cloning shares it (re-exported from `weft-cancel`).
pub use weft_cancel::CancellationToken;
