//! Replaying one conversation to every dialect: a history with thinking (signed), tool calls and
//! tool results made by each of the four providers, an errored turn and a call left without a
//! result, is sent through each adapter to a local server, and the recorded request is checked
//! against that dialect's rules: roles and ordering, every call answered, ids the provider
//! accepts, and signatures only for the model that made them.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::HashSet;
use std::sync::Arc;

use common::{MockResponse, MockServer, collect_stream, fixture, test_client};
use serde_json::{Value, json};
use weft_core::{
    AssistantContent, AssistantMessage, Message, StopReason, TextContent, ThinkingContent,
    ToolCall, ToolResultMessage, ToolSpec, UserMessage,
};
use weft_llm::models::ModelRegistry;
use weft_llm::providers::ProviderSettings;
use weft_llm::providers::anthropic::Anthropic;
use weft_llm::providers::gemini::Gemini;
use weft_llm::providers::openai_chat::OpenAiChat;
use weft_llm::providers::openai_responses::OpenAiResponses;
use weft_llm::{CancellationToken, ModelRequest, Provider, StreamEvent};

/// The model each dialect's own turns come from, and the one requests target.
const MODELS: [(&str, &str); 4] = [
    ("openai", "gpt-4o"),
    ("openai-responses", "o4-mini"),
    ("anthropic", "claude-sonnet-4-20250514"),
    ("gemini", "gemini-2.5-flash"),
];

fn signature(provider: &str) -> String {
    match provider {
        // A Responses reasoning item, as the adapter keeps it.
        "openai-responses" => json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "plan"}], "encrypted_content": "ENC-openai-responses"}).to_string(),
        other => format!("SIG-{other}"),
    }
}

/// One assistant turn by `provider`: thinking, text and a tool call; then its result.
fn turn(provider: &str, model: &str, n: usize) -> Vec<Message> {
    // Ids in each provider's own style, some too long or with characters others reject.
    let id = match provider {
        "openai" => format!("call_{n}abcdefghijklmnopqrstuvwxyz0123456789ABCDEF"),
        "openai-responses" => format!("call_{n}|fc_{n}:item.with.dots"),
        "anthropic" => format!("toolu_0{n}"),
        _ => format!("gemini-call-{n}"),
    };
    let call =
        ToolCall { id, name: "lookup".into(), arguments: json!({"q": format!("q{n}")}).into() };
    let mut message = AssistantMessage::empty(provider, model);
    message.stop_reason = StopReason::ToolUse;
    message.content = vec![
        AssistantContent::Thinking(ThinkingContent {
            thinking: format!("thinking by {provider}"),
            signature: Some(signature(provider)),
        }),
        AssistantContent::Text(TextContent { text: format!("text by {provider}") }),
        AssistantContent::ToolCall(call.clone()),
    ];
    vec![
        Message::Assistant(message),
        Message::ToolResult(ToolResultMessage::ok(&call, format!("result {n}"))),
        Message::User(UserMessage::text(format!("next {n}"))),
    ]
}

fn history() -> Vec<Message> {
    let mut messages = vec![Message::User(UserMessage::text("start"))];
    for (n, (provider, model)) in MODELS.iter().enumerate() {
        messages.extend(turn(provider, model, n));
    }
    // An errored turn (skipped everywhere) and a call nobody answered (answered with an error).
    let mut failed = AssistantMessage::empty("anthropic", "claude-sonnet-4-20250514");
    failed.stop_reason = StopReason::Error;
    failed.error_message = Some("overloaded".into());
    failed.content = vec![AssistantContent::Text(TextContent { text: "FAILED TURN".into() })];
    messages.push(Message::Assistant(failed));
    let mut dangling = AssistantMessage::empty("openai", "gpt-4o");
    dangling.stop_reason = StopReason::ToolUse;
    dangling.content = vec![AssistantContent::ToolCall(ToolCall {
        id: "call_dangling".into(),
        name: "lookup".into(),
        arguments: json!({"q": "never answered"}).into(),
    })];
    messages.push(Message::Assistant(dangling));
    messages.push(Message::User(UserMessage::text("finally")));
    messages
}

fn settings(server: &MockServer, prefix: &str) -> ProviderSettings {
    ProviderSettings {
        api_key: Some("sk-test".into()),
        base_url: format!("{}{prefix}", server.url()),
        extra_headers: Vec::new(),
        models: Arc::new(ModelRegistry::default()),
    }
}

/// Sends the history through `target`'s adapter and returns the request body it sent.
async fn request_for(target: &str, model: &str) -> Value {
    let fixture_dir = if target == "openai" { "openai_chat" } else { target };
    let fixture_dir = fixture_dir.replace('-', "_");
    let server =
        MockServer::start(vec![MockResponse::sse(&fixture(&format!("{fixture_dir}/text.sse")))])
            .await;
    let provider: Box<dyn Provider> = match target {
        "openai" => Box::new(OpenAiChat::new(settings(&server, "/v1"), test_client())),
        "openai-responses" => {
            Box::new(OpenAiResponses::new(settings(&server, "/v1"), test_client()))
        }
        "anthropic" => Box::new(Anthropic::new(settings(&server, ""), test_client())),
        _ => Box::new(Gemini::new(settings(&server, ""), test_client())),
    };
    let request = ModelRequest {
        model: model.into(),
        system_prompt: Some("Be brief.".into()),
        messages: history().into(),
        tools: vec![ToolSpec::new(
            "lookup",
            "Looks things up",
            json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}),
        )],
        ..ModelRequest::default()
    };
    let (_, end) = collect_stream(provider.stream(request, CancellationToken::new())).await;
    assert!(matches!(end, StreamEvent::Done(_)), "{target}: the answer did not decode: {end:?}");
    let requests = server.requests();
    assert_eq!(requests.len(), 1, "{target}");
    requests[0].json()
}

