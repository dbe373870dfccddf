#![allow(clippy::unwrap_used)]
use serde_json::json;
use std::sync::Arc;
use weft_core::{
    AgentEvent, AgentStep, AssistantContent, AssistantMessage, Message, ModeProgress, Role,
    SessionStatus, StepAnnotations, StopReason, TextContent, ThinkingContent, ToolCall,
    ToolExecutionResult, ToolResultMessage, Usage, UserMessage,
};

/// The fixed clock of the fixtures.
pub(crate) const T0: u64 = 1_700_000_000_000;

pub(crate) fn call(id: &str, name: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall { id: id.into(), name: name.into(), arguments: arguments.into() }
}

pub(crate) fn text(t: &str) -> AssistantContent {
    AssistantContent::Text(TextContent { text: t.into() })
}

pub(crate) fn thinking(t: &str, signature: Option<&str>) -> AssistantContent {
    AssistantContent::Thinking(ThinkingContent {
        thinking: t.into(),
        signature: signature.map(Into::into),
    })
}

pub(crate) fn assistant(content: Vec<AssistantContent>, stop: StopReason) -> AssistantMessage {
    AssistantMessage {
        content,
        stop_reason: stop,
        error_message: None,
        usage: Usage::new(10, 5, 0, 0),
        cost: None,
        provider: "faux".into(),
        model: "faux-1".into(),
        timestamp: T0,
    }
}

pub(crate) fn result(c: &ToolCall, output: &str, is_error: bool) -> ToolResultMessage {
    let mut r = ToolResultMessage::new(c.id.clone(), c.name.clone(), output, is_error);
    r.timestamp = T0;
    r
}

pub(crate) fn execution(c: &ToolCall, output: &str, is_error: bool) -> ToolExecutionResult {
    ToolExecutionResult {
        call: c.clone(),
        output: output.into(),
        error: is_error.then(|| output.to_string()),
        details: None,
        started_at: T0 + 100,
        latency_ms: 7,
    }
}

pub(crate) fn step(
    id: &str,
    index: u32,
    message: &AssistantMessage,
    results: Vec<ToolExecutionResult>,
) -> AgentStep {
    AgentStep {
        step_id: id.into(),
        step_index: index,
        timestamp: T0,
        llm_response: message.clone(),
        latency_ms: 42,
        tool_results: results,
        annotations: StepAnnotations::default(),
    }
}

/// A run's opening: `session_start` and, for a new run, the user's message.
pub(crate) fn start(out: &mut Vec<AgentEvent>, user: Option<&str>) {
    out.push(AgentEvent::SessionStart {
        session_id: "s1".into(),
        run_id: "r1".into(),
        agent: "react".into(),
        recovers: None,
    });
    if let Some(user) = user {
        let mut m = UserMessage::text(user);
        m.timestamp = T0;
        out.push(AgentEvent::MessageStart { role: Role::User });
        out.push(AgentEvent::MessageEnd { message: Arc::new(Message::User(m)) });
    }
}

/// One model call, streamed block by block (text and thinking in two deltas, arguments in
/// two deltas), with the `error` event of a failed call.
pub(crate) fn model_call(
    out: &mut Vec<AgentEvent>,
    step_id: &str,
    index: u32,
    message: &AssistantMessage,
) {
    out.push(AgentEvent::NodeEnter { name: "think".into(), node_id: format!("think-{index}") });
    out.push(AgentEvent::StepStart { step_id: step_id.into(), step_index: index });
    out.push(AgentEvent::MessageStart { role: Role::Assistant });
    for (i, block) in message.content.iter().enumerate() {
        let i = i as u32;
        match block {
            AssistantContent::Text(t) => {
                out.push(AgentEvent::TextStart { index: i });
                for part in halves(&t.text) {
                    out.push(AgentEvent::TextDelta { index: i, delta: part });
                }
                out.push(AgentEvent::TextEnd { index: i, text: t.text.clone() });
            }
            AssistantContent::Thinking(t) => {
                out.push(AgentEvent::ThinkingStart { index: i });
                for part in halves(&t.thinking) {
                    out.push(AgentEvent::ThinkingDelta { index: i, delta: part });
                }
                out.push(AgentEvent::ThinkingEnd {
                    index: i,
                    thinking: t.thinking.clone(),
                    signature: t.signature.clone(),
                });
            }
            AssistantContent::ToolCall(c) => {
                out.push(AgentEvent::ToolcallStart {
                    index: i,
                    id: c.id.clone(),
                    name: c.name.clone(),
                });
                for part in halves(&c.arguments.to_string()) {
                    out.push(AgentEvent::ToolcallDelta { index: i, delta: part });
                }
                out.push(AgentEvent::ToolcallEnd { index: i, tool_call: c.clone() });
            }
        }
    }
    out.push(AgentEvent::MessageEnd { message: Arc::new(Message::Assistant(message.clone())) });
    let failure = message.stop_reason.is_failure().then(|| message.failure_text().to_string());
    if let Some(error) = &failure {
        out.push(AgentEvent::Error {
            error: error.clone(),
            message: Some(Arc::new(Message::Assistant(message.clone()))),
        });
    }
    out.push(AgentEvent::NodeExit {
        name: "think".into(),
        node_id: format!("think-{index}"),
        error: failure,
    });
}

