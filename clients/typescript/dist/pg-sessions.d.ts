import type { WeftClient } from "./client.js";
import type { SessionHead, SessionStatus, SessionView } from "./types.js";
/** A head with what forks add (`parentId`, `forkedAt`: absent when not a fork). */
export type Head = SessionHead & {
    parentId?: string;
    forkedAt?: number;
};
interface Known {
    title?: string;
    parentId?: string;
    forkedAt?: number;
}
/** The first user message's text. */
export declare function titleOf(view: Pick<SessionView, "messages">): string | undefined;
export declare class SessionList {
    #private;
    /** Called after each refresh with the heads. */
    onHeads: ((heads: readonly Head[]) => void) | undefined;
    constructor(client: () => WeftClient, select: (id: string) => void);
    /** What the page knows of a session's origin and title. */
    known(id: string): Known;
    head(id: string): Head | undefined;
    /** Every known fork of `id` (children), oldest first. */
    forksOf(id: string): Head[];
    forkedAt(id: string): number | undefined;
    parentOf(id: string): string | undefined;
    /** Remembers what a session is (from its view, or from the page that started it). */
    learn(id: string, what: Known): void;
    /** The page's own run says where a session stands (none: the list's word again). */
    setLive(id: string, status: SessionStatus | undefined): void;
    /** Marks a session whose run waits for the person in this page. */
    setAttention(id: string, waiting: boolean): void;
    /** Forgets the page's word on every session but `ids`. */
    keepLive(ids: ReadonlySet<string>): void;
    setCurrent(id: string | undefined): void;
    /** Reads the heads again (one refresh at a time; asked again meanwhile: once more after). */
    refresh(): Promise<void>;
    draw(): void;
}
export {};
