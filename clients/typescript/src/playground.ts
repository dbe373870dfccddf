// The web playground `weft serve` ships at `/`: a page over the TypeScript client. Everything it
// shows is drawn from the native events (`apply`), live or replayed from the copy of the event
// log it keeps in localStorage, so a reload mid-run redraws what was there and attaches after
// the last event it had, with nothing shown twice and nothing lost.

import { WeftClient, type ClientTool, type ExecuteStream } from "./client.js";
import type {
  AgentEvent,
  ApprovalDecision,
  AssistantMessage,
  ExecuteComplete,
  Message,
  NativeEvent,
  ProgressEvent,
  SessionStatus,
  ToolCall,
} from "./types.js";

type ViewEvent = NativeEvent | AgentEvent;
/** One logged event: its seq (when it had one), when it arrived, the event. */
interface Logged {
  s?: number;
  t: number;
  e: ViewEvent;
}

const KEY_API = "weft.apiKey";
const KEY_CURRENT = "weft.playground.session";
const logKey = (id: string) => `weft.playground.log.${id}`;

const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;
function el<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string> = {}, text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  if (text !== undefined) node.textContent = text;
  return node;
}
const money = (usd: number) => `$${usd.toFixed(usd < 0.01 ? 5 : 4)}`;
const pretty = (value: unknown) => (typeof value === "string" ? value : JSON.stringify(value, null, 2));

// ---------------------------------------------------------------- browser-side (remote) tools

/** Answers waiting on the user's clicks, by tool call id. */
const waiting = new Map<string, (answer: string) => void>();

const browserTools: ClientTool[] = [
  {
    name: "ask_user",
    label: "Ask the user",
    description: "Asks the person using the page a question and returns their answer.",
    parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
    execute: (args: { question?: string }, call) =>
      new Promise<string>((resolve) => {
        const card = toolCard(call.id, call.name);
        card.dataset.state = "asking";
        setState(card, "waiting for your answer");
        const form = el("form", { class: "ask" });
        const label = el("span", { class: "question" }, String(args.question ?? ""));
        const input = el("input", { class: "answer", "aria-label": "answer" });
        const button = el("button", { type: "submit" }, "Answer");
        form.append(label, input, button);
        card.append(form);
        input.focus();
        const done = (answer: string) => {
          waiting.delete(call.id);
          form.remove();
          card.dataset.state = "running";
          setState(card, "answered in this browser");
          resolve(answer);
        };
        waiting.set(call.id, done);
        form.addEventListener("submit", (e) => {
          e.preventDefault();
          done(input.value);
        });
      }),
  },
  {
    name: "read_page",
    label: "Read the page",
    description: "Reads the playground page's own state: the notes field, the theme and what the chat shows.",
    parameters: { type: "object", properties: {} },
    execute: (_args, call) => {
      const card = toolCard(call.id, call.name);
      setState(card, "read in this browser");
      return JSON.stringify({
        notes: $<HTMLTextAreaElement>("notes").value,
        theme: document.documentElement.dataset.theme ?? "light",
        messagesShown: document.querySelectorAll("#chat .msg").length,
        title: document.title,
      });
    },
  },
  {
    name: "set_theme",
    label: "Set the theme",
    description: "Switches the page between the light and the dark theme. Needs the user's approval.",
    parameters: { type: "object", properties: { theme: { type: "string", enum: ["light", "dark"] } }, required: ["theme"] },
    requiresApproval: true,
    execute: (args: { theme?: string }, call) => {
      const theme = args.theme === "dark" ? "dark" : "light";
      document.documentElement.dataset.theme = theme;
      setState(toolCard(call.id, call.name), "ran in this browser");
      return `The page's theme is now ${theme}.`;
    },
  },
];

// ---------------------------------------------------------------- the view, drawn from events

