//! What a run stores at its boundaries: the session and its checkpoints after each step (none
//! under `exit` until the end), the end itself, and the state events a node run ends with.

use tokio::time::Instant;
use weft_core::{AgentEvent, Durability, now_ms};
use weft_loop::Machine;

use super::Run;

impl Run {
    /// Saves what the last step changed (a boundary: a model call or a batch of tools ended).
    /// A store that refuses or fails stops the run: it is aborted, and the error reported.
    pub(super) async fn checkpoint(&mut self) {
        let mut failure = if self.durability == Durability::Exit {
            // Saved with the run's end (or suspension), checkpoints and all.
            self.emitter.failure().map(ToString::to_string)
        } else {
            match self.session.save().await {
                Err(error) => Some(error.to_string()),
                Ok(()) => self.emitter.failure().map(ToString::to_string),
            }
        };
        if self.durability != Durability::Exit
            && let Err(error) = self.store_checkpoints().await
        {
            failure.get_or_insert(error.to_string());
        }
        if let Some(error) = failure {
            tracing::error!(session_id = %self.session_id, %error, "the session store failed: the run stops");
            self.ending.store_failed(&error);
            self.cancel.cancel();
        }
    }

    /// Stores the checkpoints taken since the last boundary (the session, with the run's state,
    /// is saved: they may be); without a store they are dropped.
    pub(super) async fn store_checkpoints(&mut self) -> Result<(), weft_core::StoreError> {
        let checkpoints = std::mem::take(&mut self.checkpoints);
        let Some(store) = self.session.shared.store.clone() else { return Ok(()) };
        let mut failure = Ok(());
        for checkpoint in checkpoints {
            if let Err(error) = store.put_checkpoint(checkpoint).await {
                failure = failure.and(Err(error));
            }
        }
        failure
    }

    /// Saves the run's resting state, trying again while the store fails transiently until
    /// `until`, then the checkpoints not stored yet (under `exit`, all of the run's).
    pub(super) async fn save_end(&mut self, until: Instant) -> Result<(), weft_core::StoreError> {
        self.session.save_retrying(until).await?;
        if let Err(error) = self.store_checkpoints().await {
            // The run's state is stored with the session: only the checkpoint history misses them.
            tracing::warn!(session_id = %self.session_id, %error, "storing the run's checkpoints failed");
        }
        Ok(())
    }

    /// After a node run: `values` (the run's state), `updates` (what the node changed: the
    /// state's members that differ from `before`), and a checkpoint of it, persisted through the
    /// store with the session at the next boundary.
    pub(super) fn after_node(&mut self, name: &str, node_id: &str, before: serde_json::Value) {
        let (state, step) = {
            let s = &self.session.lock().session;
            (Machine::mode_state(s), s.step_count)
        };
        let mut changed = serde_json::Map::new();
        if let serde_json::Value::Object(now) = &state {
            for (key, value) in now {
                if before.get(key) != Some(value) {
                    changed.insert(key.clone(), value.clone());
                }
            }
        }
        self.last_state = Some(state.clone());
        self.emitter.emit(AgentEvent::StateSnapshot { state: state.clone() });
        self.emitter.emit(AgentEvent::StateUpdate {
            name: name.to_string(),
            state: serde_json::Value::Object(changed),
        });
        let checkpoint = weft_core::Checkpoint {
            session_id: self.session_id.clone(),
            namespace: self.machine.mode().name().to_string(),
            id: node_id.to_string(),
            parent_id: self.last_checkpoint.replace(node_id.to_string()),
            at: now_ms(),
            value: state.clone(),
        };
        self.emitter.emit(AgentEvent::Checkpoint(Box::new(weft_core::CheckpointTaken {
            checkpoint_id: checkpoint.id.clone(),
            thread_id: checkpoint.session_id.clone(),
            checkpoint_ns: checkpoint.namespace.clone(),
            step,
            timestamp: checkpoint.at,
            state,
        })));
        self.checkpoints.push(checkpoint);
    }
}
