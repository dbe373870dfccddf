#![allow(clippy::unwrap_used)]

use super::*;

// ---------------------------------------------------------------------------------------------
// Random runs: a small model of the agent's machine (react mode) driving the builder above.

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len() as u64) as usize]
    }
}

const PIECES: [&str; 8] = ["a", "bc", "", "déf ", "g\nh", "\"q\"", "🙂", " "];

fn deltas(rng: &mut Rng) -> Vec<&'static str> {
    (0..rng.below(4)).map(|_| rng.pick(&PIECES)).collect()
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// What a call of the open turn waits for.
enum Slot {
    Done(ToolResultMessage),
    Run(Vec<&'static str>, &'static str, bool),
    Remote(&'static str, bool),
    Approval,
}

/// A random answer of the model at `step`: its blocks, and the calls among them.
fn random_answer(rng: &mut Rng, step: u32) -> (Vec<Blk>, Vec<ToolCall>) {
    let mut blocks = Vec::new();
    if rng.chance(40) {
        blocks.push(Blk::Thinking(deltas(rng)));
    }
    for _ in 0..rng.below(3) {
        blocks.push(if rng.chance(10) {
            Blk::TextFinal(deltas(rng), "final")
        } else {
            Blk::Text(deltas(rng))
        });
    }
    let n_calls = if step >= 3 { 0 } else { rng.below(4) };
    let mut calls = Vec::new();
    for i in 0..n_calls {
        let name = rng.pick(&["echo", "clock", "remote_x", "danger", "nope"]);
        let id = leak(format!("call_{step}_{i}"));
        let args = format!("{{\"i\":{i},\"s\":\"x y\"}}");
        let cut = rng.below(args.len() as u64) as usize;
        let pieces = vec![leak(args[..cut].to_string()), leak(args[cut..].to_string())];
        blocks.push(Blk::Call(id, name, pieces, json!({"i": i, "s": "x y"})));
        calls.push(call(id, name, json!({"i": i, "s": "x y"})));
    }
    (blocks, calls)
}

/// What becomes of each call: refused at once, run here, run remotely, or held for approval.
fn random_slots(rng: &mut Rng, calls: Vec<ToolCall>) -> Vec<(ToolCall, Slot)> {
    calls
        .into_iter()
        .map(|c| {
            let slot = match c.name.as_str() {
                "nope" => Slot::Done(result(&c.id, &c.name, "Tool nope not found", true)),
                _ if rng.chance(10) => {
                    Slot::Done(result(&c.id, &c.name, "invalid arguments", true))
                }
                "remote_x" => {
                    Slot::Remote(rng.pick(&["remote ok", "remote failed"]), rng.chance(30))
                }
                "danger" => Slot::Approval,
                _ => Slot::Run(deltas(rng), rng.pick(&["out", "", "x\ny"]), rng.chance(20)),
            };
            (c, slot)
        })
        .collect()
}

/// The answers to a suspended run: approvals granted or denied, remote results (only once no
/// approval is pending).
fn answer_slots(rng: &mut Rng, slots: &mut [(ToolCall, Slot)], approving: bool) {
    for (c, slot) in slots {
        match slot {
            Slot::Approval if rng.chance(60) => {
                *slot = Slot::Run(deltas(rng), "done", false);
            }
            Slot::Approval => {
                let text = "Tool call denied by the user";
                *slot = Slot::Done(result(&c.id, &c.name, text, true));
            }
            Slot::Remote(text, is_error) if !approving => {
                *slot = Slot::Done(result(&c.id, &c.name, text, *is_error));
            }
            _ => {}
        }
    }
}

/// One random session, as the runs it took.
fn random_session(rng: &mut Rng, session: &str) -> Vec<Vec<AgentEvent>> {
    let mut s = Stream::new(session);
    let mut runs = Vec::new();
    let mut step = 0u32;
    for _ in 0..1 + rng.below(2) {
        s.start(leak(format!("run{}", runs.len())), Some(rng.pick(&["hi", "", "do it"])));
        loop {
            let (blocks, calls) = random_answer(rng, step);
            let fails = rng.chance(8);
            let (stop, error) = match (fails, calls.is_empty()) {
                (true, _) => (StopReason::Error, Some("boom")),
                (false, true) => (StopReason::Stop, None),
                (false, false) => (StopReason::ToolUse, None),
            };
            let m =
                s.think(step, blocks, stop, Usage::new(rng.below(50), rng.below(20), 1, 0), error);
            if fails || calls.is_empty() {
                s.step_end(step, m);
                s.end(if fails { SessionStatus::Error } else { SessionStatus::Completed });
                runs.push(std::mem::take(&mut s.events));
                step += 1;
                break;
            }
            let mut slots = random_slots(rng, calls);
            loop {
                // Local calls run, ending in a random order.
                let mut execs = Vec::new();
                let mut order = Vec::new();
                for (c, slot) in &mut slots {
                    if let Slot::Run(d, output, is_error) = slot {
                        execs.push(Exec(c.clone(), d.clone(), output, *is_error));
                        order.push(leak(c.id.clone()));
                        let r = result(&c.id, &c.name, output, *is_error);
                        *slot = Slot::Done(r);
                    }
                }
                if !execs.is_empty() {
                    for i in (1..execs.len()).rev() {
                        execs.swap(i, rng.below(i as u64 + 1) as usize);
                    }
                    s.act(step, execs, &order);
                }
                let approvals: Vec<ToolCall> = slots
                    .iter()
                    .filter(|(_, st)| matches!(st, Slot::Approval))
                    .map(|(c, _)| c.clone())
                    .collect();
                let remote: Vec<ToolCall> = slots
                    .iter()
                    .filter(|(_, st)| matches!(st, Slot::Remote(..)))
                    .map(|(c, _)| c.clone())
                    .collect();
                if !approvals.is_empty() || !remote.is_empty() {
                    let status = if approvals.is_empty() {
                        SessionStatus::AwaitingToolExecution
                    } else {
                        s.approval(approvals);
                        SessionStatus::AwaitingApproval
                    };
                    if !remote.is_empty() {
                        s.awaiting(remote);
                    }
                    s.end(status);
                    runs.push(std::mem::take(&mut s.events));
                    s.start(leak(format!("run{}", runs.len())), None);
                    let approving = status == SessionStatus::AwaitingApproval;
                    answer_slots(rng, &mut slots, approving);
                    continue;
                }
                let results = slots
                    .drain(..)
                    .map(|(_, slot)| match slot {
                        Slot::Done(r) => r,
                        _ => unreachable!("every call is done"),
                    })
                    .collect();
                s.observe(step, results, m);
                break;
            }
            step += 1;
        }
    }
    runs
}

#[test]
fn random_runs_round_trip() {
    for seed in 1..=600u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let runs = random_session(&mut rng, "sess");
        let all = runs.concat();
        let expected = Transcript::from_events(&all);
        for frames in both_forms(&all) {
            check_invariants(&all, &frames);
            let got = decode(&frames).unwrap();
            assert_eq!(got, expected, "seed {seed}: {:#?}", lines(&frames));
        }
        // Each run through an encoder of its own, as a server serving each request does.
        for run in &runs {
            for frames in both_forms(run) {
                assert_eq!(decode(&frames).unwrap(), Transcript::from_events(run), "seed {seed}");
            }
        }
    }
}