interface View {
  sessionId: string | undefined;
  log: Logged[];
  lastSeq: number | undefined;
  assistant: HTMLElement | undefined;
  blocks: Map<number, HTMLElement>;
  callsByIndex: Map<number, string>;
  turn: number;
  totals: { input: number; output: number; cost: number };
  modelStart: number | undefined;
  toolStart: Map<string, { name: string; t: number; wait: boolean }>;
  timeline: { label: string; kind: "model" | "tool" | "wait"; start: number; end: number }[];
  origin: number | undefined;
}

function freshView(sessionId?: string): View {
  return {
    sessionId,
    log: [],
    lastSeq: undefined,
    assistant: undefined,
    blocks: new Map(),
    callsByIndex: new Map(),
    turn: 0,
    totals: { input: 0, output: 0, cost: 0 },
    modelStart: undefined,
    toolStart: new Map(),
    timeline: [],
    origin: undefined,
  };
}

let view = freshView();
let client = new WeftClient({ apiKey: localStorage.getItem(KEY_API) ?? undefined });
let active: ExecuteStream | undefined;

function clearView(sessionId?: string): void {
  view = freshView(sessionId);
  $("chat").replaceChildren();
  $("turns").querySelector("tbody")!.replaceChildren();
  $("totals").textContent = "—";
  $("timeline").replaceChildren();
  $("tot").replaceChildren();
  $("got").replaceChildren();
  $("reasoning").hidden = true;
}

function scrollChat(): void {
  const chat = $("chat");
  chat.scrollTop = chat.scrollHeight;
}

function toolCard(id: string, name?: string): HTMLElement {
  let card = document.querySelector<HTMLElement>(`.tool[data-call="${CSS.escape(id)}"]`);
  if (card) return card;
  card = el("div", { class: "tool", "data-call": id, "data-state": "streaming" });
  const head = el("header");
  head.append(el("strong", { class: "name" }, name ?? "tool"), el("span", { class: "state" }, "arguments streaming"));
  card.append(head, el("pre", { class: "args" }), el("pre", { class: "output" }));
  (view.assistant ?? $("chat")).append(card);
  return card;
}

function setState(card: HTMLElement, text: string): void {
  card.querySelector(".state")!.textContent = text;
}

function setStatus(status: SessionStatus | "connecting" | "reconnecting"): void {
  const node = $("status");
  node.textContent = status.replaceAll("_", " ");
  node.dataset.status = status;
}

function contentText(message: Message): string {
  if (message.role === "assistant") return "";
  return message.content.map((b) => (b.type === "text" ? b.text : `[${b.type}]`)).join("");
}

