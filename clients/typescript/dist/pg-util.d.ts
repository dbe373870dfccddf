import { type WeftClient } from "./client.js";
import { type SseFrame } from "./sse.js";
export declare const $: <T extends HTMLElement = HTMLElement>(id: string) => T;
export declare function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Record<string, string>, text?: string): HTMLElementTagNameMap[K];
export declare function svg<K extends keyof SVGElementTagNameMap>(tag: K, attrs?: Record<string, string | number>, text?: string): SVGElementTagNameMap[K];
export declare const money: (usd: number) => string;
export declare const pretty: (value: unknown) => string;
export declare const shorten: (text: string, max: number) => string;
/** A duration in milliseconds as people read it. */
export declare function duration(ms: number): string;
/** A JSON request to the API with the client's key; errors as the client throws them. */
export declare function api<T>(client: WeftClient, path: string, init?: {
    method?: string;
    body?: unknown;
}): Promise<{
    status: number;
    body: T;
}>;
/**
 * Reads a session's event log rendered in `protocol` (`native`, `aceai`, `loom` …): the events
 * after `after` (0: from the session's first), live, to the end of the run under way or of the
 * last one. Each frame is handed to `onFrame`; resolves with the last event seq seen (the SSE
 * `id:`, the cursor to go on from), or `after` when none came. Stops quietly when `signal` aborts.
 */
export declare function follow(client: WeftClient, sessionId: string, protocol: string, after: number, onFrame: (frame: SseFrame) => void, signal: AbortSignal): Promise<number>;
/**
 * `follow`, run after run: a stream read with a cursor ends with the run the cursor is in, so
 * while the session has events past the last one read (a later run), or a run under way, it
 * follows again from there. Resolves with the last event seq read.
 */
export declare function followLog(client: WeftClient, sessionId: string, protocol: string, after: number, onFrame: (frame: SseFrame) => void, signal: AbortSignal): Promise<number>;
/** Coalesces redraws: `schedule()` any number of times, `draw` runs once soon after. */
export declare function redrawer(draw: () => void): () => void;
