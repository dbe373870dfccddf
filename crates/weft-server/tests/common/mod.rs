//! A real server on 127.0.0.1:0 with the faux provider and a SQLite store in a temp dir, and
//! the client helpers the tests share.
#![allow(dead_code, unreachable_pub, clippy::unwrap_used)]

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};
use weft_agent::{Agent, AgentBuilder};
use weft_llm::faux::{FauxProvider, FauxScript, FauxTurn};
use weft_protocol::Frame;
use weft_protocol::framing::parse_sse;
use weft_server::{Server, Settings};

pub struct TestServer {
    pub base: String,
    pub client: reqwest::Client,
    pub key: Option<String>,
    shutdown: Option<tokio::sync::oneshot::Sender<()>>,
    pub task: Option<tokio::task::JoinHandle<Result<(), weft_server::ServeError>>>,
    pub dir: tempfile::TempDir,
    /// The server itself: its router answers without a connection (at the cap, say).
    pub app: Server,
}

/// The weather flow of the agent plan: a remote tool call, then the answer.
pub fn weather_script() -> FauxScript {
    FauxScript::new([
        FauxTurn::text("Let me look that up.")
            .with_tool_call_id("call-1", "get_weather", json!({"city": "Paris"}))
            .with_chunk_size(4)
            .with_usage(40, 12),
        FauxTurn::text("It is sunny in Paris.").with_chunk_size(4).with_usage(60, 7),
    ])
}

/// A long text streamed slowly (for cuts while the run is live).
pub fn slow_script(delay_ms: u64) -> FauxScript {
    FauxScript::new([FauxTurn::text("The quick brown fox jumps over the lazy dog, twice over.")
        .with_thinking("Let me think about foxes and dogs.")
        .with_chunk_size(3)
        .with_delay_ms(delay_ms)
        .with_usage(10, 20)])
}

/// A model that never finishes until aborted.
pub fn stall_script() -> FauxScript {
    FauxScript::new([FauxTurn::text("Working on it").stalled()])
}

