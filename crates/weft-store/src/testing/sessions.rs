//! Checks on sessions: round trips, ids, owners, commits and their conflicts, checkpoints,
//! deletion, and writes that fail alone.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use weft_core::History;
use weft_core::message::{Message, ToolResultMessage};
use weft_core::state::SessionStatus;
use weft_core::store::{Commit, OwnerScope, RunChange, SessionHead, StoreError};

use super::data::{
    assistant, call, checkpoint, commit, create, delta, head, is_invalid, is_not_found, next,
    run_state, text_of, unique, user,
};
use super::{Subject, other};

/// Head, messages and run state come back exactly as stored, from either instance.
pub async fn round_trip(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("rt");
    let calls = [call("c0", "lookup")];
    let mut tool_result = ToolResultMessage::ok(&calls[0], "done");
    tool_result.details = Some(json!({"k": [1, 2, 3]}));
    let messages = vec![
        user("hello"),
        Message::Assistant(assistant("hi", &calls)),
        Message::ToolResult(tool_result),
    ];
    let h = create(s, &id, Some("alice"), messages.clone()).await;
    let loaded = s.load(&id).await.unwrap().unwrap();
    assert_eq!(loaded.head, h);
    assert_eq!(loaded.messages, messages);
    assert_eq!(loaded.run, None);
    assert_eq!((loaded.last_seq, loaded.reserved_seq), (0, 0));

    let run = run_state("run-1");
    let (mut new, mut c) = commit(&h, vec![Message::Assistant(assistant("more", &[]))]);
    new.status = SessionStatus::AwaitingToolExecution;
    new.next_deadline = Some(1_700_000_600_400);
    new.step_count = 1;
    c.head = new.clone();
    c.run = RunChange::Set(Box::new(run.clone()));
    let mut all = messages.clone();
    all.extend(c.messages.iter().map(|m| Message::clone(m)));
    s.commit(c).await.unwrap();

    let other = other(f).await;
    for store in [s, &*other] {
        let loaded = store.load(&id).await.unwrap().unwrap();
        assert_eq!(loaded.head, new);
        assert_eq!(loaded.messages, all);
        assert_eq!(loaded.run.as_ref(), Some(&run));
        assert_eq!(store.head(&id).await.unwrap(), Some(new.clone()));
    }

    // Keep leaves the run; Clear removes it.
    let (kept, c) = commit(&new, vec![]);
    s.commit(c).await.unwrap();
    assert_eq!(s.load(&id).await.unwrap().unwrap().run, Some(run));
    let (cleared, mut c) = commit(&kept, vec![]);
    c.run = RunChange::Clear;
    s.commit(c).await.unwrap();
    let loaded = s.load(&id).await.unwrap().unwrap();
    assert_eq!(loaded.run, None);
    assert_eq!(loaded.head, cleared);
    assert_eq!(loaded.messages, all);
}

/// A taken id is refused and the stored session untouched; a malformed new session is refused.
pub async fn already_exists(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("dup");
    let h = create(s, &id, None, vec![user("first")]).await;
    let mut again = head(&id, Some("mallory"));
    again.message_count = 0;
    assert_eq!(s.create(again, History::new()).await, Err(StoreError::AlreadyExists(id.clone())));
    let loaded = s.load(&id).await.unwrap().unwrap();
    assert_eq!(loaded.head, h);
    assert_eq!(loaded.messages.len(), 1);

    let bad_id = unique("bad");
    let mut versioned = head(&bad_id, None);
    versioned.version = 1;
    assert!(is_invalid(&s.create(versioned, History::new()).await));
    let miscounted = head(&bad_id, None);
    assert!(is_invalid(&s.create(miscounted, vec![user("x")].into()).await));
    assert_eq!(s.load(&bad_id).await.unwrap(), None);
}

/// Every method on an unknown session: NotFound, or "nothing" where the answer can say so.
pub async fn not_found(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("ghost");
    assert_eq!(s.load(&id).await.unwrap(), None);
    assert_eq!(s.head(&id).await.unwrap(), None);
    let (_, c) = commit(&head(&id, None), vec![]);
    assert!(is_not_found(s.commit(c).await));
    assert!(is_not_found(s.reserve_seqs(&id, 3).await));
    assert!(is_not_found(s.append_events(&id, vec![delta(&id, 1, "x")], None).await));
    assert!(is_not_found(s.read_events(&id, 0, 10).await));
    assert!(is_not_found(s.wait_events(&id, 0, Duration::from_millis(50)).await));
    assert!(is_not_found(s.put_checkpoint(checkpoint(&id, "", "k1", 1, json!(1))).await));
    assert_eq!(s.get_checkpoint(&id, "", None).await.unwrap(), None);
    assert_eq!(s.get_checkpoint(&id, "", Some("k1")).await.unwrap(), None);
    assert!(s.list_checkpoints(&id, "").await.unwrap().is_empty());
    assert!(is_not_found(s.acquire_lease(&id, "h", Duration::from_secs(1)).await));
    assert!(is_not_found(s.renew_lease(&id, "h", Duration::from_secs(1)).await));
    s.release_lease(&id, "h").await.unwrap();
    assert!(!s.delete_session(&id, OwnerScope::Any).await.unwrap());
}

