//! One conformance suite for every `SessionStore` backend.
//!
//! Each check is a generic `async fn name(f: &Fixture)`; the `conformance!` macro at the bottom
//! runs every check against the memory store (`memory::name`), a SQLite store on a temporary
//! file (`sqlite::name`) and a Postgres store in a fresh schema (`postgres::name`, when
//! `WEFT_TEST_POSTGRES_URL` is set: without it the Postgres tests print a SKIPPED line and pass,
//! except under `CI=true`, where a missing Postgres is a failure).
//!
//! `f.other()` opens a second instance on the same database (for memory: a clone sharing the same
//! map), so that checks can prove what crosses instances: conflicts, reservations, wake-ups.

#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use sqlx::{Connection, Executor, Row};
use weft_core::message::{
    AssistantContent, AssistantMessage, Message, StopReason, TextContent, ThinkingContent,
    ToolCall, ToolResultMessage, UserMessage,
};
use weft_core::session::{CallSlot, CallState, OpenTurn, SessionStatus};
use weft_core::step::{AgentStep, StepAnnotations, ToolExecutionResult};
use weft_core::store::{
    Checkpoint, Commit, EventRecord, MessageSpan, OwnerScope, RunChange, RunState, SessionHead,
    SessionStore, StoreError,
};
use weft_core::tool::ToolSpec;
use weft_core::usage::{Cost, Usage};
use weft_core::{AgentEvent, History};
use weft_store::{MemoryStore, PostgresOptions, PostgresStore, SqliteStore};

// ---------------------------------------------------------------------------------------------
// Fixtures.

enum Reopen {
    Memory(MemoryStore),
    Sqlite(std::path::PathBuf),
    Postgres { admin_url: String, url: String, schema: String },
}

pub struct Fixture {
    store: Arc<dyn SessionStore>,
    reopen: Reopen,
    _dir: Option<tempfile::TempDir>,
}

impl Fixture {
    /// Another instance on the same database.
    async fn other(&self) -> Arc<dyn SessionStore> {
        match &self.reopen {
            Reopen::Memory(store) => Arc::new(store.clone()),
            Reopen::Sqlite(path) => Arc::new(SqliteStore::open(path).await.unwrap()),
            Reopen::Postgres { url, .. } => Arc::new(pg_store(url).await),
        }
    }

    /// The `event` column of a stored event as the database holds it (`None` for memory).
    async fn raw_event(&self, session_id: &str, seq: u64) -> Option<String> {
        let query = "SELECT event FROM events WHERE session_id = $1 AND seq = $2";
        match &self.reopen {
            Reopen::Memory(_) => None,
            Reopen::Sqlite(path) => {
                let mut conn =
                    sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display()))
                        .await
                        .unwrap();
                let row = sqlx::query(query)
                    .bind(session_id)
                    .bind(seq as i64)
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
                Some(row.get("event"))
            }
            Reopen::Postgres { url, .. } => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                let row = sqlx::query(query)
                    .bind(session_id)
                    .bind(seq as i64)
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
                Some(row.get("event"))
            }
        }
    }

    async fn finish(self) {
        let Fixture { store, reopen, _dir } = self;
        drop(store);
        if let Reopen::Postgres { admin_url, schema, .. } = reopen {
            let mut admin = sqlx::PgConnection::connect(&admin_url).await.unwrap();
            admin
                .execute(format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE").as_str())
                .await
                .unwrap();
        }
    }
}

async fn memory_fixture() -> Fixture {
    let store = MemoryStore::new();
    Fixture { store: Arc::new(store.clone()), reopen: Reopen::Memory(store), _dir: None }
}

async fn sqlite_fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let store = SqliteStore::open(&path).await.unwrap();
    Fixture { store: Arc::new(store), reopen: Reopen::Sqlite(path), _dir: Some(dir) }
}

/// The test database's URL, or `None` (after saying so loudly) when there is none.
fn postgres_url() -> Option<String> {
    match std::env::var("WEFT_TEST_POSTGRES_URL") {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            if std::env::var("CI").as_deref() == Ok("true") {
                panic!(
                    "WEFT_TEST_POSTGRES_URL is not set under CI: the Postgres store must be tested \
                     (eval \"$(bash .ci/postgres.sh)\" sets it)"
                );
            }
            eprintln!(
                "SKIPPED: set WEFT_TEST_POSTGRES_URL to run the Postgres store tests \
                 (eval \"$(bash .ci/postgres.sh)\")"
            );
            None
        }
    }
}

