//! A model's streamed content as agent events: what the run and a graph node's loop share.

use weft_core::{AgentEvent, AssistantContent};
use weft_llm::ContentDelta;

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
