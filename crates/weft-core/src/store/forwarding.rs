//! [`ForwardingStore`]: a [`SessionStore`] that wraps another one and passes on every call it
//! does not override, and the blanket impl that makes every such wrapper a `SessionStore`.

use std::sync::Arc;
use std::time::Duration;

use super::{Checkpoint, Commit, EventRecord, OwnerScope, SessionStore, StoreFuture};
use crate::history::History;
use crate::message::TimestampMs;
use crate::state::{SessionHead, StoredSession};

/// A [`SessionStore`] that wraps another one and passes on every call it does not override:
/// every type that implements `ForwardingStore` is a `SessionStore`. A wrapper (one that counts
/// calls, injects failures, times operations) says where its inner store is and overrides only
/// the methods it changes.
///
/// The methods are [`SessionStore`]'s, with the same meaning; each one's default calls the same
/// method of [`inner`](Self::inner) (the defaulted ones too: a wrapper of a store that answers
/// [`find_checkpoints`](SessionStore::find_checkpoints) in one query keeps that query).
///
/// ```
/// use std::sync::Arc;
/// use std::sync::atomic::{AtomicUsize, Ordering};
///
/// use weft_core::{Commit, ForwardingStore, SessionStore, StoreFuture};
///
/// /// Counts commits; everything else goes straight to the wrapped store.
/// struct Counting {
///     inner: Arc<dyn SessionStore>,
///     commits: AtomicUsize,
/// }
///
/// impl ForwardingStore for Counting {
///     fn inner(&self) -> &dyn SessionStore {
///         &*self.inner
///     }
///
///     fn commit<'a>(&'a self, commit: Commit) -> StoreFuture<'a, ()> {
///         self.commits.fetch_add(1, Ordering::Relaxed);
///         self.inner.commit(commit)
///     }
/// }
///
/// fn counting(inner: Arc<dyn SessionStore>) -> Arc<dyn SessionStore> {
///     Arc::new(Counting { inner, commits: AtomicUsize::new(0) })
/// }
/// ```
///
/// A wrapper should not import both this trait and [`SessionStore`] where it calls the store's
/// methods on itself: both name the same methods, so such a call is ambiguous (call it on the
/// wrapper as a `dyn SessionStore`, or name the trait).
pub trait ForwardingStore: Send + Sync + 'static {
    /// The store calls are passed on to.
    fn inner(&self) -> &dyn SessionStore;

    /// See [`SessionStore::kind`].
    fn kind(&self) -> &'static str {
        self.inner().kind()
    }

    /// See [`SessionStore::create`].
    fn create<'a>(&'a self, head: SessionHead, messages: History) -> StoreFuture<'a, ()> {
        self.inner().create(head, messages)
    }

    /// See [`SessionStore::load`].
    fn load<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<StoredSession>> {
        self.inner().load(session_id)
    }

    /// See [`SessionStore::head`].
    fn head<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<SessionHead>> {
        self.inner().head(session_id)
    }

    /// See [`SessionStore::commit`].
    fn commit<'a>(&'a self, commit: Commit) -> StoreFuture<'a, ()> {
        self.inner().commit(commit)
    }

    /// See [`SessionStore::reserve_seqs`].
    fn reserve_seqs<'a>(&'a self, session_id: &'a str, count: u64) -> StoreFuture<'a, u64> {
        self.inner().reserve_seqs(session_id, count)
    }

    /// See [`SessionStore::append_events`].
    fn append_events<'a>(
        &'a self,
        session_id: &'a str,
        events: Vec<Arc<EventRecord>>,
        lease: Option<&'a str>,
    ) -> StoreFuture<'a, ()> {
        self.inner().append_events(session_id, events, lease)
    }

    /// See [`SessionStore::read_events`].
    fn read_events<'a>(
        &'a self,
        session_id: &'a str,
        after_seq: u64,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Arc<EventRecord>>> {
        self.inner().read_events(session_id, after_seq, limit)
    }

    /// See [`SessionStore::wait_events`].
    fn wait_events<'a>(
        &'a self,
        session_id: &'a str,
        after_seq: u64,
        timeout: Duration,
    ) -> StoreFuture<'a, bool> {
        self.inner().wait_events(session_id, after_seq, timeout)
    }

    /// See [`SessionStore::put_checkpoint`].
    fn put_checkpoint<'a>(&'a self, checkpoint: Checkpoint) -> StoreFuture<'a, ()> {
        self.inner().put_checkpoint(checkpoint)
    }

    /// See [`SessionStore::get_checkpoint`].
    fn get_checkpoint<'a>(
        &'a self,
        session_id: &'a str,
        namespace: &'a str,
        id: Option<&'a str>,
    ) -> StoreFuture<'a, Option<Checkpoint>> {
        self.inner().get_checkpoint(session_id, namespace, id)
    }

    /// See [`SessionStore::find_checkpoints`].
    fn find_checkpoints<'a>(
        &'a self,
        namespace: &'a str,
        keys: &'a [(String, String)],
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        self.inner().find_checkpoints(namespace, keys)
    }

    /// See [`SessionStore::list_checkpoints`].
    fn list_checkpoints<'a>(
        &'a self,
        session_id: &'a str,
        namespace: &'a str,
    ) -> StoreFuture<'a, Vec<Checkpoint>> {
        self.inner().list_checkpoints(session_id, namespace)
    }

    /// See [`SessionStore::list_sessions`].
    fn list_sessions<'a>(
        &'a self,
        scope: OwnerScope<'a>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<SessionHead>> {
        self.inner().list_sessions(scope, limit)
    }

    /// See [`SessionStore::delete_session`].
    fn delete_session<'a>(
        &'a self,
        session_id: &'a str,
        scope: OwnerScope<'a>,
    ) -> StoreFuture<'a, bool> {
        self.inner().delete_session(session_id, scope)
    }

    /// See [`SessionStore::acquire_lease`].
    fn acquire_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        self.inner().acquire_lease(session_id, holder, ttl)
    }

    /// See [`SessionStore::renew_lease`].
    fn renew_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        self.inner().renew_lease(session_id, holder, ttl)
    }

    /// See [`SessionStore::release_lease`].
    fn release_lease<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, ()> {
        self.inner().release_lease(session_id, holder)
    }

    /// See [`SessionStore::take_over_process_leases`].
    fn take_over_process_leases<'a>(
        &'a self,
        process: &'a str,
        heir: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Vec<String>> {
        self.inner().take_over_process_leases(process, heir, ttl)
    }

    /// See [`SessionStore::due_sessions`].
    fn due_sessions<'a>(&'a self, now: TimestampMs, limit: usize) -> StoreFuture<'a, Vec<String>> {
        self.inner().due_sessions(now, limit)
    }

    /// See [`SessionStore::probe_write`].
    fn probe_write(&self) -> StoreFuture<'_, ()> {
        self.inner().probe_write()
    }
}

