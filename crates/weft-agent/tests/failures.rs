//! What goes wrong becomes a result the model sees, or a status: never a panic, never a loss.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use common::{Recording, kinds, run};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use weft_agent::{
    Agent, AgentHooks, FailureKind, RunOutcome, SessionOptions, ToolGate, streaming_tool_fn,
    tool_fn,
};
use weft_core::{AgentEvent, Input, Message, SessionStatus, StopReason, ToolCall};
use weft_llm::ModelRequest;
use weft_llm::faux::FauxTurn;

#[derive(Deserialize, JsonSchema)]
struct Count {
    n: u32,
}

#[derive(Deserialize, JsonSchema)]
struct Nothing {}

/// Sets a flag when dropped: tells whether a tool's future was dropped (cancelled).
struct DropFlag(Arc<AtomicBool>);
impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// The tool results the model was sent in the last request.
fn results_seen(provider: &Recording) -> Vec<(String, bool)> {
    common::tool_results(&provider.last_request().messages)
}

#[tokio::test]
async fn invalid_arguments_unknown_tool_panic_and_timeout_are_error_results() {
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let provider = Recording::new([
        FauxTurn::default()
            .with_tool_call_id("bad-args", "count", json!({"n": "three"}))
            .with_tool_call_id("unknown", "teleport", json!({}))
            .with_tool_call_id("panics", "explode", json!({}))
            .with_tool_call_id("slow", "sleepy", json!({}))
            .with_tool_call_id("good", "count", json!({"n": 3})),
        FauxTurn::text("Some tools failed, but I carried on."),
    ]);
    let agent = Agent::builder(provider.clone())
        .tool(tool_fn("count", "Counts to n", move |a: Count| {
            let ran = counter.clone();
            async move {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>(format!("counted to {}", a.n))
            }
        }))
        .tool(tool_fn("explode", "Panics", |_: Nothing| async move {
            if true {
                panic!("kaboom");
            }
            Ok::<_, String>("unreachable")
        }))
        .tool(
            tool_fn("sleepy", "Sleeps too long", |_: Nothing| async move {
                tokio::time::sleep(Duration::from_secs(30)).await;
                Ok::<_, String>("woke up")
            })
            .with_timeout(Duration::from_millis(50)),
        )
        .build()
        .unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (events, result) = run(&agent, &session, Input::text("go")).await;

    assert_eq!(result.status, SessionStatus::Completed, "the run continues");
    assert_eq!(ran.load(Ordering::SeqCst), 1, "only the valid call ran");
    let seen = results_seen(&provider);
    assert_eq!(seen.len(), 5, "every call answered, in the model's order: {seen:?}");
    let (text, err) = &seen[0];
    assert!(*err && text.starts_with("Invalid arguments for tool count"), "{text}");
    assert!(text.contains("\"three\"") && text.contains("/n"), "{text}");
    assert_eq!(seen[1], ("Tool teleport not found".to_string(), true));
    assert_eq!(seen[2], ("The tool panicked: kaboom".to_string(), true));
    assert_eq!(seen[3], ("The tool timed out after 50ms".to_string(), true));
    assert_eq!(seen[4], ("counted to 3".to_string(), false));
    // Rejected calls never start executing; the three that ran report their end.
    let started: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionStart { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(started, ["panics", "slow", "good"]);
    let step = &result.steps[0];
    assert_eq!(step.tool_results.len(), 5);
    assert_eq!(step.tool_results[2].error.as_deref(), Some("The tool panicked: kaboom"));
    assert!(step.tool_results[3].latency_ms >= 50, "{}", step.tool_results[3].latency_ms);
}

#[tokio::test]
async fn local_calls_run_concurrently_and_results_keep_the_models_order() {
    #[derive(Deserialize, JsonSchema)]
    struct Wait {
        ms: u64,
    }
    let provider = Recording::new([
        FauxTurn::default()
            .with_tool_call_id("slow", "wait", json!({"ms": 1000}))
            .with_tool_call_id("fast", "wait", json!({"ms": 1})),
        FauxTurn::text("done"),
    ]);
    let agent = Agent::builder(provider.clone())
        .tool(tool_fn("wait", "Waits", |a: Wait| async move {
            tokio::time::sleep(Duration::from_millis(a.ms)).await;
            Ok::<_, String>(format!("waited {}", a.ms))
        }))
        .build()
        .unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (events, result) = run(&agent, &session, Input::text("go")).await;
    // The fast call ended first: they ran at the same time.
    let ends: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolExecutionEnd { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ends, ["fast", "slow"]);
    // Yet the model gets them in its own order.
    let seen = results_seen(&provider);
    assert_eq!(seen[0].0, "waited 1000");
    assert_eq!(seen[1].0, "waited 1");
    assert_eq!(result.status, SessionStatus::Completed);
}

#[tokio::test]
async fn abort_during_text_streaming_keeps_the_partial_text() {
    let provider = Recording::new([
        FauxTurn::text("Once upon a time").with_chunk_size(5).stalled(),
        FauxTurn::text("Again!"),
    ]);
    let agent = Agent::builder(provider.clone()).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let mut stream = agent.execute(&session, Input::text("Tell me a story")).await.unwrap();
    let mut events = Vec::new();
    // Read until the whole text has streamed (the model then stalls), then abort.
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        if let AgentEvent::TextDelta { delta, .. } = &event {
            text.push_str(delta);
        }
        events.push(event);
        if text == "Once upon a time" {
            stream.abort();
        }
    }
    let result = stream.result().await;
    assert_eq!(result.status, SessionStatus::Aborted);
    assert_eq!(result.outcome, RunOutcome::Aborted);
    let Message::Assistant(partial) = &result.messages[1] else { panic!("no partial kept") };
    assert_eq!(partial.stop_reason, StopReason::Aborted);
    assert_eq!(partial.text(), "Once upon a time");
    assert!(partial.error_message.is_some());
    // The open text block was ended, and the run reported the abort.
    let k = kinds(&events);
    let end = k.iter().position(|k| *k == "text_end").unwrap();
    assert_eq!(&k[end..end + 2], ["text_end", "message_end"]);
    assert!(k.contains(&"error"));
    assert_eq!(k.last(), Some(&"session_end"));
    assert_eq!(*session.snapshot().messages[1], result.messages[1]);

    // The session takes a new input afterwards.
    let (_, result) = run(&agent, &session, Input::text("Again?")).await;
    assert_eq!(result.status, SessionStatus::Completed);
    assert_eq!((&result.outcome, &result.error), (&RunOutcome::Completed, &None));
    assert_eq!(result.response().final_output, "Again!");
}

