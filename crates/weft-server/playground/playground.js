// The web playground `weft serve` ships at `/`: a page over the TypeScript client.
//
// Each session the page has open is a `Session` with views of its own (conversation, step trace,
// tree/graph of thoughts, cost), so switching sessions swaps views and never stops anything: a
// session that streams, asks a question or waits for an approval goes on while another is shown.
// A session is drawn from the server only: its conversation by replaying its event log in the
// native format from the first event (and following the run under way), its trace and reasoning
// from the same log in the AceAI format (which carries the stored step timings). Nothing depends
// on the page's clock or on when events arrived, so a reload, a replay and a live run draw the
// same thing in any browser.
import { WeftClient, WeftError } from "./client.js";
import { ChatView } from "./pg-chat.js";
import { Inspector } from "./pg-inspector.js";
import { Reasoning } from "./pg-reasoning.js";
import { SessionList, titleOf } from "./pg-sessions.js";
import { SettingsPanel, modeText } from "./pg-settings.js";
import { handlersFor } from "./pg-tools.js";
import { Trace } from "./pg-trace.js";
import { $, api, el, followLog, shorten } from "./pg-util.js";
const KEY_API = "weft.apiKey";
const KEY_CURRENT = "weft.playground.session";
const KEY_TAB = "weft.playground.tab";
let client = new WeftClient({ apiKey: localStorage.getItem(KEY_API) ?? undefined });
const getClient = () => client;
class Session {
    id;
    chat;
    reasoning = new Reasoning();
    trace = new Trace(this.reasoning);
    view;
    extras = {};
    /** The page tools it has, with the page's handlers. */
    tools = [];
    status = "new";
    /** A run this page drives (it runs the page tools and asks for approvals). */
    stream;
    /** Whether its native event log is being read (a replay, or a run started elsewhere). */
    reading = false;
    /** Stops what this page does for the session (the driven stream, the questions it asks). */
    stop = new AbortController();
    /** Set by an abort: what fails afterwards is the abort's doing, not an error to show. */
    aborted = false;
    nativeSeq = 0;
    traceSeq = 0;
    traceFollow;
    traceAgain = false;
    loaded;
    /** The first message, for the list until it has the session. */
    title;
    constructor() {
        this.chat = new ChatView({
            fork: (at, prefill) => void fork(this, at, prefill).catch(showError),
            grew: () => {
                if (this === current && stickToBottom)
                    $("chat").scrollTop = $("chat").scrollHeight;
            },
            waitsChanged: () => {
                if (this.id)
                    list.setAttention(this.id, this.chat.waiting > 0);
                if (this === current)
                    refreshControls();
            },
        });
        this.reasoning.onActivity = () => {
            if (this === current)
                markTab("reasoning");
        };
    }
    get busy() {
        return this.stream !== undefined || this.reading || this.status === "loading";
    }
}
/** Whether the conversation follows what is added (the reader is at its end). */
let stickToBottom = true;
const sessions = new Map();
let current = new Session();
const settings = new SettingsPanel(getClient);
const inspector = new Inspector(getClient);
const list = new SessionList(getClient, (id) => void open(id).catch(showError));
// ---------------------------------------------------------------- showing a session
function showError(error) {
    const node = $("error");
    node.hidden = false;
    node.textContent = error instanceof Error ? error.message : String(error);
}
function clearError() {
    $("error").hidden = true;
}
function setStatus(s, status) {
    s.status = status;
    if (s.id && status !== "new" && status !== "loading")
        list.setLive(s.id, status);
    if (s === current)
        refreshControls();
}
function refreshControls() {
    const s = current;
    const node = $("status");
    const status = s.chat.waiting > 0 ? "waiting for you" : s.status === "new" ? "new session" : s.status.replaceAll("_", " ");
    node.textContent = status;
    node.dataset.status = s.status;
    const suspended = s.status === "awaiting_tool_execution" || s.status === "awaiting_approval";
    const idle = !s.busy && s.chat.waiting === 0 && s.status !== "running" && !suspended;
    $("send").disabled = !idle;
    $("prompt").disabled = !idle;
    $("abort").disabled = !s.id || !(s.status === "running" || suspended || s.chat.waiting > 0);
    const why = s.chat.waiting > 0 ? "The run waits for you: answer above, or abort" : suspended && !s.busy ? "The run waits for tool results or approvals from another client" : s.status === "loading" ? "Loading…" : "The run is under way";
    $("prompt").setAttribute("placeholder", idle ? "Message the agent (Enter sends, Shift+Enter: new line)" : why);
}
function markTab(name) {
    const tab = document.querySelector(`[data-tab="${name}"]`);
    if (tab && tab.getAttribute("aria-selected") !== "true")
        tab.classList.add("news");
}
function selectTab(name) {
    for (const tab of document.querySelectorAll("[data-tab]")) {
        const selected = tab.dataset.tab === name;
        tab.setAttribute("aria-selected", String(selected));
        if (selected)
            tab.classList.remove("news");
        $(`tab-${tab.dataset.tab}`).hidden = !selected;
    }
    localStorage.setItem(KEY_TAB, name);
}
function show(s) {
    current = s;
    clearError();
    $("chat").replaceChildren(s.chat.root);
    stickToBottom = true;
    $("trace").replaceChildren(s.trace.root);
    $("reasoning").replaceChildren(s.reasoning.root);
    $("cost").replaceChildren(s.chat.cost);
    $("chat").scrollTop = $("chat").scrollHeight;
    for (const other of sessions.values()) {
        if (other === s)
            continue;
        other.traceFollow?.abort();
        other.traceFollow = undefined;
    }
    if (s.id)
        localStorage.setItem(KEY_CURRENT, s.id);
    else
        localStorage.removeItem(KEY_CURRENT);
    list.setCurrent(s.id);
    inspector.show(s.id);
    settings.showSession(s.view, s.extras, (id) => void open(id).catch(showError));
    drawBar(s);
    drawBranches(s);
    startTrace(s);
    refreshControls();
}
/** The bar above the conversation: title, model, mode, where the session forked from, its forks. */
function drawBar(s) {
    const bar = $("session-bar");
    const signature = JSON.stringify([s.id, s.view?.model, s.extras, s.busy, s.status, list.known(s.id ?? "").title, s.id ? list.forksOf(s.id).map((f) => [f.id, list.forkedAt(f.id), list.known(f.id).title]) : []]);
    if (bar.dataset.signature === signature)
        return;
    bar.dataset.signature = signature;
    if (!s.id) {
        bar.replaceChildren(el("strong", {}, "New session"), el("span", { class: "hint" }, " · settings: the Settings tab"));
        return;
    }
    const title = list.known(s.id).title || s.title || s.id.slice(0, 8);
    const parts = [el("strong", { class: "title" }, shorten(title, 80))];
    if (s.view)
        parts.push(el("span", { class: "badge" }, `${s.view.provider}/${s.view.model}`));
    parts.push(el("span", { class: "badge", title: modeText(s.extras.options) }, modeText(s.extras.options, false)));
    const parent = s.extras.parentId ?? list.parentOf(s.id);
    if (parent) {
        const link = el("a", { href: "#", class: "parent-link" }, `↰ forked from ${shorten(list.known(parent).title || parent.slice(0, 8), 40)} at message ${s.extras.forkedAt ?? list.forkedAt(s.id) ?? "?"}`);
        link.addEventListener("click", (e) => {
            e.preventDefault();
            void open(parent).catch(showError);
        });
        parts.push(link);
    }
    const forks = list.forksOf(s.id);
    if (forks.length > 0) {
        const span = el("span", { class: "forks" }, `${forks.length} fork${forks.length === 1 ? "" : "s"}:`);
        for (const f of forks) {
            const link = el("a", { href: "#", "data-session": f.id }, ` ↳@${list.forkedAt(f.id) ?? "?"} ${shorten(list.known(f.id).title || f.id.slice(0, 8), 24)}`);
            link.addEventListener("click", (e) => {
                e.preventDefault();
                void open(f.id).catch(showError);
            });
            span.append(link);
        }
        parts.push(span);
    }
    const remove = el("button", { type: "button", class: "delete", title: "Delete this session with its messages and events" }, "Delete");
    remove.disabled = s.busy || s.status === "running";
    remove.addEventListener("click", () => void deleteSession(s).catch(showError));
    parts.push(remove);
    bar.replaceChildren(...parts);
}
async function deleteSession(s) {
    if (!s.id || !window.confirm("Delete this session, its messages and its events?"))
        return;
    s.stop.abort();
    s.traceFollow?.abort();
    await client.deleteSession(s.id);
    sessions.delete(s.id);
    if (current === s)
        show(new Session());
    await list.refresh();
}
/**
 * Branch navigation: at a message where sessions part (a fork and the session it came from, or
 * several forks at the same message), `‹ k/n ›` goes to the other branches.
 */
