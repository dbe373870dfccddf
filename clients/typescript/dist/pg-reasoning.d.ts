import type { AgentEvent } from "./types.js";
import type { ReasoningSink } from "./pg-trace.js";
export declare class Reasoning implements ReasoningSink {
    #private;
    readonly root: HTMLDivElement;
    readonly redraw: () => void;
    /** Called when something is drawn for the first time (the tab may say so). */
    onActivity: (() => void) | undefined;
    constructor();
    get active(): boolean;
    event(e: AgentEvent, run: number): void;
    runEnded(run: number, status: string): void;
}
