//! What the simulated clients were told, and the promises it is checked against: streams that
//! never go back or repeat, sequence numbers never given to two different events, nothing after
//! a run's end, answers that stay, events seen under `sync` that the store has, watchers that
//! miss nothing.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use weft_core::{AgentEvent, Durability, EventRecord, Message, SessionStatus, SessionStore, Usage};

/// A digest of an event: what it says, not how it is kept (a stored `session_end` carries its
/// messages as a span of the log).
pub(crate) fn digest_event(event: &AgentEvent) -> u64 {
    let text = match event {
        AgentEvent::SessionEnd { status, .. } => format!("session_end {status:?}"),
        other => serde_json::to_string(other).unwrap_or_default(),
    };
    digest(&text)
}

/// A digest of a message.
pub(crate) fn digest_message(message: &Message) -> u64 {
    digest(&serde_json::to_string(message).unwrap_or_default())
}

fn digest(text: &str) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut hasher);
    hasher.finish()
}

/// A run's answer a client was told, durably: the message at `index` of the session's log.
#[derive(Debug, Clone)]
struct Answer {
    session: String,
    index: u64,
    digest: u64,
    status: SessionStatus,
    life: u32,
}

/// What a watcher that resumed after `after` saw.
#[derive(Debug, Clone)]
struct Watch {
    session: String,
    after: u64,
    seen: BTreeSet<u64>,
    life: u32,
}

/// Everything the clients of every life were told, and the promises broken so far.
#[derive(Debug, Default)]
pub struct Observed {
    /// Per session, each seq seen, with its event's digest and the life that saw it.
    seen: HashMap<String, BTreeMap<u64, (u64, u32)>>,
    /// Per session, the seqs seen by streams of `sync` runs.
    synced: HashMap<String, BTreeSet<u64>>,
    answers: Vec<Answer>,
    watches: Vec<Watch>,
    /// Sessions created, in order.
    pub sessions: Vec<String>,
    /// The sessions in react mode (whose usage is their messages').
    pub react: BTreeSet<String>,
    /// How many events the clients received.
    pub events: u64,
    /// How many runs' results the clients received.
    pub results: u64,
    /// Sessions a dead life left running that a command line's next life continued.
    pub continued: u64,
    /// Inputs sent once the run under way had ended (enqueued, or after interrupting it).
    pub queued: u64,
    /// Remote calls the store holds answered by the sweeper, their deadline past (as of the
    /// last check).
    pub expired: u64,
    /// The promises broken.
    pub violations: Vec<String>,
    /// What each synced event was (for the reports): its kind, run and life.
    kinds: HashMap<(String, u64), String>,
}

impl Observed {
    /// A promise broken, as a client saw it.
    pub fn broken(&mut self, text: String) {
        self.violation(text);
    }

    fn violation(&mut self, text: String) {
        if self.violations.len() < 20 {
            self.violations.push(text);
        }
    }

    /// An event a client received, at `life`, on a stream of a run stored as `durability`
    /// (`None`: a watcher, which cannot tell).
    pub fn event(&mut self, life: u32, record: &EventRecord, durability: Option<Durability>) {
        self.events += 1;
        let session = record.session_id.to_string();
        let digest = digest_event(&record.event);
        let seen = self.seen.entry(session.clone()).or_default();
        let reused = seen
            .insert(record.seq, (digest, life))
            .filter(|(before, _)| *before != digest)
            .map(|(_, at)| {
                format!(
                    "session {session}: seq {} was given to two different events (seen in life {at} and life {life})",
                    record.seq
                )
            });
        if let Some(text) = reused {
            self.violation(text);
        }
        if durability == Some(Durability::Sync) {
            self.synced.entry(session.clone()).or_default().insert(record.seq);
            let kind = format!("{} of run {} in life {life}", record.event.kind(), record.run_id);
            self.kinds.insert((session, record.seq), kind);
        }
    }

    /// A run's result a client received, with the `session_end` its stream gave (if any).
    pub fn result(
        &mut self,
        life: u32,
        result: &weft_agent::ExecuteResult,
        end: Option<&EventRecord>,
    ) {
        self.results += 1;
        if !result.outcome.is_durable() || result.status == SessionStatus::Running {
            return;
        }
        let (Some(end), Some(last)) = (end, result.messages.last()) else { return };
        let Some(span) = end.messages else { return };
        if span.count == 0 {
            return;
        }
        self.answers.push(Answer {
            session: result.session_id.clone(),
            index: span.first + span.count - 1,
            digest: digest_message(last),
            status: result.status,
            life,
        });
    }

    /// What a watcher that resumed after `after` saw, in order.
    pub fn watch(&mut self, life: u32, session: &str, after: u64, seqs: &[u64]) {
        let mut last = after;
        for seq in seqs {
            if *seq <= last {
                self.violation(format!(
                    "session {session}: a watcher resumed after {after} got seq {seq} after {last}"
                ));
            }
            last = *seq;
        }
        let seen = seqs.iter().copied().collect();
        self.watches.push(Watch { session: session.to_string(), after, seen, life });
    }

