//! One conformance suite for every `SessionStore` backend.
//!
//! The checks are the library's (`weft_store::testing`, behind the `testing` feature, which this
//! crate's own tests enable): each is a `pub async fn name(f: &dyn Subject)`. The `conformance!`
//! macro below runs every check against the memory store (`memory::name`), a SQLite store on a
//! temporary file (`sqlite::name`) and a Postgres store in a fresh schema (`postgres::name`, when
//! `WEFT_TEST_POSTGRES_URL` is set: without it the Postgres tests fail, unless `WEFT_ALLOW_SKIP`
//! has `postgres`).
//!
//! `Subject::other` opens a second instance on the same database (for memory: a clone sharing
//! the same map), so that checks can prove what crosses instances: conflicts, reservations,
//! wake-ups. Below the checks: tests of one backend's own behaviour.

#![allow(clippy::unwrap_used, missing_docs, unreachable_pub)]

use std::sync::Arc;
use std::time::Duration;

use sqlx::{Connection, Executor, Row};
use weft_core::AgentEvent;
use weft_core::store::{MessageSpan, SessionStore, StoreError};
use weft_store::testing::{Subject, SubjectFuture, commit, create, delta, record, user};
use weft_store::{MemoryStore, PostgresOptions, PostgresStore, SqliteOptions, SqliteStore};

// ---------------------------------------------------------------------------------------------
// Fixtures.

enum Reopen {
    Memory(MemoryStore),
    Sqlite(std::path::PathBuf),
    Postgres { admin_url: String, url: String, schema: String },
}

pub struct Fixture {
    store: Arc<dyn SessionStore>,
    reopen: Reopen,
    _dir: Option<tempfile::TempDir>,
}

impl Subject for Fixture {
    fn store(&self) -> Arc<dyn SessionStore> {
        Arc::clone(&self.store)
    }

    /// Another instance on the same database.
    fn other(&self) -> SubjectFuture<'_, Result<Arc<dyn SessionStore>, StoreError>> {
        Box::pin(async move {
            let other: Arc<dyn SessionStore> = match &self.reopen {
                Reopen::Memory(store) => Arc::new(store.clone()),
                Reopen::Sqlite(path) => Arc::new(SqliteStore::open(path).await?),
                Reopen::Postgres { url, .. } => Arc::new(pg_store(url).await),
            };
            Ok(other)
        })
    }

    /// The `event` column of a stored event as the database holds it (`None` for memory).
    fn raw_event<'a>(&'a self, session_id: &'a str, seq: u64) -> SubjectFuture<'a, Option<String>> {
        Box::pin(self.raw_event_text(session_id, seq))
    }
}

impl Fixture {
    async fn raw_event_text(&self, session_id: &str, seq: u64) -> Option<String> {
        let query = "SELECT event FROM events WHERE session_id = $1 AND seq = $2";
        match &self.reopen {
            Reopen::Memory(_) => None,
            Reopen::Sqlite(path) => {
                let mut conn =
                    sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display()))
                        .await
                        .unwrap();
                let row = sqlx::query(query)
                    .bind(session_id)
                    .bind(seq as i64)
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
                Some(row.get("event"))
            }
            Reopen::Postgres { url, .. } => {
                let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
                let row = sqlx::query(query)
                    .bind(session_id)
                    .bind(seq as i64)
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
                Some(row.get("event"))
            }
        }
    }

    async fn finish(self) {
        let Fixture { store, reopen, _dir } = self;
        drop(store);
        if let Reopen::Postgres { admin_url, schema, .. } = reopen {
            let mut admin = sqlx::PgConnection::connect(&admin_url).await.unwrap();
            admin
                .execute(format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE").as_str())
                .await
                .unwrap();
        }
    }
}

async fn memory_fixture() -> Fixture {
    let store = MemoryStore::new();
    Fixture { store: Arc::new(store.clone()), reopen: Reopen::Memory(store), _dir: None }
}

async fn sqlite_fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let store = SqliteStore::open(&path).await.unwrap();
    Fixture { store: Arc::new(store), reopen: Reopen::Sqlite(path), _dir: Some(dir) }
}

/// The test database's URL, or `None` when the caller let the Postgres tests skip.
fn postgres_url() -> Option<String> {
    weft_test_support::postgres_url("the Postgres store tests")
}

async fn pg_store(url: &str) -> PostgresStore {
    let options = PostgresOptions { max_connections: 4, ..PostgresOptions::default() };
    PostgresStore::connect_with(url, options).await.unwrap()
}

