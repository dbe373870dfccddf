// One session's conversation, drawn from its native events (live, or replayed from the session's
// event log) into DOM of its own: switching sessions swaps whole views, and a view that is not
// shown goes on drawing its run, asking its questions and waiting for its approvals.
import { el, money, pretty, redrawer } from "./pg-util.js";
/** The events that would have drawn a stored message. */
export function eventsOf(message) {
    if (message.role !== "assistant")
        return [{ type: "message_start", role: message.role }, { type: "message_end", message }];
    const events = [{ type: "message_start", role: "assistant" }];
    message.content.forEach((block, index) => {
        if (block.type === "text")
            events.push({ type: "text_start", index }, { type: "text_delta", index, delta: block.text });
        else if (block.type === "thinking") {
            events.push({ type: "thinking_start", index }, { type: "thinking_delta", index, delta: block.thinking }, { type: "thinking_end", index, thinking: block.thinking });
        }
        else {
            const toolCall = { id: block.id, name: block.name, arguments: block.arguments };
            events.push({ type: "toolcall_start", index, id: block.id, name: block.name }, { type: "toolcall_end", index, toolCall });
        }
    });
    events.push({ type: "message_end", message });
    return events;
}
const textOf = (message) => message.role === "assistant" ? "" : message.content.map((b) => (b.type === "text" ? b.text : `[${b.type}]`)).join("");
/** A message's identity across a fork's copy and its replay. */
const keyOf = (m) => `${m.role}:${m.timestamp}:${m.role === "toolResult" ? m.toolCallId : ""}`;
export class ChatView {
    /** The conversation. */
    root = el("div", { class: "chat-log" });
    /** Usage and cost per turn and in all. */
    cost = el("div", { class: "cost" });
    /** How the last run ended (or `running`). */
    status;
    /** Messages drawn so far (the next message's index in the session). */
    messages = 0;
    #hooks;
    #grew;
    #assistant;
    #blocks = new Map();
    #callsByIndex = new Map();
    #drawn = new Set();
    /** Whether this run's end (aborted, failed) is already said. */
    #ended = false;
    #turn = 0;
    #totals = { input: 0, output: 0, cost: 0, model: "" };
    #turns = el("tbody");
    #total = el("div", { class: "totals" }, "—");
    /** Questions and approvals waiting for the person, with how to cancel each. */
    #waits = new Map();
    constructor(hooks) {
        this.#hooks = hooks;
        this.#grew = redrawer(() => hooks.grew());
        const table = el("table", { class: "turns" });
        const head = el("tr");
        for (const h of ["turn", "in", "out", "cost"])
            head.append(el("th", {}, h));
        table.append(el("thead"), this.#turns);
        table.tHead.append(head);
        this.cost.append(this.#total, table);
    }
    /** How many things wait for the person (answers, approvals). */
    get waiting() {
        return this.#waits.size;
    }
    // ------------------------------------------------------------ drawing
    /** Draws stored messages (a fork's copied beginning). */
    drawMessages(messages) {
        for (const message of messages)
            for (const event of eventsOf(message))
                this.apply(event);
    }
    apply(event) {
        switch (event.type) {
            case "session_start":
                this.status = "running";
                this.#ended = false;
                break;
            case "message_start":
                if (event.role === "assistant") {
                    this.#assistant = el("div", { class: "msg assistant" });
                    this.#blocks.clear();
                    this.#callsByIndex.clear();
                    this.root.append(this.#assistant);
                }
                break;
            case "thinking_start": {
                const details = el("details", { class: "thinking", open: "" });
                details.append(el("summary", {}, "thinking"), el("span", { class: "body" }));
                this.#blocks.set(event.index, details);
                this.#assistant?.append(details);
                break;
            }
            case "thinking_delta":
                this.#blocks.get(event.index)?.querySelector(".body")?.append(event.delta);
                break;
            case "thinking_end":
                this.#blocks.get(event.index)?.removeAttribute("open");
                break;
            case "text_start": {
                const span = el("span", { class: "text" });
                this.#blocks.set(event.index, span);
                this.#assistant?.append(span);
                break;
            }
            case "text_delta":
                this.#blocks.get(event.index)?.append(event.delta);
                break;
            case "toolcall_start":
                this.#callsByIndex.set(event.index, event.id);
                this.card(event.id, event.name);
                break;
            case "toolcall_delta": {
                const id = this.#callsByIndex.get(event.index);
                if (id)
                    this.card(id).querySelector(".args").append(event.delta);
                break;
            }
            case "toolcall_end": {
                const card = this.card(event.toolCall.id, event.toolCall.name);
                card.querySelector(".args").textContent = pretty(event.toolCall.arguments);
                this.#setCard(card, "called", "called");
                break;
            }
            case "tool_execution_start":
                this.#setCard(this.card(event.toolCallId, event.toolName), "running", "running on the server");
                break;
            case "tool_execution_delta":
                this.card(event.toolCallId).querySelector(".output").append(event.delta);
                break;
            case "tool_execution_end":
                this.card(event.toolCallId, event.toolName).querySelector(".output").textContent = event.output;
                break;
            case "approval_required":
                for (const call of event.toolCalls)
                    this.#setCard(this.card(call.id, call.name), "approval", "waits for approval");
                break;
            case "awaiting_tool_execution":
                for (const call of event.toolCalls) {
                    const card = this.card(call.id, call.name);
                    if (card.dataset.state === "called")
                        this.#setCard(card, "waiting", "waits for its result");
                }
                break;
            case "message_end":
                this.#endMessage(event.message);
                break;
            case "session_end":
                this.#assistant = undefined;
                break;
            case "execute_complete":
                this.status = event.status;
                if (event.status === "aborted" || event.status === "error")
                    this.runEnded(event.status);
                break;
            case "error":
                // A failed or aborted model call's message says it (message_end); a run's own failure
                // has no message and is said here.
                if (!event.message)
                    this.runEnded("error", event.error);
                break;
            default:
                break;
        }
        this.#grew();
    }
    /**
     * Says once per run that it was aborted or failed. A failed model call says so itself (in a
     * graph of thoughts the run may go on without it); the run's failure is then not said again.
     */
    runEnded(kind, detail, what = "Run") {
        if (this.#ended)
            return;
        this.#ended = true;
        const text = kind === "aborted" ? `${what} aborted` : `${what} failed${detail ? `: ${detail}` : ""}`;
        this.root.append(el("div", { class: `notice ${kind}`, "data-kind": kind, role: "status" }, text));
    }
    #endMessage(message) {
        const index = this.messages;
        const key = keyOf(message);
        if (this.#drawn.has(key) && message.role !== "assistant")
            return;
        this.#drawn.add(key);
        this.messages += 1;
        if (message.role === "user") {
            this.#ended = false;
            const bubble = el("div", { class: "msg user", "data-index": String(index) });
            const text = textOf(message);
            bubble.append(el("span", { class: "text" }, text));
            const edit = el("button", { type: "button", class: "fork-edit", title: "Edit: a new branch from before this message" }, "✎ edit");
            edit.addEventListener("click", () => this.#hooks.fork(index, text));
            bubble.append(el("div", { class: "msg-tools" }), edit);
            this.root.append(bubble);
            return;
        }
        if (message.role === "toolResult") {
            const card = this.card(message.toolCallId, message.toolName);
            const output = card.querySelector(".output");
            if (output.textContent === "")
                output.textContent = textOf(message);
            const denied = message.isError && (card.dataset.state === "approval" || card.dataset.state === "denying");
            if (denied)
                this.#setCard(card, "denied", "denied");
            else
                this.#setCard(card, message.isError ? "error" : "done", message.isError ? "failed" : "done");
            return;
        }
        this.#turnEnded(message, index);
    }
    #turnEnded(message, index) {
        const bubble = this.#assistant;
        if (bubble) {
            bubble.dataset.index = String(index);
            if (message.stopReason === "stop" || message.stopReason === "length") {
                const fork = el("button", { type: "button", class: "fork-here", title: "Branch: a new session from after this answer" }, "↳ fork");
                fork.addEventListener("click", () => this.#hooks.fork(index + 1));
                bubble.append(fork);
            }
        }
        if (message.stopReason === "aborted")
            this.runEnded("aborted");
        else if (message.stopReason === "error")
            this.runEnded("error", message.errorMessage, "Model call");
        this.#turn += 1;
        const input = message.usage.input + message.usage.cacheRead + message.usage.cacheWrite;
        const cost = message.cost?.total ?? 0;
        this.#totals.input += input;
        this.#totals.output += message.usage.output;
        this.#totals.cost += cost;
        this.#totals.model = message.model;
        const row = el("tr");
        for (const cell of [String(this.#turn), String(input), String(message.usage.output), money(cost)])
            row.append(el("td", {}, cell));
        this.#turns.append(row);
        this.#total.textContent = `session: ${this.#totals.input} in · ${this.#totals.output} out · ${money(this.#totals.cost)} · ${this.#totals.model}`;
    }
    /** The message bubble at `index`, if drawn. */
    bubble(index) {
        return this.root.querySelector(`.msg[data-index="${index}"]`);
    }
    /** The card of a tool call (made when first needed). */
    card(id, name) {
        let card = this.root.querySelector(`.tool[data-call="${CSS.escape(id)}"]`);
        if (card)
            return card;
        card = el("div", { class: "tool", "data-call": id, "data-state": "streaming" });
        const head = el("header");
        head.append(el("strong", { class: "name" }, name ?? "tool"), el("span", { class: "state" }, "arguments streaming"));
        card.append(head, el("pre", { class: "args" }), el("pre", { class: "output" }));
        (this.#assistant ?? this.root).append(card);
        return card;
    }
    #setCard(card, state, text) {
        card.dataset.state = state;
        card.querySelector(".state").textContent = text;
    }
    // ------------------------------------------------------------ what waits for the person
    #wait(id, cancel) {
        this.#waits.set(id, cancel);
        this.#hooks.waitsChanged();
    }
    #unwait(id) {
        if (this.#waits.delete(id))
            this.#hooks.waitsChanged();
    }
    /** Gives up everything that waits for the person (the run was aborted). */
    cancelWaits(reason) {
        for (const cancel of [...this.#waits.values()])
            cancel(reason);
    }
    ask(call, question, signal) {
        return new Promise((resolve, reject) => {
            const card = this.card(call.id, call.name);
            this.#setCard(card, "asking", "waiting for your answer");
            card.querySelector("form.ask")?.remove();
            const form = el("form", { class: "ask" });
            const input = el("input", { class: "answer", "aria-label": "answer" });
            form.append(el("span", { class: "question" }, question), input, el("button", { type: "submit" }, "Answer"));
            card.append(form);
            if (card.isConnected)
                input.focus();
            const settle = (ok, value) => {
                form.remove();
                this.#unwait(call.id);
                signal.removeEventListener("abort", onAbort);
                if (ok) {
                    this.#setCard(card, "running", "answered in this browser");
                    resolve(value);
                }
                else {
                    this.#setCard(card, "error", value);
                    reject(new Error(value));
                }
            };
            const onAbort = () => settle(false, "aborted");
            signal.addEventListener("abort", onAbort, { once: true });
            this.#wait(call.id, (reason) => settle(false, reason));
            form.addEventListener("submit", (e) => {
                e.preventDefault();
                settle(true, input.value);
            });
        });
    }
    note(call, text) {
        this.card(call.id, call.name).querySelector(".state").textContent = text;
    }
    messagesShown() {
        return this.root.querySelectorAll(".msg").length;
    }
    /** Shows approve / deny on the calls' cards; resolves once each is decided. */
    approve(calls) {
        return Promise.all(calls.map((call) => new Promise((resolve, reject) => {
            const card = this.card(call.id, call.name);
            this.#setCard(card, "approval", "waits for your approval");
            card.querySelector(".ask")?.remove();
            const bar = el("div", { class: "ask" });
            const approve = el("button", { type: "button", class: "approve" }, "Approve");
            const deny = el("button", { type: "button", class: "deny" }, "Deny");
            bar.append(approve, deny);
            card.append(bar);
            const decide = (approved) => {
                bar.remove();
                this.#unwait(call.id);
                this.#setCard(card, approved ? "approved" : "denying", approved ? "approved" : "denied");
                const decision = { toolCallId: call.id, approved };
                if (!approved)
                    decision.reason = "The user denied this call in the playground.";
                resolve(decision);
            };
            this.#wait(call.id, (reason) => {
                bar.remove();
                this.#unwait(call.id);
                this.#setCard(card, "error", reason);
                reject(new Error(reason));
            });
            approve.addEventListener("click", () => decide(true));
            deny.addEventListener("click", () => decide(false));
        })));
    }
}
