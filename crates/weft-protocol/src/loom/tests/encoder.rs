#![allow(clippy::unwrap_used)]

use super::*;
use std::sync::Arc;

// ---------------------------------------------------------------------------------------------
// The encoder.

#[test]
fn exact_frames_of_a_small_run_in_both_forms() {
    let [plain, export] = both_forms(&text_and_thinking());
    assert_eq!(
        lines(&plain),
        vec![
            r#"{"session_id":"s1","event_id":1,"type":"run_start","run_id":"r1","message":"hi","agent":"react"}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":2,"type":"node_enter","id":"think"}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":3,"type":"thought_chunk","content":"Hm","id":"think","block":0}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":4,"type":"message_chunk","content":"Hel","id":"think","block":1}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":5,"type":"message_chunk","content":"lo","id":"think","block":1}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":6,"type":"usage","prompt_tokens":12,"completion_tokens":5,"total_tokens":17}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":7,"type":"node_exit","id":"think","result":"Ok"}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":8,"reply":"Hello","status":"completed"}"#,
        ]
    );
    assert_eq!(
        lines(&export),
        vec![
            r#"{"RunStart":{"run_id":"r1","message":"hi","agent":"react","session_id":"s1","event_id":1}}"#,
            r#"{"TaskStart":{"id":"think","session_id":"s1","node_id":"think-0","event_id":2}}"#,
            r#"{"ThoughtChunk":{"content":"Hm","id":"think","block":0,"session_id":"s1","node_id":"think-0","event_id":3}}"#,
            r#"{"Messages":{"content":"Hel","id":"think","block":1,"session_id":"s1","node_id":"think-0","event_id":4}}"#,
            r#"{"Messages":{"content":"lo","id":"think","block":1,"session_id":"s1","node_id":"think-0","event_id":5}}"#,
            r#"{"Usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17,"session_id":"s1","node_id":"think-0","event_id":6}}"#,
            r#"{"TaskEnd":{"id":"think","result":"Ok","session_id":"s1","node_id":"think-0","event_id":7}}"#,
            r#"{"session_id":"s1","node_id":"think-0","event_id":8,"reply":"Hello","status":"completed"}"#,
        ]
    );
    // The frame ids are the canonical sequence numbers: run_start renders events 1-3.
    let ids: Vec<_> = plain.iter().map(|f| f.id).collect();
    assert_eq!(
        ids,
        vec![Some(3), Some(4), Some(8), Some(11), Some(12), Some(14), Some(15), Some(17)]
    );
}

#[test]
fn tool_frames_results_and_their_order() {
    let events = tool_round();
    let [plain, _] = both_forms(&events);
    let frames: Vec<_> = plain.iter().map(normalize).collect();
    let of = |kind: &str| -> Vec<&serde_json::Map<String, Value>> {
        frames.iter().filter(|(t, _)| t == kind).map(|(_, m)| m).collect()
    };
    let chunks = of("tool_call_chunk");
    let c1: Vec<_> = chunks
        .iter()
        .filter(|m| m["call_id"] == "c1")
        .map(|m| (m["name"].as_str().unwrap(), m["arguments_delta"].as_str().unwrap()))
        .collect();
    assert_eq!(c1, vec![("echo", ""), ("echo", "{\"te"), ("echo", "xt\":\"sunny\"}")]);
    let calls = of("tool_call");
    assert_eq!(calls[0]["arguments"], json!({"text": "sunny"}));
    assert_eq!(calls.len(), 3);
    let outputs: Vec<_> = of("tool_output").iter().map(|m| m["content"].clone()).collect();
    assert_eq!(outputs, vec![json!("sun"), json!("ny")]);
    assert_eq!(of("tool_output")[0]["name"], "echo");
    // Executions end in completion order (c2, c1); the unknown tool's result comes from the
    // observe node; nothing is sent twice.
    let ends: Vec<_> = of("tool_end")
        .iter()
        .map(|m| {
            (m["call_id"].as_str().unwrap(), m["node_id"].as_str().unwrap(), m["is_error"].clone())
        })
        .collect();
    assert_eq!(
        ends,
        vec![
            ("c2", "act-0", json!(false)),
            ("c1", "act-0", json!(false)),
            ("c3", "observe-0", json!(true))
        ]
    );
    let exits = of("node_exit");
    assert_eq!(exits[2]["node_id"], "observe-0");
    assert_eq!(exits[2]["tool_results"], json!(["c1", "c2", "c3"]));
    assert!(exits[0].get("tool_results").is_none());
    // The reply is the last think node's text; usage per model call.
    let reply = &frames.last().unwrap().1;
    assert_eq!(
        (reply["reply"].as_str(), reply["node_id"].as_str()),
        (Some("It is sunny."), Some("think-1"))
    );
    let totals: Vec<_> = of("usage").iter().map(|m| m["total_tokens"].clone()).collect();
    assert_eq!(totals, vec![json!(168), json!(221)]);

    let t = decode(&plain).unwrap();
    let ids: Vec<_> = t.tool_results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, vec!["c1", "c2", "c3"], "the model's order, not the completion order");
    check_round_trip(&events);
}

