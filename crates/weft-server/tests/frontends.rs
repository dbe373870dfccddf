//! `POST /api/ag-ui` and `POST /api/chat` / `GET /api/chat/{id}/stream` at the HTTP level: what
//! they refuse and say, owners, and the headers. (The official clients run against them in
//! weft-cli's `frontends` test.)
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::{Value, json};
use weft_protocol::framing::parse_sse;

const ALICE: &str = "alice-key-0001";
const BOB: &str = "bob-key-000002";

async fn keyed() -> TestServer {
    start_with(
        weather_script(),
        |b| b,
        |s| {
            s.api_keys = weft_server::parse_api_keys(&format!("{ALICE}=alice,{BOB}=bob")).unwrap();
        },
    )
    .await
}

async fn error_of(response: reqwest::Response) -> (u16, String, String) {
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap();
    let code = body["error"]["code"].as_str().unwrap_or("").to_string();
    let message = body["error"]["message"].as_str().unwrap_or("").to_string();
    (status, code, message)
}

/// A front end's refusal, as its protocol says it: 200 with a stream holding the AI SDK's
/// `error` part or AG-UI's `RUN_ERROR` (after `RUN_STARTED`), and the code in `x-weft-error`.
/// (code, message).
async fn refusal_of(response: reqwest::Response) -> (String, String) {
    assert_eq!(response.status(), 200, "a front end's error comes in its stream");
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let code = response.headers()["x-weft-error"].to_str().unwrap().to_string();
    let frames = parse_sse(&response.text().await.unwrap());
    let parts: Vec<Value> = frames.iter().map(json_of).collect();
    let message = match parts.first().and_then(|p| p["type"].as_str()) {
        Some("error") => {
            assert_eq!(parts.len(), 2, "error, [DONE]: {parts:?}");
            assert_eq!(parts[1], Value::String("[DONE]".into()));
            parts[0]["errorText"].as_str().unwrap().to_string()
        }
        Some("RUN_STARTED") => {
            assert_eq!(parts.len(), 2, "RUN_STARTED, RUN_ERROR: {parts:?}");
            assert_eq!(parts[1]["type"], "RUN_ERROR");
            assert_eq!(parts[1]["code"], code.as_str());
            parts[1]["message"].as_str().unwrap().to_string()
        }
        _ => panic!("not a refusal: {parts:?}"),
    };
    assert!(!message.starts_with('{'), "a sentence, not JSON: {message}");
    (code, message)
}

fn agui_input(thread: &str) -> Value {
    json!({"threadId": thread, "runId": "r1",
           "messages": [{"id": "u1", "role": "user", "content": "Weather in Paris?"}],
           "tools": [{"name": "get_weather", "description": "w",
                      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}]})
}

fn chat_request(id: &str) -> Value {
    json!({"id": id, "trigger": "submit-message",
           "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather?"}]}],
           "tools": [remote_weather_tool()]})
}

