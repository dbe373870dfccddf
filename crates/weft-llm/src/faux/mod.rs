//! The faux provider: plays a [`FauxScript`] of turns, for tests, examples, benchmarks and offline
//! demos. It is always named `faux`, on every message it makes.
//!
//! Each model call consumes the next turn of its [scope](crate::scope)'s own cursor, and an agent
//! opens every call of a session in the session's scope, so every session replays the script
//! from its first turn (calls opened in no scope share one cursor). Running out of turns ends the call with an `error`
//! event, never a panic.
//!
//! # Cost
//!
//! A call is costed at the request's own prices if it gives some, else at the prices a
//! [`ModelRegistry`] given with [`FauxProvider::with_registry`] has for the provider `faux` and
//! the request's model (so a models file can give scripted runs costs:
//! `{"provider": "faux", "id": "faux", "prices": {…}}`). Without prices the cost is zero, and
//! every assistant message carries it, as the real adapters' do; a model the registry does not
//! know is warned about once, as the real adapters do, except the default model id `faux` (this
//! is a test provider: most scripts have no prices).

mod script;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::{Future, Stream};
use tokio::time::Sleep;
use weft_core::StopReason;

pub use script::{FauxScript, FauxToolCall, FauxTurn, FauxUsage, ScriptError};

use crate::CancellationToken;
use crate::event::{ContentDelta, ProviderEvent};
use crate::models::ModelRegistry;
use crate::provider::{ModelRequest, Provider};
use crate::stream::ProviderStream;

/// Characters per delta when a turn does not say.
pub const DEFAULT_CHUNK_SIZE: usize = 4;

/// The model id the faux provider records when a request names none; the registry is never
/// warned about for it.
pub const DEFAULT_MODEL: &str = "faux";

/// The scripted provider. See the [module docs](self).
#[derive(Debug)]
pub struct FauxProvider {
    script: Arc<FauxScript>,
    cursors: Mutex<HashMap<String, usize>>,
    registry: Option<Arc<ModelRegistry>>,
}

impl FauxProvider {
    /// A provider playing `script`, without prices (see the [module docs](self#cost)).
    pub fn new(script: FauxScript) -> Self {
        Self { script: Arc::new(script), cursors: Mutex::new(HashMap::new()), registry: None }
    }

    /// The same provider costing its calls at `registry`'s prices for the provider `faux` (see
    /// the [module docs](self#cost)).
    pub fn with_registry(mut self, registry: Arc<ModelRegistry>) -> Self {
        self.registry = Some(registry);
        self
    }

    /// The prices a call to `model` is costed at: the request's, else the registry's, else
    /// nothing (a cost of zero).
    fn prices_for(
        &self,
        model: &str,
        request_prices: Option<weft_core::Prices>,
    ) -> Option<weft_core::Prices> {
        if request_prices.is_some() {
            return request_prices;
        }
        let known = self.registry.as_ref().map(|registry| {
            if model == DEFAULT_MODEL {
                registry.prices("faux", model).unwrap_or_default()
            } else {
                registry.prices_or_warn("faux", model)
            }
        });
        Some(known.unwrap_or_default())
    }

    /// How many turns the calls of scope `scope` (an agent's: a session id) have consumed.
    pub fn turns_played(&self, scope: &str) -> usize {
        self.cursors.lock().map(|c| c.get(scope).copied().unwrap_or(0)).unwrap_or(0)
    }

    fn next_turn(&self, scope: &str) -> usize {
        // A poisoned lock only means another call panicked mid-update of a counter; the counter
        // itself is still sound.
        let mut cursors = self.cursors.lock().unwrap_or_else(|e| e.into_inner());
        let cursor = match cursors.get_mut(scope) {
            Some(cursor) => cursor,
            None => cursors.entry(scope.to_string()).or_insert(0),
        };
        let turn = *cursor;
        *cursor += 1;
        turn
    }
}

impl Provider for FauxProvider {
    fn name(&self) -> &str {
        "faux"
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ProviderStream {
        let turn = self.next_turn(crate::scope::current().as_deref().unwrap_or(""));
        let model = if request.model.is_empty() { DEFAULT_MODEL } else { request.model.as_str() };
        let prices = self.prices_for(model, request.prices);
        if turn >= self.script.turns.len() {
            let message = format!(
                "the faux script has no turn left: all {} turns were played",
                self.script.turns.len()
            );
            let inner = futures::stream::iter([ProviderEvent::Error {
                reason: StopReason::Error,
                message,
            }]);
            return ProviderStream::new("faux", model, prices, cancel, inner);
        }
        let inner = FauxStream::new(self.script.clone(), turn);
        ProviderStream::new("faux", model, prices, cancel, inner)
    }
}

/// Where a [`FauxStream`] is within its turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Thinking,
    Text,
    Tool(usize),
    End,
    Finished,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Start,
    Deltas,
    Signature,
    Close,
}

