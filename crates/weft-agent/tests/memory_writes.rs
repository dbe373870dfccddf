//! The memory store takes a paced stream's events at once, in the publishing thread
//! (`SessionStore::append_events_now`): its log is the same, and a refusal there is dealt with
//! as a refusal of the persister's write is.

#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::Recording;
use futures::StreamExt;
use weft_agent::{Agent, RunOutcome, SessionOptions};
use weft_core::{AgentEvent, Input, OwnerScope, SessionStore};
use weft_llm::faux::FauxTurn;
use weft_store::MemoryStore;

fn prose(len: usize) -> String {
    "the quick brown fox jumps over the lazy dog ".chars().cycle().take(len).collect()
}

/// A paced answer is stored as it streams: what the store gives back from any seq is what the
/// watcher was shown, every delta its own record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paced_stream_is_stored_as_shown() {
    let store = Arc::new(MemoryStore::new());
    let text = prose(400);
    let provider =
        Recording::new([FauxTurn::text(text.clone()).with_chunk_size(8).with_delay_ms(1)]);
    let agent = Agent::builder(provider).store(store.clone()).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let mut records = agent.execute(&session, Input::text("go on")).await.unwrap().records();
    let mut shown = Vec::new();
    while let Some(record) = records.next().await {
        shown.push(record);
    }
    assert!(records.result().await.outcome.is_durable());

    let deltas: String = shown
        .iter()
        .filter_map(|r| match &r.event {
            AgentEvent::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas, text);
    let json = |r: &Arc<weft_core::EventRecord>| serde_json::to_string(r).unwrap();
    for from in [0, shown[0].seq, shown[shown.len() / 2].seq] {
        let stored = store.read_events(&session.id(), from, usize::MAX).await.unwrap();
        let want: Vec<_> = shown.iter().filter(|r| r.seq > from).map(json).collect();
        assert_eq!(stored.iter().map(json).collect::<Vec<_>>(), want, "from {from}");
    }
}

/// The session is deleted while the model streams (another agent on the same store): the
/// store refuses the writes made at once and the run's end; the run ends (no writer waits
/// forever), says it is not durable and names the session. (Which refusal tells the run, the
/// first write's or the end's, is not observable here: either is right.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusal_of_a_write_made_at_once_ends_the_run_not_durable() {
    let store = MemoryStore::new();
    let provider =
        Recording::new([FauxTurn::text(prose(2_000)).with_chunk_size(8).with_delay_ms(5)]);
    let agent = Agent::builder(provider).store(Arc::new(store.clone())).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let id = session.id();
    let mut stream = agent.execute(&session, Input::text("go on")).await.unwrap();
    let mut deltas = 0;
    while let Some(event) = stream.next().await {
        if matches!(event, AgentEvent::TextDelta { .. }) {
            deltas += 1;
            if deltas == 10 {
                break;
            }
        }
    }
    let other = Agent::builder(Recording::new([])).store(Arc::new(store.clone())).build().unwrap();
    assert!(other.delete_session(&id, OwnerScope::Any).await.unwrap());

    let result =
        tokio::time::timeout(Duration::from_secs(30), stream.result()).await.expect("the run ends");
    let message = match &result.outcome {
        RunOutcome::Failed { kind: weft_agent::FailureKind::Store, message }
        | RunOutcome::EndNotDurable { message, .. } => message,
        _ => panic!("the run does not say its events were refused: {result:?}"),
    };
    assert!(!result.outcome.is_durable());
    assert!(message.contains(&id), "{message}");
}