async fn pg_store(url: &str) -> PostgresStore {
    let options = PostgresOptions { max_connections: 4, ..PostgresOptions::default() };
    PostgresStore::connect_with(url, options).await.unwrap()
}

/// The URL with `search_path` set to `schema`.
fn with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options[search_path]={schema}")
}

/// A fresh, empty schema for one test (schemas of runs older than an hour are dropped, so a
/// crashed run leaves nothing for long).
async fn fresh_schema(admin_url: &str) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let mut admin = sqlx::PgConnection::connect(admin_url).await.unwrap();
    let old = sqlx::query("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'weft\\_t\\_%'")
        .fetch_all(&mut admin)
        .await
        .unwrap();
    for row in old {
        let name: String = row.get(0);
        let born = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok()).unwrap_or(now);
        if born + 3600 < now {
            let _ =
                admin.execute(format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE").as_str()).await;
        }
    }
    let schema = format!("weft_t_{now}_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    admin.execute(format!("CREATE SCHEMA \"{schema}\"").as_str()).await.unwrap();
    schema
}

async fn postgres_fixture() -> Option<Fixture> {
    let admin_url = postgres_url()?;
    let schema = fresh_schema(&admin_url).await;
    let url = with_schema(&admin_url, &schema);
    let store = pg_store(&url).await;
    Some(Fixture {
        store: Arc::new(store),
        reopen: Reopen::Postgres { admin_url, url, schema },
        _dir: None,
    })
}

// ---------------------------------------------------------------------------------------------
// Data.

fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