#[test]
fn remote_suspension_and_resume() {
    let (first, second) = remote();
    let [plain, _] = both_forms(&first);
    let frames: Vec<_> = plain.iter().map(normalize).collect();
    let (kind, custom) = &frames[frames.len() - 2];
    assert_eq!(kind, "custom");
    assert!(custom.get("node_id").is_none());
    assert_eq!(
        custom["value"],
        json!({"kind": "awaiting_tool_execution", "tool_calls": [
            {"id": "b1", "name": "browser", "arguments": {"url": "https://example.org"}}]})
    );
    let reply = &frames.last().unwrap().1;
    assert_eq!(
        (reply["reply"].as_str(), reply["status"].as_str()),
        (Some("Opening."), Some("awaiting_tool_execution"))
    );
    let t = decode(&plain).unwrap();
    assert_eq!(t.pending, vec!["b1".to_string()]);
    assert_eq!(t.tool_results, vec![], "c1 ran but the model has not received it yet");

    // The resumed run alone (a fresh encoder), and both runs through one encoder.
    let [plain, _] = both_forms(&second);
    let frames: Vec<_> = plain.iter().map(normalize).collect();
    assert_eq!(frames[0].1.get("message"), None, "a resumed run has no user message");
    assert_eq!(frames[0].1["run_id"], "r2");
    let ends: Vec<_> =
        frames.iter().filter(|(t, _)| t == "tool_end").map(|(_, m)| m["call_id"].clone()).collect();
    assert_eq!(ends, vec![json!("b1"), json!("c1")], "a fresh encoder sends every result");
    check_round_trip(&second);
    let both = [first, second].concat();
    check_round_trip(&both);
    let [plain, _] = both_forms(&both);
    let ends = plain.iter().map(normalize).filter(|(t, _)| t == "tool_end").count();
    assert_eq!(ends, 2, "c1's result is sent once, when it ran");
    let t = decode(&plain).unwrap();
    assert_eq!(t.pending, Vec::<String>::new());
    assert_eq!(t.status, Some(SessionStatus::Completed));
}

