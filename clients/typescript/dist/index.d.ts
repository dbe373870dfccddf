export { ExecuteStream, WeftClient, WeftError } from "./client.js";
export type { ApprovalHandler, AttachOptions, ClientOptions, ClientTool, ExecuteResult, RunOptions, ToolHandler, ToolOutput, } from "./client.js";
export { SseParser, readSse } from "./sse.js";
export type { SseFrame } from "./sse.js";
export type * from "./types.js";
