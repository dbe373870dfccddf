//! Chaos between replicas: two `weft serve` processes on one Postgres, each behind a TCP proxy
//! for its clients and another to the database. Sessions get inputs on either replica, through
//! the Rust client (which reattaches after a cut connection), their streams are moved to the
//! other replica mid-run and their runs aborted from there, while one replica is killed and
//! restarted, the other is partitioned from the database and healed, then stalled (SIGSTOP)
//! past its leases' expiry and woken, connections are cut and the database is slow. Every run
//! is `durability: "sync"`.
//!
//! Checked: every stream's seqs strictly increase and nothing follows a run's end in it; a seq
//! is never given to two events (across streams and replicas); every event a client received is
//! stored as it was received; in the stored log, a run's events are never followed by another
//! run's before the next run starts (no two replicas ran one session at once); at the end every
//! session comes to rest and runs a new input to completion.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use weft_client::{Client, Error, ExecuteOptions, NativeMessage, Reconnect};
use weft_core::{AgentEvent, Durability, Input, SessionStatus};

use super::proxy::Proxy;
use super::{Replica, postgres_url, serve};

const SESSIONS: usize = 5;
/// How long the clients keep sending inputs while the faults go on.
const WORKLOAD: Duration = Duration::from_secs(16);

/// What the clients saw, and what broke.
#[derive(Default)]
struct Ledger {
    /// Per session, per seq: the event received (its debug form).
    seen: HashMap<String, BTreeMap<u64, String>>,
    violations: Vec<String>,
    /// Streams read, events received, runs seen to their end, inputs refused (busy), errors.
    streams: usize,
    events: usize,
    ends: usize,
    busy: usize,
    errors: usize,
    /// Runs taken over from a dead or partitioned replica, in the stored logs.
    recoveries: usize,
}

impl Ledger {
    fn event(&mut self, session: &str, seq: u64, event: &AgentEvent) {
        self.events += 1;
        let digest = format!("{event:?}");
        let seen = self.seen.entry(session.to_owned()).or_default();
        if let Some(before) = seen.get(&seq)
            && *before != digest
        {
            self.violations.push(format!("session {session}: seq {seq} was given to two events"));
        }
        seen.insert(seq, digest);
    }
}

/// One stream's checks: seqs strictly increase, and nothing follows its run's end.
#[derive(Default)]
struct StreamCheck {
    last: u64,
    ended: bool,
}

impl StreamCheck {
    fn check(&mut self, session: &str, seq: u64, event: &AgentEvent) -> Option<String> {
        let broke = if self.ended {
            Some(format!("session {session}: seq {seq} ({}) after the run's end", event.kind()))
        } else if seq <= self.last {
            Some(format!("session {session}: seq {seq} after {} in one stream", self.last))
        } else {
            None
        };
        self.last = seq;
        self.ended |= matches!(event, AgentEvent::SessionEnd { .. });
        broke
    }
}

fn client(addr: &str) -> Client {
    Client::new(format!("http://{addr}")).reconnect(Reconnect {
        max_tries: 40,
        first_delay: Duration::from_millis(50),
        max_delay: Duration::from_millis(500),
    })
}

/// Sends `kill -<name>` to the replica's process.
fn signal(replica: &Replica, name: &str) {
    let status = std::process::Command::new("kill")
        .arg(format!("-{name}"))
        .arg(replica.child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success(), "kill -{name} failed");
}

/// `url` with its host and port replaced by `addr`.
fn via(url: &str, addr: &str) -> String {
    let (scheme, rest) = url.split_once("://").unwrap();
    let (auth, rest) = match rest.split_once('@') {
        Some((user, rest)) => (format!("{user}@"), rest),
        None => (String::new(), rest),
    };
    let path = rest.find(['/', '?']).map_or("", |i| &rest[i..]);
    format!("{scheme}://{auth}{addr}{path}")
}

/// The host and port of `url`.
fn host_port(url: &str) -> String {
    let rest = url.split_once("://").unwrap().1;
    let rest = rest.split_once('@').map_or(rest, |(_, r)| r);
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let host = &rest[..end];
    if host.contains(':') { host.to_owned() } else { format!("{host}:5432") }
}

