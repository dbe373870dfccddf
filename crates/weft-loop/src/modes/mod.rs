//! Reasoning modes: how a run decides what to do next beyond ReAct's "call the model, run its
//! tools, repeat".
//!
//! A mode is a value that implements [`Reasoning`]: its parameters, plus decisions that are
//! pure functions of a typed state (`Reasoning::State`) kept in the run ([`RunState`]'s
//! `mode_state`), so a run in any mode is saved at every node boundary and goes on in another
//! process. The [`Machine`](crate::Machine) asks the mode at each point where a mode may
//! decide, and does the rest (inputs, tool calls, approvals, limits) the same for every mode.
//!
//! - `react` (default, [`react`]): `think` → `act` → `observe` → `think` …
//! - `tot` (tree of thoughts, [`tot`]): `think_expand` asks the model for candidate next
//!   thoughts, `think_evaluate` scores them, the best is acted on (`think` → `act` →
//!   `observe`); a path that fails (a tool error, a dead end the model reports, the depth
//!   limit) is abandoned for the best unexplored candidate (`tot_backtrack`).
//! - `got` (graph of thoughts, [`got`]): `plan_graph` asks the model for a DAG of sub-tasks;
//!   ready nodes run concurrently, each a small ReAct loop with its dependencies' results;
//!   `synthesize` writes the answer. Adaptive: a completed node may be expanded into a
//!   sub-graph.
//!
//! A new built-in mode is a file that implements [`Reasoning`] for its parameters, and a
//! variant of [`Mode`]. A mode of an application's own is a [`Mode::Custom`], parsed by name
//! through a [`Modes`] list that knows it.
//!
//! [`RunState`]: weft_core::RunState

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use weft_core::{ModeProgress, SessionStatus};

pub(crate) mod got;
pub(crate) mod react;
mod registry;
pub(crate) mod tot;

pub use got::{GotOptions, NodeOutcome, Ready};
pub use react::React;
pub use registry::{ModeError, ModeKind, Modes};
pub use tot::{Search, TotOptions};

/// The key of a session's `options` that holds its reasoning [`Mode`] (absent:
/// react).
pub const OPTION_MODE: &str = "mode";

/// What a mode decides: the run's next action, and the progress to report with it.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// Progress to report (inside the node that made the decision).
    pub events: Vec<ModeProgress>,
    /// What the run does next.
    pub action: Action,
}

/// What a run does next, as a mode decides it.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Call the model with the session's conversation (react's `think`).
    CallModel,
    /// Call the model with the conversation and `guidance` (not kept in the conversation) in
    /// node `node`: tot's step on its chosen thought, got's synthesis.
    Think {
        /// The node's name.
        node: &'static str,
        /// What the model is told to do now.
        guidance: String,
    },
    /// Call the model on a scratch context (this prompt alone) in node `node`: its answer is
    /// the mode's ([`Reasoning::on_scratch`]), never part of the conversation.
    Scratch {
        /// The node's name.
        node: &'static str,
        /// The prompt.
        prompt: String,
    },
    /// Run the graph's ready nodes ([`Reasoning::graph_ready`]), each reported with
    /// [`Reasoning::on_graph_node`].
    RunGraph,
    /// The run ends with `status`; `error` says why, when it is the mode's doing (a bound, a
    /// refused plan, every path failed).
    Finish {
        /// The status.
        status: SessionStatus,
        /// Why, when the mode ends the run short of an answer.
        error: Option<String>,
    },
}

impl Decision {
    /// `action`, with nothing to report.
    pub fn to(action: Action) -> Self {
        Self { events: Vec::new(), action }
    }

    /// Call the model with the conversation.
    pub fn call_model() -> Self {
        Self::to(Action::CallModel)
    }

    /// The run is over with `status`.
    pub fn finish(status: SessionStatus) -> Self {
        Self::to(Action::Finish { status, error: None })
    }

    /// The run ends with `status` short of an answer, because `error`.
    pub fn fail(status: SessionStatus, error: impl Into<String>) -> Self {
        Self::to(Action::Finish { status, error: Some(error.into()) })
    }

    /// The same decision, reporting `events` before its own.
    pub fn after(mut self, mut events: Vec<ModeProgress>) -> Self {
        events.append(&mut self.events);
        self.events = events;
        self
    }
}

