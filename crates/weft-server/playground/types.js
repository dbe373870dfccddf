// The wire types of Weft's agent API, written once as schemas (see schema.ts); the TypeScript
// types are inferred from them. They mirror the Rust types' JSON (crates/weft-core: message.rs,
// usage.rs, step.rs, event.rs; crates/weft-server: api.rs), and `test/types.test.ts` checks them
// against what the server sends: every golden stream of crates/weft-conformance (canonical and
// native), live runs, `/openapi.json` and the event tags of `AgentEvent::kind`.
import { arr, bool, int, json, lit, num, obj, oneOf, opt, str, tagged } from "./schema.js";
// ---- usage and cost (weft-core usage.rs) ----
export const UsageSchema = obj({
    input: int,
    output: int,
    cacheRead: int,
    cacheWrite: int,
    reasoning: opt(int),
    total: int,
});
export const CostSchema = obj({ input: num, output: num, cacheRead: num, cacheWrite: num, total: num });
// ---- messages (weft-core message.rs) ----
export const TextContentSchema = obj({ type: lit("text"), text: str });
export const ThinkingContentSchema = obj({ type: lit("thinking"), thinking: str, signature: opt(str) });
export const ImageContentSchema = obj({ type: lit("image"), data: str, mimeType: str });
export const ToolCallContentSchema = obj({ type: lit("toolCall"), id: str, name: str, arguments: json });
export const ToolCallSchema = obj({ id: str, name: str, arguments: json });
export const UserContentSchema = tagged("type", [TextContentSchema, ImageContentSchema]);
export const AssistantContentSchema = tagged("type", [TextContentSchema, ThinkingContentSchema, ToolCallContentSchema]);
export const StopReasonSchema = oneOf("stop", "length", "toolUse", "error", "aborted");
export const UserMessageSchema = obj({
    role: lit("user"),
    content: arr(UserContentSchema),
    timestamp: int,
    /** The id a front end gave the message (AI SDK `UIMessage.id`, AG-UI message id). */
    id: opt(str),
});
const assistantFields = {
    content: arr(AssistantContentSchema),
    stopReason: StopReasonSchema,
    errorMessage: opt(str),
    usage: UsageSchema,
    cost: opt(CostSchema),
    provider: str,
    model: str,
    timestamp: int,
};
export const AssistantMessageSchema = obj({ role: lit("assistant"), ...assistantFields });
export const ToolResultMessageSchema = obj({
    role: lit("toolResult"),
    toolCallId: str,
    toolName: str,
    content: arr(UserContentSchema),
    details: opt(json),
    isError: bool,
    timestamp: int,
});
export const MessageSchema = tagged("role", [UserMessageSchema, AssistantMessageSchema, ToolResultMessageSchema]);
// ---- the step trace (weft-core step.rs) ----
export const ToolExecutionResultSchema = obj({
    call: ToolCallSchema,
    output: str,
    error: opt(str),
    details: opt(json),
    startedAt: int,
    latencyMs: int,
});
export const AgentStepSchema = obj({
    stepId: str,
    stepIndex: int,
    timestamp: int,
    llmResponse: obj(assistantFields),
    latencyMs: int,
    toolResults: arr(ToolExecutionResultSchema),
    annotations: opt(obj({ safety: arr(json), citations: arr(json), extra: json })),
});
// ---- sessions ----
export const SessionStatusSchema = oneOf("idle", "running", "completed", "awaiting_tool_execution", "awaiting_approval", "error", "aborted", "max_turns");
// ---- events (weft-core event.rs): `type` in snake_case, camelCase fields ----
const ev = {
    session_start: obj({ type: lit("session_start"), sessionId: str, runId: str, agent: str }),
    session_end: obj({
        type: lit("session_end"),
        sessionId: str,
        status: SessionStatusSchema,
        messages: arr(MessageSchema),
        usage: UsageSchema,
        cost: CostSchema,
    }),
    awaiting_tool_execution: obj({ type: lit("awaiting_tool_execution"), sessionId: str, toolCalls: arr(ToolCallSchema) }),
    approval_required: obj({ type: lit("approval_required"), sessionId: str, toolCalls: arr(ToolCallSchema) }),
    node_enter: obj({ type: lit("node_enter"), name: str, nodeId: str }),
    node_exit: obj({ type: lit("node_exit"), name: str, nodeId: str, error: opt(str) }),
    step_start: obj({ type: lit("step_start"), stepId: str, stepIndex: int }),
    step_end: obj({ type: lit("step_end"), step: AgentStepSchema }),
    message_start: obj({ type: lit("message_start"), role: oneOf("user", "assistant", "toolResult") }),
    message_end: obj({ type: lit("message_end"), message: MessageSchema }),
    text_start: obj({ type: lit("text_start"), index: int }),
    text_delta: obj({ type: lit("text_delta"), index: int, delta: str }),
    text_end: obj({ type: lit("text_end"), index: int, text: str }),
    thinking_start: obj({ type: lit("thinking_start"), index: int }),
    thinking_delta: obj({ type: lit("thinking_delta"), index: int, delta: str }),
    thinking_end: obj({ type: lit("thinking_end"), index: int, thinking: str, signature: opt(str) }),
    toolcall_start: obj({ type: lit("toolcall_start"), index: int, id: str, name: str }),
    toolcall_delta: obj({ type: lit("toolcall_delta"), index: int, delta: str }),
    toolcall_end: obj({ type: lit("toolcall_end"), index: int, toolCall: ToolCallSchema }),
    tool_execution_start: obj({ type: lit("tool_execution_start"), toolCallId: str, toolName: str, args: json }),
    tool_execution_delta: obj({ type: lit("tool_execution_delta"), toolCallId: str, delta: str }),
    tool_execution_end: obj({
        type: lit("tool_execution_end"),
        toolCallId: str,
        toolName: str,
        output: str,
        details: opt(json),
        isError: bool,
    }),
    state_snapshot: obj({ type: lit("state_snapshot"), state: json }),
    state_update: obj({ type: lit("state_update"), name: str, state: json }),
    checkpoint: obj({
        type: lit("checkpoint"),
        checkpointId: str,
        threadId: str,
        checkpointNs: str,
        step: int,
        timestamp: int,
        state: json,
    }),
    // A reasoning mode's progress: one `progress` event, told apart by `kind`, with the stream
    // protocol's field names (snake_case, as weft-core's `ModeProgress`).
    tot_expand: obj({ type: lit("progress"), kind: lit("tot_expand"), candidates: arr(str) }),
    tot_evaluate: obj({
        type: lit("progress"),
        kind: lit("tot_evaluate"),
        chosen: int,
        scores: arr(num),
        rule_based: opt(bool),
    }),
    tot_backtrack: obj({ type: lit("progress"), kind: lit("tot_backtrack"), reason: str, to_depth: int }),
    got_plan: obj({
        type: lit("progress"),
        kind: lit("got_plan"),
        node_count: int,
        edge_count: int,
        node_ids: arr(str),
    }),
    got_node_start: obj({ type: lit("progress"), kind: lit("got_node_start"), id: str }),
    got_node_complete: obj({ type: lit("progress"), kind: lit("got_node_complete"), id: str, result_summary: str }),
    got_node_failed: obj({ type: lit("progress"), kind: lit("got_node_failed"), id: str, error: str }),
    got_expand: obj({
        type: lit("progress"),
        kind: lit("got_expand"),
        node_id: str,
        nodes_added: int,
        edges_added: int,
    }),
    custom: obj({ type: lit("custom"), value: json }),
    error: obj({ type: lit("error"), error: str, message: opt(MessageSchema) }),
};
/** Every canonical event (`AgentEvent` in weft-core). */
export const AgentEventSchema = tagged("type", Object.values(ev), "kind");
/** The frame that closes each run in the native format. */
export const ExecuteCompleteSchema = obj({
    type: lit("execute_complete"),
    status: SessionStatusSchema,
    pendingToolCalls: arr(ToolCallSchema),
    pendingApprovals: arr(ToolCallSchema),
});
/** The native format's events: the plan's, plus `approval_required` (weft-protocol native). */
export const NATIVE_EVENT_TYPES = [
    "session_start",
    "session_end",
    "awaiting_tool_execution",
    "approval_required",
    "message_start",
    "message_end",
    "text_start",
    "text_delta",
    "text_end",
    "thinking_start",
    "thinking_delta",
    "thinking_end",
    "toolcall_start",
    "toolcall_delta",
    "toolcall_end",
    "tool_execution_start",
    "tool_execution_delta",
    "tool_execution_end",
    "error",
];
/** What a native stream carries: its events and `execute_complete`. */
export const NativeFrameSchema = tagged("type", [
    ...NATIVE_EVENT_TYPES.map((t) => ev[t]),
    ExecuteCompleteSchema,
]);
// ---- requests and responses (weft-server api.rs) ----
export const ToolSpecSchema = obj({
    name: str,
    label: opt(str),
    description: opt(str),
    parameters: opt(json),
    requiresApproval: opt(bool),
});
export const ApprovalDecisionSchema = obj({ toolCallId: str, approved: bool, reason: opt(str) });
/** Tool results as a client sends them (`content` may be a plain string; no timestamp needed). */
export const ToolResultInputSchema = obj({
    role: lit("toolResult"),
    toolCallId: str,
    toolName: str,
    content: str,
    details: opt(json),
    isError: opt(bool),
});
export const UserInputSchema = obj({ role: lit("user"), content: str });
export const ExecuteOptionsSchema = obj({
    provider: opt(str),
    model: opt(str),
    systemPrompt: opt(str),
    maxTurns: opt(int),
    /** `react` (default), `tot` or `got`. */
    mode: opt(str),
    /** The mode's parameters: breadth, depth, search, maxModelCalls, concurrency, adaptive, nodeBudget, nodeTurns. */
    modeOptions: opt(json),
    multitask: opt(oneOf("reject", "enqueue", "interrupt")),
    onDisconnect: opt(oneOf("continue", "cancel")),
    /**
     * How durably the server stores this run: `sync` (nothing is streamed before the store has
     * it), `async` (the server's default unless configured otherwise) or `exit` (stored when the
     * run ends or suspends).
     */
    durability: opt(oneOf("sync", "async", "exit")),
});
export const ExecuteContextSchema = obj({
    messages: opt(arr(MessageSchema)),
    tools: opt(arr(ToolSpecSchema)),
    systemPrompt: opt(str),
});
export const ExecuteRequestSchema = obj({
    sessionId: opt(str),
    input: json,
    context: opt(ExecuteContextSchema),
    options: opt(ExecuteOptionsSchema),
});
export const SessionViewSchema = obj({
    id: str,
    status: SessionStatusSchema,
    provider: str,
    model: str,
    systemPrompt: opt(str),
    tools: arr(ToolSpecSchema),
    messages: arr(MessageSchema),
    pendingToolCalls: arr(ToolCallSchema),
    pendingApprovals: arr(ToolCallSchema),
    usage: UsageSchema,
    cost: CostSchema,
    runId: opt(str),
    lastEventSeq: int,
    stepCount: int,
    createdAt: int,
    updatedAt: int,
    /** The session it was forked from. */
    parentId: opt(str),
    /** How many of the parent's messages it kept. */
    forkedAt: opt(int),
    /** The newest branch a front end's requests for this id go to. */
    branchId: opt(str),
});
export const SessionHeadSchema = obj({
    id: str,
    owner: opt(str),
    status: SessionStatusSchema,
    provider: str,
    model: str,
    systemPrompt: opt(str),
    tools: arr(ToolSpecSchema),
    options: opt(json),
    usage: UsageSchema,
    cost: CostSchema,
    messageCount: int,
    stepCount: int,
    nextDeadline: opt(int),
    version: int,
    createdAt: int,
    updatedAt: int,
});
export const SessionListSchema = obj({ sessions: arr(SessionHeadSchema) });
export const ErrorBodySchema = obj({ error: obj({ code: str, message: str, runId: opt(str) }) });