fn user(text: &str) -> Message {
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

fn head(id: &str, owner: Option<&str>) -> SessionHead {
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

fn commit(h: &SessionHead, messages: Vec<Message>) -> (SessionHead, Commit) {
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

fn record(session_id: &str, seq: u64, event: AgentEvent) -> Arc<EventRecord> {
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

fn delta(session_id: &str, seq: u64, text: &str) -> Arc<EventRecord> {
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

async fn create(
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
async fn round_trip(f: &Fixture) {
    let s = &*f.store;
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

    let other = f.other().await;
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
async fn already_exists(f: &Fixture) {
    let s = &*f.store;
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
async fn not_found(f: &Fixture) {
    let s = &*f.store;
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
async fn append_only_order(f: &Fixture) {
    let s = &*f.store;
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
    let other = f.other().await;
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
async fn concurrent_commits_conflict(f: &Fixture) {
    let a = Arc::clone(&f.store);
    let b = f.other().await;
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
async fn invalid_writes_change_nothing(f: &Fixture) {
    let s = &*f.store;
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
async fn event_log_after_every_seq(f: &Fixture) {
    let a = Arc::clone(&f.store);
    let b = f.other().await;
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
async fn reserve_seqs_never_overlap(f: &Fixture) {
    let a = Arc::clone(&f.store);
    let b = f.other().await;
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
async fn checkpoints(f: &Fixture) {
    let s = &*f.store;
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
    let other = f.other().await;
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
async fn owner_isolation(f: &Fixture) {
    let s = &*f.store;
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
async fn wait_events_across_instances(f: &Fixture) {
    let a = Arc::clone(&f.store);
    let b = f.other().await;
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
async fn leases(f: &Fixture) {
    let a = Arc::clone(&f.store);
    let b = f.other().await;
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
async fn process_leases(f: &Fixture) {
    let a = Arc::clone(&f.store);
    let b = f.other().await;
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
async fn due_sessions(f: &Fixture) {
    let s = &*f.store;
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
async fn delete_removes_everything(f: &Fixture) {
    let a = Arc::clone(&f.store);
    let b = f.other().await;
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
async fn failures_fail_only_their_caller(f: &Fixture) {
    let s = Arc::clone(&f.store);
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
async fn probe_write_leaves_nothing(f: &Fixture) {
    let s = &*f.store;
    let before = s.list_sessions(OwnerScope::Any, 1000).await.unwrap();
    for _ in 0..3 {
        s.probe_write().await.unwrap();
    }
    assert_eq!(s.list_sessions(OwnerScope::Any, 1000).await.unwrap(), before);
    assert!(s.due_sessions(u64::MAX / 2, 100).await.unwrap().is_empty());
    assert_eq!(s.head("~probe").await.unwrap(), None);
}

macro_rules! conformance {
    ($($check:ident),* $(,)?) => {
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let f = super::memory_fixture().await;
                    super::$check(&f).await;
                    f.finish().await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let f = super::sqlite_fixture().await;
                    super::$check(&f).await;
                    f.finish().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let Some(f) = super::postgres_fixture().await else { return };
                    super::$check(&f).await;
                    f.finish().await;
                }
            )*
        }
    };
}

/// Events that repeat messages of the log (`message_end`, `error`, `step_end`, `session_end`,
/// with a [`MessageSpan`]) read back whole, whether the messages were in the log before the
/// append, arrive in the same commit, or are not in the log at all (then the event is kept
/// whole); the SQL stores keep each message once: the stored event does not repeat it.
async fn events_repeating_messages(f: &Fixture) {
    let s = &*f.store;
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

    for store in [s, &*f.other().await] {
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

conformance!(
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

// ---------------------------------------------------------------------------------------------
// Backend-specific.

/// Writes queued together are applied in one transaction, a failing one included, and each
/// caller gets its own answer. (A current-thread runtime: every write is queued before the
/// writer task runs, so the batch is deterministic.)
#[tokio::test(flavor = "current_thread")]
async fn sqlite_group_commit_is_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("weft.db")).await.unwrap();
    let mut heads = Vec::new();
    // Few enough that Tokio's cooperative budget never makes a send yield mid-way.
    for k in 0..20 {
        heads.push(create(&store, &format!("g{k}"), None, vec![]).await);
    }
    let before = store.write_stats();
    let writes = heads.iter().map(|h| {
        let id = h.id.clone();
        let store = &store;
        async move {
            let good = store.append_events(&id, vec![delta(&id, 1, "a"), delta(&id, 2, "b")]);
            let bad = store.append_events(&id, vec![delta(&id, 1, "dup")]);
            futures::join!(good, bad)
        }
    });
    let answers = futures::future::join_all(writes).await;
    let after = store.write_stats();
    assert_eq!(after.transactions - before.transactions, 1, "{before:?} → {after:?}");
    assert_eq!(after.operations - before.operations, 40);
    for (good, bad) in answers {
        assert_eq!(good, Ok(()));
        assert!(is_invalid(&bad), "{bad:?}");
    }
    for h in &heads {
        let events = store.read_events(&h.id, 0, 10).await.unwrap();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
    }
}

/// An operation that fails half-way through its writes (here: a message row already where the
/// commit appends, planted behind the store's back) is rolled back alone: the head it had
/// already rewritten is restored, and the other operations of the same transaction are stored.
#[tokio::test(flavor = "current_thread")]
async fn sqlite_failed_operation_rolls_back_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let mut heads = Vec::new();
    for k in 0..6 {
        heads.push(create(&store, &format!("s{k}"), None, vec![user("m0")]).await);
    }
    let mut raw =
        sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display())).await.unwrap();
    raw.execute("INSERT INTO messages (session_id, idx, message) VALUES ('s3', 1, '{}')")
        .await
        .unwrap();
    let before = store.write_stats();
    let commits = heads.iter().map(|h| {
        let (_, mut c) = commit(h, vec![user("m1")]);
        c.events = vec![delta(&h.id, 1, "e")];
        store.commit(c)
    });
    let answers = futures::future::join_all(commits).await;
    assert_eq!(store.write_stats().transactions - before.transactions, 1, "one batch");
    for (h, answer) in heads.iter().zip(answers) {
        let loaded_head = store.head(&h.id).await.unwrap().unwrap();
        let events = store.read_events(&h.id, 0, 10).await.unwrap();
        if h.id == "s3" {
            assert!(matches!(answer, Err(StoreError::Backend { .. })), "{answer:?}");
            assert_eq!(loaded_head, *h, "the head rewrite was rolled back");
            assert!(events.is_empty());
        } else {
            assert_eq!(answer, Ok(()));
            assert_eq!(loaded_head.version, 1);
            assert_eq!(events.len(), 1);
            assert_eq!(store.load(&h.id).await.unwrap().unwrap().messages.len(), 2);
        }
    }
}

/// A corrupt row is a Backend error naming the table and the session, never a panic.
#[tokio::test]
async fn sqlite_corrupt_rows_are_backend_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let store = SqliteStore::open(&path).await.unwrap();
    create(&store, "s1", None, vec![user("a"), user("b")]).await;
    store.append_events("s1", vec![delta("s1", 1, "x")]).await.unwrap();

    let mut raw =
        sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display())).await.unwrap();
    raw.execute("UPDATE messages SET message = '{\"role\":' WHERE session_id = 's1' AND idx = 1")
        .await
        .unwrap();
    raw.execute("UPDATE events SET event = '[]' WHERE session_id = 's1'").await.unwrap();
    raw.execute("UPDATE sessions SET last_seq = -4 WHERE id = 's1'").await.unwrap();

    for error in [
        store.load("s1").await.unwrap_err(),
        store.read_events("s1", 0, 10).await.unwrap_err(),
        store.wait_events("s1", 0, Duration::from_millis(10)).await.unwrap_err(),
    ] {
        let StoreError::Backend { message: text, .. } = &error else { panic!("{error:?}") };
        assert!(text.contains("s1"), "{text}");
        assert!(
            text.contains("messages") || text.contains("events") || text.contains("sessions"),
            "{text}"
        );
    }
    raw.execute("UPDATE sessions SET head = 'null' WHERE id = 's1'").await.unwrap();
    let error = store.head("s1").await.unwrap_err();
    assert!(
        matches!(&error, StoreError::Backend { message: t, .. } if t.contains("sessions") && t.contains("s1")),
        "{error:?}"
    );
    // The decoder's own error is kept as the source.
    assert!(std::error::Error::source(&error).is_some(), "{error:?}");
}

/// A store whose writer has stopped (it ran on a runtime that is gone) says it is closed, which
/// nothing retries; reads, which need no writer, still answer.
#[test]
fn sqlite_writer_gone_is_closed_not_transient() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let opened = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = opened.block_on(async {
        let store = SqliteStore::open(&path).await.unwrap();
        create(&store, "s1", None, vec![user("a")]).await;
        store
    });
    // The writer task dies with the runtime it was spawned on.
    drop(opened);
    let other = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    other.block_on(async {
        let error = store.append_events("s1", vec![delta("s1", 1, "x")]).await.unwrap_err();
        assert!(matches!(&error, StoreError::Closed(_)), "{error:?}");
        assert!(!error.is_transient(), "a stopped writer never comes back");
        assert!(error.to_string().contains("writer"), "{error}");
        let error = store.reserve_seqs("s1", 10).await.unwrap_err();
        assert!(matches!(error, StoreError::Closed(_)), "{error:?}");
        assert_eq!(store.head("s1").await.unwrap().unwrap().id, "s1");
    });
}

/// A file at a schema version newer than this build is refused, not damaged.
#[tokio::test]
async fn sqlite_refuses_newer_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    drop(SqliteStore::open(&path).await.unwrap());
    let mut raw =
        sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display())).await.unwrap();
    raw.execute("PRAGMA user_version = 99").await.unwrap();
    let error = SqliteStore::open(&path).await.err().unwrap();
    assert!(
        matches!(&error, StoreError::Backend { message: t, .. } if t.contains("newer")),
        "{error:?}"
    );
}

/// A file written by a build that knew only the first migration is upgraded in place: its
/// events, stored whole, read back unchanged, and new events are stored by reference.
#[tokio::test]
async fn sqlite_upgrades_a_version_1_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let store = SqliteStore::open(&path).await.unwrap();
    create(&store, "old", None, vec![user("an old question")]).await;
    drop(store);
    let mut raw =
        sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display())).await.unwrap();
    // Back to version 1's schema, with an event as version 1 stored it.
    raw.execute(
        "ALTER TABLE events DROP COLUMN msg_first; ALTER TABLE events DROP COLUMN msg_count; \
         PRAGMA user_version = 1",
    )
    .await
    .unwrap();
    let old =
        record("old", 1, AgentEvent::MessageEnd { message: Arc::new(user("an old question")) });
    sqlx::query("INSERT INTO events (session_id, seq, run_id, node_id, at, event) VALUES (?, 1, ?, NULL, ?, ?)")
        .bind("old")
        .bind(&*old.run_id)
        .bind(old.at as i64)
        .bind(serde_json::to_string(&old.event).unwrap())
        .execute(&mut raw)
        .await
        .unwrap();
    drop(raw);

    let store = SqliteStore::open(&path).await.unwrap();
    let read = store.read_events("old", 0, 10).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].event, old.event);
    let logged = Arc::clone(&store.load("old").await.unwrap().unwrap().messages.shared()[0]);
    let mut new =
        Arc::unwrap_or_clone(record("old", 2, AgentEvent::MessageEnd { message: logged }));
    new.messages = Some(MessageSpan::one(0));
    store.append_events("old", vec![Arc::new(new.clone())]).await.unwrap();
    let read = store.read_events("old", 1, 10).await.unwrap();
    assert_eq!(*read[0], new);
}

/// Several stores opening one new file at once all succeed (migrations applied once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_concurrent_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dir/weft.db");
    let opens = (0..4).map(|_| SqliteStore::open(&path));
    let stores = futures::future::join_all(opens).await;
    let stores: Vec<SqliteStore> = stores.into_iter().map(Result::unwrap).collect();
    create(&stores[0], "x", None, vec![]).await;
    assert!(stores[3].head("x").await.unwrap().is_some());
}

/// `connect` understands every accepted form and explains the others.
#[tokio::test]
async fn connect_urls() {
    let dir = tempfile::tempdir().unwrap();
    let memory = weft_store::connect("memory").await.unwrap();
    assert_eq!(memory.kind(), "memory");
    let a = dir.path().join("a.db");
    let sqlite = weft_store::connect(&format!("sqlite:{}", a.display())).await.unwrap();
    assert_eq!(sqlite.kind(), "sqlite");
    create(&*sqlite, "s", None, vec![]).await;
    drop(sqlite);
    let again = weft_store::connect(&format!("sqlite://{}", a.display())).await.unwrap();
    assert!(again.head("s").await.unwrap().is_some(), "sqlite:// names the same file");
    for bad in [
        "mysql://user:secret@localhost/db",
        "redis:x",
        "sqlite:",
        "sqlite::memory:",
        "sqlite://x.db?mode=rwc",
        "",
    ] {
        let error = weft_store::connect(bad).await.err().unwrap();
        let StoreError::Invalid(text) = &error else { panic!("{bad}: {error:?}") };
        assert!(text.contains("sqlite:PATH") && text.contains("postgres://"), "{text}");
        assert!(!text.contains("secret"), "{text}");
    }
    if let Some(url) = postgres_url() {
        let schema = fresh_schema(&url).await;
        let pg = weft_store::connect(&with_schema(&url, &schema)).await.unwrap();
        assert_eq!(pg.kind(), "postgres");
        drop(pg);
        let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
        admin.execute(format!("DROP SCHEMA \"{schema}\" CASCADE").as_str()).await.unwrap();
    }
}

/// Replicas starting at once on an empty schema: migrations run once, under the advisory lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_concurrent_migrations() {
    let Some(admin_url) = postgres_url() else { return };
    let schema = fresh_schema(&admin_url).await;
    let url = with_schema(&admin_url, &schema);
    let opens = (0..4).map(|_| {
        let url = url.clone();
        async move {
            let options = PostgresOptions { max_connections: 2, ..PostgresOptions::default() };
            PostgresStore::connect_with(&url, options).await
        }
    });
    let stores: Vec<PostgresStore> =
        futures::future::join_all(opens).await.into_iter().map(Result::unwrap).collect();
    assert!(stores.iter().all(|s| s.channel() == format!("weft_events_{schema}")));
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    let applied: i64 = sqlx::query("SELECT count(*) FROM weft_schema_migrations")
        .fetch_one(&mut admin)
        .await
        .unwrap()
        .get(0);
    assert_eq!(applied, 2, "each of the two migrations applied once");
    drop(stores);
    admin.execute(format!("DROP SCHEMA \"{schema}\" CASCADE").as_str()).await.unwrap();
}
