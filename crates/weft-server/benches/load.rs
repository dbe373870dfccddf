//! The server under load (issue 10): concurrent streaming sessions over loopback HTTP
//! (`cargo bench -p weft-server --bench load`).
//!
//! The server is a `weft serve` child process (the release binary, with its allocator), so its
//! memory is its own resident set: on 127.0.0.1, the faux provider playing one long text turn in
//! 4-character deltas with `delayMs` 50 (20 deltas/s per session), the memory store
//! (`WEFT_BENCH_STORE=sqlite` puts it on a SQLite file in a temporary directory), no API keys and
//! no rate limit. The binary is `WEFT_BENCH_BIN` if set, else built here with
//! `cargo build --release -p weft-cli` (`target/release/weft`).
//!
//! * `ramp`: for each step N (`WEFT_BENCH_STEPS`, default 500,1000,2000,5000,10000) a fresh
//!   server; N sessions started at `WEFT_BENCH_RAMP` per second (default 1,000), each by
//!   `POST /api/agent/execute` whose SSE response is read by its own task on its own keep-alive
//!   connection; once every session has had its first delta and 2 s more, a window of
//!   `WEFT_BENCH_WINDOW` seconds (default 10) in which every gap between two consecutive
//!   `text_delta` events of one session (as the client reads them off the socket) is recorded.
//!   Reports p50/p99/max of the gaps, the deltas/s received, the server's RSS against its RSS
//!   when idle just before the ramp (divided by N: memory per session, at the start and end of
//!   the window, with the deltas each session had streamed by then, as the memory store keeps
//!   every event), and the CPU time the server and the load generator used in the window. A step
//!   holds when every session streamed and p99 gap − 50 ms (the pacing) < 50 ms; the ramp stops
//!   at the first step that does not hold.
//! * `ttfb`: a fresh server whose script is 20 deltas (1 s); new sessions at
//!   `WEFT_BENCH_RATE` per second (default 200) for `WEFT_BENCH_SECONDS` (default 10), each read
//!   to its end: p50/p99 of the time to the response head and to the first `text_delta`.
//!
//! The load generator and the server share the machine's cores. The file-descriptor limit of
//! this process (inherited by the server) is raised with `prlimit` to 200,000 when allowed.
//!
//! Pick workloads with arguments (`-- ramp`, `-- ttfb`; none picks both). Sizes:
//! `WEFT_BENCH_QUICK=1` (or the argument `quick`) runs tiny sizes in seconds, as does any run
//! without cargo bench's `--bench` argument unless `full` is given.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;

/// The faux provider's pacing between deltas.
const PACING_MS: f64 = 50.0;

fn env_num(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.replace(['_', ','], "").parse().ok()).unwrap_or(default)
}

/// A `weft serve` child.
struct ServerProc {
    child: Child,
    base: String,
    pid: u32,
    _dir: tempfile::TempDir,
}

impl Drop for ServerProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn weft_binary() -> PathBuf {
    if let Ok(bin) = std::env::var("WEFT_BENCH_BIN") {
        return PathBuf::from(bin);
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let status = Command::new(cargo)
        .args(["build", "--release", "-p", "weft-cli", "--bin", "weft"])
        .status()
        .expect("cargo build");
    assert!(status.success(), "cargo build --release -p weft-cli failed");
    // target/release/deps/load-… → target/release/weft
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().parent().unwrap().join("weft")
}

fn start_server(bin: &PathBuf, deltas: usize, store: &str) -> ServerProc {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.json");
    let text = "abcd".repeat(deltas);
    let turn = json!({"turns": [{"text": text, "chunkSize": 4, "delayMs": PACING_MS as u64}]});
    std::fs::write(&script, turn.to_string()).unwrap();
    let config = dir.path().join("weft.toml");
    std::fs::write(&config, "[limits]\nrequests_per_minute = 0\nbody_bytes = 1048576\n").unwrap();
    let store = match store {
        "sqlite" => format!("sqlite:{}", dir.path().join("weft.db").display()),
        _ => "memory".to_string(),
    };
    let mut child = Command::new(bin)
        .arg("serve")
        .args(["--addr", "127.0.0.1:0", "--store", &store])
        .arg("--script")
        .arg(&script)
        .arg("--config")
        .arg(&config)
        .env("WEFT_HOME", dir.path())
        .env_remove("WEFT_API_KEYS")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("weft serve");
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let base = loop {
        line.clear();
        assert!(stderr.read_line(&mut line).unwrap() > 0, "weft serve exited");
        if let Some(at) = line.find("http://") {
            break line[at..].trim().to_string();
        }
    };
    // Keep draining stderr so the child never blocks on it.
    std::thread::spawn(move || {
        let mut sink = String::new();
        while stderr.read_line(&mut sink).unwrap_or(0) > 0 {
            sink.clear();
        }
    });
    let pid = child.id();
    ServerProc { child, base, pid, _dir: dir }
}

/// Resident set of a process, KiB.
fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU time of a process, seconds.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = fields.get(11).and_then(|v| v.parse().ok()).unwrap_or(0)
        + fields.get(12).and_then(|v| v.parse().ok()).unwrap_or(0);
    ticks as f64 / 100.0
}

