// The client of Weft's agent API in its native format (the agent plan's events over SSE).
// Zero dependencies: the platform's fetch, streams and TextDecoder (browsers, Node 20+, Deno, Bun).

import { readSse } from "./sse.js";
import type {
  ApprovalDecision,
  Cost,
  ExecuteComplete,
  ExecuteContext,
  ExecuteInput,
  ExecuteOptions,
  ExecuteRequest,
  Message,
  NativeEvent,
  SessionHead,
  SessionStatus,
  SessionView,
  ToolCall,
  ToolResultInput,
  ToolSpec,
  Usage,
} from "./types.js";

/** What a client tool returns: its output text, or the output with details and an error flag. */
export type ToolOutput = string | { output: string; details?: unknown; isError?: boolean };

/** Runs a client-side tool call; a thrown error becomes an error result the model sees. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ToolHandler<A = any> = (args: A, call: ToolCall, context: { sessionId: string; signal: AbortSignal }) => Promise<ToolOutput> | ToolOutput;

/** A tool the client gives the session: with `execute` the client runs it when the run asks. */
export interface ClientTool extends ToolSpec {
  execute?: ToolHandler;
}

/** Decides on calls waiting for approval: `true` approves them all, `false` denies them all. */
export type ApprovalHandler = (
  calls: ToolCall[],
  context: { sessionId: string },
) => Promise<ApprovalDecision[] | boolean> | ApprovalDecision[] | boolean;

export interface ClientOptions {
  /** The server, e.g. `http://127.0.0.1:8080` (default: the page's origin, `""`). */
  baseUrl?: string;
  /** A bearer API key. */
  apiKey?: string | undefined;
  /** A fetch implementation (default: `globalThis.fetch`). */
  fetch?: typeof fetch;
  /** How often a dropped stream is reattached before giving up (default 5). */
  maxReconnects?: number;
  /** The first wait before reattaching, doubled each time up to 2 s (default 100 ms). */
  reconnectDelayMs?: number;
}

export interface RunOptions {
  /** The session to continue (omit to start one; then `context` is needed, or `tools`). */
  sessionId?: string;
  /** For a new session: its messages, tools and system prompt. */
  context?: ExecuteContext;
  /** Client tools: their specs go to a new session's context, and their `execute`s run when the run suspends on them. */
  tools?: ClientTool[];
  /** Called when calls need approval; the decisions are posted and the run goes on. */
  onApproval?: ApprovalHandler;
  /** Options of the request (`model`, `systemPrompt`, `multitask` …). */
  options?: ExecuteOptions;
  /** Stops reading (the run goes on on the server unless `onDisconnect: "cancel"`). */
  signal?: AbortSignal;
  /** Called after every event with the stream's cursor (persist it to resume after a reload). */
  onCursor?: (cursor: { sessionId: string; lastEventId: number }) => void;
}

export interface AttachOptions extends Omit<RunOptions, "sessionId" | "context" | "options"> {
  /** Resume after this event seq (what `onCursor` last said); omit for the live or last run from its start. */
  lastEventId?: number;
}

/** What a stream (all its runs, resumed automatically) ended with. */
export interface ExecuteResult {
  sessionId: string;
  /** How the last run ended. */
  status: SessionStatus;
  /** The messages the runs added, in order. */
  messages: Message[];
  /** Calls still waiting for results (no client handler) or approvals (no approval callback). */
  pendingToolCalls: ToolCall[];
  pendingApprovals: ToolCall[];
  /** Tokens and cost of the runs this stream saw. */
  usage: Usage;
  cost: Cost;
}

/** An HTTP error from the server (`{"error": {"code", "message"}}`), or a stream that could not be resumed. */
export class WeftError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly runId?: string,
  ) {
    super(message);
    this.name = "WeftError";
  }
}

const zeroUsage = (): Usage => ({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 });
const zeroCost = (): Cost => ({ input: 0, output: 0, cacheRead: 0, cacheWrite: 0, total: 0 });