/// A reasoning mode: its parameters, and its decisions over a typed state kept in the run.
///
/// The machine calls these at the points where a mode may decide; every other rule (inputs,
/// tool calls, approvals, the run's turn limit, aborts) is the machine's, the same for every
/// mode. Each call gets the state as the run saved it and may change it; the machine saves it
/// back with the run. The defaults are ReAct's.
pub trait Reasoning: fmt::Debug + Send + Sync + 'static {
    /// The mode's state in the run, saved with it at every node boundary.
    type State: Serialize + DeserializeOwned + Default;

    /// The mode's name: the protocol's `agent`, and `type` in its JSON.
    fn name(&self) -> &'static str;

    /// The state of a run that starts on the user's message `task`.
    fn start(&self, task: String) -> Self::State;

    /// What the run does when no turn is open: at its start, and after
    /// [`on_turn`](Self::on_turn) or [`on_scratch`](Self::on_scratch) chose to go on.
    fn next(&self, _state: &mut Self::State) -> Decision {
        Decision::call_model()
    }

    /// The name of the node a conversation model call runs in.
    fn conversation_node(&self) -> &'static str {
        "think"
    }

    /// A model call on the conversation is being recorded (counted in the mode's budget).
    fn on_model_call(&self, _state: &mut Self::State) {}

    /// The model answered in the conversation without calling a tool: its `text`. The run ends
    /// completed unless the mode goes on (a dead end it backtracks from).
    fn on_answer(&self, _state: &mut Self::State, _text: &str) -> Decision {
        Decision::finish(SessionStatus::Completed)
    }

    /// A turn's tool results joined the conversation, and the run's turn limit is not reached;
    /// `failed` describes the first call that failed, if one did.
    fn on_turn(&self, _state: &mut Self::State, _failed: Option<String>) -> Decision {
        Decision::call_model()
    }

    /// The model answered the scratch call made in node `node` ([`Action::Scratch`]) with
    /// `text`.
    fn on_scratch(&self, _state: &mut Self::State, node: &str, _text: &str) -> Decision {
        Decision::fail(
            SessionStatus::Error,
            format!(
                "mode {} asked for no scratch call, yet one answered in node {node}",
                self.name()
            ),
        )
    }

    /// The process that ran the run died; the run goes on from its last saved state.
    fn on_recovery(&self, _state: &mut Self::State) {}

    /// The graph nodes that may start now ([`Action::RunGraph`]), marked running.
    fn graph_ready(&self, _state: &mut Self::State) -> Vec<Ready> {
        Vec::new()
    }

    /// Graph node `id` ended with `outcome`: the progress to report, and whether the graph
    /// goes on (nodes run or may start). When it does not, [`next`](Self::next) decides.
    fn on_graph_node(
        &self,
        _state: &mut Self::State,
        _id: &str,
        _outcome: NodeOutcome,
    ) -> (Vec<ModeProgress>, bool) {
        (Vec::new(), false)
    }

    /// The model calls one graph node may make (its small ReAct loop).
    fn node_turns(&self) -> u32 {
        1
    }
}

/// A [`Reasoning`] with its state as JSON: what the machine holds, whatever the mode.
pub(crate) trait DynReasoning: fmt::Debug + Send + Sync {
    fn name(&self) -> &'static str;
    fn parameters(&self) -> serde_json::Value;
    fn start(&self, task: String) -> serde_json::Value;
    fn next(&self, state: &mut serde_json::Value) -> Decision;
    fn conversation_node(&self) -> &'static str;
    fn on_model_call(&self, state: &mut serde_json::Value);
    fn on_answer(&self, state: &mut serde_json::Value, text: &str) -> Decision;
    fn on_turn(&self, state: &mut serde_json::Value, failed: Option<String>) -> Decision;
    fn on_scratch(&self, state: &mut serde_json::Value, node: &str, text: &str) -> Decision;
    fn on_recovery(&self, state: &mut serde_json::Value);
    fn graph_ready(&self, state: &mut serde_json::Value) -> Vec<Ready>;
    fn on_graph_node(
        &self,
        state: &mut serde_json::Value,
        id: &str,
        outcome: NodeOutcome,
    ) -> (Vec<ModeProgress>, bool);
    fn node_turns(&self) -> u32;
}

