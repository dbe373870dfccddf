//! (being written)
use crate::{Encoder, Frame};
use weft_core::AgentEvent;
/// Placeholder.
#[derive(Debug, Default)]
pub struct LoomEncoder;
impl LoomEncoder {
    /// Placeholder.
    pub fn new() -> Self {
        Self
    }
}
impl Encoder for LoomEncoder {
    fn encode(&mut self, _event: &AgentEvent, _out: &mut Vec<Frame>) {}
}
impl LoomEncoder {
    /// Placeholder.
    pub fn export() -> Self {
        Self
    }
}
