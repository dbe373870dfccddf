//! The Loom stream protocol's invariants, on every scenario, in both forms: `event_id` strictly
//! increasing from 1, `node_id` constant inside each node run, `run_start` first in each run and
//! the reply frame last.

#![allow(clippy::unwrap_used)]

use serde_json::Value;
use weft_conformance::{render, scenarios};
use weft_protocol::Protocol;

/// The frame's type and body: `{"type": …}` in the plain form, `{"Key": {…}}` in the export form.
fn kind_and_body(frame: &Value) -> (String, &Value) {
    if frame.get("reply").is_some() {
        return ("reply".into(), frame);
    }
    if let Some(kind) = frame.get("type").and_then(Value::as_str) {
        return (kind.to_string(), frame);
    }
    let map = frame.as_object().unwrap();
    let (key, body) = map.iter().next().unwrap();
    assert_eq!(map.len(), 1, "export frames have a single key: {frame}");
    (key.clone(), body)
}

#[test]
fn loom_invariants_hold_on_every_scenario() {
    for name in scenarios::ALL {
        let events = scenarios::scenario_blocking(name);
        for protocol in [Protocol::Loom, Protocol::LoomExport] {
            let frames = render(protocol, &events);
            let values: Vec<Value> =
                frames.iter().map(|f| serde_json::from_str(&f.data).unwrap()).collect();
            let context = format!("{name} in {protocol}");
            let (mut expected_id, mut open_node): (u64, Option<String>) = (1, None);
            let mut runs = 0;
            let mut in_run = false;
            for (i, value) in values.iter().enumerate() {
                let (kind, body) = kind_and_body(value);
                let event_id = body["event_id"].as_u64().unwrap();
                assert_eq!(event_id, expected_id, "{context}: frame {i} event_id");
                expected_id += 1;
                assert_eq!(body["session_id"], "session-1", "{context}: frame {i}");
                let node_id = body.get("node_id").and_then(Value::as_str).map(str::to_string);
                match kind.as_str() {
                    "run_start" | "RunStart" => {
                        assert!(!in_run, "{context}: run_start inside a run");
                        in_run = true;
                        runs += 1;
                    }
                    "node_enter" | "TaskStart" => {
                        assert!(open_node.is_none(), "{context}: nested node run at {i}");
                        assert!(node_id.is_some(), "{context}: node_enter without node_id");
                        open_node = node_id;
                    }
                    "node_exit" | "TaskEnd" => {
                        assert_eq!(node_id, open_node, "{context}: node_exit's node_id at {i}");
                        open_node = None;
                    }
                    "reply" => {
                        assert!(in_run && open_node.is_none(), "{context}: reply at {i}");
                        in_run = false;
                    }
                    _ => {
                        if let Some(open) = &open_node {
                            assert_eq!(node_id.as_ref(), Some(open), "{context}: frame {i}");
                        }
                    }
                }
                if i == 0 {
                    assert!(matches!(kind.as_str(), "run_start" | "RunStart"), "{context}");
                }
            }
            assert!(runs >= 1 && !in_run, "{context}: every run ends with its reply");
            let (last, _) = kind_and_body(values.last().unwrap());
            assert_eq!(last, "reply", "{context}: the reply frame is last");
        }
    }
}
