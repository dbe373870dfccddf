//! The conformance suite of [`SessionStore`]: the checks every backend passes (memory, SQLite and
//! Postgres here), public so that a backend outside this repository can run them too. Only with
//! the `testing` feature.
//!
//! A backend is tested through a [`Subject`]: the store under test and a way to open another
//! instance on the same data (checks prove what crosses instances: conflicts, reservations,
//! wake-ups). Each check is a `pub async fn name(f: &dyn Subject)` that panics when the store does
//! not conform; [`CHECKS`] lists them all and [`run_all`] runs them one after the other, each on a
//! fresh subject.
//!
//! Checks spawn Tokio tasks and sleep: run them in a multi-threaded runtime. Each check uses
//! session ids of its own, but some (`probe_write_leaves_nothing`, `due_sessions`) look at every
//! session the store has: give each check a fresh, empty store.
//!
//! ```no_run
//! # // `no_run`: a doc test cannot hold a `#[tokio::test]`.
//! use std::sync::Arc;
//!
//! use weft_core::{SessionStore, StoreError};
//! use weft_store::MemoryStore;
//! use weft_store::testing::{self, Subject, SubjectFuture};
//!
//! /// A fresh store (a backend of your own in place of `MemoryStore`).
//! struct Mine(MemoryStore);
//!
//! impl Subject for Mine {
//!     fn store(&self) -> Arc<dyn SessionStore> {
//!         Arc::new(self.0.clone())
//!     }
//!
//!     fn other(&self) -> SubjectFuture<'_, Result<Arc<dyn SessionStore>, StoreError>> {
//!         // A second connection to the same database; for memory, a clone sharing the map.
//!         Box::pin(async { Ok(Arc::new(self.0.clone()) as Arc<dyn SessionStore>) })
//!     }
//! }
//!
//! // In a test: #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
//! async fn conformance() {
//!     testing::run_all(|| async { Mine(MemoryStore::new()) }).await;
//! }
//! ```
//!
//! To see each check as a test of its own (and run them in parallel), call them one by one:
//! `testing::round_trip(&Mine(MemoryStore::new())).await` in a `#[tokio::test]` per check, as
//! this crate's `tests/conformance.rs` does; its `every_check_is_run` test compares its list
//! with [`CHECKS`], so a new check cannot be forgotten.

// A check's job is to panic when the store does not conform: unwrapping its answers is the way.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::json;
use weft_core::message::{
    AssistantContent, AssistantMessage, Message, StopReason, TextContent, ThinkingContent,
    ToolCall, ToolResultMessage, UserMessage,
};
use weft_core::state::{CallSlot, CallState, OpenTurn, SessionStatus};
use weft_core::step::{AgentStep, StepAnnotations, ToolExecutionResult};
use weft_core::store::{
    Checkpoint, Commit, EventRecord, MessageSpan, OwnerScope, RunChange, RunState, SessionHead,
    SessionStore, StoreError,
};
use weft_core::tool::ToolSpec;
use weft_core::usage::{Cost, Usage};
use weft_core::{AgentEvent, History};

/// The future of a [`Subject`]'s method. Not `Send`: the checks await it where they are, and
/// opening a store often holds a driver's non-`Send` state across an await.
pub type SubjectFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// A backend under test: the store the checks use, and another instance on the same data.
pub trait Subject: Send + Sync {
    /// The store under test (a fresh, empty one for each check).
    fn store(&self) -> Arc<dyn SessionStore>;

    /// Another instance on the same data, as another process would open it (a second
    /// connection, pool or file handle; for a store in memory, a clone that shares it): what
    /// one instance writes, the other must see, and a wait on one must wake for the other's
    /// appends.
    fn other(&self) -> SubjectFuture<'_, Result<Arc<dyn SessionStore>, StoreError>>;

    /// The text the backend stored for event `seq` of a session, for backends that store
    /// events as text (the SQL ones: their `event` column): the checks make sure an event that
    /// repeats messages of the log is stored without them. `None` (the default): the check is
    /// skipped.
    fn raw_event<'a>(&'a self, session_id: &'a str, seq: u64) -> SubjectFuture<'a, Option<String>> {
        let _ = (session_id, seq);
        Box::pin(async { None })
    }
}

/// The future of a check.
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = ()> + 'a>>;

/// One check of the suite, by name.
#[derive(Clone, Copy)]
pub struct Check {
    /// Its name: the name of its function in this module.
    pub name: &'static str,
    /// Runs it on a subject; panics when the store does not conform.
    pub run: for<'a> fn(&'a dyn Subject) -> CheckFuture<'a>,
}

impl std::fmt::Debug for Check {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Check").field("name", &self.name).finish_non_exhaustive()
    }
}

macro_rules! checks {
    ($($check:ident),* $(,)?) => {
        /// Every check of the suite, in the order [`run_all`] runs them.
        pub const CHECKS: &[Check] = &[
            $(Check { name: stringify!($check), run: |f| Box::pin($check(f)) }),*
        ];
    };
}

checks!(
    round_trip,
    already_exists,
    not_found,
    append_only_order,
    concurrent_commits_conflict,
    invalid_writes_change_nothing,
    event_log_after_every_seq,
    reserve_seqs_never_overlap,
    checkpoints,
    owner_isolation,
    wait_events_across_instances,
    leases,
    process_leases,
    due_sessions,
    delete_removes_everything,
    failures_fail_only_their_caller,
    events_repeating_messages,
    probe_write_leaves_nothing,
);

/// Runs every check in [`CHECKS`], each on a fresh subject from `make`, one after the other;
/// panics at the first that fails (the name of each check is printed to stderr before it runs,
/// so a failing test's output says which).
pub async fn run_all<S, F, Fut>(mut make: F)
where
    S: Subject,
    F: FnMut() -> Fut,
    Fut: Future<Output = S>,
{
    for check in CHECKS {
        let subject = make().await;
        eprintln!("store conformance: {}", check.name);
        (check.run)(&subject).await;
    }
}

/// Another instance of the subject's store; panics if it cannot be opened.
async fn other(f: &dyn Subject) -> Arc<dyn SessionStore> {
    match f.other().await {
        Ok(store) => store,
        Err(error) => panic!("cannot open another instance of the store: {error}"),
    }
}

// ---------------------------------------------------------------------------------------------
// Data.

/// An id no other check (in this process or another) uses: `prefix`, the process id, the time
/// and a counter.
fn unique(prefix: &str) -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    format!("{prefix}-{}-{nanos:x}-{n}", std::process::id())
}

/// A user message with `text`.
pub fn user(text: &str) -> Message {
    Message::User(UserMessage::text(text))
}

