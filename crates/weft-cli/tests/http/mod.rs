//! What the tests of `weft serve` child processes share: starting one and learning its address,
//! and one HTTP/1.1 request at a time over a plain socket (without an HTTP client's own
//! behaviour in between).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command};
use std::time::Duration;

/// Spawns `cmd` (a `weft serve`, its stderr piped) and waits for the line saying where it
/// serves: the child and its address. What it logs after is read on, so it never blocks on a
/// full pipe (and shown on the test's stderr, prefixed with `name`, when `echo`).
pub(crate) fn spawn_serving(cmd: &mut Command, name: &str, echo: bool) -> (Child, String) {
    let mut child = cmd.spawn().unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.contains("http://"), "{name} did not start: {line}");
    let addr = line.trim().rsplit("http://").next().unwrap().to_string();
    let name = name.to_string();
    std::thread::spawn(move || {
        let mut sink = String::new();
        while stderr.read_line(&mut sink).is_ok_and(|n| n > 0) {
            if echo {
                eprint!("{name}: {sink}");
            }
            sink.clear();
        }
    });
    (child, addr)
}

use serde_json::Value;

/// One HTTP/1.1 request; the status and the (de-chunked) body.
pub(crate) fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, String) {
    http_with(addr, method, path, &[], body)
}

/// [`http`] with more request headers (`name: value` lines).
pub(crate) fn http_with(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[&str],
    body: Option<&Value>,
) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    let body = body.map(Value::to_string).unwrap_or_default();
    let extra: String = headers.iter().map(|h| format!("{h}\r\n")).collect();
    let request = format!(
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: application/json\r\n\
         {extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).to_string();
    let Some((head, rest)) = text.split_once("\r\n\r\n") else { return (0, String::new()) };
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let chunked = head.to_ascii_lowercase().contains("transfer-encoding: chunked");
    (status, if chunked { dechunk(rest) } else { rest.to_string() })
}

fn dechunk(mut rest: &str) -> String {
    let mut out = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else { break };
        if size == 0 || after.len() < size {
            out.push_str(after.get(..size.min(after.len())).unwrap_or(""));
            break;
        }
        out.push_str(&after[..size]);
        rest = after[size..].strip_prefix("\r\n").unwrap_or(&after[size..]);
    }
    out
}
