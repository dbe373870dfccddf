//! A model's streamed content as agent events, and where the events of a model call or a batch
//! of tool calls go ([`EventSink`]): what the run and a graph node's loop share.

use futures::{FutureExt, StreamExt};
use weft_core::{AgentEvent, AssistantContent, AssistantMessage, StopReason};
use weft_llm::{ContentDelta, ProviderStream, StreamEvent};

use crate::telemetry::Chat;

/// Where the events of a model call ([`stream_message`]) or a batch of tool calls
/// ([`crate::calls::run_batch`]) go: the run's emitter, or a graph node's channel to the run.
///
/// Queuing is synchronous, so the per-delta path moves each event once, into the queue; the
/// caller paces after each event.
pub(crate) trait EventSink {
    /// Queues one event.
    fn emit(&mut self, event: AgentEvent);
    /// Lets what is queued go on, once enough has gathered (called after each event).
    async fn pace(&mut self);
    /// Nothing is ready: the caller waits for the model or the tools (what is queued goes out
    /// now).
    async fn idle(&mut self);
}

/// Streams one model call's content to `sink` and returns its final message. Every block
/// started is ended: after a failure mid-block, with its partial content.
pub(crate) async fn stream_message(
    mut stream: ProviderStream,
    sink: &mut impl EventSink,
    mut chat: Chat,
) -> AssistantMessage {
    let message = stream_to_end(&mut stream, sink, &mut chat).await;
    chat.end(&message);
    message
}

/// [`stream_message`] until the stream's end.
async fn stream_to_end(
    stream: &mut ProviderStream,
    sink: &mut impl EventSink,
    chat: &mut Chat,
) -> AssistantMessage {
    // Blocks started and not yet ended.
    let mut open: Vec<u32> = Vec::new();
    loop {
        let event = match stream.next().now_or_never() {
            Some(event) => event,
            None => {
                // The model is thinking: hand over what is queued before waiting.
                sink.idle().await;
                stream.next().await
            }
        };
        let Some(event) = event else {
            // ProviderStream always ends with a terminal event; should it not, the partial is
            // still kept.
            let mut message = stream.partial().clone();
            message.stop_reason = StopReason::Error;
            message.error_message = Some("the model's stream ended early".into());
            return message;
        };
        match event {
            StreamEvent::Content(delta) => {
                chat.chunk();
                match &delta {
                    ContentDelta::TextStart { index }
                    | ContentDelta::ThinkingStart { index }
                    | ContentDelta::ToolCallStart { index, .. } => open.push(*index),
                    ContentDelta::TextEnd { index }
                    | ContentDelta::ThinkingEnd { index }
                    | ContentDelta::ToolCallEnd { index } => open.retain(|i| i != index),
                    _ => {}
                }
                if let Some(event) = content_event(delta, &stream.partial().content) {
                    sink.emit(event);
                    sink.pace().await;
                }
            }
            StreamEvent::Done(message) | StreamEvent::Error(message) => {
                for index in open {
                    if let Some(event) = end_event(index, &message.content) {
                        sink.emit(event);
                    }
                }
                sink.pace().await;
                return *message;
            }
        }
    }
}

/// The agent event for a content delta (`None` for signature parts, which are reported whole on
/// `thinking_end`); `*_end` events carry the block's whole content.
pub(crate) fn content_event(
    delta: ContentDelta,
    content: &[AssistantContent],
) -> Option<AgentEvent> {
    Some(match delta {
        ContentDelta::TextStart { index } => AgentEvent::TextStart { index },
        ContentDelta::TextDelta { index, delta } => AgentEvent::TextDelta { index, delta },
        ContentDelta::ThinkingStart { index } => AgentEvent::ThinkingStart { index },
        ContentDelta::ThinkingDelta { index, delta } => AgentEvent::ThinkingDelta { index, delta },
        ContentDelta::ThinkingSignature { .. } => return None,
        ContentDelta::ToolCallStart { index, id, name } => {
            AgentEvent::ToolcallStart { index, id, name }
        }
        ContentDelta::ToolCallDelta { index, delta } => AgentEvent::ToolcallDelta { index, delta },
        ContentDelta::TextEnd { index }
        | ContentDelta::ThinkingEnd { index }
        | ContentDelta::ToolCallEnd { index } => return end_event(index, content),
    })
}

/// The `*_end` event of block `index`, with its whole content.
pub(crate) fn end_event(index: u32, content: &[AssistantContent]) -> Option<AgentEvent> {
    Some(match content.get(index as usize)? {
        AssistantContent::Text(t) => AgentEvent::TextEnd { index, text: t.text.clone() },
        AssistantContent::Thinking(t) => AgentEvent::ThinkingEnd {
            index,
            thinking: t.thinking.clone(),
            signature: t.signature.clone(),
        },
        AssistantContent::ToolCall(call) => {
            AgentEvent::ToolcallEnd { index, tool_call: call.clone() }
        }
    })
}