#[tokio::test]
async fn bad_bodies_are_refused_saying_where() {
    let server = start(weather_script()).await;
    for (path, body, needle) in [
        ("/api/ag-ui", json!({"runId": "r", "messages": []}), "threadId"),
        (
            "/api/ag-ui",
            json!({"threadId": "t", "messages": [{"role": "user", "content": 5}]}),
            "messages[0]",
        ),
        (
            "/api/ag-ui",
            json!({"threadId": "t", "messages": [], "tools": [{"description": "x"}]}),
            "tools[0]",
        ),
        (
            "/api/ag-ui",
            json!({"threadId": "t", "messages": [], "resume": [{"interruptId": "c", "status": "maybe"}]}),
            "resume[0].status",
        ),
        (
            "/api/ag-ui",
            json!({"threadId": "t", "messages": [{"role": "user", "content": "hi"}],
                   "forwardedProps": {"weft": {"multitask": "later"}}}),
            "forwardedProps.weft.multitask",
        ),
        (
            "/api/ag-ui",
            json!({"threadId": "t", "messages": [{"role": "user", "content": "hi"}],
                   "forwardedProps": {"weft": {"state": "yes"}}}),
            "forwardedProps.weft.state",
        ),
        (
            "/api/ag-ui",
            json!({"threadId": "t", "messages": [{"role": "assistant", "content": "hi"}]}),
            "must end with a user message",
        ),
        ("/api/chat", json!({"messages": []}), "id"),
        (
            "/api/chat",
            json!({"id": "c", "messages": [{"role": "robot", "parts": []}]}),
            "messages[0].role",
        ),
        (
            "/api/chat",
            json!({"id": "c", "messages": [], "trigger": "regenerate-everything"}),
            "unknown trigger",
        ),
        ("/api/chat", json!({"id": "c", "messages": []}), "must end with a user message"),
        (
            "/api/chat",
            json!({"id": "c", "messages": [{"role": "user", "parts": [{"type": "text", "text": 5}]}]}),
            "messages[0].parts[0].text: expected a string, got a number",
        ),
        (
            "/api/chat",
            json!({"id": "c", "messages": [{"role": "user", "parts": [{"text": "hi"}]}]}),
            "messages[0].parts[0]: missing field `type`",
        ),
        (
            "/api/chat",
            json!({"id": "c", "messages": [
                {"role": "user", "parts": [{"type": "text", "text": "hi"}]},
                {"role": "assistant", "parts": [{"type": "tool-get_weather", "toolCallId": 7}]},
                {"role": "user", "parts": [{"type": "text", "text": "and?"}]}]}),
            "messages[1].parts[0].toolCallId: expected a string",
        ),
        (
            "/api/chat",
            json!({"id": "bad id!", "messages": [{"role": "user", "parts": []}]}),
            "invalid session id",
        ),
    ] {
        let response = server.post(path, None).body(body.to_string()).send().await.unwrap();
        // A body of the wrong shape is a client's bug (official clients never send one): a
        // 400 saying where. A well-formed request refused is said in the stream, as the page's
        // library shows errors.
        let message = if response.headers().get("x-weft-error").is_some() {
            refusal_of(response).await.1
        } else {
            let (status, code, message) = error_of(response).await;
            assert_eq!((status, code.as_str()), (400, "bad_request"), "{path} {body}");
            message
        };
        assert!(message.contains(needle), "{path} {body}: {message:?} should name {needle:?}");
    }
    for path in ["/api/chat", "/api/ag-ui"] {
        let response = server.post(path, None).body("{\"id\": ").send().await.unwrap();
        let (status, _, message) = error_of(response).await;
        assert_eq!(status, 400, "{path}");
        assert!(message.starts_with("malformed JSON at line 1"), "{message}");
    }
    // A well-formed request the server cannot take, in the stream of each protocol.
    let response = server
        .post("/api/chat", None)
        .json(&json!({"id": "c", "messages": [], "trigger": "regenerate-everything"}))
        .send()
        .await
        .unwrap();
    let (code, message) = refusal_of(response).await;
    assert_eq!(code, "bad_request");
    assert!(message.contains("unknown trigger"), "{message}");
    let response = server
        .post("/api/ag-ui", None)
        .json(&json!({"threadId": "t", "messages": [{"role": "assistant", "content": "hi"}]}))
        .send()
        .await
        .unwrap();
    let (code, message) = refusal_of(response).await;
    assert_eq!(code, "user_message_required");
    assert!(message.contains("must end with a user message"), "{message}");
}

