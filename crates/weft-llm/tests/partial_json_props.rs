//! Property tests for `weft_llm::partial_json`: the best-effort value is always consistent with
//! the final one, and `finish` agrees exactly with `serde_json::from_str::<Value>`.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use serde_json::{Number, Value};
use weft_llm::partial_json::{PartialJson, PartialJsonError};

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

/// Characters for strings: anything, with extra weight on the ones JSON escapes or that are
/// multi-byte.
fn json_char() -> impl Strategy<Value = char> {
    prop_oneof![
        3 => proptest::char::range('a', 'z'),
        2 => any::<char>(),
        2 => prop::sample::select(vec![
            '"', '\\', '/', '\n', '\r', '\t', '\u{0}', '\u{8}', '\u{c}', '\u{1f}', '\u{7f}',
            ' ', 'é', 'ü', '€', '\u{ffff}', '😀', '\u{10ffff}', '{', '}', '[', ']', ',', ':',
        ]),
    ]
}

fn json_string() -> impl Strategy<Value = String> {
    prop::collection::vec(json_char(), 0..10).prop_map(String::from_iter)
}

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1000i64..1000).prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        (-1e3f64..1e3).prop_filter_map("finite", |f| Number::from_f64(f).map(Value::Number)),
        json_string().prop_map(Value::String),
    ]
}

/// Random JSON values, nested at most 6 deep.
fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(6, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec((json_string(), inner), 0..6)
                .prop_map(|members| Value::Object(members.into_iter().collect())),
        ]
    })
}

/// A tiny deterministic generator, for the random choices of [`Writer`].
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, options: &[&'a str]) -> &'a str {
        options[self.below(options.len() as u64) as usize]
    }
}

/// Where a [`Writer`] may introduce a small syntax error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Glitch {
    /// Whitespace that JSON does not allow.
    Ws,
    /// Raw control characters, bad escapes, lone surrogates, unterminated strings.
    Str,
    /// Missing or doubled commas between elements or members.
    Sep,
    /// Trailing commas, mismatched closing brackets.
    Close,
    /// Unquoted keys, missing colons.
    Key,
    /// Malformed or out-of-range numbers.
    Num,
    /// Misspelt `true`/`false`/`null`.
    Lit,
    /// Garbage after the top-level value.
    Trailing,
}

/// Serializes values with random whitespace, random string escapes and random (valid) number
/// spellings; optionally with duplicate keys (valid) and with "glitches": small syntax errors
/// of the kinds a JSON parser must reject.
struct Writer {
    rng: Rng,
    /// The first eligible site of this kind to draw 0 from `below(rate)` glitches; there is at
    /// most one glitch per document.
    glitch: Option<(Glitch, u64)>,
    /// Whether to add members repeating earlier keys.
    duplicates: bool,
}

impl Writer {
    fn glitch(&mut self, kind: Glitch) -> bool {
        match self.glitch {
            Some((k, rate)) if k == kind && self.rng.below(rate) == 0 => {
                self.glitch = None;
                true
            }
            _ => false,
        }
    }

    fn ws(&mut self, out: &mut String) {
        if self.glitch(Glitch::Ws) {
            out.push_str(
                self.rng.pick(&["\u{c}", "\u{b}", "\u{a0}", "\u{feff}", "/", "x", "\u{0}"]),
            );
        }
        while self.rng.below(3) == 0 {
            out.push_str(self.rng.pick(&[" ", "\t", "\n", "\r"]));
        }
    }

    fn u_escape(&mut self, unit: u16, out: &mut String) {
        if self.rng.below(2) == 0 {
            out.push_str(&format!("\\u{unit:04x}"));
        } else {
            out.push_str(&format!("\\u{unit:04X}"));
        }
    }