/// A tool that answers its cancellation at once, in its own words. The abort and the tool's
/// answer race to the run; the abort's words win every time, so what a client sees after an
/// abort does not depend on which the run happened to read first.
struct Yielding(weft_core::ToolSpec);

impl weft_agent::Tool for Yielding {
    fn spec(&self) -> &weft_core::ToolSpec {
        &self.0
    }
    fn execute(
        &self,
        _: serde_json::Value,
        ctx: weft_agent::ToolContext,
    ) -> weft_agent::ToolStream {
        futures::stream::once(async move {
            ctx.cancel.cancelled().await;
            weft_agent::ToolEvent::Error(weft_agent::ToolError::Cancelled("gave up".into()))
        })
        .boxed()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_aborted_run_answers_its_calls_the_same_way_however_the_tool_races_it() {
    for round in 0..30 {
        let provider = Recording::new([FauxTurn::tool_call("wait", json!({}))]);
        let spec =
            weft_core::ToolSpec::new("wait", "Waits to be cancelled", json!({"type": "object"}));
        let agent = Agent::builder(provider).tool(Yielding(spec)).build().unwrap();
        let session = agent.create_session(SessionOptions::default()).await.unwrap();
        let mut stream = agent.execute(&session, Input::text("wait")).await.unwrap();
        let mut ended = None;
        while let Some(event) = stream.next().await {
            if matches!(event, AgentEvent::ToolExecutionStart { .. }) {
                stream.abort();
            }
            if let AgentEvent::ToolExecutionEnd { output, .. } = event {
                ended = Some(output);
            }
        }
        assert_eq!(stream.result().await.status, SessionStatus::Aborted, "round {round}");
        assert_eq!(
            ended.as_deref(),
            Some("Tool call aborted: the run was aborted"),
            "round {round}"
        );
    }
}

#[tokio::test]
async fn abort_during_a_tool_cancels_it_and_makes_no_further_model_call() {
    let dropped = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let (d, f) = (dropped.clone(), finished.clone());
    let provider = Recording::new([
        FauxTurn::tool_call("crawl", json!({})),
        FauxTurn::text("never said"),
        FauxTurn::text("after the abort"),
    ]);
    let agent = Agent::builder(provider.clone())
        .tool(streaming_tool_fn("crawl", "Crawls forever", move |_: Nothing, out| {
            let (d, f) = (d.clone(), f.clone());
            async move {
                let _guard = DropFlag(d);
                out.send("page 1\n").await;
                tokio::time::sleep(Duration::from_secs(60)).await;
                f.store(true, Ordering::SeqCst);
                Ok::<_, String>("crawled")
            }
        }))
        .build()
        .unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let mut stream = agent.execute(&session, Input::text("crawl")).await.unwrap();
    let mut events = Vec::new();
    while let Some(event) = stream.next().await {
        if matches!(&event, AgentEvent::ToolExecutionDelta { delta, .. } if delta == "page 1\n") {
            stream.abort();
        }
        events.push(event);
    }
    let result = stream.result().await;
    assert_eq!(result.status, SessionStatus::Aborted);
    // The tool's future was dropped before it finished.
    for _ in 0..100 {
        if dropped.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(dropped.load(Ordering::SeqCst) && !finished.load(Ordering::SeqCst));
    assert_eq!(provider.calls(), 1, "no model call after the abort");
    assert!(
        events.iter().any(|e| matches!(e,
        AgentEvent::ToolExecutionEnd { is_error: true, output, .. } if output.contains("aborted")))
    );
    // The call was answered, so the conversation stays valid; the session takes new input.
    let Some(Message::ToolResult(r)) = result.messages.last() else { panic!("no result") };
    assert!(r.is_error);
    let (_, result) = run(&agent, &session, Input::text("hello again")).await;
    assert_eq!(result.status, SessionStatus::Completed);
    // The faux cursor moved on by one turn: "never said" was never requested.
    assert_eq!(result.response().final_output, "never said");
}

#[tokio::test]
async fn provider_error_mid_stream_keeps_the_partial_and_runs_no_tools() {
    let ran = Arc::new(AtomicUsize::new(0));
    let counter = ran.clone();
    let provider = Recording::new([FauxTurn::text("Partial answ")
        .with_tool_call("count", json!({"n": 1}))
        .with_error("overloaded")]);
    let agent = Agent::builder(provider.clone())
        .tool(tool_fn("count", "Counts", move |_: Count| {
            let ran = counter.clone();
            async move {
                ran.fetch_add(1, Ordering::SeqCst);
                Ok::<_, String>("1")
            }
        }))
        .build()
        .unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (events, result) = run(&agent, &session, Input::text("go")).await;
    assert_eq!(result.status, SessionStatus::Error);
    assert_eq!(result.error.as_deref(), Some("overloaded"));
    assert_eq!(
        result.outcome,
        RunOutcome::Failed { kind: FailureKind::Model, message: "overloaded".into() }
    );
    let Message::Assistant(m) = &result.messages[1] else { panic!() };
    assert_eq!(m.stop_reason, StopReason::Error);
    assert_eq!(m.error_message.as_deref(), Some("overloaded"));
    assert_eq!(m.text(), "Partial answ");
    assert_eq!(m.tool_calls().count(), 1, "the partial call is kept on the message");
    assert_eq!(ran.load(Ordering::SeqCst), 0, "no tool call executed from a failed message");
    assert!(!kinds(&events).contains(&"tool_execution_start"));
    assert!(events.iter().any(
        |e| matches!(e, AgentEvent::Error { error, message: Some(_) } if error == "overloaded")
    ));
    assert_eq!(result.messages.len(), 2);
}

#[tokio::test]
async fn running_out_of_script_is_an_error_status_not_a_panic() {
    let provider = Recording::new([]);
    let agent = Agent::builder(provider).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (_, result) = run(&agent, &session, Input::text("hi")).await;
    assert_eq!(result.status, SessionStatus::Error);
    let RunOutcome::Failed { kind: FailureKind::Model, message } = &result.outcome else {
        panic!("not a model failure: {result:?}")
    };
    assert_eq!(result.error.as_ref(), Some(message), "the outcome says what the error says");
}

#[tokio::test]
async fn max_turns_stops_a_tool_loop() {
    let provider = Recording::new((0..10).map(|i| FauxTurn::tool_call("count", json!({"n": i}))));
    let agent = Agent::builder(provider.clone())
        .tool(tool_fn(
            "count",
            "Counts",
            |a: Count| async move { Ok::<_, String>(a.n.to_string()) },
        ))
        .max_turns(3)
        .build()
        .unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (_, result) = run(&agent, &session, Input::text("loop")).await;
    assert_eq!(result.status, SessionStatus::MaxTurns);
    assert_eq!(provider.calls(), 3);
    assert_eq!(result.steps.len(), 3);
    assert_eq!(result.error.as_deref(), Some("the run stopped after 3 model calls (max_turns)"));
    // The last turn's calls were answered: the session takes a new message.
    assert!(matches!(result.messages.last(), Some(Message::ToolResult(_))));
    assert_eq!(session.status(), SessionStatus::MaxTurns);
}

#[tokio::test]
async fn steps_trace_every_model_call() {
    let provider = Recording::new([
        FauxTurn::text("Checking.").with_tool_call("count", json!({"n": 2})).with_usage(10, 4),
        FauxTurn::text("Two.").with_usage(20, 2),
    ]);
    let agent = Agent::builder(provider)
        .tool(tool_fn("count", "Counts", |a: Count| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok::<_, String>(format!("{}", a.n))
        }))
        .build()
        .unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (events, result) = run(&agent, &session, Input::text("count")).await;
    let steps = &result.steps;
    assert_eq!(steps.len(), 2);
    assert_eq!((steps[0].step_index, steps[1].step_index), (0, 1));
    assert_ne!(steps[0].step_id, steps[1].step_id);
    assert_eq!(steps[0].llm_response.usage.total, 14);
    assert_eq!(steps[1].llm_response.usage.total, 22);
    assert_eq!(steps[0].tool_results.len(), 1);
    let tr = &steps[0].tool_results[0];
    assert_eq!((tr.output.as_str(), tr.error.is_none()), ("2", true));
    assert!(tr.latency_ms >= 20 && tr.started_at > 0, "{tr:?}");
    assert!(steps[1].tool_results.is_empty());
    assert_eq!(result.usage.total, 36);
    let response = result.response();
    assert_eq!(response.final_output, "Two.");
    // step_start ids match the finished steps.
    let started: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::StepStart { step_id, .. } => Some(step_id.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(started, steps.iter().map(|s| s.step_id.clone()).collect::<Vec<_>>());
    // The step trace serializes with the plan's camelCase names.
    let json = serde_json::to_value(&response).unwrap();
    assert_eq!(json["finalOutput"], "Two.");
    assert_eq!(json["steps"][0]["toolResults"][0]["output"], "2");
    assert!(json["steps"][0]["toolResults"][0]["latencyMs"].is_u64());
}

struct Guard;
impl AgentHooks for Guard {
    fn before_model_call<'a>(
        &'a self,
        request: &'a mut ModelRequest,
    ) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            request.system_prompt = Some("Rewritten by the hook".into());
            // Keep only the last message.
            request.messages = request.messages.last().cloned().into_iter().collect();
        })
    }

    fn before_tool_call<'a>(
        &'a self,
        call: &'a ToolCall,
    ) -> futures::future::BoxFuture<'a, ToolGate> {
        Box::pin(async move {
            if call.arguments["n"] == 13 {
                ToolGate::Block("13 is unlucky".into())
            } else {
                ToolGate::Allow
            }
        })
    }
}

