//! `weft-sim`: plays seeded histories and says what they did and what broke.
//!
//! ```sh
//! cargo run -p weft-sim --release -- --seeds 100000          # seeds 1 to 100,000
//! cargo run -p weft-sim --release -- --seeds 1000 --from 5000
//! cargo run -p weft-sim --release -- --seed 1234             # one seed, again
//! cargo run -p weft-sim --release -- --seeds 200 --store sqlite
//! cargo run -p weft-sim --release -- --seeds 24 --store postgres --jobs 8
//! ```
//!
//! `--store` is `memory` (the default, in simulated time), `sqlite` (a file per seed) or
//! `postgres` (a schema per seed in `WEFT_TEST_POSTGRES_URL`'s database, or a `postgres://`
//! URL); on a database a seed plays in real time and takes seconds, so `--jobs N` plays N seeds
//! at once.

use std::time::Instant;

use weft_sim::{Backend, FaultCounts, Summary, play_seeds};

/// What the seeds played so far did.
#[derive(Default)]
struct Totals {
    faults: FaultCounts,
    lives: u64,
    crashes: u64,
    events: u64,
    continued: u64,
    queued: u64,
    expired: u64,
    failed: Vec<u64>,
}

impl Totals {
    fn add(&mut self, summary: &Summary) {
        self.faults.add(&summary.faults);
        self.lives += u64::from(summary.lives);
        self.crashes += u64::from(summary.crashes_mid_work);
        self.events += summary.events;
        self.continued += summary.continued;
        self.queued += summary.queued;
        self.expired += summary.expired;
    }
}

fn main() {
    if let Ok(filter) = std::env::var("WEFT_SIM_LOG") {
        tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
            .with_writer(std::io::stderr)
            .init();
    }
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter().position(|a| a == flag).and_then(|i| args.get(i + 1)).map(|v| {
            v.replace(['_', ','], "").parse::<u64>().unwrap_or_else(|_| {
                eprintln!("{flag} takes a number, not {v:?}");
                std::process::exit(2)
            })
        })
    };
    let (from, count) = match value("--seed") {
        Some(seed) => (seed, 1),
        None => (value("--from").unwrap_or(1), value("--seeds").unwrap_or(500)),
    };
    let store = args.iter().position(|a| a == "--store").and_then(|i| args.get(i + 1));
    let backend = match store.map(|s| Backend::parse(s)).unwrap_or(Ok(Backend::Memory)) {
        Ok(backend) => backend,
        Err(error) => {
            eprintln!("{error}");
            std::process::exit(2)
        }
    };
    let jobs = value("--jobs").unwrap_or(1).clamp(1, 64);
    let started = Instant::now();
    let mut t = Totals::default();
    let mut played = 0u64;
    play_seeds(from..from + count, &backend, jobs as usize, |seed, outcome| {
        match outcome {
            Ok(summary) => {
                t.add(&summary);
                if count == 1 {
                    println!("{summary:?}");
                }
            }
            Err(failure) => {
                eprintln!("{failure}");
                t.failed.push(seed);
            }
        }
        played += 1;
        if count > 1 && played.is_multiple_of(10_000) {
            eprintln!("{played} seeds, {:?}", started.elapsed());
        }
    });
    t.failed.sort_unstable();
    println!(
        "seeds {from}..={} on {backend}: {} failed; {} lives, {} crashes mid-work, {} events received, \
         {} sessions continued after a crash by a command line's next run, {} \
         inputs enqueued or interrupting taken, {} remote calls expired; \
         faults: {} transient, {} lost replies, {} refusals, {} delays, {} hangs, {} writer deaths; {:?}",
        from + count - 1,
        t.failed.len(),
        t.lives,
        t.crashes,
        t.events,
        t.continued,
        t.queued,
        t.expired,
        t.faults.transient,
        t.faults.lost_reply,
        t.faults.refusal,
        t.faults.latency,
        t.faults.hang,
        t.faults.writer_death,
        started.elapsed()
    );
    if !t.failed.is_empty() {
        println!("failed seeds: {:?}", t.failed);
        std::process::exit(1);
    }
}