    /// Checks what the store holds against what the clients were told.
    pub async fn check_store(&mut self, store: &Arc<dyn SessionStore>, after_life: u32) {
        let sessions = self.sessions.clone();
        self.expired = 0;
        for id in sessions {
            let log = match store.read_events(&id, 0, usize::MAX).await {
                Ok(log) => log,
                Err(error) => {
                    self.violation(format!("session {id}: its events cannot be read: {error}"));
                    continue;
                }
            };
            self.check_log(&id, &log, after_life);
            match store.load(&id).await {
                Ok(Some(stored)) => {
                    let messages = stored.messages.shared().to_vec();
                    self.expired += messages
                        .iter()
                        .filter(|m| match &***m {
                            Message::ToolResult(r) => {
                                r.is_error && r.text_content().ends_with("before its deadline")
                            }
                            _ => false,
                        })
                        .count() as u64;
                    self.check_answers(&id, &messages);
                    let (counted, cost) = usage_of(&messages);
                    let resting =
                        self.react.contains(&id) && stored.head.status != SessionStatus::Running;
                    if resting && stored.head.usage != counted {
                        self.violation(format!(
                            "session {id}: its usage ({:?}) is not its messages' ({counted:?})",
                            stored.head.usage
                        ));
                    }
                    // Summed in another order, the same costs differ in the last bits at most.
                    let total = stored.head.cost.total;
                    if resting && (total - cost).abs() > 1e-9 * cost.abs().max(1.0) {
                        self.violation(format!(
                            "session {id}: its cost ({total}) is not its messages' ({cost})"
                        ));
                    }
                }
                Ok(None) => self.violation(format!("session {id} is gone from the store")),
                Err(error) => self.violation(format!("session {id} cannot be loaded: {error}")),
            }
        }
    }

    fn check_log(&mut self, id: &str, log: &[Arc<EventRecord>], after_life: u32) {
        let mut stored = BTreeMap::new();
        let mut last = 0;
        let mut ended: BTreeSet<&str> = BTreeSet::new();
        let mut problems = Vec::new();
        for record in log {
            if record.seq <= last {
                problems
                    .push(format!("session {id}: the store has seq {} after {last}", record.seq));
            }
            last = record.seq;
            if ended.contains(&*record.run_id) {
                problems.push(format!(
                    "session {id}: seq {} of run {} follows that run's end",
                    record.seq, record.run_id
                ));
            }
            if matches!(record.event, AgentEvent::SessionEnd { .. }) {
                ended.insert(&record.run_id);
            }
            stored.insert(record.seq, digest_event(&record.event));
        }
        for (seq, (digest, life)) in self.seen.get(id).into_iter().flatten() {
            if let Some(kept) = stored.get(seq)
                && kept != digest
            {
                problems.push(format!(
                    "session {id}: seq {seq} was received (life {life}) as one event and is stored as another"
                ));
            }
        }
        for seq in self.synced.get(id).into_iter().flatten() {
            if !stored.contains_key(seq) {
                let around: Vec<u64> =
                    stored.range(seq.saturating_sub(3)..seq + 3).map(|(s, _)| *s).collect();
                let kind = self.kinds.get(&(id.to_string(), *seq)).cloned().unwrap_or_default();
                problems.push(format!(
                    "session {id}: seq {seq} ({kind}) was received under durability sync and is not stored (checked after life {after_life}; stored around it: {around:?}, last stored {last})"
                ));
            }
        }
        for watch in self.watches.iter().filter(|w| w.session == id) {
            let Some(&end) = watch.seen.last() else { continue };
            for seq in stored.range(watch.after + 1..=end).map(|(s, _)| s) {
                if !watch.seen.contains(seq) {
                    let seen: Vec<u64> = watch.seen.iter().take(12).copied().collect();
                    problems.push(format!(
                        "session {id}: a watcher (life {}) that resumed after {} missed stored seq {seq} (it saw {seen:?}…)",
                        watch.life, watch.after
                    ));
                }
            }
        }
        for problem in problems {
            self.violation(problem);
        }
    }

    fn check_answers(&mut self, id: &str, messages: &[Arc<Message>]) {
        let mut problems = Vec::new();
        for answer in self.answers.iter().filter(|a| a.session == id) {
            let kept = usize::try_from(answer.index).ok().and_then(|i| messages.get(i));
            match kept {
                Some(message) if digest_message(message) == answer.digest => {}
                Some(_) => problems.push(format!(
                    "session {id}: the answer a client was told (message {}, run {:?} in life {}) was replaced",
                    answer.index, answer.status, answer.life
                )),
                None => problems.push(format!(
                    "session {id}: the answer a client was told (message {}, run {:?} in life {}) is gone",
                    answer.index, answer.status, answer.life
                )),
            }
        }
        for problem in problems {
            self.violation(problem);
        }
    }
}

/// The usage the session's messages add up to.
/// The usage of the assistant messages among `messages`, and their cost in total.
fn usage_of(messages: &[Arc<Message>]) -> (Usage, f64) {
    let (mut usage, mut cost) = (Usage::default(), 0.0);
    for message in messages {
        if let Message::Assistant(a) = &**message {
            usage += a.usage;
            cost += a.cost.as_ref().map_or(0.0, |c| c.total);
        }
    }
    (usage, cost)
}
