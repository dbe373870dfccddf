/** One dispatched SSE frame. */
export interface SseFrame {
    /** The `id:` field, when the frame had one. */
    id?: string;
    /** The `event:` field, when the frame had one. */
    event?: string;
    /** The `data:` lines joined by `\n`. */
    data: string;
}
/** Feeds text and returns the frames it completes. */
export declare class SseParser {
    #private;
    /** Parses `text` (a piece of the stream) and returns the frames it completes. */
    push(text: string): SseFrame[];
}
/** The frames of a byte stream, as they complete. */
export declare function readSse(body: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncGenerator<SseFrame>;
