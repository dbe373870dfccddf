//! Streaming benchmarks of the agent loop (`cargo bench -p weft-agent --bench stream`).
//!
//! * `text`: (a) the faux provider streams 1,000,000 text deltas of 4 characters through
//!   `Agent::execute()` on a one-thread Tokio runtime into a consumer that serializes every event
//!   to JSON; reports deltas/s, events, JSON bytes and peak RSS. The same stream is also measured
//!   without serialization and without the agent (the bare `ProviderStream`), to tell the layers
//!   apart.
//! * `args`: (b) one tool call whose JSON arguments arrive in N deltas (N = 5,000, 50,000,
//!   500,000), for a long string argument and for an object of many small members, end to end
//!   through the agent and through the bare `PartialJson` parser.
//!
//! Pick scenarios with arguments (`-- text`, `-- text-json`, `-- args`); none runs all.
//! Environment: `WEFT_BENCH_TEXT_DELTAS` (default 1,000,000), `WEFT_BENCH_RUNS` (default 3 for
//! `text`, 5 for `args`), `WEFT_BENCH_ARGS_N` (comma-separated, default `5000,50000,500000`).

#![allow(clippy::unwrap_used)]

mod common;

use common::{prose, thousands};

use std::collections::BTreeMap;
use std::hint::black_box;
use std::time::{Duration, Instant};

use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;
use weft_agent::{Agent, ExecuteStream, SessionOptions, tool_fn};
use weft_core::{AgentEvent, Input, SessionStatus};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_llm::partial_json::PartialJson;
use weft_llm::{CancellationToken, ContentDelta, ModelRequest, Provider, StreamEvent};

/// Characters per delta in every scenario.
const CHUNK: usize = 4;

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).filter(|a| !a.starts_with('-')).collect();
    let wants = |name: &str| filters.is_empty() || filters.iter().any(|f| f == name);
    if let Some(unknown) =
        filters.iter().find(|f| !["text", "text-json", "args"].contains(&f.as_str()))
    {
        eprintln!("unknown scenario `{unknown}`: expected `text`, `text-json` or `args`");
        std::process::exit(2);
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
    println!("weft-agent stream benchmarks (tokio current_thread runtime, one core)");
    if wants("text") || wants("text-json") {
        text_scenario(&rt, wants("text"));
    }
    if wants("args") {
        args_scenario(&rt);
    }
}

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.replace('_', "").parse().ok()).unwrap_or(default)
}

/// A `kB` field of `/proc/self/status` (`VmRSS`, `VmHWM`).
fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// Resets the peak RSS (`VmHWM`) to the current RSS; `false` if the kernel refused.
fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn mib(kb: Option<u64>) -> String {
    kb.map_or_else(|| "n/a".to_string(), |kb| format!("{:.1} MiB", kb as f64 / 1024.0))
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

fn ns_per(d: Duration, n: u64) -> String {
    format!("{:.0} ns", d.as_secs_f64() * 1e9 / n.max(1) as f64)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times[times.len() / 2]
}

/// What a consumer saw.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct Tally {
    events: u64,
    text_deltas: u64,
    /// The bytes of text the `text_delta` events carried: every model delta's, whether it came
    /// as an event of its own or merged with its neighbours (a store-less run merges adjacent
    /// deltas once it keeps 16,384 events).
    text_bytes: u64,
    toolcall_deltas: u64,
    /// The bytes of tool-call arguments the `toolcall_delta` events carried (merged or not).
    toolcall_bytes: u64,
    json_bytes: u64,
}

