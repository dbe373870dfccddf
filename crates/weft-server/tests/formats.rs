//! Every wire format served over HTTP, read back by weft-protocol's decoder where one exists.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use serde_json::json;
use weft_protocol::Frame;
use weft_protocol::framing::parse_sse;

#[tokio::test]
async fn every_format_is_served_and_decodes_to_the_same_run() {
    let server = start(weather_script()).await;
    let body = json!({"input": user("Weather?"), "context": {"tools": [remote_weather_tool()]}});
    let (id, native) = server.execute(body).await;
    let reference = weft_protocol::native::decode(&native).unwrap();
    assert_eq!(reference.texts, vec!["Let me look that up.".to_string()]);
    assert_eq!(reference.tool_calls[0].name, "get_weather");

    for protocol in ["native", "loom", "loom-export", "aceai", "ag-ui", "vercel"] {
        let response = server
            .get(&format!("/api/agent/session/{id}/stream?protocol={protocol}"), None)
            .send()
            .await
            .unwrap();
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let vercel_header = response.headers().get("x-vercel-ai-ui-message-stream").cloned();
        let frames = parse_sse(&response.text().await.unwrap());
        assert!(!frames.is_empty(), "{protocol}");
        // SSE ids are event seqs in every format: increasing, the last one the run's end.
        let ids: Vec<u64> = frames.iter().filter_map(|f| f.id).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{protocol}: {ids:?}");
        assert_eq!(ids.last(), native.iter().rev().find_map(|f| f.id).as_ref(), "{protocol}");
        match protocol {
            "native" => assert_eq!(frames, native),
            "loom" | "loom-export" => {
                let transcript = weft_protocol::loom::decode(&frames).unwrap();
                assert_eq!(transcript.texts, reference.texts, "{protocol}");
                assert_eq!(transcript.tool_calls, reference.tool_calls, "{protocol}");
            }
            "aceai" => {
                let transcript = weft_protocol::aceai::decode(&frames).unwrap();
                assert_eq!(transcript.texts, reference.texts);
                assert_eq!(transcript.tool_calls, reference.tool_calls);
            }
            "ag-ui" => {
                // No AG-UI decoder in weft-protocol: check the envelope of the run.
                let types: Vec<String> = frames
                    .iter()
                    .map(|f| json_of(f)["type"].as_str().unwrap().to_string())
                    .collect();
                assert_eq!(types.first().map(String::as_str), Some("RUN_STARTED"));
                assert!(types.contains(&"TOOL_CALL_START".to_string()), "{types:?}");
                assert!(types.iter().any(|t| t == "RUN_FINISHED"), "{types:?}");
            }
            "vercel" => {
                // No Vercel decoder either: the stream's shape and header.
                assert_eq!(vercel_header.unwrap(), "v1");
                assert_eq!(json_of(&frames[0])["type"], "start");
                assert_eq!(frames.last().unwrap().data, "[DONE]");
            }
            _ => unreachable!(),
        }
    }
}

#[tokio::test]
async fn accept_picks_the_default_format() {
    let server = start(weather_script()).await;
    let body = json!({"input": user("Weather?"), "context": {}});
    let response = server
        .post("/api/agent/execute", None)
        .header("Accept", "application/x-ndjson")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let text = response.text().await.unwrap();
    let frames: Vec<Frame> = text.lines().map(Frame::raw).collect();
    assert!(frames.iter().all(|f| f.is_json()));
    let transcript = weft_protocol::loom::decode(&frames).unwrap();
    // Without the remote tool in its context the call is to an unknown tool: an error result,
    // and the run goes on to its answer.
    assert_eq!(transcript.texts, ["Let me look that up.", "It is sunny in Paris."]);

    // NDJSON of another format on request.
    let response = server
        .post("/api/agent/execute?protocol=aceai", None)
        .header("Accept", "application/x-ndjson")
        .json(&body)
        .send()
        .await
        .unwrap();
    let text = response.text().await.unwrap();
    let frames: Vec<Frame> = text.lines().map(Frame::raw).collect();
    assert!(weft_protocol::aceai::decode(&frames).is_ok());

    let response = server
        .post("/api/agent/execute", None)
        .header("Accept", "text/event-stream")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let frames = parse_sse(&response.text().await.unwrap());
    assert_eq!(last_json(&frames)["type"], "execute_complete");
}
