//! [`RunOutcome`]: how a run ended, as a type a caller matches on (never by reading the
//! error's text).
//!
//! The run records each thing that decides its end as it happens ([`Ending`]); at the end the
//! same record gives the result's `outcome` and its `error` text, so the two always agree.

use serde::{Deserialize, Serialize};
use weft_core::SessionStatus;

/// How a run ended. [`ExecuteResult::status`](crate::ExecuteResult::status) says where the
/// session rests and [`ExecuteResult::error`](crate::ExecuteResult::error) says in words what
/// went wrong; this says which of those ends it was, for a caller to match on.
///
/// When several things went wrong, the one a caller must act on wins: an end the store never
/// took ([`EndNotDurable`](Self::EndNotDurable)), then a store failure
/// ([`FailureKind::Store`]), then whatever the status says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", rename_all_fields = "camelCase")]
#[non_exhaustive]
pub enum RunOutcome {
    /// The model answered with no tool call left to run (status `completed`).
    Completed,
    /// The run rests until someone answers what it waits for (status
    /// `awaiting_tool_execution` or `awaiting_approval`); executing the session with the
    /// answers resumes it.
    Suspended {
        /// What the run waits for.
        awaiting: Awaiting,
    },
    /// The run used up the model calls it was allowed (status `max_turns`).
    MaxTurns {
        /// Which bound stopped it.
        limit: TurnLimit,
    },
    /// The run was aborted ([`AbortHandle::abort`](crate::AbortHandle::abort), or an abort
    /// requested through the store; status `aborted`).
    Aborted,
    /// The run failed (status `error`, or `aborted` when a store failure stopped the run, or
    /// the status it reached when only its events failed to be stored).
    Failed {
        /// What failed.
        kind: FailureKind,
        /// The failure in words: the part of `error` this failure wrote (`error` may say more,
        /// such as an earlier failure of the same run).
        message: String,
    },
    /// The run reached an end, but the store never took it (status `error`): the session goes
    /// on from its last stored state, and the run is recovered from there once the store takes
    /// writes again. What the result says the run reached must not be taken as done.
    EndNotDurable {
        /// The status the run reached and could not store.
        reached: SessionStatus,
        /// Why, in words (the part of `error` that says so).
        message: String,
    },
}

/// What a suspended run waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Awaiting {
    /// Results of remote tool calls (a client's tools), listed in
    /// [`ExecuteResult::pending_tool_calls`](crate::ExecuteResult::pending_tool_calls).
    ToolResults,
    /// Approval decisions for tool calls, listed in
    /// [`ExecuteResult::pending_approvals`](crate::ExecuteResult::pending_approvals).
    Approval,
}

/// Which bound of model calls stopped a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TurnLimit {
    /// The session's `max_turns` (model calls of the conversation).
    MaxTurns,
    /// A reasoning mode's own bound (`maxModelCalls` of `tot` or `got`).
    ModelCalls,
    /// Not known: the outcome was rebuilt from a status alone ([`RunOutcome::from_status`]).
    Unknown,
}

/// What made a run fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailureKind {
    /// A model call failed: the provider reported an error, or its stream ended early (or a
    /// scripted provider had no turn left).
    Model,
    /// The reasoning mode could not go on: every path of a tree of thoughts failed, a graph's
    /// plan was refused or no node of it could run, or the mode's state was missing.
    Mode,
    /// The session store failed or refused a write during the run (the session at a boundary,
    /// a checkpoint, the run's events): the run was stopped, or its events may be missing from
    /// the store. Nothing the result reports may be taken as stored.
    Store,
    /// The run stopped unexpectedly: code it ran (a hook, a provider, a tool) panicked.
    Panic,
    /// The run's task ended without a result (it was cancelled, as when the runtime shuts
    /// down).
    Lost,
    /// Not known: the outcome was rebuilt from a status and an error text alone
    /// ([`RunOutcome::from_status`]), or the run ended with a status no run rests in.
    Unknown,
}

