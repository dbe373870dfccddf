//! A session's event log in memory, kept compact: a stream of deltas of one block costs a few
//! bytes a delta, not a record each.
//!
//! Consecutive deltas of the same block (text, thinking, a tool call's arguments, a tool's
//! output), of the same run and node, with consecutive seqs, are kept as one [`DeltaRun`]: the
//! block's text once, and per delta where its text ends and when it was emitted. Reading
//! rebuilds every record exactly as it was appended (same seq, time, run, node, text): the log
//! answers [`SessionStore::read_events`](weft_core::SessionStore::read_events) from any seq as
//! if it kept the records themselves. Every other event is kept as the record it came as (shared
//! with the live watchers that hold it).

use std::sync::Arc;

use weft_core::AgentEvent;
use weft_core::store::EventRecord;

/// A session's events, in seq order. See the [module docs](self).
#[derive(Default)]
pub(super) struct EventLog {
    slots: Vec<Slot>,
}

enum Slot {
    /// An event kept whole.
    One(Arc<EventRecord>),
    /// Consecutive deltas of one block.
    Deltas(Box<DeltaRun>),
}

/// Consecutive deltas of one block: seqs `first_seq..first_seq + ends.len()`.
struct DeltaRun {
    first_seq: u64,
    session_id: Arc<str>,
    run_id: Arc<str>,
    node_id: Option<Arc<str>>,
    block: Block,
    /// When the first delta was emitted (ms since the epoch).
    first_at: u64,
    /// Every delta's text, one after the other.
    text: String,
    /// Where each delta's text ends in `text`.
    ends: Vec<u32>,
    /// When each delta was emitted, in ms after `first_at`.
    after: Vec<u32>,
}

/// The block a delta belongs to, and so the event it is.
#[derive(PartialEq, Eq)]
enum Block {
    Text(u32),
    Thinking(u32),
    Toolcall(u32),
    ToolExecution(String),
}

/// The text of a delta event that can be kept in a run; `None` for every other event.
fn delta_text(record: &EventRecord) -> Option<&str> {
    if record.messages.is_some() {
        return None;
    }
    match &record.event {
        AgentEvent::TextDelta { delta, .. }
        | AgentEvent::ThinkingDelta { delta, .. }
        | AgentEvent::ToolcallDelta { delta, .. }
        | AgentEvent::ToolExecutionDelta { delta, .. } => Some(delta),
        _ => None,
    }
}

impl Block {
    /// The block of a delta event (see [`delta_text`]): built only when a run starts, so that
    /// a delta extending a run copies nothing but its text.
    fn of(record: &EventRecord) -> Option<Block> {
        match &record.event {
            AgentEvent::TextDelta { index, .. } => Some(Block::Text(*index)),
            AgentEvent::ThinkingDelta { index, .. } => Some(Block::Thinking(*index)),
            AgentEvent::ToolcallDelta { index, .. } => Some(Block::Toolcall(*index)),
            AgentEvent::ToolExecutionDelta { tool_call_id, .. } => {
                Some(Block::ToolExecution(tool_call_id.clone()))
            }
            _ => None,
        }
    }

    /// Whether `record` (a delta) is of this block.
    fn holds(&self, record: &EventRecord) -> bool {
        match (self, &record.event) {
            (Block::Text(a), AgentEvent::TextDelta { index, .. })
            | (Block::Thinking(a), AgentEvent::ThinkingDelta { index, .. })
            | (Block::Toolcall(a), AgentEvent::ToolcallDelta { index, .. }) => a == index,
            (Block::ToolExecution(a), AgentEvent::ToolExecutionDelta { tool_call_id, .. }) => {
                a == tool_call_id
            }
            _ => false,
        }
    }

    fn event(&self, delta: &str) -> AgentEvent {
        let delta = delta.to_owned();
        match self {
            Block::Text(index) => AgentEvent::TextDelta { index: *index, delta },
            Block::Thinking(index) => AgentEvent::ThinkingDelta { index: *index, delta },
            Block::Toolcall(index) => AgentEvent::ToolcallDelta { index: *index, delta },
            Block::ToolExecution(id) => {
                AgentEvent::ToolExecutionDelta { tool_call_id: id.clone(), delta }
            }
        }
    }
}

