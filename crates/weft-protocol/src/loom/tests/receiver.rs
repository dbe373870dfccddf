#![allow(clippy::unwrap_used)]

use super::*;

/// §4.3 (with envelope, verbatim), then §5's reply line (verbatim).
const SPEC_WITH_ENVELOPE: &str = r#"{"session_id":"sess-001","event_id":0,"type":"run_start","run_id":"run-1","message":"Hello","agent":"react"}
{"session_id":"sess-001","node_id":"run-think-1","event_id":1,"type":"node_enter","id":"think"}
{"session_id":"sess-001","node_id":"run-think-1","event_id":2,"type":"message_chunk","content":"I","id":"think"}
{"session_id":"sess-001","node_id":"run-think-1","event_id":3,"type":"message_chunk","content":" don't","id":"think"}
{"session_id":"sess-001","node_id":"run-think-1","event_id":4,"type":"usage","prompt_tokens":100,"completion_tokens":62,"total_tokens":162}
{"session_id":"sess-001","node_id":"run-think-1","event_id":5,"type":"node_exit","id":"think","result":"Ok"}
{"session_id":"sess-001","node_id":"run-think-1","event_id":8,"reply":"I don't have access to your device's clock ..."}
"#;

/// §4.3's variant without envelope (verbatim).
const SPEC_WITHOUT_ENVELOPE: &str = r#"{"type":"run_start","run_id":"run-1","agent":"react"}
{"type":"node_enter","id":"think"}
{"type":"message_chunk","content":"Hello","id":"think"}
{"type":"node_exit","id":"think","result":"Ok"}
"#;

#[test]
fn the_specs_example_with_envelope_and_reply() {
    let mut r = LoomReceiver::new();
    r.push_text(SPEC_WITH_ENVELOPE);
    let t = r.finish();
    assert_eq!(t.errors, vec![]);
    assert_eq!(t.sessions.len(), 1);
    let session = t.session(Some("sess-001")).unwrap();
    assert_eq!(session.runs.len(), 1);
    let run = &session.runs[0];
    assert!(run.started);
    assert_eq!(run.run_id.as_deref(), Some("run-1"));
    assert_eq!(run.message.as_deref(), Some("Hello"));
    assert_eq!(run.agent.as_deref(), Some("react"));
    assert_eq!(run.node_runs.len(), 1);
    let node = &run.node_runs[0];
    assert_eq!(node.node_id.as_deref(), Some("run-think-1"));
    assert_eq!(node.name.as_deref(), Some("think"));
    assert!(node.entered);
    assert_eq!(node.text, "I don't");
    assert_eq!(node.text_blocks.len(), 1);
    assert_eq!(node.result, Some(LoomNodeResult::Ok));
    assert_eq!((node.first_event_id, node.last_event_id), (Some(1), Some(5)));
    let expected_usage =
        LoomUsage { prompt_tokens: 100, completion_tokens: 62, total_tokens: 162, line: 5 };
    assert_eq!(node.usage, vec![expected_usage.clone()]);
    assert_eq!(run.usage, vec![expected_usage]);
    let reply = run.reply.as_ref().unwrap();
    assert_eq!(reply.text, "I don't have access to your device's clock ...");
    assert_eq!(reply.node_id.as_deref(), Some("run-think-1"));
    assert_eq!(reply.event_id, Some(8));
    assert_eq!(reply.status, None);

    // As a transcript: one text block, no status (the spec's reply has none).
    let frames: Vec<Frame> = SPEC_WITH_ENVELOPE.lines().map(Frame::raw).collect();
    let transcript = decode(&frames).unwrap();
    assert_eq!(transcript.texts, vec!["I don't".to_string()]);
    assert_eq!(transcript.status, None);
}