fn body() -> serde_json::Value {
    json!({
        "input": {"role": "user", "content": "Stream, please."},
        "context": {"messages": [], "tools": []},
        "options": {"model": "faux"}
    })
}

/// What the watching tasks share.
#[derive(Default)]
struct Shared {
    /// Micros since `base` of the window's start and end (0: not set).
    window_start: AtomicU64,
    window_end: AtomicU64,
    /// Sessions that have had their first delta.
    streaming: AtomicUsize,
    /// Deltas received, in total.
    deltas: AtomicU64,
    failed: AtomicUsize,
    stop: AtomicBool,
}

/// One session's SSE reader: the gaps (µs) between consecutive deltas ending in the window,
/// and its times to the response head and to the first delta.
struct Watched {
    gaps: Vec<u32>,
    head: Option<Duration>,
    first: Option<Duration>,
    deltas: u64,
}

async fn watch(
    client: reqwest::Client,
    url: String,
    base: Instant,
    shared: Arc<Shared>,
) -> Watched {
    let mut out = Watched { gaps: Vec::new(), head: None, first: None, deltas: 0 };
    let t0 = Instant::now();
    let response = match client.post(&url).json(&body()).send().await {
        Ok(r) if r.status().is_success() => r,
        _ => {
            shared.failed.fetch_add(1, Ordering::Relaxed);
            return out;
        }
    };
    out.head = Some(t0.elapsed());
    let mut stream = response.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut last: Option<u64> = None;
    while let Some(chunk) = stream.next().await {
        let Ok(chunk) = chunk else { break };
        let now = base.elapsed().as_micros() as u64;
        buf.extend_from_slice(&chunk);
        let mut start = 0;
        while let Some(pos) = buf[start..].windows(2).position(|w| w == b"\n\n") {
            let event = &buf[start..start + pos];
            if event.windows(12).any(|w| w == b"\"text_delta\"") {
                out.deltas += 1;
                shared.deltas.fetch_add(1, Ordering::Relaxed);
                match last {
                    None => {
                        out.first = Some(t0.elapsed());
                        shared.streaming.fetch_add(1, Ordering::Relaxed);
                    }
                    Some(prev) => {
                        let from = shared.window_start.load(Ordering::Relaxed);
                        let to = shared.window_end.load(Ordering::Relaxed);
                        if from != 0 && now >= from && (to == 0 || now <= to) {
                            out.gaps.push((now - prev).min(u32::MAX as u64) as u32);
                        }
                    }
                }
                last = Some(now);
            }
            start += pos + 2;
        }
        buf.drain(..start);
        if shared.stop.load(Ordering::Relaxed) {
            break;
        }
    }
    out
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let i = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[i] as f64 / 1000.0
}

fn percentile_d(values: &mut [Duration], p: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort();
    let i = ((values.len() - 1) as f64 * p).round() as usize;
    values[i].as_secs_f64() * 1000.0
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(usize::MAX)
        .tcp_nodelay(true)
        .build()
        .unwrap()
}

