// The playground's small shared helpers: DOM and SVG builders, formatting, the JSON calls the
// TypeScript client does not make, and `follow`, which reads a session's event log in any wire
// format the server renders.
import { WeftError } from "./client.js";
import { readSse } from "./sse.js";
export const $ = (id) => document.getElementById(id);
export function el(tag, attrs = {}, text) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs))
        node.setAttribute(k, v);
    if (text !== undefined)
        node.textContent = text;
    return node;
}
const SVG_NS = "http://www.w3.org/2000/svg";
export function svg(tag, attrs = {}, text) {
    const node = document.createElementNS(SVG_NS, tag);
    for (const [k, v] of Object.entries(attrs))
        node.setAttribute(k, String(v));
    if (text !== undefined)
        node.textContent = text;
    return node;
}
export const money = (usd) => `$${usd.toFixed(usd < 0.01 ? 5 : 4)}`;
export const pretty = (value) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));
export const shorten = (text, max) => (text.length > max ? `${text.slice(0, max - 1)}…` : text);
/** A duration in milliseconds as people read it. */
export function duration(ms) {
    if (ms < 1000)
        return `${Math.round(ms)} ms`;
    if (ms < 60_000)
        return `${(ms / 1000).toFixed(ms < 10_000 ? 2 : 1)} s`;
    const minutes = Math.floor(ms / 60_000);
    return `${minutes} min ${Math.round((ms % 60_000) / 1000)} s`;
}
/** A JSON request to the API with the client's key; errors as the client throws them. */
export async function api(client, path, init = {}) {
    const headers = { accept: "application/json" };
    if (client.apiKey)
        headers.authorization = `Bearer ${client.apiKey}`;
    if (init.body !== undefined)
        headers["content-type"] = "application/json";
    const request = { method: init.method ?? "GET", headers };
    if (init.body !== undefined)
        request.body = JSON.stringify(init.body);
    const response = await fetch(`${client.baseUrl}${path}`, request);
    const text = await response.text();
    let body;
    try {
        body = text ? JSON.parse(text) : undefined;
    }
    catch {
        body = text;
    }
    if (!response.ok) {
        const error = body?.error;
        throw new WeftError(response.status, error?.code ?? "http_error", error?.message ?? `${response.status} ${response.statusText}`);
    }
    return { status: response.status, body: body };
}
/**
 * Reads a session's event log rendered in `protocol` (`native`, `aceai`, `loom` …): the events
 * after `after` (0: from the session's first), live, to the end of the run under way or of the
 * last one. Each frame is handed to `onFrame`; resolves with the last event seq seen (the SSE
 * `id:`, the cursor to go on from), or `after` when none came. Stops quietly when `signal` aborts.
 */
export async function follow(client, sessionId, protocol, after, onFrame, signal) {
    const headers = { accept: "text/event-stream", "last-event-id": String(after) };
    if (client.apiKey)
        headers.authorization = `Bearer ${client.apiKey}`;
    let last = after;
    try {
        const response = await fetch(`${client.baseUrl}/api/agent/session/${encodeURIComponent(sessionId)}/stream?protocol=${encodeURIComponent(protocol)}`, { headers, signal });
        if (!response.ok || !response.body) {
            let message = `${response.status} ${response.statusText}`;
            try {
                message = (await response.json()).error?.message ?? message;
            }
            catch {
                // not JSON
            }
            throw new WeftError(response.status, "stream_failed", message);
        }
        for await (const frame of readSse(response.body, signal)) {
            if (frame.id !== undefined && Number.isFinite(Number(frame.id)))
                last = Math.max(last, Number(frame.id));
            if (frame.data !== "")
                onFrame(frame);
        }
    }
    catch (error) {
        if (signal.aborted)
            return last;
        throw error;
    }
    return last;
}
/**
 * `follow`, run after run: a stream read with a cursor ends with the run the cursor is in, so
 * while the session has events past the last one read (a later run), or a run under way, it
 * follows again from there. Resolves with the last event seq read.
 */
export async function followLog(client, sessionId, protocol, after, onFrame, signal) {
    let last = after;
    for (;;) {
        const before = last;
        last = await follow(client, sessionId, protocol, last, onFrame, signal);
        if (signal.aborted)
            return last;
        const view = await client.getSession(sessionId);
        if (view.status === "running") {
            // Between two runs (the next one is not in the log yet): look again shortly.
            if (last === before)
                await new Promise((resolve) => setTimeout(resolve, 100));
            continue;
        }
        if (last >= view.lastEventSeq || last === before)
            return last;
    }
}
/** Coalesces redraws: `schedule()` any number of times, `draw` runs once soon after. */
export function redrawer(draw) {
    let pending = false;
    return () => {
        if (pending)
            return;
        pending = true;
        setTimeout(() => {
            pending = false;
            draw();
        }, 0);
    };
}