pub fn remote_weather_tool() -> Value {
    json!({"name": "get_weather", "label": "Weather", "description": "The weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                          "required": ["city"]}})
}

pub async fn start(script: FauxScript) -> TestServer {
    start_with(script, |b| b, |_| {}).await
}

pub async fn start_with(
    script: FauxScript,
    agent: impl FnOnce(AgentBuilder) -> AgentBuilder,
    settings: impl FnOnce(&mut Settings),
) -> TestServer {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("weft.db");
    start_on(dir, &path, script, agent, settings).await
}

/// A server on the SQLite file `path` (somewhere a test prepared: a small file system …).
pub async fn start_at(path: &std::path::Path, script: FauxScript) -> TestServer {
    start_on(tempfile::tempdir().unwrap(), path, script, |b| b, |_| {}).await
}

/// A second server (a replica) on the SQLite file of `first`, as another process would open it.
pub async fn replica_of(
    first: &TestServer,
    script: FauxScript,
    agent: impl FnOnce(AgentBuilder) -> AgentBuilder,
) -> TestServer {
    let path = first.dir.path().join("weft.db");
    start_on(tempfile::tempdir().unwrap(), &path, script, agent, |_| {}).await
}

async fn start_on(
    dir: tempfile::TempDir,
    path: &std::path::Path,
    script: FauxScript,
    agent: impl FnOnce(AgentBuilder) -> AgentBuilder,
    settings: impl FnOnce(&mut Settings),
) -> TestServer {
    let store = weft_store::connect(&format!("sqlite:{}", path.display())).await.unwrap();
    let agent: Agent = agent(Agent::builder(FauxProvider::new(script)).model("faux").store(store))
        .build()
        .unwrap();
    let mut s = Settings::new("faux");
    s.requests_per_minute = 0;
    // As `weft serve` runs: connections on threads of their own (the library's default is the
    // caller's runtime, which the other crates' tests use).
    s.connection_threads = 2;
    settings(&mut s);
    let key = s.api_keys.keys().next().cloned();
    let server = Server::new(agent, s);
    let app = server.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(listener, async move {
        let _ = rx.await;
    }));
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    TestServer { base, client, key, shutdown: Some(tx), task: Some(task), dir, app }
}

impl TestServer {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub fn post(&self, path: &str, key: Option<&str>) -> reqwest::RequestBuilder {
        let request = self.client.post(self.url(path));
        match key.or(self.key.as_deref()) {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    pub fn get(&self, path: &str, key: Option<&str>) -> reqwest::RequestBuilder {
        let request = self.client.get(self.url(path));
        match key.or(self.key.as_deref()) {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    pub fn delete(&self, path: &str, key: Option<&str>) -> reqwest::RequestBuilder {
        let request = self.client.delete(self.url(path));
        match key.or(self.key.as_deref()) {
            Some(key) => request.bearer_auth(key),
            None => request,
        }
    }

    /// POST /api/agent/execute and read the whole stream: (session id, frames).
    pub async fn execute(&self, body: Value) -> (String, Vec<Frame>) {
        let response = self.post("/api/agent/execute", None).json(&body).send().await.unwrap();
        assert_eq!(response.status(), 200, "{:?}", response.text().await);
        let id = session_header(&response);
        (id, parse_sse(&response.text().await.unwrap()))
    }

    /// The session as GET returns it.
    pub async fn session(&self, id: &str) -> Value {
        let response = self.get(&format!("/api/agent/session/{id}"), None).send().await.unwrap();
        assert_eq!(response.status(), 200);
        response.json().await.unwrap()
    }

    /// Waits until the session's status is not `running`.
    pub async fn settled(&self, id: &str) -> Value {
        for _ in 0..400 {
            let session = self.session(id).await;
            if session["status"] != "running" {
                return session;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("session {id} still running");
    }

    /// Waits until the session (of the owner of `key`) is not `running`.
    pub async fn settled_as(&self, id: &str, key: &str) -> Value {
        for _ in 0..400 {
            let response =
                self.get(&format!("/api/agent/session/{id}"), Some(key)).send().await.unwrap();
            assert_eq!(response.status(), 200);
            let session: Value = response.json().await.unwrap();
            if session["status"] != "running" {
                return session;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("session {id} still running");
    }

    /// Attaches and reads the whole stream.
    pub async fn attach(&self, id: &str, query: &str, last_event_id: Option<u64>) -> Vec<Frame> {
        let mut request = self.get(&format!("/api/agent/session/{id}/stream{query}"), None);
        if let Some(seq) = last_event_id {
            request = request.header("Last-Event-ID", seq.to_string());
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), 200);
        parse_sse(&response.text().await.unwrap())
    }

    pub async fn stop(&mut self) -> Result<(), weft_server::ServeError> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        match self.task.take() {
            Some(task) => task.await.unwrap(),
            None => Ok(()),
        }
    }
}

pub fn session_header(response: &reqwest::Response) -> String {
    response.headers().get("x-session-id").unwrap().to_str().unwrap().to_string()
}

pub fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

/// Reads frames from a live response until `count` frames with an id have arrived, then drops
/// the connection; returns the frames read (only whole SSE events).
pub async fn read_some(response: reqwest::Response, count: usize) -> Vec<Frame> {
    let mut text = String::new();
    let mut body = response.bytes_stream();
    loop {
        let complete = text.rfind("\n\n").map_or("", |end| &text[..end + 2]);
        let frames = parse_sse(complete);
        if frames.iter().filter(|f| f.id.is_some()).count() >= count {
            // Keep whole events only, up to the `count`-th id.
            let mut kept = Vec::new();
            let mut ids = 0;
            for frame in frames {
                let has_id = frame.id.is_some();
                kept.push(frame);
                if has_id {
                    ids += 1;
                    if ids == count {
                        break;
                    }
                }
            }
            return kept;
        }
        match body.next().await {
            Some(Ok(chunk)) => text.push_str(std::str::from_utf8(&chunk).unwrap()),
            _ => return parse_sse(complete),
        }
    }
}

/// The JSON of a frame.
pub fn json_of(frame: &Frame) -> Value {
    serde_json::from_str(&frame.data).unwrap_or(Value::String(frame.data.clone()))
}

/// The last frame's JSON (`execute_complete` in the native format).
pub fn last_json(frames: &[Frame]) -> Value {
    json_of(frames.last().unwrap())
}