/// One session's client: inputs on a random replica, streams moved and runs aborted from the
/// other now and then, until the workload is over.
async fn session_client(
    id: String,
    clients: Arc<[Client; 2]>,
    ledger: Arc<Mutex<Ledger>>,
    seed: u64,
) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let until = Instant::now() + WORKLOAD;
    let mut n = 0;
    while Instant::now() < until {
        n += 1;
        let (here, there) = if rng.bool() { (0, 1) } else { (1, 0) };
        let options = ExecuteOptions::new().session(&id).durability(Durability::Sync);
        let mut stream = clients[here].execute(Input::text(format!("message {n}")), options);
        let move_after = (rng.u8(..3) == 0).then(|| rng.usize(1..60));
        let abort_after = (rng.u8(..6) == 0).then(|| rng.usize(1..60));
        let mut check = StreamCheck::default();
        let mut received = 0;
        lock(&ledger).streams += 1;
        loop {
            let item = match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
                Ok(Some(item)) => item,
                Ok(None) => break,
                Err(_) => {
                    lock(&ledger).violations.push(format!("session {id}: a stream stalled 30 s"));
                    break;
                }
            };
            let event = match item {
                Ok(event) => event,
                Err(error) => {
                    let mut ledger = lock(&ledger);
                    match &error {
                        Error::Api { status: 409, .. } => ledger.busy += 1,
                        _ => ledger.errors += 1,
                    }
                    break;
                }
            };
            let NativeMessage::Event(agent_event) = &event.message else { continue };
            received += 1;
            {
                let mut ledger = lock(&ledger);
                if let Some(broke) = check.check(&id, event.seq, agent_event) {
                    ledger.violations.push(broke);
                }
                ledger.event(&id, event.seq, agent_event);
                if matches!(agent_event, AgentEvent::SessionEnd { .. }) {
                    ledger.ends += 1;
                }
            }
            if abort_after == Some(received) {
                let (other, id) = (clients[there].clone(), id.clone());
                tokio::spawn(async move { other.abort(&id).await });
            }
            if move_after == Some(received) {
                // The stream goes on on the other replica, from the last event received.
                stream = clients[there].attach(&id, Some(event.seq), ExecuteOptions::new());
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(20..200))).await;
    }
}

fn lock(ledger: &Mutex<Ledger>) -> std::sync::MutexGuard<'_, Ledger> {
    ledger.lock().unwrap_or_else(|e| e.into_inner())
}

/// The session's whole stored log, read run by run through attach (`addr`: a replica, with no
/// fault between). An attach after the last run's end answers with nothing: the log is whole.
async fn stored_log(addr: &str, id: &str) -> Vec<(u64, AgentEvent)> {
    let client = Client::new(format!("http://{addr}")).reconnect(Reconnect {
        max_tries: 0,
        first_delay: Duration::from_millis(10),
        max_delay: Duration::from_millis(10),
    });
    let mut log = Vec::new();
    loop {
        let after = log.last().map(|(seq, _)| *seq);
        let mut stream = client.attach(id, Some(after.unwrap_or(0)), ExecuteOptions::new());
        let before = log.len();
        while let Some(Ok(event)) = stream.next().await {
            if let NativeMessage::Event(e) = event.message {
                log.push((event.seq, e));
            }
        }
        if log.len() == before {
            return log;
        }
    }
}

/// Runs and ends in the stored log: after a run's `session_end`, the next event starts a run.
fn check_runs(id: &str, log: &[(u64, AgentEvent)], violations: &mut Vec<String>) {
    let mut ended = false;
    for (seq, event) in log {
        let starts = matches!(event, AgentEvent::SessionStart { .. });
        if ended && !starts {
            violations.push(format!(
                "session {id}: stored seq {seq} ({}) follows a run's end before any run starts",
                event.kind()
            ));
        }
        ended = matches!(event, AgentEvent::SessionEnd { .. });
    }
}