function drawBranches(s) {
    if (!s.id)
        return;
    const signature = JSON.stringify([s.chat.messages, s.extras.parentId ?? list.parentOf(s.id), s.extras.forkedAt ?? list.forkedAt(s.id), list.forksOf(s.extras.parentId ?? list.parentOf(s.id) ?? s.id).map((f) => [f.id, list.forkedAt(f.id)]), list.forksOf(s.id).map((f) => [f.id, list.forkedAt(f.id)])]);
    if (s.chat.root.dataset.branches === signature)
        return;
    s.chat.root.dataset.branches = signature;
    for (const nav of s.chat.root.querySelectorAll(".branch-nav"))
        nav.remove();
    const at = new Set();
    const ownAt = s.extras.forkedAt ?? list.forkedAt(s.id);
    const parent = s.extras.parentId ?? list.parentOf(s.id);
    if (parent !== undefined && ownAt !== undefined)
        at.add(ownAt);
    for (const f of list.forksOf(s.id)) {
        const n = list.forkedAt(f.id);
        if (n !== undefined)
            at.add(n);
    }
    for (const index of at) {
        const base = parent !== undefined && ownAt === index ? parent : s.id;
        const members = [base, ...list.forksOf(base).filter((f) => list.forkedAt(f.id) === index).map((f) => f.id)];
        if (members.length < 2)
            continue;
        const position = members.indexOf(s.id);
        const bubble = s.chat.bubble(index) ?? s.chat.bubble(index - 1);
        if (!bubble || position < 0)
            continue;
        const nav = el("span", { class: "branch-nav", "data-at": String(index) });
        const prev = el("button", { type: "button", class: "prev", "aria-label": "previous branch" }, "‹");
        const next = el("button", { type: "button", class: "next", "aria-label": "next branch" }, "›");
        prev.disabled = position === 0;
        next.disabled = position === members.length - 1;
        prev.addEventListener("click", () => void open(members[position - 1]).catch(showError));
        next.addEventListener("click", () => void open(members[position + 1]).catch(showError));
        nav.append(prev, el("span", { class: "position" }, `${position + 1}/${members.length}`), next);
        bubble.append(nav);
    }
}
// ---------------------------------------------------------------- following the event logs
/** Follows the session's step trace (only for the shown session: one connection at a time). */
function startTrace(s) {
    if (!s.id || s !== current)
        return;
    if (s.traceFollow) {
        s.traceAgain = true;
        return;
    }
    const controller = new AbortController();
    s.traceFollow = controller;
    s.traceAgain = false;
    const read = (frame) => {
        if (controller.signal.aborted)
            return;
        s.trace.frame(JSON.parse(frame.data));
        if (frame.id !== undefined)
            s.traceSeq = Number(frame.id);
    };
    void followLog(client, s.id, "aceai", s.traceSeq, read, controller.signal)
        .then((last) => {
        if (!controller.signal.aborted)
            s.traceSeq = Math.max(s.traceSeq, last);
    })
        .catch(() => { })
        .finally(() => {
        if (s.traceFollow !== controller)
            return;
        s.traceFollow = undefined;
        if (s.traceAgain)
            startTrace(s);
    });
}
/** What the page does with each native event of a session, live or replayed. */
function onEvent(s, event) {
    s.chat.apply(event);
    if (event.type === "session_start") {
        setStatus(s, "running");
        startTrace(s);
        if (s.id)
            inspector.more(s.id);
    }
    else if (event.type === "execute_complete") {
        setStatus(s, event.status);
        void list.refresh().catch(() => { });
    }
    else if (event.type === "message_end" && event.message.role === "user" && s.id && !list.known(s.id).title) {
        list.learn(s.id, { title: titleOf({ messages: [event.message] }) ?? "" });
        if (s === current)
            drawBar(s);
    }
}
/** Reads the session's native log after what the page has, to the end of the run under way. */
async function followNative(s) {
    s.reading = true;
    let any = false;
    if (s === current)
        refreshControls();
    try {
        const last = await followLog(client, s.id, "native", s.nativeSeq, (frame) => {
            any = true;
            onEvent(s, JSON.parse(frame.data));
            if (frame.id !== undefined)
                s.nativeSeq = Number(frame.id);
        }, s.stop.signal);
        s.nativeSeq = Math.max(s.nativeSeq, last);
    }
    finally {
        s.reading = false;
        if (s === current)
            refreshControls();
    }
    return any;
}
function runOptions(s) {
    return { sessionId: s.id, tools: s.tools, onApproval: (calls) => s.chat.approve(calls), signal: s.stop.signal };
}
/** Reads a run the page drives; the client runs the page tools and asks for approvals. */
async function drive(s, stream) {
    s.stream = stream;
    if (s === current)
        refreshControls();
    try {
        for await (const event of stream) {
            if (!s.id && stream.sessionId)
                adopt(s, stream.sessionId);
            if (stream.lastEventId !== undefined)
                s.nativeSeq = stream.lastEventId;
            onEvent(s, event);
        }
    }
    catch (error) {
        if (!s.aborted) {
            showError(error);
            if (s.id)
                void client.getSession(s.id).then((view) => setStatus(s, view.status)).catch(() => { });
        }
    }
    finally {
        s.stream = undefined;
        if (s === current)
            refreshControls();
        void list.refresh().catch(() => { });
    }
}
/** A new session got its id from the server. */
function adopt(s, id) {
    s.id = id;
    sessions.set(id, s);
    s.loaded = Promise.resolve();
    if (s.title !== undefined)
        list.learn(id, { title: s.title });
    if (s === current) {
        localStorage.setItem(KEY_CURRENT, id);
        list.setCurrent(id);
        inspector.show(id);
        drawBar(s);
    }
    void list.refresh().catch(() => { });
    void client
        .getSession(id)
        .then((view) => {
        s.view = view;
        if (s === current) {
            settings.showSession(view, s.extras, (other) => void open(other).catch(showError));
            drawBar(s);
        }
    })
        .catch(() => { });
}
/** After its log was read to the end: a run under way elsewhere is followed; one that waits for the page goes on. */
async function settle(s) {
    for (let round = 0; round < 20; round++) {
        const view = await client.getSession(s.id);
        setView(s, view);
        setStatus(s, view.status);
        // Messages no event carried (a run aborted while it waited leaves an error result for each
        // call it waited for, and no events): drawn from the session.
        if (view.status !== "running" && view.messages.length > s.chat.messages)
            s.chat.drawMessages(view.messages.slice(s.chat.messages));
        if (view.status === "aborted" && s.chat.status !== "aborted")
            s.chat.runEnded("aborted");
        if (view.status === "running") {
            if (!(await followNative(s)))
                await new Promise((resolve) => setTimeout(resolve, 250));
            continue;
        }
        if (view.status === "awaiting_approval" && view.pendingApprovals.length > 0) {
            const approvals = await s.chat.approve(view.pendingApprovals);
            await drive(s, client.execute({ approvals }, runOptions(s)));
            return;
        }
        if (view.status === "awaiting_tool_execution") {
            const approvalIds = new Set(view.pendingApprovals.map((c) => c.id));
            const calls = view.pendingToolCalls.filter((c) => !approvalIds.has(c.id));
            const handlers = new Map(s.tools.map((t) => [t.name, t.execute]));
            if (calls.length === 0 || !calls.every((c) => handlers.has(c.name)))
                return;
            const signal = s.stop.signal;
            const results = await Promise.all(calls.map(async (call) => {
                const base = { role: "toolResult", toolCallId: call.id, toolName: call.name };
                try {
                    const out = await handlers.get(call.name)(call.arguments, call, { sessionId: s.id, signal });
                    return typeof out === "string" ? { ...base, content: out } : { ...base, content: out.output, isError: out.isError ?? false };
                }
                catch (error) {
                    return { ...base, content: error instanceof Error ? error.message : String(error), isError: true };
                }
            }));
            if (signal.aborted)
                return;
            await drive(s, client.execute(results, runOptions(s)));
        }
        return;
    }
}
function setView(s, view) {
    s.view = view;
    const extra = view;
    if (extra.parentId !== undefined)
        s.extras.parentId = extra.parentId;
    if (extra.forkedAt !== undefined)
        s.extras.forkedAt = extra.forkedAt;
    const head = list.head(view.id);
    if (head?.options !== undefined)
        s.extras.options = head.options;
    s.tools = handlersFor(view.tools, s.chat);
    const known = {};
    const title = titleOf(view);
    if (title !== undefined && !list.known(view.id).title)
        known.title = title;
    if (extra.parentId !== undefined)
        known.parentId = extra.parentId;
    if (extra.forkedAt !== undefined)
        known.forkedAt = extra.forkedAt;
    if (Object.keys(known).length > 0)
        list.learn(view.id, known);
    if (s === current) {
        settings.showSession(view, s.extras, (id) => void open(id).catch(showError));
        drawBar(s);
    }
}
/** Draws a session the page has not drawn yet: its log from the start, then what it waits for. */
async function load(s) {
    setStatus(s, "loading");
    const view = await client.getSession(s.id);
    setView(s, view);
    // A fork starts with its parent's messages, which its own log does not repeat.
    if (s.extras.parentId !== undefined && s.extras.forkedAt !== undefined)
        s.chat.drawMessages(view.messages.slice(0, s.extras.forkedAt));
    setStatus(s, view.status);
    // A fork that has not run yet has no log to read.
    if (view.lastEventSeq > 0 || view.status === "running")
        await followNative(s);
    if (s === current)
        drawBranches(s);
    await settle(s);
}
async function open(id) {
    let s = sessions.get(id);
    if (!s) {
        s = new Session();
        s.id = id;
        sessions.set(id, s);
    }
    show(s);
    if (!s.loaded) {
        const session = s;
        s.loaded = load(s).catch((error) => {
            if (!session.aborted)
                showError(error);
            if (session.status === "loading")
                setStatus(session, "error");
        });
    }
    await s.loaded;
}
// ---------------------------------------------------------------- acting
async function send(text) {
    const s = current;
    if (s.busy)
        return;
    clearError();
    s.aborted = false;
    s.stop = new AbortController();
    if (!s.id) {
        const fresh = settings.read();
        s.tools = handlersFor(fresh.tools, s.chat);
        s.title = text;
        const options = fresh.options;
        s.extras.options = { ...(options.mode ? { mode: { type: options.mode, ...options.modeOptions } } : {}), ...(options.maxTurns ? { maxTurns: options.maxTurns } : {}) };
        setStatus(s, "running");
        await drive(s, client.execute(text, { context: { messages: [] }, options, tools: s.tools, onApproval: (calls) => s.chat.approve(calls), signal: s.stop.signal }));
        return;
    }
    setStatus(s, "running");
    await drive(s, client.execute(text, runOptions(s)));
}
async function abort() {
    const s = current;
    if (!s.id)
        return;
    const suspended = s.status !== "running" || s.chat.waiting > 0;
    s.aborted = true;
    try {
        await client.abort(s.id);
    }
    catch (error) {
        if (!(error instanceof WeftError && error.status === 409))
            throw error;
    }
    if (suspended) {
        // A run that waits has no events left to say it ended: the page says it.
        s.stop.abort();
        s.chat.cancelWaits("aborted");
        s.chat.runEnded("aborted");
        setStatus(s, "aborted");
    }
    void list.refresh().catch(() => { });
}
/** Forks `s` keeping its first `atMessage` messages (`POST /api/agent/session/{id}/fork`). */
async function fork(s, atMessage, prefill) {
    if (!s.id || s.busy)
        return;
    let view;
    try {
        ({ body: view } = await api(client, `/api/agent/session/${encodeURIComponent(s.id)}/fork`, { method: "POST", body: { atMessage } }));
    }
    catch (error) {
        if (error instanceof WeftError && (error.status === 404 || error.status === 405) && error.code !== "session_not_found") {
            throw new Error("This server cannot fork sessions (no POST /api/agent/session/{id}/fork).");
        }
        throw error;
    }
    const child = new Session();
    child.id = view.id;
    sessions.set(view.id, child);
    child.extras = { parentId: view.parentId ?? s.id, forkedAt: view.forkedAt ?? atMessage };
    if (s.extras.options !== undefined)
        child.extras.options = s.extras.options;
    list.learn(view.id, { title: titleOf(view) ?? prefill ?? "", parentId: child.extras.parentId, forkedAt: child.extras.forkedAt });
    setView(child, view);
    child.chat.drawMessages(view.messages);
    child.status = view.status;
    child.loaded = Promise.resolve();
    show(child);
    if (prefill !== undefined) {
        const prompt = $("prompt");
        prompt.value = prefill;
        prompt.focus();
    }
    await list.refresh();
    if (current === child) {
        drawBar(child);
        drawBranches(child);
    }
}
// ---------------------------------------------------------------- wiring
function newSession() {
    if (!current.id && current.chat.messages === 0) {
        show(current);
        return;
    }
    show(new Session());
    $("prompt").focus();
}
list.onHeads = (heads) => {
    for (const head of heads) {
        const s = sessions.get(head.id);
        if (s && head.options !== undefined && JSON.stringify(s.extras.options) !== JSON.stringify(head.options)) {
            s.extras.options = head.options;
            if (s === current && s.view)
                settings.showSession(s.view, s.extras, (id) => void open(id).catch(showError));
        }
        if (!s?.loaded || s.busy || s.chat.waiting > 0)
            continue;
        if (s.status !== head.status)
            setStatus(s, head.status);
        // A run started by someone else: follow it while the session is shown.
        if (head.status === "running" && s === current)
            void followNative(s).then(() => settle(s)).catch(() => { });
    }
    // The page's word on a status holds while it drives or reads the run; the list's after.
    list.keepLive(new Set([...sessions.values()].filter((s) => s.id && (s.busy || s.chat.waiting > 0)).map((s) => s.id)));
    if (current.id) {
        drawBar(current);
        drawBranches(current);
    }
};
function start() {
    const key = $("api-key");
    key.value = localStorage.getItem(KEY_API) ?? "";
    key.addEventListener("change", () => {
        if (key.value)
            localStorage.setItem(KEY_API, key.value);
        else
            localStorage.removeItem(KEY_API);
        client = new WeftClient({ apiKey: key.value || undefined });
        clearError();
        void list.refresh().catch(showError);
        void settings.load();
    });
    for (const tab of document.querySelectorAll("[data-tab]"))
        tab.addEventListener("click", () => selectTab(tab.dataset.tab));
    const wide = $("wide");
    const setWide = (on) => {
        document.body.classList.toggle("wide", on);
        wide.setAttribute("aria-pressed", String(on));
        localStorage.setItem("weft.playground.wide", on ? "1" : "");
    };
    setWide(localStorage.getItem("weft.playground.wide") === "1");
    wide.addEventListener("click", () => setWide(!document.body.classList.contains("wide")));
    selectTab(localStorage.getItem(KEY_TAB) ?? "settings");
    $("refresh").addEventListener("click", () => void list.refresh().catch(showError));
    $("new-session").addEventListener("click", newSession);
    const prompt = $("prompt");
    $("composer").addEventListener("submit", (e) => {
        e.preventDefault();
        const text = prompt.value.trim();
        if (!text || current.busy)
            return;
        prompt.value = "";
        void send(text).catch(showError);
    });
    prompt.addEventListener("keydown", (e) => {
        if (e.key === "Enter" && !e.shiftKey) {
            e.preventDefault();
            $("composer").dispatchEvent(new Event("submit", { cancelable: true }));
        }
    });
    $("abort").addEventListener("click", () => void abort().catch(showError));
    const chat = $("chat");
    chat.addEventListener("scroll", () => {
        stickToBottom = chat.scrollHeight - chat.scrollTop - chat.clientHeight < 60;
    });
    void settings.load();
    void inspector.loadFormats();
    void list.refresh().catch(showError);
    setInterval(() => void list.refresh().catch(() => { }), 3000);
    const saved = localStorage.getItem(KEY_CURRENT);
    if (saved)
        void open(saved).catch(showError);
    else
        show(current);
}
start();
