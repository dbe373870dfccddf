//! A tool that needs a human's approval before each call.
//!
//! `send_email` is a local tool marked `.with_approval()`. When the model calls it, the run
//! suspends with status `awaiting_approval` instead of running it, and waits for a decision:
//!
//! 1. run 1: the model wants to email the whole team; the run suspends;
//! 2. the user DENIES it, with a reason. Run 2 resumes: the model sees the denial as an error
//!    result ("Tool call denied by the user: ..."), and asks again with a different recipient;
//!    the run suspends again;
//! 3. the user APPROVES the new call. Run 3 resumes: the tool runs, the model answers.
//!
//! Run it with `cargo run -p weft-examples --example approval`.

use std::sync::{Arc, Mutex, PoisonError};

use anyhow::{Context, ensure};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use weft_agent::{Agent, SessionOptions, tool_fn};
use weft_core::{AgentEvent, ApprovalDecision, Input, Message, SessionStatus};
use weft_examples::{print_summary, run_printed};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};

/// The tool's arguments (its JSON Schema is derived from this type).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
struct Email {
    /// The recipient's address.
    to: String,
    /// The subject line.
    subject: String,
    /// The message.
    body: String,
}

const ANSWER: &str = "Done: the Q3 summary went to alice@example.com only.";

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let email = |to: &str| json!({ "to": to, "subject": "Q3 summary", "body": "Revenue is up 12%. Details inside." });
    let script = FauxScript::new([
        FauxTurn::text("I'll send the summary to the team.")
            .with_tool_call("send_email", email("team@example.com"))
            .with_chunk_size(12)
            .with_delay_ms(3)
            .with_usage(150, 40),
        FauxTurn::text("Understood, only Alice then.")
            .with_tool_call("send_email", email("alice@example.com"))
            .with_chunk_size(12)
            .with_delay_ms(3)
            .with_usage(215, 41),
        FauxTurn::text(ANSWER).with_chunk_size(8).with_delay_ms(3).with_usage(270, 14),
    ]);

    // The tool "sends" by appending to an outbox, so the program can check what was sent.
    let outbox: Arc<Mutex<Vec<Email>>> = Arc::default();
    let sent = outbox.clone();
    let send_email = tool_fn("send_email", "Sends an email", move |email: Email| {
        let sent = sent.clone();
        async move {
            let line =
                format!("sent {:?} to {} ({} chars)", email.subject, email.to, email.body.len());
            sent.lock().unwrap_or_else(PoisonError::into_inner).push(email);
            Ok::<_, String>(line)
        }
    })
    // Every call waits for a decision. (`AgentBuilder::approval_policy` can instead pick the
    // calls that need one, e.g. by their arguments.)
    .with_approval();

    let agent = Agent::builder(FauxProvider::new(script)).tool(send_email).build()?;
    let session = agent.create_session(SessionOptions::default()).await?;
    let outbox_len = || outbox.lock().unwrap_or_else(PoisonError::into_inner).len();

    // Run 1: the model calls the tool; the run suspends before running it.
    println!("# run 1");
    let input = Input::text("Email the Q3 summary to Alice.");
    let (_, result) = run_printed(agent.execute(&session, input).await?).await?;
    println!("run 1 status: {}\n", result.status);
    ensure!(result.status == SessionStatus::AwaitingApproval, "run 1 status: {}", result.status);
    ensure!(outbox_len() == 0, "the tool ran without approval");
    let call = result.pending_approvals.first().context("no call awaits approval")?;
    ensure!(call.arguments["to"] == "team@example.com");

    // The user says no, and why: the reason is what the model reads.
    let reason = "Send it to Alice only, not the whole team.";
    println!("user DENIES {} [{}]: {reason}\n", call.name, call.id);
    let deny = Input::Approvals { approvals: vec![ApprovalDecision::deny(&call.id, reason)] };

    // Run 2: the denial is an error result; the model tries again and the run suspends again.
    println!("# run 2");
    let (events, result) = run_printed(agent.execute(&session, deny).await?).await?;
    println!("run 2 status: {}\n", result.status);
    ensure!(result.status == SessionStatus::AwaitingApproval, "run 2 status: {}", result.status);
    ensure!(outbox_len() == 0, "a denied call ran");
    let denial_seen = events.iter().any(|e| match e {
        AgentEvent::MessageEnd { message } => matches!(
            message.as_ref(),
            Message::ToolResult(r) if r.is_error && r.text_content().ends_with(reason)
        ),
        _ => false,
    });
    ensure!(denial_seen, "the model was not given the denial");
    let call = result.pending_approvals.first().context("no second call awaits approval")?;
    ensure!(call.arguments["to"] == "alice@example.com");

    // This one is fine.
    println!("user APPROVES {} [{}]\n", call.name, call.id);
    let approve = Input::Approvals { approvals: vec![ApprovalDecision::approve(&call.id)] };

    // Run 3: the approved call runs; the model answers.
    println!("# run 3");
    let (_, result) = run_printed(agent.execute(&session, approve).await?).await?;
    println!("run 3 status: {}\n", result.status);
    print_summary(&result)?;

    ensure!(result.status == SessionStatus::Completed, "run 3 status: {}", result.status);
    let recipients: Vec<String> = outbox
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .iter()
        .map(|e| e.to.clone())
        .collect();
    ensure!(recipients == ["alice@example.com"], "sent to {recipients:?}");
    ensure!(result.response().final_output == ANSWER, "unexpected final output");
    Ok(())
}
