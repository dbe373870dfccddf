use super::*;
use serde_json::json;

/// Pushes `chunks` one by one (all must succeed) and returns the parser.
fn fed(chunks: &[&str]) -> PartialJson {
    let mut p = PartialJson::new();
    for chunk in chunks {
        p.push(chunk).unwrap();
    }
    p
}

fn value_after(text: &str) -> Option<Value> {
    fed(&[text]).value().cloned()
}

/// Feeds `text` as one chunk and returns what `finish` gives.
fn parse(text: &str) -> Result<Value, PartialJsonError> {
    let mut p = PartialJson::new();
    match p.push(text) {
        Ok(()) => p.finish(),
        Err(e) => Err(e),
    }
}

/// Checks the parser against serde_json on `text`, fed whole, char by char, and split at
/// every char boundary into two chunks.
fn check_against_serde(text: &str) {
    let expected = serde_json::from_str::<Value>(text).ok();
    assert_eq!(parse(text).ok(), expected, "whole: {text:?}");
    let mut p = PartialJson::new();
    let mut failed = false;
    for c in text.chars() {
        failed |= p.push(c.encode_utf8(&mut [0; 4])).is_err();
    }
    assert!(!(failed && expected.is_some()), "char-by-char push failed: {text:?}");
    assert_eq!(p.finish().ok(), expected, "char by char: {text:?}");
    for (split, _) in text.char_indices() {
        let mut p = PartialJson::new();
        let ok = p.push(&text[..split]).is_ok() && p.push(&text[split..]).is_ok();
        assert!(ok || expected.is_none(), "split push failed: {text:?} at {split}");
        assert_eq!(p.finish().ok(), expected, "split at {split}: {text:?}");
    }
}

