//! Graph of thoughts: the plan, its nodes' states and the decisions over them (pure; see
//! [`super`]).

use std::collections::{HashMap, HashSet};

use serde::{Deserialize, Serialize};
use weft_core::{ModeProgress, SessionStatus};

use super::{Action, Decision, Reasoning, extract_json, summary};

/// Graph-of-thoughts parameters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

impl Reasoning for GotOptions {
    type State = GotState;

    fn name(&self) -> &'static str {
        "got"
    }

    fn start(&self, task: String) -> GotState {
        GotState::new(task)
    }

    fn next(&self, state: &mut GotState) -> Decision {
        let out_of_calls = match state.phase {
            Phase::Run => state.out_of_calls(self),
            _ => state.model_calls >= self.max_model_calls,
        };
        if out_of_calls {
            return Decision::fail(
                SessionStatus::MaxTurns,
                format!(
                    "the run stopped after {} model calls (got maxModelCalls)",
                    self.max_model_calls
                ),
            );
        }
        Decision::to(match &state.phase {
            Phase::Plan | Phase::Replan { .. } => {
                Action::Scratch { node: "plan_graph", prompt: state.plan_prompt(self) }
            }
            Phase::Run => Action::RunGraph,
            Phase::Synthesize => {
                Action::Think { node: "synthesize", guidance: state.synthesis_guidance() }
            }
        })
    }

    fn conversation_node(&self) -> &'static str {
        "synthesize"
    }

    fn on_model_call(&self, state: &mut GotState) {
        state.model_calls += 1;
    }

    /// The plan arrived.
    fn on_scratch(&self, state: &mut GotState, _node: &str, text: &str) -> Decision {
        match state.on_plan(text, self) {
            Ok(events) => Reasoning::next(self, state).after(events),
            Err(error) => Decision::fail(SessionStatus::Error, error),
        }
    }

    fn on_recovery(&self, state: &mut GotState) {
        state.restart_running();
    }

    fn graph_ready(&self, state: &mut GotState) -> Vec<Ready> {
        state.ready(self)
    }

    fn on_graph_node(
        &self,
        state: &mut GotState,
        id: &str,
        outcome: NodeOutcome,
    ) -> (Vec<ModeProgress>, bool) {
        let events = state.on_node(id, outcome, self);
        (events, state.nodes.iter().any(|n| n.status == NodeStatus::Running))
    }

    fn node_turns(&self) -> u32 {
        self.node_turns.max(1)
    }
}

/// Where a graph node stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub(crate) enum NodeStatus {
    /// Waiting for its dependencies, or for a free slot.
    Pending,
    /// Running (a node found running after a crash runs again).
    Running,
    /// Completed with this result.
    Done {
        /// Its result.
        result: String,
    },
    /// Failed, or skipped because a dependency failed.
    Failed {
        /// Why.
        error: String,
    },
}

/// One sub-task of the plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(crate) struct GraphNode {
    /// Its id in the plan.
    pub(crate) id: String,
    /// What it is to do.
    pub(crate) task: String,
    /// The nodes whose results it needs.
    #[serde(default)]
    pub(crate) deps: Vec<String>,
    /// Where it stands.
    #[serde(flatten)]
    pub(crate) status: NodeStatus,
}

/// Where the run stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub(crate) enum Phase {
    /// The plan is to be asked for; `error` is why the last one was refused (shown to the model
    /// on the one retry).
    #[default]
    Plan,
    /// The plan was refused once; the model is asked again.
    Replan {
        /// Why.
        error: String,
    },
    /// The graph's nodes run.
    Run,
    /// Every node settled: the answer is to be written.
    Synthesize,
}

/// The run's graph, kept in the run (`mode_state`) and saved at every node boundary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub struct GotState {
    /// The task: the user's message.
    pub(crate) task: String,
    /// What happens next.
    pub(crate) phase: Phase,
    /// The graph, in plan order.
    pub(crate) nodes: Vec<GraphNode>,
    /// Model calls made (all kinds).
    pub(crate) model_calls: u32,
}

