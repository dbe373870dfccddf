//! `weft chat` through a pseudo-terminal (expectrl): the real binary, its line editor in raw
//! mode, Ctrl-C as the terminal sends it. Local runs on the faux provider, and runs on a
//! `weft-server` started in this process on 127.0.0.1 (an agent whose tool needs approval).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use expectrl::session::OsSession;
use expectrl::{ControlCode, Eof, Expect, Regex, Session};

/// A long answer streamed slowly (a character every 40 ms: about 16 s), for Ctrl-C to abort.
const SLOW: &str = "zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\
zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\
zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz\
zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz end";

/// `weft chat ARGS` on a pseudo-terminal, in its own `WEFT_HOME`.
fn chat(home: &Path, args: &[&str]) -> OsSession {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_weft"));
    cmd.arg("chat").args(args).env("NO_COLOR", "1").env("TERM", "xterm").env("WEFT_HOME", home);
    for var in ["WEFT_API_KEY", "WEFT_STORE", "WEFT_PROVIDER", "WEFT_MODEL", "RUST_LOG"] {
        cmd.env_remove(var);
    }
    let mut session = Session::spawn(cmd).expect("weft chat starts on a pseudo-terminal");
    session.set_expect_timeout(Some(Duration::from_secs(30)));
    session
}

/// Waits for `text` on the terminal, saying what was there instead when it does not come.
fn see(p: &mut OsSession, text: &str) {
    if let Err(e) = p.expect(text) {
        panic!("{text:?} did not appear on the terminal: {e}");
    }
}

/// Types a line and presses Enter (a carriage return, as a terminal sends it).
fn type_line(p: &mut OsSession, line: &str) {
    see(p, "> ");
    p.send(format!("{line}\r")).unwrap();
}

/// The id `session: ID` announced.
fn session_id(p: &mut OsSession) -> String {
    let found = p.expect(Regex("session: ([0-9a-zA-Z-]{8,})")).expect("the session is announced");
    String::from_utf8(found.get(1).unwrap().to_vec()).unwrap()
}

