//! The file's setup: WAL mode and the schema's migrations.

use std::time::Duration;

use sqlx::sqlite::SqliteConnection;
use sqlx::{Executor, Row};
use weft_core::store::StoreError;

use crate::codec::backend;

/// The schema, in order: the version of a database is the number of migrations applied
/// (`PRAGMA user_version`).
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_sessions", include_str!("../../migrations/sqlite/0001_sessions.sql")),
    (
        "0002_events_by_reference",
        include_str!("../../migrations/sqlite/0002_events_by_reference.sql"),
    ),
];

/// Puts the file in WAL mode. Switching needs an exclusive lock that the busy timeout does not
/// wait for, so two processes creating the file at once retry here.
pub(super) async fn enable_wal(
    conn: &mut SqliteConnection,
    patience: Duration,
) -> Result<(), sqlx::Error> {
    let give_up = tokio::time::Instant::now() + patience;
    loop {
        match sqlx::query("PRAGMA journal_mode = WAL").fetch_one(&mut *conn).await {
            Ok(row) => {
                let mode: String = row.try_get(0)?;
                if mode.eq_ignore_ascii_case("wal") {
                    return Ok(());
                }
                return Err(sqlx::Error::Protocol(format!(
                    "the file stays in journal mode {mode}, not WAL"
                )));
            }
            Err(e) if tokio::time::Instant::now() < give_up && is_busy(&e) => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

fn is_busy(error: &sqlx::Error) -> bool {
    // SQLITE_BUSY (5) and SQLITE_LOCKED (6), with their extended codes.
    match error {
        sqlx::Error::Database(e) => {
            e.code().and_then(|c| c.parse::<i32>().ok()).is_some_and(|c| matches!(c & 0xff, 5 | 6))
        }
        _ => false,
    }
}

/// Applies the migrations this binary knows and the file lacks, in one transaction that holds
/// the write lock (two processes opening a new file at once apply them once).
pub(super) async fn migrate(conn: &mut SqliteConnection) -> Result<(), StoreError> {
    let fail = |e: sqlx::Error| backend("migration", e);
    conn.execute("BEGIN IMMEDIATE").await.map_err(fail)?;
    let result = async {
        let row = sqlx::query("PRAGMA user_version").fetch_one(&mut *conn).await.map_err(fail)?;
        let applied: i64 = row.try_get(0).map_err(fail)?;
        let known = MIGRATIONS.len() as i64;
        if applied > known {
            return Err(StoreError::backend(format!(
                "the database is at schema version {applied}, newer than this build knows \
                 ({known}): use a newer weft"
            )));
        }
        for (name, sql) in &MIGRATIONS[usize::try_from(applied).unwrap_or(0)..] {
            sqlx::raw_sql(sql)
                .execute(&mut *conn)
                .await
                .map_err(|e| backend(format_args!("migration {name}"), e))?;
        }
        if applied < known {
            conn.execute(format!("PRAGMA user_version = {known}").as_str()).await.map_err(fail)?;
        }
        Ok(())
    }
    .await;
    match result {
        Ok(()) => conn.execute("COMMIT").await.map(|_| ()).map_err(fail),
        Err(e) => {
            let _ = conn.execute("ROLLBACK").await;
            Err(e)
        }
    }
}
