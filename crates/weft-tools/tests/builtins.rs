//! The built-in tools' guards, each through the tool the model would call: a refused call is
//! an error result (`ToolError::Denied` or a parse error), never an effect.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use weft_agent::{CancellationToken, Tool, ToolContext, ToolError, ToolEvent, ToolOutput};
use weft_tools::BuiltinsConfig;

fn tools(config: BuiltinsConfig) -> Vec<Arc<dyn Tool>> {
    weft_tools::builtin::tools(&config).unwrap()
}

fn named(tools: &[Arc<dyn Tool>], name: &str) -> Arc<dyn Tool> {
    tools.iter().find(|t| t.spec().name == name).cloned().unwrap()
}

async fn call_with(
    tool: &Arc<dyn Tool>,
    args: Value,
    cancel: CancellationToken,
) -> (Vec<String>, Result<ToolOutput, ToolError>) {
    let mut stream = tool.execute(args, ToolContext::new("c", cancel));
    let mut deltas = Vec::new();
    while let Some(event) = stream.next().await {
        match event {
            ToolEvent::Delta(d) => deltas.push(d),
            ToolEvent::Complete(out) => return (deltas, Ok(out)),
            ToolEvent::Error(e) => return (deltas, Err(e)),
        }
    }
    panic!("no result");
}

async fn call(tool: &Arc<dyn Tool>, args: Value) -> Result<String, ToolError> {
    call_with(tool, args, CancellationToken::new()).await.1.map(|o| o.text_output())
}

fn denied(result: Result<String, ToolError>, what: &str) {
    assert!(matches!(result, Err(ToolError::Denied(_))), "{what}: {result:?}");
}

fn file_tools(root: &std::path::Path) -> Vec<Arc<dyn Tool>> {
    tools(BuiltinsConfig {
        tools: vec!["read_file".into(), "list_dir".into(), "write_file".into()],
        root: Some(root.to_path_buf()),
        ..Default::default()
    })
}

#[tokio::test]
async fn file_tools_stay_inside_their_root() {
    let outside = tempfile::tempdir().unwrap();
    std::fs::write(outside.path().join("secret.txt"), "secret").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir_all(root.join("sub")).unwrap();
    std::fs::write(root.join("sub/note.txt"), "hello").unwrap();
    std::os::unix::fs::symlink(outside.path(), root.join("escape")).unwrap();
    std::os::unix::fs::symlink(outside.path().join("secret.txt"), root.join("link.txt")).unwrap();
    let fifo = root.join("fifo");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let tools = file_tools(&root);
    let (read, list, write) =
        (named(&tools, "read_file"), named(&tools, "list_dir"), named(&tools, "write_file"));

    assert_eq!(call(&read, json!({"path": "sub/note.txt"})).await.unwrap(), "hello");
    assert_eq!(call(&list, json!({})).await.unwrap(), "escape\nfifo\nlink.txt\nsub/");
    assert_eq!(
        call(&write, json!({"path": "sub/new.txt", "content": "hi"})).await.unwrap(),
        "wrote 2 bytes to sub/new.txt"
    );
    assert_eq!(std::fs::read_to_string(root.join("sub/new.txt")).unwrap(), "hi");

    denied(call(&read, json!({"path": "../root/sub/note.txt"})).await, "..");
    denied(call(&read, json!({"path": "sub/../../secret.txt"})).await, "nested ..");
    denied(
        call(&read, json!({"path": outside.path().join("secret.txt")})).await,
        "absolute outside",
    );
    denied(call(&read, json!({"path": "/etc/passwd"})).await, "absolute elsewhere");
    denied(call(&read, json!({"path": "escape/secret.txt"})).await, "symlinked directory");
    denied(call(&read, json!({"path": "link.txt"})).await, "symlinked file");
    denied(call(&list, json!({"path": "escape"})).await, "list through a symlink");
    denied(call(&read, json!({"path": "fifo"})).await, "a FIFO");
    denied(
        call(&write, json!({"path": "link.txt", "content": "x"})).await,
        "write through a symlink",
    );
    denied(
        call(&write, json!({"path": "escape/evil.txt", "content": "x"})).await,
        "write into a symlinked dir",
    );
    denied(call(&write, json!({"path": "../evil.txt", "content": "x"})).await, "write with ..");
    assert_eq!(std::fs::read_to_string(outside.path().join("secret.txt")).unwrap(), "secret");
    assert!(!outside.path().join("evil.txt").exists() && !dir.path().join("evil.txt").exists());
}

