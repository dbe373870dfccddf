//! Reasoning modes: how a run decides what to do next beyond ReAct's "call the model, run its
//! tools, repeat".
//!
//! A mode is plain data ([`Mode`]) plus a state kept in the run ([`weft_core::RunState`]'s
//! `mode_state`), so a run in any mode is saved at every node boundary and goes on in another
//! process. The decisions are pure functions of that state and what just happened (this module
//! and [`tot`], [`got`]); the driver ([`crate::run`]) does the IO.
//!
//! - `react` (default): `think` → `act` → `observe` → `think` …
//! - `tot` (tree of thoughts): `think_expand` asks the model for candidate next thoughts,
//!   `think_evaluate` scores them, the best is acted on (`think` → `act` → `observe`); a path
//!   that fails (a tool error, a dead end the model reports, the depth limit) is abandoned for
//!   the best unexplored candidate (`tot_backtrack`).
//! - `got` (graph of thoughts): `plan_graph` asks the model for a DAG of sub-tasks; ready nodes
//!   run concurrently, each a small ReAct loop with its dependencies' results; `synthesize`
//!   writes the answer. Adaptive: a completed node may be expanded into a sub-graph.

use serde::{Deserialize, Deserializer, Serialize};

pub(crate) mod got;
pub(crate) mod tot;

/// The key of a session's `options` that holds its reasoning [`Mode`] (absent:
/// react).
pub const OPTION_MODE: &str = "mode";

/// The reasoning mode of a session's runs, with its parameters.
///
/// JSON: a name (`"react"`, `"tot"`, `"got"`) or an object with `type` and the parameters
/// (camelCase): `{"type":"tot","breadth":3,"depth":3,"search":"dfs","maxModelCalls":30}`,
/// `{"type":"got","concurrency":4,"adaptive":true,"nodeBudget":12,"maxModelCalls":40}`.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Mode {
    /// ReAct: think, act, observe, until the model stops.
    #[default]
    React,
    /// Tree of thoughts.
    Tot(TotOptions),
    /// Graph of thoughts.
    Got(GotOptions),
}

/// Tree-of-thoughts parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct TotOptions {
    /// Candidates asked for at each expansion (k).
    pub breadth: u32,
    /// The deepest a path may go: how many thoughts are acted on along one path.
    pub depth: u32,
    /// Which unexplored candidate a backtrack returns to.
    pub search: Search,
    /// Model calls the run may make in all (expansions, evaluations and acting).
    pub max_model_calls: u32,
}

impl Default for TotOptions {
    fn default() -> Self {
        Self { breadth: 3, depth: 3, search: Search::Dfs, max_model_calls: 30 }
    }
}

/// How a tree of thoughts is searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Search {
    /// Depth first: the deepest unexplored candidate, the best scored among those.
    #[default]
    Dfs,
    /// Breadth first: the shallowest unexplored candidate, the best scored among those.
    Bfs,
}

/// Graph-of-thoughts parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct GotOptions {
    /// Graph nodes that may run at once.
    pub concurrency: u32,
    /// After a node completes, the model may expand it into a sub-graph.
    pub adaptive: bool,
    /// The most graph nodes the plan and its expansions may have.
    pub node_budget: u32,
    /// Model calls the run may make in all (plan, nodes, expansions, synthesis).
    pub max_model_calls: u32,
    /// Model calls one graph node may make (its small ReAct loop).
    pub node_turns: u32,
}

impl Default for GotOptions {
    fn default() -> Self {
        Self {
            concurrency: 4,
            adaptive: false,
            node_budget: 12,
            max_model_calls: 40,
            node_turns: 4,
        }
    }
}

impl Mode {
    /// The mode's name (`react`, `tot`, `got`): the protocol's `agent`.
    pub fn name(&self) -> &'static str {
        match self {
            Mode::React => "react",
            Mode::Tot(_) => "tot",
            Mode::Got(_) => "got",
        }
    }

    /// The mode named `name` with default parameters.
    pub fn named(name: &str) -> Option<Mode> {
        match name {
            "react" => Some(Mode::React),
            "tot" => Some(Mode::Tot(TotOptions::default())),
            "got" => Some(Mode::Got(GotOptions::default())),
            _ => None,
        }
    }

    /// The mode a session's `options` name ([`crate::OPTION_MODE`]); react when none.
    pub fn of_options(options: &serde_json::Value) -> Mode {
        options
            .get(OPTION_MODE)
            .and_then(|m| serde_json::from_value(m.clone()).ok())
            .unwrap_or_default()
    }
}

impl<'de> Deserialize<'de> for Mode {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let value = serde_json::Value::deserialize(d)?;
        let unknown = |name: &str| {
            D::Error::custom(format!("unknown mode {name:?}: expected react, tot or got"))
        };
        match &value {
            serde_json::Value::String(name) => Mode::named(name).ok_or_else(|| unknown(name)),
            serde_json::Value::Object(map) => {
                let name = map.get("type").and_then(|t| t.as_str()).unwrap_or("react");
                match name {
                    "react" => Ok(Mode::React),
                    "tot" => serde_json::from_value(value.clone())
                        .map(Mode::Tot)
                        .map_err(D::Error::custom),
                    "got" => serde_json::from_value(value.clone())
                        .map(Mode::Got)
                        .map_err(D::Error::custom),
                    other => Err(unknown(other)),
                }
            }
            _ => Err(D::Error::custom("a mode is a name or an object with a \"type\"")),
        }
    }
}

/// The first JSON value of `kind` (`[` or `{`) in a model's text, which may wrap it in prose or
/// a code fence.
pub(crate) fn extract_json(text: &str, open: char) -> Option<serde_json::Value> {
    let close = if open == '[' { ']' } else { '}' };
    let start = text.find(open)?;
    let end = text.rfind(close)?;
    if end < start {
        return None;
    }
    serde_json::from_str(&text[start..=end]).ok()
}

/// `text` cut to `max` characters, with an ellipsis when cut.
pub(crate) fn summary(text: &str, max: usize) -> String {
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