    fn string(&mut self, s: &str, out: &mut String) {
        out.push('"');
        for c in s.chars() {
            if self.glitch(Glitch::Str) {
                out.push_str(self.rng.pick(&[
                    "\u{0}",
                    "\u{1f}",
                    "\n",
                    "\t",
                    "\\x",
                    "\\u12G4",
                    "\\u00",
                    "\\ud800",
                    "\\udc00",
                    "\\ud800\\u0041",
                    "\\ud800\\ud800",
                    "\\ud800x",
                    "\\ud800\\n",
                    "\\uDBFF\\uDFFF",
                    "\\U0041",
                    "\\",
                    "\\\u{e9}",
                    "\"",
                ]));
            }
            let short = match c {
                '"' => Some("\\\""),
                '\\' => Some("\\\\"),
                '/' => Some("\\/"),
                '\u{8}' => Some("\\b"),
                '\u{c}' => Some("\\f"),
                '\n' => Some("\\n"),
                '\r' => Some("\\r"),
                '\t' => Some("\\t"),
                _ => None,
            };
            let must_escape = c == '"' || c == '\\' || c < ' ';
            match (self.rng.below(4), short) {
                (0 | 1, _) if !must_escape => out.push(c),
                (0 | 1, Some(short)) => out.push_str(short),
                _ => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        self.u_escape(*unit, out);
                    }
                }
            }
        }
        if !self.glitch(Glitch::Str) {
            out.push('"');
        }
    }

    fn digits(&mut self, out: &mut String, max: u64) {
        for _ in 0..=self.rng.below(max) {
            out.push(char::from(b'0' + self.rng.below(10) as u8));
        }
    }

    fn number(&mut self, n: &Number, out: &mut String) {
        if self.glitch(Glitch::Num) {
            out.push_str(self.rng.pick(&[
                "01", "-", "1.", ".5", "+1", "1e", "1e+", "1E-", "1e400", "-1e400", "0x1", "1.5.2",
                "--1", "1e5e5", "NaN", "Infinity", "-01", "00", "1.e5", "1-", "1+",
            ]));
            return;
        }
        if self.rng.below(3) > 0 {
            out.push_str(&n.to_string());
            return;
        }
        // Some other valid spelling (its value need not be `n`).
        if self.rng.below(2) == 0 {
            out.push('-');
        }
        if self.rng.below(3) == 0 {
            out.push('0');
        } else {
            out.push(char::from(b'1' + self.rng.below(9) as u8));
            self.digits(out, 25);
        }
        if self.rng.below(2) == 0 {
            out.push('.');
            self.digits(out, 20);
        }
        if self.rng.below(2) == 0 {
            out.push_str(self.rng.pick(&["e", "E", "e+", "E-", "e-", "E+"]));
            self.digits(out, 2);
        }
    }

    fn value(&mut self, v: &Value, out: &mut String) {
        self.ws(out);
        match v {
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(if self.glitch(Glitch::Sep) {
                            self.rng.pick(&["", ",,", ":"])
                        } else {
                            ","
                        });
                    }
                    self.value(item, out);
                }
                if self.glitch(Glitch::Close) {
                    out.push(',');
                }
                self.ws(out);
                out.push(if self.glitch(Glitch::Close) { '}' } else { ']' });
            }
            Value::Object(map) => {
                out.push('{');
                let mut members: Vec<(&String, &Value)> = map.iter().collect();
                if self.duplicates && !members.is_empty() {
                    for _ in 0..self.rng.below(3) {
                        let key = members[self.rng.below(members.len() as u64) as usize].0;
                        let value = members[self.rng.below(members.len() as u64) as usize].1;
                        let at = self.rng.below(members.len() as u64 + 1) as usize;
                        members.insert(at, (key, value));
                    }
                }
                for (i, (key, item)) in members.into_iter().enumerate() {
                    if i > 0 {
                        out.push_str(if self.glitch(Glitch::Sep) {
                            self.rng.pick(&["", ",,", ":"])
                        } else {
                            ","
                        });
                    }
                    self.ws(out);
                    if self.glitch(Glitch::Key) {
                        out.push_str(self.rng.pick(&["key", "1", "'k'", "null"]));
                    } else {
                        self.string(key, out);
                    }
                    self.ws(out);
                    out.push_str(if self.glitch(Glitch::Key) {
                        self.rng.pick(&["", "=", "::"])
                    } else {
                        ":"
                    });
                    self.value(item, out);
                }
                if self.glitch(Glitch::Close) {
                    out.push(',');
                }
                self.ws(out);
                out.push(if self.glitch(Glitch::Close) { ']' } else { '}' });
            }
            Value::String(s) => self.string(s, out),
            Value::Number(n) => self.number(n, out),
            Value::Bool(_) | Value::Null => {
                let literal = v.to_string();
                if self.glitch(Glitch::Lit) {
                    let broken = self.rng.pick(&["tru", "nul", "True", "nulll", "falsy", "f"]);
                    out.push_str(broken);
                } else {
                    out.push_str(&literal);
                }
            }
        }
        self.ws(out);
    }

    fn document(mut self, v: &Value) -> String {
        let mut out = String::new();
        self.value(v, &mut out);
        if self.glitch(Glitch::Trailing) {
            out.push_str(self.rng.pick(&["x", "1", "{}", "]", ",", "\"\""]));
        }
        out
    }
}

/// Valid JSON texts: compact, pretty, or with random whitespace, escapes and number spellings.
fn json_text() -> impl Strategy<Value = String> {
    (json_value(), 0u8..4, any::<u64>()).prop_map(|(v, style, seed)| match style {
        0 => v.to_string(),
        1 => format!("{v:#}"),
        _ => Writer { rng: Rng(seed | 1), glitch: None, duplicates: false }.document(&v),
    })
}