/// A graph node to run now.
#[derive(Debug, Clone, PartialEq)]
pub struct Ready {
    /// Its id.
    pub id: String,
    /// The prompt of its small ReAct loop: its task with its dependencies' results.
    pub prompt: String,
    /// The prompt asking whether to expand it, when the graph is adaptive (sent after it
    /// completes, with its result appended).
    pub expand_prompt: Option<String>,
}

/// How a node's run ended, as the driver reports it.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeOutcome {
    /// Its result, or why it failed.
    pub result: Result<String, String>,
    /// Model calls it made.
    pub model_calls: u32,
    /// The model's answer to the expansion prompt, if it was asked.
    pub expansion: Option<String>,
}

impl GotState {
    pub(crate) fn new(task: String) -> Self {
        Self { task, ..Self::default() }
    }

    /// The prompt asking for the plan.
    pub(crate) fn plan_prompt(&self, options: &GotOptions) -> String {
        let retry = match &self.phase {
            Phase::Replan { error } => {
                format!("\nYour previous plan was refused: {error}. Reply with a corrected plan.")
            }
            _ => String::new(),
        };
        format!(
            "Break this task into sub-tasks that form a directed acyclic graph: a sub-task may \
             depend on the results of others.\nTask: {}\nReply with JSON only: \
             {{\"nodes\":[{{\"id\":\"a\",\"task\":\"...\",\"deps\":[]}}]}}, at most {} nodes.{retry}",
            self.task, options.node_budget
        )
    }

    /// The model answered the plan prompt. `Err` when the run fails (a second bad plan).
    pub(crate) fn on_plan(
        &mut self,
        text: &str,
        options: &GotOptions,
    ) -> Result<Vec<ModeProgress>, String> {
        self.model_calls += 1;
        let parsed = parse_nodes(text, &HashSet::new()).and_then(|nodes| {
            if nodes.len() > options.node_budget as usize {
                Err(format!(
                    "the plan has {} nodes, more than the node budget of {}",
                    nodes.len(),
                    options.node_budget
                ))
            } else {
                Ok(nodes)
            }
        });
        match parsed {
            Ok(nodes) => {
                let edge_count = nodes.iter().map(|n| n.deps.len() as u32).sum();
                let event = ModeProgress::GotPlan {
                    node_count: nodes.len() as u32,
                    edge_count,
                    node_ids: nodes.iter().map(|n| n.id.clone()).collect(),
                };
                self.nodes = nodes;
                self.phase = Phase::Run;
                Ok(vec![event])
            }
            Err(error) => match self.phase {
                Phase::Plan => {
                    self.phase = Phase::Replan { error };
                    Ok(Vec::new())
                }
                _ => Err(format!("the model's plan was refused twice: {error}")),
            },
        }
    }

    /// Nodes that may start now (their dependencies done, a slot free, calls left), marked
    /// running.
    pub(crate) fn ready(&mut self, options: &GotOptions) -> Vec<Ready> {
        let running = self.nodes.iter().filter(|n| n.status == NodeStatus::Running).count();
        let slots = (options.concurrency.max(1) as usize).saturating_sub(running);
        let results: HashMap<&str, &str> = self
            .nodes
            .iter()
            .filter_map(|n| match &n.status {
                NodeStatus::Done { result } => Some((n.id.as_str(), result.as_str())),
                _ => None,
            })
            .collect();
        let mut ready = Vec::new();
        let mut started = Vec::new();
        for i in 0..self.nodes.len() {
            if ready.len() >= slots
                || self.model_calls + ready.len() as u32 >= options.max_model_calls
            {
                break;
            }
            let node = &self.nodes[i];
            if node.status != NodeStatus::Pending
                || !node.deps.iter().all(|d| results.contains_key(d.as_str()))
            {
                continue;
            }
            let context: Vec<String> = node
                .deps
                .iter()
                .map(|d| format!("- {d}: {}", results.get(d.as_str()).copied().unwrap_or("")))
                .collect();
            let context = if context.is_empty() {
                String::new()
            } else {
                format!("\nResults of the sub-tasks it depends on:\n{}", context.join("\n"))
            };
            let prompt = format!(
                "You are solving one sub-task ({}) of a larger task.\nTask: {}\nSub-task: {}{context}\n\
                 Answer the sub-task briefly.",
                node.id, self.task, node.task
            );
            let expand_prompt = options.adaptive.then(|| {
                format!(
                    "Sub-task {} ({}) of the task \"{}\" was completed. Should it be expanded into \
                     further sub-tasks before the final answer? Reply with JSON only: \
                     {{\"nodes\":[{{\"id\":\"...\",\"task\":\"...\",\"deps\":[]}}]}}, with an empty \
                     list when not.\nIts result: ",
                    node.id, node.task, self.task
                )
            });
            ready.push(Ready { id: node.id.clone(), prompt, expand_prompt });
            started.push(i);
        }
        for i in started {
            self.nodes[i].status = NodeStatus::Running;
        }
        ready
    }

