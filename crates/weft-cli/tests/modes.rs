//! Reasoning modes end to end through `weft run --mode …`: the example faux scripts
//! (examples/scripts/{react,tot,got,got-adaptive}.json) against golden Loom NDJSON, the
//! concurrency of graph nodes, and the bounds of each mode with a clear final status.
//!
//! Golden files are in tests/golden/modes; `UPDATE_GOLDEN=1` rewrites them. Session and run ids
//! and times are replaced by placeholders. A graph run's nodes run at once, so its golden holds
//! each node run's frames in order, node run after node run (in the order they started), and
//! the frames of no node run after them; `event_id`, `block`, and the state snapshots (whose content
//! depends on which concurrent node ended first), are left out of it.

#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use serde_json::{Value, json};

/// `weft run` with the faux provider on `script` (a path from the repository root), in memory,
/// as NDJSON, with `extra` flags.
fn weft_run(script: &str, extra: &[&str], prompt: &str) -> Output {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.args(["run", "--provider", "faux", "--store", "memory", "--json", "--script"])
        .arg(root.join(script))
        .args(extra)
        .arg(prompt)
        .env("NO_COLOR", "1")
        .env("WEFT_HOME", Path::new(env!("CARGO_BIN_EXE_weft")).join("no-weft-home"))
        .env_remove("RUST_LOG")
        .stdin(Stdio::null());
    cmd.output().unwrap()
}

fn frames(o: &Output) -> Vec<Value> {
    let out = String::from_utf8(o.stdout.clone()).unwrap();
    out.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"))).collect()
}

fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// The frame with ids and times replaced by placeholders.
fn normalized(mut frame: Value) -> Value {
    if let Some(map) = frame.as_object_mut() {
        for (key, placeholder) in [
            ("session_id", json!("S")),
            ("thread_id", json!("S")),
            ("run_id", json!("R")),
            ("timestamp", json!(0)),
        ] {
            if map.contains_key(key) {
                map.insert(key.into(), placeholder);
            }
        }
    }
    frame
}

fn golden_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/modes").join(format!("{name}.ndjson"))
}

/// Compares `lines` with the golden file `name` (or writes it with `UPDATE_GOLDEN=1`).
fn check_golden(name: &str, lines: &[Value]) {
    let text: String = lines.iter().map(|v| format!("{v}\n")).collect();
    let path = golden_path(name);
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let want = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UPDATE_GOLDEN=1 writes it)", path.display()));
    if want != text {
        for (i, (w, g)) in want.lines().zip(text.lines()).enumerate() {
            assert_eq!(w, g, "{name}: line {} differs", i + 1);
        }
        assert_eq!(want.lines().count(), text.lines().count(), "{name}: line count");
    }
}

fn types(frames: &[Value]) -> Vec<&str> {
    frames.iter().filter_map(|f| f["type"].as_str()).collect()
}

#[test]
fn react_with_a_tool_matches_its_golden() {
    let o = weft_run("examples/scripts/react.json", &["--mode", "react"], "How long is the Seine?");
    assert!(o.status.success(), "{}", stderr(&o));
    let frames = frames(&o);
    let t = types(&frames);
    for kind in ["node_enter", "message_chunk", "tool_call", "tool_start", "tool_end", "node_exit"]
    {
        assert!(t.contains(&kind), "{kind} missing: {t:?}");
    }
    assert_eq!(
        frames.last().unwrap()["reply"],
        "The Seine is 777 km long, from Burgundy to the English Channel."
    );
    check_golden("react", &frames.into_iter().map(normalized).collect::<Vec<_>>());
}

