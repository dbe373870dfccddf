//! The context every run and session of an agent shares ([`AgentInner`]): its providers,
//! tools, settings, hooks and store, this process's identity, and the sessions open in it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use weft_core::SessionStore;
use weft_llm::Provider;

use crate::catalog::ToolCatalog;
use crate::config::{AgentConfig, AgentHooks, ApprovalPolicy};
use crate::identity::ProcessIdentity;
use crate::session::Shared;

/// A provider sessions may name, with the model new sessions on it get by default.
pub(crate) struct NamedProvider {
    pub(crate) name: String,
    pub(crate) provider: Arc<dyn Provider>,
    pub(crate) model: Option<String>,
}

/// The sessions used most recently, kept open (strongly held) up to a bound.
#[derive(Default)]
pub(crate) struct Recent {
    pub(crate) tick: u64,
    pub(crate) by_id: HashMap<String, (u64, Arc<Shared>)>,
    pub(crate) by_tick: std::collections::BTreeMap<u64, String>,
}

impl Recent {
    pub(crate) fn touch(&mut self, id: &str, shared: &Arc<Shared>, bound: usize) {
        if bound == 0 {
            return;
        }
        self.tick += 1;
        let tick = self.tick;
        if let Some((old, _)) = self.by_id.insert(id.to_string(), (tick, Arc::clone(shared))) {
            self.by_tick.remove(&old);
        }
        self.by_tick.insert(tick, id.to_string());
        while self.by_id.len() > bound {
            let Some((_, oldest)) = self.by_tick.pop_first() else { break };
            self.by_id.remove(&oldest);
        }
    }

    pub(crate) fn remove(&mut self, id: &str) {
        if let Some((tick, _)) = self.by_id.remove(id) {
            self.by_tick.remove(&tick);
        }
    }
}

/// Where agents' ids come from: one per [`AgentInner`] made in this process.
static NEXT_AGENT_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// A new agent id, never given before in this process.
pub(crate) fn next_agent_id() -> u64 {
    NEXT_AGENT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

pub(crate) struct AgentInner {
    /// This agent's id: the handles it makes carry it, and it takes no other agent's.
    pub(crate) id: u64,
    /// The default provider (new sessions without a provider of their own, and sessions naming
    /// one this agent does not have).
    pub(crate) provider: Arc<dyn Provider>,
    /// Every provider a session may name, the default first.
    pub(crate) providers: Vec<NamedProvider>,
    pub(crate) tools: ToolCatalog,
    pub(crate) config: AgentConfig,
    pub(crate) hooks: Arc<dyn AgentHooks>,
    pub(crate) approval: Option<ApprovalPolicy>,
    /// Where sessions are kept durably; `None`: in memory only.
    pub(crate) store: Option<Arc<dyn SessionStore>>,
    /// This process's name as a lease holder.
    pub(crate) holder: Arc<str>,
    /// The identity `holder` is the name of (a stable one holds its slot's lock).
    pub(crate) identity: ProcessIdentity,
    /// Set once the leases a dead process left under this identity are freed (the first use of
    /// the store waits for it).
    pub(crate) adopted: tokio::sync::OnceCell<()>,
    /// Whether the sweeper task is started.
    pub(crate) sweeper: std::sync::OnceLock<()>,
    /// Wakes the sweeper early (a run suspended with a deadline).
    pub(crate) sweep_now: Arc<tokio::sync::Notify>,
    /// The sessions open in this process: one handle (one log, one lock) per session.
    pub(crate) open: Mutex<HashMap<String, Weak<Shared>>>,
    /// The most recently used of them, kept open ([`AgentConfig::keep_open`]).
    pub(crate) recent: Mutex<Recent>,
    /// The reasoning modes sessions may run in.
    pub(crate) modes: weft_loop::Modes,
}

impl AgentInner {
    /// The provider a session names (the default one for a name this agent does not have).
    pub(crate) fn provider_for(&self, name: &str) -> Arc<dyn Provider> {
        self.providers
            .iter()
            .find(|p| p.name == name)
            .map_or_else(|| Arc::clone(&self.provider), |p| Arc::clone(&p.provider))
    }
}