/// Runs `f` on the state saved as `value`, typed, and saves it back. A state that cannot be
/// read (none yet, or saved by another version) starts as the default.
fn typed<S: Serialize + DeserializeOwned + Default, T>(
    value: &mut serde_json::Value,
    f: impl FnOnce(&mut S) -> T,
) -> T {
    let mut state: S = S::deserialize(&*value).unwrap_or_default();
    let out = f(&mut state);
    *value = to_json(&state);
    out
}

fn to_json(value: &impl Serialize) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or_default()
}

impl<R: Reasoning + Serialize> DynReasoning for R {
    fn name(&self) -> &'static str {
        Reasoning::name(self)
    }
    fn parameters(&self) -> serde_json::Value {
        to_json(self)
    }
    fn start(&self, task: String) -> serde_json::Value {
        to_json(&Reasoning::start(self, task))
    }
    fn next(&self, state: &mut serde_json::Value) -> Decision {
        typed(state, |s| Reasoning::next(self, s))
    }
    fn conversation_node(&self) -> &'static str {
        Reasoning::conversation_node(self)
    }
    fn on_model_call(&self, state: &mut serde_json::Value) {
        typed(state, |s| Reasoning::on_model_call(self, s));
    }
    fn on_answer(&self, state: &mut serde_json::Value, text: &str) -> Decision {
        typed(state, |s| Reasoning::on_answer(self, s, text))
    }
    fn on_turn(&self, state: &mut serde_json::Value, failed: Option<String>) -> Decision {
        typed(state, |s| Reasoning::on_turn(self, s, failed))
    }
    fn on_scratch(&self, state: &mut serde_json::Value, node: &str, text: &str) -> Decision {
        typed(state, |s| Reasoning::on_scratch(self, s, node, text))
    }
    fn on_recovery(&self, state: &mut serde_json::Value) {
        typed(state, |s| Reasoning::on_recovery(self, s));
    }
    fn graph_ready(&self, state: &mut serde_json::Value) -> Vec<Ready> {
        typed(state, |s| Reasoning::graph_ready(self, s))
    }
    fn on_graph_node(
        &self,
        state: &mut serde_json::Value,
        id: &str,
        outcome: NodeOutcome,
    ) -> (Vec<ModeProgress>, bool) {
        typed(state, |s| Reasoning::on_graph_node(self, s, id, outcome))
    }
    fn node_turns(&self) -> u32 {
        Reasoning::node_turns(self)
    }
}

/// The reasoning mode of a session's runs, with its parameters.
///
/// JSON: a name (`"react"`, `"tot"`, `"got"`) or an object with `type` and the parameters
/// (camelCase): `{"type":"tot","breadth":3,"depth":3,"search":"dfs","maxModelCalls":30}`,
/// `{"type":"got","concurrency":4,"adaptive":true,"nodeBudget":12,"maxModelCalls":40}`.
/// A custom mode is read by name through the [`Modes`] that know it.
#[derive(Debug, Clone, Default)]
pub enum Mode {
    /// ReAct: think, act, observe, until the model stops.
    #[default]
    React,
    /// Tree of thoughts.
    Tot(TotOptions),
    /// Graph of thoughts.
    Got(GotOptions),
    /// A mode of the application's own.
    Custom(CustomMode),
}

/// A mode of the application's own ([`Mode::Custom`]): any [`Reasoning`].
#[derive(Debug, Clone)]
pub struct CustomMode(Arc<dyn DynReasoning>);

impl CustomMode {
    /// The mode `mode`.
    pub fn new<R: Reasoning + Serialize>(mode: R) -> Self {
        Self(Arc::new(mode))
    }
}

impl Mode {
    /// A mode of the application's own.
    pub fn custom<R: Reasoning + Serialize>(mode: R) -> Self {
        Mode::Custom(CustomMode::new(mode))
    }

    /// The mode's decisions.
    pub(crate) fn logic(&self) -> &dyn DynReasoning {
        match self {
            Mode::React => &React,
            Mode::Tot(options) => options,
            Mode::Got(options) => options,
            Mode::Custom(custom) => &*custom.0,
        }
    }

