//! Waking waiting tails: the notification channel, what a write sends on it, and the
//! `LISTEN` loop that wakes this instance's waiters.

use std::sync::Arc;
use std::time::Duration;

use sqlx::PgConnection;
use sqlx::postgres::PgListener;
use weft_core::store::StoreError;

use crate::hub::Hub;

use super::pg;

/// `weft_events_SCHEMA`, or a hash of the schema when that would pass Postgres's 63 bytes.
pub(super) fn channel_name(schema: &str) -> String {
    let plain = format!("weft_events_{schema}");
    if plain.len() <= 63 {
        return plain;
    }
    // FNV-1a: stable across builds and platforms.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in schema.bytes() {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("weft_events_{hash:016x}")
}

/// Tells every listener, when the transaction commits, that the session changed.
pub(super) async fn notify(
    tx: &mut PgConnection,
    channel: &str,
    session_id: &str,
    seq: u64,
) -> Result<(), StoreError> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(channel)
        .bind(notify_payload(session_id, seq))
        .execute(&mut *tx)
        .await
        .map_err(pg)?;
    Ok(())
}

/// What a write of `session_id` up to `seq` notifies: `SEQ:SESSION_ID`. A payload must stay
/// under 8000 bytes: an absurdly long id wakes everyone instead.
pub(super) fn notify_payload(session_id: &str, seq: u64) -> String {
    if session_id.len() < 7000 { format!("{seq}:{session_id}") } else { seq.to_string() }
}

/// Wakes the local waiters named by notifications; wakes them all after a lost connection.
pub(super) async fn listen_loop(mut listener: PgListener, hub: Arc<Hub>) {
    let mut backoff = Duration::from_millis(100);
    loop {
        match listener.try_recv().await {
            Ok(Some(notification)) => {
                backoff = Duration::from_millis(100);
                match notification.payload().split_once(':') {
                    Some((_, session_id)) => hub.poke(session_id),
                    None => hub.poke_all(),
                }
            }
            // The connection was lost and is back (sqlx reconnects before saying so): whatever
            // was notified meanwhile is lost, so everyone looks again.
            Ok(None) => hub.poke_all(),
            Err(error) => {
                tracing::warn!(%error, "Postgres store: LISTEN connection failed; reconnecting");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(5));
                // Reconnects and listens again (the channel list is kept); once it is back,
                // wake everyone to look again.
                if listener.listen_all(std::iter::empty::<&str>()).await.is_ok() {
                    hub.poke_all();
                }
            }
        }
    }
}