/** Draws one event. `t` is when it arrived (kept in the log, so a redraw has the same timeline). */
function apply(event: ViewEvent, t: number): void {
  view.origin ??= t;
  switch (event.type) {
    case "session_start":
      view.sessionId = event.sessionId;
      setStatus("running");
      break;
    case "message_start":
      if (event.role === "assistant") {
        view.assistant = el("div", { class: "msg assistant" });
        view.blocks.clear();
        view.callsByIndex.clear();
        view.modelStart = t;
        $("chat").append(view.assistant);
      }
      break;
    case "thinking_start": {
      const details = el("details", { class: "thinking", open: "" });
      details.append(el("summary", {}, "thinking"), el("span", { class: "body" }));
      view.blocks.set(event.index, details);
      view.assistant?.append(details);
      break;
    }
    case "thinking_delta":
      view.blocks.get(event.index)?.querySelector(".body")?.append(event.delta);
      break;
    case "thinking_end":
      view.blocks.get(event.index)?.removeAttribute("open");
      break;
    case "text_start": {
      const span = el("span", { class: "text" });
      view.blocks.set(event.index, span);
      view.assistant?.append(span);
      break;
    }
    case "text_delta":
      view.blocks.get(event.index)?.append(event.delta);
      break;
    case "toolcall_start":
      view.callsByIndex.set(event.index, event.id);
      toolCard(event.id, event.name);
      break;
    case "toolcall_delta": {
      const id = view.callsByIndex.get(event.index);
      if (id) toolCard(id).querySelector(".args")!.append(event.delta);
      break;
    }
    case "toolcall_end": {
      const card = toolCard(event.toolCall.id, event.toolCall.name);
      card.querySelector(".args")!.textContent = pretty(event.toolCall.arguments);
      card.dataset.state = "called";
      setState(card, "called");
      break;
    }
    case "tool_execution_start": {
      const card = toolCard(event.toolCallId, event.toolName);
      card.dataset.state = "running";
      setState(card, "running on the server");
      view.toolStart.set(event.toolCallId, { name: event.toolName, t, wait: false });
      break;
    }
    case "tool_execution_delta":
      toolCard(event.toolCallId).querySelector(".output")!.append(event.delta);
      break;
    case "tool_execution_end": {
      const card = toolCard(event.toolCallId, event.toolName);
      card.querySelector(".output")!.textContent = event.output;
      card.dataset.state = event.isError ? "error" : "done";
      setState(card, event.isError ? "failed" : "done");
      break;
    }
    case "approval_required":
      for (const call of event.toolCalls) {
        const card = toolCard(call.id, call.name);
        card.dataset.state = "approval";
        setState(card, "waits for your approval");
        view.toolStart.set(call.id, { name: `${call.name} (approval)`, t, wait: true });
      }
      break;
    case "awaiting_tool_execution":
      for (const call of event.toolCalls) {
        const card = toolCard(call.id, call.name);
        card.dataset.state = "remote";
        setState(card, "runs in this browser");
        if (!view.toolStart.has(call.id)) view.toolStart.set(call.id, { name: `${call.name} (browser)`, t, wait: false });
      }
      break;
    case "message_end":
      endMessage(event.message, t);
      break;
    case "session_end":
      view.assistant = undefined;
      break;
    case "execute_complete":
      setStatus(event.status);
      break;
    case "error": {
      const box = el("div", { class: "msg error" }, `error: ${event.error}`);
      $("chat").append(box);
      break;
    }
    case "progress":
      reasoning(event);
      break;
    default:
      break;
  }
  scrollChat();
}

function endMessage(message: Message, t: number): void {
  if (message.role === "user") {
    $("chat").append(el("div", { class: "msg user" }, contentText(message)));
    return;
  }
  if (message.role === "toolResult") {
    const card = toolCard(message.toolCallId, message.toolName);
    const output = card.querySelector(".output")!;
    if (output.textContent === "") output.textContent = contentText(message);
    const denied = message.isError && card.dataset.state === "approval";
    card.dataset.state = denied ? "denied" : message.isError ? "error" : "done";
    setState(card, denied ? "denied" : message.isError ? "failed" : "done");
    const started = view.toolStart.get(message.toolCallId);
    if (started) {
      view.timeline.push({ label: started.name, kind: started.wait ? "wait" : "tool", start: started.t, end: t });
      view.toolStart.delete(message.toolCallId);
      drawTimeline();
    }
    return;
  }
  turnEnded(message, t);
}

function turnEnded(message: AssistantMessage, t: number): void {
  view.turn += 1;
  const cost = message.cost?.total ?? 0;
  view.totals.input += message.usage.input + message.usage.cacheRead + message.usage.cacheWrite;
  view.totals.output += message.usage.output;
  view.totals.cost += cost;
  const row = el("tr");
  for (const cell of [String(view.turn), String(message.usage.input + message.usage.cacheRead + message.usage.cacheWrite), String(message.usage.output), money(cost)]) {
    row.append(el("td", {}, cell));
  }
  $("turns").querySelector("tbody")!.append(row);
  $("totals").textContent = `session: ${view.totals.input} in · ${view.totals.output} out · ${money(view.totals.cost)} · ${message.model}`;
  if (message.stopReason === "error" || message.stopReason === "aborted") {
    view.assistant?.append(el("div", { class: "msg error" }, `${message.stopReason}${message.errorMessage ? `: ${message.errorMessage}` : ""}`));
  }
  if (view.modelStart !== undefined) {
    view.timeline.push({ label: `model call #${view.turn}`, kind: "model", start: view.modelStart, end: t });
    view.modelStart = undefined;
    drawTimeline();
  }
}

