//! The wire formats' readers.

use weft_protocol::loom::LoomReceiver;

/// The Loom receiver: `data` (as text) read as NDJSON, then every session's transcript.
pub fn loom(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let mut receiver = LoomReceiver::new();
    receiver.push_text(&text);
    let transcript = receiver.finish();
    for session in &transcript.sessions {
        let _ = session.transcript();
    }
}
