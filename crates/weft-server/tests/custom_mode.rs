//! A fourth reasoning mode, defined here through the public trait alone, runs end to end: through
//! `Agent` (its state saved in the run, its scratch calls steps of their own, its node names on
//! the stream) and through the server's request parsing (`options.mode` and `modeOptions` read
//! by the agent's modes, an unknown parameter refused, the session keeping its mode).

#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

mod common;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use weft_agent::{Action, Agent, Decision, Mode, ModeKind, Reasoning, SessionOptions};
use weft_core::{AgentEvent, Input, SessionStatus};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

use common::{start_with, user};

/// Self-consistency: the model answers the task `samples` times on scratch contexts, then is
/// asked, in the conversation, for the answer most of those agree on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default)]
struct Consensus {
    /// Answers asked for before the decision.
    samples: u32,
}

impl Default for Consensus {
    fn default() -> Self {
        Self { samples: 3 }
    }
}

/// The mode's state in the run.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Votes {
    task: String,
    answers: Vec<String>,
}

impl Reasoning for Consensus {
    type State = Votes;

    fn name(&self) -> &'static str {
        "consensus"
    }

    fn start(&self, task: String) -> Votes {
        Votes { task, answers: Vec::new() }
    }

    fn next(&self, state: &mut Votes) -> Decision {
        if (state.answers.len() as u32) < self.samples {
            return Decision::to(Action::Scratch {
                node: "sample",
                prompt: format!("Answer in one word: {}", state.task),
            });
        }
        Decision::to(Action::Think {
            node: "decide",
            guidance: format!(
                "Independent answers: {}. Reply with the answer most of them agree on.",
                state.answers.join(", ")
            ),
        })
    }

    fn conversation_node(&self) -> &'static str {
        "decide"
    }

    fn on_scratch(&self, state: &mut Votes, _node: &str, text: &str) -> Decision {
        state.answers.push(text.trim().to_string());
        self.next(state)
    }
}

fn kind() -> ModeKind {
    ModeKind::custom::<Consensus>()
}

fn votes_then(answer: &str) -> FauxScript {
    FauxScript::new([
        FauxTurn::text("Paris"),
        FauxTurn::text("Lyon"),
        FauxTurn::text("Paris"),
        FauxTurn::text(answer),
    ])
}

#[tokio::test]
async fn a_mode_of_the_applications_own_runs_through_the_agent() {
    let agent =
        Agent::builder(FauxProvider::new(votes_then("Paris"))).mode(kind()).build().unwrap();
    assert_eq!(agent.modes().names(), ["react", "tot", "got", "consensus"]);
    let schema = agent.modes().parameters_schema();
    assert_eq!(
        schema["properties"]["samples"]["description"],
        "consensus: Answers asked for before the decision."
    );
    let mode = agent.modes().parse("consensus", &serde_json::Map::new()).unwrap();
    assert_eq!(mode, Mode::custom(Consensus { samples: 3 }));
    let session = agent
        .create_session(SessionOptions { mode: Some(mode), ..Default::default() })
        .await
        .unwrap();
    let (events, result) = agent
        .execute(&session, Input::text("The capital of France?"))
        .await
        .unwrap()
        .collect_all()
        .await;
    assert_eq!(result.status, SessionStatus::Completed, "{result:?}");
    // The three samples are steps outside the conversation; the decision is its answer.
    assert_eq!(result.steps.len(), 4);
    let scratch = result.steps.iter().filter(|s| s.annotations.extra.contains_key("scratch"));
    assert_eq!(scratch.count(), 3);
    assert_eq!(result.messages.len(), 2, "{:?}", result.messages);
    let weft_core::Message::Assistant(answer) = &result.messages[1] else {
        panic!("{:?}", result.messages)
    };
    assert_eq!(answer.text(), "Paris");
    let nodes: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::NodeEnter { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(nodes, ["sample", "sample", "sample", "decide"]);
    let AgentEvent::SessionStart { agent: name, .. } = &events[0] else { panic!("{events:?}") };
    assert_eq!(name, "consensus");
    // The mode's own state, as the run saved it at the last sample.
    let states: Vec<&Value> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::StateSnapshot { state } => Some(state),
            _ => None,
        })
        .collect();
    assert!(states.iter().any(|s| s["answers"] == json!(["Paris", "Lyon", "Paris"])), "{states:?}");
    // The session keeps the mode with its parameters, read back by the agent's modes.
    let options = session.snapshot().options;
    assert_eq!(options["mode"], json!({"type": "consensus", "samples": 3}));
    assert_eq!(agent.modes().of_options(&options), Mode::custom(Consensus::default()));
}

async fn execute(server: &common::TestServer, body: Value) -> reqwest::Response {
    server.post("/api/agent/execute?protocol=loom", None).json(&body).send().await.unwrap()
}

#[tokio::test]
async fn the_server_reads_the_mode_and_its_parameters_through_the_agent() {
    let script = FauxScript::new([
        FauxTurn::text("Paris"),
        FauxTurn::text("Paris"),
        FauxTurn::text("Paris, they agree."),
    ]);
    let server = start_with(script, |b| b.mode(kind()), |_| {}).await;
    let response = execute(
        &server,
        json!({
            "input": user("The capital of France?"),
            "context": {},
            "options": {"mode": "consensus", "modeOptions": {"samples": 2}},
        }),
    )
    .await;
    let status = response.status();
    assert_eq!(status, 200, "{}", response.text().await.unwrap());
    let id = response.headers()["x-session-id"].to_str().unwrap().to_string();
    let text = response.text().await.unwrap();
    let frames: Vec<Value> = weft_protocol::framing::parse_sse(&text)
        .iter()
        .filter(|f| f.is_json())
        .map(|f| serde_json::from_str(&f.data).unwrap())
        .collect();
    assert_eq!(frames[0]["agent"], "consensus");
    let last = frames.last().unwrap();
    assert_eq!(last["status"], "completed", "{frames:?}");
    assert_eq!(last["reply"], "Paris, they agree.");
    let session = server.settled(&id).await;
    assert_eq!(session["status"], "completed");

    // A parameter no mode has is refused, naming those there are.
    let refused = execute(
        &server,
        json!({"input": user("Again"), "context": {},
               "options": {"mode": "consensus", "modeOptions": {"sample": 2}}}),
    )
    .await;
    assert_eq!(refused.status(), 400);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "invalid_mode_options", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("samples"), "{body}");

    // A mode the agent does not know is refused, naming the ones it does.
    let unknown = execute(
        &server,
        json!({"input": user("Again"), "context": {}, "options": {"mode": "vote"}}),
    )
    .await;
    assert_eq!(unknown.status(), 400);
    let body: Value = unknown.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unknown_mode", "{body}");
    assert!(body["error"]["message"].as_str().unwrap().contains("consensus"), "{body}");

    // The session keeps its mode: another is refused.
    let again = execute(
        &server,
        json!({"sessionId": id, "input": user("Again"), "options": {"mode": "react"}}),
    )
    .await;
    assert_eq!(again.status(), 400);
    let body: Value = again.json().await.unwrap();
    assert_eq!(body["error"]["code"], "session_option_fixed", "{body}");
}
