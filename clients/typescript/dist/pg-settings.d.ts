import type { WeftClient } from "./client.js";
import type { ExecuteOptions, SessionView, ToolSpec } from "./types.js";
/** What a new session is created with. */
export interface NewSession {
    options: ExecuteOptions;
    tools: ToolSpec[];
}
/** What the page knows of a session besides its view: its head's options, its fork origin. */
export interface SessionExtras {
    options?: unknown;
    parentId?: string;
    forkedAt?: number;
}
/** A session's mode as its head's options keep it (`{"mode": {"type": "tot", "breadth": 3, …}}`). */
export declare function modeText(options: unknown, long?: boolean): string;
export declare class SettingsPanel {
    #private;
    constructor(client: () => WeftClient);
    /** Reads the providers and models the server offers. */
    load(): Promise<void>;
    /** The options and tools of a new session, as the form says. */
    read(): NewSession;
    /** Says what the shown session runs with (none: a new session, the form applies). */
    showSession(view: SessionView | undefined, extras: SessionExtras, goTo: (id: string) => void): void;
}
