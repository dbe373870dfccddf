//! Keys and owners, limits, and errors that say what the client got wrong.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::{Value, json};

const ALICE: &str = "alice-key-0001";
const BOB: &str = "bob-key-000002";

async fn keyed(settings: impl FnOnce(&mut weft_server::Settings)) -> TestServer {
    start_with(
        weather_script(),
        |b| b,
        |s| {
            s.api_keys = weft_server::parse_api_keys(&format!("{ALICE}=alice,{BOB}=bob")).unwrap();
            settings(s);
        },
    )
    .await
}

/// The status and the error body; a front end's refusal (200, its stream holding the protocol's
/// error, the code in `x-weft-error`) as the same body.
async fn error_of(response: reqwest::Response) -> (u16, Value) {
    let status = response.status().as_u16();
    let Some(code) = response.headers().get("x-weft-error").cloned() else {
        return (status, response.json().await.unwrap());
    };
    let text = response.text().await.unwrap();
    let message = weft_protocol::framing::parse_sse(&text)
        .iter()
        .filter_map(|f| serde_json::from_str::<Value>(&f.data).ok())
        .find_map(|p| p.get("errorText").or_else(|| p.get("message")).cloned())
        .unwrap();
    (status, json!({"error": {"code": code.to_str().unwrap(), "message": message}}))
}

