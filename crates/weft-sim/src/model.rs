//! The simulated model and tools: what a model answers is drawn from a seeded generator (text,
//! thinking, calls to local, replay-safe, approval-gated and remote tools, a stream that fails),
//! and every delay is in simulated time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use weft_agent::{Agent, Mode, ProcessIdentity, Tool, tool_fn};
use weft_core::{Message, SessionStore, ToolSpec};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_llm::models::ModelRegistry;
use weft_llm::{CancellationToken, ModelRequest, Provider, ProviderStream};

/// How long a run's lease lasts: a dead run is taken over this long after its last renewal.
pub(crate) const LEASE_TTL: Duration = Duration::from_secs(2);
/// How often the sweeper looks for dead runs and expired calls.
pub(crate) const SWEEP_INTERVAL: Duration = Duration::from_millis(200);
/// How long a remote call or an approval waits for its answer (simulated): some are answered
/// in time, some are not and are answered by the sweeper with an error.
pub(crate) const REMOTE_TIMEOUT: Duration = Duration::from_secs(3);

/// A model whose answers are drawn from a seeded generator, each with a usage (from the length
/// of the conversation, so that no draw of the generator changes) and a cost at these prices.
pub(crate) struct Model {
    rng: Mutex<fastrand::Rng>,
    prices: Arc<ModelRegistry>,
}

/// The simulated model's prices, US dollars per million tokens.
const PRICES: &str =
    r#"{"models": [{"provider": "faux", "id": "faux", "prices": {"input": 3, "output": 15}}]}"#;

impl Model {
    fn words(rng: &mut fastrand::Rng, what: &str, n: usize) -> String {
        const WORDS: &[&str] = &["weft", "warp", "loom", "shuttle", "thread", "heddle", "reed"];
        let count = rng.usize(3..12);
        let words: Vec<&str> = (0..count).map(|_| WORDS[rng.usize(..WORDS.len())]).collect();
        format!("{what} {n}: {}.", words.join(" "))
    }

    fn turn(&self, request: &ModelRequest) -> FauxTurn {
        let mut rng = self.rng.lock().unwrap_or_else(|e| e.into_inner());
        let rng = &mut *rng;
        let n = request.messages.len();
        let base = FauxTurn::default()
            .with_chunk_size(rng.usize(2..9))
            .with_delay_ms(rng.u64(1..30))
            .with_usage(100 + 7 * n as u64, 20 + 3 * n as u64);
        let after_tools = matches!(request.messages.last(), Some(Message::ToolResult(_)));
        let scenario = if after_tools && rng.u8(..4) != 0 { rng.u8(..2) } else { rng.u8(..9) };
        let mut id = |k: u32| format!("call-{n}-{k}-{:08x}", rng.u32(..));
        let (a, b, c) = (id(0), id(1), id(2));
        let q = json!({"q": format!("item {n}")});
        match scenario {
            0 => base.with_text(Self::words(rng, "answer", n)),
            1 => base
                .with_thinking(Self::words(rng, "thinking", n))
                .with_text(Self::words(rng, "answer", n)),
            2 => base.with_text(Self::words(rng, "looking", n)).with_tool_call_id(a, "lookup", q),
            3 => base.with_tool_call_id(a, "charge", q.clone()).with_tool_call_id(b, "lookup", q),
            4 => base.with_tool_call_id(a, "read_page", json!({"selector": "h1"})),
            5 => base.with_tool_call_id(a, "delete_file", json!({"path": format!("/tmp/{n}")})),
            6 => base
                .with_thinking(Self::words(rng, "planning", n))
                .with_tool_call_id(a, "read_page", json!({"selector": "title"}))
                .with_tool_call_id(b, "charge", q)
                .with_tool_call_id(c, "delete_file", json!({"path": "/tmp/cache"})),
            7 => base.with_tool_call_id(a, "lookup", json!({"wrong": true})),
            _ => base.with_text(Self::words(rng, "cut", n)).with_error("overloaded"),
        }
    }
}

impl Provider for Model {
    fn name(&self) -> &str {
        "faux"
    }

    fn stream(&self, request: ModelRequest, cancel: CancellationToken) -> ProviderStream {
        let turn = self.turn(&request);
        FauxProvider::new(FauxScript::new([turn]))
            .with_registry(Arc::clone(&self.prices))
            .stream(request, cancel)
    }
}

#[derive(Deserialize, schemars::JsonSchema)]
struct Query {
    q: String,
}

#[derive(Deserialize, schemars::JsonSchema)]
struct FilePath {
    path: String,
}

/// A delay in simulated time drawn from `text` (tools get no generator of their own, and the
/// order they run in is the scheduler's).
fn delay_of(text: &str, most_ms: u64) -> Duration {
    let sum = text.bytes().fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    Duration::from_millis(sum % most_ms)
}

/// The remote tool every session has: run by the simulated client.
pub(crate) fn read_page() -> ToolSpec {
    ToolSpec::new(
        "read_page",
        "Reads the page open in the user's browser",
        json!({"type": "object", "properties": {"selector": {"type": "string"}}, "required": ["selector"]}),
    )
}

fn tools() -> Vec<Arc<dyn Tool>> {
    let lookup = tool_fn("lookup", "Looks something up", |a: Query| async move {
        tokio::time::sleep(delay_of(&a.q, 400)).await;
        Ok::<_, String>(format!("found {}", a.q))
    })
    .replay_safe();
    let charge = tool_fn("charge", "Charges a card", |a: Query| async move {
        tokio::time::sleep(delay_of(&a.q, 900)).await;
        Ok::<_, String>(format!("charged {}", a.q))
    });
    let delete = tool_fn("delete_file", "Deletes a file", |a: FilePath| async move {
        Ok::<_, String>(format!("deleted {}", a.path))
    })
    .with_approval();
    vec![Arc::new(lookup), Arc::new(charge), Arc::new(delete)]
}

/// An agent of one simulated process life, on `store`, its model drawing from `seed`.
/// The agent of one life, on `store`, with `identity` (a command line's, claimed in a folder)
/// or, without one, a name of its own.
pub(crate) fn agent(
    store: Arc<dyn SessionStore>,
    seed: u64,
    identity: Option<ProcessIdentity>,
) -> Agent {
    let prices = ModelRegistry::from_json(PRICES)
        .unwrap_or_else(|e| panic!("the simulated model's prices are valid: {e}"));
    let model = Model { rng: Mutex::new(fastrand::Rng::with_seed(seed)), prices: Arc::new(prices) };
    let mut builder = Agent::builder(model);
    if let Some(identity) = identity {
        builder = builder.identity(identity);
    }
    let mut builder = builder
        .store(store)
        .max_turns(8)
        .lease_ttl(LEASE_TTL)
        .sweep_interval(SWEEP_INTERVAL)
        .remote_tool_timeout(REMOTE_TIMEOUT)
        .end_commit_timeout(Duration::from_millis(1200));
    for tool in tools() {
        builder = builder.shared_tool(tool);
    }
    builder.build().unwrap_or_else(|e| panic!("the simulated agent is valid: {e}"))
}

/// A mode for a new session: mostly react, sometimes tree or graph of thoughts.
pub(crate) fn mode(rng: &mut fastrand::Rng) -> Mode {
    match rng.u8(..10) {
        0 => "tot".parse().unwrap_or_default(),
        1 => "got".parse().unwrap_or_default(),
        _ => Mode::default(),
    }
}
