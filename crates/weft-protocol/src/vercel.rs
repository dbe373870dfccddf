//! (being written)
use crate::{Encoder, Frame};
use weft_core::AgentEvent;
/// Placeholder.
#[derive(Debug, Default)]
pub struct VercelEncoder;
impl VercelEncoder {
    /// Placeholder.
    pub fn new() -> Self {
        Self
    }
}
impl Encoder for VercelEncoder {
    fn encode(&mut self, _event: &AgentEvent, _out: &mut Vec<Frame>) {}
}
