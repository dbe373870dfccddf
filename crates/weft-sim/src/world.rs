//! One seed's history: the lives of a process on one store, each with its workload, its faults
//! and its crash, then a calm life that brings every session to rest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use futures::StreamExt;
use weft_agent::{
    Agent, Durability, ExecuteError, ExecuteStream, ProcessIdentity, RunOptions, SessionHandle,
    SessionOptions,
};
use weft_core::{
    AgentEvent, ApprovalDecision, Input, SessionStatus, SessionStore, ToolResultMessage,
};

use crate::backend::{Backend, Place};
use crate::faults::{FaultCounts, FaultPlan, FaultStore};
use crate::model;
use crate::observed::Observed;

/// The most sessions one history has.
const MAX_SESSIONS: usize = 3;
/// How long the calm life waits for a session's run to end after the last crash (simulated).
const SETTLE: Duration = Duration::from_secs(60);

/// What one seed's history did.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// The seed.
    pub seed: u64,
    /// Process lives, the calm last one included.
    pub lives: u32,
    /// Lives that ended (crashed) while their workload was still under way.
    pub crashes_mid_work: u32,
    /// Faults injected, by kind.
    pub faults: FaultCounts,
    /// Sessions.
    pub sessions: usize,
    /// Events the clients received.
    pub events: u64,
    /// Run results the clients received.
    pub results: u64,
    /// Sessions a dead life left running that a command line's next life continued (its
    /// input taken, the dead run taken over at once).
    pub continued: u64,
    /// Inputs sent once the run under way had ended (the `enqueue` and `interrupt` strategies)
    /// and taken.
    pub queued: u64,
    /// Remote calls answered by the sweeper once their deadline (simulated) had passed.
    pub expired: u64,
}

/// A seed whose history broke a promise.
#[derive(Debug, Clone)]
pub struct Failure {
    /// The seed.
    pub seed: u64,
    /// The store it played on.
    pub backend: Backend,
    /// The life after which the promises were checked and found broken.
    pub life: u32,
    /// What was broken.
    pub violations: Vec<String>,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "seed {} broke a promise (checked after life {}):", self.seed, self.life)?;
        for violation in &self.violations {
            writeln!(f, "  - {violation}")?;
        }
        write!(f, "replay: cargo run -p weft-sim --release -- --seed {}", self.seed)?;
        if self.backend != Backend::Memory {
            write!(f, " --store {}", self.backend)?;
        }
        Ok(())
    }
}

type Shared = Arc<Mutex<Observed>>;

fn lock(observed: &Shared) -> MutexGuard<'_, Observed> {
    observed.lock().unwrap_or_else(|e| e.into_inner())
}

/// Mixed into a seed for the choices added after the first histories were saved (drawn from a
/// generator of their own, they leave the rest of a seed's history as it was).
const SALT: u64 = 0x05ee_dc11_1dea;

/// A folder of identity slots, for a history of command-line processes (removed at the end).
struct IdentityDir(std::path::PathBuf);

impl IdentityDir {
    fn new(seed: u64) -> Self {
        let dir = format!("weft-sim-{}-{seed}-{:08x}", std::process::id(), fastrand::u32(..));
        Self(std::env::temp_dir().join(dir))
    }

    /// The identity a new process claims here: the dead one's, its slot being free again.
    fn claim(&self) -> ProcessIdentity {
        ProcessIdentity::claim(&self.0).unwrap_or_else(|e| panic!("an identity slot: {e}"))
    }
}

impl Drop for IdentityDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Where simulated wall time starts: a fixed date, so that a history's timestamps are its own.
const EPOCH_MS: u64 = 1_800_000_000_000;

std::thread_local! {
    /// The simulated instant a history's wall time counts from.
    static ORIGIN: std::cell::Cell<Option<std::time::Instant>> = const { std::cell::Cell::new(None) };
}

/// Wall time in the simulation: [`EPOCH_MS`] plus the simulated time since the history began
/// (what `weft_core::now_ms` reads on this thread while a seed plays): remote-call deadlines
/// and their sweeps happen in simulated time, like leases.
fn simulated_ms() -> u64 {
    let now = tokio::time::Instant::now().into_std();
    let origin = ORIGIN.with(std::cell::Cell::get).unwrap_or(now);
    EPOCH_MS + u64::try_from(now.saturating_duration_since(origin).as_millis()).unwrap_or(0)
}

/// The simulated wall clock, on this thread for as long as it lives.
struct SimulatedWallClock;