#[test]
fn random_sessions_interleaved_line_by_line_merge_back() {
    for seed in 1..=300u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
        let a = random_session(&mut rng, "A").concat();
        let b = random_session(&mut rng, "B").concat();
        let fa = encode_with(LoomEncoder::new(), &a);
        let fb = encode_with(LoomEncoder::export(), &b);
        let (mut i, mut j, mut receiver) = (0, 0, LoomReceiver::new());
        while i < fa.len() || j < fb.len() {
            if j >= fb.len() || (i < fa.len() && rng.chance(50)) {
                receiver.push_line(&fa[i].data);
                i += 1;
            } else {
                receiver.push_line(&fb[j].data);
                j += 1;
            }
        }
        let t = receiver.finish();
        assert_eq!(t.errors, vec![]);
        assert_eq!(t.sessions.len(), 2);
        let runs = a.iter().filter(|e| matches!(e, AgentEvent::SessionStart { .. })).count();
        assert_eq!(t.session(Some("A")).unwrap().runs.len(), runs);
        assert_eq!(
            t.session(Some("A")).unwrap().transcript().unwrap(),
            Transcript::from_events(&a)
        );
        assert_eq!(
            t.session(Some("B")).unwrap().transcript().unwrap(),
            Transcript::from_events(&b)
        );
    }
}
