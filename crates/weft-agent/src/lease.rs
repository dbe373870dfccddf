//! Run ownership across processes: the process running a session's run holds its lease in the
//! store and renews it while the run goes on. A process that dies stops renewing; once the lease
//! expires another process may take the run over (recovery). A run whose lease was taken by
//! someone else (this process stalled past the expiry) is aborted: two processes never drive one
//! run.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use tokio::time::Instant;
use weft_core::{SessionStore, StoreError};
use weft_llm::CancellationToken;

/// How many lease renewals a keeper has in flight at once.
const RENEW_AT_ONCE: usize = 16;
/// The longest pause between tries to give a lease back.
const RETRY_MAX: Duration = Duration::from_secs(2);

/// A held lease on one session's run.
///
/// Renewal and the watch for abort requests of other processes are not a task and a timer per
/// run: every lease of this process on one store is kept by that store's one [`Keeper`], which
/// renews the leases due and polls the abort requests of all its runs with one query
/// ([`SessionStore::find_checkpoints`]) per interval.
pub(crate) struct Lease {
    store: Arc<dyn SessionStore>,
    session_id: String,
    holder: Arc<str>,
    ttl: Duration,
    /// Its entry in the store's keeper, once kept.
    kept: std::sync::OnceLock<(Arc<Keeper>, u64)>,
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
            kept: std::sync::OnceLock::new(),
        }))
    }

    /// A lease this process holds already under `holder` (one it took over from a dead holder
    /// of its own identity).
    pub(crate) fn held(
        store: &Arc<dyn SessionStore>,
        session_id: &str,
        holder: Arc<str>,
        ttl: Duration,
    ) -> Lease {
        Lease {
            store: Arc::clone(store),
            session_id: session_id.to_owned(),
            holder,
            ttl,
            kept: std::sync::OnceLock::new(),
        }
    }

    /// Who holds it: this acquisition's own name, the fencing token of the run's commits.
    pub(crate) fn holder(&self) -> &Arc<str> {
        &self.holder
    }

    /// Renews the lease every third of its ttl until released; cancels `run` if the lease is
    /// lost (taken over after it expired, or the store unreachable until it did).
    pub(crate) fn keep(&self, run: CancellationToken) {
        if self.kept.get().is_some() {
            return;
        }
        let entry = Entry {
            session_id: self.session_id.clone(),
            holder: Arc::clone(&self.holder),
            ttl: self.ttl,
            run,
            renew_at: Instant::now() + self.ttl / 3,
            unreachable_since: None,
            abort: None,
        };
        let _ = self.kept.set(Keeper::add(&self.store, entry));
    }

    /// Looks every `every` for an abort of run `run_id` requested by another process (a
    /// checkpoint in [`ABORT_NAMESPACE`](crate::options::ABORT_NAMESPACE) named by the run id) and
    /// cancels the run when there is one; stops when the lease is released or the run cancelled.
    /// A zero `every` looks never. Needs [`keep`](Self::keep) first (it is the kept run that is
    /// cancelled).
    pub(crate) fn watch_abort(&self, run_id: &str, every: Duration, run: CancellationToken) {
        if every.is_zero() {
            return;
        }
        let Some((keeper, key)) = self.kept.get() else { return };
        let mut entries = keeper.lock();
        if let Some(entry) = entries.runs.get_mut(key) {
            entry.run = run;
            entry.abort =
                Some(AbortWatch { run_id: run_id.to_owned(), every, next: Instant::now() + every });
        }
        drop(entries);
        keeper.wake.notify_one();
    }

    /// Gives the lease up (the run ended, its state is saved). A store that fails transiently
    /// is asked again in the background until the lease would have expired by itself: until it
    /// is given back, nobody — not even this process's next run of the session — may take it.
    pub(crate) async fn release(mut self) {
        self.unkeep();
        let error = match self.store.release_lease(&self.session_id, &self.holder).await {
            Ok(()) => return,
            Err(error) => error,
        };
        tracing::warn!(session_id = %self.session_id, %error, "releasing the run's lease failed");
        if !error.is_transient() {
            return;
        }
        let (store, session_id, holder) =
            (Arc::clone(&self.store), self.session_id.clone(), Arc::clone(&self.holder));
        let until = Instant::now() + self.ttl;
        tokio::spawn(async move {
            let mut pause = Duration::from_millis(100);
            while Instant::now() + pause < until {
                tokio::time::sleep(pause).await;
                // The holder is this run's own: a late release never takes another's lease.
                match store.release_lease(&session_id, &holder).await {
                    Err(error) if error.is_transient() => pause = (pause * 2).min(RETRY_MAX),
                    _ => return,
                }
            }
        });
    }

    fn unkeep(&mut self) {
        if let Some((keeper, key)) = self.kept.take() {
            keeper.lock().runs.remove(&key);
        }
    }
}

