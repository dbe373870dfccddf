//! Tree of thoughts: the state of a search and its decisions (pure; see [`super`]).

use serde::{Deserialize, Serialize};
use weft_core::{ModeProgress, SessionStatus};

use super::{Action, Decision, Reasoning, extract_json, summary};

/// Tree-of-thoughts parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Search {
    /// Depth first: the deepest unexplored candidate, the best scored among those.
    #[default]
    Dfs,
    /// Breadth first: the shallowest unexplored candidate, the best scored among those.
    Bfs,
}

impl Reasoning for TotOptions {
    type State = TotState;

    fn name(&self) -> &'static str {
        "tot"
    }

    fn start(&self, task: String) -> TotState {
        TotState::new(task)
    }

    fn next(&self, state: &mut TotState) -> Decision {
        match state.next(self) {
            Step::Scratch { node, prompt } => Decision::to(Action::Scratch { node, prompt }),
            Step::Think { guidance } => Decision::to(Action::Think { node: "think", guidance }),
            Step::OutOfCalls => Decision::fail(
                SessionStatus::MaxTurns,
                format!(
                    "the run stopped after {} model calls (tot maxModelCalls)",
                    self.max_model_calls
                ),
            ),
        }
    }

    fn on_model_call(&self, state: &mut TotState) {
        state.on_act_call();
    }

    /// An answer that reports a dead end fails the path; any other answer ends the run.
    fn on_answer(&self, state: &mut TotState, text: &str) -> Decision {
        if is_dead_end(text) {
            let reason = format!("the model reported a dead end: {}", summary(text, 80));
            return self.path_failed(state, &reason);
        }
        Decision::finish(SessionStatus::Completed)
    }

    /// A failed call fails the path; otherwise the path goes one deeper (or fails at the depth
    /// limit).
    fn on_turn(&self, state: &mut TotState, failed: Option<String>) -> Decision {
        match failed.or_else(|| state.on_step_ok(self)) {
            Some(reason) => self.path_failed(state, &reason),
            None => Reasoning::next(self, state),
        }
    }

    fn on_scratch(&self, state: &mut TotState, node: &str, text: &str) -> Decision {
        if node == EXPAND {
            let events = state.on_expand(text, self);
            return Reasoning::next(self, state).after(events);
        }
        let (events, failed) = state.on_evaluate(text);
        match failed {
            Some(reason) => self.path_failed(state, &reason).after(events),
            None => Reasoning::next(self, state).after(events),
        }
    }
}

impl TotOptions {
    /// The current path failed: backtrack, or end the run when no candidate is left.
    fn path_failed(&self, state: &mut TotState, reason: &str) -> Decision {
        match state.backtrack(reason, self) {
            Some(event) => Reasoning::next(self, state).after(vec![event]),
            None => Decision::fail(
                SessionStatus::Error,
                format!("every path of the tree of thoughts failed (last: {reason})"),
            ),
        }
    }
}

/// The node that asks for candidates.
const EXPAND: &str = "think_expand";

/// What a path's failure is reported with when the model says so.
pub(crate) const DEAD_END: &str = "DEAD END";

/// A candidate thought not acted on yet.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct Candidate {
    /// The thought.
    pub(crate) thought: String,
    /// Its score (0 to 1).
    pub(crate) score: f64,
    /// The depth it was proposed at (the path it extends had this many thoughts).
    pub(crate) depth: u32,
}

/// Where the search stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub(crate) enum Phase {
    /// Candidates are to be proposed (`think_expand`).
    #[default]
    Expand,
    /// These candidates are to be scored (`think_evaluate`).
    Evaluate {
        /// The candidates.
        candidates: Vec<String>,
    },
    /// This thought is to be acted on (`think`, then `act` and `observe`).
    Act {
        /// The thought.
        thought: String,
    },
}

/// The search's state, kept in the run (`mode_state`) and saved at every node boundary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct TotState {
    /// The task: the user's message.
    pub(crate) task: String,
    /// What happens next.
    pub(crate) phase: Phase,
    /// The thoughts acted on along the current path.
    pub(crate) path: Vec<String>,
    /// Candidates proposed and not acted on.
    pub(crate) frontier: Vec<Candidate>,
    /// Model calls made (all kinds).
    pub(crate) model_calls: u32,
    /// Expansions made (each expands one path once: never again after a resume).
    pub(crate) expansions: u32,
}

/// What the search does next.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Step {
    /// A scratch model call in node `node` with this prompt.
    Scratch {
        /// `think_expand` or `think_evaluate`.
        node: &'static str,
        /// The prompt.
        prompt: String,
    },
    /// A conversation model call, guided to take this step.
    Think {
        /// What the model is told to do.
        guidance: String,
    },
    /// The budget of model calls is spent.
    OutOfCalls,
}

