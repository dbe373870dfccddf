//! The store a history plays on: the memory store, a SQLite file or a Postgres schema of its
//! own. A process's life opens the store in its own runtime and its crash drops it with
//! everything else, as a killed process's connections go.
//!
//! Time: on the memory store, time is simulated (paused Tokio time). On a database it is the
//! machine's: the database does its I/O on threads of its own (SQLite's connection workers) or
//! over a socket, and a paused one-thread runtime with nothing to do moves its clock to the next
//! timer, so that a query would look as if it took until then (a crash, a lease's expiry); and
//! Postgres keeps its leases by its own clock (`now()`), which simulated time cannot move. A
//! history on a database takes seconds: the `weft-sim` command plays several at once.

use std::path::PathBuf;
use std::sync::Arc;

use sqlx::{Connection, Executor};
use weft_core::{SessionStore, StoreError};
use weft_store::{MemoryStore, PostgresStore, SqliteStore};

/// The store a history plays on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// One [`MemoryStore`] for the whole history: it outlives every life, as a database would.
    Memory,
    /// A SQLite file of the history's own, opened anew by every life; in real time.
    Sqlite,
    /// A schema of the history's own in the database at this URL, connected anew by every
    /// life; in real time.
    Postgres(String),
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // A Postgres URL may carry a password: the flag that replays a seed names it only.
        f.write_str(match self {
            Self::Memory => "memory",
            Self::Sqlite => "sqlite",
            Self::Postgres(_) => "postgres",
        })
    }
}

impl Backend {
    /// `memory`, `sqlite`, `postgres` (the URL from `WEFT_TEST_POSTGRES_URL`) or a
    /// `postgres://` URL.
    pub fn parse(name: &str) -> Result<Self, String> {
        match name {
            "memory" => Ok(Self::Memory),
            "sqlite" => Ok(Self::Sqlite),
            "postgres" => match std::env::var("WEFT_TEST_POSTGRES_URL") {
                Ok(url) if !url.trim().is_empty() => Ok(Self::Postgres(url)),
                _ => Err("--store postgres needs WEFT_TEST_POSTGRES_URL (or give the URL)".into()),
            },
            url if url.starts_with("postgres://") || url.starts_with("postgresql://") => {
                Ok(Self::Postgres(url.to_owned()))
            }
            other => Err(format!("no store {other:?}: memory, sqlite, postgres or a URL")),
        }
    }

    /// Whether the history's time is simulated (else it is the machine's).
    pub fn simulated_time(&self) -> bool {
        matches!(self, Self::Memory)
    }

    /// A process's runtime: one thread; time paused where it is simulated.
    pub(crate) fn runtime(&self) -> tokio::runtime::Runtime {
        let mut builder = tokio::runtime::Builder::new_current_thread();
        builder.enable_all().start_paused(self.simulated_time());
        builder.build().unwrap_or_else(|e| panic!("a runtime: {e}"))
    }

    /// The place of one history's data: made here, removed when dropped.
    pub(crate) fn place(&self, seed: u64) -> Place {
        let unique = format!("{}_{seed}_{:08x}", std::process::id(), fastrand::u32(..));
        match self {
            Self::Memory => Place::Memory(Arc::new(MemoryStore::default())),
            Self::Sqlite => {
                let dir = std::env::temp_dir().join(format!("weft-sim-db-{unique}"));
                Place::Sqlite(dir)
            }
            Self::Postgres(admin) => {
                let schema = format!("weft_sim_{unique}");
                Place::Postgres { admin: admin.clone(), schema }
            }
        }
    }
}

/// Where one history's data lives.
pub(crate) enum Place {
    Memory(Arc<dyn SessionStore>),
    Sqlite(PathBuf),
    Postgres { admin: String, schema: String },
}

impl Place {
    /// Makes the place: the folder of the SQLite file, the Postgres schema. Called once, in a
    /// runtime.
    pub(crate) async fn make(&self) -> Result<(), StoreError> {
        match self {
            Self::Memory(_) => Ok(()),
            Self::Sqlite(dir) => std::fs::create_dir_all(dir)
                .map_err(|e| StoreError::backend(format!("cannot create {}: {e}", dir.display()))),
            Self::Postgres { admin, schema } => {
                let mut conn = sqlx::PgConnection::connect(admin)
                    .await
                    .map_err(|e| StoreError::backend(format!("Postgres: {e}")))?;
                conn.execute(format!("CREATE SCHEMA \"{schema}\"").as_str())
                    .await
                    .map_err(|e| StoreError::backend(format!("Postgres: {e}")))?;
                Ok(())
            }
        }
    }

    /// The store, opened by a new process (in its runtime).
    pub(crate) async fn open(&self) -> Result<Arc<dyn SessionStore>, StoreError> {
        Ok(match self {
            Self::Memory(store) => Arc::clone(store),
            Self::Sqlite(dir) => Arc::new(SqliteStore::open(dir.join("weft.db")).await?),
            Self::Postgres { admin, schema } => {
                let sep = if admin.contains('?') { '&' } else { '?' };
                let url = format!("{admin}{sep}options[search_path]={schema}");
                let options = weft_store::PostgresOptions {
                    max_connections: 4,
                    ..weft_store::PostgresOptions::default()
                };
                Arc::new(PostgresStore::connect_with(&url, options).await?)
            }
        })
    }
}

impl Drop for Place {
    fn drop(&mut self) {
        match self {
            Self::Memory(_) => {}
            Self::Sqlite(dir) => {
                let _ = std::fs::remove_dir_all(dir);
            }
            Self::Postgres { admin, schema } => {
                let (admin, schema) = (admin.clone(), schema.clone());
                // Dropped outside any runtime (between lives or at the end): a runtime of its
                // own, on a thread of its own in case the caller is inside one.
                let _ = std::thread::spawn(move || {
                    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build();
                    if let Ok(rt) = rt {
                        rt.block_on(async {
                            if let Ok(mut conn) = sqlx::PgConnection::connect(&admin).await {
                                let drop = format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
                                let _ = conn.execute(drop.as_str()).await;
                            }
                        });
                    }
                })
                .join();
            }
        }
    }
}
