import { type Infer } from "./schema.js";
export declare const UsageSchema: import("./schema.js").ObjectSchema<{
    input: import("./schema.js").Schema<number>;
    output: import("./schema.js").Schema<number>;
    cacheRead: import("./schema.js").Schema<number>;
    cacheWrite: import("./schema.js").Schema<number>;
    reasoning: import("./schema.js").Optional<number>;
    total: import("./schema.js").Schema<number>;
}>;
export type Usage = Infer<typeof UsageSchema>;
export declare const CostSchema: import("./schema.js").ObjectSchema<{
    input: import("./schema.js").Schema<number>;
    output: import("./schema.js").Schema<number>;
    cacheRead: import("./schema.js").Schema<number>;
    cacheWrite: import("./schema.js").Schema<number>;
    total: import("./schema.js").Schema<number>;
}>;
export type Cost = Infer<typeof CostSchema>;
export declare const TextContentSchema: import("./schema.js").ObjectSchema<{
    type: import("./schema.js").Schema<"text">;
    text: import("./schema.js").Schema<string>;
}>;
export declare const ThinkingContentSchema: import("./schema.js").ObjectSchema<{
    type: import("./schema.js").Schema<"thinking">;
    thinking: import("./schema.js").Schema<string>;
    signature: import("./schema.js").Optional<string>;
}>;
export declare const ImageContentSchema: import("./schema.js").ObjectSchema<{
    type: import("./schema.js").Schema<"image">;
    data: import("./schema.js").Schema<string>;
    mimeType: import("./schema.js").Schema<string>;
}>;
export declare const ToolCallContentSchema: import("./schema.js").ObjectSchema<{
    type: import("./schema.js").Schema<"toolCall">;
    id: import("./schema.js").Schema<string>;
    name: import("./schema.js").Schema<string>;
    arguments: import("./schema.js").Schema<unknown>;
}>;
export type TextContent = Infer<typeof TextContentSchema>;
export type ThinkingContent = Infer<typeof ThinkingContentSchema>;
export type ImageContent = Infer<typeof ImageContentSchema>;
export type ToolCallContent = Infer<typeof ToolCallContentSchema>;
export declare const ToolCallSchema: import("./schema.js").ObjectSchema<{
    id: import("./schema.js").Schema<string>;
    name: import("./schema.js").Schema<string>;
    arguments: import("./schema.js").Schema<unknown>;
}>;
/** A call the model asks for. */
export type ToolCall = Infer<typeof ToolCallSchema>;
export declare const UserContentSchema: import("./schema.js").Schema<{
    type: "text";
    text: string;
} | {
    data: string;
    type: "image";
    mimeType: string;
}> & {
    readonly tags: string[];
    readonly subTags: Record<string, string[]>;
};
export declare const AssistantContentSchema: import("./schema.js").Schema<{
    type: "text";
    text: string;
} | {
    type: "thinking";
    thinking: string;
    signature?: string;
} | {
    id: string;
    type: "toolCall";
    name: string;
    arguments: unknown;
}> & {
    readonly tags: string[];
    readonly subTags: Record<string, string[]>;
};
export type UserContent = Infer<typeof UserContentSchema>;
export type AssistantContent = Infer<typeof AssistantContentSchema>;
export declare const StopReasonSchema: import("./schema.js").Schema<"length" | "stop" | "toolUse" | "error" | "aborted">;
export type StopReason = Infer<typeof StopReasonSchema>;
export declare const UserMessageSchema: import("./schema.js").ObjectSchema<{
    role: import("./schema.js").Schema<"user">;
    content: import("./schema.js").Schema<({
        type: "text";
        text: string;
    } | {
        data: string;
        type: "image";
        mimeType: string;
    })[]>;
    timestamp: import("./schema.js").Schema<number>;
    /** The id a front end gave the message (AI SDK `UIMessage.id`, AG-UI message id). */
    id: import("./schema.js").Optional<string>;
}>;
export declare const AssistantMessageSchema: import("./schema.js").ObjectSchema<{
    content: import("./schema.js").Schema<({
        type: "text";
        text: string;
    } | {
        type: "thinking";
        thinking: string;
        signature?: string;
    } | {
        id: string;
        type: "toolCall";
        name: string;
        arguments: unknown;
    })[]>;
    stopReason: import("./schema.js").Schema<"length" | "stop" | "toolUse" | "error" | "aborted">;
    errorMessage: import("./schema.js").Optional<string>;
    usage: import("./schema.js").ObjectSchema<{
        input: import("./schema.js").Schema<number>;
        output: import("./schema.js").Schema<number>;
        cacheRead: import("./schema.js").Schema<number>;
        cacheWrite: import("./schema.js").Schema<number>;
        reasoning: import("./schema.js").Optional<number>;
        total: import("./schema.js").Schema<number>;
    }>;
    cost: import("./schema.js").Optional<{
        input: number;
        output: number;
        cacheRead: number;
        cacheWrite: number;
        total: number;
    }>;
    provider: import("./schema.js").Schema<string>;
    model: import("./schema.js").Schema<string>;
    timestamp: import("./schema.js").Schema<number>;
    role: import("./schema.js").Schema<"assistant">;
}>;
export declare const ToolResultMessageSchema: import("./schema.js").ObjectSchema<{
    role: import("./schema.js").Schema<"toolResult">;
    toolCallId: import("./schema.js").Schema<string>;
    toolName: import("./schema.js").Schema<string>;
    content: import("./schema.js").Schema<({
        type: "text";
        text: string;
    } | {
        data: string;
        type: "image";
        mimeType: string;
    })[]>;
    details: import("./schema.js").Optional<unknown>;
    isError: import("./schema.js").Schema<boolean>;
    timestamp: import("./schema.js").Schema<number>;
}>;
export type UserMessage = Infer<typeof UserMessageSchema>;
export type AssistantMessage = Infer<typeof AssistantMessageSchema>;
export type ToolResultMessage = Infer<typeof ToolResultMessageSchema>;
export declare const MessageSchema: import("./schema.js").Schema<{
    role: "user";
    content: ({
        type: "text";
        text: string;
    } | {
        data: string;
        type: "image";
        mimeType: string;
    })[];
    timestamp: number;
    id?: string;
} | {
    role: "assistant";
    content: ({
        type: "text";
        text: string;
    } | {
        type: "thinking";
        thinking: string;
        signature?: string;
    } | {
        id: string;
        type: "toolCall";
        name: string;
        arguments: unknown;
    })[];
    timestamp: number;
    stopReason: "length" | "stop" | "toolUse" | "error" | "aborted";
    usage: {
        input: number;
        output: number;
        cacheRead: number;
        cacheWrite: number;
        total: number;
        reasoning?: number;
    };
    provider: string;
    model: string;
    errorMessage?: string;
    cost?: {
        input: number;
        output: number;
        cacheRead: number;
        cacheWrite: number;
        total: number;
    };
} | {
    role: "toolResult";
    content: ({
        type: "text";
        text: string;
    } | {
        data: string;
        type: "image";
        mimeType: string;
    })[];
    timestamp: number;
    toolCallId: string;
    toolName: string;
    isError: boolean;
    details?: unknown;
}> & {
    readonly tags: string[];
    readonly subTags: Record<string, string[]>;
};
export type Message = Infer<typeof MessageSchema>;
export type Role = Message["role"];
export declare const ToolExecutionResultSchema: import("./schema.js").ObjectSchema<{
    call: import("./schema.js").ObjectSchema<{
        id: import("./schema.js").Schema<string>;
        name: import("./schema.js").Schema<string>;
        arguments: import("./schema.js").Schema<unknown>;
    }>;
    output: import("./schema.js").Schema<string>;
    error: import("./schema.js").Optional<string>;
    details: import("./schema.js").Optional<unknown>;
    startedAt: import("./schema.js").Schema<number>;
    latencyMs: import("./schema.js").Schema<number>;
}>;
export declare const AgentStepSchema: import("./schema.js").ObjectSchema<{
    stepId: import("./schema.js").Schema<string>;
    stepIndex: import("./schema.js").Schema<number>;
    timestamp: import("./schema.js").Schema<number>;
    llmResponse: import("./schema.js").ObjectSchema<{
        content: import("./schema.js").Schema<({
            type: "text";
            text: string;
        } | {
            type: "thinking";
            thinking: string;
            signature?: string;
        } | {
            id: string;
            type: "toolCall";
            name: string;
            arguments: unknown;
        })[]>;
        stopReason: import("./schema.js").Schema<"length" | "stop" | "toolUse" | "error" | "aborted">;
        errorMessage: import("./schema.js").Optional<string>;
        usage: import("./schema.js").ObjectSchema<{
            input: import("./schema.js").Schema<number>;
            output: import("./schema.js").Schema<number>;
            cacheRead: import("./schema.js").Schema<number>;
            cacheWrite: import("./schema.js").Schema<number>;
            reasoning: import("./schema.js").Optional<number>;
            total: import("./schema.js").Schema<number>;
        }>;
        cost: import("./schema.js").Optional<{
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
        }>;
        provider: import("./schema.js").Schema<string>;
        model: import("./schema.js").Schema<string>;
        timestamp: import("./schema.js").Schema<number>;
    }>;
    latencyMs: import("./schema.js").Schema<number>;
    toolResults: import("./schema.js").Schema<{
        output: string;
        call: {
            id: string;
            name: string;
            arguments: unknown;
        };
        startedAt: number;
        latencyMs: number;
        error?: string;
        details?: unknown;
    }[]>;
    annotations: import("./schema.js").Optional<{
        safety: unknown[];
        citations: unknown[];
        extra: unknown;
    }>;
}>;
export type AgentStep = Infer<typeof AgentStepSchema>;
export declare const SessionStatusSchema: import("./schema.js").Schema<"error" | "aborted" | "idle" | "running" | "completed" | "awaiting_tool_execution" | "awaiting_approval" | "max_turns">;
export type SessionStatus = Infer<typeof SessionStatusSchema>;
/** Every canonical event (`AgentEvent` in weft-core). */
export declare const AgentEventSchema: import("./schema.js").Schema<{
    type: "session_start";
    sessionId: string;
    runId: string;
    agent: string;
} | {
    type: "session_end";
    usage: {
        input: number;
        output: number;
        cacheRead: number;
        cacheWrite: number;
        total: number;
        reasoning?: number;
    };
    cost: {
        input: number;
        output: number;
        cacheRead: number;
        cacheWrite: number;
        total: number;
    };
    sessionId: string;
    status: "error" | "aborted" | "idle" | "running" | "completed" | "awaiting_tool_execution" | "awaiting_approval" | "max_turns";
    messages: ({
        role: "user";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        id?: string;
    } | {
        role: "assistant";
        content: ({
            type: "text";
            text: string;
        } | {
            type: "thinking";
            thinking: string;
            signature?: string;
        } | {
            id: string;
            type: "toolCall";
            name: string;
            arguments: unknown;
        })[];
        timestamp: number;
        stopReason: "length" | "stop" | "toolUse" | "error" | "aborted";
        usage: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
            reasoning?: number;
        };
        provider: string;
        model: string;
        errorMessage?: string;
        cost?: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
        };
    } | {
        role: "toolResult";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        toolCallId: string;
        toolName: string;
        isError: boolean;
        details?: unknown;
    })[];
} | {
    type: "awaiting_tool_execution";
    sessionId: string;
    toolCalls: {
        id: string;
        name: string;
        arguments: unknown;
    }[];
} | {
    type: "approval_required";
    sessionId: string;
    toolCalls: {
        id: string;
        name: string;
        arguments: unknown;
    }[];
} | {
    type: "node_enter";
    name: string;
    nodeId: string;
} | {
    type: "node_exit";
    name: string;
    nodeId: string;
    error?: string;
} | {
    type: "step_start";
    stepId: string;
    stepIndex: number;
} | {
    type: "step_end";
    step: {
        timestamp: number;
        latencyMs: number;
        stepId: string;
        stepIndex: number;
        llmResponse: {
            content: ({
                type: "text";
                text: string;
            } | {
                type: "thinking";
                thinking: string;
                signature?: string;
            } | {
                id: string;
                type: "toolCall";
                name: string;
                arguments: unknown;
            })[];
            timestamp: number;
            stopReason: "length" | "stop" | "toolUse" | "error" | "aborted";
            usage: {
                input: number;
                output: number;
                cacheRead: number;
                cacheWrite: number;
                total: number;
                reasoning?: number;
            };
            provider: string;
            model: string;
            errorMessage?: string;
            cost?: {
                input: number;
                output: number;
                cacheRead: number;
                cacheWrite: number;
                total: number;
            };
        };
        toolResults: {
            output: string;
            call: {
                id: string;
                name: string;
                arguments: unknown;
            };
            startedAt: number;
            latencyMs: number;
            error?: string;
            details?: unknown;
        }[];
        annotations?: {
            safety: unknown[];
            citations: unknown[];
            extra: unknown;
        };
    };
} | {
    type: "message_start";
    role: "user" | "assistant" | "toolResult";
} | {
    type: "message_end";
    message: {
        role: "user";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        id?: string;
    } | {
        role: "assistant";
        content: ({
            type: "text";
            text: string;
        } | {
            type: "thinking";
            thinking: string;
            signature?: string;
        } | {
            id: string;
            type: "toolCall";
            name: string;
            arguments: unknown;
        })[];
        timestamp: number;
        stopReason: "length" | "stop" | "toolUse" | "error" | "aborted";
        usage: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
            reasoning?: number;
        };
        provider: string;
        model: string;
        errorMessage?: string;
        cost?: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
        };
    } | {
        role: "toolResult";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        toolCallId: string;
        toolName: string;
        isError: boolean;
        details?: unknown;
    };
} | {
    type: "text_start";
    index: number;
} | {
    type: "text_delta";
    index: number;
    delta: string;
} | {
    type: "text_end";
    text: string;
    index: number;
} | {
    type: "thinking_start";
    index: number;
} | {
    type: "thinking_delta";
    index: number;
    delta: string;
} | {
    type: "thinking_end";
    thinking: string;
    index: number;
    signature?: string;
} | {
    id: string;
    type: "toolcall_start";
    name: string;
    index: number;
} | {
    type: "toolcall_delta";
    index: number;
    delta: string;
} | {
    type: "toolcall_end";
    toolCall: {
        id: string;
        name: string;
        arguments: unknown;
    };
    index: number;
} | {
    type: "tool_execution_start";
    toolCallId: string;
    toolName: string;
    args: unknown;
} | {
    type: "tool_execution_delta";
    toolCallId: string;
    delta: string;
} | {
    output: string;
    type: "tool_execution_end";
    toolCallId: string;
    toolName: string;
    isError: boolean;
    details?: unknown;
} | {
    type: "state_snapshot";
    state: unknown;
} | {
    type: "state_update";
    name: string;
    state: unknown;
} | {
    type: "checkpoint";
    timestamp: number;
    step: number;
    state: unknown;
    checkpointId: string;
    threadId: string;
    checkpointNs: string;
} | {
    type: "progress";
    kind: "tot_expand";
    candidates: string[];
} | {
    type: "progress";
    kind: "tot_evaluate";
    chosen: number;
    scores: number[];
    rule_based?: boolean;
} | {
    type: "progress";
    kind: "tot_backtrack";
    reason: string;
    to_depth: number;
} | {
    type: "progress";
    kind: "got_plan";
    node_count: number;
    edge_count: number;
    node_ids: string[];
} | {
    id: string;
    type: "progress";
    kind: "got_node_start";
} | {
    id: string;
    type: "progress";
    kind: "got_node_complete";
    result_summary: string;
} | {
    id: string;
    type: "progress";
    error: string;
    kind: "got_node_failed";
} | {
    type: "progress";
    kind: "got_expand";
    node_id: string;
    nodes_added: number;
    edges_added: number;
} | {
    value: unknown;
    type: "custom";
} | {
    type: "error";
    error: string;
    message?: {
        role: "user";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        id?: string;
    } | {
        role: "assistant";
        content: ({
            type: "text";
            text: string;
        } | {
            type: "thinking";
            thinking: string;
            signature?: string;
        } | {
            id: string;
            type: "toolCall";
            name: string;
            arguments: unknown;
        })[];
        timestamp: number;
        stopReason: "length" | "stop" | "toolUse" | "error" | "aborted";
        usage: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
            reasoning?: number;
        };
        provider: string;
        model: string;
        errorMessage?: string;
        cost?: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
        };
    } | {
        role: "toolResult";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        toolCallId: string;
        toolName: string;
        isError: boolean;
        details?: unknown;
    };
}> & {
    readonly tags: string[];
    readonly subTags: Record<string, string[]>;
};
export type AgentEvent = Infer<typeof AgentEventSchema>;
export type AgentEventType = AgentEvent["type"];
/** The event of one `type`. */
export type EventOf<T extends AgentEventType> = Extract<AgentEvent, {
    type: T;
}>;
/** A reasoning mode's progress (`type: "progress"`), told apart by `kind`. */
export type ProgressEvent = EventOf<"progress">;
/** The kinds of progress (`tot_expand`, `got_plan` …). */
export type ProgressKind = ProgressEvent["kind"];
/** The frame that closes each run in the native format. */
export declare const ExecuteCompleteSchema: import("./schema.js").ObjectSchema<{
    type: import("./schema.js").Schema<"execute_complete">;
    status: import("./schema.js").Schema<"error" | "aborted" | "idle" | "running" | "completed" | "awaiting_tool_execution" | "awaiting_approval" | "max_turns">;
    pendingToolCalls: import("./schema.js").Schema<{
        id: string;
        name: string;
        arguments: unknown;
    }[]>;
    pendingApprovals: import("./schema.js").Schema<{
        id: string;
        name: string;
        arguments: unknown;
    }[]>;
}>;
export type ExecuteComplete = Infer<typeof ExecuteCompleteSchema>;
/** The native format's events: the plan's, plus `approval_required` (weft-protocol native). */
export declare const NATIVE_EVENT_TYPES: readonly ["session_start", "session_end", "awaiting_tool_execution", "approval_required", "message_start", "message_end", "text_start", "text_delta", "text_end", "thinking_start", "thinking_delta", "thinking_end", "toolcall_start", "toolcall_delta", "toolcall_end", "tool_execution_start", "tool_execution_delta", "tool_execution_end", "error"];
export type NativeEventType = (typeof NATIVE_EVENT_TYPES)[number];
/** What a native stream carries: its events and `execute_complete`. */
export declare const NativeFrameSchema: import("./schema.js").Schema<{
    type: "session_start";
    sessionId: string;
    runId: string;
    agent: string;
} | {
    type: "session_end";
    usage: {
        input: number;
        output: number;
        cacheRead: number;
        cacheWrite: number;
        total: number;
        reasoning?: number;
    };
    cost: {
        input: number;
        output: number;
        cacheRead: number;
        cacheWrite: number;
        total: number;
    };
    sessionId: string;
    status: "error" | "aborted" | "idle" | "running" | "completed" | "awaiting_tool_execution" | "awaiting_approval" | "max_turns";
    messages: ({
        role: "user";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        id?: string;
    } | {
        role: "assistant";
        content: ({
            type: "text";
            text: string;
        } | {
            type: "thinking";
            thinking: string;
            signature?: string;
        } | {
            id: string;
            type: "toolCall";
            name: string;
            arguments: unknown;
        })[];
        timestamp: number;
        stopReason: "length" | "stop" | "toolUse" | "error" | "aborted";
        usage: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
            reasoning?: number;
        };
        provider: string;
        model: string;
        errorMessage?: string;
        cost?: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
        };
    } | {
        role: "toolResult";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        toolCallId: string;
        toolName: string;
        isError: boolean;
        details?: unknown;
    })[];
} | {
    type: "awaiting_tool_execution";
    sessionId: string;
    toolCalls: {
        id: string;
        name: string;
        arguments: unknown;
    }[];
} | {
    type: "approval_required";
    sessionId: string;
    toolCalls: {
        id: string;
        name: string;
        arguments: unknown;
    }[];
} | {
    type: "message_start";
    role: "user" | "assistant" | "toolResult";
} | {
    type: "message_end";
    message: {
        role: "user";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        id?: string;
    } | {
        role: "assistant";
        content: ({
            type: "text";
            text: string;
        } | {
            type: "thinking";
            thinking: string;
            signature?: string;
        } | {
            id: string;
            type: "toolCall";
            name: string;
            arguments: unknown;
        })[];
        timestamp: number;
        stopReason: "length" | "stop" | "toolUse" | "error" | "aborted";
        usage: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
            reasoning?: number;
        };
        provider: string;
        model: string;
        errorMessage?: string;
        cost?: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
        };
    } | {
        role: "toolResult";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        toolCallId: string;
        toolName: string;
        isError: boolean;
        details?: unknown;
    };
} | {
    type: "text_start";
    index: number;
} | {
    type: "text_delta";
    index: number;
    delta: string;
} | {
    type: "text_end";
    text: string;
    index: number;
} | {
    type: "thinking_start";
    index: number;
} | {
    type: "thinking_delta";
    index: number;
    delta: string;
} | {
    type: "thinking_end";
    thinking: string;
    index: number;
    signature?: string;
} | {
    id: string;
    type: "toolcall_start";
    name: string;
    index: number;
} | {
    type: "toolcall_delta";
    index: number;
    delta: string;
} | {
    type: "toolcall_end";
    toolCall: {
        id: string;
        name: string;
        arguments: unknown;
    };
    index: number;
} | {
    type: "tool_execution_start";
    toolCallId: string;
    toolName: string;
    args: unknown;
} | {
    type: "tool_execution_delta";
    toolCallId: string;
    delta: string;
} | {
    output: string;
    type: "tool_execution_end";
    toolCallId: string;
    toolName: string;
    isError: boolean;
    details?: unknown;
} | {
    type: "error";
    error: string;
    message?: {
        role: "user";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        id?: string;
    } | {
        role: "assistant";
        content: ({
            type: "text";
            text: string;
        } | {
            type: "thinking";
            thinking: string;
            signature?: string;
        } | {
            id: string;
            type: "toolCall";
            name: string;
            arguments: unknown;
        })[];
        timestamp: number;
        stopReason: "length" | "stop" | "toolUse" | "error" | "aborted";
        usage: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
            reasoning?: number;
        };
        provider: string;
        model: string;
        errorMessage?: string;
        cost?: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
        };
    } | {
        role: "toolResult";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        toolCallId: string;
        toolName: string;
        isError: boolean;
        details?: unknown;
    };
} | {
    type: "execute_complete";
    status: "error" | "aborted" | "idle" | "running" | "completed" | "awaiting_tool_execution" | "awaiting_approval" | "max_turns";
    pendingToolCalls: {
        id: string;
        name: string;
        arguments: unknown;
    }[];
    pendingApprovals: {
        id: string;
        name: string;
        arguments: unknown;
    }[];
}> & {
    readonly tags: string[];
    readonly subTags: Record<string, string[]>;
};
export type NativeEvent = EventOf<NativeEventType> | ExecuteComplete;
export declare const ToolSpecSchema: import("./schema.js").ObjectSchema<{
    name: import("./schema.js").Schema<string>;
    label: import("./schema.js").Optional<string>;
    description: import("./schema.js").Optional<string>;
    parameters: import("./schema.js").Optional<unknown>;
    requiresApproval: import("./schema.js").Optional<boolean>;
}>;
/** A tool as the model sees it; without a server-side executor it is a remote (client) tool. */
export type ToolSpec = Infer<typeof ToolSpecSchema>;
export declare const ApprovalDecisionSchema: import("./schema.js").ObjectSchema<{
    toolCallId: import("./schema.js").Schema<string>;
    approved: import("./schema.js").Schema<boolean>;
    reason: import("./schema.js").Optional<string>;
}>;
export type ApprovalDecision = Infer<typeof ApprovalDecisionSchema>;
/** Tool results as a client sends them (`content` may be a plain string; no timestamp needed). */
export declare const ToolResultInputSchema: import("./schema.js").ObjectSchema<{
    role: import("./schema.js").Schema<"toolResult">;
    toolCallId: import("./schema.js").Schema<string>;
    toolName: import("./schema.js").Schema<string>;
    content: import("./schema.js").Schema<string>;
    details: import("./schema.js").Optional<unknown>;
    isError: import("./schema.js").Optional<boolean>;
}>;
export type ToolResultInput = Infer<typeof ToolResultInputSchema>;
export declare const UserInputSchema: import("./schema.js").ObjectSchema<{
    role: import("./schema.js").Schema<"user">;
    content: import("./schema.js").Schema<string>;
}>;
export type UserInput = Infer<typeof UserInputSchema> | UserMessage;
export declare const ExecuteOptionsSchema: import("./schema.js").ObjectSchema<{
    provider: import("./schema.js").Optional<string>;
    model: import("./schema.js").Optional<string>;
    systemPrompt: import("./schema.js").Optional<string>;
    maxTurns: import("./schema.js").Optional<number>;
    /** `react` (default), `tot` or `got`. */
    mode: import("./schema.js").Optional<string>;
    /** The mode's parameters: breadth, depth, search, maxModelCalls, concurrency, adaptive, nodeBudget, nodeTurns. */
    modeOptions: import("./schema.js").Optional<unknown>;
    multitask: import("./schema.js").Optional<"reject" | "enqueue" | "interrupt">;
    onDisconnect: import("./schema.js").Optional<"continue" | "cancel">;
    /**
     * How durably the server stores this run: `sync` (nothing is streamed before the store has
     * it), `async` (the server's default unless configured otherwise) or `exit` (stored when the
     * run ends or suspends).
     */
    durability: import("./schema.js").Optional<"sync" | "async" | "exit">;
}>;
export type ExecuteOptions = Infer<typeof ExecuteOptionsSchema>;
export declare const ExecuteContextSchema: import("./schema.js").ObjectSchema<{
    messages: import("./schema.js").Optional<({
        role: "user";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        id?: string;
    } | {
        role: "assistant";
        content: ({
            type: "text";
            text: string;
        } | {
            type: "thinking";
            thinking: string;
            signature?: string;
        } | {
            id: string;
            type: "toolCall";
            name: string;
            arguments: unknown;
        })[];
        timestamp: number;
        stopReason: "length" | "stop" | "toolUse" | "error" | "aborted";
        usage: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
            reasoning?: number;
        };
        provider: string;
        model: string;
        errorMessage?: string;
        cost?: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
        };
    } | {
        role: "toolResult";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        toolCallId: string;
        toolName: string;
        isError: boolean;
        details?: unknown;
    })[]>;
    tools: import("./schema.js").Optional<{
        name: string;
        label?: string;
        description?: string;
        parameters?: unknown;
        requiresApproval?: boolean;
    }[]>;
    systemPrompt: import("./schema.js").Optional<string>;
}>;
export type ExecuteContext = Infer<typeof ExecuteContextSchema>;
export type ExecuteInput = UserInput | ToolResultInput[] | {
    approvals: ApprovalDecision[];
};
export declare const ExecuteRequestSchema: import("./schema.js").ObjectSchema<{
    sessionId: import("./schema.js").Optional<string>;
    input: import("./schema.js").Schema<unknown>;
    context: import("./schema.js").Optional<{
        messages?: ({
            role: "user";
            content: ({
                type: "text";
                text: string;
            } | {
                data: string;
                type: "image";
                mimeType: string;
            })[];
            timestamp: number;
            id?: string;
        } | {
            role: "assistant";
            content: ({
                type: "text";
                text: string;
            } | {
                type: "thinking";
                thinking: string;
                signature?: string;
            } | {
                id: string;
                type: "toolCall";
                name: string;
                arguments: unknown;
            })[];
            timestamp: number;
            stopReason: "length" | "stop" | "toolUse" | "error" | "aborted";
            usage: {
                input: number;
                output: number;
                cacheRead: number;
                cacheWrite: number;
                total: number;
                reasoning?: number;
            };
            provider: string;
            model: string;
            errorMessage?: string;
            cost?: {
                input: number;
                output: number;
                cacheRead: number;
                cacheWrite: number;
                total: number;
            };
        } | {
            role: "toolResult";
            content: ({
                type: "text";
                text: string;
            } | {
                data: string;
                type: "image";
                mimeType: string;
            })[];
            timestamp: number;
            toolCallId: string;
            toolName: string;
            isError: boolean;
            details?: unknown;
        })[];
        systemPrompt?: string;
        tools?: {
            name: string;
            label?: string;
            description?: string;
            parameters?: unknown;
            requiresApproval?: boolean;
        }[];
    }>;
    options: import("./schema.js").Optional<{
        provider?: string;
        model?: string;
        systemPrompt?: string;
        maxTurns?: number;
        mode?: string;
        modeOptions?: unknown;
        multitask?: "reject" | "enqueue" | "interrupt";
        onDisconnect?: "continue" | "cancel";
        durability?: "sync" | "async" | "exit";
    }>;
}>;
export type ExecuteRequest = Omit<Infer<typeof ExecuteRequestSchema>, "input"> & {
    input: ExecuteInput;
};
export declare const SessionViewSchema: import("./schema.js").ObjectSchema<{
    id: import("./schema.js").Schema<string>;
    status: import("./schema.js").Schema<"error" | "aborted" | "idle" | "running" | "completed" | "awaiting_tool_execution" | "awaiting_approval" | "max_turns">;
    provider: import("./schema.js").Schema<string>;
    model: import("./schema.js").Schema<string>;
    systemPrompt: import("./schema.js").Optional<string>;
    tools: import("./schema.js").Schema<{
        name: string;
        label?: string;
        description?: string;
        parameters?: unknown;
        requiresApproval?: boolean;
    }[]>;
    messages: import("./schema.js").Schema<({
        role: "user";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        id?: string;
    } | {
        role: "assistant";
        content: ({
            type: "text";
            text: string;
        } | {
            type: "thinking";
            thinking: string;
            signature?: string;
        } | {
            id: string;
            type: "toolCall";
            name: string;
            arguments: unknown;
        })[];
        timestamp: number;
        stopReason: "length" | "stop" | "toolUse" | "error" | "aborted";
        usage: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
            reasoning?: number;
        };
        provider: string;
        model: string;
        errorMessage?: string;
        cost?: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
        };
    } | {
        role: "toolResult";
        content: ({
            type: "text";
            text: string;
        } | {
            data: string;
            type: "image";
            mimeType: string;
        })[];
        timestamp: number;
        toolCallId: string;
        toolName: string;
        isError: boolean;
        details?: unknown;
    })[]>;
    pendingToolCalls: import("./schema.js").Schema<{
        id: string;
        name: string;
        arguments: unknown;
    }[]>;
    pendingApprovals: import("./schema.js").Schema<{
        id: string;
        name: string;
        arguments: unknown;
    }[]>;
    usage: import("./schema.js").ObjectSchema<{
        input: import("./schema.js").Schema<number>;
        output: import("./schema.js").Schema<number>;
        cacheRead: import("./schema.js").Schema<number>;
        cacheWrite: import("./schema.js").Schema<number>;
        reasoning: import("./schema.js").Optional<number>;
        total: import("./schema.js").Schema<number>;
    }>;
    cost: import("./schema.js").ObjectSchema<{
        input: import("./schema.js").Schema<number>;
        output: import("./schema.js").Schema<number>;
        cacheRead: import("./schema.js").Schema<number>;
        cacheWrite: import("./schema.js").Schema<number>;
        total: import("./schema.js").Schema<number>;
    }>;
    runId: import("./schema.js").Optional<string>;
    lastEventSeq: import("./schema.js").Schema<number>;
    stepCount: import("./schema.js").Schema<number>;
    createdAt: import("./schema.js").Schema<number>;
    updatedAt: import("./schema.js").Schema<number>;
    /** The session it was forked from. */
    parentId: import("./schema.js").Optional<string>;
    /** How many of the parent's messages it kept. */
    forkedAt: import("./schema.js").Optional<number>;
    /** The newest branch a front end's requests for this id go to. */
    branchId: import("./schema.js").Optional<string>;
}>;
/** `GET /api/agent/session/{id}`. */
export type SessionView = Infer<typeof SessionViewSchema>;
export declare const SessionHeadSchema: import("./schema.js").ObjectSchema<{
    id: import("./schema.js").Schema<string>;
    owner: import("./schema.js").Optional<string>;
    status: import("./schema.js").Schema<"error" | "aborted" | "idle" | "running" | "completed" | "awaiting_tool_execution" | "awaiting_approval" | "max_turns">;
    provider: import("./schema.js").Schema<string>;
    model: import("./schema.js").Schema<string>;
    systemPrompt: import("./schema.js").Optional<string>;
    tools: import("./schema.js").Schema<{
        name: string;
        label?: string;
        description?: string;
        parameters?: unknown;
        requiresApproval?: boolean;
    }[]>;
    options: import("./schema.js").Optional<unknown>;
    usage: import("./schema.js").ObjectSchema<{
        input: import("./schema.js").Schema<number>;
        output: import("./schema.js").Schema<number>;
        cacheRead: import("./schema.js").Schema<number>;
        cacheWrite: import("./schema.js").Schema<number>;
        reasoning: import("./schema.js").Optional<number>;
        total: import("./schema.js").Schema<number>;
    }>;
    cost: import("./schema.js").ObjectSchema<{
        input: import("./schema.js").Schema<number>;
        output: import("./schema.js").Schema<number>;
        cacheRead: import("./schema.js").Schema<number>;
        cacheWrite: import("./schema.js").Schema<number>;
        total: import("./schema.js").Schema<number>;
    }>;
    messageCount: import("./schema.js").Schema<number>;
    stepCount: import("./schema.js").Schema<number>;
    nextDeadline: import("./schema.js").Optional<number>;
    version: import("./schema.js").Schema<number>;
    createdAt: import("./schema.js").Schema<number>;
    updatedAt: import("./schema.js").Schema<number>;
}>;
/** One entry of `GET /api/agent/sessions`. */
export type SessionHead = Infer<typeof SessionHeadSchema>;
export declare const SessionListSchema: import("./schema.js").ObjectSchema<{
    sessions: import("./schema.js").Schema<{
        id: string;
        usage: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
            reasoning?: number;
        };
        cost: {
            input: number;
            output: number;
            cacheRead: number;
            cacheWrite: number;
            total: number;
        };
        provider: string;
        model: string;
        status: "error" | "aborted" | "idle" | "running" | "completed" | "awaiting_tool_execution" | "awaiting_approval" | "max_turns";
        tools: {
            name: string;
            label?: string;
            description?: string;
            parameters?: unknown;
            requiresApproval?: boolean;
        }[];
        stepCount: number;
        createdAt: number;
        updatedAt: number;
        messageCount: number;
        version: number;
        systemPrompt?: string;
        options?: unknown;
        owner?: string;
        nextDeadline?: number;
    }[]>;
}>;
export type SessionList = Infer<typeof SessionListSchema>;
export declare const ErrorBodySchema: import("./schema.js").ObjectSchema<{
    error: import("./schema.js").ObjectSchema<{
        code: import("./schema.js").Schema<string>;
        message: import("./schema.js").Schema<string>;
        runId: import("./schema.js").Optional<string>;
    }>;
}>;
export type ErrorBody = Infer<typeof ErrorBodySchema>;