/// A hard link inside the root to a file outside it is the outside file under a second name:
/// neither read nor written (nor truncated) through the root.
#[tokio::test]
async fn a_hard_link_to_a_file_outside_the_root_is_neither_read_nor_written() {
    let base = tempfile::tempdir().unwrap();
    let (root, outside) = (base.path().join("root"), base.path().join("outside"));
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "secret").unwrap();
    std::fs::hard_link(outside.join("secret.txt"), root.join("linked.txt")).unwrap();
    std::fs::write(root.join("plain.txt"), "plain").unwrap();
    let tools = file_tools(&root);
    let (read, write) = (named(&tools, "read_file"), named(&tools, "write_file"));

    let refused = call(&read, json!({"path": "linked.txt"})).await;
    assert!(
        matches!(&refused, Err(ToolError::Denied(m)) if m.contains("hard links")),
        "{refused:?}"
    );
    let refused = call(&write, json!({"path": "linked.txt", "content": "overwritten"})).await;
    assert!(
        matches!(&refused, Err(ToolError::Denied(m)) if m.contains("hard links")),
        "{refused:?}"
    );
    assert_eq!(std::fs::read_to_string(outside.join("secret.txt")).unwrap(), "secret");
    // A file with one name is used as before.
    assert_eq!(call(&read, json!({"path": "plain.txt"})).await.unwrap(), "plain");
    call(&write, json!({"path": "plain.txt", "content": "new"})).await.unwrap();
    assert_eq!(std::fs::read_to_string(root.join("plain.txt")).unwrap(), "new");
}

fn fetcher(allow_loopback: bool) -> Arc<dyn Tool> {
    named(
        &tools(BuiltinsConfig {
            tools: vec!["fetch_url".into()],
            fetch_allow_loopback: allow_loopback,
            fetch_max_bytes: Some(2000),
            ..Default::default()
        }),
        "fetch_url",
    )
}

