import type { ApprovalDecision, Message, NativeEvent, SessionStatus, ToolCall } from "./types.js";
import type { ToolHost } from "./pg-tools.js";
/** What a view asks of the page. */
export interface ChatHooks {
    /** Forks the session keeping its first `atMessage` messages; `prefill` goes to the composer. */
    fork(atMessage: number, prefill?: string): void;
    /** Something the view waits for (an answer, an approval) started or ended. */
    waitsChanged(): void;
    /** The view grew (coalesced: at most once per turn of the event loop). */
    grew(): void;
}
/** The events that would have drawn a stored message. */
export declare function eventsOf(message: Message): NativeEvent[];
export declare class ChatView implements ToolHost {
    #private;
    /** The conversation. */
    readonly root: HTMLDivElement;
    /** Usage and cost per turn and in all. */
    readonly cost: HTMLDivElement;
    /** How the last run ended (or `running`). */
    status: SessionStatus | undefined;
    /** Messages drawn so far (the next message's index in the session). */
    messages: number;
    constructor(hooks: ChatHooks);
    /** How many things wait for the person (answers, approvals). */
    get waiting(): number;
    /** Draws stored messages (a fork's copied beginning). */
    drawMessages(messages: readonly Message[]): void;
    apply(event: NativeEvent): void;
    /**
     * Says once per run that it was aborted or failed. A failed model call says so itself (in a
     * graph of thoughts the run may go on without it); the run's failure is then not said again.
     */
    runEnded(kind: "aborted" | "error", detail?: string, what?: string): void;
    /** The message bubble at `index`, if drawn. */
    bubble(index: number): HTMLElement | null;
    /** The card of a tool call (made when first needed). */
    card(id: string, name?: string): HTMLElement;
    /** Gives up everything that waits for the person (the run was aborted). */
    cancelWaits(reason: string): void;
    ask(call: ToolCall, question: string, signal: AbortSignal): Promise<string>;
    note(call: ToolCall, text: string): void;
    messagesShown(): number;
    /** Shows approve / deny on the calls' cards; resolves once each is decided. */
    approve(calls: readonly ToolCall[]): Promise<ApprovalDecision[]>;
}
