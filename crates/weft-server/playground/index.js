// @weft/client: the TypeScript client of Weft's agent API (native SSE protocol).
export { ExecuteStream, WeftClient, WeftError } from "./client.js";
export { SseParser, readSse } from "./sse.js";
