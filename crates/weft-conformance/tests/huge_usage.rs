//! Token counts are a provider's numbers: absurd ones saturate in every layer and every wire
//! format instead of panicking the run or the encoder.

#![allow(clippy::unwrap_used)]

use futures::StreamExt;
use weft_agent::{Agent, SessionOptions};
use weft_core::{AgentEvent, Input, SessionStatus};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_protocol::{Protocol, encode};

#[tokio::test]
async fn usage_near_u64_max_saturates_through_the_run_and_every_format() {
    let script = FauxScript::new([
        FauxTurn::tool_call("missing_tool", serde_json::json!({})).with_usage(u64::MAX - 1, 7),
        FauxTurn::text("done").with_usage(u64::MAX, u64::MAX),
    ]);
    let agent = Agent::builder(FauxProvider::new(script)).build().unwrap();
    let session = agent.create_session(SessionOptions::default()).await.unwrap();
    let events: Vec<(u64, AgentEvent)> =
        agent.execute(&session, Input::text("go")).await.unwrap().sequenced().collect().await;
    let Some((_, AgentEvent::SessionEnd { status, usage, .. })) = events.last() else {
        panic!("no session_end")
    };
    assert_eq!(*status, SessionStatus::Completed);
    assert_eq!((usage.input, usage.output, usage.total), (u64::MAX, u64::MAX, u64::MAX));
    assert_eq!(session.snapshot().usage.total, u64::MAX);

    for protocol in Protocol::ALL {
        let mut encoder = protocol.encoder();
        let mut frames = Vec::new();
        for (seq, event) in &events {
            encode(encoder.as_mut(), *seq, event, &mut frames);
        }
        encoder.finish(&mut frames);
        assert!(frames.len() > 2, "{protocol}");
        if protocol == Protocol::Loom {
            let usage: Vec<serde_json::Value> = frames
                .iter()
                .map(|f| serde_json::from_str::<serde_json::Value>(&f.data).unwrap())
                .filter(|v| v["type"] == "usage")
                .collect();
            assert_eq!(usage.len(), 2);
            assert_eq!(usage[1]["total_tokens"], u64::MAX);
        }
    }
}
