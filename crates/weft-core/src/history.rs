//! [`History`]: a conversation that many owners share without copying it.
//!
//! A session's message log is read far more often than it changes: every model call hands the
//! whole conversation to a provider, every `message_end`, `step_end` and `session_end` repeats
//! messages of it, and a store commits the new ones. A `History` is a list of shared messages
//! behind one shared pointer, so each of those is a reference count, not a copy, and the cost
//! of a turn does not grow with the length of the conversation:
//!
//! * cloning a `History` (a model request, a snapshot) is one reference count;
//! * each message is an [`Arc<Message>`]: events and stores hold the log's own message;
//! * appending copies the list only while someone else still holds the old one (copy on
//!   write); a provider drops its request when its stream ends, so in a run's loop appending is
//!   amortised O(1).
//!
//! Its JSON form is the plain array of messages.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::message::Message;

/// An append-only, cheaply shared list of messages. See the [module docs](self).
#[derive(Clone, Default, PartialEq)]
pub struct History(Arc<Vec<Arc<Message>>>);

impl History {
    /// An empty history.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a message (without the spare room its vectors and strings had:
    /// [`Message::shrink_to_fit`]).
    pub fn push(&mut self, mut message: Message) {
        message.shrink_to_fit();
        self.push_shared(Arc::new(message));
    }

    /// Appends a shared message (one that events or requests hold too).
    pub fn push_shared(&mut self, message: Arc<Message>) {
        Arc::make_mut(&mut self.0).push(message);
    }

    /// Appends messages (shrunk as by [`push`](Self::push)).
    pub fn extend(&mut self, messages: impl IntoIterator<Item = Message>) {
        Arc::make_mut(&mut self.0).extend(messages.into_iter().map(shared));
    }