#[tokio::test]
async fn hooks_rewrite_the_context_and_block_calls() {
    let provider =
        Recording::new([
            FauxTurn::default()
                .with_tool_call_id("a", "count", json!({"n": 13}))
                .with_tool_call_id("b", "count", json!({"n": 7})),
            FauxTurn::text("ok"),
        ]);
    let agent = Agent::builder(provider.clone())
        .system_prompt("original")
        .tool(tool_fn(
            "count",
            "Counts",
            |a: Count| async move { Ok::<_, String>(a.n.to_string()) },
        ))
        .hooks(Guard)
        .build()
        .unwrap();
    let session = agent
        .create_session(SessionOptions {
            messages: vec![Message::User(weft_core::UserMessage::text("earlier"))],
            ..Default::default()
        })
        .await
        .unwrap();
    let (_, result) = run(&agent, &session, Input::text("now")).await;
    assert_eq!(result.status, SessionStatus::Completed);
    let first = provider.requests.lock().unwrap()[0].clone();
    assert_eq!(first.system_prompt.as_deref(), Some("Rewritten by the hook"));
    assert_eq!(first.messages.len(), 1, "the hook trimmed the history");
    let seen = results_seen(&provider);
    assert_eq!(seen.len(), 1, "the hook also trims the second call's history to its last message");
    let results = common::tool_results(&result.messages);
    assert_eq!(
        results,
        [("Tool call blocked: 13 is unlucky".to_string(), true), ("7".to_string(), false)]
    );
    // The session itself keeps the whole history: hooks rewrite only what the model is sent.
    assert_eq!(session.snapshot().messages.len(), 6);
}

