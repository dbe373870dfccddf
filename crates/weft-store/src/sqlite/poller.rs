//! The poller: another process's appends.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use sqlx::Row;
use sqlx::sqlite::{SqliteConnection, SqlitePool};

use crate::codec::column_u64;
use crate::hub::Hub;

/// While anyone waits, watches `PRAGMA data_version` (it changes when another connection
/// commits) and, when it changed, reads the waited sessions' last seqs: a session whose last seq
/// is not the one the poller saw before (or that is gone) has its waiters woken.
pub(super) async fn poll_loop(
    mut watcher: SqliteConnection,
    readers: SqlitePool,
    hub: Arc<Hub>,
    interval: Duration,
) {
    let mut seen_version: Option<i64> = None;
    // The last seq the poller saw of each waited session (`None`: gone).
    let mut seen: HashMap<String, Option<u64>> = HashMap::new();
    loop {
        if hub.is_idle() {
            seen.clear();
            hub.registered().await;
            continue;
        }
        tokio::time::sleep(interval).await;
        let version = match sqlx::query("PRAGMA data_version").fetch_one(&mut watcher).await {
            Ok(row) => row.try_get::<i64, _>(0).ok(),
            Err(error) => {
                tracing::warn!(%error, "SQLite store poller cannot read data_version");
                None
            }
        };
        let waited = hub.waited();
        let waited_set: HashSet<&str> = waited.iter().map(String::as_str).collect();
        seen.retain(|id, _| waited_set.contains(id.as_str()));
        let new_waiters = waited.iter().any(|id| !seen.contains_key(id));
        if version.is_some() && version == seen_version && !new_waiters {
            continue;
        }
        seen_version = version;
        for chunk in waited.chunks(256) {
            let marks = vec!["?"; chunk.len()].join(", ");
            let text = format!("SELECT id, last_seq FROM sessions WHERE id IN ({marks})");
            let mut query = sqlx::query(&text);
            for id in chunk {
                query = query.bind(id);
            }
            let found = match query.fetch_all(&readers).await {
                Ok(found) => found,
                Err(error) => {
                    tracing::warn!(%error, "SQLite store poller cannot read last seqs");
                    seen_version = None;
                    continue;
                }
            };
            let mut now: HashMap<&str, Option<u64>> =
                chunk.iter().map(|id| (id.as_str(), None)).collect();
            for row in &found {
                let Ok(id) = row.try_get::<String, _>("id") else { continue };
                let last = column_u64(row, "last_seq", "sessions", &id).ok();
                if let Some(slot) = now.get_mut(id.as_str()) {
                    *slot = last;
                }
            }
            for (id, last) in now {
                // The first look at a newly waited session pokes too: an append may have landed
                // between its waiter's own look and this one.
                if seen.insert(id.to_owned(), last) != Some(last) {
                    hub.poke(id);
                }
            }
        }
    }
}