fn text_of(message: &Message) -> String {
    match message {
        Message::User(m) => m.text_content(),
        Message::Assistant(m) => m.text(),
        Message::ToolResult(m) => m.text_content(),
    }
}

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: json!({"q": id, "n": [1, 2.5, "x"]}).into(),
    }
}

fn assistant(text: &str, calls: &[ToolCall]) -> AssistantMessage {
    let mut content = vec![
        AssistantContent::Thinking(ThinkingContent {
            thinking: "let me think".into(),
            signature: Some("sig==".into()),
        }),
        AssistantContent::Text(TextContent { text: text.into() }),
    ];
    content.extend(calls.iter().cloned().map(AssistantContent::ToolCall));
    AssistantMessage {
        content,
        stop_reason: if calls.is_empty() { StopReason::Stop } else { StopReason::ToolUse },
        error_message: None,
        usage: Usage::new(120, 40, 8, 0),
        cost: Some(Box::new(Cost {
            input: 0.1,
            output: 0.2,
            cache_read: 0.1 + 0.2,
            cache_write: 0.0,
            total: 0.6,
        })),
        provider: "faux".into(),
        model: "faux-1".into(),
        timestamp: 1_700_000_000_123,
    }
}

/// A session head with every field set (a system prompt, a tool, options, usage and a cost
/// whose floats must round-trip exactly), at version 0 with no messages.
pub fn head(id: &str, owner: Option<&str>) -> SessionHead {
    SessionHead {
        id: id.into(),
        owner: owner.map(Into::into),
        status: SessionStatus::Idle,
        provider: "faux".into(),
        model: "faux-1".into(),
        system_prompt: Some("be brief".into()),
        tools: vec![
            ToolSpec::new("lookup", "looks things up", json!({"type": "object"}))
                .with_approval()
                .with_label("Lookup"),
        ],
        options: json!({"mode": "react", "maxTurns": 8}),
        usage: Usage::new(1, 2, 3, 4),
        cost: Cost {
            input: 0.25,
            output: 1e-7,
            cache_read: 0.0,
            cache_write: 3.5,
            total: 3.7500001,
        },
        message_count: 0,
        step_count: 0,
        next_deadline: None,
        version: 0,
        created_at: 1_700_000_000_000,
        updated_at: 1_700_000_000_000,
    }
}

/// The head after one more commit adding `added` messages.
fn next(h: &SessionHead, added: usize) -> SessionHead {
    let mut n = h.clone();
    n.version += 1;
    n.message_count += added as u64;
    n.updated_at += 1;
    n
}

/// A commit on `h` appending `messages` (nothing else changes), with the head it leads to.
pub fn commit(h: &SessionHead, messages: Vec<Message>) -> (SessionHead, Commit) {
    let new = next(h, messages.len());
    let c = Commit {
        expected_version: h.version,
        head: new.clone(),
        messages: messages.into_iter().map(Arc::new).collect(),
        run: RunChange::Keep,
        events: Vec::new(),
    };
    (new, c)
}

fn run_state(run_id: &str) -> RunState {
    let calls =
        [call("c1", "lookup"), call("c2", "browser"), call("c3", "shell"), call("c4", "rm")];
    let message = assistant("calling tools", &calls);
    let step = AgentStep {
        step_id: "step-1".into(),
        step_index: 0,
        timestamp: 1_700_000_000_200,
        llm_response: message,
        latency_ms: 321,
        tool_results: vec![ToolExecutionResult {
            call: calls[0].clone(),
            output: "found".into(),
            error: None,
            details: Some(json!({"rows": 3})),
            started_at: 1_700_000_000_300,
            latency_ms: 12,
        }],
        annotations: StepAnnotations::default(),
    };
    let mut done = ToolResultMessage::ok(&calls[0], "found");
    done.timestamp = 1_700_000_000_312;
    done.details = Some(json!({"rows": 3}));
    RunState {
        run_id: run_id.into(),
        mode: "react".into(),
        turns: 3,
        open_turn: Some(OpenTurn {
            step: step.clone(),
            calls: vec![
                CallSlot { call: calls[0].clone(), state: CallState::Done { result: done } },
                CallSlot {
                    call: calls[1].clone(),
                    state: CallState::AwaitingResult {
                        since: 1_700_000_000_400,
                        deadline: 1_700_000_600_400,
                    },
                },
                CallSlot { call: calls[2].clone(), state: CallState::Running },
                CallSlot { call: calls[3].clone(), state: CallState::AwaitingApproval },
            ],
        }),
        mode_state: json!({"frontier": [1, 2], "scores": {"a": 0.5}}),
        executions: 2,
        started_at: 1_700_000_000_100,
        first_run_id: Some("run-0".into()),
    }
}

/// An event record of run `run-1` numbered `seq` (with a node id when `seq` is even).
pub fn record(session_id: &str, seq: u64, event: AgentEvent) -> Arc<EventRecord> {
    Arc::new(EventRecord {
        session_id: session_id.into(),
        run_id: "run-1".into(),
        seq,
        node_id: seq.is_multiple_of(2).then(|| "think-1".into()),
        at: 1_700_000_000_000 + seq,
        event,
        messages: None,
    })
}

/// A `text_delta` event record numbered `seq`.
pub fn delta(session_id: &str, seq: u64, text: &str) -> Arc<EventRecord> {
    record(session_id, seq, AgentEvent::TextDelta { index: 0, delta: text.into() })
}

fn checkpoint(
    session_id: &str,
    ns: &str,
    id: &str,
    at: u64,
    value: serde_json::Value,
) -> Checkpoint {
    Checkpoint {
        session_id: session_id.into(),
        namespace: ns.into(),
        id: id.into(),
        parent_id: None,
        at,
        value,
    }
}

/// Creates a session with [`head`]`(id, owner)` and `messages` on `store`, returning its head.
/// Panics if the store refuses.
pub async fn create(
    store: &dyn SessionStore,
    id: &str,
    owner: Option<&str>,
    messages: Vec<Message>,
) -> SessionHead {
    let mut h = head(id, owner);
    h.message_count = messages.len() as u64;
    store.create(h.clone(), messages.into()).await.unwrap();
    h
}

/// Commits a new status (and deadline) on a session, returning the new head.
async fn set_status(
    store: &dyn SessionStore,
    h: &SessionHead,
    status: SessionStatus,
    next_deadline: Option<u64>,
) -> SessionHead {
    let (mut new, mut c) = commit(h, vec![]);
    new.status = status;
    new.next_deadline = next_deadline;
    c.head = new.clone();
    store.commit(c).await.unwrap();
    new
}

fn is_not_found<T: std::fmt::Debug>(r: Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::NotFound(_)))
}

