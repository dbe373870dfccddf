//! A run's outcome says which end it was, as a type: a reasoning mode's bound of model calls and
//! a reasoning mode's own failure are told from the session's `max_turns` and a model's failure.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Recording, run};
use weft_agent::{Agent, FailureKind, Mode, RunOutcome, SessionOptions, TotOptions, TurnLimit};
use weft_core::{Input, SessionStatus};
use weft_llm::faux::FauxTurn;

fn tot(options: TotOptions) -> SessionOptions {
    SessionOptions { mode: Some(Mode::Tot(options)), ..Default::default() }
}

#[tokio::test]
async fn a_modes_bound_of_model_calls_is_not_the_sessions_max_turns() {
    let provider = Recording::new([
        FauxTurn::text(r#"["Try A", "Try B"]"#),
        FauxTurn::text("[0.9, 0.1]"),
        FauxTurn::text("never reached"),
    ]);
    let agent = Agent::builder(provider.clone()).build().unwrap();
    let options = TotOptions { max_model_calls: 2, ..Default::default() };
    let session = agent.create_session(tot(options)).await.unwrap();
    let (_, result) = run(&agent, &session, Input::text("Make 24")).await;
    assert_eq!(result.status, SessionStatus::MaxTurns);
    assert_eq!(result.outcome, RunOutcome::MaxTurns { limit: TurnLimit::ModelCalls });
    assert_eq!(
        result.error.as_deref(),
        Some("the run stopped after 2 model calls (tot maxModelCalls)")
    );
    assert_eq!(provider.calls(), 2);
}

#[tokio::test]
async fn a_modes_own_failure_is_a_mode_failure() {
    let provider = Recording::new([
        FauxTurn::text(r#"["Try A"]"#),
        FauxTurn::text("[0.9]"),
        FauxTurn::text("A gives 11. DEAD END."),
    ]);
    let agent = Agent::builder(provider).build().unwrap();
    let options = TotOptions { breadth: 1, ..Default::default() };
    let session = agent.create_session(tot(options)).await.unwrap();
    let (_, result) = run(&agent, &session, Input::text("Make 24")).await;
    assert_eq!(result.status, SessionStatus::Error, "{result:?}");
    let RunOutcome::Failed { kind: FailureKind::Mode, message } = &result.outcome else {
        panic!("not the mode's failure: {result:?}")
    };
    assert_eq!(result.error.as_ref(), Some(message));
    assert!(result.outcome.is_durable());
}

#[tokio::test]
async fn a_failed_scratch_call_is_the_models_failure() {
    let provider = Recording::new([FauxTurn::error("overloaded")]);
    let agent = Agent::builder(provider).build().unwrap();
    let session = agent.create_session(tot(TotOptions::default())).await.unwrap();
    let (_, result) = run(&agent, &session, Input::text("Make 24")).await;
    assert_eq!(result.status, SessionStatus::Error, "{result:?}");
    assert_eq!(
        result.outcome,
        RunOutcome::Failed { kind: FailureKind::Model, message: "overloaded".into() }
    );
    assert_eq!(result.error.as_deref(), Some("overloaded"));
}

#[tokio::test]
async fn the_outcome_is_serialized_beside_the_fields_it_agrees_with() {
    let provider = Recording::new([FauxTurn::text("Hi")]);
    let agent = Agent::builder(provider).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (_, result) = run(&agent, &session, Input::text("Hello")).await;
    let mut json = serde_json::to_value(&result).unwrap();
    assert_eq!(json["status"], "completed");
    assert_eq!(json["outcome"], serde_json::json!({"type": "completed"}));
    assert_eq!(serde_json::from_value::<weft_agent::ExecuteResult>(json.clone()).unwrap(), result);
    // JSON written before results had an outcome: rebuilt from the status.
    json.as_object_mut().unwrap().remove("outcome");
    let old: weft_agent::ExecuteResult = serde_json::from_value(json).unwrap();
    assert_eq!(old.outcome, RunOutcome::Completed);
}
