//! Weft side by side with pi-agent-core (issue 11): `bench/compare.sh`, or
//! `cargo build --release -p weft-cli && cargo bench -p weft-agent --bench compare`.
//!
//! Runs pi's workloads (`../shared/bench/pi15/bench.mjs`, the same as `../shared/bench/pi/`'s)
//! for Weft and, when `WEFT_PI_BENCH` names the folder holding pi's `bench.mjs` (pi-agent-core
//! 1.5.2 installed there by `npm ci`, with the Node 22 it needs in `node_modules/.bin/node`,
//! which is used when present; or 0.73.1 with the `node` on the `PATH`), for pi in the same run,
//! and prints one table with the ratios:
//!
//! * `w1`: 1,000,000 text deltas of 4 characters, whole process: `weft run --script FILE
//!   --store memory` with `--json` (Loom) and `--protocol native`, stdout to `/dev/null`, against
//!   `node bench.mjs w1 mode=lean`: wall time, peak RSS (`/usr/bin/time -f %M`), wire bytes per
//!   delta (one more, untimed run with stdout counted); instructions per delta under callgrind
//!   (`valgrind`, when installed) as `(I(n) - I(1,000)) / (n - 1,000)`, so the start-up and the
//!   per-run constant are subtracted.
//! * `w2`: one tool call whose JSON arguments (`{"content":"…"}`) arrive in 10,000 deltas of 4
//!   characters, through the library (a faux provider, a local `write` tool, events counted but
//!   not serialized, as pi's `w2` default); and a 2 MB call (500,000 deltas): its peak RSS above
//!   the baseline taken just before `execute()`, and its peak heap above the heap at that point
//!   (this binary's global allocator counts live bytes: `peak_alloc`, the system allocator).
//! * `w3`: 200 and 1,000 tool turns through the library (each turn 6 text deltas and a `noop`
//!   call whose arguments arrive in deltas; every event serialized to JSON): ms per model call,
//!   and the first and last 20 turns; instructions per turn under callgrind at turn ~15 and
//!   ~995 as `(I(20) - I(10)) / 10` and `(I(1,000) - I(990)) / 10` (whole processes).
//! * `w4`: 10,000 idle sessions of 20 messages (10 user × 200 characters, 10 assistant × 600,
//!   unique per session, parsed from JSON as a loaded session would be), a shared 2,000-character
//!   system prompt and one local tool, held by one `Agent` without a store: RSS growth per
//!   session.
//!
//! Every Weft measurement runs in a fresh process (this binary runs itself with the workload as
//! its first argument and prints one JSON line), on a one-thread Tokio runtime (Node is one
//! thread too). Each is run `WEFT_BENCH_RUNS` times (default 3): medians, and the best.
//! Arguments pick workloads (`-- w1 w3`); `WEFT_COMPARE_CG_DELTAS` sets the callgrind size of
//! `w1` (default 200,000), `WEFT_BENCH_W2_DELTAS` the size of `w2` (default 10,000),
//! `WEFT_COMPARE_CALLGRIND=0` skips callgrind, `WEFT_COMPARE_JSON=FILE` also writes the table's
//! rows there as JSON lines (`bench/plot.py` draws them). Run without cargo
//! bench's `--bench` argument (`cargo test --benches`) it takes tiny sizes and skips pi and
//! callgrind, unless given `full`.

#![allow(clippy::unwrap_used)]

use std::hint::black_box;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use weft_agent::{Agent, AgentHooks, ExecuteStream, SessionOptions, tool_fn};
use weft_core::{AgentEvent, Input, Message, SessionStatus};
use weft_llm::ModelRequest;
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

/// Counts live heap bytes and their peak (W2's peak heap above its baseline). Two relaxed
/// atomic operations per allocation: in every workload of this binary (W2, W3, W4), not in the
/// `weft` binary that W1 runs.
#[global_allocator]
static HEAP: peak_alloc::PeakAlloc = peak_alloc::PeakAlloc;

/// Characters per delta.
const CHUNK: usize = 4;
/// Turns averaged at each end of a `w3` run (as pi's harness).
const WINDOW: usize = 20;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Some(first) = args.first()
        && let Some(rest) = first.strip_prefix("child-")
    {
        let kv = KeyValues::parse(&args[1..]);
        let out = match rest {
            "w2" => child_w2(&kv),
            "w3" => child_w3(&kv),
            "w4" => child_w4(&kv),
            other => panic!("unknown child workload {other}"),
        };
        println!("{out}");
        return;
    }
    let words: Vec<&str> =
        args.iter().map(String::as_str).filter(|a| !a.starts_with('-')).collect();
    let quick = !args.iter().any(|a| a == "--bench") && !words.contains(&"full");
    let mut workloads: Vec<&str> =
        words.iter().copied().filter(|w| ["w1", "w2", "w3", "w4"].contains(w)).collect();
    if let Some(bad) = words.iter().find(|w| !["w1", "w2", "w3", "w4", "full"].contains(w)) {
        eprintln!("unknown argument `{bad}`: expected w1 w2 w3 w4 or full");
        std::process::exit(2);
    }
    if workloads.is_empty() {
        workloads = vec!["w1", "w2", "w3", "w4"];
    }
    Orchestra::new(quick).run(&workloads);
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// `key=value` arguments of a child.
struct KeyValues(Vec<(String, String)>);

impl KeyValues {
    fn parse(args: &[String]) -> Self {
        Self(
            args.iter()
                .filter_map(|a| a.split_once('=').map(|(k, v)| (k.to_string(), v.to_string())))
                .collect(),
        )
    }

