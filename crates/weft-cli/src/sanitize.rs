//! Keeping the model (and tools, and servers) from controlling the user's terminal.
//!
//! Text that Weft did not write itself (the model's text and thinking, tool names, arguments and
//! output, error messages from a provider) reaches the terminal only through
//! [`write_visible`], which neutralises control characters the way `less` and `git` do:
//!
//! | character | shown as |
//! | --- | --- |
//! | `\n` (line feed), `\t` (tab) | themselves |
//! | other C0 controls, U+0000–U+001F | caret notation: `^@` (NUL), `^M` (CR), `^[` (ESC) … |
//! | DEL, U+007F | `^?` |
//! | C1 controls, U+0080–U+009F | `<U+009B>` (as `less` shows them) |
//!
//! So an escape sequence such as `ESC [ 3 1 m` arrives as the harmless text `^[[31m`, and a
//! carriage return cannot overwrite what is already on the line. Everything else, including any
//! other Unicode, is written unchanged. Weft's own styling (dimmed thinking, coloured tool lines)
//! is written separately and is unaffected.

use std::io::{self, Write};

/// Writes `text` to `out` with every control character except `\n` and `\t` made visible (see
/// the [module docs](self)). Runs of ordinary characters are written as they are, straight from
/// `text`: nothing is allocated.
pub(crate) fn write_visible(out: &mut (impl Write + ?Sized), text: &str) -> io::Result<()> {
    let bytes = text.as_bytes();
    let mut clean_from = 0;
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        let width = match b {
            b'\n' | b'\t' => 0,
            0x00..=0x1f | 0x7f => 1,
            // U+0080–U+009F are 0xC2 0x80–0x9F in UTF-8.
            0xc2 if matches!(bytes.get(i + 1), Some(0x80..=0x9f)) => 2,
            _ => 0,
        };
        if width == 0 {
            i += 1;
            continue;
        }
        out.write_all(&bytes[clean_from..i])?;
        match b {
            0x7f => out.write_all(b"^?")?,
            0xc2 => write!(out, "<U+{:04X}>", bytes[i + 1])?,
            _ => out.write_all(&[b'^', b + 0x40])?,
        }
        i += width;
        clean_from = i;
    }
    out.write_all(&bytes[clean_from..])
}

/// `text` as [`write_visible`] would show it, for a message built once (an error line).
pub(crate) fn visible(text: &str) -> String {
    let mut out = Vec::with_capacity(text.len());
    // Writing to a Vec cannot fail.
    let _ = write_visible(&mut out, text);
    // Only whole characters were replaced by ASCII: the result is still UTF-8.
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_made_visible_and_the_rest_is_kept() {
        assert_eq!(visible("plain text, ünïcödé ✓"), "plain text, ünïcödé ✓");
        assert_eq!(visible("a\nb\tc"), "a\nb\tc");
        assert_eq!(visible("\x1b[31mred\x1b[0m"), "^[[31mred^[[0m");
        assert_eq!(visible("nul\0 cr\r bell\x07 del\x7f"), "nul^@ cr^M bell^G del^?");
        assert_eq!(visible("\u{9b}31m \u{80}\u{9f}\u{a0}"), "<U+009B>31m <U+0080><U+009F>\u{a0}");
        assert_eq!(visible("\x1f\x01"), "^_^A");
        assert_eq!(visible(""), "");
        // Right at the end, and nothing but controls.
        assert_eq!(visible("x\u{85}"), "x<U+0085>");
        assert_eq!(visible("\x1b"), "^[");
    }

    #[test]
    fn output_never_holds_a_control_but_newline_and_tab() {
        let all: String = (0u32..=0x2ff).filter_map(char::from_u32).collect();
        let shown = visible(&all);
        for c in shown.chars() {
            assert!(!(c.is_control() && c != '\n' && c != '\t'), "{c:?} got through: {shown:?}");
        }
    }
}