    /// The messages, in order.
    pub fn iter(&self) -> Iter<'_> {
        Iter(self.0.iter())
    }

    /// The shared messages, in order.
    pub fn shared(&self) -> &[Arc<Message>] {
        &self.0
    }

    /// The shared messages from position `from` on (none when `from` is past the end).
    pub fn shared_from(&self, from: usize) -> &[Arc<Message>] {
        self.0.get(from..).unwrap_or_default()
    }

    /// The message at `index`.
    pub fn get(&self, index: usize) -> Option<&Message> {
        self.0.get(index).map(|m| &**m)
    }

    /// The last message.
    pub fn last(&self) -> Option<&Message> {
        self.0.last().map(|m| &**m)
    }

    /// Plain copies of the messages (for callers that want to own them).
    pub fn to_vec(&self) -> Vec<Message> {
        self.iter().cloned().collect()
    }

    /// Whether two histories are the same shared list (not merely equal).
    pub fn ptr_eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Deref for History {
    type Target = [Arc<Message>];

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl fmt::Debug for History {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

/// The messages of a [`History`], in order.
#[derive(Clone)]
pub struct Iter<'a>(std::slice::Iter<'a, Arc<Message>>);

impl<'a> Iterator for Iter<'a> {
    type Item = &'a Message;

    fn next(&mut self) -> Option<Self::Item> {
        self.0.next().map(|m| &**m)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.0.next_back().map(|m| &**m)
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl<'a> IntoIterator for &'a History {
    type Item = &'a Message;
    type IntoIter = Iter<'a>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl From<Vec<Message>> for History {
    fn from(messages: Vec<Message>) -> Self {
        // Not `collect()`: collecting a `Vec<Message>` into pointers reuses its (much larger)
        // buffer, which would then stay allocated for as long as the history lives.
        // Each message without its spare room (a parsed one-block content vector has room for
        // four).
        let mut list = Vec::with_capacity(messages.len());
        list.extend(messages.into_iter().map(shared));
        Self(Arc::new(list))
    }
}

/// A message without its spare room, shared.
fn shared(mut message: Message) -> Arc<Message> {
    message.shrink_to_fit();
    Arc::new(message)
}

impl From<Vec<Arc<Message>>> for History {
    fn from(messages: Vec<Arc<Message>>) -> Self {
        Self(Arc::new(messages))
    }
}

impl<M: Into<Arc<Message>>> FromIterator<M> for History {
    fn from_iter<I: IntoIterator<Item = M>>(iter: I) -> Self {
        let mut shared: Vec<Arc<Message>> = iter.into_iter().map(Into::into).collect();
        shared.shrink_to_fit();
        Self(Arc::new(shared))
    }
}

impl PartialEq<Vec<Message>> for History {
    fn eq(&self, other: &Vec<Message>) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b)
    }
}

impl Serialize for History {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for History {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Vec::<Message>::deserialize(deserializer).map(Self::from)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::UserMessage;

    fn user(text: &str) -> Message {
        Message::User(UserMessage::text(text))
    }

    #[test]
    fn a_clone_shares_the_list_and_appending_copies_only_while_it_is_held() {
        let mut history = History::from(vec![user("a"), user("b")]);
        let first = Arc::clone(&history.shared()[0]);
        let request = history.clone();
        assert!(request.ptr_eq(&history), "a clone is a reference, not a copy");
        history.push(user("c"));
        assert!(!request.ptr_eq(&history), "appending while a clone is held copies the list");
        assert_eq!(request.len(), 2, "the clone does not see the new message");
        assert!(Arc::ptr_eq(&first, &history.shared()[0]), "the messages themselves are shared");
        drop(request);
        let before = Arc::as_ptr(&history.0);
        history.push(user("d"));
        history.push(user("e"));
        // Unshared: appended in place (the Arc's allocation is the same one).
        assert_eq!(before, Arc::as_ptr(&history.0));
        assert_eq!(history.len(), 5);
    }

    #[test]
    fn a_history_made_from_messages_keeps_no_larger_buffer() {
        let messages: Vec<Message> = (0..20).map(|i| user(&i.to_string())).collect();
        let history = History::from(messages);
        assert_eq!(history.0.capacity(), 20);
        let collected: History = (0..20).map(|i| user(&i.to_string())).collect();
        assert_eq!(collected.0.capacity(), 20);
    }

    #[test]
    fn messages_taken_keep_no_spare_room() {
        let json = r#"[
            {"role": "user", "content": [{"type": "text", "text": "hello"}]},
            {"role": "assistant", "content": [{"type": "text", "text": "hi"}],
             "stopReason": "stop", "provider": "faux", "model": "m"}
        ]"#;
        let history: History = serde_json::from_str(json).unwrap();
        let Message::User(user) = &*history.shared()[0] else { panic!("a user message") };
        assert_eq!(user.content.capacity(), 1, "a parsed one-block vector has room for one");
        let Message::Assistant(reply) = &*history.shared()[1] else { panic!("an assistant") };
        assert_eq!(reply.content.capacity(), 1);
        let mut grown = crate::AssistantMessage::empty("faux", "m");
        let mut text = String::new();
        for _ in 0..5 {
            text.push_str("abcd");
        }
        grown.content.push(crate::AssistantContent::Text(crate::TextContent { text }));
        let mut history = History::new();
        history.push(Message::Assistant(grown));
        let Message::Assistant(pushed) = &*history.shared()[0] else { panic!("an assistant") };
        assert_eq!(pushed.content.capacity(), 1);
        let crate::AssistantContent::Text(t) = &pushed.content[0] else { panic!("text") };
        assert_eq!((t.text.len(), t.text.capacity()), (20, 20), "streamed text shrunk");
    }

    #[test]
    fn json_is_the_plain_array_of_messages() {
        let messages = vec![user("hi"), user("there")];
        let history = History::from(messages.clone());
        let json = serde_json::to_value(&history).unwrap();
        assert_eq!(json, serde_json::to_value(&messages).unwrap());
        let back: History = serde_json::from_value(json).unwrap();
        assert_eq!(back, messages);
        assert_eq!(back.iter().rev().count(), 2);
        assert_eq!(back.to_vec(), messages);
    }
}
