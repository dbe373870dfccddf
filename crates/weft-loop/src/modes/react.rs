//! ReAct: think, act, observe, until the model stops (see [`super`]).

use serde::{Deserialize, Serialize};

use super::Reasoning;

/// ReAct, the default mode: the model is called with the conversation, its tools run, and it
/// is called again with their results, until it answers without calling a tool (or the run's
/// turn limit). It keeps no state of its own: the conversation is its state.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct React;

impl Reasoning for React {
    type State = ();

    fn name(&self) -> &'static str {
        "react"
    }

    fn start(&self, _task: String) {}
}