impl SimulatedWallClock {
    fn install() -> Self {
        ORIGIN.with(|o| o.set(None));
        weft_core::set_thread_clock(Some(simulated_ms));
        Self
    }

    /// Called in the first life's runtime: wall time starts now.
    fn start(&self) {
        ORIGIN.with(|o| o.set(Some(tokio::time::Instant::now().into_std())));
    }
}

impl Drop for SimulatedWallClock {
    fn drop(&mut self) {
        weft_core::set_thread_clock(None);
        ORIGIN.with(|o| o.set(None));
    }
}

/// Plays the history of `seed` on the memory store.
pub fn run_seed(seed: u64) -> Result<Summary, Failure> {
    run_seed_on(seed, &Backend::Memory)
}

/// Plays the history of `seed` on `backend`. On the memory store a seed plays the same history
/// every time; on a database, whose I/O runs on threads of its own, the order in which two
/// calls under way at once return may differ, and with it what follows.
pub fn run_seed_on(seed: u64, backend: &Backend) -> Result<Summary, Failure> {
    let wall = backend.simulated_time().then(SimulatedWallClock::install);
    let broken = |life, violation: String| Failure {
        seed,
        backend: backend.clone(),
        life,
        violations: vec![violation],
    };
    let mut rng = fastrand::Rng::with_seed(seed);
    // A third of the histories are a command line's (`weft run` again and again on one
    // `WEFT_HOME`): every life claims the same identity slot, and each life after a crash
    // first continues the sessions the dead one left running, as `weft run --session` does.
    let cli = (fastrand::Rng::with_seed(seed ^ SALT).u8(..3) == 0).then(|| IdentityDir::new(seed));
    let place = backend.place(seed);
    backend
        .runtime()
        .block_on(place.make())
        .map_err(|e| broken(0, format!("the store cannot be made: {e}")))?;
    let mut lives = Lives { backend, place: &place, fault_seed: rng.u64(..), root: None };
    let observed: Shared = Arc::default();
    let rough = rng.u32(1..=4);
    let mut summary = Summary { seed, lives: rough + 1, ..Summary::default() };
    // Simulated time goes on across lives: a restart takes none, and a dead process's leases
    // expire their ttl after its last renewal.
    let mut clock = Clock { simulated: backend.simulated_time(), stopped: None };
    for life in 0..rough {
        let plan = FaultPlan::seeded(&mut rng);
        let crash_at = Duration::from_millis(rng.u64(20..5000));
        let life_seed = rng.u64(..);
        let rt = backend.runtime();
        let crashed = rt.block_on(async {
            clock.resume().await;
            if life == 0
                && let Some(wall) = &wall
            {
                wall.start();
            }
            let faults = lives.open().await.map_err(|e| broken(life, e))?;
            faults.set_plan(plan);
            let store: Arc<dyn SessionStore> = faults.clone();
            let agent =
                model::agent(Arc::clone(&store), life_seed, cli.as_ref().map(IdentityDir::claim));
            let life_work = async {
                if cli.is_some() && life > 0 {
                    // The take-over of the dead process's leases is tried once (should the
                    // store fail, they expire by themselves): checked with the store calm.
                    faults.set_plan(FaultPlan::calm());
                    continue_dead(&agent, &observed, life).await;
                    faults.set_plan(plan);
                }
                workload(agent.clone(), Arc::clone(&observed), life, life_seed).await;
            };
            let crashed = tokio::select! {
                () = life_work => false,
                () = tokio::time::sleep(crash_at) => true,
            };
            clock.stop();
            Ok(crashed)
        })?;
        // The crash: every task of the life (runs, persisters, leases, the sweeper, the
        // store's connections) dies wherever it is.
        drop(rt);
        summary.crashes_mid_work += u32::from(crashed);
        lives.check(&observed, seed, life)?;
    }
    let rt = backend.runtime();
    let agent_seed = rng.u64(..);
    rt.block_on(async {
        clock.resume().await;
        let faults = lives.open().await.map_err(|e| broken(rough, e))?;
        faults.set_plan(FaultPlan::calm());
        // Sessions whose process died after storing their run's end are held until the dead
        // lease expires: their recovery is over once it has.
        tokio::time::sleep(model::LEASE_TTL).await;
        let identity = cli.as_ref().map(IdentityDir::claim);
        settle(model::agent(faults, agent_seed, identity), Arc::clone(&observed), rough).await;
        Ok(())
    })?;
    drop(rt);
    lives.check(&observed, seed, rough)?;
    let observed = lock(&observed);
    summary.faults = lives.root.as_ref().map(|f| f.counts()).unwrap_or_default();
    summary.sessions = observed.sessions.len();
    summary.events = observed.events;
    summary.results = observed.results;
    summary.continued = observed.continued;
    summary.queued = observed.queued;
    summary.expired = observed.expired;
    Ok(summary)
}

