//! Session ids as a client chose them, and as the store keeps them.
//!
//! Clients choose session ids (`sessionId`, a chat's `id`, an AG-UI `threadId`), and two owners
//! may choose the same one: each gets a session of their own. So on a server with API keys the
//! store keeps a session under its owner's namespace — `TAG~ID`, `TAG` the owner's name (or, for
//! a name that is not a plain word, `+` and a hash of it) — and the client's id everywhere it is
//! shown: headers, bodies, lists, and the events of its streams (whose `session_id`, `threadId`
//! and checkpoint `thread_id` name the session). A client id never contains `~`, so no client id
//! is ever another owner's stored id, and looking up another owner's session is looking up an id
//! that does not exist: "not yours" and "does not exist" are the same lookup, answered the same.
//!
//! Without keys there is one anonymous caller and the stored id is the client's (as before keys
//! existed). A keyed session stored before namespaces (an id without `~`) is still found by its
//! owner: when the namespaced id does not exist, the plain one is looked up, for its owner only.
//!
//! This module is the only place that knows the mapping: a caller's [`Namespace`] (made from its
//! owner by `auth`) turns the client ids handlers take into stored ids ([`Namespace::store_id`])
//! and shows stored ids as client ids ([`Namespace::client_id`]); [`ClientIds`] does the same for
//! the events a stream renders. This module knows nothing of callers or keys.

use std::sync::Arc;

use weft_core::AgentEvent;
use weft_protocol::{Encoder, Frame, Framing};

/// What separates an owner's tag from the client's id in a stored id (never in a client id).
pub(crate) const SEPARATOR: char = '~';

/// The longest owner name used as its own tag; longer names are hashed.
const MAX_TAG: usize = 48;

/// The namespace prefix of `owner`'s sessions: `TAG~`.
fn prefix(owner: &str) -> String {
    let plain = !owner.is_empty()
        && owner.len() <= MAX_TAG
        && owner.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b));
    if plain {
        return format!("{owner}{SEPARATOR}");
    }
    // FNV-1a (64 bits): stable across versions and platforms, as stored ids must be. A plain
    // name has no `+`, so it never equals another owner's hashed tag.
    let hash = {
        use std::hash::Hasher as _;
        let mut hasher = fnv::FnvHasher::default();
        hasher.write(owner.as_bytes());
        hasher.finish()
    };
    format!("+{hash:016x}{SEPARATOR}")
}

/// The stored ids of one owner's sessions: `TAG~ID` for an owner, the client's id itself on a
/// server without keys.
#[derive(Debug, Clone)]
pub(crate) struct Namespace {
    /// `TAG~`; `None` without keys.
    prefix: Option<Arc<str>>,
}

impl Namespace {
    /// The namespace of `owner`'s sessions (`None`: a server without keys, no namespace).
    pub(crate) fn of(owner: Option<&str>) -> Self {
        Self { prefix: owner.map(|o| Arc::from(prefix(o))) }
    }

    /// Whether stored ids differ from client ids (an owner's namespace, on a server with keys).
    pub(crate) fn is_owned(&self) -> bool {
        self.prefix.is_some()
    }

    /// The stored id of the owner's session `client_id`.
    pub(crate) fn store_id(&self, client_id: &str) -> String {
        match &self.prefix {
            Some(prefix) => format!("{prefix}{client_id}"),
            None => client_id.to_string(),
        }
    }

    /// The stored id of a session that predates owner namespaces (the plain client id), when
    /// there is a namespace; such a session is the owner's only if its recorded owner is.
    pub(crate) fn legacy_id<'a>(&self, client_id: &'a str) -> Option<&'a str> {
        self.prefix.is_some().then_some(client_id)
    }

    /// The id the owner knows the stored session `store_id` by.
    pub(crate) fn client_id<'a>(&self, store_id: &'a str) -> &'a str {
        match &self.prefix {
            Some(prefix) => store_id.strip_prefix(&**prefix).unwrap_or(store_id),
            None => store_id,
        }
    }
}

/// A stream's session: its stored id and the id its client knows it by.
#[derive(Debug, Clone)]
pub(crate) struct ShownId {
    pub(crate) stored: Arc<str>,
    pub(crate) client: Arc<str>,
}

impl ShownId {
    pub(crate) fn new(stored: &str, client: &str) -> Self {
        Self { stored: stored.into(), client: client.into() }
    }

    /// Whether the two differ (the events need rewriting).
    fn differs(&self) -> bool {
        self.stored != self.client
    }