impl TotState {
    pub(crate) fn new(task: String) -> Self {
        Self { task, ..Self::default() }
    }

    fn path_text(&self) -> String {
        if self.path.is_empty() {
            return String::new();
        }
        let steps: Vec<String> =
            self.path.iter().enumerate().map(|(i, t)| format!("{}. {t}", i + 1)).collect();
        format!("Steps taken so far:\n{}\n", steps.join("\n"))
    }

    /// The next action.
    pub(crate) fn next(&self, options: &TotOptions) -> Step {
        if self.model_calls >= options.max_model_calls {
            return Step::OutOfCalls;
        }
        match &self.phase {
            Phase::Expand => Step::Scratch {
                node: EXPAND,
                prompt: format!(
                    "You are searching a tree of thoughts to solve a task.\nTask: {}\n{}\
                     Propose {k} distinct candidate next steps. Reply with a JSON array of {k} \
                     strings and nothing else.",
                    self.task,
                    self.path_text(),
                    k = options.breadth.max(1),
                ),
            },
            Phase::Evaluate { candidates } => {
                let list: Vec<String> =
                    candidates.iter().enumerate().map(|(i, c)| format!("{i}. {c}")).collect();
                Step::Scratch {
                    node: "think_evaluate",
                    prompt: format!(
                        "Task: {}\n{}Candidate next steps:\n{}\nRate how likely each candidate \
                         is to lead to a solution, from 0 to 1. Reply with a JSON array of \
                         numbers, one per candidate, and nothing else.",
                        self.task,
                        self.path_text(),
                        list.join("\n"),
                    ),
                }
            }
            Phase::Act { thought } => Step::Think {
                guidance: format!(
                    "Take this next step: {thought}\nUse the tools if you need them. If this \
                     approach cannot work, reply with {DEAD_END} and say why."
                ),
            },
        }
    }

    /// The model proposed candidates (`text`).
    pub(crate) fn on_expand(&mut self, text: &str, options: &TotOptions) -> Vec<ModeProgress> {
        self.model_calls += 1;
        self.expansions += 1;
        let breadth = options.breadth.max(1) as usize;
        let mut candidates: Vec<String> = match extract_json(text, '[') {
            Some(serde_json::Value::Array(items)) => items
                .into_iter()
                .filter_map(|v| match v {
                    serde_json::Value::String(s) => Some(s),
                    serde_json::Value::Null => None,
                    other => Some(other.to_string()),
                })
                .collect(),
            // Not JSON: one candidate per non-empty line.
            _ => text
                .lines()
                .map(|l| l.trim().trim_start_matches(['-', '*', ' ']).trim().to_string())
                .filter(|l| !l.is_empty())
                .collect(),
        };
        candidates.retain(|c| !c.trim().is_empty());
        candidates.truncate(breadth);
        let event = ModeProgress::TotExpand { candidates: candidates.clone() };
        self.phase = Phase::Evaluate { candidates };
        vec![event]
    }

    /// The model scored the candidates (`text`); the best is chosen, the others wait in the
    /// frontier. Scores that cannot be parsed are replaced by a rule (earlier candidates first),
    /// and the event says so. Returns the events and, when there was nothing to choose from,
    /// the failure that ends the path.
    pub(crate) fn on_evaluate(&mut self, text: &str) -> (Vec<ModeProgress>, Option<String>) {
        self.model_calls += 1;
        let Phase::Evaluate { candidates } = std::mem::take(&mut self.phase) else {
            return (Vec::new(), Some("no candidates to evaluate".into()));
        };
        if candidates.is_empty() {
            return (Vec::new(), Some("the model proposed no candidates".into()));
        }
        let parsed: Option<Vec<f64>> = match extract_json(text, '[') {
            Some(serde_json::Value::Array(items)) if items.len() == candidates.len() => {
                items.iter().map(serde_json::Value::as_f64).collect()
            }
            _ => None,
        };
        let rule_based = parsed.is_none();
        let n = candidates.len() as f64;
        let scores = parsed
            .unwrap_or_else(|| (0..candidates.len()).map(|i| round2(1.0 - i as f64 / n)).collect());
        let mut chosen = 0;
        for (i, s) in scores.iter().enumerate() {
            if *s > scores[chosen] {
                chosen = i;
            }
        }
        let depth = self.path.len() as u32;
        for (i, (thought, score)) in candidates.iter().zip(&scores).enumerate() {
            if i != chosen {
                self.frontier.push(Candidate { thought: thought.clone(), score: *score, depth });
            }
        }
        self.phase = Phase::Act { thought: candidates[chosen].clone() };
        let event = ModeProgress::TotEvaluate { chosen: chosen as u32, scores, rule_based };
        (vec![event], None)
    }