impl Drop for Lease {
    /// A lease dropped without [`release`](Lease::release) is no longer renewed: it expires.
    fn drop(&mut self) {
        self.unkeep();
    }
}

/// A kept lease.
struct Entry {
    session_id: String,
    holder: Arc<str>,
    ttl: Duration,
    /// Cancelled when the lease is lost or an abort is requested.
    run: CancellationToken,
    /// When the lease is renewed next.
    renew_at: Instant,
    /// Since when renewing has failed.
    unreachable_since: Option<Instant>,
    abort: Option<AbortWatch>,
}

/// A run watched for abort requests of other processes.
struct AbortWatch {
    run_id: String,
    every: Duration,
    next: Instant,
}

#[derive(Default)]
struct Entries {
    next_key: u64,
    runs: HashMap<u64, Entry>,
}

/// The keeper of this process's leases on one store: one task, while there are leases.
struct Keeper {
    store: Arc<dyn SessionStore>,
    entries: Mutex<Entries>,
    /// Woken when a watch with an earlier deadline is added.
    wake: tokio::sync::Notify,
    /// Its task: a keeper whose task has ended without leaving the registry (its runtime was
    /// dropped, with every task on it) is replaced, or its leases would never be renewed.
    task: std::sync::OnceLock<tokio::task::JoinHandle<()>>,
}

impl Keeper {
    fn is_alive(&self) -> bool {
        self.task.get().is_some_and(|task| !task.is_finished())
    }
}

/// The keepers, by store (the address of the store; a keeper holds its store, so the address
/// is not reused while it is here).
static KEEPERS: LazyLock<Mutex<HashMap<usize, Arc<Keeper>>>> = LazyLock::new(Default::default);

fn keepers() -> MutexGuard<'static, HashMap<usize, Arc<Keeper>>> {
    KEEPERS.lock().unwrap_or_else(|e| e.into_inner())
}

fn store_key(store: &Arc<dyn SessionStore>) -> usize {
    Arc::as_ptr(store).cast::<()>() as usize
}

impl Keeper {
    /// Adds `entry` to the keeper of `store` (started if there is none): the keeper and the
    /// entry's key.
    fn add(store: &Arc<dyn SessionStore>, entry: Entry) -> (Arc<Keeper>, u64) {
        // Under the registry's lock: the keeper cannot leave it before the entry is in.
        let mut keepers = keepers();
        // Keepers whose runtime was dropped hold their store (and every session it keeps) for
        // as long as they are here: they go as soon as another lease is kept.
        keepers.retain(|_, keeper| keeper.is_alive());
        let key = store_key(store);
        let keeper = match keepers.get(&key) {
            Some(keeper) if keeper.is_alive() => Arc::clone(keeper),
            _ => {
                let keeper = Arc::new(Keeper {
                    store: Arc::clone(store),
                    entries: Mutex::new(Entries::default()),
                    wake: tokio::sync::Notify::new(),
                    task: std::sync::OnceLock::new(),
                });
                let task = tokio::spawn(Arc::clone(&keeper).run());
                let _ = keeper.task.set(task);
                keepers.insert(key, Arc::clone(&keeper));
                keeper
            }
        };
        let mut entries = keeper.lock();
        entries.next_key += 1;
        let key = entries.next_key;
        entries.runs.insert(key, entry);
        drop(entries);
        keeper.wake.notify_one();
        (keeper, key)
    }

