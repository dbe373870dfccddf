// An incremental Server-Sent Events parser (the WHATWG event-stream format): bytes in, frames
// out, whatever the chunking (a frame, a line or a UTF-8 character may be cut anywhere).
/** Feeds text and returns the frames it completes. */
export class SseParser {
    #buffer = "";
    #data = [];
    #id;
    #event;
    #sawCr = false;
    /** Parses `text` (a piece of the stream) and returns the frames it completes. */
    push(text) {
        const frames = [];
        let input = text;
        if (this.#sawCr && input.startsWith("\n"))
            input = input.slice(1);
        this.#sawCr = false;
        this.#buffer += input;
        let start = 0;
        for (let i = 0; i < this.#buffer.length; i++) {
            const c = this.#buffer[i];
            if (c !== "\n" && c !== "\r")
                continue;
            const line = this.#buffer.slice(start, i);
            if (c === "\r") {
                if (i + 1 === this.#buffer.length)
                    this.#sawCr = true;
                else if (this.#buffer[i + 1] === "\n")
                    i++;
            }
            start = i + 1;
            this.#line(line, frames);
        }
        this.#buffer = this.#buffer.slice(start);
        return frames;
    }
    #line(line, frames) {
        if (line === "") {
            if (this.#data.length > 0 || this.#id !== undefined) {
                const frame = { data: this.#data.join("\n") };
                if (this.#id !== undefined)
                    frame.id = this.#id;
                if (this.#event !== undefined)
                    frame.event = this.#event;
                frames.push(frame);
            }
            this.#data = [];
            this.#id = undefined;
            this.#event = undefined;
            return;
        }
        if (line.startsWith(":"))
            return;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? "" : line.slice(colon + 1);
        if (value.startsWith(" "))
            value = value.slice(1);
        if (field === "data")
            this.#data.push(value);
        else if (field === "id" && !value.includes("\0"))
            this.#id = value;
        else if (field === "event")
            this.#event = value;
    }
}
/** The frames of a byte stream, as they complete. */
export async function* readSse(body, signal) {
    const reader = body.getReader();
    const decoder = new TextDecoder();
    const parser = new SseParser();
    const onAbort = () => void reader.cancel().catch(() => { });
    signal?.addEventListener("abort", onAbort, { once: true });
    let finished = false;
    try {
        for (;;) {
            const { done, value } = await reader.read();
            if (done) {
                finished = true;
                break;
            }
            yield* parser.push(decoder.decode(value, { stream: true }));
        }
        yield* parser.push(decoder.decode());
    }
    finally {
        signal?.removeEventListener("abort", onAbort);
        if (!finished)
            void reader.cancel().catch(() => { });
        else
            reader.releaseLock();
    }
}
