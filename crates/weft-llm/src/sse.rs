//! An incremental Server-Sent Events parser, as the HTML standard defines the format: lines end
//! with `\n`, `\r\n` or `\r`; `data:` lines accumulate (joined with `\n`); a blank line dispatches
//! the event; lines starting with `:` are comments; an event left incomplete when the body ends is
//! discarded (a connection cut never yields half an event).
//!
//! Bytes arrive in arbitrary chunks (a multi-byte character or a `\r\n` may be split); each byte
//! is looked at once, so the cost is linear in the body.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SseEvent {
    /// The `event:` field, if any.
    pub event: Option<String>,
    /// The joined `data:` lines.
    pub data: String,
    /// The `id:` field, if any.
    pub id: Option<String>,
}

/// A line that is not UTF-8.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the event stream has a line that is not UTF-8 (line {line})")]
pub struct SseError {
    /// The 1-based line number.
    pub line: u64,
}

/// The incremental parser. See the [module docs](self).
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    /// The previous chunk ended with `\r`: a `\n` starting the next one belongs to it.
    after_cr: bool,
    lines: u64,
    event: Option<String>,
    data: String,
    has_data: bool,
    id: Option<String>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds the next chunk, appending the events it completes to `out`.
    pub fn push(&mut self, mut bytes: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if bytes.is_empty() {
            return Ok(());
        }
        if self.after_cr {
            self.after_cr = false;
            if let Some(rest) = bytes.strip_prefix(b"\n") {
                bytes = rest;
            }
        }
        while let Some(end) = bytes.iter().position(|&b| b == b'\n' || b == b'\r') {
            let (head, tail) = bytes.split_at(end);
            let was_cr = tail[0] == b'\r';
            bytes = &tail[1..];
            if self.line.is_empty() {
                self.line_done(head, out)?;
            } else {
                self.line.extend_from_slice(head);
                let line = std::mem::take(&mut self.line);
                self.line_done(&line, out)?;
                self.line = line;
                self.line.clear();
            }
            if was_cr {
                match bytes.first() {
                    Some(b'\n') => bytes = &bytes[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    /// How many bytes the parser holds for the event under way (its unfinished line and the
    /// data gathered so far): what a reader bounds to refuse an event too large to keep.
    pub fn pending_bytes(&self) -> usize {
        self.line.len() + self.data.len()
    }

    /// The body ended: an incomplete event is discarded, as the standard says.
    pub fn finish(&mut self) {
        self.line.clear();
        self.reset();
    }

    fn reset(&mut self) {
        self.event = None;
        self.data.clear();
        self.has_data = false;
        self.id = None;
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        self.lines += 1;
        if line.is_empty() {
            if self.has_data {
                out.push(SseEvent {
                    event: self.event.take(),
                    data: std::mem::take(&mut self.data),
                    id: self.id.take(),
                });
            }
            self.reset();
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError { line: self.lines })?;
        if line.starts_with(':') {
            return Ok(());
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "event" => self.event = Some(value.to_string()),
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.push(chunk, &mut out).unwrap();
        }
        parser.finish();
        out
    }

    fn ev(event: Option<&str>, data: &str) -> SseEvent {
        SseEvent { event: event.map(str::to_string), data: data.into(), id: None }
    }

    #[test]
    fn events_data_lines_comments_and_line_endings() {
        let body = b": ping\r\nevent: message_start\r\ndata: {\"a\":1}\r\n\r\ndata: one\ndata: two\n\ndata:x\r\rdata\n\n";
        assert_eq!(
            parse_all(&[body]),
            vec![
                ev(Some("message_start"), "{\"a\":1}"),
                ev(None, "one\ntwo"),
                ev(None, "x"),
                ev(None, "")
            ]
        );
    }

    #[test]
    fn any_split_gives_the_same_events() {
        let body =
            "event: e\r\ndata: caf\u{e9} \u{1F600}\r\nid: 7\r\n\r\ndata: [DONE]\r\n\r\n".as_bytes();
        let whole = parse_all(&[body]);
        assert_eq!(whole.len(), 2);
        assert_eq!(whole[0].data, "caf\u{e9} \u{1F600}");
        assert_eq!(whole[0].id.as_deref(), Some("7"));
        for i in 0..body.len() {
            for j in i..body.len() {
                assert_eq!(parse_all(&[&body[..i], &body[i..j], &body[j..]]), whole, "{i} {j}");
            }
        }
    }

    #[test]
    fn an_incomplete_event_at_the_end_is_discarded() {
        assert_eq!(
            parse_all(&[b"data: {\"done\":1}\n\ndata: {\"cho"]),
            vec![ev(None, "{\"done\":1}")]
        );
        assert_eq!(parse_all(&[b"data: whole line\n"]), vec![]);
    }

    #[test]
    fn invalid_utf8_is_an_error_naming_the_line() {
        let mut parser = SseParser::new();
        let err = parser.push(b"data: ok\n\ndata: \xff\n", &mut Vec::new()).unwrap_err();
        assert_eq!(err, SseError { line: 3 });
    }
}
