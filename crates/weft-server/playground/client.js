// The client of Weft's agent API in its native format (the agent plan's events over SSE).
// Zero dependencies: the platform's fetch, streams and TextDecoder (browsers, Node 20+, Deno, Bun).
import { readSse } from "./sse.js";
/** An HTTP error from the server (`{"error": {"code", "message"}}`), or a stream that could not be resumed. */
export class WeftError extends Error {
    status;
    code;
    runId;
    constructor(status, code, message, runId) {
        super(message);
        this.status = status;
        this.code = code;
        this.runId = runId;
        this.name = "WeftError";
    }
}
const zeroUsage = () => ({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 });
const zeroCost = () => ({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 });
function addUsage(a, b) {
    const sum = {
        input: a.input + b.input,
        output: a.output + b.output,
        cacheRead: a.cacheRead + b.cacheRead,
        cacheWrite: a.cacheWrite + b.cacheWrite,
        total: a.total + b.total,
    };
    if (a.reasoning !== undefined || b.reasoning !== undefined)
        sum.reasoning = (a.reasoning ?? 0) + (b.reasoning ?? 0);
    return sum;
}
function addCost(a, b) {
    return {
        input: a.input + b.input,
        output: a.output + b.output,
        cacheRead: a.cacheRead + b.cacheRead,
        cacheWrite: a.cacheWrite + b.cacheWrite,
        total: a.total + b.total,
    };
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
/** The spec of a client tool as the server gets it (what JSON drops, `execute`, marks it remote). */
function specOf(tool) {
    const { execute: _execute, ...spec } = tool;
    return spec;
}
/**
 * The events of one execution: every run it leads to (client tools run and approvals decided
 * in between, resuming automatically), read across dropped connections with `Last-Event-ID`.
 * Iterate it once; `result()` gives the outcome (and drains the stream if nobody iterates it).
 */
export class ExecuteStream {
    /** The session, once the server named it. */
    sessionId;
    /** The seq of the last event received (the `Last-Event-ID` to resume from). */
    lastEventId;
    /** How many times the stream was reattached after a drop. */
    reconnects = 0;
    #client;
    #run;
    #controller = new AbortController();
    #generator;
    #iterated = false;
    #result;
    #failure;
    #done;
    #settle;
    /** @internal */
    constructor(client, run, first) {
        this.#client = client;
        this.#run = run;
        this.sessionId = run.sessionId;
        run.signal?.addEventListener("abort", () => this.#controller.abort(run.signal?.reason), { once: true });
        this.#done = new Promise((resolve) => (this.#settle = resolve));
        this.#generator = this.#events(first);
    }
    [Symbol.asyncIterator]() {
        if (this.#iterated)
            throw new Error("an ExecuteStream can be iterated once");
        this.#iterated = true;
        return this.#generator;
    }
    /** The outcome, once the stream has ended. */
    async result() {
        if (!this.#iterated) {
            for await (const _event of this) {
                // drained
            }
        }
        await this.#done;
        if (this.#result)
            return this.#result;
        throw this.#failure ?? new Error("the stream was closed before its end");
    }
    /** Aborts the run on the server (the stream then ends with its `aborted` end). */
    async abort() {
        for (let i = 0; this.sessionId === undefined && i < 100; i++)
            await sleep(20);
        if (this.sessionId === undefined)
            throw new Error("no session to abort yet");
        await this.#client.abort(this.sessionId);
    }
    async *#events(first) {
        const messages = [];
        let usage = zeroUsage();
        let cost = zeroCost();
        let request = first;
        try {
            for (;;) {
                let complete;
                for await (const event of this.#read(request)) {
                    if (event.type === "session_end") {
                        messages.push(...event.messages);
                        usage = addUsage(usage, event.usage);
                        cost = addCost(cost, event.cost);
                    }
                    if (event.type === "execute_complete")
                        complete = event;
                    yield event;
                }
                if (!complete)
                    throw new WeftError(0, "stream_ended", "the stream ended before its run did");
                const sessionId = this.sessionId ?? "";
                const next = await this.#resume(sessionId, complete);
                if (!next) {
                    this.#result = {
                        sessionId,
                        status: complete.status,
                        messages,
                        pendingToolCalls: complete.pendingToolCalls,
                        pendingApprovals: complete.pendingApprovals,
                        usage,
                        cost,
                    };
                    return;
                }
                request = () => this.#client.post({ sessionId, input: next }, this.#controller.signal);
            }
        }
        catch (error) {
            this.#failure = error;
            throw error;
        }
        finally {
            this.#settle();
        }
    }
    /** What to post to go on after a suspension, or nothing (the stream ends). */
    async #resume(sessionId, complete) {
        if (complete.status === "awaiting_approval" && complete.pendingApprovals.length > 0 && this.#run.onApproval) {
            const answer = await this.#run.onApproval(complete.pendingApprovals, { sessionId });
            const approvals = typeof answer === "boolean"
                ? complete.pendingApprovals.map((call) => ({ toolCallId: call.id, approved: answer }))
                : answer;
            return { approvals };
        }
        if (complete.status !== "awaiting_tool_execution")
            return undefined;
        const approvalIds = new Set(complete.pendingApprovals.map((c) => c.id));
        const calls = complete.pendingToolCalls.filter((c) => !approvalIds.has(c.id));
        const handlers = new Map((this.#run.tools ?? []).filter((t) => t.execute).map((t) => [t.name, t.execute]));
        if (calls.length === 0 || !calls.every((call) => handlers.has(call.name)))
            return undefined;
        const signal = this.#controller.signal;
        return Promise.all(calls.map(async (call) => {
            const base = { role: "toolResult", toolCallId: call.id, toolName: call.name };
            try {
                const out = await handlers.get(call.name)(call.arguments, call, { sessionId, signal });
                if (typeof out === "string")
                    return { ...base, content: out, isError: false };
                const result = { ...base, content: out.output, isError: out.isError ?? false };
                if (out.details !== undefined)
                    result.details = out.details;
                return result;
            }
            catch (error) {
                return { ...base, content: error instanceof Error ? error.message : String(error), isError: true };
            }
        }));
    }
    /**
     * One run's frames, reattaching after a drop. Frames without an `id:` belong to the event
     * whose last frame carries it, so they are held until it arrives: after a drop the server
     * sends them again, and nothing is shown twice or lost.
     */
    async *#read(request) {
        const signal = this.#controller.signal;
        let response = await request();
        let failures = 0;
        for (;;) {
            let complete = false;
            if (response) {
                const header = response.headers.get("x-session-id");
                if (header)
                    this.sessionId = header;
                const held = [];
                try {
                    for await (const frame of readSse(response.body, signal)) {
                        if (frame.data === "")
                            continue;
                        held.push(JSON.parse(frame.data));
                        if (frame.id === undefined)
                            continue;
                        const seq = Number(frame.id);
                        if (Number.isFinite(seq))
                            this.lastEventId = seq;
                        failures = 0;
                        for (const event of held.splice(0)) {
                            if (event.type === "execute_complete")
                                complete = true;
                            yield event;
                        }
                        if (this.sessionId !== undefined && this.lastEventId !== undefined) {
                            this.#run.onCursor?.({ sessionId: this.sessionId, lastEventId: this.lastEventId });
                        }
                    }
                }
                catch (error) {
                    if (signal.aborted)
                        throw error;
                }
                if (complete)
                    return;
                if (signal.aborted)
                    throw signal.reason;
            }
            if (this.sessionId === undefined)
                throw new WeftError(0, "stream_dropped", "the connection dropped before the server named the session");
            if (failures >= this.#client.maxReconnects) {
                throw new WeftError(0, "stream_dropped", `the stream dropped and could not be resumed after ${failures} tries`);
            }
            await sleep(Math.min(2000, this.#client.reconnectDelayMs * 2 ** failures));
            failures++;
            this.reconnects++;
            try {
                response = await this.#client.stream(this.sessionId, this.lastEventId, signal);
            }
            catch (error) {
                if (signal.aborted || (error instanceof WeftError && error.status >= 400 && error.status < 500))
                    throw error;
                response = undefined;
            }
        }
    }
}
/** A client of one Weft server. */
export class WeftClient {
    baseUrl;
    apiKey;
    maxReconnects;
    reconnectDelayMs;
    #fetch;
    constructor(options = {}) {
        this.baseUrl = (options.baseUrl ?? "").replace(/\/+$/, "");
        this.apiKey = options.apiKey;
        this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
        this.maxReconnects = options.maxReconnects ?? 5;
        this.reconnectDelayMs = options.reconnectDelayMs ?? 100;
    }
    #headers(extra = {}) {
        const headers = { ...extra };
        if (this.apiKey)
            headers.authorization = `Bearer ${this.apiKey}`;
        return headers;
    }
    async #request(path, init) {
        const response = await this.#fetch(`${this.baseUrl}${path}`, init);
        if (!response.ok) {
            let code = "http_error";
            let message = `${response.status} ${response.statusText}`;
            let runId;
            try {
                const body = (await response.json());
                code = body.error?.code ?? code;
                message = body.error?.message ?? message;
                runId = body.error?.runId;
            }
            catch {
                // not JSON
            }
            throw new WeftError(response.status, code, message, runId);
        }
        return response;
    }
    /** @internal POST /api/agent/execute. */
    post(body, signal) {
        return this.#request("/api/agent/execute", {
            method: "POST",
            headers: this.#headers({ "content-type": "application/json", accept: "text/event-stream" }),
            body: JSON.stringify(body),
            ...(signal ? { signal } : {}),
        });
    }
    /** @internal GET /api/agent/session/{id}/stream with `Last-Event-ID`. */
    stream(sessionId, lastEventId, signal) {
        const extra = { accept: "text/event-stream" };
        if (lastEventId !== undefined)
            extra["last-event-id"] = String(lastEventId);
        return this.#request(`/api/agent/session/${encodeURIComponent(sessionId)}/stream`, {
            headers: this.#headers(extra),
            ...(signal ? { signal } : {}),
        });
    }
    /**
     * Starts a run (a user message, possibly in a new session) or resumes one (tool results or
     * approval decisions), and streams it. Client tools with `execute` run when the run waits for
     * them, `onApproval` decides approvals, and the stream goes on with the resumed runs.
     */
    execute(input, run = {}) {
        const message = typeof input === "string" ? { role: "user", content: input } : input;
        const body = { input: message };
        if (run.sessionId !== undefined)
            body.sessionId = run.sessionId;
        if (run.context || (run.sessionId === undefined && run.tools)) {
            const context = { messages: [], ...run.context };
            const tools = [...(run.context?.tools ?? []), ...(run.tools ?? []).map(specOf)];
            context.tools = tools;
            body.context = context;
        }
        if (run.options)
            body.options = run.options;
        return new ExecuteStream(this, run, () => this.post(body, run.signal));
    }
    /** Attaches to a session's live (or last) run, after `lastEventId` when given, and goes on as `execute` does. */
    attach(sessionId, options = {}) {
        const stream = new ExecuteStream(this, { ...options, sessionId }, () => this.stream(sessionId, options.lastEventId, options.signal));
        if (options.lastEventId !== undefined)
            stream.lastEventId = options.lastEventId;
        return stream;
    }
    /** The session: messages, status, pending calls, usage, cost, last event seq. */
    async getSession(sessionId) {
        const response = await this.#request(`/api/agent/session/${encodeURIComponent(sessionId)}`, { headers: this.#headers() });
        return (await response.json());
    }
    /** The caller's sessions, most recently updated first. */
    async listSessions(options = {}) {
        const query = options.limit !== undefined ? `?limit=${options.limit}` : "";
        const response = await this.#request(`/api/agent/sessions${query}`, { headers: this.#headers() });
        return (await response.json()).sessions;
    }
    /** Deletes a session with its messages and events. */
    async deleteSession(sessionId) {
        await this.#request(`/api/agent/session/${encodeURIComponent(sessionId)}`, { method: "DELETE", headers: this.#headers() });
    }
    /** Aborts the session's run (a `WeftError` 409 when nothing runs). */
    async abort(sessionId) {
        await this.#request(`/api/agent/session/${encodeURIComponent(sessionId)}/abort`, { method: "POST", headers: this.#headers() });
    }
}