    fn num(&self, key: &str, default: usize) -> usize {
        self.0.iter().find(|(k, _)| k == key).map_or(default, |(_, v)| v.parse().unwrap())
    }
}

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

/// A `kB` field of `/proc/self/status` (`VmRSS`, `VmHWM`).
fn status_kb(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| {
            let rest = line.strip_prefix(field)?.strip_prefix(':')?;
            rest.trim().strip_suffix("kB")?.trim().parse().ok()
        })
        .unwrap()
}

/// pi's `textOf`: `n` characters of deterministic pseudo-random lowercase text and spaces
/// (xorshift32), the same bytes as `mock.mjs` produces for the same seed.
fn text_of(n: usize, seed: u32) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz     ";
    let mut x = if seed == 0 { 1 } else { seed };
    let mut s = String::with_capacity(n);
    for _ in 0..n {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        s.push(ALPHABET[(x % ALPHABET.len() as u32) as usize] as char);
    }
    s
}

/// The text of `n` deltas of 4 characters cut from one 4,096-character base, as pi's
/// `textDeltas`.
fn delta_text(n: usize) -> String {
    let base = text_of(4096, 7);
    let mut out = String::with_capacity(n * CHUNK);
    for i in 0..n {
        let off = (i * CHUNK) % (base.len() - CHUNK);
        out.push_str(&base[off..off + CHUNK]);
    }
    out
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn min(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::INFINITY, f64::min)
}

#[derive(Deserialize, JsonSchema)]
struct WriteArgs {
    content: String,
}

#[derive(Deserialize, JsonSchema)]
struct NoopArgs {
    #[allow(dead_code)]
    i: u64,
}

// ---------------------------------------------------------------------------------------------
// Children: one workload per process, one JSON line out
// ---------------------------------------------------------------------------------------------

/// W2: one tool call whose arguments arrive in `n` deltas (arguments exactly `4 n` bytes).
fn child_w2(kv: &KeyValues) -> Value {
    let n = kv.num("n", 10_000).max(4);
    // Characters per delta: 4, or larger to see the payload's copies without the per-delta
    // events the run keeps.
    let chunk = kv.num("chunk", CHUNK);
    let content = delta_text(n).split_off(14); // `{"content":"` + `"}` make up the 14
    let args = format!("{{\"content\":\"{content}\"}}");
    assert_eq!(args.len(), n * CHUNK);
    let n = args.len().div_ceil(chunk);
    let script = FauxScript::new([
        FauxTurn::tool_call("write", Value::String(args.clone())).with_chunk_size(chunk),
        FauxTurn::text("done"),
    ]);
    let write = tool_fn("write", "Writes content", |a: WriteArgs| async move {
        black_box(a.content.len());
        Ok::<_, String>("ok")
    });
    let agent = Agent::builder(FauxProvider::new(script)).tool(write).build().unwrap();
    let rt = rt();
    rt.block_on(async {
        let session = agent.create_session(SessionOptions::default()).await.unwrap();
        let base = status_kb("VmRSS");
        let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
        let heap_base = HEAP.current_usage();
        HEAP.reset_peak_usage();
        let start = Instant::now();
        let mut stream = agent.execute(&session, Input::text("Write a long file.")).await.unwrap();
        let (mut events, mut deltas, mut delta_bytes) = (0u64, 0u64, 0usize);
        while let Some(event) = stream.next().await {
            events += 1;
            if let AgentEvent::ToolcallDelta { delta, .. } = &event {
                deltas += 1;
                delta_bytes += delta.len();
            }
            black_box(&event);
        }
        let result = stream.result().await;
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let heap_peak = HEAP.peak_usage();
        assert_eq!(result.status, SessionStatus::Completed);
        // Past 16,384 events of a run a burst of deltas is merged (the hub keeps the run's
        // events without a store): every byte arrives, in fewer events.
        assert_eq!(delta_bytes, args.len(), "every argument byte arrives");
        let peak = reset.then(|| status_kb("VmHWM"));
        json!({
            "workload": "w2", "N": n, "argBytes": args.len(), "ms": ms,
            "usPerDelta": ms * 1e3 / n as f64, "events": events, "deltaEvents": deltas,
            "rssBaseKB": base, "peakKB": peak,
            "peakAboveBaseKB": peak.map(|p| p.saturating_sub(base)),
            "heapBaseBytes": heap_base,
            "heapPeakAboveBaseBytes": heap_peak.saturating_sub(heap_base),
        })
    })
}

/// W3: `t` tool turns then an answer; every event serialized to JSON.
fn child_w3(kv: &KeyValues) -> Value {
    let t = kv.num("t", 200);
    let mut turns: Vec<FauxTurn> = (0..t)
        .map(|k| {
            FauxTurn::text("Let me call the tool.")
                .with_tool_call("noop", json!({ "i": k }))
                .with_chunk_size(CHUNK)
        })
        .collect();
    turns.push(FauxTurn::text("All done.").with_chunk_size(CHUNK));
    let noop = tool_fn("noop", "Does nothing", |_: NoopArgs| async { Ok::<_, String>("ok") });
    let clock = ModelClock::default();
    let agent = Agent::builder(FauxProvider::new(FauxScript::new(turns)))
        .tool(noop)
        .hooks(clock.clone())
        .max_turns(u32::try_from(t + 10).unwrap())
        .build()
        .unwrap();
    let rt = rt();
    rt.block_on(async {
        let session = agent.create_session(SessionOptions::default()).await.unwrap();
        let start = Instant::now();
        let stream =
            agent.execute(&session, Input::text("Call the tool repeatedly.")).await.unwrap();
        let (events, bytes, status) = consume_serialized(stream).await;
        let end = Instant::now();
        let starts = clock.0.lock().unwrap().clone();
        let ms = (end - start).as_secs_f64() * 1e3;
        assert_eq!(status, SessionStatus::Completed);
        assert_eq!(starts.len(), t + 1, "every model call ran");
        let mut marks = starts;
        marks.push(end);
        let per: Vec<f64> = marks.windows(2).map(|w| (w[1] - w[0]).as_secs_f64() * 1e3).collect();
        let avg = |s: &[f64]| s.iter().sum::<f64>() / s.len().max(1) as f64;
        let w = WINDOW.min(per.len());
        let last = &per[per.len().saturating_sub(w + 1)..per.len() - 1];
        json!({
            "workload": "w3", "T": t, "modelCalls": per.len(), "ms": ms,
            "msPerTurn": ms / per.len() as f64, "firstTurnsMs": avg(&per[..w]),
            "lastTurnsMs": avg(last), "events": events, "bytes": bytes,
            "messages": session.snapshot().messages.len(),
        })
    })
}

