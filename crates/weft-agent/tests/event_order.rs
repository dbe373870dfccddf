//! The event order of a run matches the agent plan's taxonomy, and deltas add up.

#![allow(clippy::unwrap_used)]

mod common;

use common::{Recording, kinds, plan_kinds, run};
use futures::StreamExt;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use weft_agent::{Agent, SessionOptions, tool_fn};
use weft_core::{AgentEvent, AssistantContent, Input, Message, SessionStatus};
use weft_llm::faux::FauxTurn;

#[derive(Deserialize, JsonSchema)]
struct City {
    city: String,
}

fn weather_agent(provider: Recording) -> Agent {
    Agent::builder(provider)
        .tool(tool_fn("get_weather", "Weather of a city", |a: City| async move {
            Ok::<_, String>(format!("Sunny in {}", a.city))
        }))
        .build()
        .unwrap()
}

/// Concatenated `text_delta`s, per content index, and the `text_end` texts.
fn texts(events: &[AgentEvent]) -> (Vec<String>, Vec<String>) {
    let (mut deltas, mut ends) = (Vec::<String>::new(), Vec::new());
    for e in events {
        match e {
            AgentEvent::TextStart { .. } => deltas.push(String::new()),
            AgentEvent::TextDelta { delta, .. } => deltas.last_mut().unwrap().push_str(delta),
            AgentEvent::TextEnd { text, .. } => ends.push(text.clone()),
            _ => {}
        }
    }
    (deltas, ends)
}

#[tokio::test]
async fn text_only_run() {
    let provider = Recording::new([FauxTurn::text("Hello there, traveller!")
        .with_thinking("The user greets me.")
        .with_chunk_size(3)
        .with_usage(12, 7)]);
    let agent = weather_agent(provider.clone());
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (events, result) = run(&agent, &session, Input::text("Hi")).await;

    let thinking_deltas = "The user greets me.".chars().count().div_ceil(3);
    let text_deltas = "Hello there, traveller!".chars().count().div_ceil(3);
    let mut expected = vec!["session_start", "message_start", "message_end", "message_start"];
    expected.push("thinking_start");
    expected.extend(std::iter::repeat_n("thinking_delta", thinking_deltas));
    expected.push("thinking_end");
    expected.push("text_start");
    expected.extend(std::iter::repeat_n("text_delta", text_deltas));
    expected.extend(["text_end", "message_end", "session_end"]);
    assert_eq!(plan_kinds(&events), expected);

    // The whole stream, nodes and steps included.
    let all = kinds(&events);
    assert_eq!(
        &all[..5],
        ["session_start", "message_start", "message_end", "node_enter", "step_start"]
    );
    // After each node run: the run's state, what the node changed, and a checkpoint.
    assert_eq!(
        &all[all.len() - 7..],
        [
            "message_end",
            "node_exit",
            "state_snapshot",
            "state_update",
            "checkpoint",
            "step_end",
            "session_end"
        ]
    );

    let (deltas, ends) = texts(&events);
    assert_eq!(deltas, ends);
    assert_eq!(ends, ["Hello there, traveller!"]);
    let thinking: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ThinkingDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(thinking, "The user greets me.");

    assert_eq!(result.status, SessionStatus::Completed);
    assert_eq!(result.messages.len(), 2, "the user message and the answer");
    let Message::Assistant(answer) = &result.messages[1] else { panic!("not an answer") };
    assert_eq!(answer.text(), "Hello there, traveller!");
    assert_eq!((answer.usage.input, answer.usage.output, answer.usage.total), (12, 7, 19));
    assert_eq!(result.usage.total, 19);
    // session_end carries the new messages.
    let Some(AgentEvent::SessionEnd { messages, status, .. }) = events.last() else {
        panic!("no session_end")
    };
    assert!(messages.iter().map(|m| &**m).eq(&result.messages));
    assert_eq!(*status, SessionStatus::Completed);
    assert_eq!(session.snapshot().messages, result.messages);
    assert_eq!(session.status(), SessionStatus::Completed);
}