    /// The mode's name (`react`, `tot`, `got`, or a custom mode's): the protocol's `agent`.
    pub fn name(&self) -> &'static str {
        self.logic().name()
    }

    /// Whether this is the default mode (react).
    pub fn is_react(&self) -> bool {
        matches!(self, Mode::React)
    }

    /// The built-in mode named `name` with default parameters.
    pub fn named(name: &str) -> Option<Mode> {
        Modes::builtin().parse(name, &serde_json::Map::new()).ok()
    }

    /// The built-in mode a session's `options` name ([`OPTION_MODE`]); react when none (or one
    /// these do not know: read it with [`Modes::of_options`] instead).
    pub fn of_options(options: &serde_json::Value) -> Mode {
        Modes::builtin().of_options(options)
    }
}

impl std::str::FromStr for Mode {
    type Err = ModeError;

    /// A built-in mode by name, with default parameters.
    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Modes::builtin().parse(name, &serde_json::Map::new())
    }
}

impl PartialEq for Mode {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name() && self.logic().parameters() == other.logic().parameters()
    }
}

impl Serialize for Mode {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut value = serde_json::Map::new();
        value.insert("type".into(), self.name().into());
        if let serde_json::Value::Object(parameters) = self.logic().parameters() {
            value.extend(parameters);
        }
        value.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for Mode {
    /// A built-in mode: a custom mode is read with [`Modes::parse_value`].
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        Modes::builtin().parse_value(&value).map_err(serde::de::Error::custom)
    }
}

/// The first JSON value of `kind` (`[` or `{`) in a model's text, which may wrap it in prose or
/// a code fence.
pub fn extract_json(text: &str, open: char) -> Option<serde_json::Value> {
    let close = if open == '[' { ']' } else { '}' };
    let start = text.find(open)?;
    let end = text.rfind(close)?;
    if end < start {
        return None;
    }
    serde_json::from_str(&text[start..=end]).ok()
}

/// `text` cut to `max` characters, with an ellipsis when cut.
pub fn summary(text: &str, max: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_read_from_names_and_objects() {
        let m: Mode = serde_json::from_str(r#""tot""#).unwrap();
        assert_eq!(m, Mode::Tot(TotOptions::default()));
        let m: Mode =
            serde_json::from_str(r#"{"type":"got","adaptive":true,"nodeBudget":5}"#).unwrap();
        let Mode::Got(o) = &m else { panic!("{m:?}") };
        assert!(o.adaptive);
        assert_eq!(o.node_budget, 5);
        assert_eq!(o.concurrency, 4);
        let back: Mode = serde_json::from_value(serde_json::to_value(&m).unwrap()).unwrap();
        assert_eq!(back, m);
        let e = serde_json::from_str::<Mode>(r#""mcts""#).unwrap_err();
        assert!(e.to_string().contains("unknown mode \"mcts\""), "{e}");
    }

    #[test]
    fn the_parameters_schema_holds_every_modes_parameters_once() {
        let schema = Modes::builtin().parameters_schema();
        assert_eq!(schema["additionalProperties"], false);
        let properties = schema["properties"].as_object().unwrap();
        let mut names: Vec<&str> = properties.keys().map(String::as_str).collect();
        names.sort_unstable();
        assert_eq!(names, Modes::builtin().parameters());
        let described = |name: &str| properties[name]["description"].as_str().unwrap().to_string();
        assert!(described("breadth").starts_with("tot: Candidates asked for"), "{schema}");
        assert!(described("maxModelCalls").starts_with("tot, got: "), "{schema}");
        assert!(described("nodeBudget").starts_with("got: "), "{schema}");
        // Subschemas are inline: no reference an OpenAPI document could not resolve.
        assert!(!schema.to_string().contains("$ref"), "{schema}");
        assert!(schema.to_string().contains("bfs"), "{schema}");
    }

    #[test]
    fn json_is_found_inside_prose() {
        assert_eq!(
            extract_json("Sure:\n```json\n[\"a\", \"b\"]\n```", '['),
            Some(serde_json::json!(["a", "b"]))
        );
        assert_eq!(extract_json("no json here", '['), None);
        assert_eq!(summary("abcdef", 3), "abc…");
        assert_eq!(summary(" ab ", 3), "ab");
    }
}