#[test]
fn best_effort_examples() {
    assert_eq!(value_after(""), None);
    assert_eq!(value_after("  "), None);
    assert_eq!(value_after(r#"{"a": "hel"#), Some(json!({"a": "hel"})));
    assert_eq!(value_after(r#"{"a":"#), Some(json!({})));
    assert_eq!(value_after(r#"{"a"#), Some(json!({})));
    assert_eq!(value_after(r#"{"a": 1"#), Some(json!({})));
    assert_eq!(value_after(r#"{"a": 1,"#), Some(json!({"a": 1})));
    assert_eq!(value_after(r#"{"a": 1, "b"#), Some(json!({"a": 1})));
    assert_eq!(value_after(r#"{"a": tr"#), Some(json!({})));
    assert_eq!(value_after(r#"{"a": true"#), Some(json!({"a": true})));
    assert_eq!(value_after("[1, 2"), Some(json!([1])));
    assert_eq!(value_after("[1, 2 "), Some(json!([1, 2])));
    assert_eq!(value_after("[tr"), Some(json!([])));
    assert_eq!(value_after("[null, fals"), Some(json!([null])));
    assert_eq!(value_after(r#""ab\u00"#), Some(json!("ab")));
    assert_eq!(value_after(r#""ab\"#), Some(json!("ab")));
    assert_eq!(value_after(r#""ab\n"#), Some(json!("ab\n")));
    assert_eq!(value_after(r#""\ud83d"#), Some(json!("")));
    assert_eq!(value_after(r#""\ud83d\ude0"#), Some(json!("")));
    assert_eq!(value_after(r#""\ud83d\ude00"#), Some(json!("😀")));
    assert_eq!(value_after(r#"{"a": {"b": ["#), Some(json!({"a": {"b": []}})));
    assert_eq!(value_after(r#"{"a": {"b": [{"#), Some(json!({"a": {"b": [{}]}})));
    assert_eq!(value_after(r#"[["x", 1], ["y"#), Some(json!([["x", 1], ["y"]])));
    assert_eq!(
        value_after(r#"{"a": [1], "b": {"c": "d"}}"#),
        Some(json!({"a": [1], "b": {"c": "d"}}))
    );
    // Top-level scalars.
    assert_eq!(value_after("12"), None);
    assert_eq!(value_after("12 "), Some(json!(12)));
    assert_eq!(value_after("-"), None);
    assert_eq!(value_after("nul"), None);
    assert_eq!(value_after("null"), Some(json!(null)));
    assert_eq!(value_after("\"sk"), Some(json!("sk")));
}

#[test]
fn growth_across_chunks() {
    let mut p = PartialJson::new();
    let steps: &[(&str, Value)] = &[
        ("{\"ci", json!({})),
        ("ty\": \"Pa", json!({"city": "Pa"})),
        ("ris\", \"n\": 1", json!({"city": "Paris"})),
        ("2, \"tags\": [\"a", json!({"city": "Paris", "n": 12, "tags": ["a"]})),
        ("b\"]", json!({"city": "Paris", "n": 12, "tags": ["ab"]})),
        ("}", json!({"city": "Paris", "n": 12, "tags": ["ab"]})),
    ];
    for (chunk, expected) in steps {
        p.push(chunk).unwrap();
        assert_eq!(p.value(), Some(expected), "after {chunk:?}");
    }
    assert_eq!(p.text(), r#"{"city": "Paris", "n": 12, "tags": ["ab"]}"#);
    assert_eq!(p.finish().unwrap(), json!({"city": "Paris", "n": 12, "tags": ["ab"]}));
}

#[test]
fn duplicate_keys_last_wins() {
    let mut p = fed(&[r#"{"a": [1], "a": "x"#]);
    assert_eq!(p.value(), Some(&json!({"a": "x"})));
    p.push(r#"y", "a": {"b": 2}, "a": 3}"#).unwrap();
    assert_eq!(p.value(), Some(&json!({"a": 3})));
    assert_eq!(p.finish().unwrap(), json!({"a": 3}));
    check_against_serde(r#"{"a": {"x": [1, {"y": 2}]}, "a": [3], "b": 1}"#);
}

#[test]
fn finish_matches_serde_on_samples() {
    let samples = [
        r#"{"a": [1, -2.5e3, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00"]}"#,
        " \t\n\r[ 1 , 2 ] \n",
        "0",
        "-0",
        "-0.0e-0",
        "1E+5",
        "1e400",
        "1e-400",
        "18446744073709551615",
        "18446744073709551616",
        "-9223372036854775808",
        "-9223372036854775809",
        "123456789012345678901234567890",
        "0.1",
        "3.141592653589793238462643383279",
        "\"é😀ü\"",
        r#"{"é😀": "ü\u0000"}"#,
        "{}",
        "[]",
        "[[], {}, [[]]]",
        "\"\u{7f}\"",
        // Invalid ones.
        "",
        " ",
        "01",
        "[01]",
        "-",
        "1.",
        "1.e5",
        ".5",
        "+1",
        "1e",
        "1e+",
        "--1",
        "1 2",
        "[1,]",
        "{\"a\":1,}",
        "{\"a\" 1}",
        "{1: 2}",
        "[1 2]",
        "{\"a\":1]",
        "[1}",
        "tx",
        "nul",
        "truex",
        "[true false]",
        "\"\\x\"",
        "\"\\u12G4\"",
        "\"\\ud800\"",
        "\"\\udc00\"",
        "\"\\ud800\\u0041\"",
        "\"\\ud800\\n\"",
        "\"\\ud800\\ud800\"",
        "\"a\tb\"",
        "\"a\nb\"",
        "\u{feff}1",
        "1\u{c}",
        "\"abc",
        "[",
        "{",
        "{\"a\"",
        "{\"a\":",
    ];
    for text in samples {
        check_against_serde(text);
    }
}

#[test]
fn every_char_in_every_position_matches_serde() {
    let templates = [
        "[\"a@b\"]",
        "{\"k@\": 1}",
        "\"\\@\"",
        "\"\\u00@0\"",
        "\"\\ud83d@\\ude00\"",
        "[1@,2]",
        "[0@]",
        "[-@1]",
        "[1.@]",
        "[1e@1]",
        "@1",
        "1@",
        "[@]",
        "[@1]",
        "{\"a\"@:1}",
        "{@\"a\":1}",
        "[1,@2]",
        "[t@ue]",
        "[nul@]",
    ];
    let chars = (0u8..0x80).map(char::from).chain(['é', '\u{a0}', '\u{2028}', '\u{feff}', '😀']);
    for c in chars {
        for template in templates {
            check_against_serde(&template.replace('@', c.encode_utf8(&mut [0; 4])));
        }
    }
}

#[test]
fn errors() {
    let cases: &[(&str, usize)] = &[
        ("{} x", 3),
        ("{\"a\" 1}", 5),
        ("[1,]", 3),
        ("01", 1),
        ("\"a\nb\"", 2),
        ("\"\\udc00\"", 6),
        ("\"x\\ud800\\u0041\"", 13),
        ("tx", 1),
        ("\"\\q\"", 2),
    ];
    for (text, offset) in cases {
        let mut p = PartialJson::new();
        let err = p.push(text).unwrap_err();
        assert_eq!(err.offset, *offset, "{text:?}: {err}");
        assert!(serde_json::from_str::<Value>(text).is_err());
    }
    let err = parse("1e400").unwrap_err();
    assert_eq!(err, PartialJsonError { offset: 0, reason: "number out of range".into() });
    assert_eq!(err.to_string(), "invalid JSON at byte 0: number out of range");
}

#[test]
fn state_after_error() {
    let mut p = PartialJson::new();
    p.push(r#"{"a": [1, "x"#).unwrap();
    let good = p.value().cloned();
    assert_eq!(good, Some(json!({"a": [1, "x"]})));
    let err = p.push("\"]]").unwrap_err();
    assert_eq!(err.offset, 14);
    assert_eq!(p.value().cloned(), good);
    assert_eq!(p.push("}").unwrap_err(), err);
    assert_eq!(p.push("").unwrap_err(), err);
    assert_eq!(p.value().cloned(), good);
    assert_eq!(p.text(), r#"{"a": [1, "x"]]}"#);
    assert_eq!(p.finish().unwrap_err(), err);

    // Bytes before the error in the failing chunk are reflected.
    let mut p = fed(&["[\"ab"]);
    assert!(p.push("cd\u{1}").is_err());
    assert_eq!(p.value(), Some(&json!(["abcd"])));
}

#[test]
fn finish_on_empty_and_incomplete_input() {
    assert_eq!(
        PartialJson::new().finish().unwrap_err(),
        PartialJsonError { offset: 0, reason: "unexpected end of input".into() }
    );
    assert_eq!(PartialJson::default().finish().unwrap_err().offset, 0);
    assert_eq!(fed(&[" \n "]).finish().unwrap_err().offset, 3);
    assert!(fed(&["{\"a\": 1"]).finish().is_err());
    assert!(fed(&["\"abc"]).finish().is_err());
    assert!(fed(&["\"abc\\u00"]).finish().is_err());
    assert_eq!(fed(&["42"]).finish().unwrap(), json!(42));
    assert_eq!(fed(&["4", "2", "."]).value(), None);
    assert!(fed(&["4", "2", "."]).finish().is_err());
    assert_eq!(fed(&["4", "2", ".", "5"]).finish().unwrap(), json!(42.5));
    assert_eq!(fed(&["tru", "e"]).finish().unwrap(), json!(true));
}

#[test]
fn depth_limit_matches_serde() {
    assert_eq!(MAX_DEPTH, 127);
    for depth in [1, 100, 126, 127, 128, 129, 200] {
        let arrays = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
        let objects = format!("{}null{}", "{\"k\":".repeat(depth), "}".repeat(depth));
        let half = depth / 2 + 1;
        let mixed = format!("{}0{}", "[{\"k\":".repeat(half), "}]".repeat(half));
        for text in [&arrays, &objects, &mixed] {
            let expected = serde_json::from_str::<Value>(text).ok();
            assert_eq!(expected.is_some(), text.matches(['[', '{']).count() <= 127);
            assert_eq!(parse(text).ok(), expected, "depth {depth}");
        }
        // The error is raised as soon as the container that is too deep opens.
        let mut p = PartialJson::new();
        let result = p.push(&"[".repeat(depth));
        assert_eq!(result.is_err(), depth > 127);
        if depth > 127 {
            assert_eq!(result.unwrap_err().offset, 127);
        }
    }
}

#[test]
fn chunks_split_mid_escape_and_mid_text() {
    let text = r#"{"k\u00e9y": "a\u00e9\ud83d\ude00\n\"é😀z", "n": [-1.5e+2, 0]}"#;
    let expected = serde_json::from_str::<Value>(text).unwrap();
    // One char per chunk: every escape is split, every multi-byte char is its own chunk.
    let mut p = PartialJson::new();
    let mut seen = Vec::new();
    for c in text.chars() {
        p.push(c.encode_utf8(&mut [0; 4])).unwrap();
        if let Some(Value::String(s)) = p.value().and_then(|v| v.get("k\u{e9}y")) {
            seen.push(s.clone());
        }
    }
    assert_eq!(p.value(), Some(&expected));
    assert_eq!(p.finish().unwrap(), expected);
    // The string grew through exactly these values: escapes appear only once complete.
    seen.dedup();
    assert_eq!(
        seen,
        ["", "a", "aé", "aé😀", "aé😀\n", "aé😀\n\"", "aé😀\n\"é", "aé😀\n\"é😀", "aé😀\n\"é😀z"]
    );
    check_against_serde(text);

    // Explicit splits inside a surrogate pair escape and inside `\u`.
    let p = fed(&["[\"\\ud8", "3d\\", "ude", "00é", "\\u00", "e9\"]"]);
    assert_eq!(p.finish().unwrap(), json!(["😀éé"]));
    let mut p = fed(&["\"x\\ud83d\\"]);
    assert_eq!(p.value(), Some(&json!("x")));
    assert!(p.push("n\"").is_err());
}

#[test]
fn large_inputs_in_small_chunks() {
    // Not timed: a quadratic implementation would take minutes here, a linear one well under
    // a second.
    let body = "abcdefghé😀\\n".repeat(80_000); // ~1.1 MB of JSON string content
    let text = format!("{{\"path\": \"/tmp/x\", \"content\": \"{body}\"}}");
    let mut p = PartialJson::new();
    let mut start = 0;
    while start < text.len() {
        let mut end = (start + 3).min(text.len());
        while !text.is_char_boundary(end) {
            end += 1;
        }
        p.push(&text[start..end]).unwrap();
        start = end;
    }
    let expected = serde_json::from_str::<Value>(&text).unwrap();
    assert_eq!(p.value(), Some(&expected));
    assert_eq!(p.finish().unwrap(), expected);

    // Deep nesting with many elements, fed byte by byte.
    let inner = format!("[{}0]", "1, ".repeat(20_000));
    let text = format!("{}{inner}{}", "{\"k\": [".repeat(60), "]}".repeat(60));
    let mut p = PartialJson::new();
    for i in 0..text.len() {
        p.push(&text[i..i + 1]).unwrap();
    }
    assert_eq!(p.finish().unwrap(), serde_json::from_str::<Value>(&text).unwrap());
}
