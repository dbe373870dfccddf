//! `[tools.NAME]` policy and the configured tool set, through an agent's runs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use weft_agent::{Agent, SessionOptions};
use weft_core::{Input, Message, SessionStatus, UserContent};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_tools::{Approval, ToolPolicy, ToolsConfig, configured};

fn shell_config(policy: Option<ToolPolicy>) -> ToolsConfig {
    let mut config = ToolsConfig::default();
    config.builtins.tools = vec!["shell".into(), "calculator".into()];
    if let Some(policy) = policy {
        config.tools.insert("shell".into(), policy);
    }
    config
}

fn script() -> FauxProvider {
    FauxProvider::new(FauxScript::new([
        FauxTurn::tool_call(
            "shell",
            json!({"command": "printf 'abcdefghijklmnopqrstuvwxyz%.0s' 1 2 3 4"}),
        ),
        FauxTurn::text("done"),
    ]))
}

/// The tool result's text in a run's new messages.
fn result_text(messages: &[Message]) -> String {
    messages
        .iter()
        .find_map(|m| match m {
            Message::ToolResult(r) => Some(
                r.content
                    .iter()
                    .map(|c| match c {
                        UserContent::Text(t) => t.text.clone(),
                        UserContent::Image(_) => String::new(),
                    })
                    .collect::<String>(),
            ),
            _ => None,
        })
        .expect("a tool result")
}

#[tokio::test]
async fn shell_waits_for_approval_unless_configured_otherwise() {
    let tools = configured(&shell_config(None)).await.unwrap();
    let agent = tools.apply(Agent::builder(script())).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (_, result) = agent.respond(&session, Input::text("run it")).await.unwrap();
    assert_eq!(result.status, SessionStatus::AwaitingApproval);
    assert_eq!(result.pending_approvals.len(), 1);
    assert_eq!(result.pending_approvals[0].name, "shell");
}

#[tokio::test]
async fn policy_lifts_approval_and_cuts_output_at_its_limit() {
    let policy =
        ToolPolicy { approval: Approval::Never, max_output: Some(30), ..Default::default() };
    let tools = configured(&shell_config(Some(policy))).await.unwrap();
    let agent = tools.apply(Agent::builder(script())).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let (_, result) = agent.respond(&session, Input::text("run it")).await.unwrap();
    assert_eq!(result.status, SessionStatus::Completed);
    let text = result_text(&result.messages);
    assert_eq!(
        text,
        format!("abcdefghijklmnopqrstuvwxyzabcd{}", weft_agent::tool::truncation_note(30))
    );
}

#[tokio::test]
async fn a_disabled_tool_is_not_offered_and_a_name_clash_is_refused() {
    let mut config = shell_config(Some(ToolPolicy { enabled: Some(false), ..Default::default() }));
    config.builtins.tools.push("current_time".into());
    let tools = configured(&config).await.unwrap();
    let agent = tools.apply(Agent::builder(script())).build().unwrap();
    let names: Vec<String> = agent.tool_specs().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["calculator", "current_time"]);
    // The agent's own tool of the same name as a built-in one: refused, naming both sources.
    let own = weft_agent::tool_fn("calculator", "Mine", |_: serde_json::Value| async move {
        Ok::<_, String>("0".to_string())
    });
    let error = tools.apply(Agent::builder(script()).tool(own)).build().err().expect("a clash");
    assert!(
        error.to_string().starts_with("tool \"calculator\" is supplied by both agent and builtin"),
        "{error}"
    );
}

/// A tool learns whose call it runs: the session, the run and the owner.
#[tokio::test]
async fn a_tool_sees_its_session_run_and_owner() {
    use futures::StreamExt;
    use weft_core::AgentEvent;

    let whoami = weft_agent::streaming_tool_fn(
        "whoami",
        "Says whose call this is",
        |_: serde_json::Value, sink: weft_agent::ToolOutputSink| async move {
            let ctx = sink.context();
            Ok::<_, String>(format!(
                "{} {} {}",
                ctx.session_id,
                ctx.run_id,
                ctx.owner_id.clone().unwrap_or_default()
            ))
        },
    );
    let provider = FauxProvider::new(FauxScript::new([
        FauxTurn::tool_call("whoami", json!({})),
        FauxTurn::text("ok"),
    ]));
    let agent = Agent::builder(provider).tool(whoami).build().unwrap();
    let options = SessionOptions { owner: Some("alice".into()), ..Default::default() };
    let session = agent.create_session(options).await.unwrap();
    let mut stream = agent.execute(&session, Input::text("who?")).await.unwrap();
    let (mut run_id, mut output) = (String::new(), String::new());
    while let Some(event) = stream.next().await {
        match event {
            AgentEvent::SessionStart { run_id: id, .. } => run_id = id,
            AgentEvent::ToolExecutionEnd { output: out, .. } => output = out,
            _ => {}
        }
    }
    assert!(!run_id.is_empty());
    assert_eq!(output, format!("{} {run_id} alice", session.id()));
}