/// Reads every event of a run; with `serialize`, writes each to JSON (into one reused buffer,
/// cleared per event) and counts the bytes. Returns what it saw and the run's status.
async fn consume(mut stream: ExecuteStream, serialize: bool) -> (Tally, SessionStatus) {
    let mut tally = Tally::default();
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
    while let Some(event) = stream.next().await {
        tally.events += 1;
        match &event {
            AgentEvent::TextDelta { delta, .. } => {
                tally.text_deltas += 1;
                tally.text_bytes += delta.len() as u64;
            }
            AgentEvent::ToolcallDelta { delta, .. } => {
                tally.toolcall_deltas += 1;
                tally.toolcall_bytes += delta.len() as u64;
            }
            _ => {}
        }
        if serialize {
            buf.clear();
            serde_json::to_writer(&mut buf, &event).unwrap();
            tally.json_bytes += buf.len() as u64;
        } else {
            black_box(&event);
        }
    }
    let result = stream.result().await;
    (tally, result.status)
}

/// One run of `agent` on a fresh session, timed from `execute()` to `result()`.
fn timed_run(
    rt: &tokio::runtime::Runtime,
    agent: &Agent,
    serialize: bool,
) -> (Duration, Tally, SessionStatus) {
    rt.block_on(async {
        let session = agent.create_session(SessionOptions::default()).await.unwrap();
        let start = Instant::now();
        let stream = agent.execute(&session, Input::text("go")).await.unwrap();
        let (tally, status) = consume(stream, serialize).await;
        (start.elapsed(), tally, status)
    })
}

// ---------------------------------------------------------------------------------------------
// (a) Text streaming throughput
// ---------------------------------------------------------------------------------------------

fn text_scenario(rt: &tokio::runtime::Runtime, layers: bool) {
    let deltas = env_usize("WEFT_BENCH_TEXT_DELTAS", 1_000_000);
    let runs = env_usize("WEFT_BENCH_RUNS", 3).max(1);
    let text = prose(deltas * CHUNK);
    let turn = FauxTurn::text(text).with_chunk_size(CHUNK);
    let agent = Agent::builder(FauxProvider::new(FauxScript::new([turn.clone()]))).build().unwrap();

    println!();
    println!(
        "## (a) Text streaming: {} deltas of {CHUNK} chars, best of {runs}",
        thousands(deltas as u64)
    );
    println!();

    let baseline = status_kb("VmRSS");
    let mut peak: Option<u64> = None;
    let mut times = Vec::new();
    let mut tally = Tally::default();
    for _ in 0..runs {
        let reset = reset_peak_rss();
        let (elapsed, t, status) = timed_run(rt, &agent, true);
        assert_eq!(status, SessionStatus::Completed);
        assert_eq!(t.text_bytes, (deltas * CHUNK) as u64, "every delta's text arrives");
        if reset {
            peak = peak.max(status_kb("VmHWM"));
        }
        times.push(elapsed);
        tally = t;
    }
    let best = *times.iter().min().unwrap();
    let rate = deltas as f64 / best.as_secs_f64();
    println!("| measure | value |");
    println!("|---|---|");
    println!(
        "| text_delta events (adjacent deltas merged past 16,384 events) | {} |",
        thousands(tally.text_deltas)
    );
    println!("| text bytes received | {} |", thousands(tally.text_bytes));
    println!("| total events | {} |", thousands(tally.events));
    println!("| JSON bytes produced | {} |", thousands(tally.json_bytes));
    let all: Vec<String> = times.iter().map(|t| ms(*t)).collect();
    println!("| wall time, runs | {} |", all.join(", "));
    println!("| wall time, best | {} |", ms(best));
    println!("| **deltas/s (best)** | **{}** |", thousands(rate as u64));
    println!(
        "| deltas/s (median) | {} |",
        thousands((deltas as f64 / median(times.clone()).as_secs_f64()) as u64)
    );
    println!("| time per delta (best) | {} |", ns_per(best, deltas as u64));
    println!("| JSON MB/s (best) | {:.1} |", tally.json_bytes as f64 / best.as_secs_f64() / 1e6);
    println!("| RSS before the runs | {} |", mib(baseline));
    println!("| peak RSS during a run (VmHWM) | {} |", mib(peak));
    println!(
        "| target (>= 2,000,000 deltas/s) | {} |",
        if rate >= 2_000_000.0 { "met" } else { "NOT met" }
    );

    if !layers {
        return;
    }
    // The same stream, layer by layer.
    let bare = best_of(runs, || {
        let provider = FauxProvider::new(FauxScript::new([turn.clone()]));
        rt.block_on(async {
            let start = Instant::now();
            let request = ModelRequest::default();
            let mut stream = provider.stream(request, CancellationToken::new());
            let mut seen = 0u64;
            while let Some(event) = stream.next().await {
                if matches!(event, StreamEvent::Content(ContentDelta::TextDelta { .. })) {
                    seen += 1;
                }
                black_box(&event);
            }
            assert_eq!(seen, deltas as u64);
            start.elapsed()
        })
    });
    let unserialized = best_of(runs, || {
        let (elapsed, t, status) = timed_run(rt, &agent, false);
        assert_eq!((status, t.text_bytes), (SessionStatus::Completed, (deltas * CHUNK) as u64));
        elapsed
    });
    println!();
    println!("Layers (best of {runs}; differences are the cost each layer adds per delta):");
    println!();
    println!("| layer | wall time | per delta | deltas/s |");
    println!("|---|---|---|---|");
    for (name, d) in [
        ("faux `ProviderStream` alone (no agent)", bare),
        ("agent `execute()`, events not serialized", unserialized),
        ("agent `execute()` + JSON per event (scenario a)", best),
    ] {
        let rate = thousands((deltas as f64 / d.as_secs_f64()) as u64);
        println!("| {name} | {} | {} | {rate} |", ms(d), ns_per(d, deltas as u64));
    }
}

