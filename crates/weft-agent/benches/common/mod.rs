//! Helpers shared by the agent's benchmarks.

/// `len` ASCII characters of prose-like text.
pub(crate) fn prose(len: usize) -> String {
    const WORDS: &str = "the quick brown fox jumps over the lazy dog while streaming tokens \
                         arrive four characters at a time from a scripted model; ";
    WORDS.chars().cycle().take(len).collect()
}

/// `1234567` as `1,234,567`.
pub(crate) fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}