fn write(home: &Path, name: &str, json: &str) -> String {
    let path = home.join(name);
    std::fs::write(&path, json).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn a_local_chat_streams_asks_for_approval_aborts_and_keeps_sessions() {
    let home = tempfile::tempdir().unwrap();
    let script = write(
        home.path(),
        "chat.json",
        &format!(
            r#"{{"turns":[
            {{"thinking":"A greeting.","text":"Hello from the chat.","chunkSize":3,"delayMs":5,"usage":{{"input":10,"output":5}}}},
            {{"text":"Calling echo.","toolCalls":[{{"id":"c1","name":"echo","arguments":{{"text":"approved words"}}}}],"chunkSize":4}},
            {{"text":"Echo done.","chunkSize":4}},
            {{"text":"Trying again.","toolCalls":[{{"id":"c2","name":"echo","arguments":{{"text":"secret"}}}}],"chunkSize":4}},
            {{"text":"Fine, no echo.","chunkSize":4}},
            {{"text":"{SLOW}","chunkSize":1,"delayMs":40}},
            {{"text":"Back again.","chunkSize":4,"usage":{{"input":7,"output":3}}}}
        ]}}"#
        ),
    );
    let mut p = chat(home.path(), &["--script", &script, "--approve", "echo"]);
    see(&mut p, "weft chat (provider faux, model faux)");

    // No session until the first message.
    type_line(&mut p, "/session");
    see(&mut p, "no session yet");

    // A plain exchange: thinking, streamed text, the summary line.
    type_line(&mut p, "hi");
    let first = session_id(&mut p);
    see(&mut p, "thinking: A greeting.");
    see(&mut p, "Hello from the chat.");
    see(&mut p, "tokens: 10 in, 5 out");
    see(&mut p, "model: faux");

    // Approved at the prompt: the tool runs, the run goes on to its end.
    type_line(&mut p, "please echo");
    see(&mut p, "[awaiting approval] echo {\"text\":\"approved words\"}");
    see(&mut p, "approve echo {\"text\":\"approved words\"}? [y/n] ");
    p.send("y\r").unwrap();
    see(&mut p, "approved echo");
    see(&mut p, "  approved words");
    see(&mut p, "[tool] echo: ok");
    see(&mut p, "Echo done.");
    see(&mut p, "tokens: ");

    // Denied: the model sees an error result and answers it.
    type_line(&mut p, "once more");
    see(&mut p, "approve echo {\"text\":\"secret\"}? [y/n] ");
    p.send("maybe\r").unwrap();
    see(&mut p, "answer y or n");
    see(&mut p, "approve echo {\"text\":\"secret\"}? [y/n] ");
    p.send("n\r").unwrap();
    see(&mut p, "denied echo");
    see(&mut p, "denied by the user at the prompt");
    see(&mut p, "[tool] echo: error");
    see(&mut p, "Fine, no echo.");

    // Ctrl-C during a slow run aborts that run, not the program; the next message works.
    type_line(&mut p, "tell me a long story");
    see(&mut p, "zzzzzzzz");
    p.send(ControlCode::EndOfText).unwrap();
    see(&mut p, "weft: interrupted: the run was aborted");
    type_line(&mut p, "are you there?");
    see(&mut p, "Back again.");
    see(&mut p, "tokens: 7 in, 3 out");
    type_line(&mut p, "/session");
    see(&mut p, &format!("session: {first}"));

    // /model: shown, then changed (a new session starts with it).
    type_line(&mut p, "/model");
    see(&mut p, "model: faux");
    type_line(&mut p, "/model gpt-4o");
    see(&mut p, "model: gpt-4o (a session keeps its model");
    type_line(&mut p, "hello again");
    let second = session_id(&mut p);
    assert_ne!(second, first);
    see(&mut p, "Hello from the chat.");
    see(&mut p, "model: gpt-4o");

    // /session ID switches back (from the store); an unknown id is one line, and the loop goes on.
    type_line(&mut p, &format!("/session {first}"));
    see(&mut p, &format!("session: {first} (model faux)"));
    type_line(&mut p, "/session nope");
    see(&mut p, "weft: unknown session nope");
    type_line(&mut p, "/new");
    see(&mut p, "new session: the next message starts it");
    type_line(&mut p, "/session");
    see(&mut p, "no session yet");
    type_line(&mut p, "/frobnicate");
    see(&mut p, "weft: unknown command /frobnicate");

    // Ctrl-C at the prompt clears the line; the chat goes on. Ctrl-D quits.
    see(&mut p, "> ");
    p.send("half a line").unwrap();
    p.send(ControlCode::EndOfText).unwrap();
    type_line(&mut p, "/help");
    see(&mut p, "/quit");
    see(&mut p, "> ");
    p.send(ControlCode::EndOfTransmission).unwrap();
    p.expect(Eof).unwrap();
    let history = std::fs::read_to_string(home.path().join("chat_history")).unwrap();
    assert!(history.contains("please echo") && history.contains("/model gpt-4o"), "{history}");
    assert!(!history.contains("half a line"), "{history}");

    // The sessions are in the store: another chat process resumes the first one.
    let mut p = chat(home.path(), &["--script", &script]);
    type_line(&mut p, &format!("/session {first}"));
    see(&mut p, &format!("session: {first} (model faux)"));
    type_line(&mut p, "/quit");
    p.expect(Eof).unwrap();
}

mod server {
    use schemars::JsonSchema;
    use serde::Deserialize;
    use weft_agent::{Agent, tool_fn};
    use weft_llm::faux::{FauxProvider, FauxScript};
    use weft_server::{Server, Settings};

    #[derive(Deserialize, JsonSchema)]
    struct PathArgs {
        /// The file.
        path: String,
    }

    /// A server on 127.0.0.1 with the faux provider playing `script`, a tool that needs
    /// approval, and the API key `k1`; its base URL.
    pub(super) fn start(runtime: &tokio::runtime::Runtime, script: &str) -> String {
        let script = FauxScript::from_json(script).unwrap();
        let delete = tool_fn("delete_file", "Deletes a file.", |args: PathArgs| async move {
            Ok::<_, String>(format!("deleted {}", args.path))
        })
        .with_approval();
        let agent =
            Agent::builder(FauxProvider::new(script)).model("faux").tool(delete).build().unwrap();
        let mut settings = Settings::new("faux");
        settings.api_keys.insert("k1".into(), "tester".into());
        let server = Server::new(agent, settings);
        let listener = runtime.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        runtime.spawn(server.serve(listener, std::future::pending()));
        format!("http://{addr}")
    }
}