#[test]
fn the_specs_example_without_envelope() {
    let mut r = LoomReceiver::new();
    r.push_text(SPEC_WITHOUT_ENVELOPE);
    let t = r.finish();
    assert_eq!(t.errors, vec![]);
    let session = t.session(None).unwrap();
    assert_eq!(session.runs.len(), 1);
    let run = &session.runs[0];
    assert_eq!(run.run_id.as_deref(), Some("run-1"));
    assert_eq!(run.message, None);
    assert_eq!(run.reply, None);
    let [node] = run.node_runs.as_slice() else { panic!("{:?}", run.node_runs) };
    assert_eq!((node.node_id.as_deref(), node.name.as_deref()), (None, Some("think")));
    assert_eq!(node.text, "Hello");
    assert_eq!(node.result, Some(LoomNodeResult::Ok));
}

// ---------------------------------------------------------------------------------------------
// Merging.

#[test]
fn interleaved_sessions_and_runs_merge() {
    // Session A: two runs, both with node run id "think-0"; in run 2, "act-0" opens twice.
    let a = [
        r#"{"session_id":"A","event_id":1,"type":"run_start","run_id":"a1","message":"one"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":2,"type":"node_enter","id":"think"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":3,"type":"message_chunk","content":"A","id":"think"}"#,
        r#"{"session_id":"A","event_id":4,"type":"message_chunk","content":"1","id":"think"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":5,"type":"node_exit","id":"think","result":"Ok"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":6,"reply":"A1"}"#,
        r#"{"session_id":"A","event_id":7,"type":"run_start","run_id":"a2","message":"two"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":8,"type":"node_enter","id":"think"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":9,"type":"tool_call","call_id":"k","name":"t","arguments":{}}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":10,"type":"node_exit","id":"think","result":{"Err":"x"}}"#,
        r#"{"session_id":"A","node_id":"act-0","event_id":11,"type":"node_enter","id":"act"}"#,
        r#"{"session_id":"A","node_id":"act-0","event_id":12,"type":"node_exit","id":"act","result":"Ok"}"#,
        r#"{"session_id":"A","node_id":"act-0","event_id":13,"type":"tool_output","call_id":"k","name":"t","content":"late"}"#,
        r#"{"session_id":"A","node_id":"act-0","event_id":14,"type":"node_exit","id":"act","result":"Ok"}"#,
        r#"{"session_id":"A","node_id":"think-0","event_id":15,"reply":"A2"}"#,
    ];
    // Session B: two runs, node run "think-0" in each, usage on each.
    let b = [
        r#"{"session_id":"B","event_id":1,"type":"run_start","run_id":"b1"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":2,"type":"node_enter","id":"think"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":3,"type":"thought_chunk","content":"hm","id":"think"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":4,"type":"usage","prompt_tokens":1,"completion_tokens":2,"total_tokens":3}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":5,"type":"node_exit","id":"think","result":"Ok"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":6,"reply":"B1","status":"completed"}"#,
        r#"{"session_id":"B","event_id":7,"type":"run_start","run_id":"b2"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":8,"type":"node_enter","id":"think"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":9,"type":"message_chunk","content":"B","id":"think"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":10,"type":"usage","prompt_tokens":4,"completion_tokens":5,"total_tokens":9}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":11,"type":"node_exit","id":"think","result":"Ok"}"#,
        r#"{"session_id":"B","node_id":"think-0","event_id":12,"reply":"B2"}"#,
    ];
    let mut mixed = Vec::new();
    for i in 0..a.len().max(b.len()) {
        mixed.extend(a.get(i));
        mixed.extend(b.get(i));
    }
    let t = receive(&mixed);
    assert_eq!(t.errors, vec![]);
    assert_eq!(t.sessions.len(), 2);
    assert_eq!(t.sessions[0].session_id.as_deref(), Some("A"));

    let a = t.session(Some("A")).unwrap();
    assert_eq!(a.runs.len(), 2);
    let (a1, a2) = (&a.runs[0], &a.runs[1]);
    assert_eq!((a1.run_id.as_deref(), a1.message.as_deref()), (Some("a1"), Some("one")));
    assert_eq!(a1.node_runs.len(), 1);
    assert_eq!(a1.node_runs[0].text, "A1", "a frame without node_id joins the open node run");
    assert_eq!(a1.reply.as_ref().unwrap().text, "A1");
    assert_eq!(a2.run_id.as_deref(), Some("a2"));
    let names: Vec<_> = a2.node_runs.iter().map(|n| (n.name.as_deref(), n.entered)).collect();
    assert_eq!(names, vec![(Some("think"), true), (Some("act"), true), (Some("act"), false)]);
    assert_eq!(a2.node_runs[0].text, "", "run 2's think-0 is a new node run");
    assert_eq!(a2.node_runs[0].tool_calls[0].call_id.as_deref(), Some("k"));
    assert_eq!(a2.node_runs[0].result, Some(LoomNodeResult::Err("x".into())));
    // act-0 re-opened after its node_exit: a new node run.
    assert_eq!(a2.node_runs[2].node_id.as_deref(), Some("act-0"));
    assert_eq!(a2.node_runs[2].tool_outputs[0].content, "late");
    assert_eq!(a2.node_runs[2].result, Some(LoomNodeResult::Ok));
    assert_eq!(a2.reply.as_ref().unwrap().text, "A2");

    let b = t.session(Some("B")).unwrap();
    assert_eq!(b.runs.len(), 2);
    assert_eq!(b.runs[0].node_runs[0].thought, "hm");
    assert_eq!(b.runs[0].usage.iter().map(|u| u.total_tokens).collect::<Vec<_>>(), vec![3]);
    assert_eq!(b.runs[0].reply.as_ref().unwrap().status.as_deref(), Some("completed"));
    assert_eq!(b.runs[1].node_runs.len(), 1);
    assert_eq!(b.runs[1].node_runs[0].text, "B");
    assert_eq!(b.runs[1].usage.iter().map(|u| u.total_tokens).collect::<Vec<_>>(), vec![9]);
    assert_eq!(b.runs[1].reply.as_ref().unwrap().text, "B2");

    // decode() wants one session.
    let frames: Vec<Frame> = mixed.iter().map(|l| Frame::raw(*l)).collect();
    assert!(matches!(decode(&frames), Err(LoomDecodeError::SeveralSessions(s)) if s.len() == 2));
}