/// One local execution: start, its output in deltas, end.
pub(crate) fn execute(
    out: &mut Vec<AgentEvent>,
    c: &ToolCall,
    deltas: &[&str],
    output: &str,
    is_error: bool,
) {
    out.push(AgentEvent::ToolExecutionStart {
        tool_call_id: c.id.clone(),
        tool_name: c.name.clone(),
        args: c.arguments.clone(),
    });
    for d in deltas {
        out.push(AgentEvent::ToolExecutionDelta { tool_call_id: c.id.clone(), delta: (*d).into() });
    }
    out.push(AgentEvent::ToolExecutionEnd {
        tool_call_id: c.id.clone(),
        tool_name: c.name.clone(),
        output: output.into(),
        details: None,
        is_error,
    });
}

/// A step's end: the observe node with its results (in the model's order), then `step_end`.
pub(crate) fn end_step(out: &mut Vec<AgentEvent>, step: AgentStep, results: &[ToolResultMessage]) {
    if !results.is_empty() {
        let node_id = format!("observe-{}", step.step_index);
        out.push(AgentEvent::NodeEnter { name: "observe".into(), node_id: node_id.clone() });
        for r in results {
            out.push(AgentEvent::MessageStart { role: Role::ToolResult });
            out.push(AgentEvent::MessageEnd { message: Arc::new(Message::ToolResult(r.clone())) });
        }
        out.push(AgentEvent::NodeExit { name: "observe".into(), node_id, error: None });
    }
    out.push(AgentEvent::StepEnd { step: Arc::new(step) });
}

pub(crate) fn end(out: &mut Vec<AgentEvent>, status: SessionStatus, messages: Vec<Message>) {
    out.push(AgentEvent::SessionEnd {
        session_id: "s1".into(),
        status,
        messages: messages.into_iter().map(Arc::new).collect(),
        usage: Box::default(),
        cost: Box::default(),
    });
}

fn halves(s: &str) -> Vec<String> {
    let mid = s.char_indices().nth(s.chars().count() / 2).map_or(s.len(), |(i, _)| i);
    let (a, b) = s.split_at(mid);
    [a, b].into_iter().filter(|p| !p.is_empty()).map(String::from).collect()
}

/// Thinking, then text: one step, completed.
pub(crate) fn text_and_thinking() -> Vec<AgentEvent> {
    let mut ev = Vec::new();
    start(&mut ev, Some("hi"));
    let m = assistant(vec![thinking("Greet them.", Some("sig")), text("Hello!")], StopReason::Stop);
    model_call(&mut ev, "st0", 0, &m);
    end_step(&mut ev, step("st0", 0, &m, vec![]), &[]);
    end(&mut ev, SessionStatus::Completed, vec![Message::Assistant(m)]);
    ev
}