fn is_invalid<T: std::fmt::Debug>(r: &Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::Invalid(_)))
}

// ---------------------------------------------------------------------------------------------
// The checks.

/// Head, messages and run state come back exactly as stored, from either instance.
pub async fn round_trip(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("rt");
    let calls = [call("c0", "lookup")];
    let mut tool_result = ToolResultMessage::ok(&calls[0], "done");
    tool_result.details = Some(json!({"k": [1, 2, 3]}));
    let messages = vec![
        user("hello"),
        Message::Assistant(assistant("hi", &calls)),
        Message::ToolResult(tool_result),
    ];
    let h = create(s, &id, Some("alice"), messages.clone()).await;
    let loaded = s.load(&id).await.unwrap().unwrap();
    assert_eq!(loaded.head, h);
    assert_eq!(loaded.messages, messages);
    assert_eq!(loaded.run, None);
    assert_eq!((loaded.last_seq, loaded.reserved_seq), (0, 0));

    let run = run_state("run-1");
    let (mut new, mut c) = commit(&h, vec![Message::Assistant(assistant("more", &[]))]);
    new.status = SessionStatus::AwaitingToolExecution;
    new.next_deadline = Some(1_700_000_600_400);
    new.step_count = 1;
    c.head = new.clone();
    c.run = RunChange::Set(Box::new(run.clone()));
    let mut all = messages.clone();
    all.extend(c.messages.iter().map(|m| Message::clone(m)));
    s.commit(c).await.unwrap();

    let other = other(f).await;
    for store in [s, &*other] {
        let loaded = store.load(&id).await.unwrap().unwrap();
        assert_eq!(loaded.head, new);
        assert_eq!(loaded.messages, all);
        assert_eq!(loaded.run.as_ref(), Some(&run));
        assert_eq!(store.head(&id).await.unwrap(), Some(new.clone()));
    }

    // Keep leaves the run; Clear removes it.
    let (kept, c) = commit(&new, vec![]);
    s.commit(c).await.unwrap();
    assert_eq!(s.load(&id).await.unwrap().unwrap().run, Some(run));
    let (cleared, mut c) = commit(&kept, vec![]);
    c.run = RunChange::Clear;
    s.commit(c).await.unwrap();
    let loaded = s.load(&id).await.unwrap().unwrap();
    assert_eq!(loaded.run, None);
    assert_eq!(loaded.head, cleared);
    assert_eq!(loaded.messages, all);
}

/// A taken id is refused and the stored session untouched; a malformed new session is refused.
pub async fn already_exists(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("dup");
    let h = create(s, &id, None, vec![user("first")]).await;
    let mut again = head(&id, Some("mallory"));
    again.message_count = 0;
    assert_eq!(s.create(again, History::new()).await, Err(StoreError::AlreadyExists(id.clone())));
    let loaded = s.load(&id).await.unwrap().unwrap();
    assert_eq!(loaded.head, h);
    assert_eq!(loaded.messages.len(), 1);

    let bad_id = unique("bad");
    let mut versioned = head(&bad_id, None);
    versioned.version = 1;
    assert!(is_invalid(&s.create(versioned, History::new()).await));
    let miscounted = head(&bad_id, None);
    assert!(is_invalid(&s.create(miscounted, vec![user("x")].into()).await));
    assert_eq!(s.load(&bad_id).await.unwrap(), None);
}

/// Every method on an unknown session: NotFound, or "nothing" where the answer can say so.
pub async fn not_found(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("ghost");
    assert_eq!(s.load(&id).await.unwrap(), None);
    assert_eq!(s.head(&id).await.unwrap(), None);
    let (_, c) = commit(&head(&id, None), vec![]);
    assert!(is_not_found(s.commit(c).await));
    assert!(is_not_found(s.reserve_seqs(&id, 3).await));
    assert!(is_not_found(s.append_events(&id, vec![delta(&id, 1, "x")]).await));
    assert!(is_not_found(s.read_events(&id, 0, 10).await));
    assert!(is_not_found(s.wait_events(&id, 0, Duration::from_millis(50)).await));
    assert!(is_not_found(s.put_checkpoint(checkpoint(&id, "", "k1", 1, json!(1))).await));
    assert_eq!(s.get_checkpoint(&id, "", None).await.unwrap(), None);
    assert_eq!(s.get_checkpoint(&id, "", Some("k1")).await.unwrap(), None);
    assert!(s.list_checkpoints(&id, "").await.unwrap().is_empty());
    assert!(is_not_found(s.acquire_lease(&id, "h", Duration::from_secs(1)).await));
    assert!(is_not_found(s.renew_lease(&id, "h", Duration::from_secs(1)).await));
    s.release_lease(&id, "h").await.unwrap();
    assert!(!s.delete_session(&id, OwnerScope::Any).await.unwrap());
}

/// Messages are appended at their index over many commits, in order, never rewritten.
pub async fn append_only_order(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("log");
    let mut h = create(s, &id, None, vec![user("m0")]).await;
    let mut expected = vec!["m0".to_owned()];
    for i in 1..=40 {
        let n = 1 + i % 3;
        let batch: Vec<Message> = (0..n).map(|j| user(&format!("m{i}.{j}"))).collect();
        expected.extend((0..n).map(|j| format!("m{i}.{j}")));
        let (new, c) = commit(&h, batch);
        s.commit(c).await.unwrap();
        h = new;
    }
    let other = other(f).await;
    for store in [s, &*other] {
        let loaded = store.load(&id).await.unwrap().unwrap();
        let texts: Vec<String> = loaded.messages.iter().map(text_of).collect();
        assert_eq!(texts, expected);
        assert_eq!(loaded.head.message_count, expected.len() as u64);
        assert_eq!(loaded.head.version, 40);
    }
}