function drawTimeline(): void {
  const box = $("timeline");
  box.replaceChildren();
  if (view.timeline.length === 0) return;
  const start = Math.min(...view.timeline.map((s) => s.start));
  const end = Math.max(...view.timeline.map((s) => s.end), start + 1);
  for (const span of view.timeline) {
    const row = el("div", { class: `row span-${span.kind}` });
    const ms = Math.max(0, Math.round(span.end - span.start));
    row.append(el("span", { class: "label", title: span.label }, `${span.label} · ${ms} ms`));
    const track = el("div", { class: "track" });
    const bar = el("div", { class: "bar" });
    bar.style.left = `${((span.start - start) / (end - start)) * 100}%`;
    bar.style.width = `${((span.end - span.start) / (end - start)) * 100}%`;
    track.append(bar);
    row.append(track);
    box.append(row);
  }
}

function reasoning(event: ProgressEvent): void {
  $("reasoning").hidden = false;
  const tot = $("tot");
  const got = $("got");
  switch (event.kind) {
    case "tot_expand": {
      const list = el("ol", { class: "candidates" });
      for (const candidate of event.candidates) list.append(el("li", {}, candidate));
      tot.append(list);
      break;
    }
    case "tot_evaluate": {
      const lists = tot.querySelectorAll("ol.candidates");
      const list = lists[lists.length - 1];
      list?.querySelectorAll("li").forEach((li, i) => {
        li.append(` — ${event.scores[i]?.toFixed(2) ?? "?"}`);
        if (i === event.chosen) li.classList.add("chosen");
      });
      break;
    }
    case "tot_backtrack":
      tot.append(el("p", { class: "backtrack" }, `backtrack to depth ${event.to_depth}: ${event.reason}`));
      break;
    case "got_plan":
      got.append(el("p", {}, `plan: ${event.node_count} nodes, ${event.edge_count} edges`));
      for (const id of event.node_ids) got.append(el("span", { class: "node", "data-node": id, "data-state": "pending" }, id));
      break;
    case "got_node_start":
    case "got_node_complete":
    case "got_node_failed": {
      let node = got.querySelector<HTMLElement>(`.node[data-node="${CSS.escape(event.id)}"]`);
      if (!node) {
        node = el("span", { class: "node", "data-node": event.id }, event.id);
        got.append(node);
      }
      node.dataset.state = event.kind === "got_node_start" ? "running" : event.kind === "got_node_complete" ? "done" : "failed";
      node.title = event.kind === "got_node_complete" ? event.result_summary : event.kind === "got_node_failed" ? event.error : "";
      break;
    }
    case "got_expand":
      got.append(el("p", {}, `${event.node_id} expanded: +${event.nodes_added} nodes, +${event.edges_added} edges`));
      break;
    default:
      break;
  }
}

// ---------------------------------------------------------------- the log kept for reloads

let saveTimer: ReturnType<typeof setTimeout> | undefined;
function saveLog(): void {
  saveTimer = undefined;
  if (!view.sessionId) return;
  try {
    localStorage.setItem(KEY_CURRENT, view.sessionId);
    localStorage.setItem(logKey(view.sessionId), JSON.stringify({ lastSeq: view.lastSeq, log: view.log }));
  } catch {
    // storage full: a reload then shows the session as the server has it
  }
}

function record(event: NativeEvent, seq: number | undefined): void {
  const t = Date.now();
  const entry: Logged = { t, e: event };
  if (seq !== undefined) {
    entry.s = seq;
    view.lastSeq = seq;
  }
  view.log.push(entry);
  apply(event, t);
  saveTimer ??= setTimeout(saveLog, 100);
}

// ---------------------------------------------------------------- running

function showError(error: unknown): void {
  const node = $("error");
  node.hidden = false;
  node.textContent = error instanceof Error ? error.message : String(error);
}