impl RunOutcome {
    /// The outcome a status and error text say, when nothing more is known (a result rebuilt
    /// from a remote run's status, or from JSON written before results had an outcome). What
    /// the status cannot say is [`TurnLimit::Unknown`] or [`FailureKind::Unknown`].
    pub fn from_status(status: SessionStatus, error: Option<&str>) -> Self {
        match status {
            SessionStatus::Completed => Self::Completed,
            SessionStatus::AwaitingToolExecution => {
                Self::Suspended { awaiting: Awaiting::ToolResults }
            }
            SessionStatus::AwaitingApproval => Self::Suspended { awaiting: Awaiting::Approval },
            SessionStatus::MaxTurns => Self::MaxTurns { limit: TurnLimit::Unknown },
            SessionStatus::Aborted => Self::Aborted,
            SessionStatus::Error | SessionStatus::Idle | SessionStatus::Running => Self::Failed {
                kind: FailureKind::Unknown,
                message: error.unwrap_or_default().to_string(),
            },
        }
    }

    /// Whether everything the result reports is in the store (when the agent has one): false
    /// after a store failure ([`FailureKind::Store`]) or an end the store never took
    /// ([`RunOutcome::EndNotDurable`]).
    pub fn is_durable(&self) -> bool {
        !matches!(self, Self::EndNotDurable { .. } | Self::Failed { kind: FailureKind::Store, .. })
    }
}

/// What decided a run's end, recorded as the run goes: gives both the result's `error` text and
/// its [`RunOutcome`].
#[derive(Debug, Default)]
pub(crate) struct Ending {
    /// The error text, exactly as the run reports it.
    error: Option<String>,
    /// The run's failure (the one its `error` starts with).
    failure: Option<(FailureKind, String)>,
    /// A mode's bound of model calls ended the run.
    mode_bound: bool,
    /// The first store failure.
    store: Option<String>,
    /// Whether `error` says the store failed (a later failure's text replaces it).
    store_in_text: bool,
    /// The end the store never took: the status reached, and the text saying so.
    not_kept: Option<(SessionStatus, String)>,
}

/// The text a store failure adds to a run's error.
const STORE_FAILED: &str = "the session store failed";

impl Ending {
    /// The run failed: this failure is the run's (its text replaces any before it).
    pub(crate) fn failed(&mut self, kind: FailureKind, message: String) {
        self.error = Some(message.clone());
        self.failure = Some((kind, message));
        self.store_in_text = false;
    }

    /// The run failed, unless it already had: the first failure is the run's.
    pub(crate) fn failed_first(&mut self, kind: FailureKind, message: String) {
        if self.error.is_none() {
            self.error = Some(message.clone());
        }
        self.failure.get_or_insert((kind, message));
    }

    /// The mode ended the run in `status`, saying why: by its bound of model calls
    /// (`max_turns`), by failing (`error`), or otherwise (words only).
    pub(crate) fn mode_ended(&mut self, status: SessionStatus, message: String) {
        match status {
            SessionStatus::MaxTurns => {
                self.mode_bound = true;
                self.error.get_or_insert(message);
            }
            SessionStatus::Error => self.failed_first(FailureKind::Mode, message),
            _ => {
                self.error.get_or_insert(message);
            }
        }
    }

    /// The run stopped at the session's `max_turns`: says so, unless something else did.
    pub(crate) fn max_turns(&mut self, message: impl FnOnce() -> String) {
        if self.error.is_none() {
            self.error = Some(message());
        }
    }

    /// The store failed the run: said after any other error it had (a caller must learn that
    /// the end is not durable even when the run also failed for another reason), once.
    pub(crate) fn store_failed(&mut self, error: &dyn std::fmt::Display) {
        let text = format!("{STORE_FAILED}: {error}");
        if !self.store_in_text {
            self.store_in_text = true;
            match &mut self.error {
                None => self.error = Some(text.clone()),
                Some(earlier) => {
                    earlier.push_str("; ");
                    earlier.push_str(&text);
                }
            }
        }
        self.store.get_or_insert(text);
    }

    /// The store never took the run's end (`reached`): `text` says so, after any other error.
    pub(crate) fn end_not_kept(&mut self, reached: SessionStatus, text: String) {
        match &mut self.error {
            Some(earlier) => {
                earlier.push_str("; ");
                earlier.push_str(&text);
            }
            None => self.error = Some(text.clone()),
        }
        self.not_kept = Some((reached, text));
    }