    /// The conversation call for the chosen thought was made.
    pub(crate) fn on_act_call(&mut self) {
        self.model_calls += 1;
        if let Phase::Act { thought } = &self.phase
            && self.path.last() != Some(thought)
        {
            self.path.push(thought.clone());
        }
    }

    /// The step's tools ran without error: the path goes one deeper, unless it is at the depth
    /// limit (then it fails with that reason).
    pub(crate) fn on_step_ok(&mut self, options: &TotOptions) -> Option<String> {
        if self.path.len() as u32 >= options.depth {
            return Some(format!("depth limit reached ({})", options.depth));
        }
        self.phase = Phase::Expand;
        None
    }

    /// The current path failed: backtrack to the best unexplored candidate (deepest first
    /// with depth-first search, shallowest first with breadth-first). `None` when none is
    /// left.
    pub(crate) fn backtrack(&mut self, reason: &str, options: &TotOptions) -> Option<ModeProgress> {
        let best = self
            .frontier
            .iter()
            .enumerate()
            .max_by(|(_, a), (_, b)| {
                let depth = match options.search {
                    Search::Dfs => a.depth.cmp(&b.depth),
                    Search::Bfs => b.depth.cmp(&a.depth),
                };
                depth.then(a.score.total_cmp(&b.score))
            })
            .map(|(i, _)| i)?;
        let candidate = self.frontier.remove(best);
        self.path.truncate(candidate.depth as usize);
        self.phase = Phase::Act { thought: candidate.thought };
        Some(ModeProgress::TotBacktrack { reason: reason.to_string(), to_depth: candidate.depth })
    }
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// Whether the model's answer reports the path as a dead end.
pub(crate) fn is_dead_end(text: &str) -> bool {
    text.to_ascii_uppercase().contains(DEAD_END)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(search: Search) -> TotOptions {
        TotOptions { breadth: 3, depth: 2, search, max_model_calls: 10 }
    }

    #[test]
    fn expand_evaluate_act_and_backtrack() {
        let o = options(Search::Dfs);
        let mut s = TotState::new("make 24".into());
        assert!(matches!(s.next(&o), Step::Scratch { node: "think_expand", .. }));
        let ev = s.on_expand(r#"["a","b","c","d"]"#, &o);
        assert_eq!(
            ev,
            vec![ModeProgress::TotExpand { candidates: vec!["a".into(), "b".into(), "c".into()] }]
        );
        let (ev, fail) = s.on_evaluate("[0.2, 0.9, 0.5]");
        assert!(fail.is_none());
        assert_eq!(
            ev,
            vec![ModeProgress::TotEvaluate {
                chosen: 1,
                scores: vec![0.2, 0.9, 0.5],
                rule_based: false
            }]
        );
        assert!(matches!(s.next(&o), Step::Think { guidance } if guidance.contains("step: b")));
        s.on_act_call();
        let back = s.backtrack("dead end", &o).unwrap();
        assert_eq!(back, ModeProgress::TotBacktrack { reason: "dead end".into(), to_depth: 0 });
        assert_eq!(s.phase, Phase::Act { thought: "c".into() });
        assert!(s.path.is_empty());
    }

    #[test]
    fn unparsable_scores_fall_back_to_a_rule_and_say_so() {
        let o = options(Search::Bfs);
        let mut s = TotState::new("t".into());
        s.on_expand("- first\n- second", &o);
        let (ev, _) = s.on_evaluate("both look fine");
        assert_eq!(
            ev,
            vec![ModeProgress::TotEvaluate { chosen: 0, scores: vec![1.0, 0.5], rule_based: true }]
        );
    }

    #[test]
    fn search_order_and_bounds() {
        let mut s = TotState::new("t".into());
        s.frontier = vec![
            Candidate { thought: "shallow".into(), score: 0.9, depth: 0 },
            Candidate { thought: "deep".into(), score: 0.1, depth: 1 },
        ];
        let mut bfs = s.clone();
        s.backtrack("x", &options(Search::Dfs));
        assert_eq!(s.phase, Phase::Act { thought: "deep".into() });
        bfs.backtrack("x", &options(Search::Bfs));
        assert_eq!(bfs.phase, Phase::Act { thought: "shallow".into() });
        let mut s = TotState::new("t".into());
        s.path = vec!["a".into(), "b".into()];
        assert!(s.on_step_ok(&options(Search::Dfs)).unwrap().contains("depth limit"));
        s.model_calls = 10;
        assert_eq!(s.next(&options(Search::Dfs)), Step::OutOfCalls);
        assert!(is_dead_end("Dead end: no way"));
    }
}
