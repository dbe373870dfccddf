//! Incremental parsing of streamed JSON text, such as a tool call's arguments.
//!
//! LLM providers stream a tool call's JSON arguments as text deltas (`{"ci`, `ty": "Pa`,
//! `ris"}`). [`PartialJson`] accepts those deltas one at a time and keeps, after every delta, a
//! best-effort [`serde_json::Value`] of what has arrived so far; at the end,
//! [`PartialJson::finish`] yields exactly what `serde_json::from_str::<Value>` yields for the
//! whole text (or fails exactly when it fails).
//!
//! # Best-effort value
//!
//! * Strings that are values (not keys) appear as soon as their opening quote arrives and grow
//!   as characters arrive. Escapes are decoded; an incomplete escape (`\u00`) is held back until
//!   it is complete, and a surrogate pair is shown only once both halves have arrived.
//! * Numbers, `true`, `false` and `null` appear only once complete: literals once their last
//!   letter arrives, numbers once a delimiter or whitespace follows them (or at `finish`).
//! * Arrays and objects appear (empty) as soon as they open and fill as their elements arrive.
//!   An object member appears once its value has started; a half-received key shows nothing.
//! * At the top level, [`PartialJson::value`] is `None` until something is known (a top-level
//!   number, for example, stays `None` until it is terminated or the input is finished).
//!
//! # Cost
//!
//! The value tree is built in place: children are inserted into their parent as soon as they
//! start, and a stack of frames (array, or object with the key of the member in progress)
//! records where the cursor is. A push walks from the root down that path once, then processes
//! the chunk byte by byte, copying runs of plain string characters in one go; closing a
//! container walks down from the root again. A push therefore costs `O(chunk length + depth)`
//! (depth is at most 127) plus the map look-ups along the path (which compare the keys on it),
//! never `O(text so far)`, and the value is never cloned or rebuilt.
//!
//! # Exactness
//!
//! The grammar accepted is serde_json's: whitespace is space, tab, line feed and carriage
//! return; raw control characters in strings, unknown escapes and unpaired UTF-16 surrogates in
//! `\u` escapes are errors; duplicate keys keep the last value; anything but whitespace after
//! the top-level value is an error; nesting deeper than 127 containers is an error (serde_json's
//! default recursion limit). Each complete number token is converted by
//! `serde_json::from_str::<Value>` itself, so integer/float choices and out-of-range errors are
//! identical.

use std::mem;

use serde_json::map::Entry;
use serde_json::{Map, Value};

/// Deepest nesting of arrays/objects accepted.
///
/// serde_json starts with a recursion budget of 128 and fails as soon as it reaches zero, i.e.
/// when the 128th nested container opens; 127 nested containers are accepted.
const MAX_DEPTH: usize = 127;

/// The error returned by [`PartialJson::push`] and [`PartialJson::finish`] when the text is not
/// valid JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid JSON at byte {offset}: {reason}")]
pub struct PartialJsonError {
    /// Byte offset into the whole text pushed so far (see [`PartialJson::text`]) at which the
    /// error was detected. For a number rejected by serde_json (out of range) this is where the
    /// number starts; for an unexpected end of input it is the length of the text.
    pub offset: usize,
    /// Human-readable description of the problem.
    pub reason: String,
}

/// Incremental JSON parser: feed it text chunks with [`push`](Self::push), read a best-effort
/// value at any time with [`value`](Self::value), and get the exact value with
/// [`finish`](Self::finish).
///
/// See the [module documentation](self) for the best-effort semantics.
///
/// ```
/// use weft_llm::partial_json::PartialJson;
///
/// let mut p = PartialJson::new();
/// p.push(r#"{"city": "Pa"#).unwrap();
/// assert_eq!(p.value(), Some(&serde_json::json!({"city": "Pa"})));
/// p.push(r#"ris", "days": 3"#).unwrap();
/// assert_eq!(p.value(), Some(&serde_json::json!({"city": "Paris"})));
/// p.push("}").unwrap();
/// assert_eq!(p.finish().unwrap(), serde_json::json!({"city": "Paris", "days": 3}));
/// ```
#[derive(Debug, Clone)]
pub struct PartialJson {
    /// Everything pushed so far.
    text: String,
    /// A virtual root array; the top-level value is its first (and only) element once known.
    root: Value,
    /// Parser state (kept apart from `root` so both can be borrowed at once).
    machine: Machine,
    /// The first error, once failed.
    error: Option<PartialJsonError>,
}

