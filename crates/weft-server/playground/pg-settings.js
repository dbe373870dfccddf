// Settings of the next new session (provider and model from the server's `GET /api/agent/models`,
// system prompt, mode and its options, the turn limit, which page tools it gets and whether each
// asks for approval), kept in localStorage; and what the shown session was created with.
import { PAGE_TOOLS, specsFor } from "./pg-tools.js";
import { $, api, el, money } from "./pg-util.js";
const KEY = "weft.playground.settings";
/** A session's mode as its head's options keep it (`{"mode": {"type": "tot", "breadth": 3, …}}`). */
export function modeText(options, long = true) {
    const mode = options?.mode;
    if (mode === undefined || mode === null)
        return "react";
    if (typeof mode === "string")
        return mode;
    const { type, ...rest } = mode;
    const name = type ?? "react";
    const parts = Object.entries(rest).map(([k, v]) => `${k} ${String(v)}`);
    return long && parts.length > 0 ? `${name} (${parts.join(", ")})` : name;
}
export class SettingsPanel {
    #client;
    #providers = [];
    constructor(client) {
        this.#client = client;
        this.#drawTools();
        this.#restore();
        const form = $("settings");
        form.addEventListener("submit", (e) => e.preventDefault());
        form.addEventListener("input", () => this.#save());
        form.addEventListener("change", () => {
            this.#save();
            this.#showMode();
        });
        $("set-provider").addEventListener("change", () => {
            const provider = this.#providers.find((p) => p.name === $("set-provider").value);
            if (provider)
                $("set-model").value = provider.model;
            this.#models();
            this.#save();
        });
        $("set-model").addEventListener("input", () => this.#modelInfo());
        this.#showMode();
    }
    /** Reads the providers and models the server offers. */
    async load() {
        try {
            const { body } = await api(this.#client(), "/api/agent/models");
            this.#providers = body.providers;
        }
        catch {
            this.#providers = [];
        }
        const select = $("set-provider");
        const saved = this.#saved();
        select.replaceChildren(...this.#providers.map((p) => el("option", { value: p.name }, p.default ? `${p.name} (default)` : p.name)));
        const provider = this.#providers.find((p) => p.name === saved.provider) ?? this.#providers[0];
        if (provider)
            select.value = provider.name;
        const model = $("set-model");
        if (!model.value && provider)
            model.value = provider.model;
        this.#models();
    }
    #models() {
        const provider = this.#providers.find((p) => p.name === $("set-provider").value);
        const ids = new Set();
        if (provider) {
            ids.add(provider.model);
            for (const m of provider.models)
                ids.add(m.id);
        }
        $("set-models").replaceChildren(...[...ids].map((id) => el("option", { value: id })));
        this.#modelInfo();
    }
    #modelInfo() {
        const provider = this.#providers.find((p) => p.name === $("set-provider").value);
        const id = $("set-model").value.trim();
        const model = provider?.models.find((m) => m.id === id);
        const info = $("set-model-info");
        if (!model) {
            info.textContent = id ? "not in the server's model registry: its cost reads 0" : "";
            return;
        }
        const can = Object.entries(model.capabilities).filter(([, v]) => v).map(([k]) => k);
        const parts = [`${money(model.prices.input)} in / ${money(model.prices.output)} out per M tokens`];
        if (model.contextWindow)
            parts.push(`${model.contextWindow.toLocaleString("en")} tokens of context`);
        if (can.length)
            parts.push(can.join(", "));
        info.textContent = parts.join(" · ");
    }
    #drawTools() {
        const body = $("set-tools").querySelector("tbody");
        body.replaceChildren(...PAGE_TOOLS.map((tool) => {
            const row = el("tr", { "data-tool": tool.spec.name });
            const use = el("input", { type: "checkbox", "data-field": "enabled", "aria-label": `offer ${tool.spec.name}` });
            use.checked = true;
            const approval = el("input", { type: "checkbox", "data-field": "approval", "aria-label": `${tool.spec.name} asks for approval` });
            approval.checked = tool.approval;
            const name = el("td");
            name.append(el("code", {}, tool.spec.name), el("small", {}, tool.spec.description ?? ""));
            const a = el("td");
            a.append(use);
            const b = el("td");
            b.append(approval);
            row.append(a, name, b);
            return row;
        }));
    }
    #showMode() {
        const mode = $("set-mode").value;
        for (const fieldset of document.querySelectorAll("#settings fieldset[data-mode]"))
            fieldset.hidden = fieldset.dataset.mode !== mode;
    }
    #toolChoice() {
        return [...$("set-tools").querySelectorAll("tr[data-tool]")].map((row) => ({
            name: row.dataset.tool,
            enabled: row.querySelector('[data-field="enabled"]').checked,
            approval: row.querySelector('[data-field="approval"]').checked,
        }));
    }
    #modeInputs(mode) {
        return [...document.querySelectorAll(`#settings fieldset[data-mode="${mode}"] [data-opt]`)];
    }
    #saved() {
        try {
            return JSON.parse(localStorage.getItem(KEY) ?? "{}");
        }
        catch {
            return {};
        }
    }
    #save() {
        const mode = $("set-mode").value;
        const modeOptions = {};
        for (const input of this.#modeInputs(mode))
            modeOptions[input.dataset.opt] = input.type === "checkbox" ? input.checked : input.value;
        const saved = {
            provider: $("set-provider").value,
            model: $("set-model").value,
            system: $("set-system").value,
            mode,
            modeOptions,
            maxTurns: $("set-max-turns").value,
            tools: this.#toolChoice(),
        };
        localStorage.setItem(KEY, JSON.stringify(saved));
    }
    #restore() {
        const saved = this.#saved();
        if (saved.model)
            $("set-model").value = saved.model;
        if (saved.system)
            $("set-system").value = saved.system;
        if (saved.mode)
            $("set-mode").value = saved.mode;
        if (saved.maxTurns)
            $("set-max-turns").value = saved.maxTurns;
        for (const input of this.#modeInputs(saved.mode ?? "")) {
            const value = saved.modeOptions?.[input.dataset.opt];
            if (typeof value === "boolean")
                input.checked = value;
            else if (typeof value === "string")
                input.value = value;
        }
        for (const choice of saved.tools ?? []) {
            const row = $("set-tools").querySelector(`tr[data-tool="${CSS.escape(choice.name)}"]`);
            if (!row)
                continue;
            row.querySelector('[data-field="enabled"]').checked = choice.enabled;
            row.querySelector('[data-field="approval"]').checked = choice.approval;
        }
    }
    /** The options and tools of a new session, as the form says. */
    read() {
        const options = {};
        const provider = $("set-provider").value;
        if (provider)
            options.provider = provider;
        const model = $("set-model").value.trim();
        if (model)
            options.model = model;
        const system = $("set-system").value.trim();
        if (system)
            options.systemPrompt = system;
        const turns = Number($("set-max-turns").value);
        if ($("set-max-turns").value !== "" && Number.isInteger(turns) && turns > 0)
            options.maxTurns = turns;
        const mode = $("set-mode").value;
        if (mode !== "react") {
            options.mode = mode;
            const modeOptions = {};
            for (const input of this.#modeInputs(mode)) {
                const name = input.dataset.opt;
                if (input.type === "checkbox") {
                    if (input.checked)
                        modeOptions[name] = true;
                }
                else if (input.value.trim() !== "") {
                    const n = Number(input.value);
                    modeOptions[name] = input.type === "number" && Number.isFinite(n) ? n : input.value.trim();
                }
            }
            if (Object.keys(modeOptions).length > 0)
                options.modeOptions = modeOptions;
        }
        return { options, tools: specsFor(this.#toolChoice()) };
    }
    /** Says what the shown session runs with (none: a new session, the form applies). */
    showSession(view, extras, goTo) {
        const box = $("session-settings");
        $("settings-heading").textContent = view ? "Next new session" : "New session";
        if (!view) {
            box.replaceChildren();
            return;
        }
        const list = el("dl");
        const add = (term, value) => {
            const dd = el("dd");
            dd.append(value);
            list.append(el("dt", {}, term), dd);
        };
        add("provider / model", `${view.provider} / ${view.model}`);
        add("system prompt", view.systemPrompt ?? "none");
        const options = (extras.options ?? {});
        add("mode", modeText(extras.options));
        if (options.maxTurns !== undefined)
            add("max turns", String(options.maxTurns));
        add("tools", view.tools.length ? view.tools.map((t) => `${t.name}${t.requiresApproval ? " (approval)" : ""}`).join(", ") : "none");
        if (extras.parentId) {
            const link = el("a", { href: "#", class: "parent-link" }, `${extras.parentId.slice(0, 8)}…`);
            link.addEventListener("click", (e) => {
                e.preventDefault();
                goTo(extras.parentId);
            });
            const dd = el("span");
            dd.append(link, ` at message ${extras.forkedAt ?? "?"}`);
            add("forked from", dd);
        }
        const heading = el("h3", {}, "This session");
        box.replaceChildren(heading, list);
        box.dataset.model = view.model;
        box.dataset.provider = view.provider;
    }
}
