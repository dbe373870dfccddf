//! Where `weft` keeps its sessions: the `--store URL` flag and opening the store it names.
//!
//! Without `--store`, sessions go to the SQLite file `$WEFT_HOME/weft.db` (`WEFT_HOME` defaults
//! to `~/.weft`; see [`weft_store::default_path`]). `--store memory` keeps them in the process
//! only (nothing survives it), `--store sqlite:PATH` in another SQLite file, and
//! `--store postgres://…` in a Postgres database. A store that cannot be opened is a
//! configuration mistake (exit 2), reported in one line that never repeats the URL: it may hold
//! a password, and the store's own errors never do either.

use std::sync::Arc;

use anyhow::anyhow;
use clap::Args;
use weft_store::{SessionStore, SqliteStore, StoreError};

/// The help of `--store`, shared by every command that takes it.
const STORE_HELP: &str = "The session store: memory (kept in this process only), sqlite:PATH \
                          (a SQLite file) or postgres://USER@HOST/DB [default: SQLite at \
                          $WEFT_HOME/weft.db, WEFT_HOME defaulting to ~/.weft]";

/// The `--store URL` flag.
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct StoreArgs {
    // Not `Debug`-printed anywhere: the URL may hold a password.
    #[arg(long, value_name = "URL", help = STORE_HELP)]
    pub(crate) store: Option<String>,
}

impl StoreArgs {
    /// Whether `--store` keeps sessions in this process only.
    pub(crate) fn in_memory(&self) -> bool {
        self.store.as_deref().is_some_and(|url| matches!(url.trim(), "memory" | "memory:"))
    }

    /// Opens the store: the one `--store` names, else the default SQLite file. Must be called
    /// inside a Tokio runtime.
    pub(crate) async fn open(&self) -> anyhow::Result<Arc<dyn SessionStore>> {
        let opened = match self.store.as_deref() {
            Some(url) => weft_store::connect(url).await,
            None => match weft_store::default_path() {
                Ok(path) => SqliteStore::open(&path)
                    .await
                    .map(|store| Arc::new(store) as Arc<dyn SessionStore>),
                Err(error) => Err(error),
            },
        };
        opened.map_err(|error| match error {
            // `connect`'s refusals name the accepted forms.
            StoreError::Invalid(why) => anyhow!("invalid --store: {why}"),
            StoreError::Backend(why) => anyhow!("cannot open the session store: {why}"),
            other => anyhow!("cannot open the session store: {other}"),
        })
    }
}
