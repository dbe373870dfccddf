//! What a session keeps in its `options` that its runs obey, typed: its own turn limit, its
//! reasoning mode, where its current (or last) run's events start, and how durably that run is
//! stored. Read and written here
//! only; the JSON keys are the stored form.

use serde_json::{Map, Value};
use weft_core::Durability;

use crate::{Mode, Modes, OPTION_MODE};

/// The key of a session's `options` that holds its own limit of model calls per run.
pub const OPTION_MAX_TURNS: &str = "maxTurns";
/// The key of a session's `options` that holds the seq after which the events of its current
/// (or last) execution start: the last event before that execution's `session_start`. Set when
/// an execution starts and committed with its start, so a reader attaching to the live or last
/// run subscribes from there without scanning the log.
pub const OPTION_RUN_AFTER_SEQ: &str = "runAfterSeq";
/// The key of a session's `options` that holds the [`Durability`] of its current (or last)
/// execution, when it is not the default (`async`): set when an execution starts and committed
/// with its start, so a run recovered in another process keeps its durability.
pub const OPTION_DURABILITY: &str = "durability";

/// A session's settings, as its `options` hold them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionSettings {
    /// Its own limit of model calls per run ([`OPTION_MAX_TURNS`]); `None`: the agent's.
    pub max_turns: Option<u32>,
    /// The reasoning mode of its runs ([`OPTION_MODE`]); react when it names none.
    pub mode: Mode,
    /// The seq after which its current or last execution's events start
    /// ([`OPTION_RUN_AFTER_SEQ`]); `None` for a session that has not recorded it.
    pub run_after_seq: Option<u64>,
    /// How durably its current or last execution is stored ([`OPTION_DURABILITY`]).
    pub durability: Durability,
}

impl SessionSettings {
    /// The settings `options` hold, a mode read by `modes` (one they cannot read: react).
    pub fn read(options: &Value, modes: &Modes) -> Self {
        Self {
            max_turns: max_turns(options),
            mode: modes.of_options(options),
            run_after_seq: run_after_seq(options),
            durability: durability(options),
        }
    }

    /// Writes the settings that are set into `options` (made an object if one is written):
    /// the mode unless it is react, the turn limit (at least 1), where the run's events start.
    /// Settings that are not set are left as `options` has them.
    pub fn write(&self, options: &mut Value) {
        if !self.mode.is_react()
            && let Ok(mode) = serde_json::to_value(&self.mode)
        {
            set(options, OPTION_MODE, mode);
        }
        if let Some(max_turns) = self.max_turns {
            set(options, OPTION_MAX_TURNS, max_turns.max(1).into());
        }
        if let Some(seq) = self.run_after_seq {
            set(options, OPTION_RUN_AFTER_SEQ, seq.into());
        }
        if self.durability != Durability::default() {
            Self::record_durability(options, self.durability);
        }
    }

    /// Records in `options` that the execution starting now has its events after `seq`.
    pub fn record_run_after_seq(options: &mut Value, seq: u64) {
        set(options, OPTION_RUN_AFTER_SEQ, seq.into());
    }

    /// Records in `options` the durability of the execution starting now (the default is
    /// recorded by leaving the key out, so sessions that never ask keep their stored form).
    pub fn record_durability(options: &mut Value, durability: Durability) {
        if durability == Durability::default() {
            if let Value::Object(map) = options {
                map.remove(OPTION_DURABILITY);
            }
        } else {
            set(options, OPTION_DURABILITY, durability.as_str().into());
        }
    }
}

/// The durability of a session's current or last execution ([`OPTION_DURABILITY`]): the
/// default when it records none (or one this version does not know).
pub fn durability(options: &Value) -> Durability {
    options
        .get(OPTION_DURABILITY)
        .and_then(Value::as_str)
        .and_then(|name| name.parse().ok())
        .unwrap_or_default()
}

/// A session's own limit of model calls per run ([`OPTION_MAX_TURNS`]), if it has one.
pub fn max_turns(options: &Value) -> Option<u32> {
    options.get(OPTION_MAX_TURNS)?.as_u64().map(|n| u32::try_from(n).unwrap_or(u32::MAX))
}

/// The seq after which the current or last execution's events start
/// ([`OPTION_RUN_AFTER_SEQ`]), if the session recorded it.
pub fn run_after_seq(options: &Value) -> Option<u64> {
    options.get(OPTION_RUN_AFTER_SEQ)?.as_u64()
}

/// Sets `key` in `options` (made an object if it is not one).
fn set(options: &mut Value, key: &str, value: Value) {
    if !options.is_object() {
        *options = Value::Object(Map::new());
    }
    if let Value::Object(map) = options {
        map.insert(key.to_string(), value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TotOptions;

    #[test]
    fn settings_round_trip_through_options() {
        let settings = SessionSettings {
            max_turns: Some(0),
            mode: Mode::Tot(TotOptions { breadth: 2, ..TotOptions::default() }),
            run_after_seq: Some(41),
            durability: Durability::Sync,
        };
        let mut options = Value::Null;
        settings.write(&mut options);
        assert_eq!(options["maxTurns"], 1, "a limit is at least one call");
        assert_eq!(options["runAfterSeq"], 41);
        assert_eq!(options["mode"]["type"], "tot");
        assert_eq!(options["durability"], "sync");
        let read = SessionSettings::read(&options, &Modes::builtin());
        assert_eq!(read, SessionSettings { max_turns: Some(1), ..settings });
        // Nothing set, nothing written: the options stay as they were.
        let mut untouched = Value::Null;
        SessionSettings::default().write(&mut untouched);
        assert_eq!(untouched, Value::Null);
        assert_eq!(
            SessionSettings::read(&untouched, &Modes::builtin()),
            SessionSettings::default()
        );
        SessionSettings::record_run_after_seq(&mut untouched, 7);
        assert_eq!(run_after_seq(&untouched), Some(7));
        // The default durability is the key's absence; an unknown one reads as the default.
        SessionSettings::record_durability(&mut untouched, Durability::Exit);
        assert_eq!(durability(&untouched), Durability::Exit);
        SessionSettings::record_durability(&mut untouched, Durability::Async);
        assert_eq!(untouched, serde_json::json!({"runAfterSeq": 7}));
        assert_eq!(durability(&serde_json::json!({"durability": "later"})), Durability::Async);
    }
}
