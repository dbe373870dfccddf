//! Durable runtime benchmarks (issue 9): what a session store costs the agent loop
//! (`cargo bench -p weft-agent --bench persist`).
//!
//! Every workload runs with no store at all (`Agent::builder(…)` without `.store(…)`: the
//! baseline), the in-memory store (`weft_store::MemoryStore`), SQLite (`weft_store::SqliteStore`
//! on a file in a fresh temporary directory) and Postgres (`weft_store::PostgresStore`, only when
//! `WEFT_TEST_POSTGRES_URL` is set, e.g. `eval "$(bash .ci/postgres.sh)"`; skipped with a note
//! otherwise).
//!
//! * `w1`: 1,000,000 text deltas of 4 characters (one faux turn of 4,000,000 characters, no
//!   delay) through `Agent::execute()`, the consumer serializing every event to JSON; wall time
//!   from `execute()` to `result()` (which returns after the final persistence barrier). Reports
//!   deltas/s, the ratio to the memory store, the events the consumer saw (adjacent deltas are
//!   merged while the store lags), the bytes the database holds per text delta, and where the
//!   time went: when the run numbered `text_end` and when the consumer got it, the first merged
//!   delta, pauses in delivery. Diagnostic rows follow the stores proper: each store behind a
//!   pass-through [`Probe`] that records its appends and times its `reserve_seqs` calls, and the
//!   memory store with a `reserve_seqs` that yields to the scheduler once.
//! * `w2`: per-turn cost at turn 10 versus turn 1,000 of one session: one `execute` of 1,001
//!   model calls (1,000 turns each with a short text and one call to a local `noop` tool, then a
//!   final answer), each turn timed on the run's side (between `before_model_call` hooks, split
//!   at the tool call) and by the consumer (between `step_start` events); and 1,000 separate
//!   `execute`s of one user message and one text turn each on one session, each timed from
//!   `execute()` to `result()`. The stores sit behind a pass-through [`Probe`] that also gives
//!   the store's own time per turn (`commit`, `append_events`). p50/p99 over turns 5–15 and
//!   990–1000, and the part the store adds (store minus no store).
//! * `w3`: 100 sessions streaming at once (one faux turn of 40,000 characters in 4-character
//!   deltas each), all started together and each consumed by its own task: persisted deltas/s,
//!   events stored, database bytes per delta.
//! * `w4`: a watcher resuming from seq 0 of a finished 1,000,000-delta run
//!   (`SessionHandle::subscribe(0)` read to its end), on the run's own handle and, for the
//!   durable stores, on a handle loaded by a second agent on the same store (nothing in memory:
//!   everything from the store, as after a restart). Runs after each `w1` run.
//! * `store`: the stores alone, without the agent, to break the figures above down: appending
//!   4-character `text_delta` records in batches of 256 and 4,096 (records/s), reading them back
//!   in pages of 1,024 (the hub's page), and how long `reserve_seqs` takes when the store is idle
//!   and when it is issued while an append of 4,096 records is under way (the run reserves
//!   numbers while the persister appends).
//!
//! Postgres sessions are deleted after each measurement and the tables vacuumed (the test
//! server runs without autovacuum).
//!
//! Pick workloads and stores with arguments (`-- w1 w3 sqlite`; none picks all). All workloads
//! run on a multi-thread Tokio runtime with 2 workers (`WEFT_BENCH_RUNTIME=current_thread` puts
//! `w1`, `w2` and `w4` on a one-thread runtime instead; `w3` is always multi-thread).
//!
//! Sizes: `WEFT_BENCH_QUICK=1` (or the argument `quick`) runs tiny sizes in seconds. So does any
//! run without cargo bench's `--bench` argument (`cargo test --benches`, or the binary run by
//! hand) unless the argument `full` is given. Knobs: `WEFT_BENCH_RUNS` (runs per measure,
//! default 3), `WEFT_BENCH_TEXT_DELTAS` (w1/w4, default 1,000,000),
//! `WEFT_BENCH_TURNS` (w2, default 1,000 tool turns), `WEFT_BENCH_SESSIONS` (w3, default 100),
//! `WEFT_BENCH_SESSION_CHARS` (w3, default 40,000).
//!
//! Database sizes are read with the `sqlite3` and `psql` command-line clients when they are
//! installed (outside the timed windows); without them those columns say `n/a`.

#![allow(clippy::unwrap_used)]

mod common;

use common::{prose, thousands};

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;
use weft_agent::{Agent, AgentHooks, ExecuteStream, SessionHandle, SessionOptions, tool_fn};
use weft_core::store::OwnerScope;
use weft_core::{AgentEvent, Input, SessionStatus, SessionStore, StoreFuture};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_store::{MemoryStore, PostgresStore, SqliteStore, WriteStats};

/// Characters per delta in every workload.
const CHUNK: usize = 4;