/// Marks when each model call starts, on the run's side (the consumer receives events in
/// batches, so its own clock would bunch them).
#[derive(Clone, Default)]
struct ModelClock(Arc<Mutex<Vec<Instant>>>);

impl AgentHooks for ModelClock {
    fn before_model_call<'a>(&'a self, _request: &'a mut ModelRequest) -> BoxFuture<'a, ()> {
        self.0.lock().unwrap().push(Instant::now());
        Box::pin(async {})
    }
}

/// Reads a run's events, serializing each to JSON into one reused buffer; returns the events,
/// the bytes and the status.
async fn consume_serialized(mut stream: ExecuteStream) -> (u64, u64, SessionStatus) {
    let (mut events, mut bytes) = (0u64, 0u64);
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    while let Some(event) = stream.next().await {
        events += 1;
        buf.clear();
        serde_json::to_writer(&mut buf, &event).unwrap();
        bytes += buf.len() as u64;
    }
    (events, bytes, stream.result().await.status)
}

/// One session's conversation as JSON (a loaded session file): `turns` user messages of
/// `user` characters and as many assistant messages of `asst`, unique to session `s`.
fn conversation(s: usize, turns: usize, user: usize, asst: usize) -> String {
    let mut msgs = Vec::with_capacity(turns * 2);
    for j in 0..turns {
        let seed = u32::try_from(s * 1000 + j + 1).unwrap();
        msgs.push(json!({
            "role": "user",
            "content": format!("[a{s} m{}] {}", 2 * j, text_of(user, seed)),
            "timestamp": 1_700_000_000_000u64 + j as u64,
        }));
        msgs.push(json!({
            "role": "assistant",
            "content": [{"type": "text", "text": format!("[a{s} m{}] {}", 2 * j + 1, text_of(asst, seed + 500))}],
            "stopReason": "stop",
            "usage": {"input": 1200, "output": 150, "cacheRead": 0, "cacheWrite": 0, "total": 1350},
            "provider": "anthropic", "model": "claude-sonnet-4-5",
            "timestamp": 1_700_000_000_000u64 + j as u64,
        }));
    }
    serde_json::to_string(&msgs).unwrap()
}

/// W4: `s` idle sessions of `msgs` messages held by one agent (no store).
fn child_w4(kv: &KeyValues) -> Value {
    let s = kv.num("s", 10_000);
    let m = kv.num("msgs", 20);
    let noop = tool_fn("noop", "Does nothing", |_: NoopArgs| async { Ok::<_, String>("ok") });
    let agent = Agent::builder(FauxProvider::new(FauxScript::new([]))).tool(noop).build().unwrap();
    // One prompt shared by every session, as pi's bench shares one string.
    let system_prompt: std::sync::Arc<str> =
        format!("You are a helpful assistant. {}", text_of(2000, 3)).into();
    let rt = rt();
    rt.block_on(async {
        // One session made and dropped first, so one-off allocations are in the baseline; the
        // conversations' JSON is made beforehand (the session files, as it were), so the
        // temporaries of building it do not fragment the heap being measured.
        drop(agent.create_session(SessionOptions::default()).await.unwrap());
        let files: Vec<String> = (0..s).map(|i| conversation(i, m / 2, 200, 600)).collect();
        let json_bytes: usize = files.iter().map(String::len).sum();
        let mut sessions = Vec::with_capacity(s);
        let base = status_kb("VmRSS");
        let start = Instant::now();
        for json in &files {
            let messages: Vec<Message> = serde_json::from_str(json).unwrap();
            let options = SessionOptions {
                messages,
                system_prompt: Some(std::sync::Arc::clone(&system_prompt)),
                ..SessionOptions::default()
            };
            sessions.push(agent.create_session(options).await.unwrap());
        }
        let ms = start.elapsed().as_secs_f64() * 1e3;
        let after = status_kb("VmRSS");
        assert_eq!(sessions.last().unwrap().snapshot().messages.len(), m);
        let handles = sessions.len() * std::mem::size_of_val(&sessions[0]);
        json!({
            "workload": "w4", "S": s, "msgsPerSession": m, "buildMs": ms,
            "rssBaseKB": base, "rssAfterKB": after,
            "rssPerSessionKB": (after.saturating_sub(base)) as f64 / s as f64,
            "handleVecBytesPerSession": handles / s.max(1),
            "convJsonBytesPerSession": json_bytes / s.max(1),
            "sizeOf": {
                "Message": std::mem::size_of::<Message>(),
                "AssistantContent": std::mem::size_of::<weft_core::AssistantContent>(),
                "UserContent": std::mem::size_of::<weft_core::UserContent>(),
                "Session": std::mem::size_of::<weft_core::Session>(),
            },
        })
    })
}