#[tokio::test]
async fn owners_have_their_own_threads_and_chats() {
    let server = keyed().await;
    let response =
        server.client.post(server.url("/api/ag-ui")).json(&agui_input("t-1")).send().await.unwrap();
    assert_eq!(response.status(), 401);

    let response =
        server.post("/api/ag-ui", Some(ALICE)).json(&agui_input("t-1")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let text = response.text().await.unwrap();
    assert!(text.contains("\"RUN_FINISHED\""), "{text}");
    let response =
        server.post("/api/chat", Some(ALICE)).json(&chat_request("c-1")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-vercel-ai-ui-message-stream"], "v1");
    assert!(response.text().await.unwrap().ends_with("data: [DONE]\n\n"));

    // Bob has no chat c-1: nothing of Alice's is found under it (204, as for any chat with
    // nothing running, so `useChat({ resume: true })` on a new chat starts clean).
    let response = server.get("/api/chat/c-1/stream", Some(BOB)).send().await.unwrap();
    assert_eq!(response.status(), 204);
    let response = server.post("/api/chat/c-1/stop", Some(BOB)).send().await.unwrap();
    let (status, code, _) = error_of(response).await;
    assert_eq!((status, code.as_str()), (404, "session_not_found"));
    // Bob may choose the same ids: each is a thread or chat of his own, shown by his id.
    let response =
        server.post("/api/ag-ui", Some(BOB)).json(&agui_input("t-1")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-session-id"], "t-1");
    let text = response.text().await.unwrap();
    assert!(text.contains("\"threadId\":\"t-1\""), "{text}");
    assert!(!text.contains('~'), "a stored id leaked: {text}");
    let response =
        server.post("/api/chat", Some(BOB)).json(&chat_request("c-1")).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["x-session-id"], "c-1");
    let _ = response.text().await.unwrap();
    for (key, owner) in [(ALICE, "alice"), (BOB, "bob")] {
        let list: Value = server
            .get("/api/agent/sessions", Some(key))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let mut ids: Vec<&str> = list["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap())
            .collect();
        ids.sort_unstable();
        assert_eq!(ids, ["c-1", "t-1"], "{owner}: {list}");
        assert!(list["sessions"].as_array().unwrap().iter().all(|s| s["owner"] == owner));
    }
    // Alice's chat is not running: nothing to resume.
    let response = server.get("/api/chat/c-1/stream", Some(ALICE)).send().await.unwrap();
    assert_eq!(response.status(), 204);
}

fn ui_user(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "user", "parts": [{"type": "text", "text": text}]})
}

fn ui_assistant(id: &str, text: &str) -> Value {
    json!({"id": id, "role": "assistant", "parts": [{"type": "step-start"}, {"type": "text", "text": text}]})
}

/// POSTs a chat request and reads its whole stream: (the x-session-id, the parts).
async fn chat(server: &TestServer, body: Value) -> (String, Vec<Value>) {
    let response = server.post("/api/chat", None).json(&body).send().await.unwrap();
    assert_eq!(response.status(), 200);
    assert!(response.headers().get("x-weft-error").is_none(), "refused: {body}");
    let id = response
        .headers()
        .get("x-session-id")
        .map_or(String::new(), |v| v.to_str().unwrap().to_string());
    let parts = parse_sse(&response.text().await.unwrap()).iter().map(json_of).collect();
    (id, parts)
}

fn texts(parts: &[Value]) -> String {
    parts
        .iter()
        .filter(|p| p["type"] == "text-delta")
        .map(|p| p["delta"].as_str().unwrap())
        .collect()
}

fn user_texts(session: &Value) -> Vec<(String, String)> {
    session["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| {
            (
                m["id"].as_str().unwrap_or("").to_string(),
                m["content"][0]["text"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn answers() -> weft_llm::faux::FauxScript {
    weft_llm::faux::FauxScript::new([
        weft_llm::faux::FauxTurn::text("Answer one."),
        weft_llm::faux::FauxTurn::text("Answer two."),
        weft_llm::faux::FauxTurn::text("Answer three."),
        weft_llm::faux::FauxTurn::text("Answer four."),
    ])
}

#[tokio::test]
async fn chat_messages_are_matched_by_their_ids_not_counted() {
    let server = start(answers()).await;
    let (_, parts) = chat(&server, json!({"id": "c", "messages": [ui_user("u1", "Hi")]})).await;
    assert_eq!(texts(&parts), "Answer one.");
    // The AI SDK docs' "send only the last message": a message the session has not seen is
    // answered, though the request carries fewer user messages than the session has.
    let (_, parts) = chat(&server, json!({"id": "c", "messages": [ui_user("u2", "More")]})).await;
    assert_eq!(texts(&parts), "Answer two.");
    let session = server.settled("c").await;
    assert_eq!(user_texts(&session), [("u1".into(), "Hi".into()), ("u2".into(), "More".into())]);
    // The same request again (a retry, a double submit): recognised, not run twice, and
    // answered with an empty finished stream (no replay, no 409).
    let (_, parts) = chat(&server, json!({"id": "c", "messages": [ui_user("u2", "More")]})).await;
    assert_eq!(parts, [Value::String("[DONE]".into())]);
    let full = json!({"id": "c", "messages": [
        ui_user("u1", "Hi"), ui_assistant("a1", "Answer one."),
        ui_user("u2", "More"), ui_assistant("a2", "Answer two.")]});
    let (_, parts) = chat(&server, full).await;
    assert_eq!(parts, [Value::String("[DONE]".into())]);
    assert_eq!(server.settled("c").await["messages"].as_array().unwrap().len(), 4);
    // A reloaded page that kept only part of the history, with a new message.
    let partial = json!({"id": "c", "messages": [
        ui_user("u2", "More"), ui_assistant("a2", "Answer two."), ui_user("u3", "Last")]});
    let (_, parts) = chat(&server, partial).await;
    assert_eq!(texts(&parts), "Answer three.");
    let session = server.settled("c").await;
    assert_eq!(
        user_texts(&session),
        [("u1".into(), "Hi".into()), ("u2".into(), "More".into()), ("u3".into(), "Last".into())]
    );
    assert_eq!(session["status"], "completed");
}

#[tokio::test]
async fn an_edit_and_a_regenerate_fork_the_chat_and_its_id_follows() {
    let server = start(answers()).await;
    chat(&server, json!({"id": "c", "messages": [ui_user("u1", "Hi")]})).await;
    chat(&server, json!({"id": "c", "messages": [ui_user("u2", "Weather?")]})).await;
    let before = server.settled("c").await;
    assert_eq!(before["messages"].as_array().unwrap().len(), 4);

    // An edited user message (AI SDK: `sendMessage({ text, messageId })`): same id, new text.
    let edit = json!({"id": "c", "messages": [
        ui_user("u1", "Hi"), ui_assistant("a1", "Answer one."), ui_user("u2", "Weather in Oslo?")]});
    let (branch, parts) = chat(&server, edit).await;
    assert_ne!(branch, "c", "the edit runs on a new branch");
    assert!(branch.starts_with("c."), "{branch}");
    assert_eq!(texts(&parts), "Answer one.", "the branch is a session of its own");
    let forked = server.settled(&branch).await;
    assert_eq!(forked["parentId"], "c");
    assert_eq!(forked["forkedAt"], 2);
    assert_eq!(
        user_texts(&forked),
        [("u1".into(), "Hi".into()), ("u2".into(), "Weather in Oslo?".into())]
    );
    // The old branch is as it was, and the chat's id leads to the new one.
    let root = server.settled("c").await;
    assert_eq!(root["messages"], before["messages"]);
    assert_eq!(root["branchId"], branch.as_str());

    // Regenerate the last answer: another branch, from the first branch, the chat follows it.
    let regenerate = json!({"id": "c", "trigger": "regenerate-message", "messageId": "a2",
        "messages": [ui_user("u1", "Hi"), ui_assistant("a1", "Answer one."),
                     ui_user("u2", "Weather in Oslo?")]});
    let (second, _) = chat(&server, regenerate).await;
    assert_ne!(second, branch);
    let regenerated = server.settled(&second).await;
    assert_eq!(regenerated["parentId"], branch.as_str());
    assert_eq!(regenerated["forkedAt"], 2);
    assert_eq!(server.settled("c").await["branchId"], second.as_str());
    assert_eq!(server.settled(&branch).await["messages"], forked["messages"]);

    // The next message goes to the newest branch.
    let (on, parts) =
        chat(&server, json!({"id": "c", "messages": [ui_user("u3", "Thanks")]})).await;
    assert_eq!(on, second);
    assert_eq!(texts(&parts), "Answer two.");
    assert_eq!(user_texts(&server.settled(&second).await).len(), 3);
    // Resume and stop follow the chat id too: nothing runs.
    assert_eq!(server.get("/api/chat/c/stream", None).send().await.unwrap().status(), 204);
    let stopped: Value =
        server.post("/api/chat/c/stop", None).send().await.unwrap().json().await.unwrap();
    assert_eq!(stopped, json!({"aborted": false}));
}

#[tokio::test]
async fn the_native_api_forks_at_a_message() {
    let server = start(weather_script()).await;
    let (id, _) = server
        .execute(json!({"input": user("Weather in Paris?"),
                        "context": {"messages": [], "tools": [remote_weather_tool()]}}))
        .await;
    let waiting = server.settled(&id).await;
    assert_eq!(waiting["status"], "awaiting_tool_execution");
    // Cut between the call and its (missing) result: refused, saying why.
    let response = server
        .post(&format!("/api/agent/session/{id}/fork"), None)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let (status, code, message) = error_of(response).await;
    assert_eq!((status, code.as_str()), (422, "invalid_fork"));
    assert!(message.contains("between a tool call and its result"), "{message}");
    let response = server
        .post(&format!("/api/agent/session/{id}/fork"), None)
        .json(&json!({"atMessage": 9}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(response).await.0, 422);
    // Before the user message: an empty conversation with the session's tools.
    let response = server
        .post(&format!("/api/agent/session/{id}/fork"), None)
        .json(&json!({"atMessage": 0, "sessionId": "copy"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    let fork: Value = response.json().await.unwrap();
    assert_eq!(fork["id"], "copy");
    assert_eq!(fork["parentId"], id.as_str());
    assert_eq!(fork["forkedAt"], 0);
    assert_eq!(fork["status"], "idle");
    assert_eq!(fork["messages"], json!([]));
    assert_eq!(fork["tools"], waiting["tools"]);
    // It runs like any session, and its parent is unchanged.
    let (_, frames) = server.execute(json!({"sessionId": "copy", "input": user("Hi")})).await;
    assert!(!frames.is_empty());
    assert_eq!(server.settled(&id).await["messages"], waiting["messages"]);
    // The id is taken now.
    let response = server
        .post(&format!("/api/agent/session/{id}/fork"), None)
        .json(&json!({"atMessage": 0, "sessionId": "copy"}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(response).await.0, 409);
}

#[tokio::test]
async fn stop_stops_the_run_and_a_new_message_interrupts_one() {
    use weft_llm::faux::{FauxScript, FauxTurn};
    let server = start(FauxScript::new([
        FauxTurn::text("Working on it").stalled(),
        FauxTurn::text("Still working").stalled(),
        FauxTurn::text("Done."),
    ]))
    .await;
    let first = server
        .post("/api/chat", None)
        .json(&json!({"id": "c", "messages": [ui_user("u1", "Go")]}))
        .send()
        .await
        .unwrap();
    let seen = read_some(first, 1).await;
    assert!(!seen.is_empty());
    assert_eq!(server.session("c").await["status"], "running");
    let stopped: Value =
        server.post("/api/chat/c/stop", None).send().await.unwrap().json().await.unwrap();
    assert_eq!(stopped, json!({"aborted": true}));
    assert_eq!(server.settled("c").await["status"], "aborted");

    // A run under way, then the next message: it interrupts the run (no 409) and is answered.
    let second = server
        .post("/api/chat", None)
        .json(&json!({"id": "c", "messages": [ui_user("u2", "Again")]}))
        .send()
        .await
        .unwrap();
    let seen = read_some(second, 1).await;
    assert!(!seen.is_empty());
    assert_eq!(server.session("c").await["status"], "running");
    let (_, parts) = chat(&server, json!({"id": "c", "messages": [ui_user("u3", "Now")]})).await;
    assert_eq!(texts(&parts), "Done.");
    let session = server.settled("c").await;
    assert_eq!(session["status"], "completed");
    let users: Vec<String> = user_texts(&session).into_iter().map(|(id, _)| id).collect();
    assert_eq!(users, ["u1", "u2", "u3"]);
    // The AG-UI equivalent answers for the thread.
    let stopped: Value =
        server.post("/api/ag-ui/c/stop", None).send().await.unwrap().json().await.unwrap();
    assert_eq!(stopped, json!({"aborted": false}));
}

/// The text an AG-UI stream's messages carry.
fn agui_text(stream: &str) -> String {
    parse_sse(stream)
        .iter()
        .map(json_of)
        .filter(|e| e["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|e| e["delta"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn an_ag_ui_thread_matches_messages_by_id() {
    let server = start(answers()).await;
    let first = json!({"threadId": "t", "runId": "r1",
        "messages": [{"id": "u1", "role": "user", "content": "Hi"}]});
    let response = server.post("/api/ag-ui", None).json(&first).send().await.unwrap();
    assert_eq!(agui_text(&response.text().await.unwrap()), "Answer one.");
    // Nothing new (the same messages, plus the answer the client got): opened and finished.
    let again = json!({"threadId": "t", "runId": "r2", "messages": [
        {"id": "u1", "role": "user", "content": "Hi"},
        {"id": "a1", "role": "assistant", "content": "Answer one."}]});
    let response = server.post("/api/ag-ui", None).json(&again).send().await.unwrap();
    let parts: Vec<Value> =
        parse_sse(&response.text().await.unwrap()).iter().map(json_of).collect();
    assert_eq!(
        parts,
        [
            json!({"type": "RUN_STARTED", "threadId": "t", "runId": "r2"}),
            json!({"type": "RUN_FINISHED", "threadId": "t", "runId": "r2"}),
        ]
    );
    // Only the new message: answered.
    let last = json!({"threadId": "t", "runId": "r3",
        "messages": [{"id": "u2", "role": "user", "content": "More"}]});
    let text =
        server.post("/api/ag-ui", None).json(&last).send().await.unwrap().text().await.unwrap();
    assert_eq!(agui_text(&text), "Answer two.");
    // The client lacked the history: it gets the conversation right after RUN_STARTED.
    let events: Vec<Value> = parse_sse(&text).iter().map(json_of).collect();
    assert_eq!(events[0]["type"], "RUN_STARTED");
    assert_eq!(events[1]["type"], "MESSAGES_SNAPSHOT", "{events:?}");
    let snapshot = events[1]["messages"].as_array().unwrap();
    let shown: Vec<(&str, &str, &str)> = snapshot
        .iter()
        .map(|m| {
            (m["id"].as_str().unwrap(), m["role"].as_str().unwrap(), m["content"].as_str().unwrap())
        })
        .collect();
    assert_eq!(shown[0], ("u1", "user", "Hi"));
    assert_eq!((shown[1].1, shown[1].2), ("assistant", "Answer one."));
    assert_eq!(shown[2], ("u2", "user", "More"));
    assert_eq!(shown.len(), 3);
    // A client that has it all gets none.
    let full = json!({"threadId": "t", "runId": "r4", "messages": [
        {"id": "u1", "role": "user", "content": "Hi"},
        {"id": "a1", "role": "assistant", "content": "Answer one."},
        {"id": "u2", "role": "user", "content": "More"},
        {"id": "a2", "role": "assistant", "content": "Answer two."},
        {"id": "u3", "role": "user", "content": "Last"}]});
    let text =
        server.post("/api/ag-ui", None).json(&full).send().await.unwrap().text().await.unwrap();
    assert_eq!(agui_text(&text), "Answer three.");
    assert!(!text.contains("MESSAGES_SNAPSHOT"), "{text}");
    let session = server.settled("t").await;
    assert_eq!(
        user_texts(&session),
        [("u1".into(), "Hi".into()), ("u2".into(), "More".into()), ("u3".into(), "Last".into())]
    );
}

/// A client-side tool that needs approval, approved but not run at once: the approval's
/// response hands the call back as `tool-input-available`, so the page's part leaves
/// `approval-responded` (or `useChat` posts the approval again after every response).
#[tokio::test]
async fn an_approved_client_tool_is_handed_back_to_the_page() {
    let server = start(weather_script()).await;
    let mut tool = remote_weather_tool();
    tool["requiresApproval"] = json!(true);
    let (_, parts) =
        chat(&server, json!({"id": "c", "messages": [ui_user("u1", "Weather?")], "tools": [tool]}))
            .await;
    assert!(parts.iter().any(|p| p["type"] == "tool-approval-request"), "{parts:?}");
    // Its input streams, but is not handed over as available (useChat would run the tool).
    assert!(parts.iter().any(|p| p["type"] == "tool-input-start"), "{parts:?}");
    assert!(!parts.iter().any(|p| p["type"] == "tool-input-available"), "{parts:?}");
    assert_eq!(server.settled("c").await["status"], "awaiting_approval");
    let responded = json!({"id": "c", "messages": [ui_user("u1", "Weather?"),
        {"id": "a1", "role": "assistant", "parts": [{"type": "step-start"},
            {"type": "text", "text": "Let me look that up."},
            {"type": "tool-get_weather", "toolCallId": "call-1", "state": "approval-responded",
             "input": {"city": "Paris"}, "approval": {"id": "call-1", "approved": true}}]}]});
    let (_, parts) = chat(&server, responded.clone()).await;
    let handed: Vec<&Value> =
        parts.iter().filter(|p| p["type"] == "tool-input-available").collect();
    assert_eq!(
        handed,
        [&json!({"type": "tool-input-available", "toolCallId": "call-1",
                 "toolName": "get_weather", "input": {"city": "Paris"}})]
    );
    assert!(!parts.iter().any(|p| p["type"] == "start-step"), "in the call's step: {parts:?}");
    assert_eq!(server.settled("c").await["status"], "awaiting_tool_execution");
    // The same request again brings nothing new: no run, nothing replayed.
    let (_, parts) = chat(&server, responded).await;
    assert_eq!(parts, [Value::String("[DONE]".into())]);
    assert_eq!(server.settled("c").await["status"], "awaiting_tool_execution");
}

/// `GET /api/chat/{id}`: the conversation as UI messages a page restores on load.
#[tokio::test]
async fn a_chat_is_read_back_as_ui_messages() {
    let server = start(weather_script()).await;
    chat(
        &server,
        json!({"id": "c", "messages": [ui_user("u1", "Weather?")], "tools": [remote_weather_tool()]}),
    )
    .await;
    let read: Value = server.get("/api/chat/c", None).send().await.unwrap().json().await.unwrap();
    assert_eq!(read["status"], "awaiting_tool_execution");
    let messages = read["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{read}");
    assert_eq!(
        messages[0],
        json!({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Weather?"}]})
    );
    // The run waiting for the client: its message has the run's id (what its stream's start
    // said), the call is the client's to run.
    let session = server.session("c").await;
    assert_eq!(messages[1]["id"], session["runId"]);
    assert_eq!(
        messages[1]["parts"],
        json!([{"type": "step-start"},
               {"type": "text", "text": "Let me look that up.", "state": "done"},
               {"type": "tool-get_weather", "toolCallId": "call-1", "input": {"city": "Paris"},
                "state": "input-available"}])
    );
    // The client's output goes round; the whole run reads back as one message.
    let mut answered = messages[1].clone();
    answered["parts"][2]["state"] = json!("output-available");
    answered["parts"][2]["output"] = json!("Sunny, 24°C");
    chat(&server, json!({"id": "c", "messages": [messages[0], answered]})).await;
    assert_eq!(server.settled("c").await["status"], "completed");
    let read: Value = server.get("/api/chat/c", None).send().await.unwrap().json().await.unwrap();
    let messages = read["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{read}");
    let parts = &messages[1]["parts"];
    assert_eq!(parts[2]["state"], "output-available");
    assert_eq!(parts[2]["output"], "Sunny, 24°C");
    assert_eq!(parts[3], json!({"type": "step-start"}));
    assert_eq!(parts[4]["text"], "It is sunny in Paris.");
    assert_eq!(server.get("/api/chat/nope", None).send().await.unwrap().status(), 404);
}
