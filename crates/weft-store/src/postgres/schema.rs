//! The schema: migrations applied once, under an advisory lock.

use sqlx::postgres::PgPool;
use sqlx::{Connection, Executor, PgConnection, Row};
use weft_core::store::StoreError;

use crate::codec::backend;

/// The schema, in order, with the version each one brings the database to (its position + 1).
const MIGRATIONS: &[(&str, &str)] = &[
    ("0001_sessions", include_str!("../../migrations/postgres/0001_sessions.sql")),
    (
        "0002_events_by_reference",
        include_str!("../../migrations/postgres/0002_events_by_reference.sql"),
    ),
];

/// The advisory lock migrations run under (`weft_mig` in ASCII).
const MIGRATION_LOCK: i64 = 0x7765_6674_5f6d_6967;

/// Applies the migrations the database lacks, under an advisory lock held by one connection.
pub(super) async fn migrate(pool: &PgPool) -> Result<(), StoreError> {
    let fail = |e: sqlx::Error| backend("Postgres migration", e);
    let mut conn = pool.acquire().await.map_err(fail)?;
    sqlx::query("SELECT pg_advisory_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *conn)
        .await
        .map_err(fail)?;
    let result = apply_migrations(&mut conn).await;
    let unlocked =
        sqlx::query("SELECT pg_advisory_unlock($1)").bind(MIGRATION_LOCK).execute(&mut *conn).await;
    if unlocked.is_err() {
        // Never hand a connection that may still hold the lock back to the pool: closing it
        // ends its session, which releases the lock.
        let _ = conn.detach().close().await;
    }
    result
}

async fn apply_migrations(conn: &mut PgConnection) -> Result<(), StoreError> {
    let fail = |e: sqlx::Error| backend("Postgres migration", e);
    conn.execute(
        "CREATE TABLE IF NOT EXISTS weft_schema_migrations (\
             version    INTEGER     NOT NULL PRIMARY KEY, \
             name       TEXT        NOT NULL, \
             applied_at TIMESTAMPTZ NOT NULL DEFAULT now())",
    )
    .await
    .map_err(fail)?;
    let applied = sqlx::query("SELECT version, name FROM weft_schema_migrations ORDER BY version")
        .fetch_all(&mut *conn)
        .await
        .map_err(fail)?;
    for row in &applied {
        let version: i32 = row.try_get("version").map_err(fail)?;
        let name: String = row.try_get("name").map_err(fail)?;
        let known = usize::try_from(version - 1).ok().and_then(|i| MIGRATIONS.get(i));
        match known {
            Some((known, _)) if *known == name => {}
            Some((known, _)) => {
                return Err(StoreError::backend(format!(
                    "Postgres migration {version} is {name:?} in the database but {known:?} in \
                     this build"
                )));
            }
            None => {
                return Err(StoreError::backend(format!(
                    "the database has schema version {version} ({name}), newer than this build \
                     knows ({}): use a newer weft",
                    MIGRATIONS.len()
                )));
            }
        }
    }
    for (i, (name, sql)) in MIGRATIONS.iter().enumerate().skip(applied.len()) {
        let version = i32::try_from(i + 1).unwrap_or(i32::MAX);
        let mut tx = conn.begin().await.map_err(fail)?;
        sqlx::raw_sql(sql)
            .execute(&mut *tx)
            .await
            .map_err(|e| backend(format_args!("Postgres migration {name}"), e))?;
        sqlx::query("INSERT INTO weft_schema_migrations (version, name) VALUES ($1, $2)")
            .bind(version)
            .bind(*name)
            .execute(&mut *tx)
            .await
            .map_err(fail)?;
        tx.commit().await.map_err(fail)?;
    }
    Ok(())
}