/// The URL with `search_path` set to `schema`.
fn with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}options[search_path]={schema}")
}

/// A fresh, empty schema for one test (schemas of runs older than an hour are dropped, so a
/// crashed run leaves nothing for long).
async fn fresh_schema(admin_url: &str) -> String {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs();
    let mut admin = sqlx::PgConnection::connect(admin_url).await.unwrap();
    let old = sqlx::query("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'weft\\_t\\_%'")
        .fetch_all(&mut admin)
        .await
        .unwrap();
    for row in old {
        let name: String = row.get(0);
        let born = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok()).unwrap_or(now);
        if born + 3600 < now {
            let _ =
                admin.execute(format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE").as_str()).await;
        }
    }
    let schema = format!("weft_t_{now}_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    admin.execute(format!("CREATE SCHEMA \"{schema}\"").as_str()).await.unwrap();
    schema
}

async fn postgres_fixture() -> Option<Fixture> {
    let admin_url = postgres_url()?;
    let schema = fresh_schema(&admin_url).await;
    let url = with_schema(&admin_url, &schema);
    let store = pg_store(&url).await;
    Some(Fixture {
        store: Arc::new(store),
        reopen: Reopen::Postgres { admin_url, url, schema },
        _dir: None,
    })
}

/// For each check, a test per backend: `memory::name`, `sqlite::name`, `postgres::name`; and
/// `CHECKS`, the names, which `every_check_is_run` compares with the library's list.
macro_rules! conformance {
    ($($check:ident),* $(,)?) => {
        const CHECKS: &[&str] = &[$(stringify!($check)),*];
        mod memory {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let f = super::memory_fixture().await;
                    weft_store::testing::$check(&f).await;
                    f.finish().await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let f = super::sqlite_fixture().await;
                    weft_store::testing::$check(&f).await;
                    f.finish().await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $check() {
                    let Some(f) = super::postgres_fixture().await else { return };
                    weft_store::testing::$check(&f).await;
                    f.finish().await;
                }
            )*
        }
    };
}

conformance!(
    round_trip,
    already_exists,
    not_found,
    append_only_order,
    concurrent_commits_conflict,
    invalid_writes_change_nothing,
    event_log_after_every_seq,
    reserve_seqs_never_overlap,
    checkpoints,
    owner_isolation,
    wait_events_across_instances,
    leases,
    lease_fences_writes,
    process_leases,
    due_sessions,
    delete_removes_everything,
    failures_fail_only_their_caller,
    events_repeating_messages,
    probe_write_leaves_nothing,
);

/// The list above names every check of the library's suite.
#[test]
fn every_check_is_run() {
    let library: Vec<&str> = weft_store::testing::CHECKS.iter().map(|c| c.name).collect();
    assert_eq!(CHECKS, library.as_slice());
}

fn is_invalid<T: std::fmt::Debug>(r: &Result<T, StoreError>) -> bool {
    matches!(r, Err(StoreError::Invalid(_)))
}

// ---------------------------------------------------------------------------------------------
// Backend-specific.

/// Another connection to the file that holds its write lock until `release` resolves: writes
/// queued meanwhile wait for it, and the writer takes them all into its next transaction.
async fn holding_the_write_lock<T>(
    path: &std::path::Path,
    planted: Option<&str>,
    writes: impl std::future::Future<Output = T>,
) -> T {
    let mut raw =
        sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display())).await.unwrap();
    raw.execute("BEGIN IMMEDIATE").await.unwrap();
    if let Some(statement) = planted {
        raw.execute(statement).await.unwrap();
    }
    // Polled first, the writes are all queued before the lock is let go.
    let release = async {
        tokio::task::yield_now().await;
        raw.execute("COMMIT").await.unwrap();
    };
    let (answers, ()) = futures::join!(writes, release);
    answers
}