    /// A node's run ended: its status is recorded; a failure skips its dependents (reported);
    /// an adaptive expansion adds its sub-graph within the node budget.
    pub(crate) fn on_node(
        &mut self,
        id: &str,
        outcome: NodeOutcome,
        options: &GotOptions,
    ) -> Vec<ModeProgress> {
        self.model_calls += outcome.model_calls;
        let mut events = Vec::new();
        let Some(index) = self.nodes.iter().position(|n| n.id == id) else { return events };
        match outcome.result {
            Ok(result) => {
                events.push(ModeProgress::GotNodeComplete {
                    id: id.to_string(),
                    result_summary: summary(&result, 120),
                });
                self.nodes[index].status = NodeStatus::Done { result };
                if let Some(text) = outcome.expansion {
                    events.extend(self.expand(id, &text, options));
                }
            }
            Err(error) => {
                events
                    .push(ModeProgress::GotNodeFailed { id: id.to_string(), error: error.clone() });
                self.nodes[index].status = NodeStatus::Failed { error };
                // Dependents, transitively, in plan order.
                let mut failed: HashSet<String> = HashSet::from([id.to_string()]);
                loop {
                    let mut more = false;
                    for node in &mut self.nodes {
                        if node.status == NodeStatus::Pending
                            && let Some(dep) = node.deps.iter().find(|d| failed.contains(*d))
                        {
                            let error = format!("skipped: it depends on {dep}, which failed");
                            events.push(ModeProgress::GotNodeFailed {
                                id: node.id.clone(),
                                error: error.clone(),
                            });
                            node.status = NodeStatus::Failed { error };
                            failed.insert(node.id.clone());
                            more = true;
                        }
                    }
                    if !more {
                        break;
                    }
                }
            }
        }
        if self.settled() {
            self.phase = Phase::Synthesize;
        }
        events
    }

    /// Adds the sub-graph the model proposed for node `id`: its nodes depend on `id` (besides
    /// their own deps), and `id`'s dependents wait for them too. Refused (nothing added) when
    /// malformed or over the node budget. New nodes without dependencies depend on `id`.
    fn expand(&mut self, id: &str, text: &str, options: &GotOptions) -> Vec<ModeProgress> {
        let existing: HashSet<String> = self.nodes.iter().map(|n| n.id.clone()).collect();
        let Ok(mut added) = parse_nodes(text, &existing) else { return Vec::new() };
        if added.is_empty() || self.nodes.len() + added.len() > options.node_budget as usize {
            return Vec::new();
        }
        let mut edges = 0;
        for node in &mut added {
            if node.deps.is_empty() {
                node.deps.push(id.to_string());
            }
            edges += node.deps.len() as u32;
        }
        let new_ids: Vec<String> = added.iter().map(|n| n.id.clone()).collect();
        for node in &mut self.nodes {
            if node.deps.iter().any(|d| d == id) {
                node.deps.extend(new_ids.iter().cloned());
                edges += new_ids.len() as u32;
            }
        }
        let nodes_added = added.len() as u32;
        self.nodes.extend(added);
        vec![ModeProgress::GotExpand { node_id: id.to_string(), nodes_added, edges_added: edges }]
    }

