//! (being written)
use crate::{Encoder, Frame};
use weft_core::AgentEvent;
/// Placeholder.
#[derive(Debug, Default)]
pub struct AceaiEncoder;
impl AceaiEncoder {
    /// Placeholder.
    pub fn new() -> Self {
        Self
    }
}
impl Encoder for AceaiEncoder {
    fn encode(&mut self, _event: &AgentEvent, _out: &mut Vec<Frame>) {}
}