/// Writes queued together are applied in one transaction, a failing one included, and each
/// caller gets its own answer. (The file's write lock is held elsewhere while they are queued,
/// so the batch is deterministic.)
#[tokio::test(flavor = "current_thread")]
async fn sqlite_group_commit_is_one_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let mut heads = Vec::new();
    // Few enough that Tokio's cooperative budget never makes a send yield mid-way.
    for k in 0..20 {
        heads.push(create(&store, &format!("g{k}"), None, vec![]).await);
    }
    let before = store.write_stats();
    let writes = heads.iter().map(|h| {
        let id = h.id.clone();
        let store = &store;
        async move {
            let good = store.append_events(&id, vec![delta(&id, 1, "a"), delta(&id, 2, "b")], None);
            let bad = store.append_events(&id, vec![delta(&id, 1, "dup")], None);
            futures::join!(good, bad)
        }
    });
    let answers = holding_the_write_lock(&path, None, futures::future::join_all(writes)).await;
    let after = store.write_stats();
    assert_eq!(after.transactions - before.transactions, 1, "{before:?} → {after:?}");
    assert_eq!(after.operations - before.operations, 40);
    for (good, bad) in answers {
        assert_eq!(good, Ok(()));
        assert!(is_invalid(&bad), "{bad:?}");
    }
    for h in &heads {
        let events = store.read_events(&h.id, 0, 10).await.unwrap();
        assert_eq!(events.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
    }
}

/// Appends that come close together gather into one transaction (`group_commit`): the second
/// arrives well after the first was queued, and still joins its transaction. With the gather off,
/// the same appends are two transactions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_appends_close_together_share_a_transaction() {
    for (gather, transactions) in [(Duration::from_secs(2), 1), (Duration::ZERO, 2)] {
        let dir = tempfile::tempdir().unwrap();
        let options = SqliteOptions { group_commit: gather, ..SqliteOptions::default() };
        let store = SqliteStore::open_with(dir.path().join("weft.db"), options).await.unwrap();
        create(&store, "a", None, vec![]).await;
        // Just written: the next appends come close after a transaction.
        create(&store, "b", None, vec![]).await;
        let before = store.write_stats();
        let first = store.append_events("a", vec![delta("a", 1, "x")], None);
        let second = async {
            // 200 ms after the first: a tenth of the gather.
            tokio::time::sleep(Duration::from_millis(200)).await;
            store.append_events("b", vec![delta("b", 1, "y")], None).await
        };
        let (first, second) = futures::join!(first, second);
        assert_eq!((first, second), (Ok(()), Ok(())));
        let after = store.write_stats();
        assert_eq!(after.operations - before.operations, 2);
        assert_eq!(
            after.transactions - before.transactions,
            transactions,
            "gather {gather:?}: {before:?} -> {after:?}"
        );
    }
}

/// An operation that fails half-way through its writes (here: a message row already where the
/// commit appends, planted behind the store's back) is rolled back alone: the head it had
/// already rewritten is restored, and the other operations of the same transaction are stored.
#[tokio::test(flavor = "current_thread")]
async fn sqlite_failed_operation_rolls_back_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let mut heads = Vec::new();
    for k in 0..6 {
        heads.push(create(&store, &format!("s{k}"), None, vec![user("m0")]).await);
    }
    let before = store.write_stats();
    let commits = heads.iter().map(|h| {
        let (_, mut c) = commit(h, vec![user("m1")]);
        c.events = vec![delta(&h.id, 1, "e")];
        store.commit(c)
    });
    let planted = "INSERT INTO messages (session_id, idx, message) VALUES ('s3', 1, '{}')";
    let answers =
        holding_the_write_lock(&path, Some(planted), futures::future::join_all(commits)).await;
    assert_eq!(store.write_stats().transactions - before.transactions, 1, "one batch");
    for (h, answer) in heads.iter().zip(answers) {
        let loaded_head = store.head(&h.id).await.unwrap().unwrap();
        let events = store.read_events(&h.id, 0, 10).await.unwrap();
        if h.id == "s3" {
            assert!(matches!(answer, Err(StoreError::Backend { .. })), "{answer:?}");
            assert_eq!(loaded_head, *h, "the head rewrite was rolled back");
            assert!(events.is_empty());
        } else {
            assert_eq!(answer, Ok(()));
            assert_eq!(loaded_head.version, 1);
            assert_eq!(events.len(), 1);
            assert_eq!(store.load(&h.id).await.unwrap().unwrap().messages.len(), 2);
        }
    }
}

