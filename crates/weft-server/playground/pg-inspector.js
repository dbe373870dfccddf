// The raw event inspector: the shown session's event log as the server renders it in the wire
// format chosen (`?protocol=`: native, loom, loom-export, aceai, ag-ui, vercel), frame by frame,
// with each frame's SSE `id:` (the event's seq). It reads the whole log from the start and
// follows the run under way; a new run is followed when the page starts or sees one.
import { $, api, el, followLog } from "./pg-util.js";
/** The formats, in case the server's API description cannot be read. */
const FALLBACK = ["native", "loom", "loom-export", "aceai", "ag-ui", "vercel"];
const KEEP = 3000;
/** What kind of frame it is, in the words of its format. */
function kindOf(data) {
    if (!data.startsWith("{"))
        return data;
    try {
        const value = JSON.parse(data);
        for (const field of ["type", "event_type"])
            if (typeof value[field] === "string")
                return value[field];
        if ("reply" in value)
            return "reply";
        const keys = Object.keys(value);
        if (keys.length === 1)
            return keys[0];
        return "frame";
    }
    catch {
        return "frame";
    }
}
export class Inspector {
    #client;
    #session;
    #format = localStorage.getItem("weft.playground.format") ?? "native";
    #after = 0;
    #running;
    #again = false;
    #frames = 0;
    constructor(client) {
        this.#client = client;
        const select = $("insp-format");
        this.#options(FALLBACK);
        select.addEventListener("change", () => {
            this.#format = select.value;
            localStorage.setItem("weft.playground.format", this.#format);
            this.#restart();
        });
        $("insp-filter").addEventListener("input", () => this.#filter());
        $("insp-frames").addEventListener("click", (e) => {
            const row = e.target.closest("li");
            row?.classList.toggle("open");
        });
    }
    /** Reads the formats the server lists in its API description. */
    async loadFormats() {
        try {
            const { body } = await api(this.#client(), "/openapi.json");
            const schema = body.components?.schemas?.ProtocolName;
            const names = schema?.enum ?? schema?.oneOf?.flatMap((o) => o.enum ?? []) ?? [];
            if (names.length > 0)
                this.#options(names);
        }
        catch {
            // keep the known ones
        }
    }
    #options(names) {
        const select = $("insp-format");
        if (!names.includes(this.#format))
            this.#format = names[0] ?? "native";
        select.replaceChildren(...names.map((n) => el("option", { value: n }, n)));
        select.value = this.#format;
    }
    /** Shows `sessionId`'s log (none: nothing). */
    show(sessionId) {
        if (sessionId === this.#session)
            return;
        this.#session = sessionId;
        this.#restart();
    }
    /** The shown session has a new run: follow it, if not following already. */
    more(sessionId) {
        if (sessionId !== this.#session)
            return;
        if (this.#running)
            this.#again = true;
        else
            void this.#follow();
    }
    #restart() {
        this.#running?.abort();
        this.#running = undefined;
        this.#again = false;
        this.#after = 0;
        this.#frames = 0;
        $("insp-frames").replaceChildren();
        $("insp-frames").dataset.format = this.#format;
        this.#count("");
        if (this.#session)
            void this.#follow();
    }
    async #follow() {
        const session = this.#session;
        if (!session)
            return;
        const controller = new AbortController();
        this.#running = controller;
        this.#again = false;
        this.#count("following…");
        try {
            const add = (frame) => {
                if (controller.signal.aborted)
                    return;
                this.#add(frame);
                if (frame.id !== undefined)
                    this.#after = Number(frame.id);
            };
            const last = await followLog(this.#client(), session, this.#format, this.#after, add, controller.signal);
            if (!controller.signal.aborted) {
                this.#after = Math.max(this.#after, last);
                this.#count("end of the last run");
            }
        }
        catch (error) {
            if (!controller.signal.aborted)
                this.#count(error instanceof Error ? error.message : String(error));
        }
        finally {
            if (this.#running === controller) {
                this.#running = undefined;
                if (this.#again)
                    void this.#follow();
            }
        }
    }
    #add(frame) {
        const list = $("insp-frames");
        const kind = kindOf(frame.data);
        const row = el("li", { "data-kind": kind });
        if (frame.id !== undefined)
            row.dataset.seq = frame.id;
        row.append(el("span", { class: "seq" }, frame.id ?? ""), el("span", { class: "kind" }, kind), el("code", { class: "data" }, frame.data));
        const filter = $("insp-filter").value.trim().toLowerCase();
        if (filter && !frame.data.toLowerCase().includes(filter))
            row.hidden = true;
        list.append(row);
        this.#frames += 1;
        while (list.childElementCount > KEEP)
            list.firstElementChild?.remove();
    }
    #filter() {
        const filter = $("insp-filter").value.trim().toLowerCase();
        for (const row of $("insp-frames").querySelectorAll("li")) {
            row.hidden = filter !== "" && !(row.querySelector(".data")?.textContent ?? "").toLowerCase().includes(filter);
        }
    }
    #count(state) {
        $("insp-count").textContent = `${this.#frames} frame${this.#frames === 1 ? "" : "s"} · ${this.#format}${state ? ` · ${state}` : ""}`;
    }
}