const WORKLOADS: [&str; 5] = ["w1", "w2", "w3", "w4", "store"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let words: Vec<&str> =
        args.iter().map(String::as_str).filter(|a| !a.starts_with('-')).collect();
    let quick = match std::env::var("WEFT_BENCH_QUICK").ok().as_deref() {
        Some("0") | Some("") => words.contains(&"quick"),
        Some(_) => true,
        None => {
            words.contains(&"quick")
                || (!args.iter().any(|a| a == "--bench") && !words.contains(&"full"))
        }
    };
    let mut workloads = Vec::new();
    let mut kinds = Vec::new();
    for word in words.iter().filter(|w| !["quick", "full"].contains(w)) {
        if WORKLOADS.contains(word) {
            workloads.push(*word);
        } else if let Some(kind) = Kind::parse(word) {
            kinds.push(kind);
        } else {
            eprintln!(
                "unknown argument `{word}`: expected a workload (w1 w2 w3 w4 store), a store (none \
                 memory sqlite postgres), `quick` or `full`"
            );
            std::process::exit(2);
        }
    }
    if workloads.is_empty() {
        workloads = WORKLOADS.to_vec();
    }
    if kinds.is_empty() {
        kinds = Kind::ALL.to_vec();
    }
    let postgres = std::env::var("WEFT_TEST_POSTGRES_URL").ok().filter(|u| !u.trim().is_empty());
    if postgres.is_none() && kinds.contains(&Kind::Postgres) {
        kinds.retain(|k| *k != Kind::Postgres);
        println!(
            "note: WEFT_TEST_POSTGRES_URL is not set: Postgres is skipped \
             (eval \"$(bash .ci/postgres.sh)\" sets it)"
        );
    }
    let config = Config::new(quick, postgres);
    let current_thread =
        std::env::var("WEFT_BENCH_RUNTIME").is_ok_and(|r| r.replace('-', "_") == "current_thread");
    let multi =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let single = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let rt = if current_thread { &single } else { &multi };
    println!(
        "weft-agent durable runtime benchmarks ({} mode; {} runtime for w1/w2/w4, multi-thread \
         (2 workers) for w3)",
        if quick { "QUICK" } else { "full" },
        if current_thread { "current_thread" } else { "multi-thread (2 workers)" },
    );
    let wants = |w: &str| workloads.contains(&w);
    if wants("w1") || wants("w4") {
        w1_w4(rt, &config, &kinds, wants("w1"), wants("w4"));
    }
    if wants("w2") {
        w2(rt, &config, &kinds);
    }
    if wants("w3") {
        w3(&multi, &config, &kinds);
    }
    if wants("store") {
        store_alone(rt, &config, &kinds);
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration, stores
// ---------------------------------------------------------------------------------------------

struct Config {
    runs: usize,
    w2_runs: usize,
    text_deltas: usize,
    turns: usize,
    sessions: usize,
    session_chars: usize,
    postgres: Option<String>,
}

impl Config {
    fn new(quick: bool, postgres: Option<String>) -> Self {
        let (runs, w2_runs, text_deltas, turns, sessions, session_chars) = if quick {
            (1, 1, 20_000, 40, 10, 4_000)
        } else {
            (3, 3, 1_000_000, 1_000, 100, 40_000)
        };
        Self {
            runs: env_usize("WEFT_BENCH_RUNS", runs).max(1),
            w2_runs: env_usize("WEFT_BENCH_RUNS", w2_runs).max(1),
            text_deltas: env_usize("WEFT_BENCH_TEXT_DELTAS", text_deltas).max(1),
            turns: env_usize("WEFT_BENCH_TURNS", turns).max(20),
            sessions: env_usize("WEFT_BENCH_SESSIONS", sessions).max(1),
            session_chars: env_usize("WEFT_BENCH_SESSION_CHARS", session_chars).max(CHUNK),
            postgres,
        }
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.replace(['_', ','], "").parse().ok()).unwrap_or(default)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    None,
    Memory,
    Sqlite,
    Postgres,
    /// Diagnostic (W1 only): the memory store behind [`Probe`], which records its appends and
    /// reservations.
    MemoryProbe,
    /// Diagnostic (W1 only): the same, and `reserve_seqs` yields to the scheduler once.
    MemoryYield,
    /// Diagnostic (W1 only): SQLite behind [`Probe`].
    SqliteProbe,
    /// Diagnostic (W1 only): Postgres behind [`Probe`].
    PostgresProbe,
}

impl Kind {
    const ALL: [Kind; 4] = [Kind::None, Kind::Memory, Kind::Sqlite, Kind::Postgres];

    fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.name() == word)
    }

    fn name(self) -> &'static str {
        match self {
            Kind::None => "none",
            Kind::Memory => "memory",
            Kind::Sqlite => "sqlite",
            Kind::Postgres => "postgres",
            Kind::MemoryProbe => "memory, probed (diagnostic)",
            Kind::MemoryYield => "memory, reserve yields (diagnostic)",
            Kind::SqliteProbe => "sqlite, probed (diagnostic)",
            Kind::PostgresProbe => "postgres, probed (diagnostic)",
        }
    }

    /// The store underneath.
    fn base(self) -> Kind {
        match self {
            Kind::MemoryProbe | Kind::MemoryYield => Kind::Memory,
            Kind::SqliteProbe => Kind::Sqlite,
            Kind::PostgresProbe => Kind::Postgres,
            other => other,
        }
    }

    /// The diagnostic twin of a store (W1).
    fn probed(self) -> Option<Kind> {
        match self {
            Kind::Memory => Some(Kind::MemoryProbe),
            Kind::Sqlite => Some(Kind::SqliteProbe),
            Kind::Postgres => Some(Kind::PostgresProbe),
            _ => None,
        }
    }

    fn durable(self) -> bool {
        matches!(self.base(), Kind::Sqlite | Kind::Postgres)
    }
}

/// One store instance (fresh per measurement, so that earlier runs do not weigh on it).
struct Backend {
    kind: Kind,
    store: Option<Arc<dyn SessionStore>>,
    sqlite: Option<SqliteStore>,
    /// Holds the SQLite file's directory until the backend is dropped.
    _dir: Option<tempfile::TempDir>,
    postgres_url: Option<String>,
    probe: Option<Arc<Probe>>,
}

impl Backend {
    async fn open(kind: Kind, postgres: Option<String>) -> Self {
        Self::open_with(kind, postgres, kind != kind.base()).await
    }

    /// With `probe`, the store is wrapped in a (pass-through) [`Probe`].
    async fn open_with(kind: Kind, postgres: Option<String>, probe: bool) -> Self {
        let mut backend = Backend {
            kind,
            store: None,
            sqlite: None,
            _dir: None,
            postgres_url: None,
            probe: None,
        };
        match kind.base() {
            Kind::Memory => backend.store = Some(Arc::new(MemoryStore::new())),
            Kind::Sqlite => {
                let dir = tempfile::tempdir().unwrap();
                let store = SqliteStore::open(dir.path().join("weft.db")).await.unwrap();
                backend.store = Some(Arc::new(store.clone()));
                backend.sqlite = Some(store);
                backend._dir = Some(dir);
            }
            Kind::Postgres => {
                let url = postgres.unwrap();
                let store = PostgresStore::connect(&url).await.unwrap();
                backend.store = Some(Arc::new(store));
                backend.postgres_url = Some(url);
            }
            _ => {}
        }
        if probe && let Some(inner) = backend.store.take() {
            let probe = Arc::new(Probe {
                inner,
                yield_on_reserve: kind == Kind::MemoryYield,
                ops: std::sync::Mutex::new(Vec::new()),
            });
            backend.store = Some(Arc::clone(&probe) as Arc<dyn SessionStore>);
            backend.probe = Some(probe);
        }
        backend
    }

    fn agent(&self, script: FauxScript, max_turns: u32) -> Agent {
        self.agent_with_clock(script, max_turns, None)
    }

    /// An agent whose model calls and `noop` calls are marked on `clock` when it is given.
    fn agent_with_clock(
        &self,
        script: FauxScript,
        max_turns: u32,
        clock: Option<TurnClock>,
    ) -> Agent {
        let marks = clock.clone();
        let noop = tool_fn("noop", "Does nothing", move |_: NoopArgs| {
            if let Some(clock) = &marks {
                clock.mark(Mark::Tool);
            }
            async { Ok::<_, String>("ok") }
        });
        let mut builder = Agent::builder(FauxProvider::new(script)).tool(noop).max_turns(max_turns);
        if let Some(clock) = clock {
            builder = builder.hooks(clock);
        }
        if let Some(store) = &self.store {
            builder = builder.store(Arc::clone(store));
        }
        builder.build().unwrap()
    }

    fn write_stats(&self) -> Option<WriteStats> {
        self.sqlite.as_ref().map(SqliteStore::write_stats)
    }

