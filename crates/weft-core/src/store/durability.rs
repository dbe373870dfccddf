//! How much of a run the store must have before a client sees it ([`Durability`]).

use serde::{Deserialize, Serialize};

/// How durably a run's progress is stored, per run; named as LangGraph names its runs'
/// `durability`.
///
/// - [`Sync`](Self::Sync): every event is in the store before any client receives it (the
///   stream waits for the group commit that writes it), and every step's state is committed at
///   its boundary. A crash loses nothing a client saw.
/// - [`Async`](Self::Async), the default: events stream as soon as they are numbered and are
///   written in batches behind them; steps are committed at their boundaries. A crash can lose
///   the last moments of events a client saw (their numbers are never reused), and the run goes
///   on from its last committed step.
/// - [`Exit`](Self::Exit): only the run's start and its end are written: its events, steps and
///   checkpoints reach the store together when the run ends or suspends. The cheapest; a crash
///   loses the whole run's progress, and its recovery starts it again from its input.
///
/// Whatever the mode, a run's end is stored before anyone is told of it, and sequence numbers
/// are reserved durably, so they are never reused.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Durability {
    /// Nothing is shown before it is stored.
    Sync,
    /// Shown at once, stored behind (the default).
    #[default]
    Async,
    /// Stored when the run ends or suspends.
    Exit,
}

impl Durability {
    /// Every mode, in the order the documentation lists them.
    pub const ALL: [Self; 3] = [Self::Sync, Self::Async, Self::Exit];

    /// The mode's name on the wire: `sync`, `async`, `exit`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Sync => "sync",
            Self::Async => "async",
            Self::Exit => "exit",
        }
    }
}

impl std::fmt::Display for Durability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for Durability {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|d| d.as_str() == text)
            .ok_or_else(|| format!("unknown durability {text:?}: allowed: sync, async, exit"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_serde_and_from_str() {
        for durability in Durability::ALL {
            let json = serde_json::to_value(durability).unwrap();
            assert_eq!(json, durability.as_str());
            assert_eq!(serde_json::from_value::<Durability>(json).unwrap(), durability);
            assert_eq!(durability.as_str().parse::<Durability>().unwrap(), durability);
        }
        assert_eq!(Durability::default(), Durability::Async);
        let refused = "Sync".parse::<Durability>().unwrap_err();
        assert!(refused.contains("sync, async, exit"), "{refused}");
        assert!(serde_json::from_str::<Durability>("\"later\"").is_err());
    }
}