#[test]
fn tot_expands_evaluates_fails_a_path_and_backtracks() {
    let o = weft_run("examples/scripts/tot.json", &["--mode", "tot"], "Make 24 from 4 6 1 1");
    assert!(o.status.success(), "{}", stderr(&o));
    let frames = frames(&o);
    let of = |kind: &str| frames.iter().filter(|f| f["type"] == kind).cloned().collect::<Vec<_>>();
    assert_eq!(of("tot_expand").len(), 2);
    let evaluate = of("tot_evaluate");
    assert_eq!(evaluate[0]["chosen"], 1);
    assert_eq!(evaluate[0]["scores"], json!([0.3, 0.9, 0.2]));
    assert!(evaluate[0].get("rule_based").is_none(), "the model's scores parsed");
    assert_eq!(evaluate[1]["rule_based"], true, "unparsable scores: the rule, and it says so");
    let backtracks = of("tot_backtrack");
    assert_eq!(backtracks.len(), 2, "a tool error and a dead end");
    assert!(backtracks[0]["reason"].as_str().unwrap().starts_with("tool echo failed"));
    assert!(backtracks[1]["reason"].as_str().unwrap().contains("dead end"));
    assert_eq!(backtracks[1]["to_depth"], 0);
    // A checkpoint after every node run, with the thread and namespace.
    let enters = of("node_enter").len();
    let checkpoints = of("checkpoint");
    assert_eq!(checkpoints.len(), enters);
    assert_eq!(checkpoints[0]["checkpoint_ns"], "tot");
    assert_eq!(checkpoints[0]["thread_id"], frames[0]["session_id"]);
    // Node ids are unique within the run.
    let enters = of("node_enter");
    let mut ids: Vec<&str> = enters.iter().map(|f| f["node_id"].as_str().unwrap()).collect();
    ids.sort_unstable();
    let n = ids.len();
    ids.dedup();
    assert_eq!(ids.len(), n, "{ids:?}");
    assert_eq!(frames.last().unwrap()["reply"], "4 * 6 * 1 * 1 = 24. Answer: 4 × 6 × 1 × 1 = 24.");
    check_golden("tot", &frames.into_iter().map(normalized).collect::<Vec<_>>());
}

/// A graph run's frames, node run by node run (see the module docs).
fn by_node(frames: &[Value]) -> Vec<Value> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: std::collections::HashMap<String, Vec<Value>> = Default::default();
    let mut rest = Vec::new();
    for frame in frames {
        if matches!(frame["type"].as_str(), Some("values" | "updates" | "checkpoint")) {
            continue;
        }
        let mut frame = normalized(frame.clone());
        // Event ids and block numbers count frames and blocks of every node run in the order
        // they interleave.
        frame.as_object_mut().unwrap().remove("event_id");
        frame.as_object_mut().unwrap().remove("block");
        match frame["node_id"].as_str() {
            Some(node) if frame.get("reply").is_none() => {
                if !groups.contains_key(node) {
                    order.push(node.to_string());
                }
                groups.entry(node.to_string()).or_default().push(frame);
            }
            _ => rest.push(frame),
        }
    }
    order.iter().flat_map(|n| groups.remove(n).unwrap()).chain(rest).collect()
}

#[test]
fn got_runs_a_diamond_concurrently_and_reports_a_failed_node() {
    let o = weft_run("examples/scripts/got.json", &["--mode", "got"], "Tell me about the Seine");
    assert!(o.status.success(), "{}", stderr(&o));
    let frames = frames(&o);
    let t = types(&frames);
    for kind in ["got_plan", "got_node_start", "got_node_complete", "got_node_failed"] {
        assert!(t.contains(&kind), "{kind} missing");
    }
    let plan = frames.iter().find(|f| f["type"] == "got_plan").unwrap();
    assert_eq!(plan["node_count"], 6);
    assert_eq!(plan["edge_count"], 6);
    // `length` and `cities` ran at once: each streamed while the other did.
    let chunks = |prefix: &str| -> Vec<usize> {
        frames
            .iter()
            .enumerate()
            .filter(|(_, f)| {
                f["type"] == "message_chunk"
                    && f["node_id"].as_str().is_some_and(|n| n.starts_with(prefix))
            })
            .map(|(i, _)| i)
            .collect()
    };
    let (length, cities) = (chunks("got-length-"), chunks("got-cities-"));
    assert!(length.len() > 2 && cities.len() > 2);
    assert!(
        length[0] < *cities.last().unwrap() && cities[0] < *length.last().unwrap(),
        "no overlap"
    );
    // Each node's chunks carry its own node id: they spell its own answer.
    let text = |prefix: &str| -> String {
        frames
            .iter()
            .filter(|f| {
                f["type"] == "message_chunk"
                    && f["node_id"].as_str().is_some_and(|n| n.starts_with(prefix))
            })
            .map(|f| f["content"].as_str().unwrap())
            .collect()
    };
    assert_eq!(text("got-length-"), "It is 777 km long.");
    assert_eq!(text("got-cities-"), "Troyes, Paris, Rouen and Le Havre lie on it.");
    let failed: Vec<&Value> = frames.iter().filter(|f| f["type"] == "got_node_failed").collect();
    assert_eq!(failed[0]["id"], "flow");
    assert_eq!(failed[1]["id"], "floods", "the dependent of a failed node is skipped");
    assert!(failed[1]["error"].as_str().unwrap().contains("depends on flow"));
    // The synthesis saw every result.
    let reply = frames.last().unwrap()["reply"].as_str().unwrap();
    assert!(reply.contains("777 km") && reply.contains("flow could not be found"), "{reply}");
    check_golden("got", &by_node(&frames));
}