impl Default for PartialJson {
    fn default() -> Self {
        Self::new()
    }
}

impl PartialJson {
    /// Creates a parser with nothing pushed yet.
    pub fn new() -> Self {
        Self {
            text: String::new(),
            root: Value::Array(Vec::with_capacity(1)),
            machine: Machine {
                stack: vec![Frame::Array],
                state: State::Value,
                esc: Esc::None,
                token: String::new(),
            },
            error: None,
        }
    }

    /// Feeds the next chunk of text.
    ///
    /// On the first syntax error this returns `Err`; the parser then stays failed: every later
    /// `push` (whose chunk is still appended to [`text`](Self::text)) and [`finish`](Self::finish)
    /// return the same error, and [`value`](Self::value) keeps the last good state, that is the
    /// best-effort value of the text up to the offending byte.
    ///
    /// Costs `O(chunk.len() + depth)` (plus comparing the object keys on the path to the cursor
    /// during map look-ups), independent of how much was pushed before.
    pub fn push(&mut self, chunk: &str) -> Result<(), PartialJsonError> {
        let base = self.text.len();
        self.text.push_str(chunk);
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        let result = self.machine.feed(&mut self.root, chunk, base);
        if let Err(error) = &result {
            self.error = Some(error.clone());
        }
        result
    }

    /// Best-effort value of everything pushed so far; `None` while nothing is known yet.
    pub fn value(&self) -> Option<&Value> {
        match &self.root {
            Value::Array(items) => items.first(),
            _ => None,
        }
    }

    /// Everything pushed so far, verbatim.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// Signals the end of input.
    ///
    /// Returns `Ok(v)` with `v` equal to what `serde_json::from_str::<Value>(self.text())` gives,
    /// or `Err` exactly when that call fails (for example on an empty or truncated text).
    pub fn finish(self) -> Result<Value, PartialJsonError> {
        let end = self.text.len();
        self.finish_at(end)
    }

    /// [`finish`](Self::finish), giving back the text pushed (moved, not copied) when it is not
    /// valid JSON: a caller that keeps the raw text of a failed parse needs no copy of a text
    /// that parsed.
    pub fn finish_or_text(mut self) -> Result<Value, String> {
        let text = mem::take(&mut self.text);
        let end = text.len();
        self.finish_at(end).map_err(|_| text)
    }

    /// [`finish`](Self::finish) for a text `end` bytes long.
    fn finish_at(mut self, end: usize) -> Result<Value, PartialJsonError> {
        if let Some(error) = self.error {
            return Err(error);
        }
        let machine = &mut self.machine;
        if matches!(machine.state, State::Number(num) if num.is_complete()) {
            let cursor = navigate(&mut self.root, &machine.stack).ok_or_else(|| internal(end))?;
            machine.complete_number(cursor, end)?;
            machine.state = State::AfterValue;
        }
        let done = matches!(machine.state, State::AfterValue) && machine.stack.len() == 1;
        match mem::take(&mut self.root) {
            Value::Array(mut items) if done && items.len() == 1 => Ok(items.swap_remove(0)),
            _ => Err(PartialJsonError { offset: end, reason: "unexpected end of input".into() }),
        }
    }
}

/// Where the parser is, between two bytes.
#[derive(Debug, Clone, Copy)]
enum State {
    /// Expecting a value: at the top level, after `:`, or after `,` in an array.
    Value,
    /// Just after `[`: a value or `]`.
    ArrayFirst,
    /// Just after `{`: a key or `}`.
    ObjectFirst,
    /// After `,` in an object: a key.
    ObjectKey,
    /// Inside a key string (decoded into the object frame's key).
    Key,
    /// After a key: expecting `:`.
    Colon,
    /// Inside a string value (decoded straight into the tree).
    Str,
    /// Inside a number (its text is in `Machine::token`).
    Number(Num),
    /// Inside `true`/`false`/`null`, having matched this many bytes.
    Literal(Lit, usize),
    /// After a complete value: `,` or a closing bracket, or only whitespace at the top level.
    AfterValue,
}