impl Slot {
    fn last_seq(&self) -> u64 {
        match self {
            Slot::One(record) => record.seq,
            Slot::Deltas(run) => run.first_seq + run.ends.len() as u64 - 1,
        }
    }
}

impl DeltaRun {
    fn start(record: &EventRecord, block: Block, delta: &str) -> Option<Box<Self>> {
        let mut run = Box::new(Self {
            first_seq: record.seq,
            session_id: Arc::clone(&record.session_id),
            run_id: Arc::clone(&record.run_id),
            node_id: record.node_id.clone(),
            block,
            first_at: record.at,
            text: String::new(),
            ends: Vec::new(),
            after: Vec::new(),
        });
        run.push(record, delta).then_some(run)
    }

    /// Adds `record` (a delta with text `delta`) when it is the next delta of this run's block:
    /// `false` (nothing changed) when it is not.
    fn push(&mut self, record: &EventRecord, delta: &str) -> bool {
        let next = self.first_seq + self.ends.len() as u64;
        let same_source = record.seq == next
            && *record.run_id == *self.run_id
            && record.node_id.as_deref() == self.node_id.as_deref()
            && *record.session_id == *self.session_id
            && self.block.holds(record);
        let (Some(end), Some(after)) = (
            u32::try_from(self.text.len() + delta.len()).ok(),
            record.at.checked_sub(self.first_at).and_then(|ms| u32::try_from(ms).ok()),
        ) else {
            return false;
        };
        if !same_source {
            return false;
        }
        self.text.push_str(delta);
        self.ends.push(end);
        self.after.push(after);
        true
    }

    /// The record of the `i`th delta.
    fn record(&self, i: usize) -> Arc<EventRecord> {
        let start = if i == 0 { 0 } else { self.ends[i - 1] as usize };
        let end = self.ends[i] as usize;
        Arc::new(EventRecord {
            session_id: Arc::clone(&self.session_id),
            run_id: Arc::clone(&self.run_id),
            seq: self.first_seq + i as u64,
            node_id: self.node_id.clone(),
            at: self.first_at + u64::from(self.after[i]),
            event: self.block.event(&self.text[start..end]),
            messages: None,
        })
    }

    /// Gives back the room its vectors grew into: the run is complete.
    fn close(&mut self) {
        self.text.shrink_to_fit();
        self.ends.shrink_to_fit();
        self.after.shrink_to_fit();
    }
}

impl EventLog {
    /// The seq of the last event (0: none).
    pub(super) fn last_seq(&self) -> u64 {
        self.slots.last().map_or(0, Slot::last_seq)
    }

    /// Appends `records` (in seq order, above every seq kept: the store checks first).
    pub(super) fn extend(&mut self, records: &[Arc<EventRecord>]) {
        for record in records {
            self.push(record);
        }
    }

    fn push(&mut self, record: &Arc<EventRecord>) {
        if let Some(delta) = delta_text(record) {
            if let Some(Slot::Deltas(run)) = self.slots.last_mut()
                && run.push(record, delta)
            {
                return;
            }
            self.close_last();
            // A delta too large to be counted in a run is kept whole.
            if let Some(run) =
                Block::of(record).and_then(|block| DeltaRun::start(record, block, delta))
            {
                self.slots.push(Slot::Deltas(run));
                return;
            }
        } else {
            self.close_last();
        }
        self.slots.push(Slot::One(Arc::clone(record)));
    }

    fn close_last(&mut self) {
        if let Some(Slot::Deltas(run)) = self.slots.last_mut() {
            run.close();
        }
    }