fn best_of(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    (0..runs).map(|_| f()).min().unwrap()
}

// ---------------------------------------------------------------------------------------------
// (b) Streamed tool arguments
// ---------------------------------------------------------------------------------------------

#[derive(Deserialize, JsonSchema)]
struct WriteArgs {
    content: String,
}

/// The arguments' shape.
#[derive(Debug, Clone, Copy)]
enum Shape {
    /// `{"content": "<long string>"}`, the string with a `\n` escape every 64 characters.
    LongString,
    /// `{"k0":0,"k1":1,…}`: many small members.
    ManyKeys,
}

impl Shape {
    fn name(self) -> &'static str {
        match self {
            Shape::LongString => "long string",
            Shape::ManyKeys => "many keys",
        }
    }

    fn tool(self) -> &'static str {
        match self {
            Shape::LongString => "write",
            Shape::ManyKeys => "record",
        }
    }

    /// Compact JSON of exactly `len` ASCII characters (so `len / CHUNK` deltas).
    fn text(self, len: usize) -> String {
        let mut out = String::with_capacity(len);
        match self {
            Shape::LongString => {
                out.push_str(r#"{"content":""#);
                let body = len - out.len() - 2;
                let letters = b"abcdefghijklmnopqrstuvwxyz";
                for i in 0..body {
                    out.push(match i % 64 {
                        62 if i + 1 < body => '\\',
                        63 => 'n',
                        k => char::from(letters[k % letters.len()]),
                    });
                }
                out.push_str("\"}");
            }
            Shape::ManyKeys => {
                out.push('{');
                let mut i = 0u64;
                loop {
                    let member = format!("{}\"k{i}\":{i}", if i == 0 { "" } else { "," });
                    if out.len() + member.len() + 1 > len {
                        break;
                    }
                    out.push_str(&member);
                    i += 1;
                }
                // Whitespace pads to the exact length.
                while out.len() + 1 < len {
                    out.push(' ');
                }
                out.push('}');
            }
        }
        assert_eq!(out.len(), len);
        out
    }
}

/// A row of the (b) table.
struct ArgsRow {
    shape: Shape,
    n: u64,
    bytes: usize,
    agent: Duration,
    parser: Duration,
    peak: Option<u64>,
}

