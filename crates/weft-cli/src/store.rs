//! Where `weft` keeps its sessions: the `--store URL` flag and opening the store it names.
//!
//! Without `--store`, sessions go to the SQLite file `$WEFT_HOME/weft.db` (`WEFT_HOME` defaults
//! to `~/.weft`; see [`weft_store::default_path`]). `--store memory` keeps them in the process
//! only (nothing survives it), `--store sqlite:PATH` in another SQLite file, and
//! `--store postgres://…` in a Postgres database. A store that cannot be opened is a
//! configuration mistake (exit 2), reported in one line that never repeats the URL: it may hold
//! a password, and the store's own errors never do either.
//!
//! Every process that keeps sessions in a store runs under a process identity held in
//! `$WEFT_HOME/processes/` ([`identity`]): a process started after one that died (`kill -9`
//! included) on the same `WEFT_HOME` takes its identity over and recovers its runs at once, instead
//! of waiting for their leases to expire.

use std::sync::Arc;

use anyhow::anyhow;
use clap::Args;
use weft_agent::ProcessIdentity;
use weft_store::{SessionStore, SqliteStore, StoreError};

/// The identity this process holds `store`'s leases under: the first free slot of
/// `$WEFT_HOME/processes` (a dead process's, if one died there), or, for a store in memory or
/// when that folder cannot be used (said on stderr), one of its own.
pub(crate) fn identity(store: &dyn SessionStore) -> ProcessIdentity {
    if store.kind() == "memory" {
        return ProcessIdentity::ephemeral();
    }
    let claimed = weft_store::weft_home().map_err(|e| e.to_string()).and_then(|home| {
        ProcessIdentity::claim(&home.join("processes")).map_err(|e| e.to_string())
    });
    match claimed {
        Ok(identity) => identity,
        Err(error) => {
            crate::term::eprint_line(&format!(
                "weft: no process identity in $WEFT_HOME/processes ({error}): runs this process \
                 leaves behind if it dies are recovered once their leases expire"
            ));
            ProcessIdentity::ephemeral()
        }
    }
}

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
            StoreError::Backend { message, .. } => {
                anyhow!("cannot open the session store: {message}")
            }
            other => anyhow!("cannot open the session store: {other}"),
        })
    }
}