/// Two writers with the same expected version: exactly one wins, the other gets Conflict, and
/// the winner's run is what is stored. Many rounds, both instances, started together.
pub async fn concurrent_commits_conflict(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("race");
    let mut h = create(&*a, &id, None, vec![]).await;
    for round in 0..25 {
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let mut tasks = Vec::new();
        for (name, store) in [("a", Arc::clone(&a)), ("b", Arc::clone(&b))] {
            let (mut new, mut c) = commit(&h, vec![user(&format!("{name}{round}"))]);
            new.status = SessionStatus::Running;
            c.head = new;
            c.run = RunChange::Set(Box::new(run_state(&format!("run-{name}-{round}"))));
            let barrier = Arc::clone(&barrier);
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                (name, store.commit(c).await)
            }));
        }
        let mut winners = Vec::new();
        for task in tasks {
            let (name, result) = task.await.unwrap();
            match result {
                Ok(()) => winners.push(name),
                Err(StoreError::Conflict { session_id, expected, found }) => {
                    assert_eq!(session_id, id);
                    assert_eq!((expected, found), (h.version, h.version + 1));
                }
                Err(other) => panic!("round {round}: {other}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let winner = winners[0];
        let loaded = a.load(&id).await.unwrap().unwrap();
        assert_eq!(loaded.head.status, SessionStatus::Running);
        assert_eq!(loaded.run.unwrap().run_id, format!("run-{winner}-{round}"));
        assert_eq!(text_of(loaded.messages.last().unwrap()), format!("{winner}{round}"));
        assert_eq!(loaded.messages.len(), round + 1);
        // The run ends; the next round starts from rest.
        let rest = next(&loaded.head, 0);
        let mut rest = rest;
        rest.status = SessionStatus::Completed;
        let c = Commit {
            expected_version: loaded.head.version,
            head: rest.clone(),
            messages: vec![],
            run: RunChange::Clear,
            events: vec![],
        };
        a.commit(c).await.unwrap();
        h = rest;
    }
}

/// Inconsistent commits and appends are Invalid (stale ones Conflict), and write nothing.
pub async fn invalid_writes_change_nothing(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("inv");
    let h = create(s, &id, Some("olga"), vec![user("a")]).await;
    s.append_events(&id, vec![delta(&id, 1, "x"), delta(&id, 2, "y")]).await.unwrap();
    let before = s.load(&id).await.unwrap().unwrap();

    // Wrong message count.
    let (mut new, mut c) = commit(&h, vec![user("b")]);
    new.message_count += 1;
    c.head = new;
    assert!(is_invalid(&s.commit(c).await));
    // Wrong head version.
    let (mut new, mut c) = commit(&h, vec![user("b")]);
    new.version += 1;
    c.head = new;
    assert!(is_invalid(&s.commit(c).await));
    // Events not above the last stored seq.
    let (_, mut c) = commit(&h, vec![user("b")]);
    c.events = vec![delta(&id, 2, "again")];
    assert!(is_invalid(&s.commit(c).await));
    // Events out of order.
    let (_, mut c) = commit(&h, vec![user("b")]);
    c.events = vec![delta(&id, 4, "d"), delta(&id, 3, "c")];
    assert!(is_invalid(&s.commit(c).await));
    // An event of another session.
    let (_, mut c) = commit(&h, vec![user("b")]);
    c.events = vec![delta("someone-else", 3, "c")];
    assert!(is_invalid(&s.commit(c).await));
    // A changed owner.
    let (mut new, mut c) = commit(&h, vec![user("b")]);
    new.owner = Some("mallory".into());
    c.head = new;
    assert!(is_invalid(&s.commit(c).await));
    // Stale.
    let (_, mut c) = commit(&h, vec![user("b")]);
    c.expected_version = 7;
    c.head.version = 8;
    assert_eq!(
        s.commit(c).await,
        Err(StoreError::Conflict { session_id: id.clone(), expected: 7, found: 0 })
    );
    // Appends: repeated, out of order, duplicated, zero, foreign.
    for events in [
        vec![delta(&id, 2, "dup")],
        vec![delta(&id, 3, "c"), delta(&id, 5, "e"), delta(&id, 4, "d")],
        vec![delta(&id, 3, "c"), delta(&id, 3, "c")],
        vec![delta(&id, 0, "zero")],
        vec![delta("someone-else", 3, "c")],
    ] {
        assert!(is_invalid(&s.append_events(&id, events).await));
    }
    assert!(is_invalid(&s.reserve_seqs(&id, 0).await));

    let after = s.load(&id).await.unwrap().unwrap();
    assert_eq!(after, before);
    let events = s.read_events(&id, 0, 100).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
}

/// A run's events, deltas merged before numbering, appended in blocks through both instances
/// (some in commits): reading after every seq, page by page, gives every later event once, in
/// order, and the merged deltas concatenate to the whole text.
pub async fn event_log_after_every_seq(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("ev");
    let mut h = create(&*a, &id, None, vec![]).await;

    // 300 tokens, merged into deltas of 1..=7 tokens (as a lagging reader or store would).
    let tokens: Vec<String> = (0..300).map(|i| format!("w{i} ")).collect();
    let full: String = tokens.concat();
    let mut deltas = Vec::new();
    let mut i = 0;
    let mut size = 3usize;
    while i < tokens.len() {
        size = (size * 5 + 1) % 7 + 1;
        let end = (i + size).min(tokens.len());
        deltas.push(tokens[i..end].concat());
        i = end;
    }
    let mut events: Vec<AgentEvent> = vec![
        AgentEvent::SessionStart {
            session_id: id.clone(),
            run_id: "run-1".into(),
            agent: "react".into(),
            recovers: None,
        },
        AgentEvent::TextStart { index: 0 },
    ];
    events.extend(deltas.iter().map(|d| AgentEvent::TextDelta { index: 0, delta: d.clone() }));
    events.push(AgentEvent::TextEnd { index: 0, text: full.clone() });

    let mut stored: Vec<Arc<EventRecord>> = Vec::new();
    let mut block = 0;
    let mut rest = events.as_slice();
    while !rest.is_empty() {
        block += 1;
        let n = rest.len().min(1 + block % 9);
        let store = if block.is_multiple_of(2) { &b } else { &a };
        let first = store.reserve_seqs(&id, n as u64).await.unwrap();
        let records: Vec<Arc<EventRecord>> = rest[..n]
            .iter()
            .enumerate()
            .map(|(k, e)| record(&id, first + k as u64, e.clone()))
            .collect();
        if block.is_multiple_of(3) {
            let (new, mut c) = commit(&h, vec![]);
            c.events = records.clone();
            store.commit(c).await.unwrap();
            h = new;
        } else {
            store.append_events(&id, records.clone()).await.unwrap();
        }
        stored.extend(records);
        rest = &rest[n..];
    }
    let last = stored.last().unwrap().seq;
    assert_eq!(last, events.len() as u64, "reserved blocks are contiguous from 1");

    let all = b.read_events(&id, 0, 10_000).await.unwrap();
    assert_eq!(all, stored);
    let text: String = all
        .iter()
        .filter_map(|e| match &e.event {
            AgentEvent::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, full);

    for after in 0..=last {
        let mut got = Vec::new();
        let mut cursor = after;
        loop {
            let page = a.read_events(&id, cursor, 7).await.unwrap();
            if page.is_empty() {
                break;
            }
            assert!(page.len() <= 7);
            cursor = page.last().unwrap().seq;
            got.extend(page);
        }
        let seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, ((after + 1)..=last).collect::<Vec<_>>(), "after {after}");
        assert_eq!(got.as_slice(), &stored[after as usize..]);
    }
    let loaded = a.load(&id).await.unwrap().unwrap();
    assert_eq!((loaded.last_seq, loaded.reserved_seq), (last, last));
}

/// Reservations from concurrent callers on two instances never overlap and grow per caller;
/// appends above the reservation push later reservations above them.
pub async fn reserve_seqs_never_overlap(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("seq");
    create(&*a, &id, None, vec![]).await;
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let store = if t.is_multiple_of(2) { Arc::clone(&a) } else { Arc::clone(&b) };
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for k in 0..15u64 {
                let count = 1 + (t + k) % 4;
                got.push((store.reserve_seqs(&id, count).await.unwrap(), count));
            }
            got
        }));
    }
    let mut ranges = Vec::new();
    for task in tasks {
        let got = task.await.unwrap();
        for pair in got.windows(2) {
            assert!(pair[1].0 >= pair[0].0 + pair[0].1, "a caller's reservations grow: {pair:?}");
        }
        ranges.extend(got);
    }
    ranges.sort();
    assert!(ranges[0].0 >= 1);
    for pair in ranges.windows(2) {
        assert!(pair[1].0 >= pair[0].0 + pair[0].1, "overlap: {pair:?}");
    }
    let end = ranges.iter().map(|(first, n)| first + n - 1).max().unwrap();
    assert_eq!(a.load(&id).await.unwrap().unwrap().reserved_seq, end);

    // An event numbered above every reservation: the next reservation starts above it.
    b.append_events(&id, vec![delta(&id, end + 10, "late")]).await.unwrap();
    let first = a.reserve_seqs(&id, 2).await.unwrap();
    assert_eq!(first, end + 11);
}