/// Two steps: the first calls a streaming local tool, a failing one and an unknown one
/// (answered without running); the second answers.
pub(crate) fn tools_two_steps() -> Vec<AgentEvent> {
    let mut ev = Vec::new();
    start(&mut ev, Some("weather?"));
    let echo = call("c1", "echo", json!({"text": "Paris \"sunny\""}));
    let fail = call("c2", "fail", json!({}));
    let unknown = call("c3", "nope", json!({"x": 1}));
    let m0 = assistant(
        vec![
            text("Let me check."),
            AssistantContent::ToolCall(echo.clone()),
            AssistantContent::ToolCall(fail.clone()),
            AssistantContent::ToolCall(unknown.clone()),
        ],
        StopReason::ToolUse,
    );
    model_call(&mut ev, "st0", 0, &m0);
    ev.push(AgentEvent::NodeEnter { name: "act".into(), node_id: "act-0".into() });
    execute(&mut ev, &echo, &["Paris ", "\"sunny\""], "Paris \"sunny\"", false);
    execute(&mut ev, &fail, &[], "failed on {}", true);
    ev.push(AgentEvent::NodeExit { name: "act".into(), node_id: "act-0".into(), error: None });
    let results = [
        result(&echo, "Paris \"sunny\"", false),
        result(&fail, "failed on {}", true),
        result(&unknown, "Tool nope not found", true),
    ];
    let executions = vec![
        execution(&echo, "Paris \"sunny\"", false),
        execution(&fail, "failed on {}", true),
        execution(&unknown, "Tool nope not found", true),
    ];
    end_step(&mut ev, step("st0", 0, &m0, executions), &results);
    let m1 = assistant(vec![text("Sunny in Paris.")], StopReason::Stop);
    model_call(&mut ev, "st1", 1, &m1);
    end_step(&mut ev, step("st1", 1, &m1, vec![]), &[]);
    let mut messages = vec![Message::Assistant(m0)];
    messages.extend(results.into_iter().map(Message::ToolResult));
    messages.push(Message::Assistant(m1));
    end(&mut ev, SessionStatus::Completed, messages);
    ev
}

/// A remote call suspends the run; a second run resumes it with the client's result.
pub(crate) fn remote_suspend_and_resume() -> Vec<AgentEvent> {
    let mut ev = Vec::new();
    start(&mut ev, Some("click it"));
    let click = call("r1", "browser_click", json!({"selector": "#go"}));
    let m0 = assistant(vec![AssistantContent::ToolCall(click.clone())], StopReason::ToolUse);
    model_call(&mut ev, "st0", 0, &m0);
    ev.push(AgentEvent::AwaitingToolExecution {
        session_id: "s1".into(),
        tool_calls: vec![click.clone()],
    });
    end(&mut ev, SessionStatus::AwaitingToolExecution, vec![Message::Assistant(m0.clone())]);
    // The resumed run: the step being completed, then the next model call.
    start(&mut ev, None);
    let r = result(&click, "clicked", false);
    end_step(
        &mut ev,
        step("st0", 0, &m0, vec![execution(&click, "clicked", false)]),
        std::slice::from_ref(&r),
    );
    let m1 = assistant(vec![text("Done.")], StopReason::Stop);
    model_call(&mut ev, "st1", 1, &m1);
    end_step(&mut ev, step("st1", 1, &m1, vec![]), &[]);
    end(&mut ev, SessionStatus::Completed, vec![Message::ToolResult(r), Message::Assistant(m1)]);
    ev
}

/// Only the first run of [`remote_suspend_and_resume`]: it ends suspended.
pub(crate) fn remote_suspended() -> Vec<AgentEvent> {
    let events = remote_suspend_and_resume();
    let end = events.iter().position(|e| matches!(e, AgentEvent::SessionEnd { .. })).unwrap();
    events[..=end].to_vec()
}