/// Position inside a number token, following the JSON number grammar.
#[derive(Debug, Clone, Copy)]
enum Num {
    /// After a leading `-`.
    Minus,
    /// After a leading `0` (no more integer digits allowed).
    Zero,
    /// In the integer digits.
    Int,
    /// After `.`.
    Dot,
    /// In the fraction digits.
    Frac,
    /// After `e`/`E`.
    Exp,
    /// After the exponent sign.
    ExpSign,
    /// In the exponent digits.
    ExpDigits,
}

impl Num {
    /// Whether the number may end here.
    fn is_complete(self) -> bool {
        matches!(self, Num::Zero | Num::Int | Num::Frac | Num::ExpDigits)
    }

    /// The state after byte `b` (one of `0-9 + - . e E`), or `None` if `b` is not allowed here.
    fn step(self, b: u8) -> Option<Num> {
        let digit = b.is_ascii_digit();
        let exp = b == b'e' || b == b'E';
        match self {
            Num::Minus if b == b'0' => Some(Num::Zero),
            Num::Minus | Num::Int if digit => Some(Num::Int),
            Num::Zero | Num::Int if b == b'.' => Some(Num::Dot),
            Num::Zero | Num::Int | Num::Frac if exp => Some(Num::Exp),
            Num::Dot | Num::Frac if digit => Some(Num::Frac),
            Num::Exp if b == b'+' || b == b'-' => Some(Num::ExpSign),
            Num::Exp | Num::ExpSign | Num::ExpDigits if digit => Some(Num::ExpDigits),
            _ => None,
        }
    }
}

/// A keyword literal.
#[derive(Debug, Clone, Copy)]
enum Lit {
    True,
    False,
    Null,
}

impl Lit {
    fn word(self) -> &'static [u8] {
        match self {
            Lit::True => b"true",
            Lit::False => b"false",
            Lit::Null => b"null",
        }
    }

    fn value(self) -> Value {
        match self {
            Lit::True => Value::Bool(true),
            Lit::False => Value::Bool(false),
            Lit::Null => Value::Null,
        }
    }
}

/// Escape-sequence state inside a string (key or value).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Esc {
    /// Not in an escape.
    None,
    /// After `\`.
    Backslash,
    /// In `\uXXXX` having read `digits` hex digits worth `value`; `high` is the pending leading
    /// surrogate when this is the second half of a pair.
    Hex { digits: u8, value: u16, high: Option<u16> },
    /// After a leading surrogate escape: expecting `\`.
    Low(u16),
    /// After a leading surrogate escape and `\`: expecting `u`.
    LowU(u16),
}

/// An open container. `Machine::stack[0]` is the virtual root array.
#[derive(Debug, Clone)]
enum Frame {
    /// An array; the element in progress (if any) is its last element.
    Array,
    /// An object, with the key of the member being read or in progress.
    Object(String),
}

/// Parser state apart from the value tree.
#[derive(Debug, Clone)]
struct Machine {
    /// Open containers, outermost first; never empty (the virtual root).
    stack: Vec<Frame>,
    state: State,
    esc: Esc,
    /// Text of the number being read.
    token: String,
}

fn error(offset: usize, reason: &str) -> PartialJsonError {
    PartialJsonError { offset, reason: reason.to_owned() }
}

/// An "impossible" inconsistency between the frame stack and the tree.
fn internal(offset: usize) -> PartialJsonError {
    error(offset, "internal error: parser state does not match the value tree")
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r')
}

/// The child of `container` that `frame` points at (the last array element, or the member with
/// the frame's key).
fn child<'a>(container: &'a mut Value, frame: &Frame) -> Option<&'a mut Value> {
    match (container, frame) {
        (Value::Array(items), Frame::Array) => items.last_mut(),
        (Value::Object(map), Frame::Object(key)) => map.get_mut(key.as_str()),
        _ => None,
    }
}