/// A corrupt row is a Backend error naming the table and the session, never a panic.
#[tokio::test]
async fn sqlite_corrupt_rows_are_backend_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let store = SqliteStore::open(&path).await.unwrap();
    create(&store, "s1", None, vec![user("a"), user("b")]).await;
    store.append_events("s1", vec![delta("s1", 1, "x")], None).await.unwrap();

    let mut raw =
        sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display())).await.unwrap();
    raw.execute("UPDATE messages SET message = '{\"role\":' WHERE session_id = 's1' AND idx = 1")
        .await
        .unwrap();
    raw.execute("UPDATE events SET event = '[]' WHERE session_id = 's1'").await.unwrap();
    raw.execute("UPDATE sessions SET last_seq = -4 WHERE id = 's1'").await.unwrap();

    for error in [
        store.load("s1").await.unwrap_err(),
        store.read_events("s1", 0, 10).await.unwrap_err(),
        store.wait_events("s1", 0, Duration::from_millis(10)).await.unwrap_err(),
    ] {
        let StoreError::Backend { message: text, .. } = &error else { panic!("{error:?}") };
        assert!(text.contains("s1"), "{text}");
        assert!(
            text.contains("messages") || text.contains("events") || text.contains("sessions"),
            "{text}"
        );
    }
    raw.execute("UPDATE sessions SET head = 'null' WHERE id = 's1'").await.unwrap();
    let error = store.head("s1").await.unwrap_err();
    assert!(
        matches!(&error, StoreError::Backend { message: t, .. } if t.contains("sessions") && t.contains("s1")),
        "{error:?}"
    );
    // The decoder's own error is kept as the source.
    assert!(std::error::Error::source(&error).is_some(), "{error:?}");
}

/// A store whose writer has stopped (it ran on a runtime that is gone) says it is closed, which
/// nothing retries; reads, which need no writer, still answer.
#[test]
fn sqlite_writer_gone_is_closed_not_transient() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let opened = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = opened.block_on(async {
        let store = SqliteStore::open(&path).await.unwrap();
        create(&store, "s1", None, vec![user("a")]).await;
        // What the reads spawned on this runtime (the read pool hands a connection back in a
        // task of its own) ends before the runtime does: once, under load, a read on the next
        // runtime waited for ever for a connection a dropped task still held.
        tokio::time::sleep(Duration::from_millis(50)).await;
        store
    });
    // The writer stops with the runtime that opened the store, as a task of it would.
    drop(opened);
    let other = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    other.block_on(async {
        let append = store.append_events("s1", vec![delta("s1", 1, "x")], None);
        let error = within("append_events", append).await.unwrap_err();
        assert!(matches!(&error, StoreError::Closed(_)), "{error:?}");
        assert!(!error.is_transient(), "a stopped writer never comes back");
        assert!(error.to_string().contains("writer"), "{error}");
        let error = within("reserve_seqs", store.reserve_seqs("s1", 10)).await.unwrap_err();
        assert!(matches!(error, StoreError::Closed(_)), "{error:?}");
        let head = within("head", store.head("s1")).await;
        assert_eq!(head.unwrap().unwrap().id, "s1");
    });
}

/// `answer`, within a bound: a hang fails the test, naming the step, instead of the whole run.
async fn within<T>(what: &str, answer: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(Duration::from_secs(30), answer).await {
        Ok(answer) => answer,
        Err(_) => panic!("{what} did not answer within 30 s"),
    }
}

/// A file at a schema version newer than this build is refused, not damaged.
#[tokio::test]
async fn sqlite_refuses_newer_schema() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    drop(SqliteStore::open(&path).await.unwrap());
    let mut raw =
        sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display())).await.unwrap();
    raw.execute("PRAGMA user_version = 99").await.unwrap();
    let error = SqliteStore::open(&path).await.err().unwrap();
    assert!(
        matches!(&error, StoreError::Backend { message: t, .. } if t.contains("newer")),
        "{error:?}"
    );
}

