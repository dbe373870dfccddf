//! A run's end is reported only once it is stored, checked against a real `weft serve` whose
//! store fails around a run's end: SQLite on a disk that fills up (a real tmpfs), and Postgres
//! behind a TCP proxy that cuts every connection. While the outage lasts less than
//! `end_commit_timeout`, nothing reports the end, and once the store is back the client is told
//! `completed` with the answer the store keeps — and keeps: no sweep later replaces it. When the
//! outage outlasts it, the client gets an error saying the end was not kept, never `completed`.
//!
//! The tmpfs needs root (or CAP_SYS_ADMIN): elsewhere those tests fail, unless `WEFT_ALLOW_SKIP`
//! has `tmpfs`. The Postgres tests need `WEFT_TEST_POSTGRES_URL` and `psql` (for a schema of
//! their own), likewise (`postgres`).

#![allow(clippy::unwrap_used, missing_docs)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The answer the first model call streams (in about 1.2 s), and the one a recovery would get.
const ANSWER_A: &str = "Answer A: the first and only answer this run gives";
const ANSWER_B: &str = "Answer B";

/// `weft serve` on `home` (its `weft.toml` there), killed when dropped.
struct Serve {
    child: Child,
    addr: String,
}

impl Serve {
    fn start(home: &Path, store: Option<&str>) -> Self {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
        cmd.args(["serve", "--addr", "127.0.0.1:0"]);
        if let Some(store) = store {
            cmd.args(["--store", store]);
        }
        cmd.env("WEFT_HOME", home).env("NO_COLOR", "1").current_dir(home).stdin(Stdio::null());
        for var in ["WEFT_ADDR", "WEFT_STORE", "WEFT_PROVIDER", "WEFT_MODEL", "WEFT_API_KEYS"] {
            cmd.env_remove(var);
        }
        let mut child = cmd.stderr(Stdio::piped()).spawn().unwrap();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        while !line.contains("http://") {
            line.clear();
            assert!(stderr.read_line(&mut line).unwrap() > 0, "weft serve exited: {line}");
        }
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        let addr = line.trim().rsplit("http://").next().unwrap().to_string();
        Self { child, addr }
    }

    fn get(&self, path: &str) -> Value {
        let mut stream = TcpStream::connect(&self.addr).unwrap();
        write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
        let mut response = String::new();
        stream.read_to_string(&mut response).unwrap();
        let body = response.split_once("\r\n\r\n").unwrap().1;
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {response}"))
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A streamed response, read line by line on a thread of its own.
struct Sse {
    lines: mpsc::Receiver<String>,
    seen: String,
}

impl Sse {
    fn post(addr: &str, path: &str, body: &str) -> Self {
        let mut stream = TcpStream::connect(addr).unwrap();
        write!(
            stream,
            "POST {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\
             Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Self { lines, seen: String::new() }
    }

    /// Reads until a line contains `needle`; panics after `bound` or at the end of the response.
    fn until(&mut self, needle: &str, bound: Duration) -> String {
        let deadline = Instant::now() + bound;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                    if line.contains(needle) {
                        return line;
                    }
                }
                Err(error) => panic!("{needle:?} never came ({error}); got:\n{}", self.seen),
            }
        }
    }

    /// Reads for `window`, asserting no line contains any of `needles`.
    fn none_of(&mut self, needles: &[&str], window: Duration) {
        let deadline = Instant::now() + window;
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    for needle in needles {
                        assert!(
                            !line.contains(needle),
                            "{needle:?} came during the outage: {line}"
                        );
                    }
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                }
                Err(mpsc::RecvTimeoutError::Timeout) => return,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    panic!("the response ended during the outage:\n{}", self.seen)
                }
            }
        }
    }

    fn session_id(&self) -> String {
        let line = self
            .seen
            .lines()
            .find(|l| l.to_ascii_lowercase().starts_with("x-session-id:"))
            .unwrap_or_else(|| panic!("no session id: {}", self.seen));
        line.split_once(':').unwrap().1.trim().to_string()
    }
}

/// What takes the store away for a while.
trait Outage {
    fn begin(&self);
    fn end(&self);
}