/// The innermost open container: walks from the root down the frame stack.
fn navigate<'a>(root: &'a mut Value, stack: &[Frame]) -> Option<&'a mut Value> {
    let mut cursor = root;
    for frame in stack.get(..stack.len().saturating_sub(1))? {
        cursor = child(cursor, frame)?;
    }
    Some(cursor)
}

/// Inserts `value` into `container` at the position `frame` describes (pushed onto an array, or
/// under the frame's key, replacing any earlier member with that key) and returns it. The key
/// is cloned if `keep_key` (the member stays in progress), otherwise moved out of the frame.
fn place<'a>(
    container: &'a mut Value,
    frame: Option<&mut Frame>,
    value: Value,
    keep_key: bool,
) -> Option<&'a mut Value> {
    match (container, frame?) {
        (Value::Array(items), Frame::Array) => {
            items.push(value);
            items.last_mut()
        }
        (Value::Object(map), Frame::Object(key)) => {
            let key = if keep_key { key.clone() } else { mem::take(key) };
            Some(match map.entry(key) {
                Entry::Vacant(entry) => entry.insert(value),
                Entry::Occupied(mut entry) => {
                    entry.insert(value);
                    entry.into_mut()
                }
            })
        }
        _ => None,
    }
}

fn hex_digit(b: u8) -> Option<u16> {
    match b {
        b'0'..=b'9' => Some(u16::from(b - b'0')),
        b'a'..=b'f' => Some(u16::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u16::from(b - b'A' + 10)),
        _ => None,
    }
}

/// Advances the escape state `esc` (not `Esc::None`) by byte `b`, appending to `out` any
/// character the escape completes.
fn step_escape(esc: &mut Esc, b: u8, out: &mut String) -> Result<(), &'static str> {
    match *esc {
        Esc::None => return Err("internal error: not in an escape"),
        Esc::Backslash => {
            let c = match b {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => {
                    *esc = Esc::Hex { digits: 0, value: 0, high: None };
                    return Ok(());
                }
                _ => return Err("invalid escape"),
            };
            out.push(c);
            *esc = Esc::None;
        }
        Esc::Hex { digits, value, high } => {
            let value = (value << 4) | hex_digit(b).ok_or("invalid hex digit in \\u escape")?;
            if digits < 3 {
                *esc = Esc::Hex { digits: digits + 1, value, high };
                return Ok(());
            }
            let code = match (high, value) {
                (None, 0xD800..=0xDBFF) => {
                    *esc = Esc::Low(value);
                    return Ok(());
                }
                (None, 0xDC00..=0xDFFF) => return Err("lone trailing surrogate in \\u escape"),
                (None, _) => u32::from(value),
                (Some(high), 0xDC00..=0xDFFF) => {
                    0x1_0000 + ((u32::from(high - 0xD800) << 10) | u32::from(value - 0xDC00))
                }
                (Some(_), _) => return Err("lone leading surrogate in \\u escape"),
            };
            out.push(char::from_u32(code).ok_or("invalid \\u escape")?);
            *esc = Esc::None;
        }
        Esc::Low(high) if b == b'\\' => *esc = Esc::LowU(high),
        Esc::LowU(high) if b == b'u' => *esc = Esc::Hex { digits: 0, value: 0, high: Some(high) },
        Esc::Low(_) | Esc::LowU(_) => return Err("lone leading surrogate in \\u escape"),
    }
    Ok(())
}