/// JSON-like texts with (usually) one glitch, or none; keys may repeat.
fn glitchy_text() -> impl Strategy<Value = String> {
    let kind = prop::sample::select(vec![
        Glitch::Ws,
        Glitch::Str,
        Glitch::Sep,
        Glitch::Close,
        Glitch::Key,
        Glitch::Num,
        Glitch::Lit,
        Glitch::Trailing,
    ]);
    let glitch = prop::option::weighted(0.9, (kind, prop::sample::select(vec![1u64, 3, 10])));
    (json_value(), glitch, any::<u64>()).prop_map(|(v, glitch, seed)| {
        Writer { rng: Rng(seed | 1), glitch, duplicates: true }.document(&v)
    })
}

/// Nesting around serde_json's recursion limit, closed or not.
fn deep_text() -> impl Strategy<Value = String> {
    (120usize..135, any::<bool>(), any::<bool>()).prop_map(|(depth, objects, closed)| {
        let (open, close) = if objects { ("{\"k\":[", "]}") } else { ("[", "]") };
        let levels = if objects { depth / 2 } else { depth };
        let mut text = open.repeat(levels);
        text.push_str("[0]");
        if closed {
            text.push_str(&close.repeat(levels));
        }
        text
    })
}

/// Chunk sizes (in bytes, rounded up to the next char boundary), used cyclically.
fn chunk_sizes() -> impl Strategy<Value = Vec<usize>> {
    prop_oneof![
        prop::collection::vec(1usize..4, 1..32),
        prop::collection::vec(1usize..40, 1..32),
        prop::collection::vec(Just(1usize), 1..2),
    ]
}

/// Splits `text` into chunks on char boundaries.
fn split<'a>(text: &'a str, sizes: &[usize]) -> Vec<&'a str> {
    let mut chunks = Vec::new();
    let mut start = 0;
    for size in sizes.iter().cycle() {
        if start >= text.len() {
            break;
        }
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        chunks.push(&text[start..end]);
        start = end;
    }
    chunks
}

/// An edit that (usually) breaks a JSON text.
#[derive(Debug, Clone)]
enum Mutation {
    Delete(usize),
    Insert(usize, char),
    Replace(usize, char),
    Truncate(usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    let c = prop_oneof![
        3 => prop::sample::select(vec![
            '{', '}', '[', ']', '"', ',', ':', '\\', '/', '0', '1', '9', '-', '+', '.', 'e', 'E',
            't', 'r', 'u', 'f', 'a', 'l', 's', 'n', 'x', 'd', '8', 'c', ' ', '\n', '\u{0}', '\u{1f}',
            '\u{c}', '\u{feff}', 'é', '😀',
        ]),
        1 => any::<char>(),
    ];
    prop_oneof![
        any::<usize>().prop_map(Mutation::Delete),
        (any::<usize>(), c.clone()).prop_map(|(i, c)| Mutation::Insert(i, c)),
        (any::<usize>(), c).prop_map(|(i, c)| Mutation::Replace(i, c)),
        any::<usize>().prop_map(Mutation::Truncate),
    ]
}

fn apply(text: &str, mutations: &[Mutation]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for m in mutations {
        let n = chars.len();
        match *m {
            Mutation::Delete(i) if n > 0 => {
                chars.remove(i % n);
            }
            Mutation::Insert(i, c) => chars.insert(i % (n + 1), c),
            Mutation::Replace(i, c) if n > 0 => chars[i % n] = c,
            Mutation::Truncate(i) => chars.truncate(i % (n + 1)),
            _ => {}
        }
    }
    chars.into_iter().collect()
}

/// Possibly invalid texts: mutated valid JSON, deep nesting, or short strings over a JSON-ish
/// alphabet.
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        1 => deep_text(),
        3 => (json_text(), prop::collection::vec(mutation(), 1..4))
            .prop_map(|(text, mutations)| apply(&text, &mutations)),
        1 => (json_text(), prop::collection::vec(mutation(), 0..2))
            .prop_map(|(text, mutations)| apply(&text, &mutations)),
        1 => "[\\[\\]{}\",:0-9eE+\\-. \t\ntruefalsn\\\\u/dcx]{0,24}",
    ]
}

// ---------------------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------------------