#[test]
fn a_chat_against_a_server_asks_for_approval_and_aborts_with_ctrl_c() {
    let home = tempfile::tempdir().unwrap();
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let base = server::start(
        &runtime,
        &format!(
            r#"{{"turns":[
            {{"text":"I will delete it.","toolCalls":[{{"id":"d1","name":"delete_file","arguments":{{"path":"notes.txt"}}}}],"chunkSize":4,"usage":{{"input":20,"output":6}}}},
            {{"text":"Deleted as asked.","chunkSize":4}},
            {{"text":"And this one.","toolCalls":[{{"id":"d2","name":"delete_file","arguments":{{"path":"todo.txt"}}}}],"chunkSize":4}},
            {{"text":"Kept it.","chunkSize":4}},
            {{"text":"{SLOW}","chunkSize":1,"delayMs":40}},
            {{"text":"Still here.","chunkSize":4}}
        ]}}"#
        ),
    );

    // A wrong key: one line, the loop goes on.
    let mut p = chat(home.path(), &["--server", &base, "--api-key", "wrong"]);
    see(&mut p, &format!("weft chat (server {base})"));
    type_line(&mut p, "hello");
    see(&mut p, "weft: the server: ");
    see(&mut p, "401");
    type_line(&mut p, "/quit");
    p.expect(Eof).unwrap();

    let mut p = chat(home.path(), &["--server", &base, "--api-key", "k1"]);
    type_line(&mut p, "delete my notes");
    let id = session_id(&mut p);
    see(&mut p, "I will delete it.");
    see(&mut p, "approve delete_file {\"path\":\"notes.txt\"}? [y/n] ");
    p.send("y\r").unwrap();
    see(&mut p, "deleted notes.txt");
    see(&mut p, "[tool] delete_file: ok");
    see(&mut p, "Deleted as asked.");
    see(&mut p, "tokens: ");

    type_line(&mut p, "and the todo list");
    see(&mut p, "approve delete_file {\"path\":\"todo.txt\"}? [y/n] ");
    p.send("n\r").unwrap();
    see(&mut p, "denied by the user at the prompt");
    see(&mut p, "[tool] delete_file: error");
    see(&mut p, "Kept it.");

    // Ctrl-C aborts the server's run (POST …/abort); the chat and the session go on.
    type_line(&mut p, "a long story");
    see(&mut p, "zzzzzzzz");
    p.send(ControlCode::EndOfText).unwrap();
    see(&mut p, "weft: interrupted: the run was aborted");
    type_line(&mut p, "still there?");
    see(&mut p, "Still here.");
    type_line(&mut p, "/session");
    see(&mut p, &format!("session: {id}"));
    type_line(&mut p, "/session nope");
    see(&mut p, "weft: unknown session nope");
    type_line(&mut p, "/quit");
    p.expect(Eof).unwrap();

    // What the server kept: the approved call ran, the denied one has the denial as its result.
    let client = weft_client::Client::new(&base).api_key("k1");
    let view = runtime.block_on(client.get_session(&id)).unwrap();
    let results: Vec<(String, bool)> = view
        .messages
        .iter()
        .filter_map(|m| match m {
            weft_core::Message::ToolResult(r) => Some((r.text_content(), r.is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0], ("deleted notes.txt".to_string(), false));
    assert!(
        results[1].1 && results[1].0.contains("denied by the user at the prompt"),
        "{results:?}"
    );
    assert_eq!(view.status, weft_core::SessionStatus::Completed);

    // A server that is not there: one line per message, and the chat goes on.
    drop(runtime);
    let mut p = chat(home.path(), &["--server", &base]);
    type_line(&mut p, "anyone?");
    see(&mut p, "weft: the server: ");
    type_line(&mut p, "/help");
    see(&mut p, "/quit");
    type_line(&mut p, "/quit");
    p.expect(Eof).unwrap();
}
