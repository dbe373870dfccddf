//! The two serializations of a Loom frame: `type` + payload (§4) and the single-key export form
//! (§6), and the table between the two names of every event type.

/// Every event type of §4.2 (plus `thought_chunk`, the §8 extension for thinking) with its §6
/// export key.
const KEYS: [(&str, &str); 24] = [
    ("run_start", "RunStart"),
    ("node_enter", "TaskStart"),
    ("node_exit", "TaskEnd"),
    ("message_chunk", "Messages"),
    ("thought_chunk", "ThoughtChunk"),
    ("usage", "Usage"),
    ("values", "Values"),
    ("updates", "Updates"),
    ("custom", "Custom"),
    ("checkpoint", "Checkpoint"),
    ("tot_expand", "TotExpand"),
    ("tot_evaluate", "TotEvaluate"),
    ("tot_backtrack", "TotBacktrack"),
    ("got_plan", "GotPlan"),
    ("got_node_start", "GotNodeStart"),
    ("got_node_complete", "GotNodeComplete"),
    ("got_node_failed", "GotNodeFailed"),
    ("got_expand", "GotExpand"),
    ("tool_call_chunk", "ToolCallChunk"),
    ("tool_call", "ToolCall"),
    ("tool_start", "ToolStart"),
    ("tool_output", "ToolOutput"),
    ("tool_end", "ToolEnd"),
    ("tool_approval", "ToolApproval"),
];

/// The export key of event type `kind` (`node_enter` → `TaskStart`).
pub(super) fn export_key(kind: &str) -> Option<&'static str> {
    KEYS.iter().find(|(t, _)| *t == kind).map(|(_, k)| *k)
}

/// The event type of export key `key` (`TaskStart` → `node_enter`).
pub(super) fn type_of_key(key: &str) -> Option<&'static str> {
    KEYS.iter().find(|(_, k)| *k == key).map(|(t, _)| *t)
}

/// The event type `kind` as the receiver knows it (`None`: a type this protocol does not define).
pub(super) fn known_type(kind: &str) -> Option<&'static str> {
    KEYS.iter().find(|(t, _)| *t == kind).map(|(t, _)| *t)
}

/// Compact JSON of `value`. Plain data (strings, numbers, maps with string keys) always
/// serializes; should it not, `null` stands in rather than a panic.
pub(super) fn json<T: serde::Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_string())
}

/// The members of a JSON object being written, in the order they are added (so frames read in
/// the spec's order: envelope, `type`, then the payload as §4.2 lists it).
#[derive(Debug, Default)]
pub(super) struct Fields(String);

impl Fields {
    /// No members yet.
    pub(super) fn new() -> Self {
        Self(String::new())
    }

    /// The members in `members`, already JSON text (`"a":1,"b":2`).
    pub(super) fn members(members: String) -> Self {
        Self(members)
    }

    /// Adds `key: value`.
    pub(super) fn put<T: serde::Serialize + ?Sized>(self, key: &str, value: &T) -> Self {
        self.raw(key, &json(value))
    }

    /// Adds `key: value` when there is a value.
    pub(super) fn put_opt<T: serde::Serialize + ?Sized>(
        self,
        key: &str,
        value: Option<&T>,
    ) -> Self {
        match value {
            Some(v) => self.put(key, v),
            None => self,
        }
    }

    /// Adds `key` with `raw`, already JSON text.
    pub(super) fn raw(mut self, key: &str, raw: &str) -> Self {
        if !self.0.is_empty() {
            self.0.push(',');
        }
        self.0.push_str(&json(key));
        self.0.push(':');
        self.0.push_str(raw);
        self
    }

    /// Appends the members of `other`.
    pub(super) fn extend(mut self, other: Fields) -> Self {
        if !other.0.is_empty() {
            if !self.0.is_empty() {
                self.0.push(',');
            }
            self.0.push_str(&other.0);
        }
        self
    }

    /// The object's JSON text.
    pub(super) fn object(&self) -> String {
        format!("{{{}}}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_goes_both_ways() {
        for (t, k) in KEYS {
            assert_eq!(export_key(t), Some(k));
            assert_eq!(type_of_key(k), Some(t));
        }
        assert_eq!(export_key("reply"), None);
        assert_eq!(type_of_key("Reply"), None);
    }

    #[test]
    fn fields_keep_their_order_and_escape() {
        let f = Fields::new().put("b", "x\"y").put("a", &1).put_opt::<str>("c", None);
        let f = f.extend(Fields::new().put("z", &true));
        assert_eq!(f.object(), r#"{"b":"x\"y","a":1,"z":true}"#);
        assert_eq!(Fields::new().object(), "{}");
    }
}
