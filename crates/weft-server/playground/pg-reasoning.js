// Tree-of-thoughts and graph-of-thoughts runs, drawn live as SVG from the canonical progress and
// state events (`tot_*`, `got_*`, `state_snapshot`) the trace hands on.
//
// Tree of thoughts: each expansion's candidates hang under the path they extend (the path the
// last state reported), with their scores; the node being acted on and the path to it are
// highlighted; a path that failed is marked dead with the reason its backtrack gave (the state
// and the backtrack event may come in either order: reasons are matched to deaths in order), and
// a dashed arrow goes from it to the candidate tried next. The answer's path is marked once the
// run completes. Graph of thoughts: the plan's nodes in layers by their dependencies, from the
// plan to the answer, each with its status (pending, running, done, failed) and result.
import { el, redrawer, shorten, svg } from "./pg-util.js";
const W = 180;
const H = 44;
const GX = 40;
const GY = 12;
const PAD = 12;
let markers = 0;
function arrowMarker(root, cls) {
    const id = `weft-arrow-${++markers}`;
    const defs = svg("defs");
    const marker = svg("marker", { id, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" });
    marker.append(svg("path", { d: "M 0 0 L 10 5 L 0 10 z", class: cls }));
    defs.append(marker);
    root.append(defs);
    return `url(#${id})`;
}
function box(x, y, cls, data, lines, title) {
    const g = svg("g", { class: cls, transform: `translate(${x},${y})` });
    for (const [k, v] of Object.entries(data))
        g.setAttribute(`data-${k}`, v);
    g.append(svg("title", {}, title), svg("rect", { width: W, height: H, rx: 8 }), svg("text", { x: 10, y: 18, class: "l1" }, shorten(lines[0], 24)), svg("text", { x: 10, y: 35, class: "l2" }, shorten(lines[1], 30)));
    return g;
}
/** A left-to-right edge. */
function curve(x1, y1, x2, y2) {
    const mx = (x1 + x2) / 2;
    return `M ${x1} ${y1} C ${mx} ${y1}, ${mx} ${y2}, ${x2} ${y2}`;
}
/** A top-to-bottom edge. */
function vcurve(x1, y1, x2, y2) {
    const my = (y1 + y2) / 2;
    return `M ${x1} ${y1} C ${x1} ${my}, ${x2} ${my}, ${x2} ${y2}`;
}
class TotRun {
    kind = "tot";
    root = { thought: "task", parent: undefined, depth: 0, children: [] };
    status;
    #path = [];
    #group = [];
    #active;
    /** In order; the k-th backtrack reports the k-th death (the state saying which candidate is
     * tried next and the backtrack event may come in either order). */
    backtracks = [];
    #deaths = [];
    #find(path) {
        let node = this.root;
        for (const thought of path) {
            const next = [...node.children].reverse().find((c) => c.thought === thought);
            if (!next)
                break;
            node = next;
        }
        return node;
    }
    #ancestors(node) {
        const set = new Set();
        for (let n = node; n; n = n.parent)
            set.add(n);
        return set;
    }
    #activate(thought) {
        const parentPath = this.#path.at(-1) === thought ? this.#path.slice(0, -1) : this.#path;
        const parent = this.#find(parentPath);
        const node = [...parent.children].reverse().find((c) => c.thought === thought);
        if (!node || node === this.#active)
            return;
        const old = this.#active;
        const keep = this.#ancestors(node);
        if (old && !keep.has(old)) {
            // The path to `old` failed: every node on it below the common ancestor is dead.
            for (let n = old; n && !keep.has(n); n = n.parent)
                n.dead = true;
            this.#deaths.push({ node: old, next: node });
        }
        this.#active = node;
    }
    /** The backtracks with the node each left and the one it went to, when known. */
    paired() {
        return this.backtracks.map((b, k) => {
            const death = this.#deaths[k];
            return death ? { ...b, from: death.node, to: death.next } : b;
        });
    }
    event(e) {
        if (e.type === "state_snapshot" || e.type === "state_update") {
            const state = (e.state ?? {});
            if (typeof state.task === "string")
                this.root.thought = state.task;
            if (Array.isArray(state.path))
                this.#path = state.path;
            if (state.phase?.phase === "act" && typeof state.phase.thought === "string")
                this.#activate(state.phase.thought);
            return;
        }
        if (e.type !== "progress")
            return;
        if (e.kind === "tot_expand") {
            const parent = this.#find(this.#path);
            this.#group = e.candidates.map((thought) => ({ thought, parent, depth: parent.depth + 1, children: [] }));
            parent.children.push(...this.#group);
        }
        else if (e.kind === "tot_evaluate") {
            this.#group.forEach((node, i) => {
                const score = e.scores[i];
                if (score !== undefined)
                    node.score = score;
                if (e.rule_based)
                    node.ruleBased = true;
                if (i === e.chosen)
                    node.chosen = true;
            });
        }
        else if (e.kind === "tot_backtrack") {
            this.backtracks.push({ reason: e.reason, toDepth: e.to_depth });
        }
    }
    statusOf(node) {
        if (node === this.root)
            return "root";
        if (node.dead)
            return "dead";
        const done = this.status === "completed";
        if (node === this.#active)
            return done ? "solution" : "active";
        if (this.#ancestors(this.#active).has(node))
            return done ? "solution" : "path";
        return "candidate";
    }
    draw() {
        const paired = this.paired();
        for (const b of paired)
            if (b.from)
                b.from.reason = b.reason;
        const place = new Map();
        let leaves = 0;
        let deepest = 0;
        const layout = (node) => {
            deepest = Math.max(deepest, node.depth);
            const x = PAD + node.depth * (W + GX);
            let y;
            if (node.children.length === 0)
                y = PAD + leaves++ * (H + GY);
            else {
                const ys = node.children.map(layout);
                y = (ys[0] + ys[ys.length - 1]) / 2;
            }
            place.set(node, { x, y });
            return y;
        };
        layout(this.root);
        const width = PAD * 2 + (deepest + 1) * (W + GX) - GX;
        const height = PAD * 2 + Math.max(1, leaves) * (H + GY) - GY;
        const root = svg("svg", { class: "tot", viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": "tree of thoughts" });
        const arrow = arrowMarker(root, "backtrack-head");
        const edges = svg("g", { class: "edges" });
        const nodes = svg("g", { class: "nodes" });
        for (const [node, at] of place) {
            const status = this.statusOf(node);
            if (node.parent) {
                const from = place.get(node.parent);
                edges.append(svg("path", { class: "edge", "data-status": status, d: curve(from.x + W, from.y + H / 2, at.x, at.y + H / 2) }));
            }
            const label = node === this.root ? "task" : [node.score !== undefined ? `score ${node.score.toFixed(2)}${node.ruleBased ? " (rule)" : ""}` : "not scored", { dead: "dead end", active: "acting on it", path: "on the path", solution: "answer's path", candidate: node.chosen ? "chosen" : "unexplored" }[status] ?? ""].join(" · ");
            const data = { status, depth: String(node.depth), thought: node.thought };
            if (node.score !== undefined)
                data.score = node.score.toFixed(2);
            if (node.chosen)
                data.chosen = "true";
            const title = node.reason ? `${node.thought}\n\nbacktracked: ${node.reason}` : node.thought;
            nodes.append(box(at.x, at.y, "tnode", data, [node.thought, label], title));
        }
        for (const b of paired) {
            if (!b.from || !b.to)
                continue;
            const from = place.get(b.from);
            const to = place.get(b.to);
            const path = svg("path", {
                class: "backtrack",
                d: `M ${from.x + 12} ${from.y + H} C ${from.x - 30} ${from.y + H + 30}, ${to.x - 30} ${to.y - 30}, ${to.x + 12} ${to.y}`,
                "marker-end": arrow,
                "data-to-depth": String(b.toDepth),
            });
            path.append(svg("title", {}, `backtrack to depth ${b.toDepth}: ${b.reason}`));
            edges.append(path);
        }
        root.append(edges, nodes);
        return root;
    }
}
const RANK = { pending: 0, running: 1, done: 2, failed: 2 };
class GotRun {
    kind = "got";
    nodes = new Map();
    plan = "running";
    answer = "pending";
    status;
    #node(id) {
        let node = this.nodes.get(id);
        if (!node) {
            node = { id, deps: [], status: "pending" };
            this.nodes.set(id, node);
        }
        return node;
    }
    #set(node, status) {
        if (RANK[status] >= RANK[node.status])
            node.status = status;
    }
    event(e) {
        if (e.type === "state_snapshot" || e.type === "state_update") {
            const state = (e.state ?? {});
            for (const n of state.nodes ?? []) {
                const node = this.#node(n.id);
                if (n.task !== undefined)
                    node.task = n.task;
                if (n.deps)
                    node.deps = n.deps;
                if (n.status === "pending" || n.status === "running" || n.status === "done" || n.status === "failed")
                    this.#set(node, n.status);
                if (n.result !== undefined)
                    node.result = n.result;
                if (n.error !== undefined)
                    node.error = n.error;
            }
            if (state.nodes && state.nodes.length > 0)
                this.plan = "done";
            if (state.phase?.phase === "synthesize")
                this.answer = "running";
            return;
        }
        if (e.type !== "progress")
            return;
        switch (e.kind) {
            case "got_plan":
                for (const id of e.node_ids)
                    this.#node(id);
                this.plan = "done";
                break;
            case "got_node_start":
                this.#set(this.#node(e.id), "running");
                break;
            case "got_node_complete": {
                const node = this.#node(e.id);
                this.#set(node, "done");
                node.result ??= e.result_summary;
                break;
            }
            case "got_node_failed": {
                const node = this.#node(e.id);
                this.#set(node, "failed");
                node.error = e.error;
                break;
            }
            case "got_expand":
                this.#node(e.node_id).expanded = e.nodes_added;
                break;
            default:
                break;
        }
    }
    ended(status) {
        this.status = status;
        if (this.plan === "running")
            this.plan = status === "completed" ? "done" : "failed";
        this.answer = status === "completed" ? "done" : this.answer === "pending" ? "pending" : "failed";
    }
    draw() {
        const layers = new Map();
        const layerOf = (id, seen) => {
            const known = layers.get(id);
            if (known !== undefined)
                return known;
            const node = this.nodes.get(id);
            let layer = 0;
            if (node && !seen.has(id)) {
                seen.add(id);
                for (const dep of node.deps)
                    if (this.nodes.has(dep))
                        layer = Math.max(layer, layerOf(dep, seen) + 1);
            }
            layers.set(id, layer);
            return layer;
        };
        for (const id of this.nodes.keys())
            layerOf(id, new Set());
        // Layers top to bottom: the plan, the nodes by dependency depth, the answer.
        const rows = [];
        for (const id of this.nodes.keys())
            (rows[layers.get(id) + 1] ??= []).push(id);
        rows[0] = ["__plan"];
        rows.push(["__answer"]);
        for (let i = 0; i < rows.length; i++)
            rows[i] ??= [];
        const across = Math.max(...rows.map((r) => r.length), 1);
        const VY = 30;
        const place = new Map();
        rows.forEach((row, r) => {
            const offset = ((across - row.length) * (W + GY)) / 2;
            row.forEach((id, c) => place.set(id, { x: PAD + offset + c * (W + GY), y: PAD + r * (H + VY) }));
        });
        const width = PAD * 2 + across * (W + GY) - GY;
        const height = PAD * 2 + rows.length * (H + VY) - VY;
        const root = svg("svg", { class: "got", viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": "graph of thoughts" });
        const arrow = arrowMarker(root, "edge-head");
        const edges = svg("g", { class: "edges" });
        const boxes = svg("g", { class: "nodes" });
        const link = (from, to, cls) => {
            const a = place.get(from);
            const b = place.get(to);
            edges.append(svg("path", { class: cls, "data-from": from, "data-to": to, d: vcurve(a.x + W / 2, a.y + H, b.x + W / 2, b.y - 2), "marker-end": arrow }));
        };
        const dependents = new Set();
        for (const node of this.nodes.values()) {
            const deps = node.deps.filter((d) => this.nodes.has(d));
            for (const dep of deps) {
                link(dep, node.id, "dep");
                dependents.add(dep);
            }
            if (deps.length === 0)
                link("__plan", node.id, "flow");
        }
        for (const id of this.nodes.keys())
            if (!dependents.has(id))
                link(id, "__answer", "flow");
        if (this.nodes.size === 0)
            link("__plan", "__answer", "flow");
        const plan = place.get("__plan");
        boxes.append(box(plan.x, plan.y, "gnode special", { node: "plan", status: this.plan }, ["plan", this.plan], "The model's plan: a graph of sub-tasks"));
        const answer = place.get("__answer");
        boxes.append(box(answer.x, answer.y, "gnode special", { node: "answer", status: this.answer }, ["answer", this.answer], "The answer, written from every node's result"));
        for (const node of this.nodes.values()) {
            const at = place.get(node.id);
            const detail = node.status === "failed" ? `failed: ${node.error ?? ""}` : node.status === "done" ? `done${node.expanded ? ` · expanded +${node.expanded}` : ""}` : node.status;
            const title = [node.task ?? node.id, node.deps.length ? `needs: ${node.deps.join(", ")}` : "", node.result ? `result: ${node.result}` : "", node.error ? `error: ${node.error}` : ""].filter(Boolean).join("\n");
            boxes.append(box(at.x, at.y, "gnode", { node: node.id, status: node.status, deps: node.deps.join(" ") }, [`${node.id}${node.task ? ` — ${node.task}` : ""}`, detail], title));
        }
        root.append(edges, boxes);
        return root;
    }
}
// ------------------------------------------------------------------ a session's reasoning runs
export class Reasoning {
    root = el("div", { class: "reasoning" });
    #runs = new Map();
    redraw = redrawer(() => this.#draw());
    /** Called when something is drawn for the first time (the tab may say so). */
    onActivity;
    constructor() {
        this.#draw();
    }
    get active() {
        return this.#runs.size > 0;
    }
    event(e, run) {
        let target = this.#runs.get(run);
        if (!target) {
            const kind = e.type === "progress" ? (e.kind.startsWith("tot_") ? "tot" : "got") : undefined;
            const state = (e.type === "state_snapshot" ? e.state : undefined);
            const guessed = kind ?? (state && Array.isArray(state.nodes) ? "got" : state && Array.isArray(state.frontier) ? "tot" : undefined);
            if (!guessed)
                return;
            target = guessed === "tot" ? new TotRun() : new GotRun();
            this.#runs.set(run, target);
            this.onActivity?.();
        }
        target.event(e);
        this.redraw();
    }
    runEnded(run, status) {
        const target = this.#runs.get(run);
        if (!target)
            return;
        if (target instanceof GotRun)
            target.ended(status);
        else
            target.status = status;
        this.redraw();
    }
    #draw() {
        if (this.#runs.size === 0) {
            this.root.replaceChildren(el("p", { class: "empty" }, "Runs in the tot or got mode are drawn here as they go."));
            return;
        }
        const figures = [...this.#runs.entries()].reverse().map(([n, run]) => {
            const figure = el("figure", { class: `mode-run ${run.kind}`, "data-run": String(n), "data-status": run.status ?? "running" });
            const caption = el("figcaption");
            caption.append(el("strong", {}, `Run ${n}`), ` · ${run.kind === "tot" ? "tree of thoughts" : "graph of thoughts"} · `, el("span", { class: "badge", "data-status": run.status ?? "running" }, (run.status ?? "running").replaceAll("_", " ")));
            const scroll = el("div", { class: "svg-scroll" });
            scroll.append(run.draw());
            figure.append(caption, scroll);
            if (run instanceof TotRun && run.backtracks.length > 0) {
                const list = el("ol", { class: "backtracks" });
                for (const b of run.backtracks)
                    list.append(el("li", {}, `↩ to depth ${b.toDepth}: ${b.reason}`));
                figure.append(list);
            }
            if (run instanceof GotRun) {
                const list = el("ol", { class: "got-list" });
                for (const node of run.nodes.values()) {
                    const item = el("li", { "data-node": node.id, "data-status": node.status });
                    item.append(el("strong", {}, node.id), ` ${node.status}`, node.result ? ` — ${shorten(node.result, 90)}` : node.error ? ` — ${shorten(node.error, 90)}` : "");
                    list.append(item);
                }
                figure.append(list);
            }
            return figure;
        });
        this.root.replaceChildren(...figures);
    }
}
