//! Remote tools suspend a run and tool results resume it; approvals suspend and decide.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{Recording, run};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use weft_agent::{Agent, Awaiting, ExecuteError, RunOutcome, SessionOptions, TurnLimit, tool_fn};
use weft_core::{
    AgentEvent, ApprovalDecision, Input, Message, SessionStatus, ToolResultMessage, ToolSpec,
};
use weft_llm::faux::FauxTurn;

#[derive(Deserialize, JsonSchema)]
struct Path {
    path: String,
}

fn browser_tool() -> ToolSpec {
    ToolSpec::new(
        "read_page",
        "Reads the page open in the user's browser",
        json!({"type": "object", "properties": {"selector": {"type": "string"}}, "required": ["selector"]}),
    )
}

fn counting_agent(provider: Recording, runs: Arc<AtomicUsize>, approval: bool) -> Agent {
    let tool = tool_fn("delete_file", "Deletes a file", move |a: Path| {
        let runs = runs.clone();
        async move {
            runs.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>(format!("deleted {}", a.path))
        }
    });
    let tool = if approval { tool.with_approval() } else { tool };
    Agent::builder(provider).tool(tool).build().unwrap()
}

#[tokio::test]
async fn remote_tool_suspends_and_a_result_resumes() {
    let provider = Recording::new([
        FauxTurn::tool_call("read_page", json!({"selector": "h1"})),
        FauxTurn::text("The title is Weft."),
    ]);
    let agent = counting_agent(provider.clone(), Arc::default(), false);
    let session = agent
        .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
        .await
        .unwrap();

    let (events, result) = run(&agent, &session, Input::text("What is the title?")).await;
    assert_eq!(result.status, SessionStatus::AwaitingToolExecution);
    assert_eq!(result.outcome, RunOutcome::Suspended { awaiting: Awaiting::ToolResults });
    assert_eq!(result.error, None);
    assert_eq!(result.pending_tool_calls.len(), 1);
    let call = result.pending_tool_calls[0].clone();
    assert_eq!((call.name.as_str(), &*call.arguments), ("read_page", &json!({"selector": "h1"})));
    assert_eq!(session.pending_tool_calls(), vec![call.clone()]);
    assert_eq!(session.status(), SessionStatus::AwaitingToolExecution);
    assert!(!events.iter().any(|e| matches!(e, AgentEvent::ToolExecutionStart { .. })));
    let awaiting: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::AwaitingToolExecution { tool_calls, .. } => Some(tool_calls.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(awaiting, vec![vec![call.clone()]]);
    assert_eq!(events.last().unwrap().kind(), "session_end");
    assert_eq!(provider.calls(), 1);

    // A result for a call that does not exist is refused and changes nothing.
    let before = session.snapshot();
    let bogus = ToolResultMessage::new("no-such-call", "read_page", "x", false);
    let err = agent.execute(&session, Input::ToolResults(vec![bogus])).await.err().unwrap();
    assert_eq!(err, ExecuteError::UnknownToolCall("no-such-call".into()));
    assert_eq!(err.to_string(), "no pending tool call has id \"no-such-call\"");
    assert_eq!(session.snapshot(), before);
    // So is a user message while the call waits.
    let err = agent.execute(&session, Input::text("hello?")).await.err().unwrap();
    assert!(matches!(err, ExecuteError::AwaitingToolCalls { .. }), "{err}");
    assert_eq!(session.snapshot(), before);

    let answer = ToolResultMessage::ok(&call, "Weft");
    let (events, result) = run(&agent, &session, Input::ToolResults(vec![answer])).await;
    assert_eq!(result.status, SessionStatus::Completed);
    // The result is emitted once, in the observe node that completes the step.
    assert_eq!(
        common::kinds(&events)[..11],
        [
            "session_start",
            "node_enter",
            "message_start",
            "message_end",
            "node_exit",
            "state_snapshot",
            "state_update",
            "checkpoint",
            "step_end",
            "node_enter",
            "step_start"
        ]
    );
    // What the observe node changed is measured from the suspended state: the call no longer
    // waits, its result is in the conversation.
    let update = events.iter().find_map(|e| match e {
        AgentEvent::StateUpdate { name, state } if name == "observe" => Some(state.clone()),
        _ => None,
    });
    assert_eq!(update, Some(json!({"message_count": 3, "pending": []})));
    assert!(session.pending_tool_calls().is_empty());
    let roles: Vec<_> = result.messages.iter().map(Message::role).collect();
    assert_eq!(roles, [weft_core::Role::ToolResult, weft_core::Role::Assistant]);
    assert_eq!(result.response().final_output, "The title is Weft.");
    // The step the call belonged to ends in the resumed run, with the remote result.
    let step = &result.steps[0];
    assert_eq!(step.step_index, 0);
    assert_eq!(step.tool_results[0].output, "Weft");
    assert_eq!(result.steps[1].step_index, 1);
    assert!(
        events.iter().any(|e| matches!(e, AgentEvent::StepEnd { step } if step.step_index == 0))
    );
    // The model saw the result.
    let Some(Message::ToolResult(r)) = provider.last_request().messages.last().cloned() else {
        panic!("no tool result sent to the model")
    };
    assert_eq!(r.text_content(), "Weft");
}

#[tokio::test]
async fn mixed_turn_runs_the_local_call_and_waits_for_the_remote_one() {
    let runs = Arc::new(AtomicUsize::new(0));
    let provider = Recording::new([
        FauxTurn::default()
            .with_tool_call_id("remote", "read_page", json!({"selector": "title"}))
            .with_tool_call_id("local", "delete_file", json!({"path": "/tmp/x"})),
        FauxTurn::text("Done."),
    ]);
    let agent = counting_agent(provider.clone(), runs.clone(), false);
    let session = agent
        .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
        .await
        .unwrap();
    let (events, result) = run(&agent, &session, Input::text("go")).await;
    assert_eq!(result.status, SessionStatus::AwaitingToolExecution);
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the local call ran");
    assert!(events.iter().any(|e| matches!(e, AgentEvent::ToolExecutionEnd { tool_call_id, .. } if tool_call_id == "local")));
    assert_eq!(
        result.pending_tool_calls.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["remote"]
    );
    // The local result is held until the turn is complete: results keep the model's order.
    assert_eq!(result.messages.len(), 2);

    let call = result.pending_tool_calls[0].clone();
    let (_, result) =
        run(&agent, &session, Input::ToolResults(vec![ToolResultMessage::ok(&call, "Title")]))
            .await;
    assert_eq!(result.status, SessionStatus::Completed);
    let ids: Vec<_> = result
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::ToolResult(r) => Some(r.tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ids, ["remote", "local"]);
    let step = &result.steps[0];
    assert_eq!(
        step.tool_results.iter().map(|r| r.call.id.as_str()).collect::<Vec<_>>(),
        ["remote", "local"]
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the local call ran once");
}

#[tokio::test]
async fn approval_denied_then_granted() {
    let runs = Arc::new(AtomicUsize::new(0));
    let provider = Recording::new([
        FauxTurn::tool_call("delete_file", json!({"path": "/etc/passwd"})),
        FauxTurn::tool_call("delete_file", json!({"path": "/tmp/cache"})),
        FauxTurn::text("Deleted the cache."),
    ]);
    let agent = counting_agent(provider.clone(), runs.clone(), true);
    let session = agent.create_session(SessionOptions::default()).await.unwrap();

    let (events, result) = run(&agent, &session, Input::text("clean up")).await;
    assert_eq!(result.status, SessionStatus::AwaitingApproval);
    assert_eq!(result.outcome, RunOutcome::Suspended { awaiting: Awaiting::Approval });
    assert_eq!(result.pending_approvals.len(), 1);
    assert!(result.pending_tool_calls.is_empty());
    assert!(events.iter().any(
        |e| matches!(e, AgentEvent::ApprovalRequired { tool_calls, .. } if tool_calls.len() == 1)
    ));
    assert_eq!(runs.load(Ordering::SeqCst), 0);

    // An approval for an unknown call is refused.
    let err = agent
        .execute(&session, Input::Approvals { approvals: vec![ApprovalDecision::approve("nope")] })
        .await
        .err()
        .unwrap();
    assert_eq!(err, ExecuteError::UnknownApproval("nope".into()));

    let first = result.pending_approvals[0].id.clone();
    let deny =
        Input::Approvals { approvals: vec![ApprovalDecision::deny(&first, "not that file")] };
    let (events, result) = run(&agent, &session, deny).await;
    assert_eq!(runs.load(Ordering::SeqCst), 0, "a denied call never runs");
    let result_messages = events
        .iter()
        .filter(|e| matches!(e, AgentEvent::MessageEnd { message } if matches!(**message, Message::ToolResult(_))))
        .count();
    assert_eq!(result_messages, 1, "the denial's result is emitted once");
    assert!(!events.iter().any(|e| matches!(e, AgentEvent::ToolExecutionStart { .. })));
    // The model saw the denial as an error result, then asked again.
    let request = provider.requests.lock().unwrap()[1].clone();
    let Some(Message::ToolResult(r)) = request.messages.last() else { panic!("no result") };
    assert!(r.is_error);
    assert_eq!(r.text_content(), "Tool call denied by the user: not that file");
    assert_eq!(result.status, SessionStatus::AwaitingApproval);

    let second = result.pending_approvals[0].id.clone();
    let approve = Input::from(vec![ApprovalDecision::approve(&second)]);
    let (events, result) = run(&agent, &session, approve).await;
    assert_eq!(runs.load(Ordering::SeqCst), 1, "the approved call ran");
    assert!(events.iter().any(|e| matches!(e, AgentEvent::ToolExecutionEnd { output, .. } if output == "deleted /tmp/cache")));
    assert_eq!(result.status, SessionStatus::Completed);
    assert_eq!(result.response().final_output, "Deleted the cache.");
}

#[tokio::test]
async fn an_approval_policy_and_an_approved_remote_call() {
    let provider = Recording::new([
        FauxTurn::tool_call("read_page", json!({"selector": "#secret"})),
        FauxTurn::text("ok"),
    ]);
    let agent = Agent::builder(provider)
        .approval_policy(|_, call| call.arguments["selector"] == "#secret")
        .build()
        .unwrap();
    let session = agent
        .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
        .await
        .unwrap();
    let (_, result) = run(&agent, &session, Input::text("read")).await;
    assert_eq!(result.status, SessionStatus::AwaitingApproval);
    let id = result.pending_approvals[0].id.clone();
    // Once approved, a remote call is handed to the client.
    let (events, result) =
        run(&agent, &session, Input::Approvals { approvals: vec![ApprovalDecision::approve(&id)] })
            .await;
    assert_eq!(result.status, SessionStatus::AwaitingToolExecution);
    assert_eq!(result.pending_tool_calls[0].id, id);
    assert!(events.iter().any(|e| e.kind() == "awaiting_tool_execution"));
}

#[tokio::test]
async fn aborting_a_suspended_session_answers_its_calls_and_frees_it() {
    let provider = Recording::new([
        FauxTurn::tool_call("read_page", json!({"selector": "h1"})),
        FauxTurn::text("fresh start"),
    ]);
    let agent = counting_agent(provider.clone(), Arc::default(), false);
    let session = agent
        .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
        .await
        .unwrap();
    let (_, result) = run(&agent, &session, Input::text("go")).await;
    assert_eq!(result.status, SessionStatus::AwaitingToolExecution);
    assert!(session.abort().await);
    assert_eq!(session.status(), SessionStatus::Aborted);
    let Some(Message::ToolResult(r)) = session.snapshot().messages.last().cloned() else {
        panic!("the waiting call was not answered")
    };
    assert!(r.is_error);
    let (_, result) = run(&agent, &session, Input::text("never mind")).await;
    assert_eq!(result.status, SessionStatus::Completed);
    assert!(!session.abort().await, "nothing left to abort");
}

#[tokio::test]
async fn an_unanswered_remote_call_times_out_and_the_run_goes_on() {
    let provider = Recording::new([
        FauxTurn::tool_call("read_page", json!({"selector": "h1"})),
        FauxTurn::text("The page did not answer."),
    ]);
    let agent = Agent::builder(provider.clone())
        .remote_tool_timeout(std::time::Duration::from_millis(50))
        .build()
        .unwrap();
    let session = agent
        .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
        .await
        .unwrap();
    let (_, result) = run(&agent, &session, Input::text("title?")).await;
    assert_eq!(result.status, SessionStatus::AwaitingToolExecution);
    for _ in 0..200 {
        if session.status() == SessionStatus::Completed {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert_eq!(session.status(), SessionStatus::Completed);
    let Some(Message::ToolResult(r)) = provider.last_request().messages.last().cloned() else {
        panic!("the model was not told")
    };
    assert!(r.is_error);
    assert!(r.text_content().contains("before its deadline"), "{}", r.text_content());
}

#[tokio::test]
async fn a_result_before_the_deadline_wins() {
    let provider = Recording::new([
        FauxTurn::tool_call("read_page", json!({"selector": "h1"})),
        FauxTurn::text("Got it."),
        FauxTurn::text("unused"),
    ]);
    // A second: the answer below surely comes before it, and the watchdog's sweep after it.
    let agent = Agent::builder(provider.clone())
        .remote_tool_timeout(std::time::Duration::from_secs(1))
        .build()
        .unwrap();
    let session = agent
        .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
        .await
        .unwrap();
    let (_, result) = run(&agent, &session, Input::text("title?")).await;
    let call = result.pending_tool_calls[0].clone();
    let (_, result) =
        run(&agent, &session, Input::ToolResults(vec![ToolResultMessage::ok(&call, "Weft")])).await;
    assert_eq!(result.status, SessionStatus::Completed);
    tokio::time::sleep(std::time::Duration::from_millis(1200)).await;
    assert_eq!(provider.calls(), 2, "the watchdog found nothing to expire");
    assert_eq!(session.snapshot().messages.len(), 4);
}

/// A session with the browser tool whose first turn calls it and whose call is answered "A":
/// the provider, agent, session, the call, and how the answered run ended.
async fn first_call_answered(
    turns: impl IntoIterator<Item = FauxTurn>,
) -> (Recording, Agent, weft_agent::SessionHandle, weft_core::ToolCall, weft_agent::ExecuteResult) {
    let provider = Recording::new(turns);
    let agent = counting_agent(provider.clone(), Arc::default(), false);
    let session = agent
        .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
        .await
        .unwrap();
    let (_, first) = run(&agent, &session, Input::text("Read the headings")).await;
    let call = first.pending_tool_calls[0].clone();
    let (_, answered) =
        run(&agent, &session, Input::ToolResults(vec![ToolResultMessage::ok(&call, "A")])).await;
    (provider, agent, session, call, answered)
}

#[tokio::test]
async fn a_result_for_a_call_answered_already_is_refused_and_changes_nothing() {
    let (provider, agent, session, call, second) = first_call_answered([
        FauxTurn::tool_call("read_page", json!({"selector": "h1"})),
        FauxTurn::tool_call("read_page", json!({"selector": "h2"})),
        FauxTurn::text("Done."),
    ])
    .await;
    assert_eq!(second.status, SessionStatus::AwaitingToolExecution);

    // The first call was answered in an earlier turn: the same answer again is refused.
    let before = session.snapshot();
    let again = ToolResultMessage::ok(&call, "A");
    let err = agent.execute(&session, Input::ToolResults(vec![again])).await.err().unwrap();
    assert_eq!(err, ExecuteError::AlreadyAnswered(call.id.clone()));
    assert_eq!(err.to_string(), format!("tool call {:?} was answered already", call.id));
    assert_eq!(session.snapshot(), before, "a refused answer changes nothing");
    assert_eq!(provider.calls(), 2);
}

#[tokio::test]
async fn a_result_arriving_after_the_run_went_on_to_its_end_is_refused_as_answered() {
    let (provider, agent, session, call, done) = first_call_answered([
        FauxTurn::tool_call("read_page", json!({"selector": "h1"})),
        FauxTurn::text("Done."),
    ])
    .await;
    assert_eq!(done.status, SessionStatus::Completed);

    // Nothing waits any more; the late duplicate (another client, a retry) is named as such.
    let before = session.snapshot();
    let late = Input::ToolResults(vec![ToolResultMessage::ok(&call, "A")]);
    let err = agent.execute(&session, late).await.err().unwrap();
    assert_eq!(err, ExecuteError::AlreadyAnswered(call.id.clone()));
    let stray = Input::ToolResults(vec![ToolResultMessage {
        tool_call_id: "call_never_made".into(),
        ..ToolResultMessage::ok(&call, "B")
    }]);
    let err = agent.execute(&session, stray).await.err().unwrap();
    assert_eq!(err, ExecuteError::NothingPending(session.id()));
    assert_eq!(session.snapshot(), before, "refused answers change nothing");
    assert_eq!(provider.calls(), 2);
}

#[tokio::test]
async fn max_turns_counts_model_calls_across_the_resumes_of_one_run() {
    let provider = Recording::new([
        FauxTurn::tool_call("read_page", json!({"selector": "h1"})),
        FauxTurn::tool_call("read_page", json!({"selector": "h2"})),
        FauxTurn::tool_call("read_page", json!({"selector": "h3"})),
        FauxTurn::text("never reached"),
    ]);
    let agent = Agent::builder(provider.clone()).max_turns(2).build().unwrap();
    let session = agent
        .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
        .await
        .unwrap();
    let (events, first) = run(&agent, &session, Input::text("Read headings")).await;
    let run_id = |events: &[AgentEvent]| match events.first() {
        Some(AgentEvent::SessionStart { run_id, .. }) => run_id.clone(),
        other => panic!("{other:?}"),
    };
    let first_run = run_id(&events);
    let call = first.pending_tool_calls[0].clone();
    let (events, second) =
        run(&agent, &session, Input::ToolResults(vec![ToolResultMessage::ok(&call, "A")])).await;
    assert_ne!(run_id(&events), first_run, "each execution has its own run id on the wire");
    assert_eq!(second.status, SessionStatus::AwaitingToolExecution);
    let call = second.pending_tool_calls[0].clone();
    let (_, third) =
        run(&agent, &session, Input::ToolResults(vec![ToolResultMessage::ok(&call, "B")])).await;
    // Two model calls were made by this run (one per execute so far): the limit is reached.
    assert_eq!(third.status, SessionStatus::MaxTurns);
    assert_eq!(third.outcome, RunOutcome::MaxTurns { limit: TurnLimit::MaxTurns });
    assert_eq!(third.error.as_deref(), Some("the run stopped after 2 model calls (max_turns)"));
    assert_eq!(provider.calls(), 2);

    // A new user message starts a new run with a fresh count.
    let (events, fourth) = run(&agent, &session, Input::text("Go on")).await;
    assert_ne!(run_id(&events), first_run);
    assert_eq!(fourth.status, SessionStatus::AwaitingToolExecution);
    assert_eq!(provider.calls(), 3);
}

#[tokio::test]
async fn an_answer_of_the_wrong_kind_says_what_the_call_waits_for() {
    // A remote call waits for its result: an approval for it is refused as such.
    let provider = Recording::new([FauxTurn::tool_call("read_page", json!({"selector": "h1"}))]);
    let agent = counting_agent(provider, Arc::default(), false);
    let session = agent
        .create_session(SessionOptions { tools: vec![browser_tool()], ..Default::default() })
        .await
        .unwrap();
    let (_, result) = run(&agent, &session, Input::text("title?")).await;
    let call = result.pending_tool_calls[0].clone();
    let before = session.snapshot();
    let approve = Input::Approvals { approvals: vec![ApprovalDecision::approve(&call.id)] };
    let err = agent.execute(&session, approve).await.err().unwrap();
    assert_eq!(err, ExecuteError::AwaitsResult(call.id.clone()));
    assert!(err.to_string().contains("waiting for its result, not for an approval"), "{err}");
    assert_eq!(session.snapshot(), before, "a refused answer changes nothing");

    // A call waits for approval: a result for it is refused as such.
    let runs = Arc::new(AtomicUsize::new(0));
    let provider = Recording::new([FauxTurn::tool_call("delete_file", json!({"path": "/x"}))]);
    let agent = counting_agent(provider, runs.clone(), true);
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (_, result) = run(&agent, &session, Input::text("clean up")).await;
    let call = result.pending_approvals[0].clone();
    let answer = Input::ToolResults(vec![ToolResultMessage::ok(&call, "deleted it myself")]);
    let err = agent.execute(&session, answer).await.err().unwrap();
    assert_eq!(err, ExecuteError::AwaitsApproval(call.id.clone()));
    assert_eq!(runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn tool_names_providers_refuse_are_refused_when_tools_are_given() {
    let named = |name: &str| tool_fn(name, "d", |a: Path| async move { Ok::<_, String>(a.path) });
    let error = Agent::builder(Recording::new([])).tool(named("files.read")).build().err();
    assert!(
        matches!(&error, Some(weft_agent::AgentError::InvalidToolName { name }) if name == "files.read"),
        "{error:?}"
    );
    assert!(Agent::builder(Recording::new([])).tool(named("files_read")).build().is_ok());
    let agent = counting_agent(Recording::new([]), Arc::default(), false);
    let long = "x".repeat(100 * 1024);
    let spec = ToolSpec::new(long.clone(), "d", json!({"type": "object"}));
    let error = agent
        .create_session(SessionOptions { tools: vec![spec], ..Default::default() })
        .await
        .err()
        .unwrap();
    assert_eq!(error, weft_agent::AgentError::InvalidToolName { name: long });
    let message = error.to_string();
    assert!(message.len() < 300 && message.contains("(102400 bytes)"), "{message}");
}