/// Checkpoints: put, get by id and latest, list oldest first, replace in place, namespaces.
pub async fn checkpoints(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("cp");
    create(s, &id, None, vec![]).await;
    let mut c1 = checkpoint(&id, "", "k1", 100, json!({"step": 1}));
    let mut c2 = checkpoint(&id, "", "k2", 200, json!({"step": 2}));
    c2.parent_id = Some("k1".into());
    let mut c3 = checkpoint(&id, "", "k3", 200, json!({"step": 3, "deep": {"x": [1, 2]}}));
    c3.parent_id = Some("k2".into());
    let sub = checkpoint(&id, "tot:1", "s1", 999, json!("sub"));
    for c in [&c1, &c2, &c3, &sub] {
        s.put_checkpoint(c.clone()).await.unwrap();
    }
    // The latest: greatest `at`, ties to the one stored last.
    assert_eq!(s.get_checkpoint(&id, "", None).await.unwrap(), Some(c3.clone()));
    assert_eq!(s.get_checkpoint(&id, "", Some("k2")).await.unwrap(), Some(c2.clone()));
    assert_eq!(s.get_checkpoint(&id, "", Some("nope")).await.unwrap(), None);
    assert_eq!(s.get_checkpoint(&id, "tot:1", None).await.unwrap(), Some(sub.clone()));
    assert_eq!(s.get_checkpoint(&id, "other", None).await.unwrap(), None);
    assert_eq!(
        s.list_checkpoints(&id, "").await.unwrap(),
        vec![c1.clone(), c2.clone(), c3.clone()]
    );
    assert_eq!(s.list_checkpoints(&id, "tot:1").await.unwrap(), vec![sub.clone()]);

    // Replacing keeps the place among equal times and changes the value.
    c2.value = json!({"step": 2, "replaced": true});
    s.put_checkpoint(c2.clone()).await.unwrap();
    assert_eq!(
        s.list_checkpoints(&id, "").await.unwrap(),
        vec![c1.clone(), c2.clone(), c3.clone()]
    );
    assert_eq!(s.get_checkpoint(&id, "", None).await.unwrap(), Some(c3.clone()));
    // Replacing with a later time makes it the latest.
    c1.at = 300;
    s.put_checkpoint(c1.clone()).await.unwrap();
    assert_eq!(s.get_checkpoint(&id, "", None).await.unwrap(), Some(c1.clone()));
    let other = other(f).await;
    assert_eq!(other.list_checkpoints(&id, "").await.unwrap(), vec![c2, c3, c1]);

    // Many sessions in one query: only the keys with a checkpoint in the namespace come back.
    let id2 = unique("cp");
    create(s, &id2, None, vec![]).await;
    s.put_checkpoint(checkpoint(&id2, "weft.abort", "run-b", 1, json!({}))).await.unwrap();
    s.put_checkpoint(checkpoint(&id, "weft.abort", "run-a", 1, json!({}))).await.unwrap();
    let key = |s: &str, k: &str| (s.to_string(), k.to_string());
    let mut keys = vec![
        key(&id, "run-a"),
        key(&id, "run-b"),
        key(&id2, "run-b"),
        key(&id2, "k1"),
        key("no-such-session", "run-a"),
    ];
    // More keys than one SQLite statement binds at once.
    keys.extend((0..300).map(|i| key(&id, &format!("run-{i}"))));
    keys.push(key(&id2, "run-b"));
    let mut found = other.find_checkpoints("weft.abort", &keys).await.unwrap();
    found.sort();
    found.dedup();
    let mut expected = vec![key(&id, "run-a"), key(&id2, "run-b")];
    expected.sort();
    assert_eq!(found, expected);
    assert!(s.find_checkpoints("", &[key(&id, "run-a")]).await.unwrap().is_empty());
    assert_eq!(s.find_checkpoints("", &[key(&id, "k1")]).await.unwrap(), vec![key(&id, "k1")]);
    assert!(s.find_checkpoints("weft.abort", &[]).await.unwrap().is_empty());
}

