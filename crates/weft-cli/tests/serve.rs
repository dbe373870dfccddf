//! `weft serve`: configuration mistakes in one line, loopback only without keys, and a real
//! server answering the plan's flow over loopback HTTP until SIGTERM.
#![allow(clippy::unwrap_used)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};

fn weft(home: &std::path::Path, args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.args(args).env("NO_COLOR", "1").env("WEFT_HOME", home).stdin(Stdio::null());
    for var in [
        "WEFT_ADDR",
        "WEFT_STORE",
        "WEFT_PROVIDER",
        "WEFT_MODEL",
        "WEFT_API_KEYS",
        "WEFT_CORS_ORIGINS",
        "RUST_LOG",
    ] {
        cmd.env_remove(var);
    }
    cmd
}

fn script() -> String {
    format!("{}/../../examples/scripts/serve.json", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_bad_config_file_is_one_line_naming_file_line_and_key() {
    let home = tempfile::tempdir().unwrap();
    let file = home.path().join("weft.toml");
    std::fs::write(&file, "addr = \"127.0.0.1:0\"\n[limits]\nbody_bytes = \"lots\"\n").unwrap();
    let output =
        weft(home.path(), &["serve", "--script", &script(), "--config", file.to_str().unwrap()])
            .output()
            .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("weft: {}:3: limits.body_bytes: ", file.display())),
        "{stderr}"
    );
    // $WEFT_HOME/weft.toml is found without --config.
    let output = weft(home.path(), &["serve", "--script", &script()]).output().unwrap();
    assert_eq!(output.status.code(), Some(2));
}

#[test]
fn without_keys_a_public_address_is_refused() {
    let home = tempfile::tempdir().unwrap();
    let output = weft(
        home.path(),
        &["serve", "--script", &script(), "--store", "memory", "--addr", "0.0.0.0:0"],
    )
    .output()
    .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("refusing to listen on 0.0.0.0"), "{stderr}");
    // It never said it was serving: the refusal is the one line.
    assert!(!stderr.contains("serving"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

fn http(addr: &str, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    response
}

#[test]
fn serves_the_flow_on_the_default_store_and_stops_on_sigterm() {
    let home = tempfile::tempdir().unwrap();
    let mut child = weft(home.path(), &["serve", "--script", &script(), "--addr", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    let body = r#"{"input":{"role":"user","content":"Weather in Paris?"},"context":{"tools":[{"name":"get_weather","parameters":{"type":"object"}}]}}"#;
    let response = http(
        &addr,
        &format!(
            "POST /api/agent/execute HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ),
    );
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains(r#""status":"awaiting_tool_execution""#), "{response}");
    assert!(home.path().join("weft.db").exists(), "the default store is $WEFT_HOME/weft.db");
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}
