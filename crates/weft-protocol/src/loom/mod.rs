//! The Loom stream protocol (`specs/stream-protocol.zh.md`): NDJSON frames with the envelope
//! `session_id` / `node_id` / `event_id`, node runs, tool, state, ToT/GoT events, and a final
//! `{"reply": …}` line per run.
//!
//! [`LoomEncoder`] projects the canonical [`AgentEvent`](weft_core::AgentEvent)s into frames;
//! [`LoomReceiver`] reads frames back (either form, with or without envelope) and merges
//! interleaved sessions and runs into a [`LoomTranscript`]; [`decode`] turns one session's frames
//! into a [`Transcript`](crate::transcript::Transcript).
//!
//! # Frames
//!
//! Every frame carries the envelope: `session_id` (from `session_start`), `node_id` (the
//! canonical node run id, on every frame from a `node_enter` to its `node_exit`; absent outside
//! node runs) and `event_id` (1, 2, 3 … one per frame, across all runs the encoder sees).
//! Events map as follows (canonical → frame type, payload):
//!
//! | canonical | frame |
//! | --- | --- |
//! | `session_start` + the user's `message_start`/`message_end` | `run_start {run_id, message, agent}`, sent once the user's message (or any other event) follows; no `message` for a resumed run |
//! | `node_enter` / `node_exit` | `node_enter {id: name}` / `node_exit {id: name, result: "Ok" \| {"Err": error}}` |
//! | `text_delta` / `thinking_delta` | `message_chunk {content, id: node name, block}` / `thought_chunk {…}` |
//! | assistant `message_end` | `usage {prompt_tokens, completion_tokens, total_tokens}` (prompt = input + cache read + cache write, completion = output) |
//! | `toolcall_start` / `toolcall_delta` | `tool_call_chunk {call_id, name, arguments_delta}` (`""` on start) |
//! | `toolcall_end` | `tool_call {call_id, name, arguments}` |
//! | `tool_execution_start` / `_delta` / `_end` | `tool_start {call_id, name}` / `tool_output {call_id, name, content}` / `tool_end {call_id, name, result, is_error}` |
//! | `toolResult` `message_end` not already sent by its execution | `tool_end {call_id, name, result, is_error}` (remote results, unknown tools, invalid arguments, denials, blocked calls, aborts) |
//! | `approval_required` | one `tool_approval {call_id, name, arguments}` per call |
//! | `awaiting_tool_execution` | `custom {value: {"kind": "awaiting_tool_execution", "tool_calls": [{id, name, arguments}…]}}` |
//! | `state_snapshot` / `state_update` | `values {state}` / `updates {id: name, state}` |
//! | `checkpoint` | `checkpoint {checkpoint_id, timestamp, step, state, thread_id, checkpoint_ns}` |
//! | `tot_*`, `got_*` | the §4.2 frames of the same names and fields |
//! | `custom` | `custom {value}` |
//! | `error` | `custom {value: {"kind": "error", "error": …}}` (the failed node's `node_exit` carries `{"Err": …}`) |
//! | `session_end` | `{session_id, node_id, event_id, "reply": text, "status": status}`, the run's last frame |
//! | `step_start`, `step_end`, `message_start`, `text_start`/`_end`\*, `thinking_start`/`_end`\* | nothing |
//!
//! \* A block's end sends a chunk only when its deltas did not say the whole block: an empty
//! block (one chunk with `content: ""`, so that every block is seen) or a final text that
//! differs from the deltas (see `text` below). Empty deltas are not sent.
//!
//! The reply is the text of the run's last assistant message that has text (`""` if none); its
//! `node_id` is the node run where that message ended (the last think node run).
//!
//! Type + payload form ([`LoomEncoder::new`]), one run:
//!
//! ```json
//! {"session_id":"s1","event_id":1,"type":"run_start","run_id":"r1","message":"hi","agent":"react"}
//! {"session_id":"s1","node_id":"think-0","event_id":2,"type":"node_enter","id":"think"}
//! {"session_id":"s1","node_id":"think-0","event_id":3,"type":"thought_chunk","content":"Hm","id":"think","block":0}
//! {"session_id":"s1","node_id":"think-0","event_id":4,"type":"message_chunk","content":"Hel","id":"think","block":1}
//! {"session_id":"s1","node_id":"think-0","event_id":5,"type":"message_chunk","content":"lo","id":"think","block":1}
//! {"session_id":"s1","node_id":"think-0","event_id":6,"type":"usage","prompt_tokens":12,"completion_tokens":5,"total_tokens":17}
//! {"session_id":"s1","node_id":"think-0","event_id":7,"type":"node_exit","id":"think","result":"Ok"}
//! {"session_id":"s1","node_id":"think-0","event_id":8,"reply":"Hello","status":"completed"}
//! ```
//!
//! Export form ([`LoomEncoder::export`]): each event frame is a single key (§6's table, plus
//! `ThoughtChunk` for `thought_chunk`) whose object holds the payload and then the envelope;
//! the reply line is the same as in the other form (it is already a single-key line, and §6
//! gives it no key):
//!
//! ```json
//! {"RunStart":{"run_id":"r1","message":"hi","agent":"react","session_id":"s1","event_id":1}}
//! {"TaskStart":{"id":"think","session_id":"s1","node_id":"think-0","event_id":2}}
//! {"Messages":{"content":"Hel","id":"think","block":1,"session_id":"s1","node_id":"think-0","event_id":4}}
//! {"TaskEnd":{"id":"think","result":"Ok","session_id":"s1","node_id":"think-0","event_id":7}}
//! {"session_id":"s1","node_id":"think-0","event_id":8,"reply":"Hello","status":"completed"}
//! ```
//!
//! # Extensions (§8: extra fields on the spec's frames)
//!
//! So that [`decode`] gives back exactly what the canonical stream said, frames carry a few
//! fields the spec does not define; receivers that do not know them lose nothing they need.
//!
//! - `block` on `message_chunk` / `thought_chunk`: the block's number, counted by the encoder
//!   over the whole stream from 0 (text and thinking blocks share the count). Chunks of one block
//!   share it; it is not the canonical `index`, which restarts with every message.
//! - `text` on a chunk: the block's whole text, sent (with `content: ""`) at the block's end when
//!   the final text is not the deltas joined. It replaces what the chunks said.
//! - `status` on the reply: how the run ended (`completed`, `awaiting_tool_execution`,
//!   `awaiting_approval`, `error`, `aborted`, `max_turns`), since the reply is the only end
//!   marker.
//! - `tool_results` on `node_exit`: the call ids whose results the node run handed to the model
//!   (the `toolResult` messages of the observe node), in the model's order. Local results are
//!   sent as `tool_end` when each execution ends, in completion order and possibly a run before
//!   they are handed over (when the turn waits for a remote call); this list says which results
//!   the model received and in what order, without resending them. A `toolResult` message
//!   outside any node run is announced by `custom {value: {"kind": "tool_results",
//!   "tool_call_ids": [id]}}`.
//!
//! # Other choices
//!
//! - `got_expand`'s payload has its own `node_id` (the expanded graph node, §8), which would
//!   collide with the envelope's: that frame is sent without the envelope `node_id`, and the
//!   receiver never reads a `got_expand`'s `node_id` as the envelope's. It belongs to the node
//!   run open at that line.
//! - Content frames outside any node run have no envelope `node_id` and no payload `id`.
//! - `tool_output` takes its `name` from the call's `tool_execution_start` (`""` if unknown).
//! - The receiver keys node runs by line order (not by `event_id`, which restarts when a new
//!   encoder serves a resumed run of the same session); `event_id`s are kept on node runs and
//!   replies.
//! - A known type whose payload lacks a field §4.2 lists, or has one of the wrong type, is an
//!   error for its line; extra fields are allowed. `arguments` may be any JSON (canonical
//!   arguments that were not valid JSON are a JSON string). `checkpoint` requires
//!   `checkpoint_id` and `state`; its other fields are checked only when present.

mod encode;
mod export;
mod receiver;
mod records;
#[cfg(test)]
mod tests;

pub use encode::LoomEncoder;
pub use receiver::{LoomReceiver, decode};
pub use records::{
    LoomBlock, LoomCustom, LoomDecodeError, LoomEvent, LoomLineError, LoomNodeResult, LoomNodeRun,
    LoomReply, LoomRun, LoomSession, LoomToolApproval, LoomToolCall, LoomToolEnd, LoomToolOutput,
    LoomToolStart, LoomTranscript, LoomUsage,
};