/// Listing and deleting see only the owner's sessions; `Any` sees all, newest first.
pub async fn owner_isolation(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let tag = unique("own");
    let alice = format!("alice-{tag}");
    let bob = format!("bob-{tag}");
    let mut ids = Vec::new();
    for (k, owner) in [Some(&alice), Some(&bob), Some(&alice), None].into_iter().enumerate() {
        let id = format!("{tag}-{k}");
        let mut h = head(&id, owner.map(String::as_str));
        h.updated_at = 1_800_000_000_000 + k as u64;
        s.create(h, History::new()).await.unwrap();
        ids.push(id);
    }
    let listed = |heads: Vec<SessionHead>| heads.into_iter().map(|h| h.id).collect::<Vec<_>>();
    assert_eq!(
        listed(s.list_sessions(OwnerScope::Owner(&alice), 10).await.unwrap()),
        vec![ids[2].clone(), ids[0].clone()]
    );
    assert_eq!(
        listed(s.list_sessions(OwnerScope::Owner(&alice), 1).await.unwrap()),
        vec![ids[2].clone()]
    );
    assert_eq!(
        listed(s.list_sessions(OwnerScope::Owner(&bob), 10).await.unwrap()),
        vec![ids[1].clone()]
    );
    assert!(s.list_sessions(OwnerScope::Owner("nobody"), 10).await.unwrap().is_empty());
    let any = listed(s.list_sessions(OwnerScope::Any, 4).await.unwrap());
    assert_eq!(any, vec![ids[3].clone(), ids[2].clone(), ids[1].clone(), ids[0].clone()]);

    // Bob cannot delete Alice's session nor the unowned one; Alice can delete hers.
    assert!(!s.delete_session(&ids[0], OwnerScope::Owner(&bob)).await.unwrap());
    assert!(!s.delete_session(&ids[3], OwnerScope::Owner(&bob)).await.unwrap());
    assert!(s.load(&ids[0]).await.unwrap().is_some());
    assert!(s.delete_session(&ids[0], OwnerScope::Owner(&alice)).await.unwrap());
    assert!(!s.delete_session(&ids[0], OwnerScope::Owner(&alice)).await.unwrap());
    assert!(s.load(&ids[0]).await.unwrap().is_none());
    assert_eq!(
        listed(s.list_sessions(OwnerScope::Owner(&alice), 10).await.unwrap()),
        vec![ids[2].clone()]
    );
    assert!(s.delete_session(&ids[3], OwnerScope::Any).await.unwrap());
}