function addUsage(a: Usage, b: Usage): Usage {
  const sum: Usage = {
    input: a.input + b.input,
    output: a.output + b.output,
    cacheRead: a.cacheRead + b.cacheRead,
    cacheWrite: a.cacheWrite + b.cacheWrite,
    total: a.total + b.total,
  };
  if (a.reasoning !== undefined || b.reasoning !== undefined) sum.reasoning = (a.reasoning ?? 0) + (b.reasoning ?? 0);
  return sum;
}

function addCost(a: Cost, b: Cost): Cost {
  return {
    input: a.input + b.input,
    output: a.output + b.output,
    cacheRead: a.cacheRead + b.cacheRead,
    cacheWrite: a.cacheWrite + b.cacheWrite,
    total: a.total + b.total,
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The spec of a client tool as the server gets it (what JSON drops, `execute`, marks it remote). */
function specOf(tool: ClientTool): ToolSpec {
  const { execute: _execute, ...spec } = tool;
  return spec;
}

/**
 * The events of one execution: every run it leads to (client tools run and approvals decided
 * in between, resuming automatically), read across dropped connections with `Last-Event-ID`.
 * Iterate it once; `result()` gives the outcome (and drains the stream if nobody iterates it).
 */
export class ExecuteStream implements AsyncIterable<NativeEvent> {
  /** The session, once the server named it. */
  sessionId: string | undefined;
  /** The seq of the last event received (the `Last-Event-ID` to resume from). */
  lastEventId: number | undefined;
  /** How many times the stream was reattached after a drop. */
  reconnects = 0;

  readonly #client: WeftClient;
  readonly #run: RunOptions;
  readonly #controller = new AbortController();
  readonly #generator: AsyncGenerator<NativeEvent>;
  #iterated = false;
  #result: ExecuteResult | undefined;
  #failure: unknown;
  #done: Promise<void>;
  #settle!: () => void;

  /** @internal */
  constructor(client: WeftClient, run: RunOptions, first: () => Promise<Response>) {
    this.#client = client;
    this.#run = run;
    this.sessionId = run.sessionId;
    run.signal?.addEventListener("abort", () => this.#controller.abort(run.signal?.reason), { once: true });
    this.#done = new Promise((resolve) => (this.#settle = resolve));
    this.#generator = this.#events(first);
  }

  [Symbol.asyncIterator](): AsyncGenerator<NativeEvent> {
    if (this.#iterated) throw new Error("an ExecuteStream can be iterated once");
    this.#iterated = true;
    return this.#generator;
  }

  /** The outcome, once the stream has ended. */
  async result(): Promise<ExecuteResult> {
    if (!this.#iterated) {
      for await (const _event of this) {
        // drained
      }
    }
    await this.#done;
    if (this.#result) return this.#result;
    throw this.#failure ?? new Error("the stream was closed before its end");
  }

  /** Aborts the run on the server (the stream then ends with its `aborted` end). */
  async abort(): Promise<void> {
    for (let i = 0; this.sessionId === undefined && i < 100; i++) await sleep(20);
    if (this.sessionId === undefined) throw new Error("no session to abort yet");
    await this.#client.abort(this.sessionId);
  }

  async *#events(first: () => Promise<Response>): AsyncGenerator<NativeEvent> {
    const messages: Message[] = [];
    let usage = zeroUsage();
    let cost = zeroCost();
    let request = first;
    try {
      for (;;) {
        let complete: ExecuteComplete | undefined;
        for await (const event of this.#read(request)) {
          if (event.type === "session_end") {
            messages.push(...event.messages);
            usage = addUsage(usage, event.usage);
            cost = addCost(cost, event.cost);
          }
          if (event.type === "execute_complete") complete = event;
          yield event;
        }
        if (!complete) throw new WeftError(0, "stream_ended", "the stream ended before its run did");
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
    } catch (error) {
      this.#failure = error;
      throw error;
    } finally {
      this.#settle();
    }
  }

  /** What to post to go on after a suspension, or nothing (the stream ends). */
  async #resume(sessionId: string, complete: ExecuteComplete): Promise<ExecuteInput | undefined> {
    if (complete.status === "awaiting_approval" && complete.pendingApprovals.length > 0 && this.#run.onApproval) {
      const answer = await this.#run.onApproval(complete.pendingApprovals, { sessionId });
      const approvals: ApprovalDecision[] =
        typeof answer === "boolean"
          ? complete.pendingApprovals.map((call) => ({ toolCallId: call.id, approved: answer }))
          : answer;
      return { approvals };
    }
    if (complete.status !== "awaiting_tool_execution") return undefined;
    const approvalIds = new Set(complete.pendingApprovals.map((c) => c.id));
    const calls = complete.pendingToolCalls.filter((c) => !approvalIds.has(c.id));
    const handlers = new Map((this.#run.tools ?? []).filter((t) => t.execute).map((t) => [t.name, t.execute!]));
    if (calls.length === 0 || !calls.every((call) => handlers.has(call.name))) return undefined;
    const signal = this.#controller.signal;
    return Promise.all(
      calls.map(async (call): Promise<ToolResultInput> => {
        const base = { role: "toolResult" as const, toolCallId: call.id, toolName: call.name };
        try {
          const out = await handlers.get(call.name)!(call.arguments, call, { sessionId, signal });
          if (typeof out === "string") return { ...base, content: out, isError: false };
          const result: ToolResultInput = { ...base, content: out.output, isError: out.isError ?? false };
          if (out.details !== undefined) result.details = out.details;
          return result;
        } catch (error) {
          return { ...base, content: error instanceof Error ? error.message : String(error), isError: true };
        }
      }),
    );
  }

  /**
   * One run's frames, reattaching after a drop. Frames without an `id:` belong to the event
   * whose last frame carries it, so they are held until it arrives: after a drop the server
   * sends them again, and nothing is shown twice or lost.
   */
  async *#read(request: () => Promise<Response>): AsyncGenerator<NativeEvent> {
    const signal = this.#controller.signal;
    let response: Response | undefined = await request();
    let failures = 0;
    for (;;) {
      let complete = false;
      if (response) {
        const header = response.headers.get("x-session-id");
        if (header) this.sessionId = header;
        const held: NativeEvent[] = [];
        try {
          for await (const frame of readSse(response.body!, signal)) {
            if (frame.data === "") continue;
            held.push(JSON.parse(frame.data) as NativeEvent);
            if (frame.id === undefined) continue;
            const seq = Number(frame.id);
            if (Number.isFinite(seq)) this.lastEventId = seq;
            failures = 0;
            for (const event of held.splice(0)) {
              if (event.type === "execute_complete") complete = true;
              yield event;
            }
            if (this.sessionId !== undefined && this.lastEventId !== undefined) {
              this.#run.onCursor?.({ sessionId: this.sessionId, lastEventId: this.lastEventId });
            }
          }
        } catch (error) {
          if (signal.aborted) throw error;
        }
        if (complete) return;
        if (signal.aborted) throw signal.reason;
      }
      if (this.sessionId === undefined) throw new WeftError(0, "stream_dropped", "the connection dropped before the server named the session");
      if (failures >= this.#client.maxReconnects) {
        throw new WeftError(0, "stream_dropped", `the stream dropped and could not be resumed after ${failures} tries`);
      }
      await sleep(Math.min(2000, this.#client.reconnectDelayMs * 2 ** failures));
      failures++;
      this.reconnects++;
      try {
        response = await this.#client.stream(this.sessionId, this.lastEventId, signal);
      } catch (error) {
        if (signal.aborted || (error instanceof WeftError && error.status >= 400 && error.status < 500)) throw error;
        response = undefined;
      }
    }
  }
}

/** A client of one Weft server. */
export class WeftClient {
  readonly baseUrl: string;
  apiKey: string | undefined;
  readonly maxReconnects: number;
  readonly reconnectDelayMs: number;
  readonly #fetch: typeof fetch;

  constructor(options: ClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? "").replace(/\/+$/, "");
    this.apiKey = options.apiKey;
    this.#fetch = options.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.maxReconnects = options.maxReconnects ?? 5;
    this.reconnectDelayMs = options.reconnectDelayMs ?? 100;
  }

  #headers(extra: Record<string, string> = {}): Record<string, string> {
    const headers: Record<string, string> = { ...extra };
    if (this.apiKey) headers.authorization = `Bearer ${this.apiKey}`;
    return headers;
  }

  async #request(path: string, init: RequestInit): Promise<Response> {
    const response = await this.#fetch(`${this.baseUrl}${path}`, init);
    if (!response.ok) {
      let code = "http_error";
      let message = `${response.status} ${response.statusText}`;
      let runId: string | undefined;
      try {
        const body = (await response.json()) as { error?: { code?: string; message?: string; runId?: string } };
        code = body.error?.code ?? code;
        message = body.error?.message ?? message;
        runId = body.error?.runId;
      } catch {
        // not JSON
      }
      throw new WeftError(response.status, code, message, runId);
    }
    return response;
  }

  /** @internal POST /api/agent/execute. */
  post(body: ExecuteRequest, signal?: AbortSignal): Promise<Response> {
    return this.#request("/api/agent/execute", {
      method: "POST",
      headers: this.#headers({ "content-type": "application/json", accept: "text/event-stream" }),
      body: JSON.stringify(body),
      ...(signal ? { signal } : {}),
    });
  }

  /** @internal GET /api/agent/session/{id}/stream with `Last-Event-ID`. */
  stream(sessionId: string, lastEventId: number | undefined, signal?: AbortSignal): Promise<Response> {
    const extra: Record<string, string> = { accept: "text/event-stream" };
    if (lastEventId !== undefined) extra["last-event-id"] = String(lastEventId);
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
  execute(input: ExecuteInput | string, run: RunOptions = {}): ExecuteStream {
    const message: ExecuteInput = typeof input === "string" ? { role: "user", content: input } : input;
    const body: ExecuteRequest = { input: message };
    if (run.sessionId !== undefined) body.sessionId = run.sessionId;
    if (run.context || (run.sessionId === undefined && run.tools)) {
      const context: ExecuteContext = { messages: [], ...run.context };
      const tools = [...(run.context?.tools ?? []), ...(run.tools ?? []).map(specOf)];
      context.tools = tools;
      body.context = context;
    }
    if (run.options) body.options = run.options;
    return new ExecuteStream(this, run, () => this.post(body, run.signal));
  }

  /** Attaches to a session's live (or last) run, after `lastEventId` when given, and goes on as `execute` does. */
  attach(sessionId: string, options: AttachOptions = {}): ExecuteStream {
    const stream: ExecuteStream = new ExecuteStream(this, { ...options, sessionId }, () =>
      this.stream(sessionId, options.lastEventId, options.signal),
    );
    if (options.lastEventId !== undefined) stream.lastEventId = options.lastEventId;
    return stream;
  }

  /** The session: messages, status, pending calls, usage, cost, last event seq. */
  async getSession(sessionId: string): Promise<SessionView> {
    const response = await this.#request(`/api/agent/session/${encodeURIComponent(sessionId)}`, { headers: this.#headers() });
    return (await response.json()) as SessionView;
  }

  /** The caller's sessions, most recently updated first. */
  async listSessions(options: { limit?: number } = {}): Promise<SessionHead[]> {
    const query = options.limit !== undefined ? `?limit=${options.limit}` : "";
    const response = await this.#request(`/api/agent/sessions${query}`, { headers: this.#headers() });
    return ((await response.json()) as { sessions: SessionHead[] }).sessions;
  }

  /** Deletes a session with its messages and events. */
  async deleteSession(sessionId: string): Promise<void> {
    await this.#request(`/api/agent/session/${encodeURIComponent(sessionId)}`, { method: "DELETE", headers: this.#headers() });
  }

  /** Aborts the session's run (a `WeftError` 409 when nothing runs). */
  async abort(sessionId: string): Promise<void> {
    await this.#request(`/api/agent/session/${encodeURIComponent(sessionId)}/abort`, { method: "POST", headers: this.#headers() });
  }
}