#[tokio::test]
async fn keys_are_required_and_owners_see_only_their_sessions() {
    let server = keyed(|_| {}).await;
    let body = json!({"input": user("Weather?"), "context": {"tools": [remote_weather_tool()]}});
    let (status, error) = error_of(
        server.client.post(server.url("/api/agent/execute")).json(&body).send().await.unwrap(),
    )
    .await;
    assert_eq!((status, error["error"]["code"].as_str()), (401, Some("unauthorized")));
    let response =
        server.post("/api/agent/execute", Some("wrong-key-000")).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 401);
    assert_eq!(response.headers()["www-authenticate"], "Bearer");

    let response = server.post("/api/agent/execute", Some(ALICE)).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let id = session_header(&response);
    let _ = response.text().await.unwrap();

    // Bob: 404 for read, attach, resume, abort and delete; his list is empty.
    let paths = [
        server.get(&format!("/api/agent/session/{id}"), Some(BOB)),
        server.get(&format!("/api/agent/session/{id}/stream"), Some(BOB)),
        server.post(&format!("/api/agent/session/{id}/abort"), Some(BOB)),
        server.delete(&format!("/api/agent/session/{id}"), Some(BOB)),
        server.post("/api/agent/execute", Some(BOB)).json(&json!({"sessionId": id,
            "input": [{"role": "toolResult", "toolCallId": "call-1", "toolName": "get_weather",
                       "content": "stolen"}]})),
    ];
    for request in paths {
        let (status, error) = error_of(request.send().await.unwrap()).await;
        assert_eq!(status, 404, "{error}");
        assert_eq!(error["error"]["code"], "session_not_found");
    }
    let list: Value =
        server.get("/api/agent/sessions", Some(BOB)).send().await.unwrap().json().await.unwrap();
    assert_eq!(list["sessions"], json!([]));
    let list: Value =
        server.get("/api/agent/sessions", Some(ALICE)).send().await.unwrap().json().await.unwrap();
    assert_eq!(list["sessions"][0]["id"], id.as_str());
    assert_eq!(list["sessions"][0]["owner"], "alice");

    // Alice's session was untouched; she can finish and delete it.
    let response = server
        .post("/api/agent/execute", Some(ALICE))
        .json(&json!({"sessionId": id, "input": [{"role": "toolResult", "toolCallId": "call-1",
            "toolName": "get_weather", "content": "Sunny"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let _ = response.text().await.unwrap();
    let deleted =
        server.delete(&format!("/api/agent/session/{id}"), Some(ALICE)).send().await.unwrap();
    assert_eq!(deleted.status(), 204);
    let gone = server.get(&format!("/api/agent/session/{id}"), Some(ALICE)).send().await.unwrap();
    assert_eq!(gone.status(), 404);
    // Operations endpoints need no key.
    assert_eq!(server.client.get(server.url("/healthz")).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn rate_limits_are_per_key_with_retry_after() {
    let server = keyed(|s| {
        s.requests_per_minute = 6;
        s.burst = 2;
    })
    .await;
    for _ in 0..2 {
        let response = server.get("/api/agent/sessions", Some(ALICE)).send().await.unwrap();
        assert_eq!(response.status(), 200);
    }
    let response = server.get("/api/agent/sessions", Some(ALICE)).send().await.unwrap();
    assert_eq!(response.status(), 429);
    let wait: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=10).contains(&wait), "{wait}");
    let (_, error) = error_of(response).await;
    assert_eq!(error["error"]["code"], "rate_limited");
    assert!(!error.to_string().contains(ALICE), "the key leaked");
    // Bob has his own bucket.
    let response = server.get("/api/agent/sessions", Some(BOB)).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn client_mistakes_are_4xx_with_json_bodies() {
    let server = start_with(weather_script(), |b| b, |s| s.body_bytes = 2048).await;
    let execute = |body: String| {
        server
            .post("/api/agent/execute", None)
            .header("content-type", "application/json")
            .body(body)
    };
    let (status, error) =
        error_of(execute("{\"input\": {\"role\": \"user\",".into()).send().await.unwrap()).await;
    assert_eq!(status, 400);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.starts_with("malformed JSON at line 1 column"), "{message}");

    let (status, error) = error_of(
        execute(
            json!({"input": user("hi"), "context": {}, "options": {"multitask": "sometimes"}})
                .to_string(),
        )
        .send()
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    assert!(error["error"]["message"].as_str().unwrap().contains("options.multitask"), "{error}");

    let big = json!({"input": user(&"x".repeat(4096)), "context": {}}).to_string();
    let (status, error) = error_of(execute(big).send().await.unwrap()).await;
    assert_eq!(status, 413);
    assert_eq!(error["error"]["code"], "body_too_large");

    let (status, error) =
        error_of(server.get("/api/agent/session/bad%20id", None).send().await.unwrap()).await;
    assert_eq!((status, error["error"]["code"].as_str()), (400, Some("invalid_session_id")));
    let (status, _) =
        error_of(server.get("/api/agent/sessions?limit=0", None).send().await.unwrap()).await;
    assert_eq!(status, 400);
    let (status, error) = error_of(server.get("/api/nothing", None).send().await.unwrap()).await;
    assert_eq!((status, error["error"]["code"].as_str()), (404, Some("not_found")));
    let (status, _) =
        error_of(server.client.put(server.url("/api/agent/execute")).send().await.unwrap()).await;
    assert_eq!(status, 405);
    let (status, _) = error_of(server.get("/api/agent/ws", None).send().await.unwrap()).await;
    assert_eq!(status, 400, "a plain GET of the WebSocket endpoint");
}

#[tokio::test]
async fn without_keys_only_loopback_is_served() {
    let dir = tempfile::tempdir().unwrap();
    let store = weft_store::connect(&format!("sqlite:{}", dir.path().join("w.db").display()))
        .await
        .unwrap();
    let agent = weft_agent::Agent::builder(weft_llm::faux::FauxProvider::new(weather_script()))
        .store(store)
        .build()
        .unwrap();
    let server = weft_server::Server::new(agent, weft_server::Settings::new("faux"));
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let error = server.serve(listener, std::future::pending()).await.unwrap_err();
    assert!(error.to_string().starts_with("refusing to listen on 0.0.0.0:"), "{error}");
}

#[tokio::test]
async fn cors_follows_the_configuration() {
    let server = start_with(
        weather_script(),
        |b| b,
        |s| {
            s.cors_origins = vec!["http://app.example".into()];
        },
    )
    .await;
    let response = server
        .client
        .request(reqwest::Method::OPTIONS, server.url("/api/agent/execute"))
        .header("Origin", "http://app.example")
        .header("Access-Control-Request-Method", "POST")
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["access-control-allow-origin"], "http://app.example");
    let response = server
        .get("/api/agent/sessions", None)
        .header("Origin", "http://evil.example")
        .send()
        .await
        .unwrap();
    assert!(response.headers().get("access-control-allow-origin").is_none());
}

#[tokio::test]
async fn the_bearer_scheme_is_matched_in_any_case() {
    let server = keyed(|_| {}).await;
    for value in [format!("BEARER {ALICE}"), format!("bEaReR {ALICE}"), format!("Bearer   {ALICE}")]
    {
        let response = server
            .client
            .get(server.url("/api/agent/sessions"))
            .header("authorization", &value)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{value:?}");
    }
    let response = server
        .client
        .get(server.url("/api/agent/sessions"))
        .header("authorization", format!("Basic {ALICE}"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401, "another scheme");
}

/// A client that sends wrong keys is stopped after the configured number (30 a minute by
/// default), whatever key it tries next; another address is not.
#[tokio::test]
async fn wrong_keys_are_throttled_per_client_address() {
    let server = keyed(|_| {}).await;
    let sessions = server.url("/api/agent/sessions");
    for i in 0..weft_server::DEFAULT_FAILED_KEYS_PER_MINUTE {
        let guess = format!("guess-{i:08}");
        let response = server.client.get(&sessions).bearer_auth(guess).send().await.unwrap();
        assert_eq!(response.status(), 401, "guess {i}");
    }
    let response = server.client.get(&sessions).bearer_auth("guess-last").send().await.unwrap();
    assert_eq!(response.status(), 429);
    let wait: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&wait), "{wait}");
    let (_, error) = error_of(response).await;
    assert_eq!(error["error"]["code"], "too_many_failed_keys");
    // The right key is not even checked from there: a guess that hits is no different.
    let response = server.client.get(&sessions).bearer_auth(ALICE).send().await.unwrap();
    assert_eq!(response.status(), 429);
    // Another address (127.0.0.2 is loopback too) has its own count.
    let other = reqwest::Client::builder()
        .no_proxy()
        .local_address(std::net::IpAddr::from([127, 0, 0, 2]))
        .build()
        .unwrap();
    let response = other.get(&sessions).bearer_auth(ALICE).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

#[tokio::test]
async fn metrics_need_a_key_unless_made_public() {
    let server = keyed(|_| {}).await;
    let response = server.client.get(server.url("/metrics")).send().await.unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!((status, error["error"]["code"].as_str()), (401, Some("unauthorized")));
    let response = server.get("/metrics", Some(BOB)).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.text().await.unwrap().contains("weft_runs_active"));

    let public = start_with(
        weather_script(),
        |b| b,
        |s| {
            s.api_keys = weft_server::parse_api_keys(&format!("{ALICE}=alice")).unwrap();
            s.metrics_public = true;
        },
    )
    .await;
    let response = public.client.get(public.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), 200);
}

async fn execute_as(server: &TestServer, key: &str, body: Value) -> (u16, String, String) {
    let response = server
        .post("/api/agent/execute", Some(key))
        .header("accept", "application/x-ndjson")
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    let id = response.headers().get("x-session-id").map(|v| v.to_str().unwrap().to_string());
    (status, id.unwrap_or_default(), response.text().await.unwrap())
}

/// Two owners choose the same session id: each gets a session of their own, and sees exactly
/// the id they chose (header, body, list, every event's envelope). Another owner's id is
/// answered as one that does not exist, with the same body.
#[tokio::test]
async fn owners_may_choose_the_same_session_id() {
    let server = keyed(|_| {}).await;
    let new = |text: &str| {
        json!({"sessionId": "shared-1", "input": user(text),
               "context": {"tools": [remote_weather_tool()]}})
    };
    let (status, id, alice_stream) = execute_as(&server, ALICE, new("Alice asks")).await;
    assert_eq!((status, id.as_str()), (200, "shared-1"), "{alice_stream}");
    // Today Bob's request for Alice's id was a 404: squatting, and an oracle.
    let (status, id, bob_stream) = execute_as(&server, BOB, new("Bob asks")).await;
    assert_eq!((status, id.as_str()), (200, "shared-1"), "{bob_stream}");
    for stream in [&alice_stream, &bob_stream] {
        let envelopes: Vec<Value> =
            stream.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert!(envelopes.len() > 5);
        for envelope in &envelopes {
            assert_eq!(envelope["session_id"], "shared-1", "{envelope}");
        }
        assert!(!stream.contains('~'), "a stored id leaked: {stream}");
    }
    // Each owner's session holds their own conversation.
    for (key, asked) in [(ALICE, "Alice asks"), (BOB, "Bob asks")] {
        let view: Value = server
            .get("/api/agent/session/shared-1", Some(key))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(view["id"], "shared-1");
        assert_eq!(view["status"], "awaiting_tool_execution");
        assert_eq!(view["messages"][0]["content"][0]["text"], asked, "{view}");
        let list: Value = server
            .get("/api/agent/sessions", Some(key))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(list["sessions"].as_array().unwrap().len(), 1);
        assert_eq!(list["sessions"][0]["id"], "shared-1");
    }
    // Bob answers his call; Alice's session still waits on hers.
    let (status, _, stream) = execute_as(
        &server,
        BOB,
        json!({"sessionId": "shared-1", "input": [{"role": "toolResult", "toolCallId": "call-1",
               "toolName": "get_weather", "content": "Rain"}]}),
    )
    .await;
    assert_eq!(status, 200, "{stream}");
    assert_eq!(server.settled_as("shared-1", BOB).await["status"], "completed");
    assert_eq!(server.settled_as("shared-1", ALICE).await["status"], "awaiting_tool_execution");

    // Alice alone has "alice-only": Bob's answer for it is the answer for an id nobody has.
    let (status, _, _) = execute_as(
        &server,
        ALICE,
        json!({"sessionId": "alice-only",
        "input": user("mine"), "context": {}}),
    )
    .await;
    assert_eq!(status, 200);
    let not_found = |id: &str| server.get(&format!("/api/agent/session/{id}"), Some(BOB)).send();
    let (status, foreign) = error_of(not_found("alice-only").await.unwrap()).await;
    let (status_none, none) = error_of(not_found("nobody-has").await.unwrap()).await;
    assert_eq!((status, status_none), (404, 404));
    assert_eq!(
        foreign.to_string().replace("alice-only", "ID"),
        none.to_string().replace("nobody-has", "ID")
    );
}

/// Sessions stored before owners had namespaces stay their owner's; a server without keys
/// keeps the ids clients chose as its stored ids.
#[tokio::test]
async fn stored_ids_without_a_namespace_stay_reachable() {
    let server = keyed(|_| {}).await;
    let store =
        weft_store::connect(&format!("sqlite:{}", server.dir.path().join("weft.db").display()))
            .await
            .unwrap();
    let mut session = weft_core::Session::new("legacy-1", "faux", "faux");
    session.owner = Some("alice".into());
    store.create(session.head(), weft_core::History::new()).await.unwrap();
    let view = server.get("/api/agent/session/legacy-1", Some(ALICE)).send().await.unwrap();
    assert_eq!(view.status(), 200);
    assert_eq!(view.json::<Value>().await.unwrap()["id"], "legacy-1");
    let bob = server.get("/api/agent/session/legacy-1", Some(BOB)).send().await.unwrap();
    assert_eq!(bob.status(), 404);
    let deleted = server.delete("/api/agent/session/legacy-1", Some(ALICE)).send().await.unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(store.head("legacy-1").await.unwrap(), None);

    let open = start(weather_script()).await;
    let (id, _) =
        open.execute(json!({"sessionId": "plain-1", "input": user("hi"), "context": {}})).await;
    assert_eq!(id, "plain-1");
    let store =
        weft_store::connect(&format!("sqlite:{}", open.dir.path().join("weft.db").display()))
            .await
            .unwrap();
    assert!(store.head("plain-1").await.unwrap().is_some(), "a keyless server's ids are as chosen");
}

/// Tool names are limited to what every provider accepts, wherever a client sends tools.
#[tokio::test]
async fn tool_names_providers_refuse_are_400_naming_the_tool() {
    let server = start(weather_script()).await;
    let long = "t".repeat(100 * 1024);
    for name in [long.as_str(), "get.weather", "get weather"] {
        let tool = json!({"name": name, "description": "d", "parameters": {"type": "object"}});
        let shown: String = name.chars().take(20).collect();
        for (path, body) in [
            ("/api/agent/execute", json!({"input": user("hi"), "context": {"tools": [tool]}})),
            (
                "/api/ag-ui",
                json!({"threadId": format!("t-{}", name.len()), "runId": "r",
                       "messages": [{"id": "u", "role": "user", "content": "hi"}],
                       "tools": [tool]}),
            ),
            (
                "/api/chat",
                json!({"id": format!("c-{}", name.len()),
                       "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
                       "tools": [tool]}),
            ),
        ] {
            let response = server.post(path, None).json(&body).send().await.unwrap();
            let (status, error) = error_of(response).await;
            // The front ends say it in their stream, as their clients show errors.
            let expected = if path == "/api/agent/execute" { 400 } else { 200 };
            assert_eq!(status, expected, "{path}: {error}");
            assert_eq!(error["error"]["code"], "invalid_tool_name", "{path}: {error}");
            let message = error["error"]["message"].as_str().unwrap();
            assert!(message.contains(&shown), "{path}: {message}");
            assert!(message.len() < 300, "{path}: the message repeats the whole name");
        }
    }
}

/// An approval for a call that waits for its result (not for approval) says so: 422.
#[tokio::test]
async fn an_approval_for_a_call_awaiting_its_result_is_422() {
    let server = start(weather_script()).await;
    let (id, _) = server
        .execute(json!({"input": user("Weather?"), "context": {"tools": [remote_weather_tool()]}}))
        .await;
    assert_eq!(server.settled(&id).await["status"], "awaiting_tool_execution");
    let response = server
        .post("/api/agent/execute", None)
        .json(&json!({"sessionId": id, "input": {"approvals": [
            {"toolCallId": "call-1", "approved": true}]}}))
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!(status, 422, "{error}");
    assert_eq!(error["error"]["code"], "wrong_answer_kind");
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("waiting for its result, not for an approval"), "{message}");
    // The call still waits, and its result is taken.
    let response = server
        .post("/api/agent/execute", None)
        .json(&json!({"sessionId": id, "input": [{"role": "toolResult", "toolCallId": "call-1",
            "toolName": "get_weather", "content": "Sunny"}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let _ = response.text().await.unwrap();
}
