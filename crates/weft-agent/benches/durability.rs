//! What each run `durability` costs (`cargo bench -p weft-agent --bench durability`).
//!
//! For each store (SQLite on a file in a fresh temporary directory; Postgres when
//! `WEFT_TEST_POSTGRES_URL` is set, e.g. `eval "$(bash .ci/postgres.sh)"`) and each mode
//! (`sync`, `async`, `exit`):
//!
//! * **paced**: `WEFT_BENCH_SESSIONS` sessions (default 30) started together, each one faux turn
//!   of 200 four-character deltas, one every 50 ms (20 per second per session, the load of the
//!   server harness in `../shared/bench/servers`), each read by its own task. Reports the time
//!   to the first delta (from `execute_with()` to the first `text_delta` record the caller's
//!   stream gives: p50 and p99 over sessions), the process's CPU time per delta (user + system,
//!   from `/proc/self/stat`, over the whole measure), and the store's writes per run (commits
//!   and event appends, counted by a pass-through wrapper).
//! * **burst**: one session streaming `WEFT_BENCH_TEXT_DELTAS` deltas (default 200,000) with no
//!   delay: deltas per second from `execute_with()` to `result()`.
//!
//! `WEFT_BENCH_QUICK=1` (or running without cargo bench's `--bench`) runs tiny sizes.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use weft_agent::{Agent, Durability, RunOptions, SessionOptions};
use weft_core::{
    AgentEvent, Commit, EventRecord, ForwardingStore, Input, SessionStore, StoreFuture,
};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

/// Counts the writes it passes on.
struct Counting {
    inner: Arc<dyn SessionStore>,
    commits: AtomicU64,
    appends: AtomicU64,
}

#[rustfmt::skip]
impl ForwardingStore for Counting {
    fn inner(&self) -> &dyn SessionStore { &*self.inner }
    fn commit<'a>(&'a self, commit: Commit) -> StoreFuture<'a, ()> {
        self.commits.fetch_add(1, Ordering::Relaxed);
        self.inner.commit(commit)
    }
    fn append_events<'a>(&'a self, id: &'a str, events: Vec<Arc<EventRecord>>, lease: Option<&'a str>) -> StoreFuture<'a, ()> {
        self.appends.fetch_add(1, Ordering::Relaxed);
        self.inner.append_events(id, events, lease)
    }
}

/// The process's CPU time so far (user + system), from `/proc/self/stat`.
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command (which may hold spaces) start after its closing ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok()).unwrap_or(0);
    // utime and stime are the 14th and 15th fields: 12th and 13th after the command.
    let total = ticks(11) + ticks(12);
    // CLK_TCK is 100 on Linux.
    Duration::from_millis(total * 10)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let at = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[at.min(sorted.len() - 1)]
}

/// Opens a fresh store.
type Opener =
    Box<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Arc<dyn SessionStore>>>>>;

struct Store {
    name: &'static str,
    open: Opener,
}

fn stores(dir: &tempfile::TempDir) -> Vec<Store> {
    let path = dir.path().to_path_buf();
    let mut stores = vec![Store {
        name: "sqlite",
        open: Box::new(move || {
            let path = path.join(format!("weft-{}.db", uuid()));
            Box::pin(async move {
                Arc::new(weft_store::SqliteStore::open(path).await.unwrap())
                    as Arc<dyn SessionStore>
            })
        }),
    }];
    match std::env::var("WEFT_TEST_POSTGRES_URL") {
        Ok(url) => stores.push(Store {
            name: "postgres",
            open: Box::new(move || {
                let url = url.clone();
                Box::pin(async move { weft_store::connect(&url).await.unwrap() })
            }),
        }),
        Err(_) => println!("(postgres skipped: WEFT_TEST_POSTGRES_URL is not set)"),
    }
    stores
}

fn uuid() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    u64::from(std::process::id()) << 32 | NEXT.fetch_add(1, Ordering::Relaxed)
}

fn agent(turn: FauxTurn, store: Arc<dyn SessionStore>) -> Agent {
    Agent::builder(FauxProvider::new(FauxScript::new([turn]))).store(store).build().unwrap()
}