/// Messages are appended at their index over many commits, in order, never rewritten.
pub async fn append_only_order(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("log");
    let mut h = create(s, &id, None, vec![user("m0")]).await;
    let mut expected = vec!["m0".to_owned()];
    for i in 1..=40 {
        let n = 1 + i % 3;
        let batch: Vec<Message> = (0..n).map(|j| user(&format!("m{i}.{j}"))).collect();
        expected.extend((0..n).map(|j| format!("m{i}.{j}")));
        let (new, c) = commit(&h, batch);
        s.commit(c).await.unwrap();
        h = new;
    }
    let other = other(f).await;
    for store in [s, &*other] {
        let loaded = store.load(&id).await.unwrap().unwrap();
        let texts: Vec<String> = loaded.messages.iter().map(text_of).collect();
        assert_eq!(texts, expected);
        assert_eq!(loaded.head.message_count, expected.len() as u64);
        assert_eq!(loaded.head.version, 40);
    }
}

/// Two writers with the same expected version: exactly one wins, the other gets Conflict, and
/// the winner's run is what is stored. Many rounds, both instances, started together.
pub async fn concurrent_commits_conflict(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("race");
    let mut h = create(&*a, &id, None, vec![]).await;
    for round in 0..25 {
        let barrier = Arc::new(tokio::sync::Barrier::new(2));
        let mut tasks = Vec::new();
        for (name, store) in [("a", Arc::clone(&a)), ("b", Arc::clone(&b))] {
            let (mut new, mut c) = commit(&h, vec![user(&format!("{name}{round}"))]);
            new.status = SessionStatus::Running;
            c.head = new;
            c.run = RunChange::Set(Box::new(run_state(&format!("run-{name}-{round}"))));
            let barrier = Arc::clone(&barrier);
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                (name, store.commit(c).await)
            }));
        }
        let mut winners = Vec::new();
        for task in tasks {
            let (name, result) = task.await.unwrap();
            match result {
                Ok(()) => winners.push(name),
                Err(StoreError::Conflict { session_id, expected, found }) => {
                    assert_eq!(session_id, id);
                    assert_eq!((expected, found), (h.version, h.version + 1));
                }
                Err(other) => panic!("round {round}: {other}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: winners {winners:?}");
        let winner = winners[0];
        let loaded = a.load(&id).await.unwrap().unwrap();
        assert_eq!(loaded.head.status, SessionStatus::Running);
        assert_eq!(loaded.run.unwrap().run_id, format!("run-{winner}-{round}"));
        assert_eq!(text_of(loaded.messages.last().unwrap()), format!("{winner}{round}"));
        assert_eq!(loaded.messages.len(), round + 1);
        // The run ends; the next round starts from rest.
        let rest = next(&loaded.head, 0);
        let mut rest = rest;
        rest.status = SessionStatus::Completed;
        let c = Commit {
            expected_version: loaded.head.version,
            head: rest.clone(),
            messages: vec![],
            run: RunChange::Clear,
            events: vec![],
            lease: None,
        };
        a.commit(c).await.unwrap();
        h = rest;
    }
}

