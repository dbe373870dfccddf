import type { WeftClient } from "./client.js";
export declare class Inspector {
    #private;
    constructor(client: () => WeftClient);
    /** Reads the formats the server lists in its API description. */
    loadFormats(): Promise<void>;
    /** Shows `sessionId`'s log (none: nothing). */
    show(sessionId: string | undefined): void;
    /** The shown session has a new run: follow it, if not following already. */
    more(sessionId: string): void;
}
