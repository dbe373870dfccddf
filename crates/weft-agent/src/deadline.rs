//! Remote calls' deadlines: a suspended run whose remote calls are not answered in time is
//! resumed with error results for them, and goes on.
//!
//! When a run suspends with calls awaiting remote results, a watchdog task sleeps until the
//! earliest deadline. It holds the agent and the session weakly (a dropped session or agent ends
//! it), and on waking answers every expired call with an error result through the ordinary
//! `execute` path, so the model sees the timeout and the run continues exactly as if a client
//! had sent the results. If the client answered first, there is nothing to expire and the
//! watchdog ends; a later suspension starts its own.

use std::sync::{Arc, Weak};
use std::time::Duration;

use weft_core::{CallState, Input, ToolResultMessage, now_ms};

use crate::agent::{Agent, AgentInner, SessionHandle, Shared};

/// Starts a watchdog for the session's awaiting remote calls, if it has any.
pub(crate) fn watch(agent: &Arc<AgentInner>, session: &SessionHandle) {
    let Some(deadline) = earliest_deadline(session) else { return };
    let agent = Arc::downgrade(agent);
    let shared = Arc::downgrade(&session.shared);
    tokio::spawn(async move {
        let wait = deadline.saturating_sub(now_ms());
        tokio::time::sleep(Duration::from_millis(wait)).await;
        expire(agent, shared).await;
    });
}

fn earliest_deadline(session: &SessionHandle) -> Option<u64> {
    let state = session.lock();
    let turn = state.session.open_turn()?;
    turn.calls
        .iter()
        .filter_map(|slot| match slot.state {
            CallState::AwaitingResult { deadline, .. } => Some(deadline),
            _ => None,
        })
        .min()
}

async fn expire(agent: Weak<AgentInner>, shared: Weak<Shared>) {
    let (Some(agent), Some(shared)) = (agent.upgrade(), shared.upgrade()) else { return };
    let session = SessionHandle { shared };
    let now = now_ms();
    let expired: Vec<ToolResultMessage> = {
        let state = session.lock();
        if !state.session.status.is_suspended() {
            return;
        }
        let Some(turn) = state.session.open_turn() else { return };
        turn.calls
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
            .collect()
    };
    if expired.is_empty() {
        return;
    }
    let agent = Agent::from_inner(agent);
    // Refused only if the session was resumed or aborted in the meantime: nothing to do then.
    if let Ok(stream) = agent.execute(&session, Input::ToolResults(expired)).await {
        stream.result().await;
    }
}
