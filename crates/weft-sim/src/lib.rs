//! # weft-sim
//!
//! A seeded fault simulation of Weft's run lifecycle, after the way FoundationDB and
//! TigerBeetle prove their promises: one seed decides a whole history — the sessions and what
//! their clients send (messages, tool results that come late, twice or never, approvals,
//! aborts, inputs while a run goes on, watchers resuming at any seq, each run's durability, the
//! reasoning mode), the store's faults ([`FaultStore`]: transient failures before and after a
//! write, refusals, latency, hangs, a writer that dies) and the crashes (a process life ends at
//! a seeded moment: its runtime is dropped with every task of the agent, mid-operation, and a
//! new agent starts on the same store). Time is simulated (paused Tokio time on a one-thread
//! runtime), so leases, sweeps and delays pass in simulated time and a history plays in
//! milliseconds.
//!
//! After every life, and at the end, what the clients were told is checked against the store
//! ([`Observed`]): a seq is never given to two events, a stream never goes back, nothing
//! follows a run's end, an answer a client was told (durably) is never replaced, every event
//! received under `sync` is stored, a resuming watcher misses nothing. The last life is calm:
//! every run must reach an end or a suspension, every pending call and approval must be
//! answerable, every session must take a new message and complete it, and each react session's
//! usage must add up.
//!
//! [`run_seed`] plays one seed; a failure names it with the command that replays it.

mod backend;
mod faults;
mod model;
mod observed;
mod world;

pub use backend::Backend;
pub use faults::{FaultCounts, FaultPlan, FaultStore};
pub use observed::Observed;
pub use world::{Failure, Summary, play_seeds, run_seed, run_seed_on};
