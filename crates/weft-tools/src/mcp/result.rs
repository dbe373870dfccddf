//! An MCP tool result as a Weft tool output.

use rmcp::model::CallToolResult;
use serde_json::{Value, json};
use weft_core::ToolContent;
use weft_tool_api::{ToolError, ToolOutput};

/// Maps a `tools/call` result: text blocks stay text, images stay images, audio and resources
/// become a line naming them, `structuredContent` becomes a JSON block (when the server sent no
/// text for it) and is kept in the details; `isError` makes it an error result with its text.
///
/// The mapping reads the result's JSON form, the protocol's own (`content[].type`,
/// `mimeType`, `structuredContent`, `isError`).
pub fn map_result(result: &CallToolResult) -> Result<ToolOutput, ToolError> {
    let value = serde_json::to_value(result)
        .map_err(|e| ToolError::failed(format!("unreadable MCP result: {e}")))?;
    let mut content = Vec::new();
    for block in value.get("content").and_then(Value::as_array).into_iter().flatten() {
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        match text("type") {
            "text" => content.push(ToolContent::text(text("text"))),
            "image" => content.push(ToolContent::Image {
                mime_type: text("mimeType").to_string(),
                data: text("data").to_string(),
            }),
            "audio" => content.push(ToolContent::text(format!("[audio: {}]", text("mimeType")))),
            "resource" => {
                let resource = block.get("resource").cloned().unwrap_or(Value::Null);
                match resource.get("text").and_then(Value::as_str) {
                    Some(body) => content.push(ToolContent::text(body)),
                    None => content.push(ToolContent::text(format!(
                        "[resource: {}]",
                        resource.get("uri").and_then(Value::as_str).unwrap_or_default()
                    ))),
                }
            }
            "resource_link" => {
                content.push(ToolContent::text(format!("[resource: {}]", text("uri"))))
            }
            other => content.push(ToolContent::text(format!("[unsupported MCP content: {other}]"))),
        }
    }
    let structured = value.get("structuredContent").cloned();
    let has_text = content.iter().any(|c| matches!(c, ToolContent::Text { .. }));
    if let Some(structured) = &structured
        && !has_text
    {
        content.push(ToolContent::Json { value: structured.clone() });
    }
    if value.get("isError").and_then(Value::as_bool).unwrap_or(false) {
        let text = ToolOutput::blocks(content).text_output();
        let text =
            if text.is_empty() { "the MCP tool reported an error".to_string() } else { text };
        return Err(ToolError::Failed(text));
    }
    let mut output = ToolOutput::blocks(content);
    if let Some(structured) = structured {
        output = output.with_details(json!({ "structuredContent": structured }));
    }
    Ok(output)
}