/// Runs `sessions` paced sessions at once; prints one row.
async fn paced(store: &Store, durability: Durability, sessions: usize, deltas: usize) {
    let counting = Arc::new(Counting {
        inner: (store.open)().await,
        commits: AtomicU64::new(0),
        appends: AtomicU64::new(0),
    });
    let turn = FauxTurn::text(common::prose(deltas * 4)).with_chunk_size(4).with_delay_ms(50);
    let agent = agent(turn, counting.clone());
    let mut handles = Vec::new();
    for _ in 0..sessions {
        handles.push(agent.create_session(SessionOptions::default()).await.unwrap());
    }
    let cpu = cpu_time();
    let tasks: Vec<_> = handles
        .into_iter()
        .map(|session| {
            let agent = agent.clone();
            tokio::spawn(async move {
                let options = RunOptions::default().durability(durability);
                let started = Instant::now();
                let mut stream = agent
                    .execute_with(&session, Input::text("go"), options)
                    .await
                    .unwrap()
                    .records();
                let mut first = None;
                let mut seen = 0u64;
                while let Some(record) = stream.next().await {
                    if let AgentEvent::TextDelta { delta, .. } = &record.event {
                        first.get_or_insert_with(|| started.elapsed());
                        seen += (delta.len() / 4) as u64;
                    }
                }
                stream.result().await;
                (first.unwrap_or_default(), seen)
            })
        })
        .collect();
    let mut firsts = Vec::new();
    let mut delivered = 0;
    for task in tasks {
        let (first, seen) = task.await.unwrap();
        firsts.push(first);
        delivered += seen;
    }
    let cpu = cpu_time().saturating_sub(cpu);
    firsts.sort();
    let runs = sessions as f64;
    println!(
        "| {} | {durability} | paced, {sessions} sessions | {:.1} / {:.1} | {:.1} | {:.1} / {:.1} |",
        store.name,
        percentile(&firsts, 0.5).as_secs_f64() * 1e3,
        percentile(&firsts, 0.99).as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 1e6 / delivered.max(1) as f64,
        counting.commits.load(Ordering::Relaxed) as f64 / runs,
        counting.appends.load(Ordering::Relaxed) as f64 / runs,
    );
}

/// One session streaming `deltas` deltas with no delay; prints one row.
async fn burst(store: &Store, durability: Durability, deltas: usize) {
    let counting = Arc::new(Counting {
        inner: (store.open)().await,
        commits: AtomicU64::new(0),
        appends: AtomicU64::new(0),
    });
    let turn = FauxTurn::text(common::prose(deltas * 4)).with_chunk_size(4);
    let agent = agent(turn, counting.clone());
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let cpu = cpu_time();
    let started = Instant::now();
    let options = RunOptions::default().durability(durability);
    let mut stream =
        agent.execute_with(&session, Input::text("go"), options).await.unwrap().records();
    let mut first = None;
    while let Some(record) = stream.next().await {
        if matches!(record.event, AgentEvent::TextDelta { .. }) {
            first.get_or_insert_with(|| started.elapsed());
        }
    }
    stream.result().await;
    let elapsed = started.elapsed();
    let cpu = cpu_time().saturating_sub(cpu);
    println!(
        "| {} | {durability} | burst, {} deltas: {} deltas/s | {:.1} | {:.2} | {} / {} |",
        store.name,
        common::thousands(deltas as u64),
        common::thousands((deltas as f64 / elapsed.as_secs_f64()) as u64),
        first.unwrap_or_default().as_secs_f64() * 1e3,
        cpu.as_secs_f64() * 1e6 / deltas as f64,
        counting.commits.load(Ordering::Relaxed),
        counting.appends.load(Ordering::Relaxed),
    );
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench")
        && std::env::var("WEFT_BENCH_QUICK").as_deref() != Ok("1");
    let env = |name: &str, default: usize, quick: usize| {
        let default = if full { default } else { quick };
        std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
    };
    let sessions = env("WEFT_BENCH_SESSIONS", 30, 3);
    let paced_deltas = if full { 200 } else { 10 };
    let burst_deltas = env("WEFT_BENCH_TEXT_DELTAS", 200_000, 2_000);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    println!(
        "| store | durability | workload | first delta, ms (p50 / p99) | CPU µs per delta | writes per run (commits / appends) |"
    );
    println!("|---|---|---|---|---|---|");
    runtime.block_on(async {
        for store in stores(&dir) {
            for durability in Durability::ALL {
                paced(&store, durability, sessions, paced_deltas).await;
            }
            for durability in Durability::ALL {
                burst(&store, durability, burst_deltas).await;
            }
        }
    });
}