#[test]
fn malformed_lines_are_reported_and_the_rest_is_read() {
    let t = receive(&[
        r#"{"type":"run_start","run_id":"r"}"#,
        r#"{"type":"node_enter","id":"think"}"#,
        r#"{"type":"message_chunk","content":"a","id":"think"}"#,
        "this is not json",
        "",
        r#"[1, 2]"#,
        r#"{"type":"usage","prompt_tokens":"many","completion_tokens":1,"total_tokens":1}"#,
        r#"{"type":"node_exit","id":"think","result":"Fine"}"#,
        r#"{"type":"mystery","x":1}"#,
        r#"{"Mystery":{"y":2}}"#,
        r#"{"session_id":7,"type":"custom","value":1}"#,
        r#"{"no_type":true,"other":1}"#,
        r#"{"type":"message_chunk","content":"b","id":"think"}"#,
        r#"{"type":"node_exit","id":"think","result":"Ok"}"#,
        r#"{"reply":"ab"}"#,
    ]);
    let errors: Vec<_> = t.errors.iter().map(|e| e.line).collect();
    assert_eq!(errors, vec![4, 6, 7, 8, 11, 12]);
    assert!(t.errors[0].message.starts_with("not JSON"), "{}", t.errors[0]);
    assert_eq!(t.errors[1].message, "not a JSON object");
    assert!(t.errors[2].to_string().contains("line 7: usage: `prompt_tokens`"), "{}", t.errors[2]);
    assert!(t.errors[4].message.contains("session_id"), "{}", t.errors[4]);
    let run = &t.session(None).unwrap().runs[0];
    let node = &run.node_runs[0];
    assert_eq!(node.text, "ab");
    assert_eq!(node.result, Some(LoomNodeResult::Ok));
    let other: Vec<_> = node.other.iter().map(|o| (o.kind.as_str(), o.line)).collect();
    assert_eq!(other, vec![("mystery", 9), ("Mystery", 10)]);
    assert_eq!(node.other[0].payload["x"], json!(1));
    assert_eq!(run.reply.as_ref().unwrap().text, "ab");

    let frames = vec![Frame::raw(r#"{"type":"node_enter"}"#)];
    let err = decode(&frames).unwrap_err();
    assert_eq!(err.to_string(), "line 1: node_enter: missing `id`");
}

#[test]
fn export_form_frames_read_like_type_form_frames() {
    for events in [tool_round(), graph_events(), [remote().0, remote().1].concat()] {
        let [plain, export] = both_forms(&events);
        let a = receive(&lines(&plain));
        let b = receive(&lines(&export));
        assert_eq!(a.errors, vec![]);
        assert_eq!(a, b);
    }
}

#[test]
fn the_state_after_a_node_run_belongs_to_it() {
    let stream = r#"{"session_id":"s","event_id":1,"type":"run_start","run_id":"r","agent":"react"}
{"session_id":"s","node_id":"think-0","event_id":2,"type":"node_enter","id":"think"}
{"session_id":"s","node_id":"think-0","event_id":3,"type":"message_chunk","content":"Hi","id":"think"}
{"session_id":"s","node_id":"think-0","event_id":4,"type":"node_exit","id":"think","result":"Ok"}
{"session_id":"s","event_id":5,"type":"values","state":{"turns":1}}
{"session_id":"s","event_id":6,"type":"updates","id":"think","state":{"turns":1}}
{"session_id":"s","event_id":7,"type":"checkpoint","checkpoint_id":"think-0","thread_id":"s","checkpoint_ns":"react","step":1,"timestamp":0,"state":{"turns":1}}
{"session_id":"s","event_id":8,"type":"updates","id":"plan","state":{}}
{"session_id":"s","event_id":9,"type":"custom","value":1}
"#;
    let mut r = LoomReceiver::new();
    r.push_text(stream);
    let t = r.finish();
    assert_eq!(t.errors, vec![]);
    let run = &t.session(Some("s")).unwrap().runs[0];
    let think = &run.node_runs[0];
    let kinds: Vec<&str> = think.events.iter().map(|e| e.kind.as_str()).collect();
    assert_eq!(kinds, ["values", "updates", "checkpoint"]);
    assert_eq!((think.first_event_id, think.last_event_id), (Some(2), Some(7)));
    // An update naming another node, and frames of other kinds, are outside every node run.
    assert_eq!(run.node_runs.len(), 2);
    let loose = &run.node_runs[1];
    assert_eq!((loose.name.as_deref(), loose.events.len(), loose.customs.len()), (None, 1, 1));
}

/// Found by fuzzing (`fuzz/regressions/loom/state-after-run-start`): the node run that exited
/// last was remembered across a `run_start`, so a `values` frame outside every node run of the
/// new run was given to a node run index of the previous one: out of bounds, a panic.
#[test]
fn state_after_a_new_run_start_is_not_given_to_the_previous_runs_node() {
    let text = [
        r#"{"session_id":"s","type":"run_start","run_id":"r1"}"#,
        r#"{"session_id":"s","node_id":"a-0","type":"node_enter","id":"a"}"#,
        r#"{"session_id":"s","node_id":"a-0","type":"node_exit","id":"a","result":"Ok"}"#,
        r#"{"session_id":"s","type":"run_start","run_id":"r2"}"#,
        r#"{"session_id":"s","type":"values","state":{"turns":1}}"#,
        r#"{"session_id":"s","type":"updates","id":"a","state":{"turns":2}}"#,
    ]
    .join("\n");
    let mut r = LoomReceiver::new();
    r.push_text(&text);
    let t = r.finish();
    assert!(t.errors.is_empty(), "{:?}", t.errors);
    let runs = &t.sessions[0].runs;
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0].node_runs.len(), 1);
    // Both frames stay in the second run, outside every node run.
    assert!(!runs[1].node_runs.is_empty());
    assert!(runs[1].node_runs.iter().all(|n| n.name.is_none() && !n.entered));
    assert!(t.sessions[0].transcript().is_ok());
}
