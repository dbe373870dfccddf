import type { AgentEvent, AssistantMessage } from "./types.js";
interface AceToolResult {
    call: {
        id: string;
        name: string;
        arguments?: unknown;
    };
    output?: string;
    error?: string;
    started_at?: string;
    latency_ms?: number;
}
interface AceStep {
    step_id: string;
    step_index: number;
    timestamp: string;
    llm_response: Omit<AssistantMessage, "role">;
    latency_ms?: number;
    tool_results?: AceToolResult[];
    annotations?: {
        extra?: {
            mode?: string;
            node?: string;
            scratch?: boolean;
        };
    };
}
/** One AceAI frame (`AgentStepEvent`). */
export interface AceFrame {
    event_type: string;
    step_index: number;
    step_id: string;
    step?: AceStep;
    tool_call?: {
        id: string;
        name: string;
        arguments?: unknown;
    };
    tool_result?: AceToolResult;
    error?: string;
    annotations?: {
        event?: AgentEvent;
        status?: string;
        tool_calls?: {
            id: string;
            name: string;
        }[];
        cost?: {
            total: number;
        };
    };
}
/** Where the canonical events of reasoning modes go. */
export interface ReasoningSink {
    event(event: AgentEvent, run: number): void;
    runEnded(run: number, status: string): void;
}
export declare class Trace {
    #private;
    readonly root: HTMLDivElement;
    readonly redraw: () => void;
    constructor(sink: ReasoningSink);
    /** Takes one frame of the session's AceAI stream. */
    frame(f: AceFrame): void;
}
export {};
