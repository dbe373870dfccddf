//! # weft-loop
//!
//! Weft's agent loop as a pure state machine ([`Machine`]). It is told what happened (an input,
//! the model's message, tool results, an abort, a recovery) and answers what the run does next
//! ([`Next`]), changing only the [`Session`](weft_core::Session) it is handed. It never does
//! IO, never awaits and never reads a clock: times and ids come in as arguments. The runtime
//! (`weft-agent`) does what it decides, and streams what happens.
//!
//! Reasoning modes ([`Mode`]: react, tot, got) decide what a run does beyond ReAct's "call
//! the model, run its tools, repeat"; their state lives in the run, so a run in any mode is
//! saved at every node boundary and goes on in another process exactly.
//!
//! This crate depends on no async runtime, no IO crate and no clock; a test
//! (`tests/sans_io.rs`) keeps it so.

mod error;
mod input;
mod machine;
mod modes;
mod node;
mod settings;

pub use error::InputError;
pub use machine::{CompletedTurn, Disposition, Machine, Next, NodeCall, Progress, ToolOutcome};
pub use modes::{
    Action, CustomMode, Decision, GotOptions, Mode, ModeError, ModeKind, Modes, NodeOutcome,
    OPTION_MODE, React, Ready, Reasoning, Search, TotOptions, extract_json, summary,
};
pub use node::{NodeLoop, NodeNext};
pub use settings::{
    OPTION_DURABILITY, OPTION_MAX_TURNS, OPTION_RUN_AFTER_SEQ, SessionSettings, durability,
    max_turns, run_after_seq,
};
