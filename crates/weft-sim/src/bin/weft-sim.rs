//! `weft-sim`: plays seeded histories and says what they did and what broke.
//!
//! ```sh
//! cargo run -p weft-sim --release -- --seeds 100000          # seeds 1 to 100,000
//! cargo run -p weft-sim --release -- --seeds 1000 --from 5000
//! cargo run -p weft-sim --release -- --seed 1234             # one seed, again
//! ```

use std::time::Instant;

use weft_sim::{FaultCounts, run_seed};

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
    let started = Instant::now();
    let (mut faults, mut lives, mut crashes, mut events) =
        (FaultCounts::default(), 0u64, 0u64, 0u64);
    let (mut continued, mut queued, mut expired, mut failed) = (0u64, 0u64, 0u64, Vec::new());
    for seed in from..from + count {
        match run_seed(seed) {
            Ok(summary) => {
                faults.add(&summary.faults);
                lives += u64::from(summary.lives);
                crashes += u64::from(summary.crashes_mid_work);
                events += summary.events;
                continued += summary.continued;
                queued += summary.queued;
                expired += summary.expired;
                if count == 1 {
                    println!("{summary:?}");
                }
            }
            Err(failure) => {
                eprintln!("{failure}");
                failed.push(seed);
            }
        }
        if count > 1 && (seed - from + 1) % 10_000 == 0 {
            eprintln!("{} seeds, {:?}", seed - from + 1, started.elapsed());
        }
    }
    println!(
        "seeds {from}..={}: {} failed; {lives} lives, {crashes} crashes mid-work, {events} events received, \
         {continued} sessions continued after a crash by a command line's next run, {queued} \
         inputs enqueued or interrupting taken, {expired} remote calls expired; \
         faults: {} transient, {} lost replies, {} refusals, {} delays, {} hangs, {} writer deaths; {:?}",
        from + count - 1,
        failed.len(),
        faults.transient,
        faults.lost_reply,
        faults.refusal,
        faults.latency,
        faults.hang,
        faults.writer_death,
        started.elapsed()
    );
    if !failed.is_empty() {
        println!("failed seeds: {failed:?}");
        std::process::exit(1);
    }
}
