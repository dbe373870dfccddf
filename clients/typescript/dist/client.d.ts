import type { ApprovalDecision, Cost, ExecuteContext, ExecuteInput, ExecuteOptions, ExecuteRequest, Message, NativeEvent, SessionHead, SessionStatus, SessionView, ToolCall, ToolSpec, Usage } from "./types.js";
/** What a client tool returns: its output text, or the output with details and an error flag. */
export type ToolOutput = string | {
    output: string;
    details?: unknown;
    isError?: boolean;
};
/** Runs a client-side tool call; a thrown error becomes an error result the model sees. */
export type ToolHandler<A = any> = (args: A, call: ToolCall, context: {
    sessionId: string;
    signal: AbortSignal;
}) => Promise<ToolOutput> | ToolOutput;
/** A tool the client gives the session: with `execute` the client runs it when the run asks. */
export interface ClientTool extends ToolSpec {
    execute?: ToolHandler;
}
/** Decides on calls waiting for approval: `true` approves them all, `false` denies them all. */
export type ApprovalHandler = (calls: ToolCall[], context: {
    sessionId: string;
}) => Promise<ApprovalDecision[] | boolean> | ApprovalDecision[] | boolean;
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
    onCursor?: (cursor: {
        sessionId: string;
        lastEventId: number;
    }) => void;
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
export declare class WeftError extends Error {
    readonly status: number;
    readonly code: string;
    readonly runId?: string | undefined;
    constructor(status: number, code: string, message: string, runId?: string | undefined);
}
/**
 * The events of one execution: every run it leads to (client tools run and approvals decided
 * in between, resuming automatically), read across dropped connections with `Last-Event-ID`.
 * Iterate it once; `result()` gives the outcome (and drains the stream if nobody iterates it).
 */
export declare class ExecuteStream implements AsyncIterable<NativeEvent> {
    #private;
    /** The session, once the server named it. */
    sessionId: string | undefined;
    /** The seq of the last event received (the `Last-Event-ID` to resume from). */
    lastEventId: number | undefined;
    /** How many times the stream was reattached after a drop. */
    reconnects: number;
    /** @internal */
    constructor(client: WeftClient, run: RunOptions, first: () => Promise<Response>);
    [Symbol.asyncIterator](): AsyncGenerator<NativeEvent>;
    /** The outcome, once the stream has ended. */
    result(): Promise<ExecuteResult>;
    /** Aborts the run on the server (the stream then ends with its `aborted` end). */
    abort(): Promise<void>;
}
/** A client of one Weft server. */
export declare class WeftClient {
    #private;
    readonly baseUrl: string;
    apiKey: string | undefined;
    readonly maxReconnects: number;
    readonly reconnectDelayMs: number;
    constructor(options?: ClientOptions);
    /** @internal POST /api/agent/execute. */
    post(body: ExecuteRequest, signal?: AbortSignal): Promise<Response>;
    /** @internal GET /api/agent/session/{id}/stream with `Last-Event-ID`. */
    stream(sessionId: string, lastEventId: number | undefined, signal?: AbortSignal): Promise<Response>;
    /**
     * Starts a run (a user message, possibly in a new session) or resumes one (tool results or
     * approval decisions), and streams it. Client tools with `execute` run when the run waits for
     * them, `onApproval` decides approvals, and the stream goes on with the resumed runs.
     */
    execute(input: ExecuteInput | string, run?: RunOptions): ExecuteStream;
    /** Attaches to a session's live (or last) run, after `lastEventId` when given, and goes on as `execute` does. */
    attach(sessionId: string, options?: AttachOptions): ExecuteStream;
    /** The session: messages, status, pending calls, usage, cost, last event seq. */
    getSession(sessionId: string): Promise<SessionView>;
    /** The caller's sessions, most recently updated first. */
    listSessions(options?: {
        limit?: number;
    }): Promise<SessionHead[]>;
    /** Deletes a session with its messages and events. */
    deleteSession(sessionId: string): Promise<void>;
    /** Aborts the session's run (a `WeftError` 409 when nothing runs). */
    abort(sessionId: string): Promise<void>;
}