#[test]
fn replicas_keep_every_promise_through_kills_partitions_and_cuts() {
    let Some(url) = postgres_url() else { return };
    let home = tempfile::tempdir().unwrap();
    let answer = "A careful answer, streamed slowly. ".repeat(4);
    let turns: Vec<_> =
        (0..400).map(|_| json!({"text": answer, "chunkSize": 3, "delayMs": 15})).collect();
    let script = json!({ "turns": turns });
    let postgres = host_port(&url);
    let db = [Proxy::start(&postgres), Proxy::start(&postgres)];
    let stores = [via(&url, &db[0].addr), via(&url, &db[1].addr)];
    let mut a: Replica = serve(home.path(), "a", &stores[0], &script);
    let b: Replica = serve(home.path(), "b", &stores[1], &script);
    let front = [Proxy::start(&a.addr), Proxy::start(&b.addr)];
    let clients = Arc::new([client(&front[0].addr), client(&front[1].addr)]);
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let unique = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos()
    );
    let ids: Vec<String> = (0..SESSIONS).map(|k| format!("chaos-{unique}-{k}")).collect();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let workload: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(k, id)| {
            let task =
                session_client(id.clone(), Arc::clone(&clients), Arc::clone(&ledger), k as u64);
            runtime.spawn(task)
        })
        .collect();

    // The faults, while the clients go on.
    let pause = |ms| std::thread::sleep(Duration::from_millis(ms));
    pause(2_000);
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    pause(1_000);
    a = serve(home.path(), "a", &stores[0], &script);
    front[0].set_upstream(&a.addr);
    pause(1_000);
    db[1].partition(true); // B loses the database: its leases expire, A takes its runs over
    pause(3_000);
    db[1].partition(false);
    front[1].cut();
    pause(1_000);
    // B stalls (a pause of the whole process) past its leases' expiry, then wakes up behind
    // A's take-overs: whatever it still writes for those runs is refused.
    signal(&b, "STOP");
    pause(2_500);
    signal(&b, "CONT");
    db[0].delay(Duration::from_millis(20));
    pause(2_000);
    front[0].cut();
    db[0].delay(Duration::ZERO);
    runtime.block_on(async {
        for task in workload {
            task.await.unwrap();
        }
    });

    // Calm: every session comes to rest, and runs a new input to its end.
    let violations = runtime.block_on(async {
        let mut violations = std::mem::take(&mut lock(&ledger).violations);
        for id in &ids {
            let started = Instant::now();
            loop {
                let view = clients[1].get_session(id).await;
                if view.as_ref().is_ok_and(|v| v.status != SessionStatus::Running) {
                    break;
                }
                if started.elapsed() > Duration::from_secs(30) {
                    violations.push(format!("session {id}: still running 30 s after the faults"));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            let options = ExecuteOptions::new().session(id).durability(Durability::Sync);
            let result = clients[0].execute(Input::text("one more"), options).finish().await;
            match result {
                Ok(result) if result.status == SessionStatus::Completed => {}
                other => violations
                    .push(format!("session {id}: a new input after the faults: {other:?}")),
            }
            let log = stored_log(&b.addr, id).await;
            check_runs(id, &log, &mut violations);
            let recoveries = log
                .iter()
                .filter(|(_, e)| matches!(e, AgentEvent::SessionStart { recovers: Some(_), .. }))
                .count();
            lock(&ledger).recoveries += recoveries;
            let stored: HashMap<u64, String> =
                log.iter().map(|(seq, e)| (*seq, format!("{e:?}"))).collect();
            let ledger = lock(&ledger);
            for (seq, digest) in ledger.seen.get(id).into_iter().flatten() {
                match stored.get(seq) {
                    Some(kept) if kept == digest => {}
                    Some(_) => violations.push(format!(
                        "session {id}: seq {seq} is stored as another event than received"
                    )),
                    None => violations.push(format!(
                        "session {id}: seq {seq}, received under sync, is not stored"
                    )),
                }
            }
        }
        violations
    });
    let ledger = lock(&ledger);
    eprintln!(
        "chaos: {} streams, {} events, {} run ends, {} runs taken over, {} inputs refused as \
         busy, {} stream errors",
        ledger.streams, ledger.events, ledger.ends, ledger.recoveries, ledger.busy, ledger.errors
    );
    assert!(ledger.ends >= SESSIONS, "too little happened: {} run ends", ledger.ends);
    // The kill and the partition caught runs mid-way, and the other replica took them over.
    assert!(ledger.recoveries >= 1, "no run was taken over");
    assert!(
        violations.is_empty(),
        "{} promises broken:\n{}",
        violations.len(),
        violations.join("\n")
    );
    drop(b);
}