/// Every string anywhere in `value`.
fn strings(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| strings(v, out)),
        Value::Object(map) => map.values().for_each(|v| strings(v, out)),
        _ => {}
    }
}

/// Rules every dialect shares: the errored turn is gone, foreign signatures are never sent, the
/// target's own signature is sent back, other providers' thinking survives as text.
fn check_common(target: &str, body: &Value) {
    let mut all = Vec::new();
    strings(body, &mut all);
    let text = all.join("\n");
    assert!(!text.contains("FAILED TURN"), "{target}: the errored turn was sent");
    for (provider, _) in MODELS {
        let sig = signature(provider);
        // Chat Completions has no way to carry a signature, so it sends none, even its own.
        let own = provider == target && target != "openai";
        let sent = text.contains(&sig)
            || (provider == "openai-responses" && text.contains("ENC-openai-responses"));
        assert_eq!(sent, own, "{target}: signature of {provider} sent = {sent}");
        assert!(text.contains(&format!("text by {provider}")), "{target}: text of {provider} lost");
        // The Responses API gets its own reasoning back as the opaque item it made (checked
        // below); every other thinking survives as thinking or as text.
        if !(own && target == "openai-responses") {
            assert!(
                text.contains(&format!("thinking by {provider}")),
                "{target}: thinking of {provider} lost (it should become text or stay thinking)"
            );
        }
    }
}

#[tokio::test]
async fn openai_chat_gets_a_valid_history() {
    let body = request_for("openai", "gpt-4o").await;
    check_common("openai", &body);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system");
    // Each assistant message with tool calls is followed by one tool message per call, in order.
    let mut i = 0;
    let mut calls_seen = 0;
    while i < messages.len() {
        let m = &messages[i];
        let role = m["role"].as_str().unwrap();
        assert!(["system", "user", "assistant", "tool"].contains(&role), "{m}");
        if role == "assistant"
            && let Some(calls) = m["tool_calls"].as_array()
        {
            for (k, call) in calls.iter().enumerate() {
                let id = call["id"].as_str().unwrap();
                assert!(id.len() <= 40, "id too long for OpenAI: {id}");
                let answer = &messages[i + 1 + k];
                assert_eq!(
                    (answer["role"].as_str(), answer["tool_call_id"].as_str()),
                    (Some("tool"), Some(id))
                );
                calls_seen += 1;
            }
            i += calls.len();
        }
        i += 1;
    }
    assert_eq!(calls_seen, 5, "four answered calls and the dangling one");
    assert!(body.to_string().contains("call_dangling"));
}

#[tokio::test]
async fn openai_responses_gets_a_valid_history() {
    let body = request_for("openai-responses", "o4-mini").await;
    check_common("openai-responses", &body);
    let input = body["input"].as_array().unwrap();
    let calls: Vec<&str> = input
        .iter()
        .filter(|i| i["type"] == "function_call")
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    let outputs: HashSet<&str> = input
        .iter()
        .filter(|i| i["type"] == "function_call_output")
        .map(|i| i["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(calls.len(), 5);
    for id in &calls {
        assert!(outputs.contains(id), "call {id} has no output");
    }
    // Only the reasoning item this model made is sent back, exactly.
    let reasoning: Vec<&Value> = input.iter().filter(|i| i["type"] == "reasoning").collect();
    assert_eq!(reasoning.len(), 1);
    assert_eq!(reasoning[0]["encrypted_content"], "ENC-openai-responses");
}

#[tokio::test]
async fn anthropic_gets_a_valid_history() {
    let body = request_for("anthropic", "claude-sonnet-4-20250514").await;
    check_common("anthropic", &body);
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "user");
    let id_ok = |id: &str| {
        !id.is_empty()
            && id.len() <= 64
            && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    for pair in messages.windows(2) {
        assert_ne!(pair[0]["role"], pair[1]["role"], "roles must alternate");
    }
    let mut uses = 0;
    for (i, m) in messages.iter().enumerate() {
        if m["role"] != "assistant" {
            continue;
        }
        let ids: Vec<&str> = m["content"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|b| b["type"] == "tool_use")
            .map(|b| b["id"].as_str().unwrap())
            .collect();
        let next = messages[i + 1]["content"].as_array().unwrap();
        let results: Vec<&str> = next
            .iter()
            .filter(|b| b["type"] == "tool_result")
            .map(|b| b["tool_use_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, results, "every tool_use answered in the next user message");
        assert!(ids.iter().all(|id| id_ok(id)), "{ids:?}");
        uses += ids.len();
        // Only Anthropic's own thinking is sent as a thinking block (with its signature).
        for block in m["content"].as_array().unwrap() {
            if block["type"] == "thinking" {
                assert_eq!(block["signature"], "SIG-anthropic");
            }
        }
    }
    assert_eq!(uses, 5);
}

#[tokio::test]
async fn gemini_gets_a_valid_history() {
    let body = request_for("gemini", "gemini-2.5-flash").await;
    check_common("gemini", &body);
    let contents = body["contents"].as_array().unwrap();
    for c in contents {
        assert!(c["role"] == "user" || c["role"] == "model", "{c}");
    }
    let mut calls = 0;
    for (i, c) in contents.iter().enumerate() {
        let parts = c["parts"].as_array().unwrap();
        let n = parts.iter().filter(|p| p.get("functionCall").is_some()).count();
        if n == 0 {
            continue;
        }
        let next = contents[i + 1]["parts"].as_array().unwrap();
        let answers = next.iter().filter(|p| p.get("functionResponse").is_some()).count();
        assert_eq!((contents[i + 1]["role"].as_str(), answers), (Some("user"), n));
        calls += n;
    }
    assert_eq!(calls, 5);
}