/// Two calls need approval; the run suspends; a second run resumes it with one approved
/// (it runs) and one denied (an error result that never ran).
pub(crate) fn approval_and_denial() -> Vec<AgentEvent> {
    let mut ev = Vec::new();
    start(&mut ev, Some("clean up"));
    let del = call("a1", "delete", json!({"path": "/tmp/x"}));
    let wipe = call("a2", "wipe", json!({}));
    let m0 = assistant(
        vec![AssistantContent::ToolCall(del.clone()), AssistantContent::ToolCall(wipe.clone())],
        StopReason::ToolUse,
    );
    model_call(&mut ev, "st0", 0, &m0);
    ev.push(AgentEvent::ApprovalRequired {
        session_id: "s1".into(),
        tool_calls: vec![del.clone(), wipe.clone()],
    });
    end(&mut ev, SessionStatus::AwaitingApproval, vec![Message::Assistant(m0.clone())]);
    start(&mut ev, None);
    ev.push(AgentEvent::NodeEnter { name: "act".into(), node_id: "act-0".into() });
    execute(&mut ev, &del, &[], "deleted", false);
    ev.push(AgentEvent::NodeExit { name: "act".into(), node_id: "act-0".into(), error: None });
    let denied = "Tool call denied by the user: not now";
    let results = [result(&del, "deleted", false), result(&wipe, denied, true)];
    let executions = vec![execution(&del, "deleted", false), execution(&wipe, denied, true)];
    end_step(&mut ev, step("st0", 0, &m0, executions), &results);
    let m1 = assistant(vec![text("Deleted; not wiped.")], StopReason::Stop);
    model_call(&mut ev, "st1", 1, &m1);
    end_step(&mut ev, step("st1", 1, &m1, vec![]), &[]);
    end(&mut ev, SessionStatus::Completed, vec![]);
    ev
}

/// The provider fails mid-text: the partial is kept, the step fails, the run ends `error`.
pub(crate) fn provider_error() -> Vec<AgentEvent> {
    let mut ev = Vec::new();
    start(&mut ev, Some("hi"));
    let mut m = assistant(vec![text("Hel")], StopReason::Error);
    m.error_message = Some("429 rate limited".into());
    model_call(&mut ev, "st0", 0, &m);
    end_step(&mut ev, step("st0", 0, &m, vec![]), &[]);
    end(&mut ev, SessionStatus::Error, vec![Message::Assistant(m)]);
    ev
}

/// Tree-of-thought progress, state and a checkpoint around a one-step answer.
pub(crate) fn tot_with_extras() -> Vec<AgentEvent> {
    let mut ev = Vec::new();
    start(&mut ev, Some("plan"));
    ev.push(AgentEvent::Progress(ModeProgress::TotExpand {
        candidates: vec!["a".into(), "b".into()],
    }));
    ev.push(AgentEvent::Progress(ModeProgress::TotEvaluate {
        chosen: 1,
        scores: vec![0.2, 0.9],
        rule_based: false,
    }));
    ev.push(AgentEvent::StateUpdate { name: "think".into(), state: json!({"depth": 1}) });
    ev.push(AgentEvent::Checkpoint(Box::new(weft_core::CheckpointTaken {
        checkpoint_id: "k1".into(),
        thread_id: "s1".into(),
        checkpoint_ns: "".into(),
        step: 0,
        timestamp: T0,
        state: json!({}),
    })));
    let m = assistant(vec![text("b it is")], StopReason::Stop);
    model_call(&mut ev, "st0", 0, &m);
    end_step(&mut ev, step("st0", 0, &m, vec![]), &[]);
    ev.push(AgentEvent::Custom { value: json!({"kind": "note"}) });
    end(&mut ev, SessionStatus::Completed, vec![]);
    ev
}

/// Every fixture, named.
pub(crate) fn all() -> Vec<(&'static str, Vec<AgentEvent>)> {
    let every: Vec<AgentEvent> = [
        text_and_thinking(),
        tools_two_steps(),
        remote_suspend_and_resume(),
        approval_and_denial(),
        provider_error(),
        tot_with_extras(),
    ]
    .concat();
    vec![
        ("text_and_thinking", text_and_thinking()),
        ("tools_two_steps", tools_two_steps()),
        ("remote_suspend_and_resume", remote_suspend_and_resume()),
        ("remote_suspended", remote_suspended()),
        ("approval_and_denial", approval_and_denial()),
        ("approval_pending", {
            let events = approval_and_denial();
            let end =
                events.iter().position(|e| matches!(e, AgentEvent::SessionEnd { .. })).unwrap();
            events[..=end].to_vec()
        }),
        ("provider_error", provider_error()),
        ("tot_with_extras", tot_with_extras()),
        ("all_in_one_stream", every),
    ]
}

