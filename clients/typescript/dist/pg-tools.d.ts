import type { ClientTool } from "./client.js";
import type { ToolCall, ToolSpec } from "./types.js";
/** What a page tool may do in the session's chat. */
export interface ToolHost {
    /** Asks the person a question on the call's card; resolves with the answer. */
    ask(call: ToolCall, question: string, signal: AbortSignal): Promise<string>;
    /** Says on the call's card what happened. */
    note(call: ToolCall, text: string): void;
    /** How many messages the chat shows. */
    messagesShown(): number;
}
export interface PageTool {
    spec: ToolSpec & {
        name: string;
    };
    /** Whether it asks for approval unless the settings say otherwise. */
    approval: boolean;
    run(args: Record<string, unknown>, call: ToolCall, host: ToolHost, signal: AbortSignal): Promise<string> | string;
}
export declare const PAGE_TOOLS: PageTool[];
/** The page's handlers for the tools of `specs` it implements (a session's remote tools). */
export declare function handlersFor(specs: readonly ToolSpec[], host: ToolHost): ClientTool[];
/** The specs a new session gets: the chosen tools, each asking for approval when chosen so. */
export declare function specsFor(choice: readonly {
    name: string;
    enabled: boolean;
    approval: boolean;
}[]): ToolSpec[];