    /// Whether no node is pending or running.
    pub(crate) fn settled(&self) -> bool {
        self.nodes
            .iter()
            .all(|n| matches!(n.status, NodeStatus::Done { .. } | NodeStatus::Failed { .. }))
    }

    /// Whether nodes are pending that cannot start for want of model calls.
    pub(crate) fn out_of_calls(&self, options: &GotOptions) -> bool {
        self.model_calls >= options.max_model_calls
            && self.nodes.iter().any(|n| n.status == NodeStatus::Pending)
    }

    /// A crashed run's nodes that were running run again.
    pub(crate) fn restart_running(&mut self) {
        for node in &mut self.nodes {
            if node.status == NodeStatus::Running {
                node.status = NodeStatus::Pending;
            }
        }
    }

    /// What the synthesis call is told: every node's result or failure.
    pub(crate) fn synthesis_guidance(&self) -> String {
        let lines: Vec<String> = self
            .nodes
            .iter()
            .map(|n| match &n.status {
                NodeStatus::Done { result } => format!("- {} ({}): {result}", n.id, n.task),
                NodeStatus::Failed { error } => format!("- {} ({}): FAILED: {error}", n.id, n.task),
                _ => format!("- {} ({}): not run", n.id, n.task),
            })
            .collect();
        format!(
            "Results of the sub-tasks:\n{}\nUsing these results, write the final answer to the task.",
            lines.join("\n")
        )
    }
}