/// Reads string content from `chunk[start..]` into `out`, decoding escapes. Returns the index
/// just past the closing quote, or `None` if the chunk ended inside the string.
fn scan_string(
    chunk: &str,
    start: usize,
    out: &mut String,
    esc: &mut Esc,
    base: usize,
) -> Result<Option<usize>, PartialJsonError> {
    let bytes = chunk.as_bytes();
    let mut i = start;
    loop {
        if *esc != Esc::None {
            let Some(&b) = bytes.get(i) else { return Ok(None) };
            step_escape(esc, b, out).map_err(|reason| error(base + i, reason))?;
            i += 1;
            continue;
        }
        let rest = bytes.get(i..).unwrap_or_default();
        let end = rest
            .iter()
            .position(|&b| b == b'"' || b == b'\\' || b < 0x20)
            .map_or(bytes.len(), |p| i + p);
        // `i` and `end` sit next to ASCII bytes (or at the ends), so on char boundaries.
        out.push_str(chunk.get(i..end).ok_or_else(|| internal(base + i))?);
        match bytes.get(end) {
            None => return Ok(None),
            Some(b'"') => return Ok(Some(end + 1)),
            Some(b'\\') => {
                *esc = Esc::Backslash;
                i = end + 1;
            }
            Some(_) => return Err(error(base + end, "control character in string")),
        }
    }
}

