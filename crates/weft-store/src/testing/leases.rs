//! Checks on leases: holding, renewing and expiring, taking over a process's leases, and the
//! sessions that are due because nobody holds them.

use std::collections::BTreeSet;
use std::time::Duration;

use weft_core::StoreError;
use weft_core::state::SessionStatus;

use super::data::{commit, create, delta, set_status, unique, user};
use super::{Subject, other};

/// Leases: acquire, refuse others, renew, release; expire after the ttl and are taken over,
/// after which the old holder's renewal fails.
pub async fn leases(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("lease");
    create(&*a, &id, None, vec![]).await;
    // Margins of 600 ms or more on either side of every expiry: the stores' round trips on a
    // busy machine stay well inside them.
    let ttl = Duration::from_millis(1000);

    assert!(a.acquire_lease(&id, "h1", ttl).await.unwrap());
    assert!(!b.acquire_lease(&id, "h2", ttl).await.unwrap());
    assert!(a.acquire_lease(&id, "h1", ttl).await.unwrap(), "the holder may take it again");
    assert!(a.renew_lease(&id, "h1", ttl).await.unwrap());
    assert!(!b.renew_lease(&id, "h2", ttl).await.unwrap(), "only the holder renews");
    b.release_lease(&id, "h2").await.unwrap();
    assert!(
        !b.acquire_lease(&id, "h2", ttl).await.unwrap(),
        "releasing another's lease does nothing"
    );

    // Renewing keeps it past the first ttl.
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(a.renew_lease(&id, "h1", ttl).await.unwrap());
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!b.acquire_lease(&id, "h2", ttl).await.unwrap(), "renewed: still held");

    // Expiry and take-over.
    tokio::time::sleep(Duration::from_millis(1300)).await;
    assert!(
        b.acquire_lease(&id, "h2", Duration::from_secs(30)).await.unwrap(),
        "expired: taken over"
    );
    assert!(!a.renew_lease(&id, "h1", ttl).await.unwrap(), "renewal fails after a take-over");
    assert!(!a.acquire_lease(&id, "h1", ttl).await.unwrap());
    a.release_lease(&id, "h1").await.unwrap();
    assert!(!a.acquire_lease(&id, "h3", ttl).await.unwrap(), "h2 still holds it");

    // Release frees it at once.
    b.release_lease(&id, "h2").await.unwrap();
    assert!(a.acquire_lease(&id, "h3", ttl).await.unwrap());
    // Absurd ttls are cut, not errors.
    assert!(a.acquire_lease(&id, "h3", Duration::MAX).await.unwrap());
    assert!(b.renew_lease(&id, "h3", Duration::MAX).await.unwrap());
    assert!(!b.acquire_lease(&id, "h4", ttl).await.unwrap());
}

/// A commit made under a lease ([`weft_core::Commit::lease`]), and an append, is taken while
/// that holder holds the session's lease — expired or not, as long as nobody took it since — and
/// refused with [`StoreError::LeaseLost`], writing nothing, once another holder took it over
/// (from any instance, by acquiring it or by a process take-over) or it was given back. A write
/// without a lease is not fenced.
pub async fn lease_fences_writes(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let id = unique("fence");
    let mut h = create(&*a, &id, None, vec![]).await;
    let fenced = |holder: &str, h: &weft_core::SessionHead, text: &str| {
        let (next, mut c) = commit(h, vec![user(text)]);
        c.lease = Some(holder.to_owned());
        (next, c)
    };
    let lost =
        |holder: &str| StoreError::LeaseLost { session_id: id.clone(), holder: holder.into() };

    // Nobody holds the lease: a fenced commit is refused.
    let (_, c) = fenced("p1/run-1", &h, "no lease");
    assert_eq!(a.commit(c).await, Err(lost("p1/run-1")));

    let short = Duration::from_millis(300);
    assert!(a.acquire_lease(&id, "p1/run-1", short).await.unwrap());
    let (next, c) = fenced("p1/run-1", &h, "held");
    a.commit(c).await.unwrap();
    h = next;
    // Expired, but nobody took it: still this holder's.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let (next, c) = fenced("p1/run-1", &h, "expired, not taken");
    a.commit(c).await.unwrap();
    h = next;

    a.append_events(&id, vec![delta(&id, 1, "a")], Some("p1/run-1")).await.unwrap();

    // Taken over from another instance: the old holder's writes are refused, the new one's
    // taken.
    assert!(b.acquire_lease(&id, "p2/run-2", Duration::from_secs(30)).await.unwrap());
    let (_, c) = fenced("p1/run-1", &h, "stale");
    assert_eq!(a.commit(c).await, Err(lost("p1/run-1")));
    let stale = a.append_events(&id, vec![delta(&id, 2, "stale")], Some("p1/run-1")).await;
    assert_eq!(stale, Err(lost("p1/run-1")));
    assert_eq!(a.read_events(&id, 1, 10).await.unwrap().len(), 0, "a refused append wrote");
    b.append_events(&id, vec![delta(&id, 2, "b")], Some("p2/run-2")).await.unwrap();
    let (next, c) = fenced("p2/run-2", &h, "new holder");
    b.commit(c).await.unwrap();
    h = next;
    let stored = a.load(&id).await.unwrap().unwrap();
    assert_eq!(stored.head.version, h.version, "the refused commit wrote nothing");
    assert_eq!(stored.messages.len(), 3);

    // Taken over with the process's identity: the dead process's holder is fenced.
    b.take_over_process_leases("p2", "heir/1", Duration::from_secs(30)).await.unwrap();
    let (_, c) = fenced("p2/run-2", &h, "dead process");
    assert_eq!(a.commit(c).await, Err(lost("p2/run-2")));
    let (next, c) = fenced("heir/1", &h, "heir");
    a.commit(c).await.unwrap();
    h = next;

    // Given back: fenced too; unfenced writes are taken whoever holds what.
    a.release_lease(&id, "heir/1").await.unwrap();
    let (_, c) = fenced("heir/1", &h, "released");
    assert_eq!(b.commit(c).await, Err(lost("heir/1")));
    let released = b.append_events(&id, vec![delta(&id, 3, "late")], Some("heir/1")).await;
    assert_eq!(released, Err(lost("heir/1")));
    let (_, c) = commit(&h, vec![user("unfenced")]);
    b.commit(c).await.unwrap();
    b.append_events(&id, vec![delta(&id, 3, "unfenced")], None).await.unwrap();
    let seqs: Vec<u64> = a.read_events(&id, 0, 10).await.unwrap().iter().map(|r| r.seq).collect();
    assert_eq!(seqs, [1, 2, 3]);
}

