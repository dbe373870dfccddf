//! Framing: frames as Server-Sent Events or NDJSON lines, and SSE text back into frames.
//!
//! [`write_sse`] and [`write_ndjson`] take any [`Frame`]. Encoders that write their JSON straight
//! into the output ([`Encoder::encode_to`](crate::Encoder::encode_to)) use [`Framing::open`] and
//! [`Framing::close`] around it instead: compact JSON from serde_json has no raw newline, so there
//! is nothing to scan or split.

use crate::Frame;

/// How frames travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// Server-Sent Events: `id:` (when the frame has one), `data:`, a blank line.
    Sse,
    /// One JSON document per line; ids are not written, and frames that are not JSON objects
    /// (the Vercel stream's `[DONE]`) are left out: they belong to SSE.
    Ndjson,
}

impl Framing {
    /// Appends `frame`'s bytes.
    pub fn write(self, frame: &Frame, out: &mut Vec<u8>) {
        let data = frame.data.as_bytes();
        match self {
            // The same bytes as `write_sse` / `write_ndjson`, without an intermediate string.
            Framing::Sse if !data.contains(&b'\n') => {
                self.open(frame.id, out);
                out.extend_from_slice(data.strip_suffix(b"\r").unwrap_or(data));
                self.close(out);
            }
            Framing::Ndjson
                if frame.is_json() && !data.contains(&b'\n') && !data.contains(&b'\r') =>
            {
                out.extend_from_slice(data);
                out.push(b'\n');
            }
            Framing::Sse => {
                let mut text = String::new();
                write_sse(frame, &mut text);
                out.extend_from_slice(text.as_bytes());
            }
            Framing::Ndjson if frame.is_json() => {
                let mut text = String::new();
                write_ndjson(frame, &mut text);
                out.extend_from_slice(text.as_bytes());
            }
            Framing::Ndjson => {}
        }
    }

    /// Starts a frame whose compact JSON the caller writes next (`id:` first, for SSE).
    pub fn open(self, id: Option<u64>, out: &mut Vec<u8>) {
        if self == Framing::Sse {
            if let Some(id) = id {
                out.extend_from_slice(b"id: ");
                write_u64(id, out);
                out.push(b'\n');
            }
            out.extend_from_slice(b"data: ");
        }
    }

    /// Ends a frame started with [`open`](Self::open).
    pub fn close(self, out: &mut Vec<u8>) {
        out.extend_from_slice(match self {
            Framing::Sse => b"\n\n",
            Framing::Ndjson => b"\n",
        });
    }
}

/// The decimal digits of `n`, appended to `out`.
pub(crate) fn write_u64(n: u64, out: &mut Vec<u8>) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Appends `frame` as one SSE event: `id:` when the frame has one, one `data:` line per line
/// of its text (so text with newlines survives), then a blank line.
pub fn write_sse(frame: &Frame, out: &mut String) {
    if let Some(id) = frame.id {
        out.push_str("id: ");
        out.push_str(&id.to_string());
        out.push('\n');
    }
    for line in frame.data.split('\n') {
        out.push_str("data: ");
        out.push_str(line.strip_suffix('\r').unwrap_or(line));
        out.push('\n');
    }
    out.push('\n');
}

/// Appends `frame` as one NDJSON line. Frames hold compact JSON, which has no raw newline; a
/// stray one would be escaped rather than split the line.
pub fn write_ndjson(frame: &Frame, out: &mut String) {
    if frame.data.contains(['\n', '\r']) {
        out.push_str(&frame.data.replace('\n', "\\n").replace('\r', "\\r"));
    } else {
        out.push_str(&frame.data);
    }
    out.push('\n');
}

/// Splits a whole SSE text into frames (`id:` and `data:` fields; comments and other fields are
/// ignored; several `data:` lines are joined with newlines, as the SSE standard says).
pub fn parse_sse(text: &str) -> Vec<Frame> {
    let mut frames = Vec::new();
    let (mut id, mut data, mut has_data) = (None, String::new(), false);
    for line in text.split('\n') {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.is_empty() {
            if has_data {
                frames.push(Frame { id: id.take(), data: std::mem::take(&mut data) });
            }
            has_data = false;
            id = None;
            continue;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if has_data {
                    data.push('\n');
                }
                data.push_str(value);
                has_data = true;
            }
            "id" => id = value.parse().ok(),
            _ => {}
        }
    }
    if has_data {
        frames.push(Frame { id, data });
    }
    frames
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_round_trip_with_ids_and_newlines() {
        let frames = vec![
            Frame { id: Some(7), data: r#"{"a":1}"#.into() },
            Frame { id: None, data: "line one\nline two".into() },
            Frame { id: Some(9), data: "[DONE]".into() },
        ];
        let mut text = String::new();
        for f in &frames {
            write_sse(f, &mut text);
        }
        assert_eq!(
            text,
            "id: 7\ndata: {\"a\":1}\n\ndata: line one\ndata: line two\n\nid: 9\ndata: [DONE]\n\n"
        );
        assert_eq!(parse_sse(&text), frames);
    }

    #[test]
    fn open_and_close_frame_what_write_frames() {
        for framing in [Framing::Sse, Framing::Ndjson] {
            for id in [None, Some(0), Some(7), Some(u64::MAX)] {
                let frame = Frame { id, data: r#"{"a":"x\ny"}"#.into() };
                let mut direct = Vec::new();
                framing.open(id, &mut direct);
                direct.extend_from_slice(frame.data.as_bytes());
                framing.close(&mut direct);
                let mut written = Vec::new();
                framing.write(&frame, &mut written);
                assert_eq!(String::from_utf8(direct).unwrap(), String::from_utf8(written).unwrap());
            }
        }
        let mut out = Vec::new();
        Framing::Ndjson.write(&Frame::raw("[DONE]"), &mut out);
        assert!(out.is_empty(), "NDJSON carries JSON objects only");
    }

    #[test]
    fn ndjson_is_one_line_per_frame() {
        let mut out = String::new();
        write_ndjson(&Frame::raw("{\"a\":\"x\ny\"}"), &mut out);
        write_ndjson(&Frame::raw("{}"), &mut out);
        assert_eq!(out, "{\"a\":\"x\\ny\"}\n{}\n");
        assert_eq!(out.lines().count(), 2);
    }

    #[test]
    fn parse_ignores_comments_and_crlf() {
        let frames = parse_sse(": keep-alive\r\nid: 3\r\ndata: x\r\n\r\n");
        assert_eq!(frames, vec![Frame { id: Some(3), data: "x".into() }]);
    }
}