/// Plays the seeds in `seeds` on `backend`, `jobs` at a time (on a database a history plays in
/// real time, seconds each), handing each outcome to `each` as it comes, in no set order.
pub fn play_seeds(
    seeds: std::ops::Range<u64>,
    backend: &Backend,
    jobs: usize,
    each: impl FnMut(u64, Result<Summary, Failure>) + Send,
) {
    let next = std::sync::atomic::AtomicU64::new(seeds.start);
    let each = Mutex::new(each);
    std::thread::scope(|scope| {
        for _ in 0..jobs.max(1) {
            scope.spawn(|| {
                loop {
                    let seed = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if seed >= seeds.end {
                        break;
                    }
                    let outcome = run_seed_on(seed, backend);
                    (each.lock().unwrap_or_else(|e| e.into_inner()))(seed, outcome);
                }
            });
        }
    });
}

/// The store as each life of a history opens it, with the history's faults.
struct Lives<'a> {
    backend: &'a Backend,
    place: &'a Place,
    fault_seed: u64,
    /// The faults over the first life's store; every later life's go on from its.
    root: Option<Arc<FaultStore>>,
}

impl Lives<'_> {
    /// The store, opened by a new process (in its runtime), behind the history's faults.
    async fn open(&mut self) -> Result<Arc<FaultStore>, String> {
        let inner = self
            .place
            .open()
            .await
            .map_err(|e| format!("a new process cannot open the store: {e}"))?;
        let root =
            self.root.get_or_insert_with(|| FaultStore::new(Arc::clone(&inner), self.fault_seed));
        Ok(root.over(inner))
    }

    /// Checks the store (opened anew, without faults) against what the clients were told.
    fn check(&self, observed: &Shared, seed: u64, life: u32) -> Result<(), Failure> {
        let mut observed = lock(observed);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap_or_else(|e| panic!("a runtime: {e}"));
        let opened = rt.block_on(async {
            let store = self.place.open().await?;
            observed.check_store(&store, life).await;
            Ok::<_, weft_core::StoreError>(())
        });
        if let Err(error) = opened {
            observed.broken(format!("the store cannot be opened to check it: {error}"));
        }
        if observed.violations.is_empty() {
            Ok(())
        } else {
            let violations = std::mem::take(&mut observed.violations);
            Err(Failure { seed, backend: self.backend.clone(), life, violations })
        }
    }
}

/// Simulated time across runtimes: where the last life's clock stopped.
struct Clock {
    /// Whether time is simulated; in real time, the clock is the machine's.
    simulated: bool,
    stopped: Option<tokio::time::Instant>,
}

impl Clock {
    /// Called in a new life's runtime: its clock goes on from where the last one stopped.
    async fn resume(&self) {
        let now = tokio::time::Instant::now();
        if self.simulated
            && let Some(stopped) = self.stopped
            && stopped > now
        {
            tokio::time::advance(stopped - now).await;
        }
    }

    /// Called at the end of a life, in its runtime.
    fn stop(&mut self) {
        self.stopped = Some(tokio::time::Instant::now());
    }
}

/// A command line's next run (`weft run --session ID "continue"`) on each session a dead life
/// left running: with the dead process's identity, this process takes the dead run over at once
/// and the input runs after it. Refused as already running, the session would be held by the
/// dead lease for its whole ttl — longer than a command-line process that exits on the refusal
/// lives: bricked.
async fn continue_dead(agent: &Agent, observed: &Shared, life: u32) {
    let ids = lock(observed).sessions.clone();
    for id in ids {
        let Ok(Some(handle)) = agent.session(&id).await else { continue };
        if handle.status() != SessionStatus::Running {
            continue;
        }
        // A run of this process may hold the session (the sweeper resuming it once its calls'
        // deadline passed): the input is sent again once it has ended. Refused with no run of
        // this process under way, the session is held by the dead process's lease: the brick.
        for _ in 0..20 {
            let input = Input::text("continue");
            match agent.execute_with(&handle, input, RunOptions::default()).await {
                Ok(stream) => {
                    lock(observed).continued += 1;
                    let observed = Arc::clone(observed);
                    tokio::spawn(consume(stream, observed, life, Durability::default()));
                }
                Err(ExecuteError::AlreadyRunning(_)) if handle.is_running_here() => {
                    let _ = tokio::time::timeout(SETTLE, run_ended(&handle)).await;
                    continue;
                }
                Err(ExecuteError::AlreadyRunning(_)) => lock(observed).broken(format!(
                    "session {id}: left running by a dead process with this one's identity, a \
                     new input in life {life} was refused as already running with no run of \
                     this process under way (bricked until the dead lease expires)"
                )),
                Err(_) => {}
            }
            break;
        }
    }
}