/// A waiting tail is woken by an append from another instance (and by a commit carrying
/// events), answers at once when events are there, and times out when nothing comes.
pub async fn wait_events_across_instances(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("tail");
    let h = create(&*a, &id, None, vec![]).await;

    // Woken by an append from the other instance.
    let waiter = {
        let a = Arc::clone(&a);
        let id = id.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (a.wait_events(&id, 0, Duration::from_secs(20)).await, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    b.append_events(&id, vec![delta(&id, 1, "hello")]).await.unwrap();
    let (woken, waited) = waiter.await.unwrap();
    assert_eq!(woken, Ok(true));
    assert!(
        waited < Duration::from_secs(10),
        "woken by the append, not by the timeout: {waited:?}"
    );

    // Woken by a commit with events from the other instance.
    let waiter = {
        let a = Arc::clone(&a);
        let id = id.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (a.wait_events(&id, 1, Duration::from_secs(20)).await, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let (_, mut c) = commit(&h, vec![]);
    c.events = vec![delta(&id, 2, "world")];
    b.commit(c).await.unwrap();
    let (woken, waited) = waiter.await.unwrap();
    assert_eq!(woken, Ok(true));
    assert!(waited < Duration::from_secs(10), "woken by the commit: {waited:?}");

    // Events already there: at once.
    let started = Instant::now();
    assert_eq!(a.wait_events(&id, 1, Duration::MAX).await, Ok(true));
    assert!(started.elapsed() < Duration::from_secs(10));

    // Nothing comes: false after the timeout, not before.
    let started = Instant::now();
    assert_eq!(a.wait_events(&id, 2, Duration::from_millis(300)).await, Ok(false));
    assert!(started.elapsed() >= Duration::from_millis(300));

    // Another session's events do not answer this one.
    let quiet = unique("quiet");
    create(&*a, &quiet, None, vec![]).await;
    let waiter = {
        let a = Arc::clone(&a);
        let quiet = quiet.clone();
        tokio::spawn(async move { a.wait_events(&quiet, 0, Duration::from_millis(400)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    b.append_events(&id, vec![delta(&id, 3, "!")]).await.unwrap();
    assert_eq!(waiter.await.unwrap(), Ok(false));
}

/// Leases: acquire, refuse others, renew, release; expire after the ttl and are taken over,
/// after which the old holder's renewal fails.
pub async fn leases(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("lease");
    create(&*a, &id, None, vec![]).await;
    // Margins of 600 ms or more on either side of every expiry: the stores' round trips on a
    // busy machine stay well inside them.
    let ttl = Duration::from_millis(1000);

    assert!(a.acquire_lease(&id, "h1", ttl).await.unwrap());
    assert!(!b.acquire_lease(&id, "h2", ttl).await.unwrap());
    assert!(a.acquire_lease(&id, "h1", ttl).await.unwrap(), "the holder may take it again");
    assert!(a.renew_lease(&id, "h1", ttl).await.unwrap());
    assert!(!b.renew_lease(&id, "h2", ttl).await.unwrap(), "only the holder renews");
    b.release_lease(&id, "h2").await.unwrap();
    assert!(
        !b.acquire_lease(&id, "h2", ttl).await.unwrap(),
        "releasing another's lease does nothing"
    );

    // Renewing keeps it past the first ttl.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(a.renew_lease(&id, "h1", ttl).await.unwrap());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!b.acquire_lease(&id, "h2", ttl).await.unwrap(), "renewed: still held");

    // Expiry and take-over.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(
        b.acquire_lease(&id, "h2", Duration::from_secs(30)).await.unwrap(),
        "expired: taken over"
    );
    assert!(!a.renew_lease(&id, "h1", ttl).await.unwrap(), "renewal fails after a take-over");
    assert!(!a.acquire_lease(&id, "h1", ttl).await.unwrap());
    a.release_lease(&id, "h1").await.unwrap();
    assert!(!a.acquire_lease(&id, "h3", ttl).await.unwrap(), "h2 still holds it");

    // Release frees it at once.
    b.release_lease(&id, "h2").await.unwrap();
    assert!(a.acquire_lease(&id, "h3", ttl).await.unwrap());
    // Absurd ttls are cut, not errors.
    assert!(a.acquire_lease(&id, "h3", Duration::MAX).await.unwrap());
    assert!(b.renew_lease(&id, "h3", Duration::MAX).await.unwrap());
    assert!(!b.acquire_lease(&id, "h4", ttl).await.unwrap());
}

/// `take_over_process_leases` gives every lease held for one process (its runs' holders are
/// `process/run`) to an heir at once, expired or not, from any instance, and no other lease:
/// not a process whose name merely starts with the same characters.
pub async fn process_leases(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let ttl = Duration::from_secs(60);
    let tag = unique("proc");
    let holders = ["p1/r1", "p1/r2", "p1", "p10/r1", "p1x", "p2/r1", "p1-r1", "p1/old"];
    let mut ids = Vec::new();
    for (k, holder) in holders.iter().enumerate() {
        let id = format!("{tag}-{k}");
        create(&*a, &id, None, vec![]).await;
        // The last one has expired: it is taken over all the same.
        let held = if *holder == "p1/old" { Duration::from_millis(1) } else { ttl };
        assert!(a.acquire_lease(&id, holder, held).await.unwrap());
        ids.push(id);
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let taken = b.take_over_process_leases("p1", "heir/1", ttl).await.unwrap();
    let mut expected: Vec<String> = ids
        .iter()
        .zip(holders)
        .filter(|(_, h)| matches!(*h, "p1/r1" | "p1/r2" | "p1" | "p1/old"))
        .map(|(id, _)| id.clone())
        .collect();
    expected.sort();
    let mut got = taken.clone();
    got.sort();
    assert_eq!(got, expected);
    for (id, holder) in ids.iter().zip(holders) {
        let taken = expected.contains(id);
        // Nobody else can take them; the heir holds them (and renews them).
        assert!(!a.acquire_lease(id, "taker", ttl).await.unwrap(), "{holder}");
        assert_eq!(a.renew_lease(id, "heir/1", ttl).await.unwrap(), taken, "{holder}");
        assert_eq!(a.renew_lease(id, holder, ttl).await.unwrap(), !taken, "{holder}");
    }
    assert!(a.take_over_process_leases("p1", "heir/2", ttl).await.unwrap().is_empty());
    assert!(a.take_over_process_leases("nobody", "heir/2", ttl).await.unwrap().is_empty());
}

/// `due_sessions` finds running sessions without a live lease and suspended ones whose deadline
/// passed, and nothing else.
pub async fn due_sessions(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let tag = unique("due");
    let now = 1_900_000_000_000u64;
    let mut ids = std::collections::BTreeMap::new();
    for name in [
        "run-expired",
        "run-no-lease",
        "run-live",
        "tool-due",
        "approval-due",
        "tool-later",
        "tool-no-deadline",
        "done",
        "idle",
    ] {
        let id = format!("{tag}-{name}");
        let h = create(s, &id, None, vec![]).await;
        let (status, deadline) = match name {
            "run-expired" | "run-no-lease" | "run-live" => (SessionStatus::Running, None),
            "tool-due" => (SessionStatus::AwaitingToolExecution, Some(now - 1)),
            "approval-due" => (SessionStatus::AwaitingApproval, Some(now)),
            "tool-later" => (SessionStatus::AwaitingToolExecution, Some(now + 1)),
            "tool-no-deadline" => (SessionStatus::AwaitingToolExecution, None),
            "done" => (SessionStatus::Completed, Some(now - 1000)),
            _ => (SessionStatus::Idle, None),
        };
        if status != SessionStatus::Idle {
            set_status(s, &h, status, deadline).await;
        }
        ids.insert(name, id);
    }
    assert!(
        s.acquire_lease(&ids["run-expired"], "dead", Duration::from_millis(150)).await.unwrap()
    );
    assert!(s.acquire_lease(&ids["run-live"], "alive", Duration::from_secs(60)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;

    let due: BTreeSet<String> = s.due_sessions(now, 100).await.unwrap().into_iter().collect();
    let want: BTreeSet<String> = ["run-expired", "run-no-lease", "tool-due", "approval-due"]
        .iter()
        .map(|n| ids[n].clone())
        .collect();
    assert_eq!(due, want);
    assert_eq!(s.due_sessions(now, 2).await.unwrap().len(), 2);
    // Taking the expired lease over makes it not due.
    assert!(
        s.acquire_lease(&ids["run-expired"], "recovery", Duration::from_secs(60)).await.unwrap()
    );
    let due: BTreeSet<String> = s.due_sessions(now, 100).await.unwrap().into_iter().collect();
    assert!(!due.contains(&ids["run-expired"]));
    assert_eq!(due.len(), 3);
}

/// Deleting a session removes everything it had (events, checkpoints, run, lease); a waiting
/// tail learns it is gone; the id can be used afresh.
pub async fn delete_removes_everything(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("del");
    let h = create(&*a, &id, Some("dora"), vec![user("x")]).await;
    let (_, mut c) = commit(&h, vec![user("y")]);
    c.run = RunChange::Set(Box::new(run_state("run-1")));
    c.events = vec![delta(&id, 1, "a"), delta(&id, 2, "b")];
    a.commit(c).await.unwrap();
    a.reserve_seqs(&id, 10).await.unwrap();
    a.put_checkpoint(checkpoint(&id, "", "k1", 1, json!(1))).await.unwrap();
    a.put_checkpoint(checkpoint(&id, "n", "k2", 2, json!(2))).await.unwrap();
    assert!(a.acquire_lease(&id, "holder", Duration::from_secs(60)).await.unwrap());

    let waiter = {
        let a = Arc::clone(&a);
        let id = id.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (a.wait_events(&id, 2, Duration::from_secs(20)).await, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(b.delete_session(&id, OwnerScope::Owner("dora")).await.unwrap());
    let (answer, waited) = waiter.await.unwrap();
    assert!(is_not_found(answer), "a tail on a deleted session ends");
    assert!(waited < Duration::from_secs(10), "woken by the delete: {waited:?}");

    for store in [&a, &b] {
        assert_eq!(store.load(&id).await.unwrap(), None);
        assert!(is_not_found(store.read_events(&id, 0, 10).await));
        assert_eq!(store.get_checkpoint(&id, "", None).await.unwrap(), None);
        assert!(store.list_checkpoints(&id, "n").await.unwrap().is_empty());
    }
    assert!(
        !a.list_sessions(OwnerScope::Owner("dora"), 100).await.unwrap().iter().any(|h| h.id == id)
    );

    // The id again: nothing of the old session shows through.
    create(&*a, &id, None, vec![]).await;
    let fresh = a.load(&id).await.unwrap().unwrap();
    assert_eq!(
        (fresh.last_seq, fresh.reserved_seq, fresh.run, fresh.messages.len()),
        (0, 0, None, 0)
    );
    assert!(a.read_events(&id, 0, 10).await.unwrap().is_empty());
    assert!(a.list_checkpoints(&id, "").await.unwrap().is_empty());
    assert!(
        b.acquire_lease(&id, "newcomer", Duration::from_secs(1)).await.unwrap(),
        "no lease left"
    );
    assert_eq!(a.reserve_seqs(&id, 1).await.unwrap(), 1);
}

/// Many writes at once, some failing: each caller gets its own answer, and the failures write
/// nothing while the successes are all stored (for SQLite: one batch, savepoints).
pub async fn failures_fail_only_their_caller(f: &dyn Subject) {
    let s = f.store();
    let tag = unique("iso");
    let mut heads = Vec::new();
    for k in 0..20 {
        heads.push(create(&*s, &format!("{tag}-{k}"), None, vec![]).await);
    }
    let mut tasks = Vec::new();
    for h in &heads {
        let id = h.id.clone();
        let good = {
            let (s, id) = (Arc::clone(&s), id.clone());
            tokio::spawn(
                async move { ("good", s.append_events(&id, vec![delta(&id, 1, "ok")]).await) },
            )
        };
        let bad = {
            let (s, id) = (Arc::clone(&s), id.clone());
            tokio::spawn(async move {
                ("bad", s.append_events(&id, vec![delta(&id, 5, "x"), delta(&id, 4, "y")]).await)
            })
        };
        let stale = {
            let s = Arc::clone(&s);
            let (_, mut c) = commit(h, vec![user("stale")]);
            c.expected_version = 3;
            c.head.version = 4;
            tokio::spawn(async move { ("stale", s.commit(c).await) })
        };
        let good_commit = {
            let s = Arc::clone(&s);
            let (_, c) = commit(h, vec![user("fresh")]);
            tokio::spawn(async move { ("commit", s.commit(c).await) })
        };
        tasks.extend([good, bad, stale, good_commit]);
    }
    for task in tasks {
        let (kind, result) = task.await.unwrap();
        match kind {
            "good" | "commit" => assert_eq!(result, Ok(()), "{kind}"),
            "bad" => assert!(is_invalid(&result), "{kind}: {result:?}"),
            _ => assert!(matches!(result, Err(StoreError::Conflict { .. })), "{kind}: {result:?}"),
        }
    }
    for h in &heads {
        let loaded = s.load(&h.id).await.unwrap().unwrap();
        assert_eq!(loaded.head.version, 1);
        assert_eq!(loaded.messages.iter().map(text_of).collect::<Vec<_>>(), vec!["fresh"]);
        let events = s.read_events(&h.id, 0, 10).await.unwrap();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1]);
    }
}

/// A write probe succeeds on a store that can write and leaves nothing behind: no session, no
/// lease, nothing due (the memory store runs the trait's default: a session created and
/// deleted).
pub async fn probe_write_leaves_nothing(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let before = s.list_sessions(OwnerScope::Any, 1000).await.unwrap();
    for _ in 0..3 {
        s.probe_write().await.unwrap();
    }
    assert_eq!(s.list_sessions(OwnerScope::Any, 1000).await.unwrap(), before);
    assert!(s.due_sessions(u64::MAX / 2, 100).await.unwrap().is_empty());
    assert_eq!(s.head("~probe").await.unwrap(), None);
}

/// Events that repeat messages of the log (`message_end`, `error`, `step_end`, `session_end`,
/// with a [`MessageSpan`]) read back whole, whether the messages were in the log before the
/// append, arrive in the same commit, or are not in the log at all (then the event is kept
/// whole); the SQL stores keep each message once: the stored event does not repeat it.
pub async fn events_repeating_messages(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("refs");
    let question = user("what is the weather in Paris, in great detail please");
    let h = create(s, &id, None, vec![question.clone()]).await;
    let calls = [call("c1", "weather")];
    let answer = Message::Assistant(assistant("let me look that up for you right now", &calls));
    let result =
        Message::ToolResult(ToolResultMessage::ok(&calls[0], "sunny and 21 degrees in Paris"));
    let (question, answer, result) = (Arc::new(question), Arc::new(answer), Arc::new(result));
    let spanned = |seq: u64, event: AgentEvent, first: u64, count: u64| {
        let mut r = Arc::unwrap_or_clone(record(&id, seq, event));
        r.messages = Some(MessageSpan { first, count });
        Arc::new(r)
    };
    let step = AgentStep {
        step_id: "step-1".into(),
        step_index: 0,
        timestamp: 1_700_000_000_200,
        llm_response: match &*answer {
            Message::Assistant(a) => a.clone(),
            _ => unreachable!(),
        },
        latency_ms: 40,
        tool_results: Vec::new(),
        annotations: StepAnnotations::default(),
    };
    // 1: the question, in the log since the session was created.
    let first = vec![spanned(1, AgentEvent::MessageEnd { message: Arc::clone(&question) }, 0, 1)];
    s.append_events(&id, first.clone()).await.unwrap();
    // 2–3: the answer's events arrive in the commit that appends it (and the result).
    let (h2, mut c) = commit(&h, vec![]);
    c.messages = vec![Arc::clone(&answer), Arc::clone(&result)];
    c.head.message_count = 3;
    c.events = vec![
        spanned(2, AgentEvent::MessageEnd { message: Arc::clone(&answer) }, 1, 1),
        spanned(3, AgentEvent::StepEnd { step: Arc::new(step) }, 1, 1),
    ];
    let in_commit = c.events.clone();
    s.commit(c).await.unwrap();
    let _ = h2;
    // 4–6: after the commit; 5 names a message the log does not have (kept whole).
    let stray = Arc::new(user("a message the log never got"));
    let later = vec![
        spanned(
            4,
            AgentEvent::Error { error: "it broke".into(), message: Some(Arc::clone(&answer)) },
            1,
            1,
        ),
        spanned(5, AgentEvent::MessageEnd { message: Arc::clone(&stray) }, 3, 1),
        spanned(
            6,
            AgentEvent::SessionEnd {
                session_id: id.clone(),
                status: SessionStatus::Completed,
                messages: vec![Arc::clone(&question), Arc::clone(&answer), Arc::clone(&result)],
                usage: Box::default(),
                cost: Box::default(),
            },
            0,
            3,
        ),
    ];
    s.append_events(&id, later.clone()).await.unwrap();
    let appended: Vec<_> = first.iter().chain(&in_commit).chain(&later).cloned().collect();

    for store in [s, &*other(f).await] {
        for after in 0..6 {
            let read = store.read_events(&id, after, 2).await.unwrap();
            let expected = &appended[after as usize..(after as usize + 2).min(6)];
            let events = |r: &[Arc<EventRecord>]| {
                r.iter().map(|e| (e.seq, e.event.clone())).collect::<Vec<_>>()
            };
            assert_eq!(events(&read), events(expected), "after {after}");
        }
    }
    for seq in [1, 2, 3, 4, 6] {
        if let Some(raw) = f.raw_event(&id, seq).await {
            for text in ["great detail", "look that up", "21 degrees"] {
                assert!(!raw.contains(text), "event {seq} repeats a message: {raw}");
            }
        }
    }
    if let Some(raw) = f.raw_event(&id, 5).await {
        assert!(raw.contains("the log never got"), "a message the log lacks is kept: {raw}");
    }
}
