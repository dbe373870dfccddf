//! The simulation in CI: 500 seeded histories on the memory store (`WEFT_SIM_SEEDS=N` for more,
//! `WEFT_SIM_FROM=S` to start elsewhere), and the seeds that once found a bug, every time; and
//! histories on a SQLite file and on Postgres, in real time, several at once
//! (`WEFT_SIM_DB_SEEDS=N`, 16 by default; Postgres needs `WEFT_TEST_POSTGRES_URL`).

#![allow(clippy::unwrap_used, missing_docs)]

/// Seeds that found bugs, kept so they are played on every run (see RELIABILITY.md): 4 (a
/// lease keeper spinning on a cancelled run's abort watch), 190 (a number shown without a
/// reservation, given to another event by the next process), 356 (a `sync` run's unstored tail
/// shown by the next run), 2 (a lost append reply taken for a refusal), 4065 and 23785 (a
/// failed read after a lost reply taken for a refusal; a watcher skipping events written while
/// it read the store), 55162, 82223 and 86880 (a cut-off `sync` run's stream, read late, showed
/// the next run's unstored events).
const SAVED: &[u64] = &[4, 190, 356, 2, 4065, 23785, 55162, 82223, 86880];

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

#[test]
fn seeded_histories_keep_every_promise() {
    let from = env("WEFT_SIM_FROM", 1);
    let count = env("WEFT_SIM_SEEDS", 500);
    let mut failures = Vec::new();
    let mut crashes = 0;
    let mut continued = 0;
    let mut faults = weft_sim::FaultCounts::default();
    for seed in SAVED.iter().copied().chain(from..from + count) {
        match weft_sim::run_seed(seed) {
            Ok(summary) => {
                crashes += summary.crashes_mid_work;
                continued += summary.continued;
                faults.add(&summary.faults);
            }
            Err(failure) => failures.push(failure.to_string()),
        }
    }
    assert!(failures.is_empty(), "{} seeds failed:\n{}", failures.len(), failures.join("\n"));
    // The histories did what they are for: crashes in the middle of work, faults, and sessions
    // a crash left running continued by a command line's next run.
    assert!(crashes > 0 && faults.total() > 0, "{crashes} crashes, {faults:?}");
    assert!(continued > 0, "no session was left running by a crash and continued");
}

/// Plays seeds 1 to `WEFT_SIM_DB_SEEDS` (16) on `backend`, eight at a time: on a database a
/// history plays in real time, seconds each.
fn database_histories(backend: &weft_sim::Backend) {
    let count = env("WEFT_SIM_DB_SEEDS", 16);
    let mut outcomes = Vec::new();
    weft_sim::play_seeds(1..count + 1, backend, 8, |_, outcome| outcomes.push(outcome));
    let failures: Vec<String> =
        outcomes.iter().filter_map(|o| o.as_ref().err().map(ToString::to_string)).collect();
    assert!(failures.is_empty(), "{} seeds failed:\n{}", failures.len(), failures.join("\n"));
    let (mut crashes, mut events) = (0, 0);
    for summary in outcomes.iter().flatten() {
        crashes += summary.crashes_mid_work;
        events += summary.events;
    }
    // The histories did what they are for.
    assert!(crashes > 0 && events > 0, "{crashes} crashes, {events} events on {backend}");
}

#[test]
fn histories_on_sqlite_keep_every_promise() {
    database_histories(&weft_sim::Backend::Sqlite);
}

#[test]
fn histories_on_postgres_keep_every_promise() {
    let Some(url) = weft_test_support::postgres_url("histories_on_postgres_keep_every_promise")
    else {
        return;
    };
    database_histories(&weft_sim::Backend::Postgres(url));
}