#[tokio::test]
async fn a_running_session_refuses_a_second_run() {
    let provider = Recording::new([FauxTurn::text("slow").stalled()]);
    let agent = Agent::builder(provider).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let stream = agent.execute(&session, Input::text("one")).await.unwrap();
    let err = agent.execute(&session, Input::text("two")).await.err().unwrap();
    assert_eq!(err, weft_agent::ExecuteError::AlreadyRunning(session.id()));
    assert!(session.abort().await);
    let result = stream.result().await;
    assert_eq!(result.status, SessionStatus::Aborted);
}

#[tokio::test]
async fn a_dropped_stream_does_not_stop_the_run() {
    let provider =
        Recording::new([FauxTurn::text("first part").with_delay_ms(2), FauxTurn::text("second")]);
    let agent = Agent::builder(provider).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    drop(agent.execute(&session, Input::text("go")).await.unwrap());
    for _ in 0..2000 {
        if session.status() != SessionStatus::Running {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(session.status(), SessionStatus::Completed);
    let Some(Message::Assistant(m)) = session.snapshot().messages.last().cloned() else { panic!() };
    assert_eq!(m.text(), "first part");
}

/// Panics in its first `before_model_call`.
struct PanicsOnce(AtomicBool);
impl AgentHooks for PanicsOnce {
    fn before_model_call<'a>(
        &'a self,
        _request: &'a mut ModelRequest,
    ) -> futures::future::BoxFuture<'a, ()> {
        Box::pin(async move {
            if !self.0.swap(true, Ordering::SeqCst) {
                panic!("hook bug");
            }
        })
    }
}

