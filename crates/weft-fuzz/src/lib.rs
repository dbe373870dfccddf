//! # weft-fuzz
//!
//! Weft's fuzz targets: one function per parser or decoder that reads what a peer or a client
//! sends, each taking arbitrary bytes and returning nothing. A target must never panic, hang or
//! run out of memory, whatever the bytes; where an exact answer is known it also checks it
//! (a panic then means a wrong answer, not only a crash):
//!
//! | target | what it reads | what it also checks |
//! | --- | --- | --- |
//! | `sse` | an SSE body ([`weft_llm::sse`]) | cut into chunks anywhere, it gives the same events (or the same error) as in one piece |
//! | `partial_json` | streamed JSON text ([`weft_llm::partial_json`]) | pushed in pieces, `finish` gives what `serde_json` gives for the whole text |
//! | `openai_chat`, `openai_responses`, `anthropic`, `gemini` | a provider's SSE body, through its `SseDecoder` and a `ProviderStream` | exactly one terminal event, last; a finite cost; the same events however the body is cut |
//! | `loom` | Loom NDJSON ([`weft_protocol::loom::LoomReceiver`]), then each session's transcript | — |
//! | `execute`, `ag_ui`, `chat`, `websocket` | a request body (a WebSocket text frame), through what the server's handler does before a run ([`weft_server::fuzzing::Bodies`]) | a refusal is a 4xx, never a 5xx |
//!
//! The `fuzz/` directory at the repository's root is a cargo-fuzz project (outside the
//! workspace) whose targets call [`Target::run`]; `fuzz/run.sh SECONDS` runs them all. Its
//! corpus (`fuzz/corpus/TARGET/`) and the inputs of fixed findings (`fuzz/regressions/TARGET/`)
//! are replayed through every target by this crate's test, so `cargo test` checks them without
//! a fuzzer.
//!
//! ```
//! use weft_fuzz::Target;
//!
//! Target::Sse.run(b"data: {\"a\":1}\r\n\r\n");
//! Target::PartialJson.run(br#"{"city": "Paris"}"#);
//! assert_eq!(Target::from_name("gemini"), Some(Target::Gemini));
//! ```

#![deny(missing_docs)]

mod chunks;
mod llm;
mod protocol;
mod server;

pub use llm::{anthropic, gemini, openai_chat, openai_responses, partial_json, sse};
pub use protocol::loom;
pub use server::{ag_ui, chat, execute, websocket};

/// A fuzz target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// [`sse`].
    Sse,
    /// [`partial_json`].
    PartialJson,
    /// [`openai_chat`].
    OpenAiChat,
    /// [`openai_responses`].
    OpenAiResponses,
    /// [`anthropic`].
    Anthropic,
    /// [`gemini`].
    Gemini,
    /// [`loom`].
    Loom,
    /// [`execute`].
    Execute,
    /// [`ag_ui`].
    AgUi,
    /// [`chat`].
    Chat,
    /// [`websocket`].
    WebSocket,
}

impl Target {
    /// Every target.
    pub const ALL: [Target; 11] = [
        Target::Sse,
        Target::PartialJson,
        Target::OpenAiChat,
        Target::OpenAiResponses,
        Target::Anthropic,
        Target::Gemini,
        Target::Loom,
        Target::Execute,
        Target::AgUi,
        Target::Chat,
        Target::WebSocket,
    ];

    /// Its name: that of its cargo-fuzz target and of its corpus directory.
    pub fn name(self) -> &'static str {
        match self {
            Target::Sse => "sse",
            Target::PartialJson => "partial_json",
            Target::OpenAiChat => "openai_chat",
            Target::OpenAiResponses => "openai_responses",
            Target::Anthropic => "anthropic",
            Target::Gemini => "gemini",
            Target::Loom => "loom",
            Target::Execute => "execute",
            Target::AgUi => "ag_ui",
            Target::Chat => "chat",
            Target::WebSocket => "websocket",
        }
    }

    /// The target named `name`.
    pub fn from_name(name: &str) -> Option<Target> {
        Target::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Runs the target on `data`. Panics on a finding.
    pub fn run(self, data: &[u8]) {
        match self {
            Target::Sse => sse(data),
            Target::PartialJson => partial_json(data),
            Target::OpenAiChat => openai_chat(data),
            Target::OpenAiResponses => openai_responses(data),
            Target::Anthropic => anthropic(data),
            Target::Gemini => gemini(data),
            Target::Loom => loom(data),
            Target::Execute => execute(data),
            Target::AgUi => ag_ui(data),
            Target::Chat => chat(data),
            Target::WebSocket => websocket(data),
        }
    }
}
