//! Run ownership across processes: the process running a session's run holds its lease in the
//! store and renews it while the run goes on. A process that dies stops renewing; once the lease
//! expires another process may take the run over (recovery). A run whose lease was taken by
//! someone else (this process stalled past the expiry) is aborted: two processes never drive one
//! run.

use std::sync::Arc;
use std::time::Duration;

use weft_core::{SessionStore, StoreError};
use weft_llm::CancellationToken;

/// A held lease on one session's run.
pub(crate) struct Lease {
    store: Arc<dyn SessionStore>,
    session_id: String,
    holder: Arc<str>,
    ttl: Duration,
    /// Stops the heartbeat.
    stop: CancellationToken,
}

impl Lease {
    /// Takes the lease for one run of this process (`process` names the process), or `None`
    /// when anyone else — another process, or another run of this one — has an unexpired one.
    /// Each acquisition is a holder of its own: a run never takes over or gives back a lease
    /// another run of the same process holds.
    pub(crate) async fn acquire(
        store: &Arc<dyn SessionStore>,
        session_id: &str,
        process: &str,
        ttl: Duration,
    ) -> Result<Option<Lease>, StoreError> {
        let holder: Arc<str> = Arc::from(format!("{process}/{}", uuid::Uuid::new_v4()));
        if !store.acquire_lease(session_id, &holder, ttl).await? {
            return Ok(None);
        }
        Ok(Some(Lease {
            store: Arc::clone(store),
            session_id: session_id.to_owned(),
            holder,
            ttl,
            stop: CancellationToken::new(),
        }))
    }

    /// Renews the lease every third of its ttl until released; cancels `run` if the lease is
    /// lost (taken over after it expired, or the store unreachable until it did).
    pub(crate) fn keep(&self, run: CancellationToken) {
        let (store, id, holder, ttl, stop) = (
            Arc::clone(&self.store),
            self.session_id.clone(),
            Arc::clone(&self.holder),
            self.ttl,
            self.stop.clone(),
        );
        tokio::spawn(async move {
            let every = ttl / 3;
            let mut unreachable_since: Option<tokio::time::Instant> = None;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                }
                match store.renew_lease(&id, &holder, ttl).await {
                    Ok(true) => unreachable_since = None,
                    Ok(false) => {
                        tracing::error!(session_id = %id, "the run's lease was taken over: aborting it here");
                        run.cancel();
                        return;
                    }
                    Err(error) => {
                        let since =
                            *unreachable_since.get_or_insert_with(tokio::time::Instant::now);
                        tracing::warn!(session_id = %id, %error, "renewing the run's lease failed");
                        if since.elapsed() >= ttl {
                            run.cancel();
                            return;
                        }
                    }
                }
            }
        });
    }

    /// Looks every `every` for an abort of run `run_id` requested by another process (a
    /// checkpoint in [`ABORT_NAMESPACE`](crate::agent::ABORT_NAMESPACE) named by the run id) and
    /// cancels `run` when there is one; stops when the lease is released or the run cancelled.
    /// A zero `every` looks never.
    pub(crate) fn watch_abort(&self, run_id: &str, every: Duration, run: CancellationToken) {
        if every.is_zero() {
            return;
        }
        let (store, id, run_id, stop) = (
            Arc::clone(&self.store),
            self.session_id.clone(),
            run_id.to_owned(),
            self.stop.clone(),
        );
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = run.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                }
                let namespace = crate::agent::ABORT_NAMESPACE;
                match store.get_checkpoint(&id, namespace, Some(&run_id)).await {
                    Ok(Some(_)) => {
                        tracing::info!(session_id = %id, run_id = %run_id, "abort requested by another process");
                        run.cancel();
                        return;
                    }
                    Ok(None) => {}
                    Err(error) => {
                        tracing::warn!(session_id = %id, %error, "looking for an abort request failed");
                    }
                }
            }
        });
    }

    /// Gives the lease up (the run ended, its state is saved).
    pub(crate) async fn release(self) {
        self.stop.cancel();
        if let Err(error) = self.store.release_lease(&self.session_id, &self.holder).await {
            // It expires by itself; another process may take it then.
            tracing::warn!(session_id = %self.session_id, %error, "releasing the run's lease failed");
        }
    }
}
