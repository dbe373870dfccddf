//! The plan's flow over the WebSocket endpoint.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn next_json(socket: &mut Socket) -> Value {
    loop {
        let message = tokio::time::timeout(std::time::Duration::from_secs(10), socket.next())
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        if let Message::Text(text) = message {
            return serde_json::from_str(&text).unwrap();
        }
    }
}

/// Reads one stream to its `end`: the frames' data, in order.
async fn read_stream(socket: &mut Socket) -> Vec<Value> {
    let mut frames = Vec::new();
    loop {
        let message = next_json(socket).await;
        if message["type"] == "end" {
            return frames;
        }
        assert!(message.get("error").is_none(), "{message}");
        frames.push(message);
    }
}

#[tokio::test]
async fn the_remote_tool_flow_over_websocket() {
    let server = start(weather_script()).await;
    let url = server.url("/api/agent/ws").replace("http://", "ws://");
    let (mut socket, _) = tokio_tungstenite::connect_async(url).await.unwrap();

    socket
        .send(Message::text(
            json!({"type": "execute", "input": user("Weather?"),
                   "context": {"tools": [remote_weather_tool()]}})
            .to_string(),
        ))
        .await
        .unwrap();
    let started = next_json(&mut socket).await;
    assert_eq!(started["type"], "started");
    let id = started["sessionId"].as_str().unwrap().to_string();
    let frames = read_stream(&mut socket).await;
    let complete = &frames.last().unwrap()["data"];
    assert_eq!(complete["type"], "execute_complete");
    assert_eq!(complete["status"], "awaiting_tool_execution");
    assert_eq!(complete["pendingToolCalls"][0]["id"], "call-1");
    assert!(frames.iter().all(|f| f["sessionId"] == id.as_str()));
    let ids: Vec<u64> = frames.iter().filter_map(|f| f["id"].as_u64()).collect();
    assert!(ids.windows(2).all(|w| w[0] < w[1]));

    // A refused message is an error message; the socket stays usable.
    socket
        .send(Message::text(json!({"type": "execute", "sessionId": id, "input": [
            {"role": "toolResult", "toolCallId": "nope", "toolName": "get_weather", "content": "x"}]})
            .to_string()))
        .await
        .unwrap();
    let refused = next_json(&mut socket).await;
    assert_eq!(refused["error"]["code"], "unknown_tool_call");
    socket.send(Message::text("{not json")).await.unwrap();
    assert_eq!(next_json(&mut socket).await["error"]["code"], "bad_request");

    socket
        .send(Message::text(
            json!({"type": "execute", "sessionId": id, "input": [
            {"role": "toolResult", "toolCallId": "call-1", "toolName": "get_weather",
             "content": "Sunny"}]})
            .to_string(),
        ))
        .await
        .unwrap();
    assert_eq!(next_json(&mut socket).await["type"], "started");
    let frames = read_stream(&mut socket).await;
    assert_eq!(frames.last().unwrap()["data"]["status"], "completed");

    // Attach after the end replays the last run; with `after` it resumes.
    socket
        .send(Message::text(json!({"type": "attach", "sessionId": id}).to_string()))
        .await
        .unwrap();
    let replay = read_stream(&mut socket).await;
    assert_eq!(replay, frames);
    let cut = replay[3]["id"].as_u64().or_else(|| replay[4]["id"].as_u64()).unwrap();
    socket
        .send(Message::text(json!({"type": "attach", "sessionId": id, "after": cut}).to_string()))
        .await
        .unwrap();
    let resumed = read_stream(&mut socket).await;
    let position = replay.iter().position(|f| f["id"].as_u64() == Some(cut)).unwrap();
    assert_eq!(resumed, replay[position + 1..]);
    assert_eq!(server.session(&id).await["status"], "completed");
}
