// The session list: each session with its title (its first user message), live status, model and
// cost, forks nested under the session they branch from. The heads come from
// `GET /api/agent/sessions`; titles and fork origins, which never change, are read once per
// session (`GET /api/agent/session/{id}`) and kept in localStorage.
import { $, el, money, shorten } from "./pg-util.js";
const KEY = "weft.playground.known";
const SHORT = {
    awaiting_tool_execution: "awaits tools",
    awaiting_approval: "awaits approval",
    max_turns: "max turns",
};
/** The first user message's text. */
export function titleOf(view) {
    const first = view.messages.find((m) => m.role === "user");
    if (!first || first.role !== "user")
        return undefined;
    return first.content.map((b) => (b.type === "text" ? b.text : "")).join("").trim() || undefined;
}
export class SessionList {
    #client;
    #select;
    #heads = [];
    #known;
    #current;
    /** Statuses the page knows better than the last list (its own live runs). */
    #live = new Map();
    /** Sessions where the page waits for the person (a question, an approval). */
    #attention = new Set();
    #fetching = new Set();
    #refreshing;
    #again = false;
    /** Called after each refresh with the heads. */
    onHeads;
    constructor(client, select) {
        this.#client = client;
        this.#select = select;
        try {
            this.#known = JSON.parse(localStorage.getItem(KEY) ?? "{}");
        }
        catch {
            this.#known = {};
        }
    }
    /** What the page knows of a session's origin and title. */
    known(id) {
        return this.#known[id] ?? {};
    }
    head(id) {
        return this.#heads.find((h) => h.id === id);
    }
    /** Every known fork of `id` (children), oldest first. */
    forksOf(id) {
        return this.#heads.filter((h) => this.#parent(h) === id).sort((a, b) => a.createdAt - b.createdAt);
    }
    #parent(h) {
        return h.parentId ?? this.#known[h.id]?.parentId ?? this.#forkedFrom(h)?.sessionId;
    }
    /**
     * A head's own word on where it was forked from (its options' `forkedFrom`), when the session
     * it names is in the list as such (ids are shown per owner: otherwise the session's view says).
     */
    #forkedFrom(h) {
        const from = h.options?.forkedFrom;
        if (typeof from?.sessionId !== "string" || typeof from.atMessage !== "number")
            return undefined;
        if (!this.#heads.some((other) => other.id === from.sessionId))
            return undefined;
        return { sessionId: from.sessionId, atMessage: from.atMessage };
    }
    forkedAt(id) {
        const head = this.head(id);
        return head?.forkedAt ?? this.#known[id]?.forkedAt ?? (head ? this.#forkedFrom(head)?.atMessage : undefined);
    }
    parentOf(id) {
        const head = this.head(id);
        return head ? this.#parent(head) : this.#known[id]?.parentId;
    }
    /** Remembers what a session is (from its view, or from the page that started it). */
    learn(id, what) {
        const known = { ...this.#known[id] };
        if (what.title !== undefined)
            known.title = what.title;
        if (what.parentId !== undefined)
            known.parentId = what.parentId;
        if (what.forkedAt !== undefined)
            known.forkedAt = what.forkedAt;
        this.#known[id] = known;
        try {
            localStorage.setItem(KEY, JSON.stringify(this.#known));
        }
        catch {
            // full: titles are read again next time
        }
        this.draw();
    }
    /** The page's own run says where a session stands (none: the list's word again). */
    setLive(id, status) {
        if (status === undefined)
            this.#live.delete(id);
        else
            this.#live.set(id, status);
        this.draw();
    }
    /** Marks a session whose run waits for the person in this page. */
    setAttention(id, waiting) {
        if (waiting === this.#attention.has(id))
            return;
        if (waiting)
            this.#attention.add(id);
        else
            this.#attention.delete(id);
        this.draw();
    }
    /** Forgets the page's word on every session but `ids`. */
    keepLive(ids) {
        for (const id of [...this.#live.keys()])
            if (!ids.has(id))
                this.#live.delete(id);
        this.draw();
    }
    setCurrent(id) {
        this.#current = id;
        this.draw();
    }
    /** Reads the heads again (one refresh at a time; asked again meanwhile: once more after). */
    refresh() {
        if (this.#refreshing) {
            this.#again = true;
            return this.#refreshing;
        }
        this.#refreshing = (async () => {
            try {
                do {
                    this.#again = false;
                    this.#heads = (await this.#client().listSessions({ limit: 100 }));
                    this.draw();
                    this.onHeads?.(this.#heads);
                    void this.#titles();
                } while (this.#again);
            }
            finally {
                this.#refreshing = undefined;
            }
        })();
        return this.#refreshing;
    }
    async #titles() {
        const missing = this.#heads.filter((h) => this.#known[h.id]?.title === undefined && h.messageCount > 0 && !this.#fetching.has(h.id));
        const queue = [...missing];
        const worker = async () => {
            for (let head = queue.shift(); head; head = queue.shift()) {
                this.#fetching.add(head.id);
                try {
                    const view = (await this.#client().getSession(head.id));
                    const known = { title: titleOf(view) ?? "" };
                    if (view.parentId !== undefined)
                        known.parentId = view.parentId;
                    if (view.forkedAt !== undefined)
                        known.forkedAt = view.forkedAt;
                    this.learn(head.id, known);
                }
                catch {
                    // gone, or no key: shown by its id
                }
                finally {
                    this.#fetching.delete(head.id);
                }
            }
        };
        await Promise.all([worker(), worker()]);
    }
    draw() {
        const list = $("sessions");
        const ids = new Set(this.#heads.map((h) => h.id));
        const items = new Map();
        for (const head of this.#heads)
            items.set(head.id, this.#item(head));
        const roots = [];
        for (const head of this.#heads) {
            const item = items.get(head.id);
            const parent = this.#parent(head);
            const under = parent !== undefined && ids.has(parent) ? items.get(parent) : undefined;
            if (under) {
                let forks = under.querySelector(":scope > ul.forks");
                if (!forks) {
                    forks = el("ul", { class: "forks" });
                    under.append(forks);
                }
                forks.append(item);
            }
            else
                roots.push(item);
        }
        // Forks under their session oldest first (the order of the branch arrows).
        for (const forks of items.values()) {
            const ul = forks.querySelector(":scope > ul.forks");
            if (!ul)
                continue;
            const created = (li) => this.head(li.dataset.session ?? "")?.createdAt ?? 0;
            ul.replaceChildren(...[...ul.children].sort((a, b) => created(a) - created(b)));
        }
        list.replaceChildren(...roots);
    }
    #item(head) {
        const status = this.#live.get(head.id) ?? head.status;
        const known = this.#known[head.id];
        const li = el("li", { "data-session": head.id, "data-status": status, title: head.id });
        if (head.id === this.#current)
            li.classList.add("current");
        if (this.#attention.has(head.id))
            li.classList.add("needs-you");
        const entry = el("div", { class: "entry" });
        const title = known?.title || (head.messageCount === 0 ? "(empty)" : head.id.slice(0, 8));
        entry.append(el("span", { class: "title" }, shorten(title, 60)));
        const forkedAt = this.forkedAt(head.id);
        const meta = `${head.model} · ${head.messageCount} msgs · ${money(head.cost.total)}${forkedAt !== undefined ? ` · fork @${forkedAt}` : ""}`;
        const line = el("small");
        line.append(el("span", { class: "badge", "data-status": status }, this.#attention.has(head.id) ? "needs you" : (SHORT[status] ?? status)), ` ${meta}`);
        entry.append(line);
        entry.addEventListener("click", () => this.#select(head.id));
        li.append(entry);
        return li;
    }
}