/// One ramp step: true when it held.
async fn step(bin: &PathBuf, store: &str, n: usize, ramp: u64, window: u64) -> bool {
    let ramp_secs = n as f64 / ramp as f64;
    let deltas = ((ramp_secs + 2.0 + window as f64 + 30.0) * 1000.0 / PACING_MS) as usize;
    let server = start_server(bin, deltas, store);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = rss_kib(server.pid);
    let url = format!("{}/api/agent/execute", server.base);
    let shared = Arc::new(Shared::default());
    let base = Instant::now();
    let client = client();
    let mut tasks = tokio::task::JoinSet::new();
    let ramp_start = Instant::now();
    for i in 0..n {
        let due = Duration::from_secs_f64(i as f64 / ramp as f64);
        let elapsed = ramp_start.elapsed();
        if due > elapsed {
            tokio::time::sleep(due - elapsed).await;
        }
        tasks.spawn(watch(client.clone(), url.clone(), base, shared.clone()));
    }
    // Every session streaming (or failed), with a deadline.
    let deadline = Instant::now() + Duration::from_secs(60);
    while shared.streaming.load(Ordering::Relaxed) + shared.failed.load(Ordering::Relaxed) < n
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let ramp_took = ramp_start.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_start = rss_kib(server.pid);
    let deltas_start = shared.deltas.load(Ordering::Relaxed);
    let (server_cpu0, self_cpu0) = (cpu_secs(server.pid), cpu_secs(std::process::id()));
    shared.window_start.store(base.elapsed().as_micros() as u64, Ordering::Relaxed);
    let t_window = Instant::now();
    let mut rss_peak = rss_start;
    while t_window.elapsed() < Duration::from_secs(window) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        rss_peak = rss_peak.max(rss_kib(server.pid));
    }
    shared.window_end.store(base.elapsed().as_micros() as u64, Ordering::Relaxed);
    let window_took = t_window.elapsed().as_secs_f64();
    let rss_end = rss_kib(server.pid);
    let deltas_end = shared.deltas.load(Ordering::Relaxed);
    let (server_cpu1, self_cpu1) = (cpu_secs(server.pid), cpu_secs(std::process::id()));
    shared.stop.store(true, Ordering::Relaxed);
    drop(server); // ends every stream
    let mut gaps = Vec::new();
    let mut streamed = 0;
    while let Some(done) = tasks.join_next().await {
        let w = done.unwrap();
        if w.first.is_some() {
            streamed += 1;
        }
        gaps.extend(w.gaps);
    }
    gaps.sort_unstable();
    let failed = shared.failed.load(Ordering::Relaxed);
    let (p50, p99, max) = (percentile(&gaps, 0.5), percentile(&gaps, 0.99), percentile(&gaps, 1.0));
    let rate = (deltas_end - deltas_start) as f64 / window_took;
    let per_session = |rss: u64| rss.saturating_sub(idle) as f64 / n as f64;
    // The memory store keeps every event, so RSS grows with the deltas streamed: the growth
    // per delta over the window, and the per-session cost extrapolated back to no delta (the
    // session, its run, its connection and stream, without the event log).
    let (start_each, end_each) = (deltas_start as f64 / n as f64, deltas_end as f64 / n as f64);
    let per_delta = if end_each > start_each {
        (per_session(rss_end) - per_session(rss_start)) / (end_each - start_each)
    } else {
        f64::NAN
    };
    let fixed = per_session(rss_start) - per_delta * start_each;
    let held = streamed == n && failed == 0 && p99 - PACING_MS < 50.0;
    println!(
        "ramp  {store:<6} N={n:>6}  ramp {:>5.1}s  streamed {streamed}/{n} failed {failed}  \
         gaps {} p50 {p50:.1} ms p99 {p99:.1} ms max {max:.1} ms  {rate:.0} deltas/s \
         (expected {:.0})  RSS idle {:.1} MiB, window start {:.1} MiB = {:.1} KiB/session \
         ({:.0} deltas each), end {:.1} MiB = {:.1} KiB/session ({:.0} deltas each), \
         peak {:.1} MiB; growth {:.3} KiB per delta, {:.1} KiB/session without the event \
         log  CPU in window: server {:.0}%, load generator {:.0}%  {}",
        ramp_took.as_secs_f64(),
        gaps.len(),
        n as f64 * 1000.0 / PACING_MS,
        idle as f64 / 1024.0,
        rss_start as f64 / 1024.0,
        per_session(rss_start),
        deltas_start as f64 / n as f64,
        rss_end as f64 / 1024.0,
        per_session(rss_end),
        deltas_end as f64 / n as f64,
        rss_peak as f64 / 1024.0,
        per_delta,
        fixed,
        (server_cpu1 - server_cpu0) / window_took * 100.0,
        (self_cpu1 - self_cpu0) / window_took * 100.0,
        if held { "HELD" } else { "NOT HELD" },
    );
    held
}