impl<T: ForwardingStore> SessionStore for T {
    fn kind(&self) -> &'static str {
        ForwardingStore::kind(self)
    }

    fn create<'a>(&'a self, head: SessionHead, messages: History) -> StoreFuture<'a, ()> {
        ForwardingStore::create(self, head, messages)
    }

    fn load<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<StoredSession>> {
        ForwardingStore::load(self, session_id)
    }

    fn head<'a>(&'a self, session_id: &'a str) -> StoreFuture<'a, Option<SessionHead>> {
        ForwardingStore::head(self, session_id)
    }

    fn commit<'a>(&'a self, commit: Commit) -> StoreFuture<'a, ()> {
        ForwardingStore::commit(self, commit)
    }

    fn reserve_seqs<'a>(&'a self, session_id: &'a str, count: u64) -> StoreFuture<'a, u64> {
        ForwardingStore::reserve_seqs(self, session_id, count)
    }

    fn append_events<'a>(
        &'a self,
        session_id: &'a str,
        events: Vec<Arc<EventRecord>>,
        lease: Option<&'a str>,
    ) -> StoreFuture<'a, ()> {
        ForwardingStore::append_events(self, session_id, events, lease)
    }

    fn read_events<'a>(
        &'a self,
        session_id: &'a str,
        after_seq: u64,
        limit: usize,
    ) -> StoreFuture<'a, Vec<Arc<EventRecord>>> {
        ForwardingStore::read_events(self, session_id, after_seq, limit)
    }

    fn wait_events<'a>(
        &'a self,
        session_id: &'a str,
        after_seq: u64,
        timeout: Duration,
    ) -> StoreFuture<'a, bool> {
        ForwardingStore::wait_events(self, session_id, after_seq, timeout)
    }

    fn put_checkpoint<'a>(&'a self, checkpoint: Checkpoint) -> StoreFuture<'a, ()> {
        ForwardingStore::put_checkpoint(self, checkpoint)
    }

    fn get_checkpoint<'a>(
        &'a self,
        session_id: &'a str,
        namespace: &'a str,
        id: Option<&'a str>,
    ) -> StoreFuture<'a, Option<Checkpoint>> {
        ForwardingStore::get_checkpoint(self, session_id, namespace, id)
    }

    fn find_checkpoints<'a>(
        &'a self,
        namespace: &'a str,
        keys: &'a [(String, String)],
    ) -> StoreFuture<'a, Vec<(String, String)>> {
        ForwardingStore::find_checkpoints(self, namespace, keys)
    }

    fn list_checkpoints<'a>(
        &'a self,
        session_id: &'a str,
        namespace: &'a str,
    ) -> StoreFuture<'a, Vec<Checkpoint>> {
        ForwardingStore::list_checkpoints(self, session_id, namespace)
    }

    fn list_sessions<'a>(
        &'a self,
        scope: OwnerScope<'a>,
        limit: usize,
    ) -> StoreFuture<'a, Vec<SessionHead>> {
        ForwardingStore::list_sessions(self, scope, limit)
    }

    fn delete_session<'a>(
        &'a self,
        session_id: &'a str,
        scope: OwnerScope<'a>,
    ) -> StoreFuture<'a, bool> {
        ForwardingStore::delete_session(self, session_id, scope)
    }

    fn acquire_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        ForwardingStore::acquire_lease(self, session_id, holder, ttl)
    }

    fn renew_lease<'a>(
        &'a self,
        session_id: &'a str,
        holder: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, bool> {
        ForwardingStore::renew_lease(self, session_id, holder, ttl)
    }

    fn release_lease<'a>(&'a self, session_id: &'a str, holder: &'a str) -> StoreFuture<'a, ()> {
        ForwardingStore::release_lease(self, session_id, holder)
    }

    fn take_over_process_leases<'a>(
        &'a self,
        process: &'a str,
        heir: &'a str,
        ttl: Duration,
    ) -> StoreFuture<'a, Vec<String>> {
        ForwardingStore::take_over_process_leases(self, process, heir, ttl)
    }

    fn due_sessions<'a>(&'a self, now: TimestampMs, limit: usize) -> StoreFuture<'a, Vec<String>> {
        ForwardingStore::due_sessions(self, now, limit)
    }

    fn probe_write(&self) -> StoreFuture<'_, ()> {
        ForwardingStore::probe_write(self)
    }
}