    /// `event` with the client's id where it names the session; `None` when it names none (or
    /// names it as the client does already).
    fn rewrite(&self, event: &AgentEvent) -> Option<AgentEvent> {
        let mut event = match event {
            AgentEvent::SessionStart { session_id, .. }
            | AgentEvent::SessionEnd { session_id, .. }
            | AgentEvent::AwaitingToolExecution { session_id, .. }
            | AgentEvent::ApprovalRequired { session_id, .. }
                if **session_id == *self.stored =>
            {
                event.clone()
            }
            AgentEvent::Checkpoint(taken) if *taken.thread_id == *self.stored => event.clone(),
            _ => return None,
        };
        match &mut event {
            AgentEvent::SessionStart { session_id, .. }
            | AgentEvent::SessionEnd { session_id, .. }
            | AgentEvent::AwaitingToolExecution { session_id, .. }
            | AgentEvent::ApprovalRequired { session_id, .. } => {
                *session_id = self.client.to_string();
            }
            AgentEvent::Checkpoint(taken) => taken.thread_id = self.client.to_string(),
            _ => {}
        }
        Some(event)
    }
}

/// An encoder that shows the client's session id: events naming the stored session are
/// rewritten before `inner` renders them (a handful per run: the per-token events name none and
/// pass untouched).
pub(crate) struct ClientIds {
    inner: Box<dyn Encoder>,
    id: ShownId,
}

impl ClientIds {
    /// `inner`, showing `id`'s client id; `inner` itself when the ids are the same.
    pub(crate) fn wrap(inner: Box<dyn Encoder>, id: Option<&ShownId>) -> Box<dyn Encoder> {
        match id {
            Some(id) if id.differs() => Box::new(Self { inner, id: id.clone() }),
            _ => inner,
        }
    }
}

impl Encoder for ClientIds {
    fn encode(&mut self, event: &AgentEvent, out: &mut Vec<Frame>) {
        match self.id.rewrite(event) {
            Some(shown) => self.inner.encode(&shown, out),
            None => self.inner.encode(event, out),
        }
    }

    fn set_node(&mut self, node: Option<&Arc<str>>) {
        self.inner.set_node(node);
    }

    fn finish(&mut self, out: &mut Vec<Frame>) {
        self.inner.finish(out);
    }

    fn encode_to(&mut self, seq: u64, event: &AgentEvent, framing: Framing, out: &mut Vec<u8>) {
        match self.id.rewrite(event) {
            Some(shown) => self.inner.encode_to(seq, &shown, framing, out),
            None => self.inner.encode_to(seq, event, framing, out),
        }
    }

    fn finish_to(&mut self, framing: Framing, out: &mut Vec<u8>) {
        self.inner.finish_to(framing, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namespace(owner: Option<&str>) -> Namespace {
        Namespace::of(owner)
    }

    #[test]
    fn owners_get_namespaces_and_clients_their_own_ids() {
        let alice = namespace(Some("alice"));
        assert_eq!(alice.store_id("chat-1"), "alice~chat-1");
        assert_eq!(alice.client_id("alice~chat-1"), "chat-1");
        assert_eq!(alice.client_id("legacy"), "legacy", "ids from before namespaces");
        let anonymous = namespace(None);
        assert_eq!(anonymous.store_id("chat-1"), "chat-1", "no keys: ids as before");
        assert_eq!(anonymous.legacy_id("chat-1"), None);
        // Names that are not plain words are hashed.
        let odd = prefix("Alice Smith <a@example.com>");
        assert!(odd.starts_with('+') && odd.len() == 18, "{odd}");
        assert_eq!(prefix("henry"), "henry~");
        assert_ne!(prefix("bob"), prefix("bob "));
    }

    #[test]
    fn events_naming_the_session_show_the_clients_id() {
        let id = ShownId::new("alice~t1", "t1");
        let start = AgentEvent::SessionStart {
            session_id: "alice~t1".into(),
            run_id: "r".into(),
            agent: "react".into(),
            recovers: None,
        };
        let shown = id.rewrite(&start);
        assert!(
            matches!(shown, Some(AgentEvent::SessionStart { ref session_id, .. }) if session_id == "t1")
        );
        let delta =
            AgentEvent::AwaitingToolExecution { session_id: "other".into(), tool_calls: vec![] };
        assert!(id.rewrite(&delta).is_none(), "another session's id is left alone");
    }
}
