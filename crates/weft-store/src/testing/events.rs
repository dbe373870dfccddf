//! Checks on the event log: reading after every seq, reservations, waiting tails, and events
//! stored by reference to the log's messages.

use std::sync::Arc;
use std::time::{Duration, Instant};

use weft_core::AgentEvent;
use weft_core::message::{Message, ToolResultMessage};
use weft_core::state::SessionStatus;
use weft_core::step::{AgentStep, StepAnnotations};
use weft_core::store::{EventRecord, MessageSpan};

use super::data::{assistant, call, commit, create, delta, record, unique, user};
use super::{Subject, other};

/// A run's events, deltas merged before numbering, appended in blocks through both instances
/// (some in commits): reading after every seq, page by page, gives every later event once, in
/// order, and the merged deltas concatenate to the whole text.
pub async fn event_log_after_every_seq(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("ev");
    let mut h = create(&*a, &id, None, vec![]).await;

    // 300 tokens, merged into deltas of 1..=7 tokens (as a lagging reader or store would).
    let tokens: Vec<String> = (0..300).map(|i| format!("w{i} ")).collect();
    let full: String = tokens.concat();
    let mut deltas = Vec::new();
    let mut i = 0;
    let mut size = 3usize;
    while i < tokens.len() {
        size = (size * 5 + 1) % 7 + 1;
        let end = (i + size).min(tokens.len());
        deltas.push(tokens[i..end].concat());
        i = end;
    }
    let mut events: Vec<AgentEvent> = vec![
        AgentEvent::SessionStart {
            session_id: id.clone(),
            run_id: "run-1".into(),
            agent: "react".into(),
            recovers: None,
        },
        AgentEvent::TextStart { index: 0 },
    ];
    events.extend(deltas.iter().map(|d| AgentEvent::TextDelta { index: 0, delta: d.clone() }));
    events.push(AgentEvent::TextEnd { index: 0, text: full.clone() });

    let mut stored: Vec<Arc<EventRecord>> = Vec::new();
    let mut block = 0;
    let mut rest = events.as_slice();
    while !rest.is_empty() {
        block += 1;
        let n = rest.len().min(1 + block % 9);
        let store = if block.is_multiple_of(2) { &b } else { &a };
        let first = store.reserve_seqs(&id, n as u64).await.unwrap();
        let records: Vec<Arc<EventRecord>> = rest[..n]
            .iter()
            .enumerate()
            .map(|(k, e)| record(&id, first + k as u64, e.clone()))
            .collect();
        if block.is_multiple_of(3) {
            let (new, mut c) = commit(&h, vec![]);
            c.events = records.clone();
            store.commit(c).await.unwrap();
            h = new;
        } else {
            store.append_events(&id, records.clone(), None).await.unwrap();
        }
        stored.extend(records);
        rest = &rest[n..];
    }
    let last = stored.last().unwrap().seq;
    assert_eq!(last, events.len() as u64, "reserved blocks are contiguous from 1");

    let all = b.read_events(&id, 0, 10_000).await.unwrap();
    assert_eq!(all, stored);
    let text: String = all
        .iter()
        .filter_map(|e| match &e.event {
            AgentEvent::TextDelta { delta, .. } => Some(delta.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, full);

    for after in 0..=last {
        let mut got = Vec::new();
        let mut cursor = after;
        loop {
            let page = a.read_events(&id, cursor, 7).await.unwrap();
            if page.is_empty() {
                break;
            }
            assert!(page.len() <= 7);
            cursor = page.last().unwrap().seq;
            got.extend(page);
        }
        let seqs: Vec<u64> = got.iter().map(|e| e.seq).collect();
        assert_eq!(seqs, ((after + 1)..=last).collect::<Vec<_>>(), "after {after}");
        assert_eq!(got.as_slice(), &stored[after as usize..]);
    }
    let loaded = a.load(&id).await.unwrap().unwrap();
    assert_eq!((loaded.last_seq, loaded.reserved_seq), (last, last));
}

/// Reservations from concurrent callers on two instances never overlap and grow per caller;
/// appends above the reservation push later reservations above them.
pub async fn reserve_seqs_never_overlap(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("seq");
    create(&*a, &id, None, vec![]).await;
    let mut tasks = Vec::new();
    for t in 0..8u64 {
        let store = if t.is_multiple_of(2) { Arc::clone(&a) } else { Arc::clone(&b) };
        let id = id.clone();
        tasks.push(tokio::spawn(async move {
            let mut got = Vec::new();
            for k in 0..15u64 {
                let count = 1 + (t + k) % 4;
                got.push((store.reserve_seqs(&id, count).await.unwrap(), count));
            }
            got
        }));
    }
    let mut ranges = Vec::new();
    for task in tasks {
        let got = task.await.unwrap();
        for pair in got.windows(2) {
            assert!(pair[1].0 >= pair[0].0 + pair[0].1, "a caller's reservations grow: {pair:?}");
        }
        ranges.extend(got);
    }
    ranges.sort();
    assert!(ranges[0].0 >= 1);
    for pair in ranges.windows(2) {
        assert!(pair[1].0 >= pair[0].0 + pair[0].1, "overlap: {pair:?}");
    }
    let end = ranges.iter().map(|(first, n)| first + n - 1).max().unwrap();
    assert_eq!(a.load(&id).await.unwrap().unwrap().reserved_seq, end);

    // An event numbered above every reservation: the next reservation starts above it.
    b.append_events(&id, vec![delta(&id, end + 10, "late")], None).await.unwrap();
    let first = a.reserve_seqs(&id, 2).await.unwrap();
    assert_eq!(first, end + 11);
}

/// A waiting tail is woken by an append from another instance (and by a commit carrying
/// events), answers at once when events are there, and times out when nothing comes.
pub async fn wait_events_across_instances(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("tail");
    let h = create(&*a, &id, None, vec![]).await;

    // Woken by an append from the other instance.
    let waiter = {
        let a = Arc::clone(&a);
        let id = id.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (a.wait_events(&id, 0, Duration::from_secs(20)).await, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    b.append_events(&id, vec![delta(&id, 1, "hello")], None).await.unwrap();
    let (woken, waited) = waiter.await.unwrap();
    assert_eq!(woken, Ok(true));
    assert!(
        waited < Duration::from_secs(10),
        "woken by the append, not by the timeout: {waited:?}"
    );

    // Woken by a commit with events from the other instance.
    let waiter = {
        let a = Arc::clone(&a);
        let id = id.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (a.wait_events(&id, 1, Duration::from_secs(20)).await, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    let (_, mut c) = commit(&h, vec![]);
    c.events = vec![delta(&id, 2, "world")];
    b.commit(c).await.unwrap();
    let (woken, waited) = waiter.await.unwrap();
    assert_eq!(woken, Ok(true));
    assert!(waited < Duration::from_secs(10), "woken by the commit: {waited:?}");

    // Events already there: at once.
    let started = Instant::now();
    assert_eq!(a.wait_events(&id, 1, Duration::MAX).await, Ok(true));
    assert!(started.elapsed() < Duration::from_secs(10));

    // Nothing comes: false after the timeout, not before.
    let started = Instant::now();
    assert_eq!(a.wait_events(&id, 2, Duration::from_millis(300)).await, Ok(false));
    assert!(started.elapsed() >= Duration::from_millis(300));

    // Another session's events do not answer this one.
    let quiet = unique("quiet");
    create(&*a, &quiet, None, vec![]).await;
    let waiter = {
        let a = Arc::clone(&a);
        let quiet = quiet.clone();
        tokio::spawn(async move { a.wait_events(&quiet, 0, Duration::from_millis(400)).await })
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    b.append_events(&id, vec![delta(&id, 3, "!")], None).await.unwrap();
    assert_eq!(waiter.await.unwrap(), Ok(false));
}

/// Events that repeat messages of the log (`message_end`, `error`, `step_end`, `session_end`,
/// with a [`MessageSpan`]) read back whole, whether the messages were in the log before the
/// append, arrive in the same commit, or are not in the log at all (then the event is kept
/// whole); the SQL stores keep each message once: the stored event does not repeat it.
pub async fn events_repeating_messages(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("refs");
    let question = user("what is the weather in Paris, in great detail please");
    let h = create(s, &id, None, vec![question.clone()]).await;
    let calls = [call("c1", "weather")];
    let answer = Message::Assistant(assistant("let me look that up for you right now", &calls));
    let result =
        Message::ToolResult(ToolResultMessage::ok(&calls[0], "sunny and 21 degrees in Paris"));
    let (question, answer, result) = (Arc::new(question), Arc::new(answer), Arc::new(result));
    let spanned = |seq: u64, event: AgentEvent, first: u64, count: u64| {
        let mut r = Arc::unwrap_or_clone(record(&id, seq, event));
        r.messages = Some(MessageSpan { first, count });
        Arc::new(r)
    };
    let step = AgentStep {
        step_id: "step-1".into(),
        step_index: 0,
        timestamp: 1_700_000_000_200,
        llm_response: match &*answer {
            Message::Assistant(a) => a.clone(),
            _ => unreachable!(),
        },
        latency_ms: 40,
        tool_results: Vec::new(),
        annotations: StepAnnotations::default(),
    };
    // 1: the question, in the log since the session was created.
    let first = vec![spanned(1, AgentEvent::MessageEnd { message: Arc::clone(&question) }, 0, 1)];
    s.append_events(&id, first.clone(), None).await.unwrap();
    // 2–3: the answer's events arrive in the commit that appends it (and the result).
    let (h2, mut c) = commit(&h, vec![]);
    c.messages = vec![Arc::clone(&answer), Arc::clone(&result)];
    c.head.message_count = 3;
    c.events = vec![
        spanned(2, AgentEvent::MessageEnd { message: Arc::clone(&answer) }, 1, 1),
        spanned(3, AgentEvent::StepEnd { step: Arc::new(step) }, 1, 1),
    ];
    let in_commit = c.events.clone();
    s.commit(c).await.unwrap();
    let _ = h2;
    // 4–6: after the commit; 5 names a message the log does not have (kept whole).
    let stray = Arc::new(user("a message the log never got"));
    let later = vec![
        spanned(
            4,
            AgentEvent::Error { error: "it broke".into(), message: Some(Arc::clone(&answer)) },
            1,
            1,
        ),
        spanned(5, AgentEvent::MessageEnd { message: Arc::clone(&stray) }, 3, 1),
        spanned(
            6,
            AgentEvent::SessionEnd {
                session_id: id.clone(),
                status: SessionStatus::Completed,
                messages: vec![Arc::clone(&question), Arc::clone(&answer), Arc::clone(&result)],
                usage: Box::default(),
                cost: Box::default(),
            },
            0,
            3,
        ),
    ];
    s.append_events(&id, later.clone(), None).await.unwrap();
    let appended: Vec<_> = first.iter().chain(&in_commit).chain(&later).cloned().collect();

    for store in [s, &*other(f).await] {
        for after in 0..6 {
            let read = store.read_events(&id, after, 2).await.unwrap();
            let expected = &appended[after as usize..(after as usize + 2).min(6)];
            let events = |r: &[Arc<EventRecord>]| {
                r.iter().map(|e| (e.seq, e.event.clone())).collect::<Vec<_>>()
            };
            assert_eq!(events(&read), events(expected), "after {after}");
        }
    }
    for seq in [1, 2, 3, 4, 6] {
        if let Some(raw) = f.raw_event(&id, seq).await {
            for text in ["great detail", "look that up", "21 degrees"] {
                assert!(!raw.contains(text), "event {seq} repeats a message: {raw}");
            }
        }
    }
    if let Some(raw) = f.raw_event(&id, 5).await {
        assert!(raw.contains("the log never got"), "a message the log lacks is kept: {raw}");
    }
}