#[test]
fn adaptive_got_expands_a_node_into_a_sub_graph() {
    let o = weft_run(
        "examples/scripts/got-adaptive.json",
        &["--mode", "got", "--adaptive"],
        "Write a haiku about rain",
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let frames = frames(&o);
    let expand: Vec<&Value> = frames.iter().filter(|f| f["type"] == "got_expand").collect();
    assert_eq!(expand.len(), 1);
    assert_eq!(expand[0]["node_id"], "draft");
    assert_eq!(expand[0]["nodes_added"], 1);
    assert_eq!(expand[0]["edges_added"], 2);
    let started: Vec<&str> = frames
        .iter()
        .filter(|f| f["type"] == "got_node_start")
        .map(|f| f["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        started,
        ["draft", "syllables", "polish"],
        "the sub-graph runs before the dependent"
    );
    check_golden("got-adaptive", &frames.into_iter().map(normalized).collect::<Vec<_>>());
}

#[test]
fn bounds_end_runs_with_a_clear_status() {
    // Model calls: tot stops after 3 (expand, evaluate, one step).
    let o =
        weft_run("examples/scripts/tot.json", &["--mode", "tot", "--max-model-calls", "3"], "24");
    assert_eq!(o.status.code(), Some(1));
    let f = frames(&o);
    assert_eq!(f.last().unwrap()["status"], "max_turns");
    assert!(
        stderr(&o).contains("run stopped: the run stopped after 3 model calls (tot maxModelCalls)"),
        "{}",
        stderr(&o)
    );
    // Breadth: two candidates asked for, two kept.
    let o = weft_run("examples/scripts/tot.json", &["--mode", "tot", "--breadth", "2"], "24");
    let f = frames(&o);
    let expand = f.iter().find(|f| f["type"] == "tot_expand").unwrap();
    assert_eq!(expand["candidates"].as_array().unwrap().len(), 2);
    // Depth: a path one thought deep that needs another fails at the limit; nothing is left.
    let o = weft_run("examples/scripts/tot.json", &["--mode", "tot", "--depth", "1"], "24");
    assert_eq!(o.status.code(), Some(1));
    let f = frames(&o);
    assert_eq!(f.last().unwrap()["status"], "error");
    assert!(
        stderr(&o)
            .contains("every path of the tree of thoughts failed (last: depth limit reached (1))"),
        "{}",
        stderr(&o)
    );
    // Node budget: a plan of 6 nodes over a budget of 4 is refused, and so is the retry.
    let o =
        weft_run("examples/scripts/got.json", &["--mode", "got", "--node-budget", "4"], "Seine");
    assert_eq!(o.status.code(), Some(1));
    let f = frames(&o);
    assert_eq!(f.last().unwrap()["status"], "error");
    assert!(!types(&f).contains(&"got_plan"));
    let err = stderr(&o);
    assert!(err.contains("the model's plan was refused twice"), "{err}");
    // Model calls: got stops before starting nodes it has no calls for.
    let o = weft_run(
        "examples/scripts/got.json",
        &["--mode", "got", "--max-model-calls", "2"],
        "Seine",
    );
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(frames_last_status(&o), "max_turns");
}

fn frames_last_status(o: &Output) -> String {
    frames(o).last().unwrap()["status"].as_str().unwrap().to_string()
}
