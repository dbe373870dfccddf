//! `GET /api/agent/models`: the providers a new session may pick, each with its default model
//! and the registry's models for it; behind the API keys like the rest of the API.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use serde_json::{Value, json};
use weft_llm::models::ModelRegistry;

#[tokio::test]
async fn the_providers_and_their_models_are_listed_default_first() {
    let registry = ModelRegistry::builtin()
        .with_overrides(
            r#"{"models":[{"provider":"faux","id":"faux","prices":{"input":2,"output":8}},
                          {"provider":"faux","id":"faux-large","contextWindow":32000,
                           "capabilities":{"tools":true}}]}"#,
        )
        .unwrap();
    let server = start_with(
        weather_script(),
        |b| {
            let second = Arc::new(weft_llm::faux::FauxProvider::new(weather_script()));
            b.with_provider("anthropic", second, "claude-sonnet-4-5")
        },
        |s| {
            s.api_keys.insert("sk-models".into(), "alice".into());
            s.models = Arc::new(registry);
        },
    )
    .await;

    let anonymous = server.client.get(server.url("/api/agent/models")).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "behind the keys");

    let response = server.get("/api/agent/models", None).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    let providers = body["providers"].as_array().unwrap();
    let names: Vec<&str> = providers.iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["faux", "anthropic"]);
    let faux = &providers[0];
    assert_eq!((faux["default"].clone(), faux["model"].clone()), (json!(true), json!("faux")));
    let ids: Vec<&str> =
        faux["models"].as_array().unwrap().iter().map(|m| m["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["faux", "faux-large"]);
    assert_eq!(
        faux["models"][0]["prices"],
        json!({"input": 2.0, "output": 8.0, "cacheRead": 0.0, "cacheWrite": 0.0})
    );
    assert_eq!(faux["models"][1]["contextWindow"], 32000);
    assert_eq!(faux["models"][1]["capabilities"]["tools"], true);
    let anthropic = &providers[1];
    assert_eq!(
        (anthropic["default"].clone(), anthropic["model"].clone()),
        (json!(false), json!("claude-sonnet-4-5"))
    );
    assert!(
        anthropic["models"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["id"].as_str().unwrap().starts_with("claude")),
        "the built-in registry's Anthropic models: {anthropic}"
    );

    // What it lists is what a new session may ask for.
    let response = server
        .post("/api/agent/execute", None)
        .json(&json!({"input": user("Hi"), "context": {},
                      "options": {"provider": "faux", "model": "faux-large"}}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let id = session_header(&response);
    drop(response.text().await);
    let session = server.settled(&id).await;
    assert_eq!(
        (session["provider"].clone(), session["model"].clone()),
        (json!("faux"), json!("faux-large"))
    );

    // The API description has it.
    let doc: Value = server.get("/openapi.json", None).send().await.unwrap().json().await.unwrap();
    let operation = &doc["paths"]["/api/agent/models"]["get"];
    assert_eq!(
        operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/ModelList"
    );
    assert!(doc["components"]["schemas"]["ProviderModels"]["properties"].get("models").is_some());
}