/// A one-route HTTP server on 127.0.0.1: `/page` is HTML, `/big` is long, `/redirect` points
/// at a private address, `/hop` redirects to `/page`.
async fn web() -> String {
    use axum::response::{Html, Redirect};
    use axum::routing::get;
    let router = axum::Router::new()
        .route("/page", get(|| async { Html("<html><head><title>T</title><script>var x=1;</script></head><body><h1>Weft</h1><p>Hello <b>world</b></p></body></html>") }))
        .route("/big", get(|| async { "x".repeat(10_000) }))
        .route("/redirect", get(|| async { Redirect::temporary("http://10.0.0.1/internal") }))
        .route("/hop", get(|| async { Redirect::temporary("/page") }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{addr}")
}

#[tokio::test]
async fn fetch_url_refuses_this_machine_and_private_networks() {
    let base = web().await;
    let strict = fetcher(false);
    for url in [
        "file:///etc/passwd".to_string(),
        format!("{base}/page"),
        "http://[::1]/".into(),
        "http://169.254.169.254/latest/meta-data/".into(),
        "http://2130706433/".into(),
        "http://0x7f000001/".into(),
        "http://0177.0.0.1/".into(),
        "http://[::ffff:127.0.0.1]/".into(),
        "http://10.0.0.1/".into(),
        "http://localhost/".into(),
        "http://0.0.0.0/".into(),
    ] {
        denied(call(&strict, json!({"url": url})).await, &url);
    }
    // Loopback allowed (the tests' switch): the page is fetched and its HTML turned into text.
    let local = fetcher(true);
    let page = call(&local, json!({"url": format!("{base}/page")})).await.unwrap();
    assert!(page.contains("Weft") && page.contains("Hello") && page.contains("world"), "{page}");
    assert!(!page.contains("<b>") && !page.contains("var x"), "{page}");
    assert!(call(&local, json!({"url": format!("{base}/hop")})).await.unwrap().contains("Hello"));
    // ... but a redirect to a private address is checked like the first URL.
    denied(call(&local, json!({"url": format!("{base}/redirect")})).await, "redirect to 10.0.0.1");
    denied(
        call(&local, json!({"url": "http://169.254.169.254/"})).await,
        "metadata with loopback allowed",
    );
    let big = call(&local, json!({"url": format!("{base}/big")})).await.unwrap();
    assert!(
        big.starts_with(&"x".repeat(2000)) && big.ends_with("[body truncated at 2000 bytes]"),
        "{}",
        big.len()
    );
}

/// `GET PATH` on `addr`: its status line, or why there is none within a generous bound.
fn get(addr: std::net::SocketAddr, path: &str) -> Result<String, String> {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(Duration::from_secs(20))).map_err(|e| e.to_string())?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .map_err(|e| e.to_string())?;
    let mut response = String::new();
    stream.read_to_string(&mut response).map_err(|e| format!("{path} did not answer: {e}"))?;
    Ok(response.lines().next().unwrap_or_default().to_string())
}

/// A page of 100,000 nested `<div>`s (the HTML parser's worst case: minutes of work) on a
/// runtime of one worker: the call ends (cut or timed out) and, all the while, the same runtime
/// answers HTTP requests: the conversion is not on the async worker.
#[test]
fn a_deep_html_page_ends_within_the_timeout_and_the_runtime_keeps_answering() {
    use axum::response::Html;
    use axum::routing::get as route;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let (served_tx, served) = std::sync::mpsc::channel::<()>();
    let router = axum::Router::new()
        .route(
            "/deep",
            route(move || {
                let _ = served_tx.send(());
                async { Html(format!("<p>before</p>{}deep", "<div>".repeat(100_000))) }
            }),
        )
        .route("/ping", route(|| async { "pong" }));
    let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(async move { axum::serve(listener, router).await });
    let tool = named(
        &tools(BuiltinsConfig {
            tools: vec!["fetch_url".into()],
            fetch_allow_loopback: true,
            fetch_timeout: Some(Duration::from_secs(5)),
            ..Default::default()
        }),
        "fetch_url",
    );
    let (done_tx, done) = std::sync::mpsc::channel();
    runtime.spawn(async move {
        let result = call(&tool, json!({"url": format!("http://{addr}/deep")})).await;
        let _ = done_tx.send(result);
    });

    // Nothing here panics before the runtime is let go: a runtime whose worker is stuck would
    // make the test hang in its drop instead of failing.
    let watch = || -> Result<(Result<String, ToolError>, usize), String> {
        served.recv_timeout(Duration::from_secs(30)).map_err(|_| "the page was not requested")?;
        let mut pings = 0;
        loop {
            if let Ok(result) = done.try_recv() {
                return Ok((result, pings));
            }
            if pings == 1000 {
                return Err("the call did not end (its timeout is 5 s)".into());
            }
            let status = get(addr, "/ping")?;
            if status != "HTTP/1.1 200 OK" {
                return Err(format!("/ping: {status}"));
            }
            pings += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let outcome = watch();
    runtime.shutdown_background();
    let (result, pings) = outcome.unwrap_or_else(|e| panic!("{e}"));
    assert!(pings >= 1, "no request was made during the call");
    match &result {
        Ok(text) => assert!(
            text.starts_with("before") && text.contains("too complex to read past byte"),
            "{text}"
        ),
        Err(ToolError::Failed(m)) => assert!(m.contains("took longer than 5s"), "{m}"),
        Err(other) => panic!("{other:?}"),
    }
}

fn shell(dir: &std::path::Path) -> Arc<dyn Tool> {
    named(
        &tools(BuiltinsConfig {
            tools: vec!["shell".into()],
            shell_cwd: Some(dir.into()),
            ..Default::default()
        }),
        "shell",
    )
}

#[tokio::test]
async fn shell_needs_approval_streams_and_dies_with_its_group() {
    let dir = tempfile::tempdir().unwrap();
    let sh = shell(dir.path());
    assert!(sh.spec().requires_approval, "shell must need approval by default");
    let (deltas, out) =
        call_with(&sh, json!({"command": "echo one; echo two >&2; pwd"}), CancellationToken::new())
            .await;
    let out = out.unwrap().text_output();
    assert!(
        out.contains("one")
            && out.contains("two")
            && out.contains(dir.path().file_name().unwrap().to_str().unwrap()),
        "{out}"
    );
    assert_eq!(deltas.concat(), out);
    let failed = call(&sh, json!({"command": "echo bad; exit 3"})).await;
    assert!(
        matches!(&failed, Err(ToolError::Failed(m)) if m.contains("bad") && m.contains("exit status 3")),
        "{failed:?}"
    );

    // A background child of the command dies with it when the call is cancelled.
    let pidfile = dir.path().join("pid");
    let cancel = CancellationToken::new();
    let command = format!("sleep 60 & echo $! > {}; echo started; wait", pidfile.display());
    let task = tokio::spawn({
        let sh = Arc::clone(&sh);
        let cancel = cancel.clone();
        async move { call_with(&sh, json!({"command": command}), cancel).await }
    });
    for _ in 0..500 {
        if std::fs::read_to_string(&pidfile).is_ok_and(|p| p.ends_with('\n')) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid: i32 = std::fs::read_to_string(&pidfile).unwrap().trim().parse().unwrap();
    cancel.cancel();
    let (_, out) = task.await.unwrap();
    assert!(matches!(out, Err(ToolError::Cancelled(_))), "{out:?}");
    let mut gone = false;
    for _ in 0..100 {
        // kill -0: does the process still exist (a zombie is reaped by init, so it goes)?
        let alive = std::process::Command::new("kill")
            .args(["-0", &pid.to_string()])
            .status()
            .unwrap()
            .success();
        let zombie =
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| s.contains(") Z "));
        if !alive || zombie {
            gone = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(gone, "the background sleep {pid} outlived the cancelled call");
}

/// Whether process `pid` is gone (or a zombie, about to be).
async fn gone(pid: i32) -> bool {
    for _ in 0..250 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"));
        if stat.is_err() || stat.is_ok_and(|s| s.contains(") Z ")) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// The command's environment is PATH, HOME, LANG and what `shell_env` names: nothing else of
/// this process (cargo gives test processes `CARGO_MANIFEST_DIR`).
#[tokio::test]
async fn shell_commands_get_a_cleared_environment() {
    let dir = tempfile::tempdir().unwrap();
    let inherited = "CARGO_MANIFEST_DIR";
    let value = std::env::var(inherited).expect("cargo sets CARGO_MANIFEST_DIR for tests");
    let sh = shell(dir.path());
    let env = call(&sh, json!({"command": "env"})).await.unwrap();
    assert!(!env.contains(inherited) && !env.contains(&value), "{env}");
    if let Ok(path) = std::env::var("PATH") {
        assert!(env.contains(&format!("PATH={path}")), "{env}");
    }
    let listed = named(
        &tools(BuiltinsConfig {
            tools: vec!["shell".into()],
            shell_cwd: Some(dir.path().into()),
            shell_env: vec![inherited.into()],
            ..Default::default()
        }),
        "shell",
    );
    let env = call(&listed, json!({"command": "env"})).await.unwrap();
    assert!(env.contains(&format!("{inherited}={value}")), "{env}");
}

/// `cmd &` holds the output pipes open: the call still ends when `sh` exits, with its output,
/// and the background job does not live on.
#[tokio::test]
async fn a_background_job_neither_holds_the_call_nor_outlives_it() {
    let dir = tempfile::tempdir().unwrap();
    let sh = shell(dir.path());
    let call = call(&sh, json!({"command": "echo before; sleep 777 & echo pid=$!; echo after"}));
    // The tool's own timeout is 120 s: a call that waits for the job ends far later than this.
    let out = tokio::time::timeout(Duration::from_secs(60), call)
        .await
        .expect("the call waited for the background job")
        .unwrap();
    assert!(out.contains("before") && out.contains("after"), "{out}");
    let pid: i32 = out
        .lines()
        .find_map(|l| l.strip_prefix("pid="))
        .and_then(|p| p.trim().parse().ok())
        .unwrap_or_else(|| panic!("no pid in {out}"));
    assert!(gone(pid).await, "the background sleep {pid} outlived the call");
}

#[tokio::test]
async fn the_calculator_parses_and_never_runs_code() {
    let calc = named(
        &tools(BuiltinsConfig { tools: vec!["calculator".into()], ..Default::default() }),
        "calculator",
    );
    assert_eq!(call(&calc, json!({"expression": "(1 + 2) * -3 ^ 2 % 5"})).await.unwrap(), "-2");
    assert_eq!(
        call(&calc, json!({"expression": "sqrt(2) * sqrt(2)"})).await.unwrap(),
        "2.0000000000000004"
    );
    for code in [
        "__import__('os').system('touch /tmp/pwned')",
        "1; rm -rf /",
        "eval('1+1')",
        "a = 1",
        "[1, 2]",
    ] {
        let result = call(&calc, json!({"expression": code})).await;
        assert!(
            matches!(&result, Err(ToolError::InvalidArguments(m)) if m.contains("cannot evaluate")),
            "{code}: {result:?}"
        );
    }
}