#[tokio::test]
async fn one_tool_call_then_final_answer() {
    let provider = Recording::new([
        FauxTurn::text("Let me check.")
            .with_tool_call_id("c1", "get_weather", json!({"city": "Paris"}))
            .with_chunk_size(5),
        FauxTurn::text("It is sunny in Paris.").with_chunk_size(100),
    ]);
    let agent = weather_agent(provider.clone());
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (events, result) = run(&agent, &session, Input::text("Weather in Paris?")).await;

    let args_len = json!({"city": "Paris"}).to_string().len();
    let mut expected = vec![
        "session_start",
        "message_start",
        "message_end",
        "node_enter",
        "step_start",
        "message_start",
        "text_start",
        "text_delta",
        "text_delta",
        "text_delta",
        "text_end",
        "toolcall_start",
    ];
    expected.extend(std::iter::repeat_n("toolcall_delta", args_len.div_ceil(5)));
    expected.extend([
        "toolcall_end",
        "message_end",
        "node_exit",
        "state_snapshot",
        "state_update",
        "checkpoint",
        "node_enter",
        "tool_execution_start",
        "tool_execution_end",
        "node_exit",
        "state_snapshot",
        "state_update",
        "checkpoint",
        "node_enter",
        "message_start",
        "message_end",
        "node_exit",
        "state_snapshot",
        "state_update",
        "checkpoint",
        "step_end",
        "node_enter",
        "step_start",
        "message_start",
        "text_start",
        "text_delta",
        "text_end",
        "message_end",
        "node_exit",
        "state_snapshot",
        "state_update",
        "checkpoint",
        "step_end",
        "session_end",
    ]);
    assert_eq!(kinds(&events), expected);

    let nodes: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::NodeEnter { name, .. } => Some(name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(nodes, ["think", "act", "observe", "think"]);
    // Every node run is checkpointed, under its own id, with react's compact state.
    let checkpoints: Vec<(&str, &serde_json::Value)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::Checkpoint(taken) => {
                assert_eq!(taken.checkpoint_ns, "react");
                Some((taken.checkpoint_id.as_str(), &taken.state))
            }
            _ => None,
        })
        .collect();
    let ids: Vec<&str> = checkpoints.iter().map(|(id, _)| *id).collect();
    assert_eq!(ids, ["think-0", "act-0", "observe-0", "think-1"]);
    assert_eq!(
        checkpoints[0].1,
        &json!({"turns": 1, "message_count": 2, "step_count": 1,
                "pending": [{"id": "c1", "name": "get_weather", "state": "running"}]})
    );
    assert_eq!(checkpoints[3].1["message_count"], 4);
    // What each node changed.
    let updates: Vec<(&str, &serde_json::Value)> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::StateUpdate { name, state } => Some((name.as_str(), state)),
            _ => None,
        })
        .collect();
    assert_eq!(updates[1], ("act", &json!({"pending": []})), "the call ran");
    assert_eq!(updates[2], ("observe", &json!({"message_count": 3})), "its result joined");
    assert_eq!(updates[3].0, "think");
    assert_eq!(updates[3].1["turns"], 2);
    // Every model call is a step with its mode and node.
    let steps: Vec<&serde_json::Map<String, serde_json::Value>> = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::StepEnd { step } => Some(&step.annotations.extra),
            _ => None,
        })
        .collect();
    assert_eq!(steps.len(), 2);
    assert_eq!(steps[0]["mode"], "react");
    assert_eq!(steps[0]["node"], "think-0");
    assert_eq!(steps[1]["node"], "think-1");

    let args: String = events
        .iter()
        .filter_map(|e| match e {
            AgentEvent::ToolcallDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(serde_json::from_str::<serde_json::Value>(&args).unwrap(), json!({"city": "Paris"}));
    assert!(events.iter().any(|e| matches!(e,
        AgentEvent::ToolExecutionEnd { tool_call_id, output, is_error: false, .. }
            if tool_call_id == "c1" && output == "Sunny in Paris")));

    assert_eq!(result.status, SessionStatus::Completed);
    let roles: Vec<_> = result.messages.iter().map(Message::role).collect();
    use weft_core::Role::*;
    assert_eq!(roles, [User, Assistant, ToolResult, Assistant]);
    // The second model call saw the tool's result.
    let request = provider.last_request();
    let Some(Message::ToolResult(r)) = request.messages.last() else { panic!("no result sent") };
    assert_eq!((r.tool_call_id.as_str(), r.text_content().as_str()), ("c1", "Sunny in Paris"));
    assert!(!r.is_error);
    // The first model call was told about the tool.
    assert_eq!(request.tools[0].name, "get_weather");
    let Message::Assistant(first) = &result.messages[1] else { panic!() };
    assert!(
        matches!(&first.content[1], AssistantContent::ToolCall(c) if c.arguments == json!({"city": "Paris"}).into())
    );
}

#[tokio::test]
async fn sequence_numbers_are_monotonic_over_the_sessions_life() {
    use futures::StreamExt;
    let provider = Recording::new([FauxTurn::text("one"), FauxTurn::text("two")]);
    let agent = weather_agent(provider);
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let mut seqs = Vec::new();
    for prompt in ["a", "b"] {
        let mut stream = agent.execute(&session, Input::text(prompt)).await.unwrap().sequenced();
        while let Some((seq, _)) = stream.next().await {
            seqs.push(seq);
        }
    }
    assert_eq!(seqs[0], 1);
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    assert_eq!(session.snapshot().last_event_seq, *seqs.last().unwrap());
}

/// Without a store the hub keeps every event of the run: once a run has kept many, a burst of
/// deltas (a model faster than the run publishes) is merged before numbering, as when a store
/// lags. Every character still arrives once, in order, and a watcher that starts over from the
/// first event sees the same merged deltas, numbered without a gap.
#[tokio::test]
async fn a_long_burst_without_a_store_keeps_every_character_in_fewer_events() {
    const DELTAS: usize = 40_000;
    let text: String = (0..DELTAS).map(|i| char::from(b'a' + (i % 26) as u8)).collect();
    let provider = Recording::new([FauxTurn::text(text.clone()).with_chunk_size(1)]);
    let agent = weather_agent(provider);
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (events, result) = run(&agent, &session, Input::text("Say a lot.")).await;
    assert_eq!(result.status, SessionStatus::Completed);

    let (deltas, ends) = texts(&events);
    assert_eq!(deltas, std::slice::from_ref(&text));
    assert_eq!(ends, [text]);
    let delta_events = events.iter().filter(|e| matches!(e, AgentEvent::TextDelta { .. })).count();
    assert!(
        delta_events < DELTAS - 16 * 1024,
        "the deltas past the first 16,384 events were merged: {delta_events} delta events"
    );

    let replayed: Vec<_> = session.subscribe(0).collect().await;
    let seqs: Vec<u64> = replayed.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    let replayed_events: Vec<AgentEvent> = replayed.iter().map(|r| r.event.clone()).collect();
    assert_eq!(replayed_events, events);
}
