//! The sweeper: remote calls past their deadline, and runs whose process died.
//!
//! Deadlines are data: each awaiting call records its own (`CallState::AwaitingResult`), and a
//! suspended session's earliest one is in its head (`next_deadline`). One sweeper task per agent
//! wakes at the earliest deadline among the sessions open in this process (or when a run
//! suspends), and every [`AgentConfig::sweep_interval`](crate::AgentConfig) looks in the store,
//! if there is one, for sessions due anywhere: suspended past a deadline — also one that passed
//! while no process was running — or `running` with nobody holding their lease (the process
//! died). An expired call is answered with an error result through the ordinary `execute` path,
//! so the model sees the timeout and the run goes on as if a client had answered; a dead run is
//! recovered ([`Agent::recover`]). Two processes sweeping the same session race harmlessly:
//! starting a run is a conditional write, so only one of them acts.
//!
//! The sweeper holds the agent weakly: dropping the agent ends it.

use std::sync::{Arc, Weak};
use std::time::Duration;

use weft_core::{CallState, Input, SessionStatus, ToolResultMessage, now_ms};

use crate::context::AgentInner;
use crate::driver::Driver;
use crate::lease::Lease;
use crate::session::SessionHandle;

/// How many due sessions one look at the store handles.
const DUE_PAGE: usize = 64;

/// Starts the agent's sweeper if it is not running yet (needs a Tokio runtime).
pub(crate) fn ensure_sweeper(agent: &Arc<AgentInner>) {
    if agent.sweeper.set(()).is_ok() {
        let wake = Arc::clone(&agent.sweep_now);
        tokio::spawn(sweep(Arc::downgrade(agent), wake));
    }
}

async fn sweep(agent: Weak<AgentInner>, wake: Arc<tokio::sync::Notify>) {
    loop {
        let notified = wake.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let wait = {
            let Some(inner) = agent.upgrade() else { return };
            Driver::new(inner).sweep_once().await
        };
        tokio::select! {
            _ = notified => {}
            _ = tokio::time::sleep(wait) => {}
        }
    }
}

impl Driver {
    /// One sweep; returns how long to sleep before the next.
    async fn sweep_once(&self) -> Duration {
        self.adopt_identity().await;
        let interval = self.config().sweep_interval;
        let now = now_ms();
        let mut next_due: Option<u64> = None;
        for session in self.open_sessions() {
            let deadline = {
                let state = session.lock();
                let idle = state.run.is_none() && state.session.status.is_suspended();
                idle.then(|| state.session.next_deadline()).flatten()
            };
            match deadline {
                Some(deadline) if deadline <= now => expire(self, &session).await,
                Some(deadline) => next_due = Some(next_due.map_or(deadline, |d| d.min(deadline))),
                None => {}
            }
        }
        if let Some(store) = self.store() {
            match store.due_sessions(now, DUE_PAGE).await {
                Ok(ids) => {
                    for id in ids {
                        self.sweep_stored(&id).await;
                    }
                }
                Err(error) => tracing::warn!(%error, "looking for due sessions failed"),
            }
        }
        let until_due = next_due.map_or(interval, |d| Duration::from_millis(d.saturating_sub(now)));
        until_due.min(interval)
    }

    /// A session the store says is due: recovered if its run died, its expired calls answered
    /// if it is suspended.
    async fn sweep_stored(&self, id: &str) {
        let Some(store) = self.store() else { return };
        if self.open_sessions_with_id(id).is_some_and(|s| s.lock().run.is_some()) {
            return; // Running here, alive.
        }
        let stored = match store.load(id).await {
            Ok(Some(stored)) => stored,
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(session_id = %id, %error, "loading a due session failed");
                return;
            }
        };
        match stored.head.status {
            SessionStatus::Running => {
                let lease = Lease::acquire(store, id, self.holder(), self.config().lease_ttl).await;
                if let Ok(Some(lease)) = lease {
                    match self.adopt(stored) {
                        Some(session) => drop(self.recover(&session, lease).await),
                        None => lease.release().await,
                    }
                }
            }
            status if status.is_suspended() => {
                if let Some(session) = self.adopt(stored) {
                    expire(self, &session).await;
                }
            }
            _ => {}
        }
    }
}

/// Answers the session's remote calls past their deadline with error results, resuming the run.
async fn expire(agent: &Driver, session: &SessionHandle) {
    let now = now_ms();
    let (expired, durability): (Vec<ToolResultMessage>, _) = {
        let state = session.lock();
        if !state.session.status.is_suspended() || state.run.is_some() {
            return;
        }
        let Some(turn) = state.session.open_turn() else { return };
        let expired = turn
            .calls
            .iter()
            .filter(|slot| {
                matches!(slot.state, CallState::AwaitingResult { deadline, .. } if deadline <= now)
            })
            .map(|slot| {
                ToolResultMessage::error(
                    &slot.call,
                    format!(
                        "No result arrived for tool call {} ({}) before its deadline",
                        slot.call.id, slot.call.name
                    ),
                )
            })
            .collect();
        // The run goes on as durably as it was stored before it suspended.
        (expired, weft_loop::durability(&state.session.options))
    };
    if expired.is_empty() {
        return;
    }
    // Refused only if the session was resumed or aborted in the meantime (here or in another
    // process): nothing to do then. The run goes on in a task of its own.
    let options = crate::RunOptions::default().durability(durability);
    if let Ok(stream) = agent.execute(session, Input::ToolResults(expired), options).await {
        tokio::spawn(stream.result());
    }
}
