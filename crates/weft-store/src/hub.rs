//! Waiting tails: who waits for which session's events, and how they are woken.
//!
//! A waiter registers for its session *before* it looks at the store, then sleeps until the hub
//! says something happened to that session (or its timeout passes), and looks again. So an
//! append that lands after the look always wakes it: the writer (this process), the SQLite
//! poller (another process on the same file) or a Postgres notification (another replica)
//! pokes the hub, which wakes that session's waiters. A poke carries nothing: waiters only
//! trust the store, so a spurious poke costs one look and a missed one cannot happen.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, watch};
use tokio::time::Instant;
use weft_core::store::StoreError;

/// The waiters of one store instance.
#[derive(Default)]
pub(crate) struct Hub {
    sessions: Mutex<HashMap<String, watch::Sender<()>>>,
    /// Signalled when a waiter registers (the SQLite poller sleeps while nobody waits).
    registered: Notify,
}

impl Hub {
    fn map(&self) -> MutexGuard<'_, HashMap<String, watch::Sender<()>>> {
        // The map holds no invariant a panic could break half-way: take it back.
        self.sessions.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Registers interest in `session_id`'s events.
    pub(crate) fn subscribe(self: &Arc<Self>, session_id: &str) -> Subscription {
        let receiver = {
            let mut map = self.map();
            match map.get(session_id) {
                Some(sender) => sender.subscribe(),
                None => {
                    let (sender, receiver) = watch::channel(());
                    map.insert(session_id.to_owned(), sender);
                    receiver
                }
            }
        };
        self.registered.notify_one();
        Subscription {
            hub: Arc::clone(self),
            session_id: session_id.to_owned(),
            receiver: Some(receiver),
        }
    }

    /// Something happened to the session: wakes its waiters.
    pub(crate) fn poke(&self, session_id: &str) {
        if let Some(sender) = self.map().get(session_id) {
            sender.send_modify(|_| {});
        }
    }

    /// Wakes every waiter (a lost notification connection came back, say).
    pub(crate) fn poke_all(&self) {
        for sender in self.map().values() {
            sender.send_modify(|_| {});
        }
    }

    /// The sessions someone waits for.
    pub(crate) fn waited(&self) -> Vec<String> {
        self.map().keys().cloned().collect()
    }

    /// Whether nobody waits.
    pub(crate) fn is_idle(&self) -> bool {
        self.map().is_empty()
    }

    /// Returns when a waiter has registered since the last call (or at once if one did).
    pub(crate) async fn registered(&self) {
        self.registered.notified().await;
    }
}

/// One waiter's registration; dropping it unregisters.
pub(crate) struct Subscription {
    hub: Arc<Hub>,
    session_id: String,
    receiver: Option<watch::Receiver<()>>,
}

impl Subscription {
    /// Returns when the hub reports a change for the session since the last call.
    async fn changed(&mut self) {
        match self.receiver.as_mut() {
            Some(receiver) => {
                if receiver.changed().await.is_err() {
                    // The sender lives in the hub as long as this receiver does: unreachable,
                    // but never spin.
                    std::future::pending::<()>().await;
                }
            }
            None => std::future::pending::<()>().await,
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut map = self.hub.map();
        drop(self.receiver.take());
        if map.get(&self.session_id).is_some_and(|sender| sender.receiver_count() == 0) {
            map.remove(&self.session_id);
        }
    }
}

/// `wait_events` for any backend: `last_seq` reads the session's last stored seq (or fails with
/// [`StoreError::NotFound`]).
pub(crate) async fn wait_for_events<F, Fut>(
    hub: &Arc<Hub>,
    session_id: &str,
    after_seq: u64,
    timeout: Duration,
    last_seq: F,
) -> Result<bool, StoreError>
where
    F: Fn() -> Fut,
    Fut: Future<Output = Result<u64, StoreError>>,
{
    let deadline = Instant::now() + timeout.min(crate::codec::MAX_DURATION);
    let mut subscription = hub.subscribe(session_id);
    loop {
        let last = last_seq().await?;
        if last > after_seq {
            return Ok(true);
        }
        if tokio::time::timeout_at(deadline, subscription.changed()).await.is_err() {
            // One last look: the answer is what the store holds now.
            return Ok(last_seq().await? > after_seq);
        }
    }
}