/// Inconsistent commits and appends are Invalid (stale ones Conflict), and write nothing.
pub async fn invalid_writes_change_nothing(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("inv");
    let h = create(s, &id, Some("olga"), vec![user("a")]).await;
    s.append_events(&id, vec![delta(&id, 1, "x"), delta(&id, 2, "y")], None).await.unwrap();
    let before = s.load(&id).await.unwrap().unwrap();

    // Wrong message count.
    let (mut new, mut c) = commit(&h, vec![user("b")]);
    new.message_count += 1;
    c.head = new;
    assert!(is_invalid(&s.commit(c).await));
    // Wrong head version.
    let (mut new, mut c) = commit(&h, vec![user("b")]);
    new.version += 1;
    c.head = new;
    assert!(is_invalid(&s.commit(c).await));
    // Events not above the last stored seq.
    let (_, mut c) = commit(&h, vec![user("b")]);
    c.events = vec![delta(&id, 2, "again")];
    assert!(is_invalid(&s.commit(c).await));
    // Events out of order.
    let (_, mut c) = commit(&h, vec![user("b")]);
    c.events = vec![delta(&id, 4, "d"), delta(&id, 3, "c")];
    assert!(is_invalid(&s.commit(c).await));
    // An event of another session.
    let (_, mut c) = commit(&h, vec![user("b")]);
    c.events = vec![delta("someone-else", 3, "c")];
    assert!(is_invalid(&s.commit(c).await));
    // A changed owner.
    let (mut new, mut c) = commit(&h, vec![user("b")]);
    new.owner = Some("mallory".into());
    c.head = new;
    assert!(is_invalid(&s.commit(c).await));
    // Stale.
    let (_, mut c) = commit(&h, vec![user("b")]);
    c.expected_version = 7;
    c.head.version = 8;
    assert_eq!(
        s.commit(c).await,
        Err(StoreError::Conflict { session_id: id.clone(), expected: 7, found: 0 })
    );
    // Appends: repeated, out of order, duplicated, zero, foreign.
    for events in [
        vec![delta(&id, 2, "dup")],
        vec![delta(&id, 3, "c"), delta(&id, 5, "e"), delta(&id, 4, "d")],
        vec![delta(&id, 3, "c"), delta(&id, 3, "c")],
        vec![delta(&id, 0, "zero")],
        vec![delta("someone-else", 3, "c")],
    ] {
        assert!(is_invalid(&s.append_events(&id, events, None).await));
    }
    assert!(is_invalid(&s.reserve_seqs(&id, 0).await));

    let after = s.load(&id).await.unwrap().unwrap();
    assert_eq!(after, before);
    let events = s.read_events(&id, 0, 100).await.unwrap();
    assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
}

/// Checkpoints: put, get by id and latest, list oldest first, replace in place, namespaces.
pub async fn checkpoints(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let id = unique("cp");
    create(s, &id, None, vec![]).await;
    let mut c1 = checkpoint(&id, "", "k1", 100, json!({"step": 1}));
    let mut c2 = checkpoint(&id, "", "k2", 200, json!({"step": 2}));
    c2.parent_id = Some("k1".into());
    let mut c3 = checkpoint(&id, "", "k3", 200, json!({"step": 3, "deep": {"x": [1, 2]}}));
    c3.parent_id = Some("k2".into());
    let sub = checkpoint(&id, "tot:1", "s1", 999, json!("sub"));
    for c in [&c1, &c2, &c3, &sub] {
        s.put_checkpoint(c.clone()).await.unwrap();
    }
    // The latest: greatest `at`, ties to the one stored last.
    assert_eq!(s.get_checkpoint(&id, "", None).await.unwrap(), Some(c3.clone()));
    assert_eq!(s.get_checkpoint(&id, "", Some("k2")).await.unwrap(), Some(c2.clone()));
    assert_eq!(s.get_checkpoint(&id, "", Some("nope")).await.unwrap(), None);
    assert_eq!(s.get_checkpoint(&id, "tot:1", None).await.unwrap(), Some(sub.clone()));
    assert_eq!(s.get_checkpoint(&id, "other", None).await.unwrap(), None);
    assert_eq!(
        s.list_checkpoints(&id, "").await.unwrap(),
        vec![c1.clone(), c2.clone(), c3.clone()]
    );
    assert_eq!(s.list_checkpoints(&id, "tot:1").await.unwrap(), vec![sub.clone()]);

    // Replacing keeps the place among equal times and changes the value.
    c2.value = json!({"step": 2, "replaced": true});
    s.put_checkpoint(c2.clone()).await.unwrap();
    assert_eq!(
        s.list_checkpoints(&id, "").await.unwrap(),
        vec![c1.clone(), c2.clone(), c3.clone()]
    );
    assert_eq!(s.get_checkpoint(&id, "", None).await.unwrap(), Some(c3.clone()));
    // Replacing with a later time makes it the latest.
    c1.at = 300;
    s.put_checkpoint(c1.clone()).await.unwrap();
    assert_eq!(s.get_checkpoint(&id, "", None).await.unwrap(), Some(c1.clone()));
    let other = other(f).await;
    assert_eq!(other.list_checkpoints(&id, "").await.unwrap(), vec![c2, c3, c1]);

    // Many sessions in one query: only the keys with a checkpoint in the namespace come back.
    let id2 = unique("cp");
    create(s, &id2, None, vec![]).await;
    s.put_checkpoint(checkpoint(&id2, "weft.abort", "run-b", 1, json!({}))).await.unwrap();
    s.put_checkpoint(checkpoint(&id, "weft.abort", "run-a", 1, json!({}))).await.unwrap();
    let key = |s: &str, k: &str| (s.to_string(), k.to_string());
    let mut keys = vec![
        key(&id, "run-a"),
        key(&id, "run-b"),
        key(&id2, "run-b"),
        key(&id2, "k1"),
        key("no-such-session", "run-a"),
    ];
    // More keys than one SQLite statement binds at once.
    keys.extend((0..300).map(|i| key(&id, &format!("run-{i}"))));
    keys.push(key(&id2, "run-b"));
    let mut found = other.find_checkpoints("weft.abort", &keys).await.unwrap();
    found.sort();
    found.dedup();
    let mut expected = vec![key(&id, "run-a"), key(&id2, "run-b")];
    expected.sort();
    assert_eq!(found, expected);
    assert!(s.find_checkpoints("", &[key(&id, "run-a")]).await.unwrap().is_empty());
    assert_eq!(s.find_checkpoints("", &[key(&id, "k1")]).await.unwrap(), vec![key(&id, "k1")]);
    assert!(s.find_checkpoints("weft.abort", &[]).await.unwrap().is_empty());
}