/// One turn played as a stream of provider events.
struct FauxStream {
    script: Arc<FauxScript>,
    turn: usize,
    phase: Phase,
    step: Step,
    /// Byte offset into the text being streamed.
    pos: usize,
    /// The current tool call's argument text, when it is not scripted as raw text (that one
    /// streams from the script).
    args: String,
    next_index: u32,
    last_block: Option<Phase>,
    chunk: usize,
    delay: Option<Duration>,
    /// The timer of the delays, made once and set again before each delta (no timer made and
    /// dropped per delta).
    sleep: Option<Pin<Box<Sleep>>>,
    /// The timer is set for the next delta.
    sleeping: bool,
    stalled: bool,
    usage_sent: bool,
}

impl FauxStream {
    fn new(script: Arc<FauxScript>, turn: usize) -> Self {
        let t = &script.turns[turn];
        let last_block = if !t.tool_calls.is_empty() {
            Some(Phase::Tool(t.tool_calls.len() - 1))
        } else if t.text.is_some() {
            Some(Phase::Text)
        } else if t.thinking.is_some() {
            Some(Phase::Thinking)
        } else {
            None
        };
        let chunk = t.chunk_size.unwrap_or(DEFAULT_CHUNK_SIZE).max(1);
        let delay = (t.delay_ms > 0).then(|| Duration::from_millis(t.delay_ms));
        let mut s = Self {
            script,
            turn,
            phase: Phase::Thinking,
            step: Step::Start,
            pos: 0,
            args: String::new(),
            next_index: 0,
            last_block,
            chunk,
            delay,
            sleep: None,
            sleeping: false,
            stalled: false,
            usage_sent: false,
        };
        s.skip_absent();
        s
    }

    fn turn(&self) -> &FauxTurn {
        &self.script.turns[self.turn]
    }

    /// Moves past blocks the turn does not have.
    fn skip_absent(&mut self) {
        loop {
            let t = &self.script.turns[self.turn];
            let present = match self.phase {
                Phase::Thinking => t.thinking.is_some(),
                Phase::Text => t.text.is_some(),
                Phase::Tool(i) => i < t.tool_calls.len(),
                Phase::End | Phase::Finished => true,
            };
            if present {
                return;
            }
            self.phase = match self.phase {
                Phase::Thinking => Phase::Text,
                Phase::Text => Phase::Tool(0),
                _ => Phase::End,
            };
        }
    }

    fn advance_block(&mut self) {
        self.phase = match self.phase {
            Phase::Thinking => Phase::Text,
            Phase::Text => Phase::Tool(0),
            Phase::Tool(i) => Phase::Tool(i + 1),
            other => other,
        };
        self.step = Step::Start;
        self.pos = 0;
        self.skip_absent();
    }

    /// The text the current block streams.
    fn block_text(&self) -> &str {
        let t = self.turn();
        match self.phase {
            Phase::Thinking => t.thinking.as_deref().unwrap_or(""),
            Phase::Text => t.text.as_deref().unwrap_or(""),
            // Arguments scripted as raw text stream from the script itself (no copy of them).
            Phase::Tool(i) => match t.tool_calls.get(i).map(|c| &c.arguments) {
                Some(serde_json::Value::String(raw)) => raw,
                _ => &self.args,
            },
            _ => "",
        }
    }

    /// The next chunk of the current block, advancing the position.
    fn take_chunk(&mut self) -> Option<String> {
        let text = self.block_text();
        if self.pos >= text.len() {
            return None;
        }
        let rest = &text[self.pos..];
        // `chunk` characters: as many bytes when they are ASCII (no decoding), else counted.
        let end = match rest.as_bytes().get(..self.chunk) {
            Some(head) if head.is_ascii() => self.chunk,
            _ => rest.char_indices().nth(self.chunk).map_or(rest.len(), |(i, _)| i),
        };
        let chunk = rest[..end].to_string();
        self.pos += end;
        Some(chunk)
    }

    /// Whether the current block's deltas are exhausted.
    fn block_done(&self) -> bool {
        self.pos >= self.block_text().len()
    }

    /// The turn's failure or stall, checked when the last block is about to close.
    fn interrupt(&mut self) -> Option<Option<ProviderEvent>> {
        let t = self.turn();
        if let Some(usage) = t.usage
            && (t.error.is_some() || t.stall)
            && !self.usage_sent
        {
            self.usage_sent = true;
            return Some(Some(ProviderEvent::Usage(usage.into())));
        }
        if let Some(message) = &t.error {
            let event =
                ProviderEvent::Error { reason: StopReason::Error, message: message.clone() };
            self.phase = Phase::Finished;
            return Some(Some(event));
        }
        if t.stall {
            self.stalled = true;
            return Some(None);
        }
        None
    }