// ---------------------------------------------------------------------------------------------
// The orchestra: runs the children, weft and pi, prints the table
// ---------------------------------------------------------------------------------------------

/// One process's outcome.
struct Proc {
    wall: Duration,
    max_rss_kb: Option<u64>,
    stdout: String,
    stderr: String,
}

/// A row of the result table.
struct Row {
    workload: String,
    measure: String,
    weft: String,
    pi: String,
    ratio: String,
}

struct Orchestra {
    quick: bool,
    runs: usize,
    me: PathBuf,
    weft: Option<PathBuf>,
    pi: Option<PathBuf>,
    callgrind: bool,
    time: bool,
    tmp: PathBuf,
    rows: Vec<Row>,
    targets: Vec<(String, String)>,
}

impl Orchestra {
    fn new(quick: bool) -> Self {
        let me = std::env::current_exe().unwrap();
        // target/release/deps/compare-<hash> → target/release/weft
        let weft = std::env::var_os("WEFT_BIN").map(PathBuf::from).or_else(|| {
            let p = me.parent()?.parent()?.join("weft");
            p.exists().then_some(p)
        });
        let pi = std::env::var_os("WEFT_PI_BENCH")
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .filter(|_| !quick);
        let callgrind = !quick
            && std::env::var("WEFT_COMPARE_CALLGRIND").map_or(true, |v| v != "0")
            && Command::new("valgrind").arg("--version").output().is_ok_and(|o| o.status.success());
        let time = Path::new("/usr/bin/time").exists();
        let tmp = std::env::temp_dir().join(format!("weft-compare-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        Self {
            quick,
            runs: if quick { 1 } else { env_usize("WEFT_BENCH_RUNS", 3).max(1) },
            me,
            weft,
            pi,
            callgrind,
            time,
            tmp,
            rows: Vec::new(),
            targets: Vec::new(),
        }
    }

    fn run(mut self, workloads: &[&str]) {
        println!(
            "Weft side by side with pi-agent-core ({} sizes; {} runs each: median, best in \
             parentheses)",
            if self.quick { "QUICK" } else { "full" },
            self.runs
        );
        match &self.pi {
            Some(p) => {
                assert!(
                    p.join("bench.mjs").exists(),
                    "WEFT_PI_BENCH={} has no bench.mjs",
                    p.display()
                );
                let v = Command::new(self.node().unwrap()).arg("--version").output().unwrap();
                println!(
                    "pi: {} (node {})",
                    p.display(),
                    String::from_utf8_lossy(&v.stdout).trim()
                );
            }
            None => println!(
                "pi: not measured (WEFT_PI_BENCH is not set{}): Weft only",
                if self.quick { ", or quick mode" } else { "" }
            ),
        }
        if !self.callgrind {
            println!("callgrind: skipped (quick mode, WEFT_COMPARE_CALLGRIND=0 or no valgrind)");
        }
        if !self.time {
            println!("peak RSS of whole processes: n/a (/usr/bin/time is not installed)");
        }
        for w in workloads {
            match *w {
                "w1" => self.w1(),
                "w2" => self.w2(),
                "w3" => self.w3(),
                "w4" => self.w4(),
                _ => unreachable!(),
            }
        }
        println!();
        println!("| workload | measure | Weft | pi | pi ÷ Weft |");
        println!("|---|---|---|---|---|");
        for r in &self.rows {
            println!("| {} | {} | {} | {} | {} |", r.workload, r.measure, r.weft, r.pi, r.ratio);
        }
        println!();
        println!("| target (issue 11) | result |");
        println!("|---|---|");
        for (t, r) in &self.targets {
            println!("| {t} | {r} |");
        }
        if let Some(path) = std::env::var_os("WEFT_COMPARE_JSON") {
            // The rows as JSON lines, for bench/plot.py.
            let lines: String = self
                .rows
                .iter()
                .map(|r| {
                    let row = json!({
                        "workload": r.workload, "measure": r.measure,
                        "weft": r.weft, "pi": r.pi, "ratio": r.ratio,
                    });
                    format!("{row}\n")
                })
                .collect();
            std::fs::write(&path, lines).unwrap();
        }
        drop(std::fs::remove_dir_all(&self.tmp));
    }

    fn row(&mut self, workload: &str, measure: &str, weft: String, pi: String, ratio: String) {
        let r = Row { workload: workload.into(), measure: measure.into(), weft, pi, ratio };
        eprintln!("  {} | {} | {} | {} | {}", r.workload, r.measure, r.weft, r.pi, r.ratio);
        self.rows.push(r);
    }

    fn target(&mut self, what: &str, met: Option<bool>, detail: String) {
        let verdict = match met {
            Some(true) => "met",
            Some(false) => "**missed**",
            None => "not measured",
        };
        self.targets.push((what.to_string(), format!("{verdict}: {detail}")));
    }

    /// Runs `cmd` (stdout to `/dev/null` unless `capture`), timed, with its peak RSS.
    fn spawn(&self, program: &Path, args: &[String], capture: bool) -> Proc {
        let rss_file = self.tmp.join("rss");
        let mut cmd = if self.time {
            let mut c = Command::new("/usr/bin/time");
            c.arg("-f").arg("%M").arg("-o").arg(&rss_file).arg(program);
            c
        } else {
            Command::new(program)
        };
        cmd.args(args).stdin(Stdio::null()).stderr(Stdio::piped());
        cmd.stdout(if capture { Stdio::piped() } else { Stdio::null() });
        let start = Instant::now();
        let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{}: {e}", program.display()));
        let mut stdout = String::new();
        if let Some(mut out) = child.stdout.take() {
            out.read_to_string(&mut stdout).unwrap();
        }
        let mut stderr = String::new();
        child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
        let status = child.wait().unwrap();
        let wall = start.elapsed();
        assert!(status.success(), "{} {args:?} failed: {stderr}", program.display());
        let max_rss_kb = self
            .time
            .then(|| std::fs::read_to_string(&rss_file).ok())
            .flatten()
            .and_then(|s| s.lines().last()?.trim().parse().ok());
        Proc { wall, max_rss_kb, stdout, stderr }
    }

    /// Counts the bytes and lines `program args` writes to stdout (untimed), and the bytes and
    /// number of the lines shorter than 1 KiB (the delta frames; the others carry whole texts).
    fn count_stdout(&self, program: &Path, args: &[String]) -> (u64, u64, u64, u64) {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let (mut bytes, mut lines, mut small_bytes, mut small_lines) = (0u64, 0u64, 0u64, 0u64);
        let mut line_len = 0u64;
        loop {
            let n = out.read(&mut buf).unwrap();
            if n == 0 {
                break;
            }
            bytes += n as u64;
            for b in &buf[..n] {
                line_len += 1;
                if *b == b'\n' {
                    lines += 1;
                    if line_len < 1024 {
                        small_lines += 1;
                        small_bytes += line_len;
                    }
                    line_len = 0;
                }
            }
        }
        assert!(child.wait().unwrap().success());
        (bytes, lines, small_bytes, small_lines)
    }

    /// Instructions executed by `program args` under callgrind, and the lines it wrote to
    /// stdout.
    fn instructions(&self, program: &Path, args: &[String]) -> (u64, u64) {
        let mut all = vec![
            "--tool=callgrind".to_string(),
            // Threads take turns as on a machine with free cores: without it valgrind runs one
            // thread for long stretches, the persister falls behind and the hub merges deltas,
            // so fewer events are encoded than the workload makes (the figure would flatter).
            "--fair-sched=yes".to_string(),
            format!("--callgrind-out-file={}", self.tmp.join("callgrind.out").display()),
            program.display().to_string(),
        ];
        all.extend_from_slice(args);
        let stdout_path = self.tmp.join("callgrind.stdout");
        let out = Command::new("valgrind")
            .args(&all)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&stdout_path).unwrap())
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "callgrind of {args:?} failed: {stderr}");
        let lines = std::fs::read(&stdout_path).unwrap().iter().filter(|b| **b == b'\n').count();
        let instructions = stderr
            .lines()
            .find_map(|l| l.split_once("Collected :").map(|(_, n)| n.trim().parse().unwrap()))
            .unwrap_or_else(|| panic!("no `Collected` line from callgrind: {stderr}"));
        (instructions, lines as u64)
    }

    /// The Node that runs pi's harness: the one its folder installed (pi 1.5 needs Node >= 22.19,
    /// which its `package.json` brings as npm's `node` package), else `node` on the `PATH`.
    fn node(&self) -> Option<PathBuf> {
        let own = self.pi.as_ref()?.join("node_modules/.bin/node");
        if own.exists() { Some(own) } else { which("node") }
    }

    /// Runs pi's harness `runs` times; each run's JSON and whole process.
    fn pi_runs(&self, node_args: &[&str], args: &[&str]) -> Option<Vec<(Value, Proc)>> {
        let dir = self.pi.as_ref()?;
        let mut all: Vec<String> = node_args.iter().map(|s| s.to_string()).collect();
        all.push(dir.join("bench.mjs").display().to_string());
        all.extend(args.iter().map(|s| s.to_string()));
        let node = self.node()?;
        Some(
            (0..self.runs)
                .map(|_| {
                    let p = self.spawn(&node, &all, true);
                    let v: Value = serde_json::from_str(p.stdout.trim()).unwrap();
                    (v, p)
                })
                .collect(),
        )
    }

    /// Runs a child workload of this binary `runs` times; each run's JSON.
    fn child_runs(&self, args: &[String]) -> Vec<Value> {
        (0..self.runs)
            .map(|_| {
                let p = self.spawn(&self.me, args, true);
                serde_json::from_str(p.stdout.trim())
                    .unwrap_or_else(|e| panic!("child {args:?}: {e}: {} {}", p.stdout, p.stderr))
            })
            .collect()
    }

    // -- W1 ---------------------------------------------------------------------------------

    fn w1_script(&self, n: usize) -> PathBuf {
        let path = self.tmp.join(format!("w1-{n}.json"));
        if !path.exists() {
            let script = json!({"turns": [{"text": delta_text(n), "chunkSize": CHUNK}]});
            std::fs::write(&path, serde_json::to_vec(&script).unwrap()).unwrap();
        }
        path
    }

    fn weft_args(script: &Path, format: &[&str]) -> Vec<String> {
        let mut a = vec!["run".to_string(), "--script".into(), script.display().to_string()];
        a.extend(format.iter().map(|s| s.to_string()));
        a.extend(["--store".into(), "memory".into(), "Say something long.".into()]);
        a
    }

    fn w1(&mut self) {
        let n = if self.quick { 10_000 } else { env_usize("WEFT_BENCH_TEXT_DELTAS", 1_000_000) };
        let label = format!("W1 {} text deltas", thousands(n as u64));
        eprintln!("{label}…");
        let Some(weft) = self.weft.clone() else {
            println!(
                "W1 skipped: no weft binary next to this bench (cargo build --release -p \
                 weft-cli, or set WEFT_BIN)"
            );
            return;
        };
        let script = self.w1_script(n);
        let tiny = self.w1_script(1);
        let pi = self.pi_runs(&[], &["w1", &format!("n={n}"), "mode=lean"]);
        let pi_wall = pi.as_ref().map(|r| {
            let w: Vec<f64> = r.iter().map(|(_, p)| p.wall.as_secs_f64()).collect();
            (median(w.clone()), min(&w))
        });
        let pi_inproc = pi
            .as_ref()
            .map(|r| median(r.iter().map(|(v, _)| v["ms"].as_f64().unwrap() / 1e3).collect()));
        let pi_rss = pi.as_ref().and_then(|r| {
            let v: Vec<f64> =
                r.iter().filter_map(|(_, p)| p.max_rss_kb.map(|k| k as f64)).collect();
            (!v.is_empty()).then(|| median(v))
        });
        let pi_bpd = pi.as_ref().map(|r| r[0].0["bytesPerDelta"].as_f64().unwrap());
        if let Some(p) = &pi
            && let Some((med, _)) = pi_wall
        {
            let node = self.node().unwrap();
            let start: Vec<f64> = (0..self.runs)
                .map(|_| self.spawn(&node, &["-e".into(), String::new()], false).wall.as_secs_f64())
                .collect();
            eprintln!(
                "  pi: node -e '' {:.3} s; in-process {:.3} s; whole {:.3} s ({} runs)",
                median(start),
                pi_inproc.unwrap(),
                med,
                p.len()
            );
        }
        let mut loom_ipd = None;
        let mut native_ipd = None;
        for (name, format) in
            [("Loom `--json`", &["--json"][..]), ("native", &["--protocol", "native"][..])]
        {
            let args = Self::weft_args(&script, format);
            let procs: Vec<Proc> =
                (0..self.runs).map(|_| self.spawn(&weft, &args, false)).collect();
            let walls: Vec<f64> = procs.iter().map(|p| p.wall.as_secs_f64()).collect();
            let (wmed, wbest) = (median(walls.clone()), min(&walls));
            let rss: Vec<f64> =
                procs.iter().filter_map(|p| p.max_rss_kb.map(|k| k as f64)).collect();
            let startup: Vec<f64> = (0..self.runs)
                .map(|_| {
                    self.spawn(&weft, &Self::weft_args(&tiny, format), false).wall.as_secs_f64()
                })
                .collect();
            let startup = median(startup);
            let (bytes, lines, small_bytes, small_lines) = self.count_stdout(&weft, &args);
            let bpd = bytes as f64 / n as f64;
            let ratio =
                |w: f64, p: Option<f64>| p.map_or("–".into(), |p| format!("{:.2}×", p / w));
            self.row(
                &label,
                &format!("{name}: whole process, s"),
                format!("{wmed:.3} ({wbest:.3})"),
                pi_wall.map_or("–".into(), |(m, b)| format!("{m:.3} ({b:.3}), lean")),
                ratio(wmed, pi_wall.map(|p| p.0)),
            );
            self.row(
                &label,
                &format!("{name}: minus start-up (Weft: a 1-delta run, {startup:.3} s; pi: its in-process time), s"),
                format!("{:.3}", wmed - startup),
                pi_inproc.map_or("–".into(), |p| format!("{p:.3}")),
                ratio(wmed - startup, pi_inproc),
            );
            let rss_med = (!rss.is_empty()).then(|| median(rss));
            self.row(
                &label,
                &format!("{name}: peak RSS, MiB"),
                rss_med.map_or("n/a".into(), |k| format!("{:.1}", k / 1024.0)),
                pi_rss.map_or("–".into(), |k| format!("{:.1}", k / 1024.0)),
                match (rss_med, pi_rss) {
                    (Some(w), Some(p)) => format!("{:.2}×", p / w),
                    _ => "–".into(),
                },
            );
            self.row(
                &label,
                &format!("{name}: wire bytes per delta ({} lines written)", thousands(lines)),
                format!("{bpd:.1}"),
                pi_bpd.map_or("–".into(), |b| format!("{b:.1} (lean JSON, unframed)")),
                pi_bpd.map_or("–".into(), |b| format!("{:.2}×", b / bpd)),
            );
            self.row(
                &label,
                &format!(
                    "{name}: bytes per line under 1 KiB ({} such lines: the delta frames)",
                    thousands(small_lines)
                ),
                format!("{:.1}", small_bytes as f64 / small_lines.max(1) as f64),
                "–".into(),
                "–".into(),
            );
            if self.callgrind {
                let cg = env_usize("WEFT_COMPARE_CG_DELTAS", 200_000).max(2_000);
                let small = 1_000;
                eprintln!("  callgrind {name} at {cg} and {small} deltas…");
                let (big, frames) =
                    self.instructions(&weft, &Self::weft_args(&self.w1_script(cg), format));
                let (base, _) =
                    self.instructions(&weft, &Self::weft_args(&self.w1_script(small), format));
                let ipd = (big.saturating_sub(base)) as f64 / (cg - small) as f64;
                self.row(
                    &label,
                    &format!(
                        "{name}: instructions per delta (callgrind, (I({}) − I({})) / {}; I({}) = {}; {} lines written at {0})",
                        thousands(cg as u64),
                        thousands(small as u64),
                        thousands((cg - small) as u64),
                        thousands(small as u64),
                        thousands(base),
                        thousands(frames)
                    ),
                    thousands(ipd as u64),
                    "–".into(),
                    "–".into(),
                );
                if format == ["--json"] {
                    loom_ipd = Some(ipd);
                } else {
                    native_ipd = Some(ipd);
                }
            }
            let (limit_x, limit_b) = if format == ["--json"] { (5.0, 120.0) } else { (10.0, 50.0) };
            let x = pi_wall.map(|p| p.0 / wmed);
            self.target(
                &format!("1M deltas whole process: {name} ≥ {limit_x}× pi-lean"),
                x.map(|x| x >= limit_x),
                x.map_or("pi not measured".into(), |x| format!("{x:.2}× (medians)")),
            );
            self.target(
                &format!("wire bytes per text delta: {name} ≤ {limit_b}"),
                Some(bpd <= limit_b),
                format!("{bpd:.1}"),
            );
        }
        for (name, ipd, limit) in [("Loom", loom_ipd, 5000.0), ("native", native_ipd, 2000.0)] {
            self.target(
                &format!("{name} ≤ {limit} instructions per delta"),
                ipd.map(|i| i <= limit),
                ipd.map_or("callgrind not run".into(), |i| thousands(i as u64)),
            );
        }
    }

    // -- W2 ---------------------------------------------------------------------------------

    fn w2(&mut self) {
        let n = if self.quick { 1_000 } else { env_usize("WEFT_BENCH_W2_DELTAS", 10_000) };
        let label = format!("W2 tool arguments in {} deltas", thousands(n as u64));
        eprintln!("{label}…");
        let weft = self.child_runs(&["child-w2".into(), format!("n={n}")]);
        let ms: Vec<f64> = weft.iter().map(|v| v["ms"].as_f64().unwrap()).collect();
        let wmed = median(ms.clone());
        let pi = self.pi_runs(&[], &["w2", &format!("n={n}")]);
        let pi_ms = pi.as_ref().map(|r| {
            let v: Vec<f64> = r.iter().map(|(v, _)| v["ms"].as_f64().unwrap()).collect();
            (median(v.clone()), min(&v))
        });
        self.row(
            &label,
            "in-process, ms (events counted, not serialized)",
            format!("{wmed:.2} ({:.2})", min(&ms)),
            pi_ms.map_or("–".into(), |(m, b)| format!("{m:.1} ({b:.1})")),
            pi_ms.map_or("–".into(), |(m, _)| format!("{:.0}×", m / wmed)),
        );
        // The 2 MB call: Weft only (pi is quadratic in the deltas: hours at 500,000).
        let big = if self.quick { 2_000 } else { 500_000 };
        let runs = self.child_runs(&["child-w2".into(), format!("n={big}")]);
        let bytes = runs[0]["argBytes"].as_f64().unwrap();
        let above: Vec<f64> = runs.iter().filter_map(|v| v["peakAboveBaseKB"].as_f64()).collect();
        let ms: Vec<f64> = runs.iter().map(|v| v["ms"].as_f64().unwrap()).collect();
        let label =
            format!("W2 {:.1} MB of arguments in {} deltas", bytes / 1e6, thousands(big as u64));
        self.row(
            &label,
            "in-process, ms",
            format!("{:.1} ({:.1})", median(ms.clone()), min(&ms)),
            "–".into(),
            "–".into(),
        );
        let heap = |runs: &[Value]| {
            median(runs.iter().map(|v| v["heapPeakAboveBaseBytes"].as_f64().unwrap()).collect())
        };
        let heap_small = heap(&runs);
        self.row(
            &label,
            "peak heap above the baseline (counting allocator), MiB; × argument size",
            format!("{:.1}; {:.1}×", heap_small / 1048576.0, heap_small / bytes),
            "–".into(),
            "–".into(),
        );
        let runs = self.child_runs(&["child-w2".into(), format!("n={big}"), "chunk=4096".into()]);
        let heap_big = heap(&runs);
        let above_big: Vec<f64> =
            runs.iter().filter_map(|v| v["peakAboveBaseKB"].as_f64()).collect();
        let deltas = runs[0]["N"].as_u64().unwrap();
        let label_big = format!(
            "W2 {:.1} MB of arguments in {} deltas of 4,096",
            bytes / 1e6,
            thousands(deltas)
        );
        self.row(
            &label_big,
            "peak heap above the baseline (counting allocator), MiB; × argument size",
            format!("{:.1}; {:.1}×", heap_big / 1048576.0, heap_big / bytes),
            "–".into(),
            "–".into(),
        );
        if !self.quick {
            self.target(
                "a 2 MB tool-argument call peaks under 3× its size above the baseline (heap)",
                Some(heap_small < 3.0 * bytes),
                format!(
                    "{:.1}× in 4-byte deltas ({:.1} MiB), {:.1}× in 4,096-byte deltas",
                    heap_small / bytes,
                    heap_small / 1048576.0,
                    heap_big / bytes
                ),
            );
        }
        if above.is_empty() {
            self.row(
                &label,
                "peak RSS above baseline",
                "n/a (clear_refs refused)".into(),
                "–".into(),
                "–".into(),
            );
            return;
        }
        let above_b = median(above) * 1024.0;
        self.row(
            &label,
            "peak RSS above the baseline (VmHWM after clear_refs), MiB; × argument size",
            format!("{:.1}; {:.1}×", above_b / 1048576.0, above_b / bytes),
            "–".into(),
            "–".into(),
        );
        if !above_big.is_empty() {
            let b = median(above_big) * 1024.0;
            self.row(
                &label_big,
                "peak RSS above the baseline, MiB; × argument size",
                format!("{:.1}; {:.1}×", b / 1048576.0, b / bytes),
                "–".into(),
                "–".into(),
            );
        }
    }

    // -- W3 ---------------------------------------------------------------------------------

    fn w3(&mut self) {
        let sizes: &[usize] = if self.quick { &[20] } else { &[200, 1000] };
        for &t in sizes {
            let label = format!("W3 {} tool turns", thousands(t as u64));
            eprintln!("{label}…");
            let weft = self.child_runs(&["child-w3".into(), format!("t={t}")]);
            let pi = self.pi_runs(&[], &["w3", &format!("t={t}")]);
            let field = |rs: &[Value], k: &str| -> Vec<f64> {
                rs.iter().map(|v| v[k].as_f64().unwrap()).collect()
            };
            let pif = |k: &str| {
                pi.as_ref().map(|r| {
                    let v: Vec<Value> = r.iter().map(|(v, _)| v.clone()).collect();
                    let f = field(&v, k);
                    (median(f.clone()), min(&f))
                })
            };
            let w = field(&weft, "msPerTurn");
            let wmed = median(w.clone());
            let p = pif("msPerTurn");
            self.row(
                &label,
                "ms per model call (whole run ÷ calls; every event serialized)",
                format!("{wmed:.4} ({:.4})", min(&w)),
                p.map_or("–".into(), |(m, b)| format!("{m:.3} ({b:.3})")),
                p.map_or("–".into(), |(m, _)| format!("{:.1}×", m / wmed)),
            );
            let first = median(field(&weft, "firstTurnsMs"));
            let last = median(field(&weft, "lastTurnsMs"));
            let (pf, pl) = (pif("firstTurnsMs"), pif("lastTurnsMs"));
            self.row(
                &label,
                &format!("ms per turn, first {WINDOW} → last {WINDOW} (last ÷ first)"),
                format!("{first:.4} → {last:.4} ({:.2})", last / first),
                match (pf, pl) {
                    (Some((f, _)), Some((l, _))) => format!("{f:.3} → {l:.3} ({:.2})", l / f),
                    _ => "–".into(),
                },
                "–".into(),
            );
            let bytes = weft[0]["bytes"].as_f64().unwrap();
            let pib = pi.as_ref().map(|r| r[0].0["bytes"].as_f64().unwrap());
            self.row(
                &label,
                "JSON bytes of the events, per turn",
                format!("{:.0}", bytes / (t + 1) as f64),
                pib.map_or("–".into(), |b| format!("{:.0}", b / (t + 1) as f64)),
                pib.map_or("–".into(), |b| format!("{:.1}×", b / bytes)),
            );
            if t == 1000 {
                let x = p.map(|(m, _)| m / wmed);
                self.target(
                    "1,000 turns ≥ 5× pi",
                    x.map(|x| x >= 5.0),
                    x.map_or("pi not measured".into(), |x| {
                        format!("{x:.1}× (ms per turn, medians)")
                    }),
                );
            }
        }
        if self.callgrind {
            eprintln!("  callgrind w3 at 10, 20, 990, 1,000 turns…");
            let i =
                |t: usize| self.instructions(&self.me, &["child-w3".into(), format!("t={t}")]).0;
            let early = (i(20).saturating_sub(i(10))) as f64 / 10.0;
            let late = (i(1000).saturating_sub(i(990))) as f64 / 10.0;
            let ratio = late / early;
            self.row(
                "W3 tool turns",
                "instructions per turn (callgrind) at turn ~15 → ~995: (I(20) − I(10)) / 10 → (I(1,000) − I(990)) / 10",
                format!("{} → {} ({ratio:.2}×)", thousands(early as u64), thousands(late as u64)),
                "–".into(),
                "–".into(),
            );
            self.target(
                "per-turn cost at turn 1,000 ≤ 1.5× turn 10 (instructions)",
                Some(ratio <= 1.5),
                format!("{ratio:.2}×"),
            );
        } else {
            self.target(
                "per-turn cost at turn 1,000 ≤ 1.5× turn 10 (instructions)",
                None,
                "callgrind not run".into(),
            );
        }
    }

    // -- W4 ---------------------------------------------------------------------------------

    fn w4(&mut self) {
        let s = if self.quick { 100 } else { 10_000 };
        let label = format!("W4 {} idle sessions of 20 messages", thousands(s as u64));
        eprintln!("{label}…");
        let weft = self.child_runs(&["child-w4".into(), format!("s={s}"), "msgs=20".into()]);
        let kb: Vec<f64> = weft.iter().map(|v| v["rssPerSessionKB"].as_f64().unwrap()).collect();
        let wmed = median(kb.clone());
        let pi = self.pi_runs(&["--expose-gc"], &["w4", &format!("s={s}"), "msgs=20"]);
        let pkb = pi.as_ref().map(|r| {
            let v: Vec<f64> = r.iter().map(|(v, _)| v["rssPerAgentKB"].as_f64().unwrap()).collect();
            (median(v.clone()), min(&v))
        });
        let json = weft[0]["convJsonBytesPerSession"].as_f64().unwrap();
        println!("W4: Weft sizes (bytes): {}", weft[0]["sizeOf"]);
        self.row(
            &label,
            &format!("RSS growth per session, KB (conversation JSON: {:.1} KB)", json / 1024.0),
            format!("{wmed:.1} ({:.1})", min(&kb)),
            pkb.map_or("–".into(), |(m, b)| format!("{m:.1} ({b:.1})")),
            pkb.map_or("–".into(), |(m, _)| format!("{:.2}×", m / wmed)),
        );
        if !self.quick {
            self.target(
                "idle session with 20 messages ≤ 12 KB",
                Some(wmed <= 12.0),
                format!("{wmed:.1} KB"),
            );
        }
    }
}

/// `program` found on `PATH`.
fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?
        .to_str()?
        .split(':')
        .map(|d| Path::new(d).join(program))
        .find(|p| p.is_file())
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