/// A tmpfs mounted on a temporary directory while it lives.
struct SmallDisk {
    dir: tempfile::TempDir,
    filler: PathBuf,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(Stdio::null())
            .status()
            .ok()?;
        let filler = dir.path().join("filler");
        mounted.success().then_some(Self { dir, filler })
    }
}

impl Outage for SmallDisk {
    /// Fills the disk with zeros.
    fn begin(&self) {
        let mut file = std::fs::File::create(&self.filler).unwrap();
        let block = vec![0u8; 64 * 1024];
        while file.write_all(&block).is_ok() {}
        let _ = file.sync_all();
    }

    fn end(&self) {
        std::fs::remove_file(&self.filler).unwrap();
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// A TCP proxy to `upstream` that can cut every connection and refuse new ones meanwhile.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(upstream: String) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (flag, registry) = (Arc::clone(&cut), Arc::clone(&open));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                if flag.load(Ordering::SeqCst) {
                    drop(client);
                    continue;
                }
                let Ok(server) = TcpStream::connect(&upstream) else { continue };
                let mut kept = registry.lock().unwrap();
                for stream in [&client, &server] {
                    kept.push(stream.try_clone().unwrap());
                }
                drop(kept);
                let (mut c_in, mut s_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut c_in, &mut s_out);
                    let _ = s_out.shutdown(std::net::Shutdown::Both);
                });
                let (mut s_in, mut c_out) = (server, client);
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut s_in, &mut c_out);
                    let _ = c_out.shutdown(std::net::Shutdown::Both);
                });
            }
        });
        Self { port, cut, open }
    }
}