impl Machine {
    /// Processes one chunk; `base` is the chunk's offset in the whole text.
    fn feed(&mut self, root: &mut Value, chunk: &str, base: usize) -> Result<(), PartialJsonError> {
        let bytes = chunk.as_bytes();
        // The innermost open container.
        let mut cursor = navigate(root, &self.stack).ok_or_else(|| internal(base))?;
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            let at = base + i;
            match self.state {
                State::Str => {
                    let Some(Value::String(out)) =
                        self.stack.last().and_then(|frame| child(cursor, frame))
                    else {
                        return Err(internal(at));
                    };
                    match scan_string(chunk, i, out, &mut self.esc, base)? {
                        Some(end) => {
                            self.state = State::AfterValue;
                            i = end;
                        }
                        None => i = bytes.len(),
                    }
                    continue;
                }
                State::Key => {
                    let Some(Frame::Object(key)) = self.stack.last_mut() else {
                        return Err(internal(at));
                    };
                    match scan_string(chunk, i, key, &mut self.esc, base)? {
                        Some(end) => {
                            self.state = State::Colon;
                            i = end;
                        }
                        None => i = bytes.len(),
                    }
                    continue;
                }
                State::Number(num) => {
                    // A delimiter is not taken: the next iteration processes it.
                    if self.number_byte(cursor, num, b, at)? {
                        i += 1;
                    }
                    continue;
                }
                State::Literal(lit, matched) => self.literal_byte(cursor, lit, matched, b, at)?,
                _ if is_ws(b) => {}
                State::ArrayFirst if b == b']' => {
                    self.stack.pop();
                    cursor = navigate(root, &self.stack).ok_or_else(|| internal(at))?;
                    self.state = State::AfterValue;
                }
                State::Value | State::ArrayFirst => cursor = self.start_value(cursor, b, at)?,
                State::ObjectFirst | State::ObjectKey => match (self.state, b) {
                    (State::ObjectFirst, b'}') => {
                        self.stack.pop();
                        cursor = navigate(root, &self.stack).ok_or_else(|| internal(at))?;
                        self.state = State::AfterValue;
                    }
                    (_, b'"') => {
                        let Some(Frame::Object(key)) = self.stack.last_mut() else {
                            return Err(internal(at));
                        };
                        key.clear();
                        self.state = State::Key;
                    }
                    _ => return Err(error(at, "expected object key")),
                },
                State::Colon => {
                    if b != b':' {
                        return Err(error(at, "expected `:`"));
                    }
                    self.state = State::Value;
                }
                State::AfterValue => {
                    if self.stack.len() == 1 {
                        return Err(error(at, "trailing characters"));
                    }
                    match (self.stack.last(), b) {
                        (Some(Frame::Array), b',') => self.state = State::Value,
                        (Some(Frame::Object(_)), b',') => self.state = State::ObjectKey,
                        (Some(Frame::Array), b']') | (Some(Frame::Object(_)), b'}') => {
                            self.stack.pop();
                            cursor = navigate(root, &self.stack).ok_or_else(|| internal(at))?;
                            self.state = State::AfterValue;
                        }
                        _ => return Err(error(at, "expected `,` or closing bracket")),
                    }
                }
            }
            i += 1;
        }
        Ok(())
    }

    /// Starts the value byte `b` (at offset `at`) opens: a string, an array or object, a number
    /// or a literal. Answers the innermost open container: the new one after `[` or `{`.
    fn start_value<'v>(
        &mut self,
        cursor: &'v mut Value,
        b: u8,
        at: usize,
    ) -> Result<&'v mut Value, PartialJsonError> {
        match b {
            b'"' => {
                place(&mut *cursor, self.stack.last_mut(), Value::String(String::new()), true)
                    .ok_or_else(|| internal(at))?;
                self.state = State::Str;
            }
            b'[' | b'{' => {
                if self.stack.len() > MAX_DEPTH {
                    return Err(error(at, "recursion limit exceeded"));
                }
                let (value, frame, state) = if b == b'[' {
                    (Value::Array(Vec::new()), Frame::Array, State::ArrayFirst)
                } else {
                    (Value::Object(Map::new()), Frame::Object(String::new()), State::ObjectFirst)
                };
                let opened = place(cursor, self.stack.last_mut(), value, true)
                    .ok_or_else(|| internal(at))?;
                self.stack.push(frame);
                self.state = state;
                return Ok(opened);
            }
            b'-' | b'0'..=b'9' => {
                self.token.clear();
                self.token.push(char::from(b));
                self.state = State::Number(match b {
                    b'-' => Num::Minus,
                    b'0' => Num::Zero,
                    _ => Num::Int,
                });
            }
            b't' => self.state = State::Literal(Lit::True, 1),
            b'f' => self.state = State::Literal(Lit::False, 1),
            b'n' => self.state = State::Literal(Lit::Null, 1),
            _ => return Err(error(at, "expected value")),
        }
        Ok(cursor)
    }

    /// Byte `b` (at offset `at`) inside a number in state `num`: extends the number, or, after a
    /// complete number, ends it and leaves `b` (a delimiter) to be processed next. Answers
    /// whether `b` was taken into the number.
    fn number_byte(
        &mut self,
        cursor: &mut Value,
        num: Num,
        b: u8,
        at: usize,
    ) -> Result<bool, PartialJsonError> {
        if matches!(b, b'0'..=b'9' | b'-' | b'+' | b'.' | b'e' | b'E') {
            let next = num.step(b).ok_or_else(|| error(at, "invalid number"))?;
            self.state = State::Number(next);
            self.token.push(char::from(b));
            Ok(true)
        } else if num.is_complete() {
            self.complete_number(cursor, at)?;
            self.state = State::AfterValue;
            Ok(false)
        } else {
            Err(error(at, "invalid number"))
        }
    }

    /// Byte `b` (at offset `at`) of a keyword literal that matched `matched` bytes so far; its
    /// last byte places the literal's value.
    fn literal_byte(
        &mut self,
        cursor: &mut Value,
        lit: Lit,
        matched: usize,
        b: u8,
        at: usize,
    ) -> Result<(), PartialJsonError> {
        let word = lit.word();
        if word.get(matched) != Some(&b) {
            return Err(error(at, "invalid literal"));
        }
        if matched + 1 == word.len() {
            place(cursor, self.stack.last_mut(), lit.value(), false).ok_or_else(|| internal(at))?;
            self.state = State::AfterValue;
        } else {
            self.state = State::Literal(lit, matched + 1);
        }
        Ok(())
    }

    /// Converts the buffered number token (ending at byte `end`) with serde_json and inserts it.
    fn complete_number(&mut self, cursor: &mut Value, end: usize) -> Result<(), PartialJsonError> {
        let start = end - self.token.len();
        let value = serde_json::from_str::<Value>(&self.token).map_err(|e| {
            let mut reason = e.to_string();
            let location = format!(" at line {} column {}", e.line(), e.column());
            if reason.ends_with(&location) {
                reason.truncate(reason.len() - location.len());
            }
            PartialJsonError { offset: start, reason }
        })?;
        place(cursor, self.stack.last_mut(), value, false).ok_or_else(|| internal(end))?;
        self.token.clear();
        Ok(())
    }
}

#[cfg(test)]
mod tests;