    /// Up to `limit` events with seq greater than `after_seq`, in order.
    pub(super) fn read(&self, after_seq: u64, limit: usize) -> Vec<Arc<EventRecord>> {
        let start = self.slots.partition_point(|slot| slot.last_seq() <= after_seq);
        let mut out = Vec::new();
        for slot in &self.slots[start..] {
            if out.len() >= limit {
                break;
            }
            match slot {
                Slot::One(record) => out.push(Arc::clone(record)),
                Slot::Deltas(run) => {
                    let skip = usize::try_from((after_seq + 1).saturating_sub(run.first_seq))
                        .unwrap_or(usize::MAX);
                    let take = run.ends.len().saturating_sub(skip).min(limit - out.len());
                    out.extend((skip..skip + take).map(|i| run.record(i)));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(seq: u64, run: &str, at: u64, event: AgentEvent) -> Arc<EventRecord> {
        Arc::new(EventRecord {
            session_id: Arc::from("s"),
            run_id: Arc::from(run),
            seq,
            node_id: None,
            at,
            event,
            messages: None,
        })
    }

    fn text(index: u32, delta: &str) -> AgentEvent {
        AgentEvent::TextDelta { index, delta: delta.into() }
    }

    fn json(records: &[Arc<EventRecord>]) -> Vec<String> {
        records.iter().map(|r| serde_json::to_string(r).expect("a record serializes")).collect()
    }

    /// A log of every kind of neighbour a delta can have: another block, another run, a node,
    /// a gap in the seqs, an event kept whole, a tool's output.
    fn records() -> Vec<Arc<EventRecord>> {
        let mut all = vec![record(1, "r1", 1_000, AgentEvent::TextStart { index: 0 })];
        let mut seq = 1;
        let mut next = |run: &str, at: u64, event: AgentEvent| {
            seq += 1;
            record(seq, run, at, event)
        };
        all.push(next("r1", 1_001, text(0, "ab")));
        all.push(next("r1", 1_001, text(0, "")));
        all.push(next("r1", 1_050, text(0, "cdé")));
        all.push(next("r1", 1_051, text(1, "x")));
        all.push(next("r1", 1_052, AgentEvent::ThinkingDelta { index: 1, delta: "t".into() }));
        all.push(next("r1", 1_053, AgentEvent::ToolcallDelta { index: 2, delta: "{\"a\"".into() }));
        all.push(next("r1", 1_054, AgentEvent::ToolcallDelta { index: 2, delta: ":1}".into() }));
        all.push(next("r2", 1_055, AgentEvent::ToolcallDelta { index: 2, delta: "y".into() }));
        let tool = |delta: &str| AgentEvent::ToolExecutionDelta {
            tool_call_id: "c1".into(),
            delta: delta.into(),
        };
        all.push(next("r2", 1_056, tool("out")));
        all.push(next("r2", 1_057, tool("put")));
        all.push(next(
            "r2",
            1_058,
            AgentEvent::ToolExecutionDelta { tool_call_id: "c2".into(), delta: "z".into() },
        ));
        // A reservation gap: seqs jump.
        all.push(record(100, "r2", 1_059, text(0, "after the gap")));
        all.push(record(101, "r2", 1_060, text(0, "!")));
        let mut noded = (*record(102, "r2", 1_061, text(0, "in a node"))).clone();
        noded.node_id = Some(Arc::from("n1"));
        all.push(Arc::new(noded));
        all.push(record(103, "r2", 1_062, AgentEvent::TextEnd { index: 0, text: "x".into() }));
        all.push(record(104, "r2", 1_062, text(0, "late")));
        all
    }

    #[test]
    fn reading_from_any_seq_gives_back_every_record_exactly() {
        let all = records();
        let mut log = EventLog::default();
        log.extend(&all);
        assert_eq!(log.last_seq(), 104);
        assert_eq!(json(&log.read(0, usize::MAX)), json(&all));
        for after in 0..=105 {
            let expected: Vec<_> = all.iter().filter(|r| r.seq > after).cloned().collect();
            for limit in [0, 1, 2, 3, 5, usize::MAX] {
                let want = &expected[..expected.len().min(limit)];
                assert_eq!(
                    json(&log.read(after, limit)),
                    json(want),
                    "after {after}, limit {limit}"
                );
            }
        }
    }

    #[test]
    fn deltas_of_one_block_are_kept_in_one_slot() {
        let mut log = EventLog::default();
        for i in 0..1_000u64 {
            log.push(&record(i + 1, "r", 5_000 + i * 50, text(0, "abcd")));
        }
        assert_eq!(log.slots.len(), 1);
        let Slot::Deltas(run) = &log.slots[0] else { panic!("a run of deltas") };
        assert_eq!(run.text.len(), 4_000);
        assert_eq!(log.read(499, 1)[0].at, 5_000 + 499 * 50);
    }
}