/// Returns once the run under way on the session (if any) has ended: its stream to its end, as
/// the server's `enqueue` waits.
async fn run_ended(handle: &SessionHandle) {
    let mut events = std::pin::pin!(handle.subscribe(handle.last_seq()));
    while events.next().await.is_some() {}
}

/// What the clients of one life do, `steps` times: pick a session (or make one) and send it
/// what its state calls for, or something it should refuse, or watch it, or abort it.
async fn workload(agent: Agent, observed: Shared, life: u32, seed: u64) {
    let mut rng = fastrand::Rng::with_seed(seed);
    let side = fastrand::Rng::with_seed(seed ^ SALT);
    let mut client =
        Client { agent, observed, life, tasks: Vec::new(), sent: HashMap::new(), side };
    for _ in 0..rng.u32(3..24) {
        if let Some(id) = client.pick(&mut rng).await {
            client.step(&id, &mut rng).await;
        }
        tokio::time::sleep(Duration::from_millis(rng.u64(0..500))).await;
    }
    for task in std::mem::take(&mut client.tasks) {
        let _ = tokio::time::timeout(Duration::from_secs(30), task).await;
    }
}

struct Client {
    agent: Agent,
    observed: Shared,
    life: u32,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The last answers sent to each session (sent again, late, sometimes).
    sent: HashMap<String, Input>,
    /// Choices added after the first histories were saved (see [`SALT`]).
    side: fastrand::Rng,
}

/// What a client does with an input for a session whose run goes on: the server's multitask
/// strategies (`options.multitask`), played through the library as the server plays them.
#[derive(Clone, Copy)]
enum Multitask {
    /// Sent as it is: refused.
    Reject,
    /// Sent once the run under way has ended.
    Enqueue,
    /// The run under way is aborted; the input is sent once it has ended.
    Interrupt,
}

impl Client {
    /// A session to act on: a new one, or one of those made so far.
    async fn pick(&mut self, rng: &mut fastrand::Rng) -> Option<String> {
        let known = lock(&self.observed).sessions.clone();
        if known.is_empty() || (known.len() < MAX_SESSIONS && rng.u8(..4) == 0) {
            let mode = model::mode(rng);
            let react = mode.is_react();
            let options = SessionOptions {
                tools: vec![model::read_page()],
                mode: Some(mode),
                ..SessionOptions::default()
            };
            let handle = match self.agent.create_session(options).await {
                Ok(handle) => handle,
                Err(error) => {
                    if std::env::var_os("WEFT_SIM_LOG").is_some() {
                        eprintln!("weft-sim: no new session: {error}");
                    }
                    return None;
                }
            };
            let mut observed = lock(&self.observed);
            observed.sessions.push(handle.id());
            if react {
                observed.react.insert(handle.id());
            }
            return Some(handle.id());
        }
        Some(known[rng.usize(..known.len())].clone())
    }

    async fn step(&mut self, id: &str, rng: &mut fastrand::Rng) {
        let Ok(Some(handle)) = self.agent.session(id).await else { return };
        let durability = Durability::ALL[rng.usize(..Durability::ALL.len())];
        if rng.u8(..6) == 0
            && let Some(again) = self.sent.get(id).cloned()
        {
            // An answer sent again, late: refused, or taken if the first never arrived.
            self.execute(&handle, again, durability).await;
            return;
        }
        let input = match handle.status() {
            SessionStatus::AwaitingApproval => decide(&handle, rng),
            SessionStatus::AwaitingToolExecution => match answer(&handle, rng) {
                Some(input) => input,
                // The answer never comes (this time).
                None => return,
            },
            SessionStatus::Running => match rng.u8(..5) {
                0 | 1 => return self.watch(&handle, rng),
                2 => {
                    handle.abort().await;
                    return;
                }
                _ => {
                    let input = Input::text("and another thing");
                    match [Multitask::Reject, Multitask::Enqueue, Multitask::Interrupt]
                        [self.side.usize(..3)]
                    {
                        Multitask::Reject => input,
                        strategy => return self.queue(&handle, input, strategy, durability),
                    }
                }
            },
            _ => {
                if rng.u8(..6) == 0 {
                    self.watch(&handle, rng);
                }
                Input::text(format!("question {}", rng.u32(..1000)))
            }
        };
        if !matches!(input, Input::User(_)) {
            self.sent.insert(id.to_string(), input.clone());
        }
        self.execute(&handle, input, durability).await;
    }