#[tokio::test]
async fn a_panicking_hook_ends_the_run_in_error_and_frees_the_session() {
    let provider = Recording::new([FauxTurn::text("fine now")]);
    let agent = Agent::builder(provider).hooks(PanicsOnce(AtomicBool::new(false))).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (_, result) = run(&agent, &session, Input::text("first")).await;
    assert_eq!(result.status, SessionStatus::Error);
    assert_eq!(result.error.as_deref(), Some("the run stopped unexpectedly: hook bug"));
    assert_eq!(
        result.outcome,
        RunOutcome::Failed {
            kind: FailureKind::Panic,
            message: "the run stopped unexpectedly: hook bug".into()
        }
    );
    assert_eq!(session.status(), SessionStatus::Error, "not left running");
    // The user's message was kept, and the session takes the next input.
    assert!(matches!(result.messages.first(), Some(Message::User(_))));
    let (_, result) = run(&agent, &session, Input::text("again")).await;
    assert_eq!(result.status, SessionStatus::Completed);
    assert_eq!(result.response().final_output, "fine now");
}

/// A handle is used only with the agent that made it: another agent (its own tools, store and
/// open sessions) refuses it with an error naming the session, and changes nothing.
#[tokio::test]
async fn a_session_handle_of_another_agent_is_refused() {
    let agent_a =
        Agent::builder(weft_llm::faux::FauxProvider::new(weft_llm::faux::FauxScript::new([
            FauxTurn::text("From A."),
        ])))
        .build()
        .unwrap();
    let agent_b =
        Agent::builder(weft_llm::faux::FauxProvider::new(weft_llm::faux::FauxScript::new([
            FauxTurn::text("From B."),
        ])))
        .build()
        .unwrap();
    let session = agent_a.create_session(SessionOptions::default()).await.unwrap();
    let id = session.id();
    let refused = agent_b.execute(&session, Input::text("hi")).await.err();
    assert_eq!(refused, Some(weft_agent::ExecuteError::ForeignSession(id.clone())));
    let refused = agent_b.fork_session(&session, weft_agent::ForkOptions::default()).await.err();
    assert_eq!(refused, Some(weft_agent::AgentError::ForeignSession(id.clone())));
    assert!(session.snapshot().messages.is_empty(), "nothing changed");
    // Its own agent runs it.
    let (_, result) = run(&agent_a, &session, Input::text("hi")).await;
    assert_eq!(result.status, SessionStatus::Completed);
    assert_eq!(session.snapshot().messages.len(), 2);
}
