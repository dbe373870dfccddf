// The step trace of a session as a tree: runs, their model calls (grouped by graph node in a
// graph-of-thoughts run) and the tools each call led to, with the durations the server stored.
//
// It reads the session's event log in the AceAI format (`?protocol=aceai`): that format carries
// each finished step whole (`agent.step.completed`: the step's start `timestamp`, `latency_ms`,
// and every tool result with `started_at` and `latency_ms`, remote tools included), so every
// duration shown here is the server's, never the page's clock, and a replay draws exactly what
// the live run drew. Its `agent.custom` frames carry the canonical progress and state events of
// tree/graph-of-thought runs, which are handed on (see pg-reasoning.ts).
import { duration, el, money, redrawer, shorten } from "./pg-util.js";
const time = (iso) => (iso === undefined ? undefined : Date.parse(iso));
/** The node a step belongs to: `think`, `think_expand`, `plan_graph`, `synthesize`, `got:ID` … */
function nodeOf(step) {
    const node = step.annotations?.extra?.node;
    if (!node)
        return undefined;
    const name = node.replace(/-\d+$/, "");
    return name.startsWith("got-") ? `got:${name.slice(4)}` : name;
}
export class Trace {
    root = el("div", { class: "trace" });
    #sink;
    #runs = [];
    #steps = new Map();
    #collapsed = new Set();
    /** Whether the last run ended (the next frame starts a new one). */
    #between = true;
    #lastStep = -1;
    redraw = redrawer(() => this.#draw());
    constructor(sink) {
        this.#sink = sink;
        this.#draw();
    }
    #run() {
        if (this.#between || this.#runs.length === 0) {
            this.#runs.push({ n: this.#runs.length + 1, steps: [] });
            this.#between = false;
        }
        return this.#runs[this.#runs.length - 1];
    }
    #step(index) {
        const i = index >= 0 ? index : this.#lastStep;
        let step = this.#steps.get(i);
        if (!step) {
            step = { index: i, state: "running", tools: new Map() };
            this.#steps.set(i, step);
            this.#run().steps.push(i);
        }
        this.#lastStep = Math.max(this.#lastStep, i);
        return step;
    }
    #tool(step, call) {
        let tool = step.tools.get(call.id);
        if (!tool) {
            tool = { id: call.id, name: call.name, state: "running" };
            step.tools.set(call.id, tool);
        }
        return tool;
    }
    #result(step, result) {
        const tool = this.#tool(step, result.call);
        tool.state = result.error !== undefined ? "error" : "done";
        const start = time(result.started_at);
        if (start !== undefined)
            tool.start = start;
        if (result.latency_ms !== undefined)
            tool.ms = result.latency_ms;
        if (result.error !== undefined)
            tool.error = result.error;
    }
    #finish(row, step, failed) {
        row.state = failed !== undefined ? "error" : "done";
        const start = time(step.timestamp);
        if (start !== undefined)
            row.start = start;
        if (step.latency_ms !== undefined)
            row.ms = step.latency_ms;
        row.response = step.llm_response;
        const node = nodeOf(step);
        if (node)
            row.node = node;
        if (step.annotations?.extra?.scratch)
            row.scratch = true;
        if (failed !== undefined)
            row.error = failed;
        for (const result of step.tool_results ?? [])
            this.#result(row, result);
    }
    /** Takes one frame of the session's AceAI stream. */
    frame(f) {
        const run = this.#run();
        switch (f.event_type) {
            case "agent.llm.started":
                this.#step(f.step_index);
                break;
            case "agent.llm.completed":
                // The response before the step's tools ran. (In a graph of thoughts, whose nodes run at
                // once, the frame may name another running step: the step's own end, which always comes,
                // carries the response that stays.)
                if (f.step) {
                    const row = this.#step(f.step.step_index);
                    if (row.state === "running")
                        row.response = f.step.llm_response;
                }
                break;
            case "agent.step.completed":
            case "agent.step.failed":
                if (f.step)
                    this.#finish(this.#step(f.step.step_index), f.step, f.event_type === "agent.step.failed" ? (f.error ?? "failed") : undefined);
                break;
            case "agent.tool.started":
                if (f.tool_call)
                    this.#tool(this.#step(f.step_index), f.tool_call).state = "running";
                break;
            case "agent.tool.completed":
            case "agent.tool.failed":
                if (f.tool_result)
                    this.#result(this.#step(f.step_index), f.tool_result);
                break;
            case "agent.tool.approval_requested":
                if (f.tool_call)
                    this.#tool(this.#step(f.step_index), f.tool_call).state = "approval";
                break;
            case "agent.run.suspended":
                for (const call of f.annotations?.tool_calls ?? []) {
                    const tool = this.#tool(this.#step(f.step_index), call);
                    if (tool.state === "running")
                        tool.state = "waiting";
                }
                break;
            case "agent.custom":
                if (f.annotations?.event)
                    this.#sink.event(f.annotations.event, run.n);
                return;
            case "agent.run.completed":
                run.status = f.annotations?.status ?? "completed";
                if (f.annotations?.cost)
                    run.cost = f.annotations.cost.total;
                if (f.step)
                    this.#finish(this.#step(f.step.step_index), f.step, undefined);
                this.#between = true;
                this.#sink.runEnded(run.n, run.status);
                break;
            default:
                // Deltas: the whole blocks come with the step.
                return;
        }
        this.redraw();
    }
    // ------------------------------------------------------------ drawing
    #draw() {
        if (this.#runs.length === 0) {
            this.root.replaceChildren(el("p", { class: "empty" }, "No model call yet."));
            return;
        }
        const runs = this.#runs.map((run) => this.#drawRun(run));
        this.root.replaceChildren(...runs);
    }
    #drawRun(run) {
        const steps = run.steps.map((i) => this.#steps.get(i)).sort((a, b) => a.index - b.index);
        const spans = [];
        for (const s of steps) {
            if (s.start !== undefined)
                spans.push([s.start, s.start + (s.ms ?? 0)]);
            for (const t of s.tools.values())
                if (t.start !== undefined)
                    spans.push([t.start, t.start + (t.ms ?? 0)]);
        }
        const from = spans.length > 0 ? Math.min(...spans.map((s) => s[0])) : 0;
        const to = spans.length > 0 ? Math.max(...spans.map((s) => s[1])) : 0;
        const scale = { from, span: Math.max(1, to - from) };
        const details = el("details", { class: "run", "data-run": String(run.n), "data-status": run.status ?? "running" });
        if (!this.#collapsed.has(run.n))
            details.open = true;
        details.addEventListener("toggle", () => (details.open ? this.#collapsed.delete(run.n) : this.#collapsed.add(run.n)));
        const tools = steps.reduce((n, s) => n + s.tools.size, 0);
        const summary = el("summary");
        summary.append(el("strong", {}, `Run ${run.n}`), el("span", { class: "badge", "data-status": run.status ?? "running" }, (run.status ?? "running").replaceAll("_", " ")), ` ${steps.length} model call${steps.length === 1 ? "" : "s"} · ${tools} tool${tools === 1 ? "" : "s"}`);
        if (spans.length > 0)
            summary.append(el("span", { class: "run-ms", "data-ms": String(to - from) }, ` · ${duration(to - from)}`));
        if (run.cost !== undefined)
            summary.append(` · ${money(run.cost)}`);
        details.append(summary);
        const tree = el("ul", { class: "tree" });
        const groups = new Map();
        for (const step of steps) {
            const item = this.#drawStep(step, scale);
            if (step.node?.startsWith("got:")) {
                const id = step.node.slice(4);
                let group = groups.get(id);
                if (!group) {
                    const li = el("li", { class: "gnode", "data-node": id });
                    li.append(el("div", { class: "row group" }, `graph node ${id}`));
                    group = el("ul");
                    li.append(group);
                    tree.append(li);
                    groups.set(id, group);
                }
                group.append(item);
            }
            else
                tree.append(item);
        }
        details.append(tree);
        return details;
    }
    #bar(start, ms, scale) {
        const track = el("span", { class: "track" });
        if (start !== undefined) {
            const bar = el("span", { class: "bar" });
            bar.style.left = `${((start - scale.from) / scale.span) * 100}%`;
            bar.style.width = `${((ms ?? 0) / scale.span) * 100}%`;
            track.append(bar);
        }
        return track;
    }
    #drawStep(step, scale) {
        const li = el("li", { class: "step", "data-step": String(step.index), "data-state": step.state });
        if (step.ms !== undefined)
            li.dataset.ms = String(step.ms);
        const row = el("div", { class: "row" });
        const label = el("span", { class: "label", title: step.error ?? "" }, `model call #${step.index + 1}${step.state === "error" ? " ✗" : ""}`);
        const tag = step.node?.replace(/^got:.*/, "node") ?? "";
        if (tag)
            label.append(" ", el("em", { class: "tag" }, tag));
        if (step.scratch)
            label.append(" ", el("em", { class: "tag scratch" }, "scratch"));
        row.append(label, el("span", { class: "ms" }, step.ms !== undefined ? duration(step.ms) : step.state === "running" ? "running…" : ""), this.#bar(step.start, step.ms, scale));
        li.append(row);
        const response = step.response;
        if (response) {
            const text = response.content.map((b) => (b.type === "text" ? b.text : b.type === "toolCall" ? `→ ${b.name}` : "")).filter(Boolean).join(" ");
            const usage = response.usage;
            const meta = `${response.model} · ${usage.input + usage.cacheRead + usage.cacheWrite} in · ${usage.output} out · ${money(response.cost?.total ?? 0)} · ${response.stopReason}`;
            const info = el("div", { class: "meta", title: text }, meta);
            if (text)
                info.append(el("span", { class: "said" }, ` · ${shorten(text, 80)}`));
            if (step.error)
                info.append(el("span", { class: "err" }, ` · ${step.error}`));
            li.append(info);
        }
        if (step.tools.size > 0) {
            const list = el("ul");
            for (const tool of step.tools.values()) {
                const item = el("li", { class: "tool-row", "data-tool": tool.name, "data-call": tool.id, "data-state": tool.state });
                if (tool.ms !== undefined)
                    item.dataset.ms = String(tool.ms);
                const trow = el("div", { class: "row" });
                const state = tool.state === "waiting" ? "waits for the page" : tool.state === "approval" ? "waits for approval" : tool.state === "running" ? "running…" : "";
                trow.append(el("span", { class: "label", title: tool.error ?? tool.id }, `${tool.name}${tool.state === "error" ? " ✗" : ""}`), el("span", { class: "ms" }, tool.ms !== undefined ? duration(tool.ms) : state), this.#bar(tool.start, tool.ms, scale));
                item.append(trow);
                list.append(item);
            }
            li.append(list);
        }
        return li;
    }
}