    async fn execute(&mut self, handle: &SessionHandle, input: Input, durability: Durability) {
        let options = RunOptions::default().durability(durability);
        // A refused input changes nothing: what it would have broken, the checks would see.
        if let Ok(stream) = self.agent.execute_with(handle, input, options).await {
            let (observed, life) = (Arc::clone(&self.observed), self.life);
            self.tasks.push(tokio::spawn(consume(stream, observed, life, durability)));
        }
    }

    /// An input sent once the run under way has ended (aborted first, to interrupt it), as the
    /// server's `enqueue` and `interrupt` do; the workload goes on meanwhile.
    fn queue(
        &mut self,
        handle: &SessionHandle,
        input: Input,
        strategy: Multitask,
        durability: Durability,
    ) {
        let (agent, observed, life) = (self.agent.clone(), Arc::clone(&self.observed), self.life);
        let handle = handle.clone();
        self.tasks.push(tokio::spawn(async move {
            if matches!(strategy, Multitask::Interrupt) {
                handle.abort().await;
            }
            run_ended(&handle).await;
            let options = RunOptions::default().durability(durability);
            // Another client's input may have started a run in between: refused then, as the
            // server's is after its tries.
            if let Ok(stream) = agent.execute_with(&handle, input, options).await {
                lock(&observed).queued += 1;
                consume(stream, observed, life, durability).await;
            }
        }));
    }

    /// A watcher resuming after a random seq of the session's log.
    fn watch(&mut self, handle: &SessionHandle, rng: &mut fastrand::Rng) {
        let after = rng.u64(..=handle.last_seq());
        let events = handle.subscribe(after);
        let (observed, life, id) = (Arc::clone(&self.observed), self.life, handle.id());
        self.tasks.push(tokio::spawn(async move {
            let mut events = std::pin::pin!(events);
            let mut seqs = Vec::new();
            let read = async {
                while let Some(record) = events.next().await {
                    lock(&observed).event(life, &record, None);
                    seqs.push(record.seq);
                }
            };
            let _ = tokio::time::timeout(Duration::from_secs(60), read).await;
            lock(&observed).watch(life, &id, after, &seqs);
        }));
    }
}

/// Approval decisions for the session's pending approvals: each granted or denied; now and
/// then one for a call that does not exist, or the same call twice.
fn decide(handle: &SessionHandle, rng: &mut fastrand::Rng) -> Input {
    let mut approvals: Vec<ApprovalDecision> = handle
        .pending_approvals()
        .iter()
        .map(|call| ApprovalDecision {
            tool_call_id: call.id.clone(),
            approved: rng.bool(),
            reason: None,
        })
        .collect();
    match rng.u8(..10) {
        0 => approvals.push(ApprovalDecision {
            tool_call_id: "no-such-call".into(),
            approved: true,
            reason: None,
        }),
        1 => {
            if let Some(first) = approvals.first().cloned() {
                approvals.push(first);
            }
        }
        _ => {}
    }
    Input::Approvals { approvals }
}

/// Results for some of the session's pending remote calls (`None`: none of them this time);
/// now and then one for a call that does not exist, or the same call twice.
fn answer(handle: &SessionHandle, rng: &mut fastrand::Rng) -> Option<Input> {
    let mut results = Vec::new();
    for call in handle.pending_tool_calls() {
        if rng.u8(..5) != 0 {
            let page = format!("<h1>page {}</h1>", rng.u32(..100));
            results.push(ToolResultMessage::ok(&call, page));
        }
    }
    match rng.u8(..10) {
        0 => {
            let call = weft_core::ToolCall {
                id: "no-such-call".into(),
                name: "read_page".into(),
                arguments: Arc::new(serde_json::json!({})),
            };
            results.push(ToolResultMessage::ok(&call, "stray"));
        }
        1 => {
            if let Some(first) = results.first().cloned() {
                results.push(first);
            }
        }
        _ => {}
    }
    (!results.is_empty()).then_some(Input::ToolResults(results))
}