/// Whether `partial` could be a best-effort view of a prefix of a text whose final value is
/// `full`: strings are prefixes; numbers, booleans and null are equal; arrays are no longer and
/// agree on every element, the last one possibly still in progress; objects only have keys of
/// `full`, all members equal but at most one in progress.
fn prefix_consistent(partial: &Value, full: &Value) -> bool {
    match (partial, full) {
        (Value::String(p), Value::String(f)) => f.starts_with(p.as_str()),
        (Value::Array(p), Value::Array(f)) => {
            p.len() <= f.len()
                && p.iter().zip(f).enumerate().all(|(i, (a, b))| {
                    if i + 1 < p.len() { a == b } else { prefix_consistent(a, b) }
                })
        }
        (Value::Object(p), Value::Object(f)) => {
            let mut in_progress = 0;
            for (key, a) in p {
                let Some(b) = f.get(key) else { return false };
                if a != b {
                    in_progress += 1;
                    if !prefix_consistent(a, b) {
                        return false;
                    }
                }
            }
            in_progress <= 1
        }
        (a, b) => a == b,
    }
}

fn serde_parse(text: &str) -> Option<Value> {
    serde_json::from_str::<Value>(text).ok()
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Valid JSON split anywhere: every push succeeds, every intermediate value is consistent
    /// with the final value (and with the next intermediate value), and `finish` equals
    /// serde_json's result.
    #[test]
    fn valid_json_streams_consistently(text in json_text(), sizes in chunk_sizes()) {
        let full = serde_json::from_str::<Value>(&text).unwrap();
        let mut p = PartialJson::new();
        let mut previous: Option<Value> = None;
        for chunk in split(&text, &sizes) {
            p.push(chunk).unwrap();
            if let Some(v) = p.value() {
                prop_assert!(prefix_consistent(v, &full), "{v} vs {full} after {:?}", p.text());
                if let Some(prev) = &previous {
                    prop_assert!(prefix_consistent(prev, v), "went back: {prev} then {v}");
                }
                previous = Some(v.clone());
            } else {
                prop_assert!(previous.is_none(), "value disappeared after {:?}", p.text());
            }
        }
        prop_assert_eq!(p.text(), text.as_str());
        // Once everything is in, the value is complete, except an unterminated top-level number.
        match p.value() {
            Some(v) => prop_assert_eq!(v, &full),
            None => prop_assert!(full.is_number()),
        }
        prop_assert_eq!(p.finish().unwrap(), full);
    }

    /// JSON with a typical syntax error (or none, but repeated keys) split anywhere: see
    /// [`check_against_serde_json`].
    #[test]
    fn glitchy_json_agrees_with_serde_json(text in glitchy_text(), sizes in chunk_sizes()) {
        check_against_serde_json(&text, &sizes)?;
    }

    /// Arbitrary (mostly invalid) text split anywhere: see [`check_against_serde_json`].
    #[test]
    fn any_text_agrees_with_serde_json(text in any_text(), sizes in chunk_sizes()) {
        check_against_serde_json(&text, &sizes)?;
    }
}

/// Feeds `text` in chunks: a push fails only if serde_json rejects the text, later calls repeat
/// that error, and `finish` fails exactly when serde_json does, with an equal value otherwise.
fn check_against_serde_json(text: &str, sizes: &[usize]) -> Result<(), TestCaseError> {
    let expected = serde_parse(text);
    let mut p = PartialJson::new();
    let mut first_error: Option<PartialJsonError> = None;
    for chunk in split(text, sizes) {
        match (p.push(chunk), &first_error) {
            (Ok(()), None) => {}
            (Err(e), None) => {
                prop_assert!(
                    expected.is_none(),
                    "push failed ({e}) but serde_json accepts {text:?}"
                );
                prop_assert!(e.offset <= p.text().len());
                first_error = Some(e);
            }
            (result, Some(e)) => prop_assert_eq!(result, Err(e.clone())),
        }
    }
    prop_assert_eq!(p.text(), text);
    let result = p.finish();
    if let Some(e) = first_error {
        prop_assert_eq!(result.clone(), Err(e));
    }
    prop_assert_eq!(result.ok(), expected, "text: {:?}", text);
    Ok(())
}

#[test]
fn finish_or_text_gives_the_value_or_the_raw_text_back() {
    let mut p = PartialJson::new();
    p.push(r#"{"a": [1, "#).unwrap();
    p.push("2]}").unwrap();
    assert_eq!(p.finish_or_text(), Ok(serde_json::json!({"a": [1, 2]})));
    let mut p = PartialJson::new();
    p.push(r#"{"a": tru"#).unwrap();
    assert_eq!(p.finish_or_text(), Err(r#"{"a": tru"#.to_string()));
    let mut p = PartialJson::new();
    let _ = p.push(r#"{"a": x}"#);
    assert_eq!(p.finish_or_text(), Err(r#"{"a": x}"#.to_string()));
}