    /// The run's outcome and error text, the run resting in `status`.
    pub(crate) fn take(&mut self, status: SessionStatus) -> (RunOutcome, Option<String>) {
        let error = self.error.take();
        let outcome = if let Some((reached, message)) = self.not_kept.take() {
            RunOutcome::EndNotDurable { reached, message }
        } else if let Some(message) = self.store.take() {
            RunOutcome::Failed { kind: FailureKind::Store, message }
        } else {
            match status {
                SessionStatus::MaxTurns => RunOutcome::MaxTurns {
                    limit: if self.mode_bound {
                        TurnLimit::ModelCalls
                    } else {
                        TurnLimit::MaxTurns
                    },
                },
                SessionStatus::Error | SessionStatus::Idle | SessionStatus::Running => {
                    let (kind, message) = self.failure.take().unwrap_or_else(|| {
                        (FailureKind::Unknown, error.clone().unwrap_or_default())
                    });
                    RunOutcome::Failed { kind, message }
                }
                status => RunOutcome::from_status(status, error.as_deref()),
            }
        };
        (outcome, error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_text_is_the_one_runs_always_wrote() {
        let mut ending = Ending::default();
        ending.failed(FailureKind::Model, "overloaded".into());
        ending.store_failed(&"disk full");
        ending.store_failed(&"disk still full");
        let (outcome, error) = ending.take(SessionStatus::Error);
        assert_eq!(error.as_deref(), Some("overloaded; the session store failed: disk full"));
        assert_eq!(
            outcome,
            RunOutcome::Failed {
                kind: FailureKind::Store,
                message: "the session store failed: disk full".into()
            }
        );
        assert!(!outcome.is_durable());
    }

    #[test]
    fn an_end_not_kept_wins_over_everything() {
        let mut ending = Ending::default();
        ending.store_failed(&"refused");
        ending.end_not_kept(SessionStatus::Completed, "not kept".into());
        let (outcome, error) = ending.take(SessionStatus::Error);
        assert_eq!(error.as_deref(), Some("the session store failed: refused; not kept"));
        assert_eq!(
            outcome,
            RunOutcome::EndNotDurable {
                reached: SessionStatus::Completed,
                message: "not kept".into()
            }
        );
    }

    #[test]
    fn the_first_failure_is_the_runs_and_a_mode_bound_is_told_apart() {
        let mut ending = Ending::default();
        ending.failed_first(FailureKind::Model, "no turn left".into());
        ending.mode_ended(SessionStatus::Error, "every path failed".into());
        let (outcome, error) = ending.take(SessionStatus::Error);
        assert_eq!(error.as_deref(), Some("no turn left"));
        assert!(matches!(outcome, RunOutcome::Failed { kind: FailureKind::Model, .. }));

        let mut ending = Ending::default();
        ending.mode_ended(SessionStatus::MaxTurns, "after 3 model calls".into());
        ending.max_turns(|| "unused".into());
        let (outcome, error) = ending.take(SessionStatus::MaxTurns);
        assert_eq!(error.as_deref(), Some("after 3 model calls"));
        assert_eq!(outcome, RunOutcome::MaxTurns { limit: TurnLimit::ModelCalls });

        let mut ending = Ending::default();
        ending.max_turns(|| "after 2 model calls (max_turns)".into());
        assert_eq!(
            ending.take(SessionStatus::MaxTurns).0,
            RunOutcome::MaxTurns { limit: TurnLimit::MaxTurns }
        );
    }

    #[test]
    fn the_json_names_the_variant_and_its_fields() {
        let outcome =
            RunOutcome::EndNotDurable { reached: SessionStatus::Completed, message: "x".into() };
        let json = serde_json::to_value(&outcome).unwrap_or_default();
        assert_eq!(
            json,
            serde_json::json!({"type": "end_not_durable", "reached": "completed", "message": "x"})
        );
        let suspended = RunOutcome::Suspended { awaiting: Awaiting::ToolResults };
        let json = serde_json::to_value(&suspended).unwrap_or_default();
        assert_eq!(json, serde_json::json!({"type": "suspended", "awaiting": "tool_results"}));
    }
}