/// Reads a run's stream to its end, as its client: every event, in order, then the result.
async fn consume(stream: ExecuteStream, observed: Shared, life: u32, durability: Durability) {
    let mut records = stream.records();
    let mut last = 0;
    let mut end = None;
    let mut first = true;
    while let Some(record) = records.next().await {
        if first && std::env::var_os("WEFT_SIM_LOG").is_some() {
            // Which run a client's stream follows, for reading a replay's log.
            eprintln!(
                "weft-sim: a {durability} stream of session {} follows run {} from seq {}",
                record.session_id, record.run_id, record.seq
            );
        }
        first = false;
        let mut observed = lock(&observed);
        if record.seq <= last {
            observed.broken(format!(
                "session {}: a stream gave seq {} after {last}",
                record.session_id, record.seq
            ));
        }
        if end.is_some() {
            observed.broken(format!(
                "session {}: a stream gave seq {} after its run's end",
                record.session_id, record.seq
            ));
        }
        last = record.seq;
        observed.event(life, &record, Some(durability));
        if matches!(record.event, AgentEvent::SessionEnd { .. }) {
            end = Some(record);
        }
    }
    let result = records.result().await;
    lock(&observed).result(life, &result, end.as_deref());
}

/// The calm life: no faults, no crash. Every session's run must come to rest once the dead
/// runs' leases expire, every pending call and approval must be answerable, and every session
/// must take a new message and run it to its end.
async fn settle(agent: Agent, observed: Shared, life: u32) {
    let ids = lock(&observed).sessions.clone();
    for id in ids {
        let Some(handle) = resting(&agent, &id).await else {
            lock(&observed)
                .broken(format!("session {id} is still running {SETTLE:?} after the last crash"));
            continue;
        };
        let mut asked = false;
        // Sixteen inputs at most; waits for a run under way (a suspended run resumed by the
        // sweeper when its calls' deadline passed, say) do not count, up to the settle time.
        let (mut inputs, until) = (0, tokio::time::Instant::now() + SETTLE);
        while inputs < 16 && tokio::time::Instant::now() < until {
            let input = match handle.status() {
                SessionStatus::AwaitingApproval => Input::Approvals {
                    approvals: handle
                        .pending_approvals()
                        .iter()
                        .map(|c| ApprovalDecision {
                            tool_call_id: c.id.clone(),
                            approved: true,
                            reason: None,
                        })
                        .collect(),
                },
                SessionStatus::AwaitingToolExecution => Input::ToolResults(
                    handle
                        .pending_tool_calls()
                        .iter()
                        .map(|c| ToolResultMessage::ok(c, "done"))
                        .collect(),
                ),
                SessionStatus::Running => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                _ if !asked => {
                    asked = true;
                    Input::text("one more thing")
                }
                _ => break,
            };
            inputs += 1;
            match agent.execute(&handle, input).await {
                Ok(stream) => consume(stream, Arc::clone(&observed), life, Durability::Async).await,
                // This process's sweeper resumed the session between the look and the input
                // (its calls' deadline passed): the input waits for that run, as `enqueue`.
                Err(ExecuteError::AlreadyRunning(_)) if handle.is_running_here() => {
                    inputs -= 1;
                    let _ = tokio::time::timeout(SETTLE, run_ended(&handle)).await;
                }
                Err(error) => {
                    let stored = match agent.store() {
                        Some(store) => store.head(&id).await.ok().flatten().map(|h| h.status),
                        None => None,
                    };
                    lock(&observed).broken(format!(
                        "session {id}: a calm input was refused: {error} (the handle says {:?}, recovering: {}; the store {stored:?})",
                        handle.status(),
                        handle.is_recovering()
                    ));
                    break;
                }
            }
        }
        let status = handle.status();
        if !asked || status == SessionStatus::Running || status.is_suspended() {
            lock(&observed).broken(format!(
                "session {id} was not brought to rest with a new message (status {status:?})"
            ));
        }
    }
}

/// The session once its run (if any) has ended or been recovered to its end.
async fn resting(agent: &Agent, id: &str) -> Option<SessionHandle> {
    let step = Duration::from_millis(100);
    for _ in 0..SETTLE.as_millis() / step.as_millis() {
        if let Ok(Some(handle)) = agent.session(id).await
            && handle.status() != SessionStatus::Running
        {
            return Some(handle);
        }
        tokio::time::sleep(step).await;
    }
    None
}