/// A file written by a build that knew only the first migration is upgraded in place: its
/// events, stored whole, read back unchanged, and new events are stored by reference.
#[tokio::test]
async fn sqlite_upgrades_a_version_1_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    let store = SqliteStore::open(&path).await.unwrap();
    create(&store, "old", None, vec![user("an old question")]).await;
    drop(store);
    let mut raw =
        sqlx::SqliteConnection::connect(&format!("sqlite:{}", path.display())).await.unwrap();
    // Back to version 1's schema, with an event as version 1 stored it.
    raw.execute(
        "ALTER TABLE events DROP COLUMN msg_first; ALTER TABLE events DROP COLUMN msg_count; \
         PRAGMA user_version = 1",
    )
    .await
    .unwrap();
    let old =
        record("old", 1, AgentEvent::MessageEnd { message: Arc::new(user("an old question")) });
    sqlx::query("INSERT INTO events (session_id, seq, run_id, node_id, at, event) VALUES (?, 1, ?, NULL, ?, ?)")
        .bind("old")
        .bind(&*old.run_id)
        .bind(old.at as i64)
        .bind(serde_json::to_string(&old.event).unwrap())
        .execute(&mut raw)
        .await
        .unwrap();
    drop(raw);

    let store = SqliteStore::open(&path).await.unwrap();
    let read = store.read_events("old", 0, 10).await.unwrap();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].event, old.event);
    let logged = Arc::clone(&store.load("old").await.unwrap().unwrap().messages.shared()[0]);
    let mut new =
        Arc::unwrap_or_clone(record("old", 2, AgentEvent::MessageEnd { message: logged }));
    new.messages = Some(MessageSpan::one(0));
    store.append_events("old", vec![Arc::new(new.clone())], None).await.unwrap();
    let read = store.read_events("old", 1, 10).await.unwrap();
    assert_eq!(*read[0], new);
}

/// Several stores opening one new file at once all succeed (migrations applied once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_concurrent_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested/dir/weft.db");
    let opens = (0..4).map(|_| SqliteStore::open(&path));
    let stores = futures::future::join_all(opens).await;
    let stores: Vec<SqliteStore> = stores.into_iter().map(Result::unwrap).collect();
    create(&stores[0], "x", None, vec![]).await;
    assert!(stores[3].head("x").await.unwrap().is_some());
}

/// `connect` understands every accepted form and explains the others.
#[tokio::test]
async fn connect_urls() {
    let dir = tempfile::tempdir().unwrap();
    let memory = weft_store::connect("memory").await.unwrap();
    assert_eq!(memory.kind(), "memory");
    let a = dir.path().join("a.db");
    let sqlite = weft_store::connect(&format!("sqlite:{}", a.display())).await.unwrap();
    assert_eq!(sqlite.kind(), "sqlite");
    create(&*sqlite, "s", None, vec![]).await;
    drop(sqlite);
    let again = weft_store::connect(&format!("sqlite://{}", a.display())).await.unwrap();
    assert!(again.head("s").await.unwrap().is_some(), "sqlite:// names the same file");
    for bad in [
        "mysql://user:secret@localhost/db",
        "redis:x",
        "sqlite:",
        "sqlite::memory:",
        "sqlite://x.db?mode=rwc",
        "",
    ] {
        let error = weft_store::connect(bad).await.err().unwrap();
        let StoreError::Invalid(text) = &error else { panic!("{bad}: {error:?}") };
        assert!(text.contains("sqlite:PATH") && text.contains("postgres://"), "{text}");
        assert!(!text.contains("secret"), "{text}");
    }
    if let Some(url) = postgres_url() {
        let schema = fresh_schema(&url).await;
        let pg = weft_store::connect(&with_schema(&url, &schema)).await.unwrap();
        assert_eq!(pg.kind(), "postgres");
        drop(pg);
        let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
        admin.execute(format!("DROP SCHEMA \"{schema}\" CASCADE").as_str()).await.unwrap();
    }
}

/// Replicas starting at once on an empty schema: migrations run once, under the advisory lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_concurrent_migrations() {
    let Some(admin_url) = postgres_url() else { return };
    let schema = fresh_schema(&admin_url).await;
    let url = with_schema(&admin_url, &schema);
    let opens = (0..4).map(|_| {
        let url = url.clone();
        async move {
            let options = PostgresOptions { max_connections: 2, ..PostgresOptions::default() };
            PostgresStore::connect_with(&url, options).await
        }
    });
    let stores: Vec<PostgresStore> =
        futures::future::join_all(opens).await.into_iter().map(Result::unwrap).collect();
    assert!(stores.iter().all(|s| s.channel() == format!("weft_events_{schema}")));
    let mut admin = sqlx::PgConnection::connect(&url).await.unwrap();
    let applied: i64 = sqlx::query("SELECT count(*) FROM weft_schema_migrations")
        .fetch_one(&mut admin)
        .await
        .unwrap()
        .get(0);
    assert_eq!(applied, 2, "each of the two migrations applied once");
    drop(stores);
    admin.execute(format!("DROP SCHEMA \"{schema}\" CASCADE").as_str()).await.unwrap();
}

/// `run_all`, as a backend outside the crate runs the suite, passes on the memory store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_all_on_memory() {
    weft_store::testing::run_all(memory_fixture).await;
}