impl Outage for Proxy {
    fn begin(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for stream in self.open.lock().unwrap().drain(..) {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
    }

    fn end(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// `home` gets a faux script whose first call streams [`ANSWER_A`] slowly and whose second
/// (a recovery) answers [`ANSWER_B`], and a `weft.toml` with `limits`.
fn prepare(home: &Path, limits: &str) {
    let words: Vec<&str> = ANSWER_A.split_inclusive(' ').collect();
    let turns = serde_json::json!({"turns": [
        {"text": words.concat(), "chunkSize": 4, "delayMs": 100},
        {"text": ANSWER_B}
    ]});
    std::fs::write(home.join("script.json"), turns.to_string()).unwrap();
    std::fs::write(
        home.join("weft.toml"),
        format!("[provider]\nname = \"faux\"\nscript = \"script.json\"\n[limits]\n{limits}"),
    )
    .unwrap();
}

/// A server on `home` (with `limits`) and a run on it whose model is streaming when `outage`
/// begins.
fn a_run_into_an_outage(
    home: &Path,
    store: Option<&str>,
    outage: &dyn Outage,
    limits: &str,
) -> (Serve, Sse) {
    prepare(home, limits);
    let serve = Serve::start(home, store);
    let mut sse = Sse::post(
        &serve.addr,
        "/api/agent/execute",
        r#"{"input":{"role":"user","content":"Question?"},"context":{}}"#,
    );
    sse.until("\"text_delta\"", Duration::from_secs(30));
    outage.begin();
    (serve, sse)
}

/// A run whose store fails from the middle of its model call until `outage` after it: the end
/// is held back until the store takes it, then reported as stored, and it stays.
fn an_end_held_back_until_stored(home: &Path, store: Option<&str>, outage: &dyn Outage) {
    let (serve, mut sse) =
        a_run_into_an_outage(home, store, outage, "end_commit_timeout = \"60s\"\n");
    // The model ends about a second later; its end is not reported while the store is away.
    sse.none_of(&["session_end", "execute_complete"], Duration::from_secs(4));
    outage.end();
    let end = sse.until("\"session_end\"", Duration::from_secs(60));
    assert!(end.contains(r#""status":"completed""#), "{end}");
    assert!(end.contains(ANSWER_A), "{end}");
    let complete = sse.until("execute_complete", Duration::from_secs(30));
    assert!(complete.contains(r#""status":"completed""#), "{complete}");
    let id = sse.session_id();
    // What the store keeps is what the client was told, and stays so, sweep after sweep.
    for _ in 0..2 {
        let view = serve.get(&format!("/api/agent/session/{id}"));
        assert_eq!(view["status"], "completed", "{view}");
        let text = view.to_string();
        assert!(text.contains(ANSWER_A) && !text.contains(ANSWER_B), "{view}");
        std::thread::sleep(Duration::from_secs(3));
    }
}

/// A run whose store is away for longer than `end_commit_timeout`: the client is told the end
/// was not kept, and never `completed`.
fn an_end_never_stored_is_an_error(home: &Path, store: Option<&str>, outage: &dyn Outage) {
    let (serve, mut sse) =
        a_run_into_an_outage(home, store, outage, "end_commit_timeout = \"1s\"\n");
    let complete = sse.until("execute_complete", Duration::from_secs(60));
    let id = sse.session_id();
    outage.end();
    assert!(complete.contains(r#""status":"error""#), "{complete}");
    assert!(!sse.seen.contains(r#""status":"completed""#), "{}", sse.seen);
    assert!(sse.seen.contains("not kept"), "{}", sse.seen);
    let view = serve.get(&format!("/api/agent/session/{id}"));
    assert_ne!(view["status"], "completed", "the store has no end it did not keep: {view}");
}

fn disk_or_skip(test: &str) -> Option<SmallDisk> {
    let disk = SmallDisk::mount("8m");
    if disk.is_none() {
        weft_test_support::skip(
            "tmpfs",
            test,
            "cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)",
        );
    }
    disk
}

#[test]
fn a_full_disk_around_the_end_holds_the_end_back_until_stored() {
    let Some(disk) = disk_or_skip("a_full_disk_around_the_end_holds_the_end_back_until_stored")
    else {
        return;
    };
    an_end_held_back_until_stored(disk.dir.path(), None, &disk);
}

#[test]
fn a_disk_full_for_longer_than_the_end_timeout_is_an_error_never_completed() {
    let test = "a_disk_full_for_longer_than_the_end_timeout_is_an_error_never_completed";
    let Some(disk) = disk_or_skip(test) else { return };
    an_end_never_stored_is_an_error(disk.dir.path(), None, &disk);
}

/// The Postgres test database behind a cutting proxy, in a schema of its own: the store URL.
fn postgres_or_skip(test: &str) -> Option<(Proxy, String)> {
    let url = weft_test_support::postgres_url(test)?;
    // postgres://USER@HOST:PORT/DB
    let rest = url.split_once("://").unwrap().1;
    let (authority, database) = rest.split_once('/').unwrap();
    let (user, host) = authority.rsplit_once('@').unwrap_or(("postgres", authority));
    let schema = format!("weft_d_{}", &uuid_like());
    let created = Command::new("psql")
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", &url, "-c"])
        .arg(format!("CREATE SCHEMA {schema}"))
        .status();
    if !created.is_ok_and(|s| s.success()) {
        weft_test_support::skip(
            "postgres",
            test,
            "psql could not create a schema in the test database",
        );
        return None;
    }
    let proxy = Proxy::start(host.to_string());
    let database = database.split('?').next().unwrap();
    let store = format!(
        "postgres://{user}@127.0.0.1:{}/{database}?options[search_path]={schema}",
        proxy.port
    );
    Some((proxy, store))
}

fn uuid_like() -> String {
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    format!("{:x}{:x}", nanos, std::process::id())
}

#[test]
fn a_cut_postgres_connection_around_the_end_holds_the_end_back_until_stored() {
    let test = "a_cut_postgres_connection_around_the_end_holds_the_end_back_until_stored";
    let Some((proxy, store)) = postgres_or_skip(test) else { return };
    let home = tempfile::tempdir().unwrap();
    an_end_held_back_until_stored(home.path(), Some(&store), &proxy);
}

#[test]
fn postgres_cut_for_longer_than_the_end_timeout_is_an_error_never_completed() {
    let test = "postgres_cut_for_longer_than_the_end_timeout_is_an_error_never_completed";
    let Some((proxy, store)) = postgres_or_skip(test) else { return };
    let home = tempfile::tempdir().unwrap();
    an_end_never_stored_is_an_error(home.path(), Some(&store), &proxy);
}
