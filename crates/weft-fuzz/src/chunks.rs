//! Cutting an input into pieces the way a network would: sizes drawn from a generator seeded by
//! the input itself, so a finding replays exactly and the corpus needs no extra bytes.

/// Piece sizes for `len` bytes (each at least 1), drawn from `seed`.
pub(crate) fn sizes(seed: &[u8], len: usize) -> Vec<usize> {
    let mut state = fnv1a(seed) | 1;
    let mut out = Vec::new();
    let mut left = len;
    while left > 0 {
        // xorshift64
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        // Mostly small pieces (a split `\r\n`, a split character), sometimes large ones.
        let size = match state % 4 {
            0 => 1,
            1 => 1 + (state >> 8) as usize % 4,
            2 => 1 + (state >> 8) as usize % 64,
            _ => 1 + (state >> 8) as usize % 1024,
        };
        let size = size.min(left);
        out.push(size);
        left -= size;
    }
    out
}

/// `bytes` in pieces of [`sizes`].
pub(crate) fn bytes(data: &[u8]) -> Vec<&[u8]> {
    let mut rest = data;
    sizes(data, data.len())
        .into_iter()
        .map(|size| {
            let (piece, tail) = rest.split_at(size);
            rest = tail;
            piece
        })
        .collect()
}

/// `text` in pieces of [`sizes`], each moved forward to a character boundary.
pub(crate) fn text(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    for size in sizes(text.as_bytes(), text.len()) {
        if start >= text.len() {
            break;
        }
        let mut end = (start + size).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        out.push(&text[start..end]);
        start = end;
    }
    out
}

/// 64-bit FNV-1a.
fn fnv1a(bytes: &[u8]) -> u64 {
    use std::hash::Hasher as _;
    let mut hasher = fnv::FnvHasher::default();
    hasher.write(bytes);
    hasher.finish()
}

#[cfg(test)]
mod tests {
    #[test]
    fn pieces_cover_the_input_exactly() {
        for input in ["", "a", "data: é\r\n\r\n", &"xé€😀".repeat(300)] {
            assert_eq!(super::bytes(input.as_bytes()).concat(), input.as_bytes());
            assert_eq!(super::text(input).concat(), input);
            assert!(super::text(input).iter().all(|p| !p.is_empty()));
        }
    }
}