/// One event of every variant (for tag and coverage checks).
pub(crate) fn one_of_each() -> Vec<AgentEvent> {
    let c = call("c", "t", json!({}));
    let m = assistant(vec![], StopReason::Stop);
    vec![
        AgentEvent::SessionStart {
            session_id: "s".into(),
            run_id: "r".into(),
            agent: "react".into(),
            recovers: None,
        },
        AgentEvent::SessionEnd {
            session_id: "s".into(),
            status: SessionStatus::Completed,
            messages: vec![],
            usage: Box::default(),
            cost: Box::default(),
        },
        AgentEvent::AwaitingToolExecution { session_id: "s".into(), tool_calls: vec![c.clone()] },
        AgentEvent::ApprovalRequired { session_id: "s".into(), tool_calls: vec![c.clone()] },
        AgentEvent::NodeEnter { name: "think".into(), node_id: "n".into() },
        AgentEvent::NodeExit { name: "think".into(), node_id: "n".into(), error: None },
        AgentEvent::StepStart { step_id: "st".into(), step_index: 0 },
        AgentEvent::StepEnd { step: Arc::new(step("st", 0, &m, vec![])) },
        AgentEvent::MessageStart { role: Role::Assistant },
        AgentEvent::MessageEnd { message: Arc::new(Message::Assistant(m.clone())) },
        AgentEvent::TextStart { index: 0 },
        AgentEvent::TextDelta { index: 0, delta: "a".into() },
        AgentEvent::TextEnd { index: 0, text: "a".into() },
        AgentEvent::ThinkingStart { index: 0 },
        AgentEvent::ThinkingDelta { index: 0, delta: "b".into() },
        AgentEvent::ThinkingEnd { index: 0, thinking: "b".into(), signature: None },
        AgentEvent::ToolcallStart { index: 0, id: "c".into(), name: "t".into() },
        AgentEvent::ToolcallDelta { index: 0, delta: "{}".into() },
        AgentEvent::ToolcallEnd { index: 0, tool_call: c.clone() },
        AgentEvent::ToolExecutionStart {
            tool_call_id: "c".into(),
            tool_name: "t".into(),
            args: json!({}).into(),
        },
        AgentEvent::ToolExecutionDelta { tool_call_id: "c".into(), delta: "o".into() },
        AgentEvent::ToolExecutionEnd {
            tool_call_id: "c".into(),
            tool_name: "t".into(),
            output: "o".into(),
            details: None,
            is_error: false,
        },
        AgentEvent::StateSnapshot { state: json!({}) },
        AgentEvent::StateUpdate { name: "n".into(), state: json!({}) },
        AgentEvent::Checkpoint(Box::new(weft_core::CheckpointTaken {
            checkpoint_id: "k".into(),
            thread_id: "s".into(),
            checkpoint_ns: "".into(),
            step: 0,
            timestamp: 0,
            state: json!({}),
        })),
        AgentEvent::Progress(ModeProgress::TotExpand { candidates: vec![] }),
        AgentEvent::Progress(ModeProgress::TotEvaluate {
            chosen: 0,
            scores: vec![],
            rule_based: false,
        }),
        AgentEvent::Progress(ModeProgress::TotBacktrack { reason: "r".into(), to_depth: 0 }),
        AgentEvent::Progress(ModeProgress::GotPlan {
            node_count: 0,
            edge_count: 0,
            node_ids: vec![],
        }),
        AgentEvent::Progress(ModeProgress::GotNodeStart { id: "g".into() }),
        AgentEvent::Progress(ModeProgress::GotNodeComplete {
            id: "g".into(),
            result_summary: "ok".into(),
        }),
        AgentEvent::Progress(ModeProgress::GotNodeFailed { id: "g".into(), error: "e".into() }),
        AgentEvent::Progress(ModeProgress::GotExpand {
            node_id: "g".into(),
            nodes_added: 0,
            edges_added: 0,
        }),
        AgentEvent::Custom { value: json!(1) },
        AgentEvent::Error { error: "e".into(), message: None },
    ]
}