    /// The next event, or `None` to stall.
    fn next_event(&mut self) -> Option<ProviderEvent> {
        loop {
            match self.phase {
                Phase::Finished => return None,
                Phase::End => {
                    if let Some(event) = self.interrupt() {
                        return event;
                    }
                    let t = self.turn();
                    if let Some(usage) = t.usage
                        && !self.usage_sent
                    {
                        self.usage_sent = true;
                        return Some(ProviderEvent::Usage(usage.into()));
                    }
                    let stop_reason = t.stop_reason.unwrap_or(if t.tool_calls.is_empty() {
                        StopReason::Stop
                    } else {
                        StopReason::ToolUse
                    });
                    self.phase = Phase::Finished;
                    if stop_reason.is_failure() {
                        // A scripted failure without an `error` message: say where it comes
                        // from (what a consumer shows after "the model call failed: ").
                        let message = format!(
                            "the faux script's turn {} ends with stopReason \"{}\"",
                            self.turn + 1,
                            stop_reason.as_str()
                        );
                        return Some(ProviderEvent::Error { reason: stop_reason, message });
                    }
                    return Some(ProviderEvent::Done { stop_reason });
                }
                phase => {
                    let index = self.next_index;
                    match self.step {
                        Step::Start => {
                            self.step = Step::Deltas;
                            return Some(ProviderEvent::Content(match phase {
                                Phase::Thinking => ContentDelta::ThinkingStart { index },
                                Phase::Text => ContentDelta::TextStart { index },
                                Phase::Tool(i) => {
                                    let call = &self.turn().tool_calls[i];
                                    let id = call
                                        .id
                                        .clone()
                                        .unwrap_or_else(|| format!("call_{}_{i}", self.turn));
                                    let name = call.name.clone();
                                    self.args = match &call.arguments {
                                        // Streamed from the script: see `block_text`.
                                        serde_json::Value::String(_) => String::new(),
                                        serde_json::Value::Null => "{}".to_string(),
                                        v => v.to_string(),
                                    };
                                    ContentDelta::ToolCallStart { index, id, name }
                                }
                                _ => unreachable!("block phases only"),
                            }));
                        }
                        Step::Deltas => {
                            if let Some(delta) = self.take_chunk() {
                                return Some(ProviderEvent::Content(match phase {
                                    Phase::Thinking => ContentDelta::ThinkingDelta { index, delta },
                                    Phase::Text => ContentDelta::TextDelta { index, delta },
                                    _ => ContentDelta::ToolCallDelta { index, delta },
                                }));
                            }
                            self.step = Step::Signature;
                        }
                        Step::Signature => {
                            self.step = Step::Close;
                            if phase == Phase::Thinking
                                && let Some(signature) = self.turn().signature.clone()
                            {
                                return Some(ProviderEvent::Content(
                                    ContentDelta::ThinkingSignature { index, signature },
                                ));
                            }
                        }
                        Step::Close => {
                            if self.last_block == Some(phase)
                                && let Some(event) = self.interrupt()
                            {
                                return event;
                            }
                            self.next_index += 1;
                            self.advance_block();
                            return Some(ProviderEvent::Content(match phase {
                                Phase::Thinking => ContentDelta::ThinkingEnd { index },
                                Phase::Text => ContentDelta::TextEnd { index },
                                _ => ContentDelta::ToolCallEnd { index },
                            }));
                        }
                    }
                }
            }
        }
    }

    /// Whether the next event is a delta (the scripted delay applies before deltas only).
    fn delta_is_next(&self) -> bool {
        matches!(self.phase, Phase::Thinking | Phase::Text | Phase::Tool(_))
            && self.step == Step::Deltas
            && !self.block_done()
    }
}

impl Stream for FauxStream {
    type Item = ProviderEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ProviderEvent>> {
        let this = &mut *self;
        if this.stalled {
            // Waits for the caller's cancellation, which `ProviderStream` watches.
            return Poll::Pending;
        }
        if let Some(delay) = this.delay
            && this.delta_is_next()
        {
            let mut made = false;
            let sleep = this.sleep.get_or_insert_with(|| {
                made = true;
                Box::pin(tokio::time::sleep(delay))
            });
            if !made && !this.sleeping {
                sleep.as_mut().reset(tokio::time::Instant::now() + delay);
            }
            this.sleeping = true;
            if sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            this.sleeping = false;
        }
        match this.next_event() {
            Some(event) => Poll::Ready(Some(event)),
            None if this.stalled => Poll::Pending,
            None => Poll::Ready(None),
        }
    }
}