/// Listing and deleting see only the owner's sessions; `Any` sees all, newest first.
pub async fn owner_isolation(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let tag = unique("own");
    let alice = format!("alice-{tag}");
    let bob = format!("bob-{tag}");
    let mut ids = Vec::new();
    for (k, owner) in [Some(&alice), Some(&bob), Some(&alice), None].into_iter().enumerate() {
        let id = format!("{tag}-{k}");
        let mut h = head(&id, owner.map(String::as_str));
        h.updated_at = 1_800_000_000_000 + k as u64;
        s.create(h, History::new()).await.unwrap();
        ids.push(id);
    }
    let listed = |heads: Vec<SessionHead>| heads.into_iter().map(|h| h.id).collect::<Vec<_>>();
    assert_eq!(
        listed(s.list_sessions(OwnerScope::Owner(&alice), 10).await.unwrap()),
        vec![ids[2].clone(), ids[0].clone()]
    );
    assert_eq!(
        listed(s.list_sessions(OwnerScope::Owner(&alice), 1).await.unwrap()),
        vec![ids[2].clone()]
    );
    assert_eq!(
        listed(s.list_sessions(OwnerScope::Owner(&bob), 10).await.unwrap()),
        vec![ids[1].clone()]
    );
    assert!(s.list_sessions(OwnerScope::Owner("nobody"), 10).await.unwrap().is_empty());
    let any = listed(s.list_sessions(OwnerScope::Any, 4).await.unwrap());
    assert_eq!(any, vec![ids[3].clone(), ids[2].clone(), ids[1].clone(), ids[0].clone()]);

    // Bob cannot delete Alice's session nor the unowned one; Alice can delete hers.
    assert!(!s.delete_session(&ids[0], OwnerScope::Owner(&bob)).await.unwrap());
    assert!(!s.delete_session(&ids[3], OwnerScope::Owner(&bob)).await.unwrap());
    assert!(s.load(&ids[0]).await.unwrap().is_some());
    assert!(s.delete_session(&ids[0], OwnerScope::Owner(&alice)).await.unwrap());
    assert!(!s.delete_session(&ids[0], OwnerScope::Owner(&alice)).await.unwrap());
    assert!(s.load(&ids[0]).await.unwrap().is_none());
    assert_eq!(
        listed(s.list_sessions(OwnerScope::Owner(&alice), 10).await.unwrap()),
        vec![ids[2].clone()]
    );
    assert!(s.delete_session(&ids[3], OwnerScope::Any).await.unwrap());
}