/// The nodes of a plan (`{"nodes":[{"id","task","deps"}]}`, or the bare array), checked: ids
/// present and unique (also against `existing`), dependencies known, no cycle.
pub(crate) fn parse_nodes(
    text: &str,
    existing: &HashSet<String>,
) -> Result<Vec<GraphNode>, String> {
    let value = extract_json(text, '{')
        .and_then(|v| v.get("nodes").cloned())
        .or_else(|| extract_json(text, '['))
        .ok_or("the reply holds no JSON plan ({\"nodes\": [...]})")?;
    #[derive(Deserialize)]
    struct Planned {
        id: String,
        #[serde(default)]
        task: String,
        #[serde(default)]
        deps: Vec<String>,
    }
    let planned: Vec<Planned> =
        serde_json::from_value(value).map_err(|e| format!("the plan is malformed: {e}"))?;
    let mut ids = HashSet::new();
    for p in &planned {
        if p.id.trim().is_empty() {
            return Err("a node has an empty id".into());
        }
        if existing.contains(&p.id) || !ids.insert(p.id.clone()) {
            return Err(format!("node id {:?} is used twice", p.id));
        }
    }
    for p in &planned {
        if let Some(d) = p.deps.iter().find(|d| !ids.contains(*d) && !existing.contains(*d)) {
            return Err(format!("node {:?} depends on {d:?}, which is not in the plan", p.id));
        }
    }
    // Kahn's algorithm over the plan's own edges.
    let mut indegree: HashMap<&str, usize> = planned
        .iter()
        .map(|p| (p.id.as_str(), p.deps.iter().filter(|d| ids.contains(*d)).count()))
        .collect();
    let mut queue: Vec<&str> =
        indegree.iter().filter(|(_, n)| **n == 0).map(|(id, _)| *id).collect();
    let mut seen = 0;
    while let Some(id) = queue.pop() {
        seen += 1;
        for p in &planned {
            if p.deps.iter().any(|d| d == id)
                && let Some(n) = indegree.get_mut(p.id.as_str())
            {
                *n -= 1;
                if *n == 0 {
                    queue.push(p.id.as_str());
                }
            }
        }
    }
    if seen != planned.len() {
        return Err("the plan has a cycle".into());
    }
    Ok(planned
        .into_iter()
        .map(|p| GraphNode { id: p.id, task: p.task, deps: p.deps, status: NodeStatus::Pending })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const DIAMOND: &str = r#"{"nodes":[{"id":"a","task":"A"},{"id":"b","task":"B","deps":["a"]},
        {"id":"c","task":"C","deps":["a"]},{"id":"d","task":"D","deps":["b","c"]}]}"#;

    fn ok(result: &str) -> NodeOutcome {
        NodeOutcome { result: Ok(result.into()), model_calls: 1, expansion: None }
    }

    #[test]
    fn a_diamond_runs_in_dependency_order_with_concurrency() {
        let o = GotOptions::default();
        let mut s = GotState::new("t".into());
        let ev = s.on_plan(DIAMOND, &o).unwrap();
        assert_eq!(
            ev,
            vec![ModeProgress::GotPlan {
                node_count: 4,
                edge_count: 4,
                node_ids: vec!["a".into(), "b".into(), "c".into(), "d".into()]
            }]
        );
        let r: Vec<String> = s.ready(&o).into_iter().map(|r| r.id).collect();
        assert_eq!(r, ["a"]);
        s.on_node("a", ok("ra"), &o);
        let r = s.ready(&o);
        assert_eq!(r.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["b", "c"]);
        assert!(r[0].prompt.contains("- a: ra"));
        let ev = s.on_node(
            "b",
            NodeOutcome { result: Err("boom".into()), model_calls: 1, expansion: None },
            &o,
        );
        assert_eq!(ev.len(), 2, "{ev:?}");
        assert!(
            matches!(&ev[1], ModeProgress::GotNodeFailed { id, error } if id == "d" && error.contains("depends on b"))
        );
        assert_eq!(s.phase, Phase::Run);
        s.on_node("c", ok("rc"), &o);
        assert_eq!(s.phase, Phase::Synthesize);
        assert!(s.synthesis_guidance().contains("b (B): FAILED: boom"));
    }

    #[test]
    fn bad_plans_get_one_retry() {
        let o = GotOptions::default();
        let mut s = GotState::new("t".into());
        assert_eq!(s.on_plan("no plan", &o), Ok(vec![]));
        assert!(s.plan_prompt(&o).contains("was refused: the reply holds no JSON plan"));
        let cyclic = r#"{"nodes":[{"id":"a","deps":["b"]},{"id":"b","deps":["a"]}]}"#;
        let e = s.on_plan(cyclic, &o).unwrap_err();
        assert!(e.contains("cycle"), "{e}");
        let e = parse_nodes(r#"{"nodes":[{"id":"a","deps":["z"]}]}"#, &HashSet::new()).unwrap_err();
        assert!(e.contains("\"z\""), "{e}");
        let small = GotOptions { node_budget: 2, ..o };
        let mut s = GotState::new("t".into());
        s.on_plan(DIAMOND, &small).unwrap();
        assert!(matches!(s.phase, Phase::Replan { ref error } if error.contains("node budget")));
    }

    #[test]
    fn adaptive_expansion_respects_the_budget() {
        let o = GotOptions { adaptive: true, node_budget: 6, ..GotOptions::default() };
        let mut s = GotState::new("t".into());
        s.on_plan(DIAMOND, &o).unwrap();
        s.ready(&o);
        let mut out = ok("ra");
        out.expansion = Some(
            r#"{"nodes":[{"id":"a1","task":"A1"},{"id":"a2","task":"A2","deps":["a1"]}]}"#.into(),
        );
        let ev = s.on_node("a", out, &o);
        assert_eq!(
            ev[1],
            ModeProgress::GotExpand { node_id: "a".into(), nodes_added: 2, edges_added: 6 }
        );
        assert!(s.nodes[1].deps.contains(&"a2".to_string()));
        let r: Vec<String> = s.ready(&o).into_iter().map(|r| r.id).collect();
        assert_eq!(r, ["a1"]);
        let mut out = ok("r1");
        out.expansion = Some(r#"{"nodes":[{"id":"x"}]}"#.into());
        let ev = s.on_node("a1", out, &o);
        assert_eq!(ev.len(), 1, "over the budget: {ev:?}");
    }
}