/** Shows approve / deny buttons on the calls' cards; resolves once each is decided. */
function askApproval(calls: ToolCall[]): Promise<ApprovalDecision[]> {
  return Promise.all(
    calls.map(
      (call) =>
        new Promise<ApprovalDecision>((resolve) => {
          const card = toolCard(call.id, call.name);
          card.dataset.state = "approval";
          setState(card, "waits for your approval");
          card.querySelector(".ask")?.remove();
          const bar = el("div", { class: "ask" });
          const approve = el("button", { type: "button", class: "approve" }, "Approve");
          const deny = el("button", { type: "button", class: "deny" }, "Deny");
          bar.append(approve, deny);
          card.append(bar);
          const decide = (approved: boolean) => {
            bar.remove();
            setState(card, approved ? "approved" : "denied");
            const decision: ApprovalDecision = { toolCallId: call.id, approved };
            if (!approved) decision.reason = "The user denied this call in the playground.";
            resolve(decision);
          };
          approve.addEventListener("click", () => decide(true));
          deny.addEventListener("click", () => decide(false));
        }),
    ),
  );
}

async function consume(stream: ExecuteStream): Promise<void> {
  active = stream;
  $<HTMLButtonElement>("abort").disabled = false;
  $("error").hidden = true;
  try {
    for await (const event of stream) {
      if (stream.sessionId && !view.sessionId) view.sessionId = stream.sessionId;
      record(event, stream.lastEventId);
    }
  } catch (error) {
    showError(error);
  } finally {
    if (active === stream) {
      active = undefined;
      $<HTMLButtonElement>("abort").disabled = true;
    }
    if (saveTimer !== undefined) {
      clearTimeout(saveTimer);
      saveLog();
    }
    void refreshSessions();
  }
}

const runOptions = { tools: browserTools, onApproval: askApproval };

async function send(text: string): Promise<void> {
  if (active) return;
  const stream = view.sessionId
    ? client.execute(text, { ...runOptions, sessionId: view.sessionId })
    : client.execute(text, { ...runOptions, context: { messages: [] } });
  await consume(stream);
}

/** After a redraw: a run that was under way is attached after its last event; a suspended one goes on. */
async function resume(sessionId: string, lastSeq: number | undefined, lastComplete: ExecuteComplete | undefined): Promise<void> {
  const session = await client.getSession(sessionId);
  setStatus(session.status);
  const ended = lastComplete !== undefined;
  if (session.status === "running" || (!ended && lastSeq !== undefined && lastSeq < session.lastEventSeq)) {
    setStatus("reconnecting");
    const options = lastSeq === undefined ? runOptions : { ...runOptions, lastEventId: lastSeq };
    await consume(client.attach(sessionId, options));
    return;
  }
  if (session.status === "awaiting_approval" && session.pendingApprovals.length > 0) {
    const approvals = await askApproval(session.pendingApprovals);
    await consume(client.execute({ approvals }, { ...runOptions, sessionId }));
  } else if (session.status === "awaiting_tool_execution" && session.pendingToolCalls.length > 0) {
    const handlers = new Map(browserTools.map((t) => [t.name, t]));
    if (session.pendingToolCalls.every((c) => handlers.get(c.name)?.execute)) {
      const results = await Promise.all(
        session.pendingToolCalls.map(async (call) => {
          const out = await handlers.get(call.name)!.execute!(call.arguments, call, { sessionId, signal: new AbortController().signal });
          return { role: "toolResult" as const, toolCallId: call.id, toolName: call.name, content: typeof out === "string" ? out : out.output };
        }),
      );
      await consume(client.execute(results, { ...runOptions, sessionId }));
    }
  }
}