#[test]
fn approval_frames() {
    let (first, second) = approval();
    let [plain, export] = both_forms(&first);
    let approvals: Vec<_> = plain
        .iter()
        .map(normalize)
        .filter(|(t, _)| t == "tool_approval")
        .map(|(_, m)| (m["call_id"].clone(), m["name"].clone(), m["arguments"].clone()))
        .collect();
    assert_eq!(
        approvals,
        vec![
            (json!("d1"), json!("delete"), json!({"path": "a"})),
            (json!("d2"), json!("delete"), json!({"path": "b"}))
        ]
    );
    assert!(lines(&export).iter().any(|l| l.starts_with(r#"{"ToolApproval":{"call_id":"d1""#)));
    let reply = normalize(plain.last().unwrap()).1;
    assert_eq!(reply["reply"], "", "no text in the run");
    assert_eq!(reply["node_id"], "think-0");
    assert_eq!(decode(&plain).unwrap().pending, vec!["d1".to_string(), "d2".to_string()]);
    check_round_trip(&first);
    check_round_trip(&second);
    let both = [first, second].concat();
    check_round_trip(&both);
    let t = decode(&both_forms(&both)[0]).unwrap();
    assert_eq!(t.tool_results.iter().map(|r| r.is_error).collect::<Vec<_>>(), vec![false, true]);
}

#[test]
fn provider_error_frames() {
    let events = provider_error();
    let [plain, _] = both_forms(&events);
    let tail: Vec<_> = lines(&plain).into_iter().rev().take(4).collect();
    assert_eq!(
        tail,
        vec![
            r#"{"session_id":"s5","node_id":"think-0","event_id":7,"reply":"Par","status":"error"}"#,
            r#"{"session_id":"s5","node_id":"think-0","event_id":6,"type":"node_exit","id":"think","result":{"Err":"500 from provider"}}"#,
            r#"{"session_id":"s5","node_id":"think-0","event_id":5,"type":"custom","value":{"kind":"error","error":"500 from provider"}}"#,
            r#"{"session_id":"s5","node_id":"think-0","event_id":4,"type":"usage","prompt_tokens":9,"completion_tokens":1,"total_tokens":10}"#,
        ]
    );
    check_round_trip(&events);
}

#[test]
fn multi_step_blocks_and_corrections() {
    let events = multi_step();
    let [plain, _] = both_forms(&events);
    let chunks: Vec<_> = plain
        .iter()
        .map(normalize)
        .filter(|(t, _)| t == "message_chunk")
        .map(|(_, m)| (m["block"].clone(), m["content"].clone(), m.get("text").cloned()))
        .collect();
    assert_eq!(
        chunks,
        vec![
            (json!(0), json!(""), None),
            (json!(1), json!("Retr"), None),
            (json!(1), json!("ying"), None),
            (json!(2), json!("Got "), None),
            (json!(2), json!("1"), None),
            (json!(3), json!("x"), None),
            (json!(3), json!(""), Some(json!("yz"))),
        ]
    );
    let t = decode(&plain).unwrap();
    assert_eq!(t.texts, vec!["", "Retrying", "Got 1", "yz"]);
    let reply = normalize(plain.last().unwrap()).1;
    assert_eq!(
        (reply["reply"].as_str(), reply["node_id"].as_str()),
        (Some("Got 1yz"), Some("think-2"))
    );
    check_round_trip(&events);
}

#[test]
fn state_tot_got_and_custom_frames() {
    let events = graph_events();
    let [plain, export] = both_forms(&events);
    let got: Vec<&str> = lines(&plain)[2..14].to_vec();
    assert_eq!(
        got,
        vec![
            r#"{"session_id":"s7","node_id":"plan-0","event_id":3,"type":"values","state":{"n":1}}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":4,"type":"got_plan","node_count":2,"edge_count":1,"node_ids":["g1","g2"]}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":5,"type":"got_node_start","id":"g1"}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":6,"type":"got_node_complete","id":"g1","result_summary":"done"}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":7,"type":"got_node_failed","id":"g2","error":"no"}"#,
            r#"{"session_id":"s7","event_id":8,"type":"got_expand","node_id":"g2","nodes_added":3,"edges_added":2}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":9,"type":"tot_expand","candidates":["a","b"]}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":10,"type":"tot_evaluate","chosen":1,"scores":[0.25,0.75]}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":11,"type":"tot_backtrack","reason":"dead end","to_depth":0}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":12,"type":"updates","id":"plan_graph","state":{"n":2}}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":13,"type":"checkpoint","checkpoint_id":"ck1","timestamp":99,"step":0,"state":{"n":2},"thread_id":"s7","checkpoint_ns":""}"#,
            r#"{"session_id":"s7","node_id":"plan-0","event_id":14,"type":"custom","value":{"anything":[1,2]}}"#,
        ]
    );
    assert_eq!(
        lines(&export)[7],
        r#"{"GotExpand":{"node_id":"g2","nodes_added":3,"edges_added":2,"session_id":"s7","event_id":8}}"#
    );
    let t = receive(&lines(&export));
    assert_eq!(t.errors, vec![]);
    let node = &t.sessions[0].runs[0].node_runs[0];
    assert_eq!(node.node_id.as_deref(), Some("plan-0"));
    let kinds: Vec<_> = node.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(
        kinds,
        vec![
            "values",
            "got_plan",
            "got_node_start",
            "got_node_complete",
            "got_node_failed",
            "got_expand",
            "tot_expand",
            "tot_evaluate",
            "tot_backtrack",
            "updates",
            "checkpoint"
        ]
    );
    assert_eq!(node.events[5].payload["node_id"], "g2", "got_expand keeps its own node_id");
    assert_eq!(node.customs[0].value, json!({"anything": [1, 2]}));
    check_round_trip(&events);
}

#[test]
fn several_runs_through_one_encoder_keep_counting() {
    let (a, b) = approval();
    let events = [text_and_thinking(), a, b].concat();
    // One encoder sees runs of different sessions here only to count; the ids keep growing.
    let frames = encode_with(LoomEncoder::new(), &events);
    let ids: Vec<u64> =
        frames.iter().map(|f| normalize(f).1["event_id"].as_u64().unwrap()).collect();
    assert_eq!(ids, (1..=frames.len() as u64).collect::<Vec<_>>());
    let kinds: Vec<String> = frames.iter().map(|f| normalize(f).0).collect();
    assert_eq!(kinds.iter().filter(|k| *k == "run_start").count(), 3);
    assert_eq!(kinds.iter().filter(|k| *k == "reply").count(), 3);
}

#[test]
fn a_run_start_without_anything_after_it_is_sent_by_finish() {
    let start = AgentEvent::SessionStart {
        session_id: "s".into(),
        run_id: "r".into(),
        agent: "react".into(),
        recovers: None,
    };
    let mut encoder = LoomEncoder::new();
    let mut out = Vec::new();
    encoder.encode(&start, &mut out);
    assert!(out.is_empty(), "run_start waits for the user's message");
    encoder.finish(&mut out);
    assert_eq!(
        lines(&out),
        vec![r#"{"session_id":"s","event_id":1,"type":"run_start","run_id":"r","agent":"react"}"#]
    );
}

#[test]
fn every_scenario_round_trips_and_keeps_the_invariants() {
    let (r1, r2) = remote();
    let (a1, a2) = approval();
    let scenarios = vec![
        text_and_thinking(),
        tool_round(),
        r1.clone(),
        r2.clone(),
        [r1, r2].concat(),
        a1.clone(),
        a2.clone(),
        [a1, a2].concat(),
        provider_error(),
        multi_step(),
        graph_events(),
    ];
    for events in &scenarios {
        check_round_trip(events);
    }
}

#[test]
fn content_outside_node_runs() {
    let mut s = Stream::new("s8");
    s.start("r1", Some("x"));
    s.text_block(0, &["out", "side"], "outside");
    let r = result("z", "remote", "late", false);
    s.push(AgentEvent::MessageEnd { message: Arc::new(Message::ToolResult(r)) });
    s.end(SessionStatus::Completed);
    let events = s.events;
    let [plain, _] = both_forms(&events);
    assert_eq!(
        lines(&plain)[1..5].to_vec(),
        vec![
            r#"{"session_id":"s8","event_id":2,"type":"message_chunk","content":"out","block":0}"#,
            r#"{"session_id":"s8","event_id":3,"type":"message_chunk","content":"side","block":0}"#,
            r#"{"session_id":"s8","event_id":4,"type":"tool_end","call_id":"z","name":"remote","result":"late","is_error":false}"#,
            r#"{"session_id":"s8","event_id":5,"type":"custom","value":{"kind":"tool_results","tool_call_ids":["z"]}}"#,
        ]
    );
    let t = receive(&lines(&plain));
    let node = &t.sessions[0].runs[0].node_runs[0];
    assert_eq!(
        (node.entered, node.node_id.as_deref(), node.text.as_str()),
        (false, None, "outside")
    );
    for frames in both_forms(&events) {
        assert_eq!(decode(&frames).unwrap(), Transcript::from_events(&events));
    }
}

/// Graph nodes run at once: each event goes with the node run its record names, so chunks of two
/// open node runs keep their own `node_id` and name, whichever was entered last; the same deltas
/// written in place (`encode_to`) say the same.
#[test]
fn concurrent_node_runs_keep_their_own_chunks() {
    let a: Arc<str> = Arc::from("got-a-1");
    let b: Arc<str> = Arc::from("got-b-1");
    let start = AgentEvent::SessionStart {
        session_id: "s1".into(),
        run_id: "r1".into(),
        agent: "got".into(),
        recovers: None,
    };
    let enter =
        |id: &Arc<str>| AgentEvent::NodeEnter { name: "got_node".into(), node_id: id.to_string() };
    let text = |index, delta: &str| AgentEvent::TextDelta { index, delta: delta.into() };
    let events: Vec<(Option<Arc<str>>, AgentEvent)> = vec![
        (None, start),
        (Some(a.clone()), enter(&a)),
        (Some(b.clone()), enter(&b)),
        (Some(a.clone()), AgentEvent::TextStart { index: 0 }),
        (Some(a.clone()), text(0, "from a")),
        (Some(b.clone()), AgentEvent::TextStart { index: 0 }),
        (Some(b.clone()), text(0, "from b")),
        (Some(a.clone()), text(0, " again")),
    ];
    let mut frames = Vec::new();
    let mut encoder = LoomEncoder::new();
    let mut bytes = Vec::new();
    let mut in_place = LoomEncoder::new();
    for (seq, (node, event)) in events.iter().enumerate() {
        encoder.set_node(node.as_ref());
        crate::encode(&mut encoder, seq as u64 + 1, event, &mut frames);
        in_place.set_node(node.as_ref());
        in_place.encode_to(seq as u64 + 1, event, crate::Framing::Ndjson, &mut bytes);
    }
    let chunks: Vec<(String, String)> = frames
        .iter()
        .map(|f| serde_json::from_str::<Value>(&f.data).unwrap())
        .filter(|v| v["type"] == "message_chunk")
        .map(|v| {
            (v["node_id"].as_str().unwrap().to_string(), v["content"].as_str().unwrap().to_string())
        })
        .collect();
    assert_eq!(
        chunks,
        [
            ("got-a-1".to_string(), "from a".to_string()),
            ("got-b-1".to_string(), "from b".to_string()),
            ("got-a-1".to_string(), " again".to_string()),
        ]
    );
    let written: String = frames.iter().map(|f| format!("{}\n", f.data)).collect();
    assert_eq!(String::from_utf8(bytes).unwrap(), written);
}

/// A tool call's argument deltas written in place (`encode_to`) are the bytes of their frames,
/// in both framings: with the call's id and name, escapes and non-ASCII text kept, an empty
/// delta sending nothing, and a delta of a call whose start was not seen without them.
#[test]
fn tool_argument_deltas_written_in_place_are_their_frames() {
    let events = vec![
        AgentEvent::SessionStart {
            session_id: "s1".into(),
            run_id: "r1".into(),
            agent: "react".into(),
            recovers: None,
        },
        AgentEvent::NodeEnter { name: "think".into(), node_id: "think-0".into() },
        AgentEvent::ToolcallStart { index: 0, id: "call_\"1\"".into(), name: "write".into() },
        AgentEvent::ToolcallDelta { index: 0, delta: "{\"content\":\"a\\n".into() },
        AgentEvent::ToolcallDelta { index: 0, delta: String::new() },
        AgentEvent::ToolcallDelta { index: 0, delta: "é世\u{1}\"".into() },
        AgentEvent::ToolcallDelta { index: 3, delta: "}".into() },
        AgentEvent::TextDelta { index: 1, delta: "between".into() },
        AgentEvent::ToolcallDelta { index: 0, delta: "\"}".into() },
    ];
    for framing in [crate::Framing::Ndjson, crate::Framing::Sse] {
        let mut frames = Vec::new();
        let mut encoder = LoomEncoder::new();
        let mut in_place = LoomEncoder::new();
        let mut bytes = Vec::new();
        for (seq, event) in events.iter().enumerate() {
            let seq = seq as u64 + 1;
            let start = frames.len();
            crate::encode(&mut encoder, seq, event, &mut frames);
            // An event's last frame carries its seq (`Framing::Sse` writes it as `id:`).
            if let Some(last) = frames[start..].last_mut() {
                last.id = Some(seq);
            }
            in_place.encode_to(seq, event, framing, &mut bytes);
        }
        let mut written = Vec::new();
        for frame in &frames {
            framing.write(frame, &mut written);
        }
        assert_eq!(String::from_utf8(bytes).unwrap(), String::from_utf8(written).unwrap());
        let chunks = frames.iter().filter(|f| f.data.contains("tool_call_chunk")).count();
        assert_eq!(chunks, 5, "the start, three deltas with text, the unknown call's");
    }
}