    /// What the database holds for these sessions' events, read outside the timed window.
    fn event_bytes(&self, sessions: &[String]) -> Option<DbEvents> {
        match self.kind.base() {
            Kind::Sqlite => {
                let path = self.sqlite.as_ref()?.path().to_path_buf();
                let ids = quoted(sessions);
                let out = sqlite3(
                    &path,
                    &format!(
                        "SELECT count(*), coalesce(sum(length(event)), 0) FROM events \
                         WHERE session_id IN ({ids}); PRAGMA page_count; PRAGMA page_size;"
                    ),
                )?;
                let numbers: Vec<u64> =
                    out.split(['\n', '|']).filter_map(|s| s.trim().parse().ok()).collect();
                let [rows, json, pages, page] = numbers[..] else { return None };
                Some(DbEvents { rows, json_bytes: json, file_bytes: Some(pages * page) })
            }
            Kind::Postgres => {
                let ids = quoted(sessions);
                let out = psql(
                    self.postgres_url.as_deref()?,
                    &format!(
                        "SELECT count(*), coalesce(sum(length(event)), 0), \
                         coalesce(sum(pg_column_size(event)), 0) FROM events \
                         WHERE session_id IN ({ids})"
                    ),
                )?;
                let numbers: Vec<u64> =
                    out.split(['\n', '|']).filter_map(|s| s.trim().parse().ok()).collect();
                let [rows, json, _stored] = numbers[..] else { return None };
                Some(DbEvents { rows, json_bytes: json, file_bytes: None })
            }
            _ => None,
        }
    }

    /// Removes sessions from a database that outlives the benchmark (Postgres).
    async fn clean(&self, sessions: &[String]) {
        if self.kind.base() == Kind::Postgres
            && let Some(store) = &self.store
        {
            for id in sessions {
                let _ = store.delete_session(id, OwnerScope::Any).await;
            }
            // The server this was written against runs without autovacuum: without this, the
            // deleted rows pile up (millions over a full run) and slow every later measurement.
            if let Some(url) = &self.postgres_url {
                psql(url, "VACUUM events, sessions, messages, runs");
            }
        }
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
struct NoopArgs {
    #[allow(dead_code)]
    i: u64,
}

/// What the run marks, as it happens (run side: no delivery to a consumer in between).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mark {
    /// A model call is about to start (`AgentHooks::before_model_call`).
    Model,
    /// The `noop` tool runs.
    Tool,
}

/// Instants of the run's model and tool calls.
#[derive(Clone, Default)]
struct TurnClock(Arc<std::sync::Mutex<Vec<(Mark, Instant)>>>);

impl TurnClock {
    fn mark(&self, mark: Mark) {
        self.0.lock().unwrap().push((mark, Instant::now()));
    }

    fn marks(&self, which: Mark) -> Vec<Instant> {
        self.0.lock().unwrap().iter().filter(|(m, _)| *m == which).map(|(_, t)| *t).collect()
    }
}

impl AgentHooks for TurnClock {
    fn before_model_call<'a>(
        &'a self,
        _request: &'a mut weft_llm::ModelRequest,
    ) -> futures::future::BoxFuture<'a, ()> {
        self.mark(Mark::Model);
        Box::pin(async {})
    }
}

/// What the database holds for some sessions' events.
#[derive(Debug, Clone, Copy)]
struct DbEvents {
    rows: u64,
    /// `sum(length(event))`: the events' JSON text.
    json_bytes: u64,
    /// SQLite: the whole database file, `page_count × page_size` (its WAL included).
    file_bytes: Option<u64>,
}

fn quoted(ids: &[String]) -> String {
    ids.iter().map(|id| format!("'{}'", id.replace('\'', "''"))).collect::<Vec<_>>().join(",")
}

fn sqlite3(path: &Path, sql: &str) -> Option<String> {
    let out = std::process::Command::new("sqlite3")
        .arg("-readonly")
        .arg(path)
        .arg(sql)
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    String::from_utf8(out.stdout).ok()
}

fn psql(url: &str, sql: &str) -> Option<String> {
    let out = std::process::Command::new("psql")
        .args(["-X", "-q", "-A", "-t", "-d", url, "-c", sql])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    String::from_utf8(out.stdout).ok()
}

/// Bytes of a SQLite file with its WAL and shared-memory files, as they are on disk.
fn sqlite_disk_bytes(path: &Path) -> u64 {
    let mut total = 0;
    for suffix in ["", "-wal", "-shm"] {
        let mut name = path.as_os_str().to_owned();
        name.push(suffix);
        total += std::fs::metadata(PathBuf::from(name)).map(|m| m.len()).unwrap_or(0);
    }
    total
}

// ---------------------------------------------------------------------------------------------
// Consumers, statistics, formatting
// ---------------------------------------------------------------------------------------------

/// What a consumer saw, and when (offsets from `execute()`).
#[derive(Debug, Default, Clone)]
struct Seen {
    events: u64,
    text_deltas: u64,
    text_chars: u64,
    json_bytes: u64,
    /// When the first `text_end` arrived (the model's text is over).
    text_end: Option<Duration>,
    /// When each `step_start` arrived.
    step_starts: Vec<Duration>,
    /// When the last event arrived.
    last: Duration,
    /// The first delta longer than one chunk (deltas were merged): its position among the
    /// events and when it arrived.
    first_merged: Option<(u64, Duration)>,
    /// Pauses in delivery longer than 5 ms (checked every 64 events): how many, how long in all.
    stalls: u64,
    stalled: Duration,
}