    fn lock(&self) -> MutexGuard<'_, Entries> {
        // Updates are short and leave the entries consistent at every step.
        self.entries.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Renews and polls until no lease is left, then leaves the registry.
    async fn run(self: Arc<Self>) {
        loop {
            let next = {
                // Under the registry's lock: a lease added meanwhile finds this keeper there.
                let mut keepers = keepers();
                let entries = self.lock();
                if entries.runs.is_empty() {
                    let key = store_key(&self.store);
                    if keepers.get(&key).is_some_and(|keeper| Arc::ptr_eq(keeper, &self)) {
                        keepers.remove(&key);
                    }
                    return;
                }
                // A cancelled run's abort watch is not polled (`poll_aborts`): its deadline,
                // passed, would wake this loop at once, again and again.
                entries
                    .runs
                    .values()
                    .flat_map(|e| {
                        let watch = e.abort.as_ref().filter(|_| !e.run.is_cancelled());
                        [Some(e.renew_at), watch.map(|a| a.next)]
                    })
                    .flatten()
                    .min()
            };
            if let Some(next) = next {
                tokio::select! {
                    () = tokio::time::sleep_until(next) => {}
                    () = self.wake.notified() => continue,
                }
            }
            self.poll_aborts().await;
            self.renew().await;
        }
    }

    /// One query for every run whose abort watch is due.
    async fn poll_aborts(&self) {
        let now = Instant::now();
        let due: Vec<(String, String)> = {
            let mut entries = self.lock();
            entries
                .runs
                .values_mut()
                .filter(|e| !e.run.is_cancelled())
                .filter_map(|e| {
                    let watch = e.abort.as_mut().filter(|a| a.next <= now)?;
                    watch.next = now + watch.every;
                    Some((e.session_id.clone(), watch.run_id.clone()))
                })
                .collect()
        };
        if due.is_empty() {
            return;
        }
        let namespace = crate::options::ABORT_NAMESPACE;
        match self.store.find_checkpoints(namespace, &due).await {
            Ok(found) if !found.is_empty() => {
                let mut entries = self.lock();
                for entry in entries.runs.values_mut() {
                    let asked = entry.abort.as_ref().is_some_and(|a| {
                        found.iter().any(|(s, r)| *s == entry.session_id && *r == a.run_id)
                    });
                    if asked {
                        tracing::info!(session_id = %entry.session_id, "abort requested by another process");
                        entry.abort = None;
                        entry.run.cancel();
                    }
                }
            }
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(%error, runs = due.len(), "looking for abort requests failed");
            }
        }
    }

    /// Renews the leases due, a few at a time; cancels the runs whose lease is lost.
    async fn renew(&self) {
        let now = Instant::now();
        let due: Vec<(u64, String, Arc<str>, Duration)> = {
            let mut entries = self.lock();
            entries
                .runs
                .iter_mut()
                .filter(|(_, e)| e.renew_at <= now)
                .map(|(key, e)| {
                    e.renew_at = now + e.ttl / 3;
                    (*key, e.session_id.clone(), Arc::clone(&e.holder), e.ttl)
                })
                .collect()
        };
        if due.is_empty() {
            return;
        }
        let store = &self.store;
        let results: Vec<(u64, Result<bool, StoreError>)> = futures::stream::iter(due)
            .map(|(key, id, holder, ttl)| async move {
                (key, store.renew_lease(&id, &holder, ttl).await)
            })
            .buffer_unordered(RENEW_AT_ONCE)
            .collect()
            .await;
        let mut entries = self.lock();
        for (key, result) in results {
            // Released meanwhile: nothing to do.
            let Some(entry) = entries.runs.get_mut(&key) else { continue };
            match result {
                Ok(true) => entry.unreachable_since = None,
                Ok(false) => {
                    tracing::error!(session_id = %entry.session_id, "the run's lease was taken over: aborting it here");
                    entry.run.cancel();
                    entries.runs.remove(&key);
                }
                Err(error) => {
                    let since = *entry.unreachable_since.get_or_insert(now);
                    tracing::warn!(session_id = %entry.session_id, %error, "renewing the run's lease failed");
                    if since.elapsed() >= entry.ttl {
                        entry.run.cancel();
                        entries.runs.remove(&key);
                    }
                }
            }
        }
    }
}