async fn ttfb(bin: &PathBuf, store: &str, rate: u64, seconds: u64) {
    let server = start_server(bin, 20, store);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let url = format!("{}/api/agent/execute", server.base);
    let shared = Arc::new(Shared::default());
    let base = Instant::now();
    let client = client();
    let mut tasks = tokio::task::JoinSet::new();
    let total = rate * seconds;
    let start = Instant::now();
    for i in 0..total {
        let due = Duration::from_secs_f64(i as f64 / rate as f64);
        let elapsed = start.elapsed();
        if due > elapsed {
            tokio::time::sleep(due - elapsed).await;
        }
        tasks.spawn(watch(client.clone(), url.clone(), base, shared.clone()));
    }
    let sent_in = start.elapsed().as_secs_f64();
    let (mut heads, mut firsts, mut complete) = (Vec::new(), Vec::new(), 0);
    while let Some(done) = tasks.join_next().await {
        let w = done.unwrap();
        heads.extend(w.head);
        firsts.extend(w.first);
        if w.deltas == 20 {
            complete += 1;
        }
    }
    println!(
        "ttfb  {store:<6} {total} sessions at {rate}/s (sent in {sent_in:.1} s), {complete} \
         complete, {} failed: response head p50 {:.2} ms p99 {:.2} ms max {:.2} ms; first \
         text_delta p50 {:.2} ms p99 {:.2} ms max {:.2} ms",
        shared.failed.load(Ordering::Relaxed),
        percentile_d(&mut heads, 0.5),
        percentile_d(&mut heads, 0.99),
        percentile_d(&mut heads, 1.0),
        percentile_d(&mut firsts, 0.5),
        percentile_d(&mut firsts, 0.99),
        percentile_d(&mut firsts, 1.0),
    );
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = std::env::var("WEFT_BENCH_QUICK").is_ok_and(|v| v == "1")
        || args.iter().any(|a| a == "quick")
        || (!args.iter().any(|a| a == "--bench") && !args.iter().any(|a| a == "full"));
    let picked: Vec<&str> =
        args.iter().map(String::as_str).filter(|a| matches!(*a, "ramp" | "ttfb")).collect();
    let wants = |w: &str| picked.is_empty() || picked.contains(&w);
    let store = std::env::var("WEFT_BENCH_STORE").unwrap_or_else(|_| "memory".to_string());
    let steps: Vec<usize> = match std::env::var("WEFT_BENCH_STEPS") {
        Ok(list) => {
            list.split(',').filter_map(|s| s.trim().replace('_', "").parse().ok()).collect()
        }
        Err(_) if quick => vec![50, 100],
        Err(_) => vec![500, 1_000, 2_000, 5_000, 10_000],
    };
    let ramp = env_num("WEFT_BENCH_RAMP", 1_000);
    let window = env_num("WEFT_BENCH_WINDOW", if quick { 2 } else { 10 });
    let rate = env_num("WEFT_BENCH_RATE", if quick { 20 } else { 200 });
    let seconds = env_num("WEFT_BENCH_SECONDS", if quick { 2 } else { 10 });

    let me = std::process::id().to_string();
    let raised = Command::new("prlimit")
        .stderr(Stdio::null())
        .args(["--pid", &me, "--nofile=200000:200000"])
        .status()
        .is_ok_and(|s| s.success());
    println!(
        "load: store {store}, fd limit raised to 200000: {raised}, steps {steps:?}, ramp {ramp}/s, \
         window {window} s{}",
        if quick { " (quick)" } else { "" }
    );
    let bin = weft_binary();
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    runtime.block_on(async {
        if wants("ramp") {
            for &n in &steps {
                if !step(&bin, &store, n, ramp, window).await {
                    println!("ramp  stopped: N={n} did not hold");
                    break;
                }
            }
        }
        if wants("ttfb") {
            ttfb(&bin, &store, rate, seconds).await;
        }
    });
}