/// Reads every event of a run, writing each to JSON (one reused buffer, cleared per event).
async fn consume(mut stream: ExecuteStream, start: Instant) -> (Seen, SessionStatus) {
    let mut seen = Seen::default();
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    let mut sampled = Duration::ZERO;
    while let Some(event) = stream.next().await {
        seen.events += 1;
        if seen.events % 64 == 0 {
            let now = start.elapsed();
            if now - sampled > Duration::from_millis(5) {
                seen.stalls += 1;
                seen.stalled += now - sampled;
            }
            sampled = now;
        }
        match &event {
            AgentEvent::TextDelta { delta, .. } => {
                seen.text_deltas += 1;
                seen.text_chars += delta.len() as u64;
                if delta.len() > CHUNK && seen.first_merged.is_none() {
                    seen.first_merged = Some((seen.events, start.elapsed()));
                }
            }
            AgentEvent::TextEnd { .. } if seen.text_end.is_none() => {
                seen.text_end = Some(start.elapsed());
            }
            AgentEvent::StepStart { .. } => seen.step_starts.push(start.elapsed()),
            _ => {}
        }
        buf.clear();
        serde_json::to_writer(&mut buf, &event).unwrap();
        seen.json_bytes += buf.len() as u64;
    }
    seen.last = start.elapsed();
    let result = stream.result().await;
    (seen, result.status)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

fn rate(n: u64, d: Duration) -> u64 {
    (n as f64 / d.as_secs_f64()) as u64
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// Nearest-rank percentile.
fn percentile(mut samples: Vec<Duration>, q: f64) -> Duration {
    samples.sort();
    let rank = ((q * samples.len() as f64).ceil() as usize).clamp(1, samples.len());
    samples[rank - 1]
}

fn runtime_name(rt: &tokio::runtime::Runtime) -> &'static str {
    match rt.handle().runtime_flavor() {
        tokio::runtime::RuntimeFlavor::CurrentThread => "current_thread",
        _ => "multi-thread",
    }
}

/// Runs `f` on `rt`. The caller's future is driven by `block_on`; the run itself is a task of
/// the runtime (a worker, on the multi-thread runtime), and so are the stores' own tasks.
fn run_on<T>(rt: &tokio::runtime::Runtime, f: impl std::future::Future<Output = T>) -> T {
    rt.block_on(f)
}

// ---------------------------------------------------------------------------------------------
// W1: one long text stream; W4: a watcher catching up on it afterwards
// ---------------------------------------------------------------------------------------------

struct W1Run {
    wall: Duration,
    seen: Seen,
    writes: Option<(u64, u64)>,
    db: Option<DbEvents>,
    disk_bytes: Option<u64>,
    db_before: Option<DbEvents>,
    /// What the probe saw (diagnostic rows).
    probe: Option<ProbeSummary>,
    /// When the run numbered `text_end` (millisecond resolution).
    run_text_end: Option<Duration>,
}

struct W4Run {
    same_handle: Duration,
    same_events: u64,
    fresh_handle: Option<Duration>,
    fresh_events: u64,
}

fn w1_w4(rt: &tokio::runtime::Runtime, config: &Config, kinds: &[Kind], w1: bool, w4: bool) {
    let deltas = config.text_deltas;
    let runs = config.runs;
    let text = Arc::new(prose(deltas * CHUNK));
    println!();
    println!(
        "## W1: {} text deltas of {CHUNK} chars in one turn, every event serialized to JSON; \
         {runs} run(s) per store, each on a fresh store ({} runtime)",
        thousands(deltas as u64),
        runtime_name(rt)
    );
    let mut rows: Vec<(Kind, Vec<W1Run>, Vec<W4Run>)> = Vec::new();
    let mut all_kinds = kinds.to_vec();
    if w1 {
        // The diagnostic twins, after the stores proper.
        all_kinds.extend(kinds.iter().filter_map(|k| k.probed()));
        if kinds.contains(&Kind::Memory) {
            all_kinds.push(Kind::MemoryYield);
        }
    }
    for kind in all_kinds {
        let diagnostic = kind != kind.base();
        let mut w1_runs = Vec::new();
        let mut w4_runs = Vec::new();
        for _ in 0..runs {
            let text = Arc::clone(&text);
            let postgres = config.postgres.clone();
            let (run, watch) = run_on(rt, async move {
                let backend = Backend::open(kind, postgres).await;
                let turn = FauxTurn::text(text.as_str()).with_chunk_size(CHUNK);
                let agent = backend.agent(FauxScript::new([turn]), 10);
                let session = agent.create_session(SessionOptions::default()).await.unwrap();
                let id = session.id();
                let db_before = backend.event_bytes(std::slice::from_ref(&id));
                let stats_before = backend.write_stats();
                let start_ms = weft_core::now_ms();
                let start = Instant::now();
                let stream = agent.execute(&session, Input::text("go")).await.unwrap();
                let (seen, status) = consume(stream, start).await;
                let wall = start.elapsed();
                assert_eq!(status, SessionStatus::Completed);
                assert_eq!(seen.text_chars, (deltas * CHUNK) as u64, "every character arrives");
                // When the run numbered `text_end` (its record's `at`, a millisecond clock).
                let tail: Vec<_> =
                    session.subscribe(session.last_seq().saturating_sub(64)).collect().await;
                let run_text_end = tail
                    .iter()
                    .find(|r| matches!(r.event, AgentEvent::TextEnd { .. }))
                    .map(|r| Duration::from_millis(r.at.saturating_sub(start_ms)));
                let writes = backend.write_stats().zip(stats_before).map(|(after, before)| {
                    (after.transactions - before.transactions, after.operations - before.operations)
                });
                let db = backend.event_bytes(std::slice::from_ref(&id));
                let disk_bytes = backend.sqlite.as_ref().map(|s| sqlite_disk_bytes(s.path()));
                let probe = backend.probe.as_ref().map(|p| p.summary(start));
                let run =
                    W1Run { wall, seen, writes, db, disk_bytes, db_before, probe, run_text_end };
                let watch =
                    if w4 && !diagnostic { Some(w4_watch(&backend, &session).await) } else { None };
                drop(session);
                backend.clean(&[id]).await;
                (run, watch)
            });
            w1_runs.push(run);
            w4_runs.extend(watch);
        }
        rows.push((kind, w1_runs, w4_runs));
    }
    if w1 {
        print_w1(deltas as u64, &rows);
    }
    if w4 {
        print_w4(deltas as u64, &rows);
    }
}

/// W4: `subscribe(0)` on the finished session, read to the end, on its own handle and (durable
/// stores) on one loaded by a second agent.
async fn w4_watch(backend: &Backend, session: &SessionHandle) -> W4Run {
    let count = |stream: std::pin::Pin<Box<dyn futures::Stream<Item = _> + Send>>| async move {
        let mut stream = stream;
        let (mut events, mut chars) = (0u64, 0u64);
        while let Some(record) = stream.next().await {
            let record: Arc<weft_core::EventRecord> = record;
            events += 1;
            if let AgentEvent::TextDelta { delta, .. } = &record.event {
                chars += delta.len() as u64;
            }
        }
        (events, chars)
    };
    let expected_chars = session
        .snapshot()
        .messages
        .iter()
        .filter_map(|m| match m {
            weft_core::Message::Assistant(a) => Some(a.text().len() as u64),
            _ => None,
        })
        .sum::<u64>();
    let start = Instant::now();
    let (same_events, chars) = count(Box::pin(session.subscribe(0))).await;
    let same_handle = start.elapsed();
    assert_eq!(chars, expected_chars, "the watcher sees every character");
    let (mut fresh_handle, mut fresh_events) = (None, 0);
    if backend.kind.durable() {
        // A second agent on the same store: the session is loaded, its log read from the store.
        let other = backend.agent(FauxScript::new([]), 10);
        let loaded = other.session(&session.id()).await.unwrap().unwrap();
        let start = Instant::now();
        let (events, chars) = count(Box::pin(loaded.subscribe(0))).await;
        fresh_handle = Some(start.elapsed());
        fresh_events = events;
        assert_eq!(chars, expected_chars, "the second watcher sees every character");
    }
    W4Run { same_handle, same_events, fresh_handle, fresh_events }
}

fn print_w1(deltas: u64, rows: &[(Kind, Vec<W1Run>, Vec<W4Run>)]) {
    let best = |runs: &[W1Run]| runs.iter().map(|r| r.wall).min().unwrap();
    let memory_best = rows.iter().find(|(k, ..)| *k == Kind::Memory).map(|(_, r, _)| best(r));
    println!();
    println!(
        "| store | wall, each run | deltas/s best | deltas/s median | × memory (best) | events \
         seen (best run) | text_delta events | event rows in db | JSON bytes in db / delta | db \
         file bytes / delta |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (kind, runs, _) in rows {
        let b = best(runs);
        let med = median(runs.iter().map(|r| r.wall).collect());
        let run = runs.iter().min_by_key(|r| r.wall).unwrap();
        let walls: Vec<String> = runs.iter().map(|r| ms(r.wall)).collect();
        let ratio = memory_best
            .map_or_else(|| "–".into(), |m| format!("{:.2}×", b.as_secs_f64() / m.as_secs_f64()));
        let (db_rows, json_per, file_per) = match (run.db, run.db_before) {
            (Some(after), before) => {
                let before = before.map_or((0, 0, 0), |b| {
                    (b.rows, b.json_bytes, b.file_bytes.unwrap_or_default())
                });
                let file = after.file_bytes.map_or_else(
                    || "–".into(),
                    |f| {
                        format!(
                            "{:.1} (on disk with WAL: {:.1})",
                            f.saturating_sub(before.2) as f64 / deltas as f64,
                            run.disk_bytes.unwrap_or_default() as f64 / deltas as f64
                        )
                    },
                );
                (
                    thousands(after.rows - before.0),
                    format!("{:.1}", (after.json_bytes - before.1) as f64 / deltas as f64),
                    file,
                )
            }
            (None, _) if kind.durable() => ("n/a".into(), "n/a".into(), "n/a".into()),
            (None, _) => ("–".into(), "–".into(), "–".into()),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            kind.name(),
            walls.join(", "),
            thousands(rate(deltas, b)),
            thousands(rate(deltas, med)),
            ratio,
            thousands(run.seen.events),
            thousands(run.seen.text_deltas),
            db_rows,
            json_per,
            file_per,
        );
    }
    println!();
    println!("Where the time went (best run of each):");
    println!();
    println!(
        "| store | text_end numbered (run) | text_end received (consumer) | tail after text | \
         first merged delta (event #, at) | delivery stalls > 5 ms (n, total) | sqlite txns / \
         ops | appends (probe) | reserve_seqs calls (probe) | consumer JSON bytes / delta |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (kind, runs, _) in rows {
        let run = runs.iter().min_by_key(|r| r.wall).unwrap();
        let text_end = run.seen.text_end.unwrap_or_default();
        let merged = run
            .seen
            .first_merged
            .map_or_else(|| "none".into(), |(i, at)| format!("#{} at {}", thousands(i), ms(at)));
        let writes = run.writes.map_or_else(|| "–".into(), |(t, o)| format!("{t} / {o}"));
        let (appends, reserves) = run.probe.map_or_else(
            || ("–".into(), "–".into()),
            |p| {
                (
                    format!(
                        "{}; first at {} with {} events; largest {}",
                        p.appends,
                        ms(p.first_append_at),
                        thousands(p.first_append_events as u64),
                        thousands(p.largest_append as u64)
                    ),
                    format!(
                        "{} in {}, longest {}",
                        p.reserves,
                        ms(p.reserve_total),
                        ms(p.reserve_longest)
                    ),
                )
            },
        );
        println!(
            "| {} | {} | {} | {} | {merged} | {}, {} | {writes} | {appends} | {reserves} | {:.1} |",
            kind.name(),
            run.run_text_end.map_or_else(|| "?".into(), |d| format!("{} ms", d.as_millis())),
            ms(text_end),
            ms(run.wall.saturating_sub(text_end)),
            run.seen.stalls,
            ms(run.seen.stalled),
            run.seen.json_bytes as f64 / deltas as f64,
        );
    }
    println!();
    println!(
        "(\"numbered\": the `at` of the `text_end` record, when the run published it; \
         \"received\": when the consumer got it; \"tail\": from then to `result()`, the wait for \
         the store to catch up. The consumer's JSON is the same text as the stored events' \
         JSON.)"
    );
    println!(
        "targets: sqlite >= 1,000,000 deltas/s and <= 1.5× memory; postgres >= 300,000 deltas/s"
    );
    for (kind, runs, _) in rows {
        let r = rate(deltas, best(runs));
        let verdict = match kind {
            Kind::Sqlite => {
                let within =
                    memory_best.is_none_or(|m| best(runs).as_secs_f64() <= 1.5 * m.as_secs_f64());
                format!(
                    "sqlite: rate {} (best), time vs memory {}",
                    if r >= 1_000_000 { "met" } else { "NOT met" },
                    if within { "met" } else { "NOT met" }
                )
            }
            Kind::Postgres => {
                format!("postgres: rate {} (best)", if r >= 300_000 { "met" } else { "NOT met" })
            }
            _ => continue,
        };
        println!("  {verdict}");
    }
}

fn print_w4(deltas: u64, rows: &[(Kind, Vec<W1Run>, Vec<W4Run>)]) {
    println!();
    println!(
        "## W4: a watcher resuming from seq 0 of the finished {}-delta run (subscribe(0) read to \
         the end, events counted, not serialized), after each W1 run. The events are the run's \
         as stored: merged deltas make fewer, and how many were merged varies from run to run",
        thousands(deltas)
    );
    println!();
    println!(
        "| store | events, each run | same handle (memory window, then the store): each run | \
         best | events/s of that run | second agent (all from the store): each run | best | \
         events/s of that run |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (kind, _, watches) in rows {
        if watches.is_empty() {
            continue;
        }
        let join = |v: Vec<String>| if v.is_empty() { "–".to_string() } else { v.join(", ") };
        let events = join(watches.iter().map(|w| thousands(w.same_events)).collect());
        let same = join(watches.iter().map(|w| ms(w.same_handle)).collect());
        let best_same = watches.iter().min_by_key(|w| w.same_handle).unwrap();
        let fresh = join(watches.iter().filter_map(|w| w.fresh_handle.map(ms)).collect());
        let best_fresh =
            watches.iter().filter(|w| w.fresh_handle.is_some()).min_by_key(|w| w.fresh_handle);
        println!(
            "| {} | {events} | {same} | {} | {} | {fresh} | {} | {} |",
            kind.name(),
            ms(best_same.same_handle),
            thousands(rate(best_same.same_events, best_same.same_handle)),
            best_fresh.map_or_else(|| "–".into(), |w| ms(w.fresh_handle.unwrap_or_default())),
            best_fresh.map_or_else(
                || "–".into(),
                |w| thousands(rate(w.fresh_events, w.fresh_handle.unwrap_or_default()))
            ),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// W2: per-turn cost early and late in a long session
// ---------------------------------------------------------------------------------------------

/// The two windows of turns (1-based), early and late.
fn windows(turns: usize) -> [(usize, usize); 2] {
    [(5, 15), (turns - 10, turns)]
}

/// Per-turn times of one W2 run, each indexed by turn - 1.
#[derive(Default)]
struct TurnTimes {
    /// Series name → one duration per turn.
    series: Vec<(&'static str, Vec<Duration>)>,
    whole: Duration,
    session_id: String,
}

fn w2(rt: &tokio::runtime::Runtime, config: &Config, kinds: &[Kind]) {
    let turns = config.turns;
    let runs = config.w2_runs;
    let [early, late] = windows(turns);
    println!();
    println!(
        "## W2: per-turn time, turns {}–{} vs {}–{} of one session; {runs} run(s) per store on a \
         fresh store, samples pooled over runs ({} runtime)",
        early.0,
        early.1,
        late.0,
        late.1,
        runtime_name(rt)
    );
    println!();
    println!(
        "(a) one execute of {} model calls: {turns} turns of short text + one `noop` tool call, \
         then a final answer. *run side*: from a turn's `before_model_call` hook to the next \
         one's (model stream, checkpoint commit, tool, checkpoint commit, publishing); split \
         into *model half* (hook → the tool runs) and *tool half* (tool → next hook). \
         *consumer*: between successive `step_start` events as the consumer receives them.",
        turns + 1
    );
    println!(
        "(b) {turns} executes on one session, each one user message and one text turn; each \
         timed from execute() to result()."
    );
    println!();
    println!(
        "| store | variant | measure | early p50 | early p99 | late p50 | late p99 | late/early \
         (p50) | late/early (p99) | whole run(s) |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    // (kind, variant, measure) → (early p50, late p50), for the persistence share below.
    let mut p50s: Vec<(Kind, &str, &str, Duration, Duration)> = Vec::new();
    for &kind in kinds {
        for variant in ["one execute", "separate executes"] {
            let mut pooled: Vec<(&'static str, Vec<Duration>, Vec<Duration>)> = Vec::new();
            let mut wholes = Vec::new();
            for _ in 0..runs {
                let postgres = config.postgres.clone();
                let result = run_on(rt, async move {
                    // A pass-through probe times the store's operations.
                    let backend = Backend::open_with(kind, postgres, kind != Kind::None).await;
                    let result = if variant == "one execute" {
                        w2_one_execute(&backend, turns).await
                    } else {
                        w2_separate(&backend, turns).await
                    };
                    backend.clean(std::slice::from_ref(&result.session_id)).await;
                    result
                });
                for (name, times) in result.series {
                    let e = times[early.0 - 1..early.1].to_vec();
                    let l = times[late.0 - 1..late.1].to_vec();
                    match pooled.iter_mut().find(|(n, ..)| *n == name) {
                        Some((_, pe, pl)) => {
                            pe.extend(e);
                            pl.extend(l);
                        }
                        None => pooled.push((name, e, l)),
                    }
                }
                wholes.push(result.whole);
            }
            for (i, (name, e, l)) in pooled.into_iter().enumerate() {
                let (e50, e99) = (percentile(e.clone(), 0.5), percentile(e, 0.99));
                let (l50, l99) = (percentile(l.clone(), 0.5), percentile(l, 0.99));
                p50s.push((kind, variant, name, e50, l50));
                let whole = if i == 0 {
                    wholes.iter().map(|d| ms(*d)).collect::<Vec<_>>().join(", ")
                } else {
                    String::new()
                };
                let ratio = |late: Duration, early: Duration| {
                    if early < Duration::from_micros(1) {
                        "–".to_string()
                    } else {
                        format!("{:.2}", late.as_secs_f64() / early.as_secs_f64())
                    }
                };
                println!(
                    "| {} | {variant} | {name} | {} | {} | {} | {} | {} | {} | {whole} |",
                    kind.name(),
                    us(e50),
                    us(e99),
                    us(l50),
                    us(l99),
                    ratio(l50, e50),
                    ratio(l99, e99),
                );
            }
        }
    }
    if kinds.contains(&Kind::None) {
        println!();
        println!(
            "What the store adds: p50 of the store minus p50 without a store (same variant and \
             measure), early and late:"
        );
        println!();
        println!("| store | variant | measure | early | late | late/early |");
        println!("|---|---|---|---|---|---|");
        for &(kind, variant, name, e, l) in &p50s {
            if kind == Kind::None || name == "consumer" || name.starts_with("store") {
                continue;
            }
            let Some(&(_, _, _, ne, nl)) =
                p50s.iter().find(|(k, v, n, ..)| *k == Kind::None && *v == variant && *n == name)
            else {
                continue;
            };
            let (de, dl) = (e.as_secs_f64() - ne.as_secs_f64(), l.as_secs_f64() - nl.as_secs_f64());
            println!(
                "| {} | {variant} | {name} | {:.0} µs | {:.0} µs | {} |",
                kind.name(),
                de * 1e6,
                dl * 1e6,
                if de > 0.0 { format!("{:.2}", dl / de) } else { "–".into() },
            );
        }
    }
    println!();
    println!(
        "target: late/early < 1.5. p99 is nearest-rank over 11 × {runs} pooled samples (so it \
         is the largest or second-largest of them)."
    );
}

/// One execute of `turns` tool turns and a final answer.
async fn w2_one_execute(backend: &Backend, turns: usize) -> TurnTimes {
    let mut script: Vec<FauxTurn> = (0..turns)
        .map(|i| {
            FauxTurn::text(format!("Turn {i}: calling the tool."))
                .with_tool_call("noop", json!({ "i": i }))
        })
        .collect();
    script.push(FauxTurn::text("Done."));
    let clock = TurnClock::default();
    let agent = backend.agent_with_clock(
        FauxScript::new(script),
        u32::try_from(turns + 10).unwrap(),
        Some(clock.clone()),
    );
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let start = Instant::now();
    let stream = agent.execute(&session, Input::text("go")).await.unwrap();
    let (seen, status) = consume(stream, start).await;
    let whole = start.elapsed();
    assert_eq!(status, SessionStatus::Completed);
    assert_eq!(seen.step_starts.len(), turns + 1, "every turn ran");
    let consumer: Vec<Duration> = seen.step_starts.windows(2).map(|w| w[1] - w[0]).collect();
    let models = clock.marks(Mark::Model);
    let tools = clock.marks(Mark::Tool);
    assert_eq!((models.len(), tools.len()), (turns + 1, turns));
    let run_side: Vec<Duration> = models.windows(2).map(|w| w[1] - w[0]).collect();
    let model_half: Vec<Duration> = (0..turns).map(|t| tools[t] - models[t]).collect();
    let tool_half: Vec<Duration> = (0..turns).map(|t| models[t + 1] - tools[t]).collect();
    let mut series = vec![
        ("run side", run_side),
        ("run side, model half", model_half),
        ("run side, tool half", tool_half),
        ("consumer", consumer),
    ];
    if let Some(probe) = &backend.probe {
        let windows: Vec<(Instant, Instant)> = models.windows(2).map(|w| (w[0], w[1])).collect();
        series.extend(store_series(probe, &windows));
    }
    TurnTimes { series, whole, session_id: session.id() }
}

/// The store's own time in each window: its commits (on the run's path), its event appends
/// (the persister's, beside the run; the end of a run waits for them), its reservations.
fn store_series(
    probe: &Probe,
    windows: &[(Instant, Instant)],
) -> Vec<(&'static str, Vec<Duration>)> {
    vec![
        ("store: commit() time", probe.per_window(windows, |op| op == ProbeOp::Commit)),
        (
            "store: append_events time",
            probe.per_window(windows, |op| matches!(op, ProbeOp::Append(_))),
        ),
    ]
}

/// `turns` executes of one text turn each on one session.
async fn w2_separate(backend: &Backend, turns: usize) -> TurnTimes {
    let script: Vec<FauxTurn> =
        (0..turns).map(|i| FauxTurn::text(format!("Answer {i}: fine."))).collect();
    let agent = backend.agent(FauxScript::new(script), 10);
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let mut times = Vec::with_capacity(turns);
    let mut windows = Vec::with_capacity(turns);
    let whole = Instant::now();
    for i in 0..turns {
        let start = Instant::now();
        let stream = agent.execute(&session, Input::text(format!("question {i}"))).await.unwrap();
        let (_, status) = consume(stream, start).await;
        times.push(start.elapsed());
        windows.push((start, Instant::now()));
        assert_eq!(status, SessionStatus::Completed);
    }
    let mut series = vec![("execute → result", times)];
    if let Some(probe) = &backend.probe {
        series.extend(store_series(probe, &windows));
    }
    TurnTimes { series, whole: whole.elapsed(), session_id: session.id() }
}

// ---------------------------------------------------------------------------------------------
// W3: many sessions at once
// ---------------------------------------------------------------------------------------------

fn w3(rt: &tokio::runtime::Runtime, config: &Config, kinds: &[Kind]) {
    let sessions = config.sessions;
    let chars = config.session_chars / CHUNK * CHUNK;
    let per_session = (chars / CHUNK) as u64;
    let total = per_session * sessions as u64;
    let runs = config.runs;
    println!();
    println!(
        "## W3: {sessions} sessions at once, each one turn of {} chars in {CHUNK}-char deltas \
         ({} deltas in all), every event serialized; {runs} run(s) per store on a fresh store \
         (multi-thread runtime, 2 workers)",
        thousands(chars as u64),
        thousands(total)
    );
    println!();
    println!(
        "| store | wall, each run | deltas/s best | deltas/s median | events seen (best run) | \
         slowest session (best run) | txns / ops (sqlite) | event rows in db | JSON bytes in db \
         / delta | db file bytes / delta |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let text = Arc::new(prose(chars));
    for &kind in kinds {
        let mut results = Vec::new();
        for _ in 0..runs {
            let text = Arc::clone(&text);
            let postgres = config.postgres.clone();
            results.push(run_on(rt, async move {
                let backend = Backend::open(kind, postgres).await;
                let turn = FauxTurn::text(text.as_str()).with_chunk_size(CHUNK);
                let agent = backend.agent(FauxScript::new([turn]), 10);
                let mut handles = Vec::with_capacity(sessions);
                for _ in 0..sessions {
                    handles.push(agent.create_session(SessionOptions::default()).await.unwrap());
                }
                let ids: Vec<String> = handles.iter().map(SessionHandle::id).collect();
                let db_before = backend.event_bytes(&ids);
                let stats_before = backend.write_stats();
                let go = Arc::new(tokio::sync::Barrier::new(sessions + 1));
                let mut tasks = Vec::with_capacity(sessions);
                for session in handles {
                    let agent = agent.clone();
                    let go = Arc::clone(&go);
                    tasks.push(tokio::spawn(async move {
                        go.wait().await;
                        let start = Instant::now();
                        let stream = agent.execute(&session, Input::text("go")).await.unwrap();
                        let (seen, status) = consume(stream, start).await;
                        assert_eq!(status, SessionStatus::Completed);
                        (seen, start.elapsed())
                    }));
                }
                go.wait().await;
                let start = Instant::now();
                let mut seen_all = Seen::default();
                let mut slowest = Duration::ZERO;
                for task in tasks {
                    let (seen, took) = task.await.unwrap();
                    seen_all.events += seen.events;
                    seen_all.text_deltas += seen.text_deltas;
                    seen_all.text_chars += seen.text_chars;
                    slowest = slowest.max(took);
                }
                let wall = start.elapsed();
                assert_eq!(seen_all.text_chars, chars as u64 * sessions as u64);
                let writes = backend.write_stats().zip(stats_before).map(|(after, before)| {
                    (after.transactions - before.transactions, after.operations - before.operations)
                });
                let db = backend.event_bytes(&ids);
                backend.clean(&ids).await;
                (wall, seen_all, slowest, writes, db, db_before)
            }));
        }
        let walls: Vec<Duration> = results.iter().map(|r| r.0).collect();
        let best = results.iter().min_by_key(|r| r.0).unwrap();
        let (_, seen, slowest, writes, db, db_before) = best;
        let writes = writes.map_or_else(|| "–".into(), |(t, o)| format!("{t} / {o}"));
        let (rows, json_per, file_per) = match db {
            Some(after) => {
                let before = db_before.map_or((0, 0, 0), |b| {
                    (b.rows, b.json_bytes, b.file_bytes.unwrap_or_default())
                });
                (
                    thousands(after.rows - before.0),
                    format!("{:.1}", (after.json_bytes - before.1) as f64 / total as f64),
                    after.file_bytes.map_or_else(
                        || "–".into(),
                        |f| format!("{:.1}", f.saturating_sub(before.2) as f64 / total as f64),
                    ),
                )
            }
            None if kind.durable() => ("n/a".into(), "n/a".into(), "n/a".into()),
            None => ("–".into(), "–".into(), "–".into()),
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            kind.name(),
            walls.iter().map(|d| ms(*d)).collect::<Vec<_>>().join(", "),
            thousands(rate(total, best.0)),
            thousands(rate(total, median(walls.clone()))),
            thousands(seen.events),
            ms(*slowest),
            writes,
            rows,
            json_per,
            file_per,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// The stores alone
// ---------------------------------------------------------------------------------------------

fn delta_records(session_id: &str, first_seq: u64, n: usize) -> Vec<Arc<weft_core::EventRecord>> {
    let session_id: Arc<str> = Arc::from(session_id);
    let run_id: Arc<str> = Arc::from("run-bench");
    let node: Arc<str> = Arc::from("think-0");
    let at = weft_core::now_ms();
    (0..n as u64)
        .map(|i| {
            Arc::new(weft_core::EventRecord {
                session_id: Arc::clone(&session_id),
                run_id: Arc::clone(&run_id),
                seq: first_seq + i,
                node_id: Some(Arc::clone(&node)),
                at,
                event: AgentEvent::TextDelta { index: 0, delta: "abcd".into() },
                messages: None,
            })
        })
        .collect()
}

fn store_alone(rt: &tokio::runtime::Runtime, config: &Config, kinds: &[Kind]) {
    let n = config.text_deltas.min(200_000);
    let runs = config.runs;
    println!();
    println!(
        "## Stores alone: {} text_delta records (4 chars) appended in batches, read back in pages \
         of 1,024; reserve_seqs latency idle and behind an append of 4,096; best of {runs} ({} \
         runtime)",
        thousands(n as u64),
        runtime_name(rt)
    );
    println!();
    println!(
        "| store | append, batch 256 (records/s) | append, batch 4,096 (records/s) | one append of \
         4,096 | read, pages of 1,024 (records/s) | reserve idle (median of 20) | reserve while \
         appending 4,096 (median of 5) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for &kind in kinds.iter().filter(|k| **k != Kind::None) {
        let mut best: Option<[Duration; 6]> = None;
        for _ in 0..runs {
            let postgres = config.postgres.clone();
            let times = run_on(rt, async move {
                let backend = Backend::open(kind, postgres).await;
                let store = Arc::clone(backend.store.as_ref().unwrap());
                let agent = backend.agent(FauxScript::new([]), 10);
                let mut ids = Vec::new();
                let mut appends = Vec::new();
                for batch in [256, 4096] {
                    let id = agent.create_session(SessionOptions::default()).await.unwrap().id();
                    let records = delta_records(&id, 1, n);
                    let start = Instant::now();
                    for chunk in records.chunks(batch) {
                        store.append_events(&id, chunk.to_vec(), None).await.unwrap();
                    }
                    appends.push(start.elapsed());
                    ids.push(id);
                }
                let id = ids[1].clone();
                let start = Instant::now();
                let mut after = 0;
                loop {
                    let page = store.read_events(&id, after, 1024).await.unwrap();
                    let Some(last) = page.last() else { break };
                    after = last.seq;
                }
                let read = start.elapsed();
                assert_eq!(after, n as u64);
                let mut idle = Vec::new();
                for _ in 0..20 {
                    let start = Instant::now();
                    store.reserve_seqs(&id, 4096).await.unwrap();
                    idle.push(start.elapsed());
                }
                let mut behind = Vec::new();
                let mut alone = Vec::new();
                let mut next = store.reserve_seqs(&id, 1).await.unwrap() + 1;
                for _ in 0..5 {
                    let records = delta_records(&id, next, 4096);
                    let start = Instant::now();
                    store.append_events(&id, records, None).await.unwrap();
                    alone.push(start.elapsed());
                    next = store.reserve_seqs(&id, 1).await.unwrap() + 1;
                    let records = delta_records(&id, next, 4096);
                    let writer = Arc::clone(&store);
                    let sid = id.clone();
                    let append =
                        tokio::spawn(
                            async move { writer.append_events(&sid, records, None).await },
                        );
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    let start = Instant::now();
                    store.reserve_seqs(&id, 4096).await.unwrap();
                    behind.push(start.elapsed());
                    append.await.unwrap().unwrap();
                    next = store.reserve_seqs(&id, 1).await.unwrap() + 1;
                }
                backend.clean(&ids).await;
                [appends[0], appends[1], median(alone), read, median(idle), median(behind)]
            });
            best = Some(match best {
                None => times,
                Some(b) => std::array::from_fn(|i| b[i].min(times[i])),
            });
        }
        let [a256, a4096, one, read, idle, behind] = best.unwrap();
        println!(
            "| {} | {} | {} | {} | {} | {} | {} |",
            kind.name(),
            thousands(rate(n as u64, a256)),
            thousands(rate(n as u64, a4096)),
            ms(one),
            thousands(rate(n as u64, read)),
            us(idle),
            us(behind),
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Diagnostic: a store that records when events are appended (and may yield on reservations)
// ---------------------------------------------------------------------------------------------

/// Wraps a store: records the instant and size of every `append_events`, and with
/// `yield_on_reserve` lets other tasks run once before each `reserve_seqs`. Everything else is
/// passed through.
struct Probe {
    inner: Arc<dyn SessionStore>,
    yield_on_reserve: bool,
    /// Every `commit`, `reserve_seqs` and `append_events`: what, when it began, how long.
    ops: std::sync::Mutex<Vec<(ProbeOp, Instant, Duration)>>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ProbeOp {
    Commit,
    Reserve,
    /// With the number of events.
    Append(usize),
}

impl Probe {
    fn record(&self, op: ProbeOp, start: Instant) {
        self.ops.lock().unwrap().push((op, start, start.elapsed()));
    }

    /// What it saw since `start`.
    fn summary(&self, start: Instant) -> ProbeSummary {
        let ops = self.ops.lock().unwrap();
        let appends: Vec<(Instant, usize)> = ops
            .iter()
            .filter_map(|(op, at, _)| match op {
                ProbeOp::Append(n) => Some((*at, *n)),
                _ => None,
            })
            .collect();
        let reserves: Vec<Duration> =
            ops.iter().filter(|(op, ..)| *op == ProbeOp::Reserve).map(|(_, _, d)| *d).collect();
        let (first_append_at, first_append_events) =
            appends.first().map_or((Duration::ZERO, 0), |(at, n)| (*at - start, *n));
        ProbeSummary {
            appends: appends.len(),
            first_append_at,
            first_append_events,
            largest_append: appends.iter().map(|(_, n)| *n).max().unwrap_or(0),
            reserves: reserves.len(),
            reserve_total: reserves.iter().sum(),
            reserve_longest: reserves.iter().max().copied().unwrap_or_default(),
        }
    }

    /// For each window `[from, to)`, the total time of the operations `pick` selects that
    /// began in it.
    fn per_window(
        &self,
        windows: &[(Instant, Instant)],
        pick: impl Fn(ProbeOp) -> bool,
    ) -> Vec<Duration> {
        let ops = self.ops.lock().unwrap();
        windows
            .iter()
            .map(|(from, to)| {
                ops.iter()
                    .filter(|(op, at, _)| pick(*op) && at >= from && at < to)
                    .map(|(_, _, d)| *d)
                    .sum()
            })
            .collect()
    }
}

/// What a [`Probe`] saw during a run.
#[derive(Debug, Clone, Copy)]
struct ProbeSummary {
    /// `append_events` calls.
    appends: usize,
    /// When the first came (after `execute()`), and how many events it had.
    first_append_at: Duration,
    first_append_events: usize,
    /// The most events one append had.
    largest_append: usize,
    /// `reserve_seqs` calls, their total and longest time.
    reserves: usize,
    reserve_total: Duration,
    reserve_longest: Duration,
}

/// Passes every call on to `inner`, timing `commit`, `reserve_seqs` and `append_events`.
impl weft_core::ForwardingStore for Probe {
    fn inner(&self) -> &dyn SessionStore {
        &*self.inner
    }
    fn commit<'a>(&'a self, commit: weft_core::Commit) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let start = Instant::now();
            let done = self.inner.commit(commit).await;
            self.record(ProbeOp::Commit, start);
            done
        })
    }
    fn reserve_seqs<'a>(&'a self, id: &'a str, count: u64) -> StoreFuture<'a, u64> {
        Box::pin(async move {
            let start = Instant::now();
            if self.yield_on_reserve {
                tokio::task::yield_now().await;
            }
            let first = self.inner.reserve_seqs(id, count).await;
            self.record(ProbeOp::Reserve, start);
            first
        })
    }
    fn append_events<'a>(
        &'a self,
        id: &'a str,
        events: Vec<Arc<weft_core::EventRecord>>,
        lease: Option<&'a str>,
    ) -> StoreFuture<'a, ()> {
        Box::pin(async move {
            let start = Instant::now();
            let n = events.len();
            let done = self.inner.append_events(id, events, lease).await;
            self.record(ProbeOp::Append(n), start);
            done
        })
    }
}
