//! Health, readiness, metrics and the OpenAPI description.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn health_readiness_and_metrics() {
    let server = start(weather_script()).await;
    let health: Value = server.get("/healthz", None).send().await.unwrap().json().await.unwrap();
    assert_eq!(health["status"], "ok");
    let ready = server.get("/readyz", None).send().await.unwrap();
    assert_eq!(ready.status(), 200);

    let (id, _) = server.execute(json!({"input": user("Weather?"), "context": {}})).await;
    server.settled(&id).await;
    let _ = server.get("/api/agent/session/nope", None).send().await.unwrap();
    let expected = [
        "weft_runs_finished_total{status=\"completed\"} 1",
        "weft_runs_active 0",
        "weft_tokens_total{kind=\"input\"} 100",
        "weft_http_responses_total{status=\"404\"} 1",
        "weft_stream_clients 0",
        "# TYPE weft_store_seconds summary",
    ];
    // The run's end and the stream's close are counted as they happen, a moment after the
    // responses: up to 10 s for them to show.
    let mut text = String::new();
    for _ in 0..500 {
        let response = server.get("/metrics", None).send().await.unwrap();
        assert!(response.headers()["content-type"].to_str().unwrap().starts_with("text/plain"));
        text = response.text().await.unwrap();
        if expected.iter().all(|e| text.contains(e)) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for expected in expected {
        assert!(text.contains(expected), "missing {expected:?} in\n{text}");
    }
    let events = text
        .lines()
        .find_map(|l| l.strip_prefix("weft_events_streamed_total "))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap();
    assert!(events > 10, "{events}");
}

#[tokio::test]
async fn openapi_describes_every_endpoint() {
    let server = start(weather_script()).await;
    let doc: Value = server.get("/openapi.json", None).send().await.unwrap().json().await.unwrap();
    assert!(doc["openapi"].as_str().unwrap().starts_with("3."));
    // `modeOptions` is described by the library's modes, as the server reads it.
    let options = &doc["components"]["schemas"]["ExecuteOptions"]["properties"]["modeOptions"];
    assert_eq!(options["additionalProperties"], false, "{options}");
    assert_eq!(options["type"], serde_json::json!(["object", "null"]), "{options}");
    let breadth = options["properties"]["breadth"]["description"].as_str().unwrap_or_default();
    assert!(breadth.starts_with("tot: "), "{options}");
    assert!(options["properties"]["nodeBudget"].is_object(), "{options}");
    let paths = doc["paths"].as_object().unwrap();
    for (path, method) in [
        ("/api/agent/execute", "post"),
        ("/api/agent/session/{id}", "get"),
        ("/api/agent/session/{id}", "delete"),
        ("/api/agent/session/{id}/stream", "get"),
        ("/api/agent/session/{id}/abort", "post"),
        ("/api/agent/session/{id}/fork", "post"),
        ("/api/agent/sessions", "get"),
        ("/api/agent/models", "get"),
        ("/api/agent/ws", "get"),
        ("/api/ag-ui", "post"),
        ("/api/chat", "post"),
        ("/api/chat/{id}/stream", "get"),
        ("/api/chat/{id}/stop", "post"),
        ("/api/chat/{id}", "get"),
        ("/api/ag-ui/{threadId}/stop", "post"),
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/metrics", "get"),
        ("/openapi.json", "get"),
    ] {
        assert!(paths.get(path).and_then(|p| p.get(method)).is_some(), "{method} {path} missing");
    }
    assert_eq!(paths.len(), 18, "an endpoint is described that the router does not have");
    let execute = &paths["/api/agent/execute"]["post"];
    for status in ["200", "400", "401", "404", "409", "413", "422", "429"] {
        assert!(execute["responses"].get(status).is_some(), "execute lacks {status}");
    }
    let request = &doc["components"]["schemas"]["ExecuteRequest"];
    assert_eq!(request["required"], json!(["input"]));
    assert!(request["properties"].get("sessionId").is_some());
    assert!(
        doc["components"]["schemas"]["ExecuteOptions"]["properties"].get("multitask").is_some()
    );
}

/// A tmpfs of `size` mounted on a temporary directory while it lives (`None` where this process
/// cannot mount one: not root, no permission).
struct SmallDisk {
    dir: tempfile::TempDir,
}

impl SmallDisk {
    fn mount(size: &str) -> Option<Self> {
        let dir = tempfile::tempdir().ok()?;
        let status = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .ok()?;
        status.success().then_some(Self { dir })
    }

    /// Fills the disk with a file of zeros until it is full.
    fn fill(&self) -> std::path::PathBuf {
        use std::io::Write;
        let path = self.dir.path().join("filler");
        let mut file = std::fs::File::create(&path).unwrap();
        let block = vec![0u8; 64 * 1024];
        while file.write_all(&block).is_ok() {}
        let _ = file.flush();
        path
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(self.dir.path()).status();
    }
}

/// `/readyz` tries a write: with the store's disk full it says 503 (a read said ready), and
/// ready again once there is room.
#[tokio::test]
async fn readiness_needs_a_store_that_can_write() {
    let Some(disk) = SmallDisk::mount("4m") else {
        weft_test_support::skip(
            "tmpfs",
            "readiness_needs_a_store_that_can_write",
            "cannot mount a tmpfs here (needs root or CAP_SYS_ADMIN)",
        );
        return;
    };
    let server = start_at(&disk.dir.path().join("weft.db"), weather_script()).await;
    let ready = || async { server.get("/readyz", None).send().await.unwrap() };
    assert_eq!(ready().await.status(), 200);
    let filler = disk.fill();
    let response = ready().await;
    assert_eq!(response.status(), 503);
    assert_eq!(response.json::<Value>().await.unwrap()["status"], "unavailable");
    // Health is not readiness: the process still answers.
    assert_eq!(server.get("/healthz", None).send().await.unwrap().status(), 200);
    std::fs::remove_file(filler).unwrap();
    assert_eq!(ready().await.status(), 200, "ready again once the disk has room");
}
