//! The README's library snippet is the code `examples/readme.rs` compiles and CI runs.

#![allow(clippy::unwrap_used)]

/// The lines between `start` and `end` (exclusive), each with `indent` removed.
fn between<'a>(text: &'a str, start: &str, end: &str) -> Vec<&'a str> {
    let from = text.lines().position(|l| l.trim() == start).unwrap() + 1;
    text.lines().skip(from).take_while(|l| l.trim() != end).collect()
}

#[test]
fn the_readme_snippet_is_the_compiled_example() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let readme = std::fs::read_to_string(format!("{root}/README.md")).unwrap();
    let example = std::fs::read_to_string(format!("{root}/examples/readme.rs")).unwrap();
    let section = &readme[readme.find("## Using the library").unwrap()..];
    let snippet: Vec<&str> = between(section, "```rust", "```");
    let compiled: Vec<&str> = between(&example, "// README:begin", "// README:end")
        .into_iter()
        .map(|l| l.strip_prefix("    ").unwrap_or(l))
        .collect();
    assert!(!snippet.is_empty());
    assert_eq!(snippet, compiled, "README.md and examples/readme.rs differ");
}