/** Draws a session: from the kept log when this browser has one, else from its messages. */
async function open(sessionId: string): Promise<void> {
  if (active) return;
  clearView(sessionId);
  localStorage.setItem(KEY_CURRENT, sessionId);
  highlightSession();
  const kept = localStorage.getItem(logKey(sessionId));
  let lastComplete: ExecuteComplete | undefined;
  if (kept) {
    const saved = JSON.parse(kept) as { lastSeq?: number; log: Logged[] };
    view.log = saved.log;
    view.lastSeq = saved.lastSeq;
    for (const entry of saved.log) {
      apply(entry.e, entry.t);
      if (entry.e.type === "execute_complete") lastComplete = entry.e;
      if (entry.e.type === "session_start") lastComplete = undefined;
    }
    await resume(sessionId, saved.lastSeq, lastComplete);
    return;
  }
  const session = await client.getSession(sessionId);
  const t = Date.now();
  for (const message of session.messages) {
    for (const event of eventsOf(message)) apply(event, t);
  }
  setStatus(session.status);
  view.lastSeq = session.lastEventSeq;
  await resume(sessionId, session.lastEventSeq, { type: "execute_complete", status: session.status, pendingToolCalls: [], pendingApprovals: [] });
}

/** The events that would have drawn a stored message. */
function eventsOf(message: Message): ViewEvent[] {
  if (message.role !== "assistant") return [{ type: "message_start", role: message.role }, { type: "message_end", message }];
  const events: ViewEvent[] = [{ type: "message_start", role: "assistant" }];
  message.content.forEach((block, index) => {
    if (block.type === "text") events.push({ type: "text_start", index }, { type: "text_delta", index, delta: block.text });
    else if (block.type === "thinking") {
      events.push({ type: "thinking_start", index }, { type: "thinking_delta", index, delta: block.thinking }, { type: "thinking_end", index, thinking: block.thinking });
    } else {
      const toolCall = { id: block.id, name: block.name, arguments: block.arguments };
      events.push({ type: "toolcall_start", index, id: block.id, name: block.name }, { type: "toolcall_end", index, toolCall });
    }
  });
  events.push({ type: "message_end", message });
  return events;
}

// ---------------------------------------------------------------- sessions

function highlightSession(): void {
  for (const li of document.querySelectorAll<HTMLElement>("#sessions li")) {
    li.classList.toggle("current", li.dataset.session === view.sessionId);
  }
}

async function refreshSessions(): Promise<void> {
  try {
    const sessions = await client.listSessions({ limit: 50 });
    const list = $("sessions");
    list.replaceChildren();
    for (const s of sessions) {
      const li = el("li", { "data-session": s.id, title: s.id });
      li.append(s.id.slice(0, 8), el("small", {}, `${s.status.replaceAll("_", " ")} · ${s.messageCount} msgs · ${money(s.cost.total)}`));
      li.addEventListener("click", () => void open(s.id).catch(showError));
      list.append(li);
    }
    highlightSession();
  } catch (error) {
    showError(error);
  }
}

// ---------------------------------------------------------------- wiring

function start(): void {
  const key = $<HTMLInputElement>("api-key");
  key.value = localStorage.getItem(KEY_API) ?? "";
  key.addEventListener("change", () => {
    if (key.value) localStorage.setItem(KEY_API, key.value);
    else localStorage.removeItem(KEY_API);
    client = new WeftClient({ apiKey: key.value || undefined });
    void refreshSessions();
  });
  $("refresh").addEventListener("click", () => void refreshSessions());
  $("new-session").addEventListener("click", () => {
    if (active) return;
    localStorage.removeItem(KEY_CURRENT);
    clearView();
    setStatus("idle");
    highlightSession();
  });
  const prompt = $<HTMLTextAreaElement>("prompt");
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    const text = prompt.value.trim();
    if (!text || active) return;
    prompt.value = "";
    void send(text).catch(showError);
  });
  prompt.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && !e.shiftKey) {
      e.preventDefault();
      $("composer").dispatchEvent(new Event("submit", { cancelable: true }));
    }
  });
  $("abort").addEventListener("click", () => void active?.abort().catch(showError));
  void refreshSessions();
  const current = localStorage.getItem(KEY_CURRENT);
  if (current) void open(current).catch(showError);
}

/** For tests and the curious: draw an event as if it had streamed (e.g. ToT/GoT progress). */
(globalThis as { weftPlayground?: unknown }).weftPlayground = { apply: (event: ViewEvent) => apply(event, Date.now()) };

start();