/// `take_over_process_leases` gives every lease held for one process (its runs' holders are
/// `process/run`) to an heir at once, expired or not, from any instance, and no other lease:
/// not a process whose name merely starts with the same characters.
pub async fn process_leases(f: &dyn Subject) {
    let a = f.store();
    let b = other(f).await;
    let ttl = Duration::from_secs(60);
    let tag = unique("proc");
    let holders = ["p1/r1", "p1/r2", "p1", "p10/r1", "p1x", "p2/r1", "p1-r1", "p1/old"];
    let mut ids = Vec::new();
    for (k, holder) in holders.iter().enumerate() {
        let id = format!("{tag}-{k}");
        create(&*a, &id, None, vec![]).await;
        // The last one has expired: it is taken over all the same.
        let held = if *holder == "p1/old" { Duration::from_millis(1) } else { ttl };
        assert!(a.acquire_lease(&id, holder, held).await.unwrap());
        ids.push(id);
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    let taken = b.take_over_process_leases("p1", "heir/1", ttl).await.unwrap();
    let mut expected: Vec<String> = ids
        .iter()
        .zip(holders)
        .filter(|(_, h)| matches!(*h, "p1/r1" | "p1/r2" | "p1" | "p1/old"))
        .map(|(id, _)| id.clone())
        .collect();
    expected.sort();
    let mut got = taken.clone();
    got.sort();
    assert_eq!(got, expected);
    for (id, holder) in ids.iter().zip(holders) {
        let taken = expected.contains(id);
        // Nobody else can take them; the heir holds them (and renews them).
        assert!(!a.acquire_lease(id, "taker", ttl).await.unwrap(), "{holder}");
        assert_eq!(a.renew_lease(id, "heir/1", ttl).await.unwrap(), taken, "{holder}");
        assert_eq!(a.renew_lease(id, holder, ttl).await.unwrap(), !taken, "{holder}");
    }
    assert!(a.take_over_process_leases("p1", "heir/2", ttl).await.unwrap().is_empty());
    assert!(a.take_over_process_leases("nobody", "heir/2", ttl).await.unwrap().is_empty());
}

/// `due_sessions` finds running sessions without a live lease and suspended ones whose deadline
/// passed, and nothing else.
pub async fn due_sessions(f: &dyn Subject) {
    let store = f.store();
    let s = &*store;
    let tag = unique("due");
    let now = 1_900_000_000_000u64;
    let mut ids = std::collections::BTreeMap::new();
    for name in [
        "run-expired",
        "run-no-lease",
        "run-live",
        "tool-due",
        "approval-due",
        "tool-later",
        "tool-no-deadline",
        "done",
        "idle",
    ] {
        let id = format!("{tag}-{name}");
        let h = create(s, &id, None, vec![]).await;
        let (status, deadline) = match name {
            "run-expired" | "run-no-lease" | "run-live" => (SessionStatus::Running, None),
            "tool-due" => (SessionStatus::AwaitingToolExecution, Some(now - 1)),
            "approval-due" => (SessionStatus::AwaitingApproval, Some(now)),
            "tool-later" => (SessionStatus::AwaitingToolExecution, Some(now + 1)),
            "tool-no-deadline" => (SessionStatus::AwaitingToolExecution, None),
            "done" => (SessionStatus::Completed, Some(now - 1000)),
            _ => (SessionStatus::Idle, None),
        };
        if status != SessionStatus::Idle {
            set_status(s, &h, status, deadline).await;
        }
        ids.insert(name, id);
    }
    assert!(
        s.acquire_lease(&ids["run-expired"], "dead", Duration::from_millis(150)).await.unwrap()
    );
    assert!(s.acquire_lease(&ids["run-live"], "alive", Duration::from_secs(60)).await.unwrap());
    tokio::time::sleep(Duration::from_millis(300)).await;

    let due: BTreeSet<String> = s.due_sessions(now, 100).await.unwrap().into_iter().collect();
    let want: BTreeSet<String> = ["run-expired", "run-no-lease", "tool-due", "approval-due"]
        .iter()
        .map(|n| ids[n].clone())
        .collect();
    assert_eq!(due, want);
    assert_eq!(s.due_sessions(now, 2).await.unwrap().len(), 2);
    // Taking the expired lease over makes it not due.
    assert!(
        s.acquire_lease(&ids["run-expired"], "recovery", Duration::from_secs(60)).await.unwrap()
    );
    let due: BTreeSet<String> = s.due_sessions(now, 100).await.unwrap().into_iter().collect();
    assert!(!due.contains(&ids["run-expired"]));
    assert_eq!(due.len(), 3);
}