/// Deleting a session removes everything it had (events, checkpoints, run, lease); a waiting
/// tail learns it is gone; the id can be used afresh.
pub async fn delete_removes_everything(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("del");
    let h = create(&*a, &id, Some("dora"), vec![user("x")]).await;
    let (_, mut c) = commit(&h, vec![user("y")]);
    c.run = RunChange::Set(Box::new(run_state("run-1")));
    c.events = vec![delta(&id, 1, "a"), delta(&id, 2, "b")];
    a.commit(c).await.unwrap();
    a.reserve_seqs(&id, 10).await.unwrap();
    a.put_checkpoint(checkpoint(&id, "", "k1", 1, json!(1))).await.unwrap();
    a.put_checkpoint(checkpoint(&id, "n", "k2", 2, json!(2))).await.unwrap();
    assert!(a.acquire_lease(&id, "holder", Duration::from_secs(60)).await.unwrap());

    let waiter = {
        let a = Arc::clone(&a);
        let id = id.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            (a.wait_events(&id, 2, Duration::from_secs(20)).await, started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(b.delete_session(&id, OwnerScope::Owner("dora")).await.unwrap());
    let (answer, waited) = waiter.await.unwrap();
    assert!(is_not_found(answer), "a tail on a deleted session ends");
    assert!(waited < Duration::from_secs(10), "woken by the delete: {waited:?}");

    for store in [&a, &b] {
        assert_eq!(store.load(&id).await.unwrap(), None);
        assert!(is_not_found(store.read_events(&id, 0, 10).await));
        assert_eq!(store.get_checkpoint(&id, "", None).await.unwrap(), None);
        assert!(store.list_checkpoints(&id, "n").await.unwrap().is_empty());
    }
    assert!(
        !a.list_sessions(OwnerScope::Owner("dora"), 100).await.unwrap().iter().any(|h| h.id == id)
    );

    // The id again: nothing of the old session shows through.
    create(&*a, &id, None, vec![]).await;
    let fresh = a.load(&id).await.unwrap().unwrap();
    assert_eq!(
        (fresh.last_seq, fresh.reserved_seq, fresh.run, fresh.messages.len()),
        (0, 0, None, 0)
    );
    assert!(a.read_events(&id, 0, 10).await.unwrap().is_empty());
    assert!(a.list_checkpoints(&id, "").await.unwrap().is_empty());
    assert!(
        b.acquire_lease(&id, "newcomer", Duration::from_secs(1)).await.unwrap(),
        "no lease left"
    );
    assert_eq!(a.reserve_seqs(&id, 1).await.unwrap(), 1);
}

/// Many writes at once, some failing: each caller gets its own answer, and the failures write
/// nothing while the successes are all stored (for SQLite: one batch, savepoints).
pub async fn failures_fail_only_their_caller(f: &dyn Subject) {
    let s = f.store();
    let tag = unique("iso");
    let mut heads = Vec::new();
    for k in 0..20 {
        heads.push(create(&*s, &format!("{tag}-{k}"), None, vec![]).await);
    }
    let mut tasks = Vec::new();
    for h in &heads {
        let id = h.id.clone();
        let good = {
            let (s, id) = (Arc::clone(&s), id.clone());
            tokio::spawn(async move {
                ("good", s.append_events(&id, vec![delta(&id, 1, "ok")], None).await)
            })
        };
        let bad = {
            let (s, id) = (Arc::clone(&s), id.clone());
            tokio::spawn(async move {
                (
                    "bad",
                    s.append_events(&id, vec![delta(&id, 5, "x"), delta(&id, 4, "y")], None).await,
                )
            })
        };
        let stale = {
            let s = Arc::clone(&s);
            let (_, mut c) = commit(h, vec![user("stale")]);
            c.expected_version = 3;
            c.head.version = 4;
            tokio::spawn(async move { ("stale", s.commit(c).await) })
        };
        let good_commit = {
            let s = Arc::clone(&s);
            let (_, c) = commit(h, vec![user("fresh")]);
            tokio::spawn(async move { ("commit", s.commit(c).await) })
        };
        tasks.extend([good, bad, stale, good_commit]);
    }
    for task in tasks {
        let (kind, result) = task.await.unwrap();
        match kind {
            "good" | "commit" => assert_eq!(result, Ok(()), "{kind}"),
            "bad" => assert!(is_invalid(&result), "{kind}: {result:?}"),
            _ => assert!(matches!(result, Err(StoreError::Conflict { .. })), "{kind}: {result:?}"),
        }
    }
    for h in &heads {
        let loaded = s.load(&h.id).await.unwrap().unwrap();
        assert_eq!(loaded.head.version, 1);
        assert_eq!(loaded.messages.iter().map(text_of).collect::<Vec<_>>(), vec!["fresh"]);
        let events = s.read_events(&h.id, 0, 10).await.unwrap();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1]);
    }
}

/// A write probe succeeds on a store that can write and leaves nothing behind: no session, no
/// lease, nothing due (the memory store runs the trait's default: a session created and
/// deleted).
pub async fn probe_write_leaves_nothing(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let before = s.list_sessions(OwnerScope::Any, 1000).await.unwrap();
    for _ in 0..3 {
        s.probe_write().await.unwrap();
    }
    assert_eq!(s.list_sessions(OwnerScope::Any, 1000).await.unwrap(), before);
    assert!(s.due_sessions(u64::MAX / 2, 100).await.unwrap().is_empty());
    assert_eq!(s.head("~probe").await.unwrap(), None);
}