fn args_agent(shape: Shape, args: &str) -> Agent {
    let script = FauxScript::new([
        FauxTurn::tool_call(shape.tool(), Value::String(args.to_string())).with_chunk_size(CHUNK),
        FauxTurn::text("Done."),
    ]);
    let write = tool_fn("write", "Writes content", |a: WriteArgs| async move {
        black_box(a.content.len());
        Ok::<_, String>("ok")
    });
    let record = tool_fn("record", "Records numbers", |_: BTreeMap<String, f64>| async {
        Ok::<_, String>("ok")
    });
    Agent::builder(FauxProvider::new(script)).tool(write).tool(record).build().unwrap()
}

/// The bare parser over the same chunks, reading the best-effort value after every push.
fn parse_chunks(chunks: &[&str]) -> Value {
    let mut parser = PartialJson::new();
    for chunk in chunks {
        parser.push(chunk).unwrap();
        black_box(parser.value());
    }
    parser.finish().unwrap()
}

fn args_scenario(rt: &tokio::runtime::Runtime) {
    let runs = env_usize("WEFT_BENCH_RUNS", 5).max(1);
    let ns: Vec<u64> = std::env::var("WEFT_BENCH_ARGS_N")
        .ok()
        .map(|v| v.split(',').filter_map(|n| n.trim().replace('_', "").parse().ok()).collect())
        .unwrap_or_else(|| vec![5_000, 50_000, 500_000]);

    let mut rows = Vec::new();
    for shape in [Shape::LongString, Shape::ManyKeys] {
        for &n in &ns {
            let text = shape.text(n as usize * CHUNK);
            let expected: Value = serde_json::from_str(&text).unwrap();
            let agent = args_agent(shape, &text);
            let mut peak = None;
            let agent_time = best_of(runs, || {
                let reset = reset_peak_rss();
                let (elapsed, tally, status) = timed_run(rt, &agent, true);
                if reset {
                    peak = peak.max(status_kb("VmHWM"));
                }
                assert_eq!(status, SessionStatus::Completed);
                assert_eq!(
                    tally.toolcall_bytes,
                    text.len() as u64,
                    "{} args of {n} deltas arrive whole",
                    shape.name()
                );
                elapsed
            });
            // Only the parser is timed: the chunks are cut beforehand (ASCII, so byte slices).
            let chunks: Vec<&str> =
                text.as_bytes().chunks(CHUNK).map(|c| std::str::from_utf8(c).unwrap()).collect();
            assert_eq!(parse_chunks(&chunks), expected);
            let parser_time = best_of(runs, || {
                let start = Instant::now();
                black_box(parse_chunks(black_box(&chunks)));
                start.elapsed()
            });
            rows.push(ArgsRow {
                shape,
                n,
                bytes: text.len(),
                agent: agent_time,
                parser: parser_time,
                peak,
            });
        }
    }

    println!();
    println!(
        "## (b) Streamed tool arguments: one call, {CHUNK} chars per delta, best of {runs} \
         (agent: execute() to result(), every event serialized; parser: PartialJson::push + \
         value() per delta, then finish())"
    );
    println!();
    println!(
        "| arguments | deltas (N) | JSON bytes | agent time | agent / delta | agent ×N/10 \
         | parser time | parser / delta | parser ×N/10 | peak RSS |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (i, row) in rows.iter().enumerate() {
        // The ratio to the previous row of the same shape when N grew tenfold.
        let prev = i
            .checked_sub(1)
            .map(|p| &rows[p])
            .filter(|p| p.shape.name() == row.shape.name() && p.n * 10 == row.n);
        let ratio = |now: Duration, before: Option<Duration>| {
            before.map_or_else(
                || "–".to_string(),
                |b| format!("{:.1}×", now.as_secs_f64() / b.as_secs_f64()),
            )
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            row.shape.name(),
            thousands(row.n),
            thousands(row.bytes as u64),
            ms(row.agent),
            ns_per(row.agent, row.n),
            ratio(row.agent, prev.map(|p| p.agent)),
            ms(row.parser),
            ns_per(row.parser, row.n),
            ratio(row.parser, prev.map(|p| p.parser)),
            mib(row.peak),
        );
    }
}
