// The playground in a real headless Chromium (Debian's, driven by playwright-core), against a
// real `weft serve` with scripted (faux) runs. Screenshots of each state go to
// clients/typescript/test-artifacts/ (gitignored). The tests wait on what the page shows
// (selectors, or text it recorded), never for a while.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test, type TestContext } from "node:test";

import { chromium, type Browser, type BrowserContext, type Page } from "playwright-core";

import { WeftClient, readSse } from "../src/index.js";
import { startWeft, testDir, type Weft } from "./server.js";
import { skipOrFail } from "./skip.js";

const executable = process.env.CHROMIUM ?? ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));
const artifacts = join(testDir, "..", "test-artifacts");
mkdirSync(artifacts, { recursive: true });

if (!executable) skipOrFail("browser", "the playground's browser tests", "no Chromium (/usr/bin/chromium; set CHROMIUM=…)");

const STORY =
  "Once upon a time a quick brown fox jumped over a lazy dog. The dog did not mind: it was asleep, dreaming of bones and long walks. The fox, proud of itself, jumped back and forth a dozen times, until the farmer came out with a lantern and everyone went to bed. The end.";

let browser: Browser;

/**
 * Records every distinct text the assistant's bubbles show, as the page changes (a mutation
 * observer in the page, installed before its scripts run): `texts(p)` reads them.
 */
const RECORD_TEXTS = () => {
  const w = window as unknown as { __texts: string[] };
  w.__texts = [];
  const take = () => {
    const text = [...document.querySelectorAll("#chat .msg.assistant .text")].map((n) => n.textContent).join("|");
    if (text && w.__texts.at(-1) !== text) w.__texts.push(text);
  };
  document.addEventListener("DOMContentLoaded", () => {
    new MutationObserver(take).observe(document.body, { childList: true, subtree: true, characterData: true });
  });
};
const texts = (p: Page) => p.evaluate(() => (window as unknown as { __texts: string[] }).__texts);

/** The page's clock stopped: what it shows must not come from it. */
const FREEZE_CLOCK = () => {
  const now = Date.now();
  Date.now = () => now;
  performance.now = () => 0;
};

async function page(t: TestContext, weft: Weft, init: (() => void)[] = [], setup?: (context: BrowserContext) => Promise<void>): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  t.after(() => context.close());
  for (const script of init) await context.addInitScript(script);
  await setup?.(context);
  const p = await context.newPage();
  const errors: string[] = [];
  p.on("pageerror", (e) => errors.push(String(e)));
  t.after(() => assert.deepEqual(errors, [], "no uncaught error in the page"));
  await p.goto(`${weft.base}/`);
  return p;
}

async function send(p: Page, text: string): Promise<void> {
  await p.fill("#prompt", text);
  await p.click("#send");
}

const tab = (p: Page, name: string) => p.click(`[data-tab="${name}"]`);
const shot = (p: Page, name: string) => p.screenshot({ path: join(artifacts, `${name}.png`) });
const lastText = (p: Page) => p.evaluate(() => [...document.querySelectorAll("#chat .msg.assistant .text")].map((n) => n.textContent).join("|"));
const completed = (p: Page) => p.waitForSelector('#status[data-status="completed"]');

/** The frames of a session's whole log in `protocol`, as the server renders them (SSE data, in order), run after run. */
async function rendered(weft: Weft, sessionId: string, protocol: string): Promise<{ id?: string; data: string }[]> {
  const { lastEventSeq } = await new WeftClient({ baseUrl: weft.base }).getSession(sessionId);
  const frames: { id?: string; data: string }[] = [];
  for (let last = 0; last < lastEventSeq; ) {
    const response = await fetch(`${weft.base}/api/agent/session/${sessionId}/stream?protocol=${protocol}`, { headers: { "last-event-id": String(last) } });
    const before = last;
    for await (const frame of readSse(response.body!)) {
      if (frame.id !== undefined) last = Number(frame.id);
      if (frame.data !== "") frames.push(frame.id === undefined ? { data: frame.data } : { id: frame.id, data: frame.data });
    }
    assert.ok(last > before, "each stream reads a run");
  }
  return frames;
}

/** The stored steps of a session (its AceAI log's `agent.step.completed`). */
async function storedSteps(weft: Weft, sessionId: string) {
  type Step = { step_index: number; latency_ms: number; tool_results?: { call: { name: string }; latency_ms: number }[] };
  return (await rendered(weft, sessionId, "aceai"))
    .map((f) => JSON.parse(f.data) as { event_type: string; step?: Step })
    .filter((f) => f.event_type === "agent.step.completed")
    .map((f) => f.step!);
}

describe("the playground in Chromium", { skip: !executable }, () => {
  before(async () => {
    browser = await chromium.launch({ executablePath: executable!, headless: true, args: ["--no-sandbox"] });
  });
  after(() => browser?.close());

  test("weft serve embeds this build of the page (else: rebuild weft)", async (t) => {
    const weft = await startWeft("slow.json");
    t.after(() => weft.stop());
    const modules = readdirSync(join(testDir, "..", "dist")).filter((f) => f.endsWith(".js") && (f.startsWith("pg-") || ["playground.js", "client.js", "sse.js"].includes(f)));
    assert.ok(modules.length >= 11, modules.join(" "));
    for (const [served, file] of [...modules.map((m) => [m, `dist/${m}`]), ["style.css", "playground/style.css"]]) {
      const body = await (await fetch(`${weft.base}/playground/${served}`)).text();
      assert.equal(body, readFileSync(join(testDir, "..", file!), "utf8"), `${served} is ${file}`);
    }
    assert.equal(await (await fetch(`${weft.base}/`)).text(), readFileSync(join(testDir, "..", "playground", "index.html"), "utf8"));
  });

  test("text streams in progressively; thinking is dimmed and collapsible; cost per turn and session", async (t) => {
    const weft = await startWeft("slow.json");
    t.after(() => weft.stop());
    const p = await page(t, weft, [RECORD_TEXTS]);
    await send(p, "Tell me a story");
    await p.waitForFunction((n) => (document.querySelector("#chat .msg.assistant .text")?.textContent?.length ?? 0) > n, 40);
    await shot(p, "streaming-midway");
    await completed(p);
    const states = await texts(p);
    assert.equal(states.at(-1), STORY);
    const partial = states.filter((s) => s.length < STORY.length);
    assert.ok(partial.length >= 5, `${partial.length} intermediate states seen`);
    for (let i = 1; i < states.length; i++) assert.ok(states[i]!.startsWith(states[i - 1]!), "each state extends the last");
    const thinking = p.locator("details.thinking");
    assert.equal(await thinking.locator(".body").textContent(), "The user wants a story; a short one about a fox will do.");
    assert.equal(await thinking.evaluate((d) => (d as HTMLDetailsElement).open), false, "collapsed once done");
    assert.notEqual(await thinking.evaluate((d) => getComputedStyle(d).color), await p.evaluate(() => getComputedStyle(document.body).color), "dimmed");
    await thinking.locator("summary").click();
    assert.equal(await thinking.evaluate((d) => (d as HTMLDetailsElement).open), true, "opens on click");
    // Usage and cost: 25 in, 70 out at $2 / $8 per million.
    await tab(p, "cost");
    assert.deepEqual(await p.locator("#cost .turns tbody td").allTextContents(), ["1", "25", "70", "$0.00061"]);
    assert.match((await p.locator("#cost .totals").textContent()) ?? "", /25 in · 70 out · \$0\.00061/);
    await tab(p, "trace");
    await p.waitForSelector('#trace details.run[data-status="completed"] li.step[data-state="done"]');
    assert.equal(await p.locator("#trace li.step").count(), 1);
    await p.waitForSelector('#sessions li[data-status="completed"] .title:text("Tell me a story")');
    assert.equal(await p.locator("#sessions li").count(), 1, "the session list shows the new session");
    await shot(p, "streamed");
  });

  test("browser-side tools: the page asks its user, then reads its own state, and the agent goes on", async (t) => {
    const weft = await startWeft("page.json");
    t.after(() => weft.stop());
    const p = await page(t, weft);
    await p.fill("#notes", "The launch is on Friday.");
    await send(p, "Who am I?");
    const ask = p.locator('.tool[data-call="call_ask_1"] form.ask');
    await ask.waitFor();
    assert.equal(await ask.locator(".question").textContent(), "What is your name?");
    assert.equal(await p.locator('.tool[data-call="call_ask_1"] .args').textContent(), '{\n  "question": "What is your name?"\n}');
    await p.waitForSelector('#status[data-status="awaiting_tool_execution"]');
    await shot(p, "remote-tool-asks");
    await ask.locator("input").fill("Ada");
    await ask.locator("button").click();
    await p.waitForFunction(() => document.querySelector("#chat")?.textContent?.includes("Thanks, I have your name and your notes."));
    await completed(p);
    assert.equal(await p.locator('.tool[data-call="call_ask_1"] .output').textContent(), "Ada");
    const read = JSON.parse((await p.locator('.tool[data-call="call_read_1"] .output').textContent()) ?? "{}") as { notes?: string };
    assert.equal(read.notes, "The launch is on Friday.");
    // The server has the results the page sent, and the model went on after each.
    const client = new WeftClient({ baseUrl: weft.base });
    const [head] = await client.listSessions();
    const session = await client.getSession(head!.id);
    assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant", "toolResult", "assistant"]);
    const results = session.messages.flatMap((m) => (m.role === "toolResult" ? [m.content.map((c) => (c.type === "text" ? c.text : "")).join("")] : []));
    assert.equal(results[0], "Ada");
    assert.match(results[1] ?? "", /The launch is on Friday\./);
    await tab(p, "trace");
    // Three runs (the page's results resume the run twice), a model call each.
    await p.waitForSelector('#trace details.run[data-run="3"][data-status="completed"] li.step[data-state=done]');
    assert.equal(await p.locator("#trace li.step").count(), 3);
    assert.deepEqual(await p.locator("#trace .tool-row").evaluateAll((rows) => rows.map((r) => `${(r as HTMLElement).dataset.tool}:${(r as HTMLElement).dataset.state}`)), ["ask_user:done", "read_page:done"]);
    assert.equal(await p.locator("#cost .turns tbody tr").count(), 3);
    await shot(p, "remote-tools-done");
  });

  test("switching sessions at any time: two sessions wait for answers, each is answered in turn", async (t) => {
    const weft = await startWeft("page.json");
    t.after(() => weft.stop());
    const p = await page(t, weft);
    const ask = p.locator('.tool[data-call="call_ask_1"] form.ask');
    await send(p, "Who am I? (first)");
    await ask.waitFor();
    const first = await p.evaluate(() => localStorage.getItem("weft.playground.session"));
    assert.ok(first);
    // A second session while the first one waits.
    await p.click("#new-session");
    assert.equal(await p.locator("#chat .msg").count(), 0, "a new session starts empty");
    await send(p, "Who am I? (second)");
    await ask.waitFor();
    const second = await p.evaluate(() => localStorage.getItem("weft.playground.session"));
    assert.ok(second && second !== first);
    await p.waitForSelector(`#sessions li[data-session="${first}"][data-status="awaiting_tool_execution"]`);
    await p.waitForSelector(`#sessions li[data-session="${second}"][data-status="awaiting_tool_execution"]`);
    await shot(p, "switch-two-waiting");
    // Back to the first: its question is still there; answer it while the second one waits.
    await p.click(`#sessions li[data-session="${first}"] .entry`);
    assert.equal(await p.locator("#chat .msg.user .text").textContent(), "Who am I? (first)");
    await ask.locator("input").fill("Ada");
    await ask.locator("button").click();
    await completed(p);
    await p.waitForSelector(`#sessions li[data-session="${first}"][data-status="completed"]`);
    assert.equal(await p.getAttribute(`#sessions li[data-session="${second}"]`, "data-status"), "awaiting_tool_execution");
    // Then the second.
    await p.click(`#sessions li[data-session="${second}"] .entry`);
    await ask.locator("input").fill("Bob");
    await ask.locator("button").click();
    await completed(p);
    await p.waitForSelector(`#sessions li[data-session="${second}"][data-status="completed"]`);
    await shot(p, "switch-both-answered");
    const client = new WeftClient({ baseUrl: weft.base });
    for (const [id, name] of [[first, "Ada"], [second, "Bob"]] as const) {
      const session = await client.getSession(id);
      assert.equal(session.status, "completed");
      const answer = session.messages.find((m) => m.role === "toolResult");
      assert.ok(answer?.role === "toolResult" && answer.content[0]?.type === "text" && answer.content[0].text === name, `${id} got ${name}`);
    }
    // Titles are the first messages.
    assert.deepEqual((await p.locator("#sessions .title").allTextContents()).sort(), ["Who am I? (first)", "Who am I? (second)"]);
  });

  test("approve runs the tool; deny does not, and the model gets the denial", async (t) => {
    const weft = await startWeft("approval.json");
    t.after(() => weft.stop());
    const client = new WeftClient({ baseUrl: weft.base });

    const p = await page(t, weft);
    await send(p, "Dark mode please");
    const approve = p.locator('.tool[data-call="call_theme_1"] button.approve');
    await approve.waitFor();
    assert.equal(await p.getAttribute("html", "data-theme"), null);
    await shot(p, "approval-asked");
    await approve.click();
    await completed(p);
    assert.equal(await p.getAttribute("html", "data-theme"), "dark", "the approved tool ran in the page");
    assert.equal(await p.getAttribute('.tool[data-call="call_theme_1"]', "data-state"), "done");
    assert.match((await lastText(p)) ?? "", /Done: I answered after the theme call's result\./);
    await shot(p, "approval-approved");

    await p.click("#new-session");
    await send(p, "Dark mode please");
    const deny = p.locator('.tool[data-call="call_theme_1"] button.deny');
    await deny.waitFor();
    await deny.click();
    await completed(p);
    assert.equal(await p.getAttribute('.tool[data-call="call_theme_1"]', "data-state"), "denied");
    assert.match((await p.locator('.tool[data-call="call_theme_1"] .output').textContent()) ?? "", /denied/);
    await shot(p, "approval-denied");
    const sessions = await client.listSessions();
    assert.equal(sessions.length, 2);
    const denied = await client.getSession(sessions[0]!.id);
    assert.deepEqual(denied.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"]);
    const result = denied.messages[2];
    assert.ok(result?.role === "toolResult" && result.isError, "the model's next call got an error result");
    assert.match(JSON.stringify(result.content), /The user denied this call in the playground\./);
  });

  test("a reload mid-run redraws the session from its log and follows the run: no text missing, none twice", async (t) => {
    // The story's slow script (8 s): the run must still be going on when the reloaded page
    // draws, however loaded the machine is.
    const weft = await startWeft("reload.json");
    t.after(() => weft.stop());
    const p = await page(t, weft, [RECORD_TEXTS]);
    await send(p, "Tell me a story");
    await p.waitForFunction(() => (document.querySelector("#chat .msg.assistant .text")?.textContent?.length ?? 0) > 60);
    const client = new WeftClient({ baseUrl: weft.base });
    const [head] = await client.listSessions();
    assert.equal(head?.status, "running", "reloading while the run goes on");
    await p.reload();
    await p.waitForFunction(() => (window as unknown as { __texts: string[] }).__texts.length >= 2);
    await shot(p, "reload-resumed");
    await completed(p);
    const afterReload = await texts(p);
    assert.equal(afterReload.at(-1), STORY, "the whole text, once");
    assert.ok(afterReload.every((text) => STORY.startsWith(text)), "no text out of place");
    assert.ok(afterReload.some((text) => text.length < STORY.length), "it was drawn mid-run and went on");
    assert.equal(await p.locator("#chat .msg.user").count(), 1);
    assert.equal(await p.locator("#chat .msg.assistant").count(), 1);
    assert.equal(await p.locator("#cost .turns tbody tr").count(), 1);
    const session = await client.getSession(head.id);
    const assistant = session.messages[1];
    assert.ok(assistant?.role === "assistant");
    assert.deepEqual(assistant.content.find((b) => b.type === "text"), { type: "text", text: STORY });
    await shot(p, "reload-done");
  });

  test("API key: the page works with a key kept in localStorage", async (t) => {
    const weft = await startWeft("weather.json", { apiKeys: "sk-playground-1=alice" });
    t.after(() => weft.stop());
    const p = await page(t, weft);
    await p.waitForSelector("#error:not([hidden])");
    assert.match((await p.locator("#error").textContent()) ?? "", /API key/i);
    await p.fill("#api-key", "sk-playground-1");
    await p.dispatchEvent("#api-key", "change");
    assert.equal(await p.evaluate(() => localStorage.getItem("weft.apiKey")), "sk-playground-1");
    await p.reload();
    assert.equal(await p.inputValue("#api-key"), "sk-playground-1");
    await p.waitForSelector('#set-provider option[value="faux"]', { state: "attached" });
    await send(p, "Weather?"); // get_weather is no tool of the page's sessions: the model is told
    await completed(p);
    assert.equal(await p.getAttribute('.tool[data-call="call_weather_1"]', "data-state"), "error");
    assert.match((await p.locator('.tool[data-call="call_weather_1"] .output').textContent()) ?? "", /not found/);
    await p.waitForSelector('#sessions li[data-status="completed"]');
    assert.equal(await p.locator("#sessions li").count(), 1);
    await shot(p, "api-key");
    // Deleting it (with the key), after the page asks.
    p.once("dialog", (dialog) => void dialog.accept());
    await p.click("#session-bar .delete");
    await p.waitForSelector("#sessions li", { state: "detached" });
    assert.deepEqual(await new WeftClient({ baseUrl: weft.base, apiKey: "sk-playground-1" }).listSessions(), []);
    assert.equal(await p.locator("#chat .msg").count(), 0, "a new session is shown");
  });

  test("settings apply to a new session: model from the server's registry, system prompt, limits, page tools", async (t) => {
    const weft = await startWeft("echo.json", { models: [{ provider: "faux", id: "faux-large", prices: { input: 4, output: 16 }, contextWindow: 64000, capabilities: { tools: true } }] });
    t.after(() => weft.stop());
    const p = await page(t, weft);
    await p.waitForSelector('#set-provider option[value="faux"]', { state: "attached" });
    assert.deepEqual(await p.locator("#set-models option").evaluateAll((os) => os.map((o) => (o as HTMLOptionElement).value)), ["faux", "faux-large"]);
    await p.fill("#set-model", "faux-large");
    await p.waitForFunction(() => document.querySelector("#set-model-info")?.textContent?.includes("64,000 tokens of context"));
    await p.fill("#set-system", "You are terse.");
    await p.fill("#set-max-turns", "5");
    await p.uncheck('#set-tools tr[data-tool="read_page"] [data-field="enabled"]');
    await p.check('#set-tools tr[data-tool="ask_user"] [data-field="approval"]');
    await shot(p, "settings");
    await send(p, "Echo something");
    await completed(p);
    const client = new WeftClient({ baseUrl: weft.base });
    const [head] = await client.listSessions();
    const session = await client.getSession(head!.id);
    assert.equal(session.model, "faux-large");
    assert.equal(session.provider, "faux");
    assert.equal(session.systemPrompt, "You are terse.");
    assert.deepEqual(session.tools.map((t) => `${t.name}${t.requiresApproval ? "!" : ""}`), ["ask_user!", "set_theme!", "browser_time"]);
    assert.equal((head!.options as { maxTurns?: number } | undefined)?.maxTurns, 5);
    // The session's own settings are shown; the model's prices made its cost.
    await p.waitForSelector('#session-settings[data-model="faux-large"]');
    assert.match((await p.locator("#session-settings").textContent()) ?? "", /You are terse\./);
    assert.equal(await p.locator(".tool[data-call] .output").first().textContent(), "hello brave new world");
    await tab(p, "cost");
    assert.match((await p.locator("#cost .totals").textContent()) ?? "", /50 in · 11 out · \$0\.00038 · faux-large/);
    // Kept for the next new session.
    await p.reload();
    await p.click("#new-session");
    assert.equal(await p.inputValue("#set-system"), "You are terse.");
    assert.equal(await p.isChecked('#set-tools tr[data-tool="read_page"] [data-field="enabled"]'), false);
  });

  test("a tree-of-thoughts run is drawn live: candidates with scores, the answer's path, backtracks", async (t) => {
    const weft = await startWeft("examples/scripts/tot.json");
    t.after(() => weft.stop());
    const p = await page(t, weft);
    await p.selectOption("#set-mode", "tot");
    await tab(p, "reasoning");
    await send(p, "Make 24 from 4 6 1 1");
    await p.waitForSelector("#reasoning svg.tot g.tnode");
    await completed(p);
    await p.waitForSelector('#reasoning figure.tot[data-status="completed"]');
    const nodes = await p.locator("#reasoning svg.tot g.tnode").evaluateAll((gs) =>
      gs.map((g) => {
        const d = (g as SVGGElement).dataset;
        return `${d.depth}|${d.thought}|${d.score ?? "-"}|${d.status}`;
      }),
    );
    assert.deepEqual(nodes.sort(), [
      "0|Make 24 from 4 6 1 1|-|root",
      "1|Try (4 + 6) * 1 + 1|0.30|dead",
      "1|Try 4 * 6 * 1 * 1|0.90|dead",
      "1|Try 6 / 1 - 4 + 1|0.20|solution",
      "2|Add: 6 + 4 + 1 + 1 = 12|0.50|candidate",
      "2|Multiply instead: 4 * 6 = 24, and 1 * 1 = 1, so 24 * 1 = 24|1.00|solution",
    ]);
    assert.equal(await p.getAttribute('#reasoning g.tnode[data-thought="Try 4 * 6 * 1 * 1"]', "data-chosen"), "true", "chosen at its evaluation");
    assert.equal(await p.locator("#reasoning svg.tot path.backtrack").count(), 2);
    assert.equal(await p.locator("#reasoning svg.tot path.edge[data-status=solution]").count(), 2);
    const backtracks = await p.locator("#reasoning ol.backtracks li").allTextContents();
    assert.equal(backtracks.length, 2);
    assert.match(backtracks[0]!, /tool echo failed/);
    assert.match(backtracks[1]!, /dead end/);
    assert.match((await p.locator('#reasoning g.tnode[data-thought="Try (4 + 6) * 1 + 1"] title').textContent()) ?? "", /backtracked: the model reported a dead end/);
    await shot(p, "tot-drawn");
    // The trace has every model call, the scratch ones included, and the echo tool.
    await tab(p, "trace");
    await p.waitForSelector("#trace li.step:nth-child(8)");
    assert.equal(await p.locator("#trace li.step").count(), 8);
    assert.deepEqual(await p.locator("#trace .tool-row").evaluateAll((rows) => rows.map((r) => `${(r as HTMLElement).dataset.tool}:${(r as HTMLElement).dataset.state}`)), ["echo:error", "echo:done"]);
    // A reload draws the same tree from the log.
    await p.reload();
    await p.waitForSelector('#reasoning figure.tot[data-status="completed"]', { state: "attached" });
    assert.equal(await p.locator("#reasoning svg.tot g.tnode").count(), 6);
    assert.equal(await p.locator('#reasoning g.tnode[data-status="solution"]').count(), 2);
  });

  test("a graph-of-thoughts run is drawn live: nodes with their status and dependencies", async (t) => {
    const weft = await startWeft("examples/scripts/got.json");
    t.after(() => weft.stop());
    const p = await page(t, weft);
    await p.selectOption("#set-mode", "got");
    await p.fill('#settings fieldset[data-mode="got"] [data-opt="concurrency"]', "1"); // one node at a time: the script's turns in plan order
    await tab(p, "reasoning");
    await send(p, "Tell me about the Seine");
    await p.waitForSelector("#reasoning svg.got g.gnode");
    await completed(p);
    await p.waitForSelector('#reasoning figure.got[data-status="completed"] g.gnode[data-node="answer"][data-status="done"]');
    const nodes = await p.locator("#reasoning svg.got g.gnode").evaluateAll((gs) => gs.map((g) => `${(g as SVGGElement).dataset.node}:${(g as SVGGElement).dataset.status}`));
    assert.deepEqual(nodes.sort(), ["answer:done", "cities:done", "facts:done", "floods:failed", "flow:failed", "length:done", "plan:done", "summary:done"]);
    const deps = await p.locator("#reasoning svg.got path.dep").evaluateAll((ps) => ps.map((e) => `${(e as SVGPathElement).dataset.from}>${(e as SVGPathElement).dataset.to}`));
    assert.deepEqual(deps.sort(), ["cities>summary", "facts>cities", "facts>flow", "facts>length", "flow>floods", "length>summary"]);
    assert.match((await p.locator('#reasoning ol.got-list li[data-node="flow"]').textContent()) ?? "", /overloaded/);
    assert.match((await p.locator('#reasoning ol.got-list li[data-node="length"]').textContent()) ?? "", /777 km/);
    await shot(p, "got-drawn");
    await tab(p, "trace");
    await p.waitForSelector('#trace details.run[data-status="completed"]');
    assert.deepEqual(await p.locator("#trace li.gnode").evaluateAll((ns) => ns.map((n) => (n as HTMLElement).dataset.node)), ["facts", "length", "cities", "flow", "summary"]);
    assert.match((await p.locator('#trace li.gnode[data-node="length"] .meta').textContent()) ?? "", /It is 777 km long\./, "each call with its own answer");
    assert.equal(await p.getAttribute('#trace li.gnode[data-node="flow"] li.step', "data-state"), "error");
    assert.match((await p.locator('#trace li.gnode[data-node="flow"] .meta').textContent()) ?? "", /overloaded/);
    await shot(p, "got-trace");
  });

  test("tree and graph of thoughts are drawn while the run goes on (a model call that never ends holds it there)", async (t) => {
    const tot = await startWeft("tot-stall.json");
    t.after(() => tot.stop());
    const p = await page(t, tot);
    await p.selectOption("#set-mode", "tot");
    await tab(p, "reasoning");
    await send(p, "Pick one");
    await p.waitForSelector('#reasoning g.tnode[data-thought="Try B"][data-status="active"]');
    assert.equal(await p.getAttribute("#reasoning figure.tot", "data-status"), "running");
    assert.equal(await p.getAttribute("#status", "data-status"), "running");
    assert.equal(await p.getAttribute('#reasoning g.tnode[data-thought="Try A"]', "data-status"), "candidate");
    assert.equal(await p.getAttribute('#reasoning g.tnode[data-thought="Try B"]', "data-score"), "0.80");
    await shot(p, "tot-live");
    await p.click("#abort");
    await p.waitForSelector('#reasoning figure.tot[data-status="aborted"]', { state: "attached" });

    const got = await startWeft("got-stall.json");
    t.after(() => got.stop());
    const q = await page(t, got);
    await q.selectOption("#set-mode", "got");
    await tab(q, "reasoning");
    await send(q, "Write it");
    await q.waitForSelector('#reasoning g.gnode[data-node="draft"][data-status="running"]');
    assert.equal(await q.getAttribute('#reasoning g.gnode[data-node="polish"]', "data-status"), "pending");
    assert.equal(await q.getAttribute('#reasoning g.gnode[data-node="answer"]', "data-status"), "pending");
    assert.equal(await q.getAttribute("#reasoning figure.got", "data-status"), "running");
    assert.deepEqual(await q.locator("#reasoning path.dep").evaluateAll((ps) => ps.map((e) => `${(e as SVGPathElement).dataset.from}>${(e as SVGPathElement).dataset.to}`)), ["draft>polish"]);
    await shot(q, "got-live");
    await q.click("#abort");
    await q.waitForSelector('#reasoning figure.got[data-status="aborted"]', { state: "attached" });
  });

  test("the event inspector shows the session's log in the wire format chosen", async (t) => {
    const weft = await startWeft("echo.json");
    t.after(() => weft.stop());
    const p = await page(t, weft);
    await send(p, "Echo something");
    await completed(p);
    const client = new WeftClient({ baseUrl: weft.base });
    const [head] = await client.listSessions();
    await tab(p, "events");
    for (const [format, first] of [["native", "session_start"], ["ag-ui", "RUN_STARTED"], ["aceai", "agent.llm.started"], ["vercel", "start"], ["loom", "run_start"]] as const) {
      await p.selectOption("#insp-format", format);
      await p.waitForFunction((f) => document.querySelector("#insp-count")?.textContent?.includes(`${f} · end of the last run`), format);
      const shown = await p.locator("#insp-frames li .data").allTextContents();
      const expected = (await rendered(weft, head!.id, format)).map((f) => f.data);
      assert.deepEqual(shown, expected, `${format}: the frames the server renders`);
      assert.equal(await p.locator("#insp-frames li .kind").first().textContent(), first);
      if (format === "ag-ui") await shot(p, "inspector-ag-ui");
    }
    await p.fill("#insp-filter", "echo");
    assert.ok((await p.locator("#insp-frames li:not([hidden])").count()) < (await p.locator("#insp-frames li").count()));
    // The choice is kept.
    await p.reload();
    await tab(p, "events");
    assert.equal(await p.inputValue("#insp-format"), "loom");
  });

  test("an abort is said once: live, after switching away and back, after a reload", async (t) => {
    const weft = await startWeft("stall.json");
    t.after(() => weft.stop());
    const p = await page(t, weft);
    await send(p, "Go on");
    await p.waitForFunction(() => document.querySelector("#chat .msg.assistant .text")?.textContent === "Working on it");
    await p.waitForSelector("#abort:not([disabled])");
    await p.click("#abort");
    await p.waitForSelector('#status[data-status="aborted"]');
    const once = async () => {
      assert.equal(await p.locator("#chat .notice").count(), 1);
      assert.equal(await p.locator('#chat .notice[data-kind="aborted"]').textContent(), "Run aborted");
      assert.doesNotMatch((await p.locator("#chat").textContent()) ?? "", /error/i);
    };
    await once();
    await shot(p, "aborted");
    const id = await p.evaluate(() => localStorage.getItem("weft.playground.session"));
    await p.click("#new-session");
    await p.click(`#sessions li[data-session="${id}"] .entry`);
    await once();
    await p.reload();
    await p.waitForSelector('#status[data-status="aborted"]');
    await p.waitForSelector('#chat .msg.assistant .text:text("Working on it")');
    await once();
  });

  test("an abort while the page asks a question ends the run once, and the server has it aborted", async (t) => {
    const weft = await startWeft("page.json");
    t.after(() => weft.stop());
    const p = await page(t, weft);
    await send(p, "Who am I?");
    await p.locator('.tool[data-call="call_ask_1"] form.ask').waitFor();
    await p.click("#abort");
    await p.waitForSelector('#status[data-status="aborted"]');
    assert.equal(await p.locator("#chat .notice").count(), 1);
    assert.equal(await p.locator('.tool[data-call="call_ask_1"] form.ask').count(), 0, "the question is gone");
    const client = new WeftClient({ baseUrl: weft.base });
    const [head] = await client.listSessions();
    assert.equal((await client.getSession(head!.id)).status, "aborted");
    await p.waitForSelector(`#sessions li[data-session="${head!.id}"][data-status="aborted"]`);
    await p.reload();
    await p.waitForSelector('#status[data-status="aborted"]');
    await p.waitForSelector('.tool[data-call="call_ask_1"][data-state="error"]');
    assert.equal(await p.locator("#chat .notice").count(), 1);
    assert.equal(await p.locator('.tool[data-call="call_ask_1"] form.ask').count(), 0, "not asked again");
  });

  test("timings come from the stored timestamps: non-zero with the page's clock stopped, and the server's own", async (t) => {
    const weft = await startWeft("page.json");
    t.after(() => weft.stop());
    const p = await page(t, weft, [FREEZE_CLOCK]);
    assert.equal(await p.evaluate(() => Date.now() === Date.now() && performance.now() === 0), true, "the page's clock is stopped");
    await tab(p, "trace");
    await send(p, "Who am I?");
    const ask = p.locator('.tool[data-call="call_ask_1"] form.ask');
    await ask.waitFor();
    await p.waitForSelector('#trace .tool-row[data-tool="ask_user"][data-state="waiting"]');
    await ask.locator("input").fill("Ada");
    await ask.locator("button").click();
    await completed(p);
    await p.waitForSelector('#trace details.run[data-status="completed"] li.step:nth-child(1)[data-ms]');
    const client = new WeftClient({ baseUrl: weft.base });
    const [head] = await client.listSessions();
    const steps = await storedSteps(weft, head!.id);
    assert.equal(steps.length, 3);
    const shownSteps = await p.locator("#trace li.step").evaluateAll((ls) => ls.map((l) => Number((l as HTMLElement).dataset.ms)));
    assert.deepEqual(shownSteps, steps.map((s) => s.latency_ms), "each model call's stored latency");
    assert.ok(shownSteps.every((ms) => ms > 0), `model calls take time: ${shownSteps}`);
    const shownTools = await p.locator("#trace .tool-row").evaluateAll((rs) => rs.map((r) => `${(r as HTMLElement).dataset.tool}:${(r as HTMLElement).dataset.ms}`));
    const storedTools = steps.flatMap((s) => (s.tool_results ?? []).map((r) => `${r.call.name}:${r.latency_ms}`));
    assert.deepEqual(shownTools, storedTools, "each tool's stored latency, the page's remote tools included");
    const askMs = Number(shownTools[0]!.split(":")[1]);
    assert.ok(askMs > 0, "the question took time to answer");
    assert.match((await p.locator("#trace li.step .ms").first().textContent()) ?? "", /^\d+ ms$/);
    await shot(p, "trace-timings");
  });

  test("fork: ✎ on a message makes a branch before it, ⑂ on an answer one after it; branch navigation between them", async (t) => {
    const weft = await startWeft("echo.json");
    t.after(() => weft.stop());
    const p = await page(t, weft);
    await send(p, "Tell me a story");
    await completed(p);
    const parent = await p.evaluate(() => localStorage.getItem("weft.playground.session"));
    // Edit the first message: a fork keeping nothing before it, the message in the composer.
    await p.hover("#chat .msg.user");
    await p.click("#chat .msg.user .fork-edit");
    await p.waitForFunction((id) => localStorage.getItem("weft.playground.session") !== id, parent);
    const child = await p.evaluate(() => localStorage.getItem("weft.playground.session"));
    assert.equal(await p.inputValue("#prompt"), "Tell me a story");
    await p.fill("#prompt", "Tell me another story");
    await p.click("#send");
    await completed(p);
    const client = new WeftClient({ baseUrl: weft.base });
    const view = await client.getSession(child!);
    assert.equal(view.parentId, parent);
    assert.equal(view.forkedAt, 0);
    assert.equal(view.messages[0]?.role === "user" && view.messages[0].content[0]?.type === "text" && view.messages[0].content[0].text, "Tell me another story");
    await p.waitForSelector(`#sessions li[data-session="${parent}"] ul.forks li[data-session="${child}"]`);
    // The branches part at message 0: ‹ 2/2 › here, ‹ 1/2 › there.
    await p.waitForSelector('#chat .msg[data-index="0"] .branch-nav .position:text("2/2")');
    await shot(p, "fork-branch");
    await p.click("#chat .branch-nav .prev");
    await p.waitForFunction((id) => localStorage.getItem("weft.playground.session") === id, parent);
    await p.waitForSelector('#chat .msg[data-index="0"] .branch-nav .position:text("1/2")');
    assert.equal(await p.locator("#chat .msg.user .text").first().textContent(), "Tell me a story");
    // ⑂ on the last answer (message 3): a fork keeping all four messages, shown at once.
    await p.hover('#chat .msg.assistant[data-index="3"]');
    await p.click('#chat .msg.assistant[data-index="3"] .fork-here');
    await p.waitForFunction((id) => localStorage.getItem("weft.playground.session") !== id, parent);
    const after = await p.evaluate(() => localStorage.getItem("weft.playground.session"));
    assert.equal(await p.locator("#chat .msg").count(), 3, "the kept conversation (a user message, two answers)");
    // Reloaded before it ever ran: drawn from the session's messages (its log is empty).
    await p.reload();
    await p.waitForSelector("#send:not([disabled])");
    assert.equal(await p.locator("#chat .msg").count(), 3);
    assert.match((await p.locator("#session-bar .parent-link").textContent()) ?? "", /at message 4/);
    await send(p, "And then?");
    await completed(p);
    const continued = await client.getSession(after!);
    assert.equal(continued.parentId, parent);
    assert.equal(continued.forkedAt, 4);
    assert.deepEqual(continued.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant", "user", "assistant", "toolResult", "assistant"]);
    assert.equal(await p.locator("#chat .msg.user").count(), 2);
    await p.waitForSelector(`#sessions li[data-session="${parent}"] ul.forks li[data-session="${after}"]`);
    await shot(p, "fork-after-answer");
  });

  test("branch navigation: forks made through the API nest under their session, ‹ k/n › goes between the branches", async (t) => {
    const weft = await startWeft("echo.json");
    t.after(() => weft.stop());
    const client = new WeftClient({ baseUrl: weft.base });
    const a = (await client.execute("A first question", { context: { messages: [] } }).result()).sessionId;
    // Two forks of it at message 0, each asked something else (another client's doing).
    const forks: string[] = [];
    for (const text of ["An edited first question", "Another edit"]) {
      const response = await fetch(`${weft.base}/api/agent/session/${a}/fork`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ atMessage: 0 }) });
      assert.equal(response.status, 201);
      const { id } = (await response.json()) as { id: string };
      await client.execute(text, { sessionId: id }).result();
      forks.push(id);
    }
    const [b, c] = forks as [string, string];
    const p = await page(t, weft);
    await p.waitForSelector(`#sessions li[data-session="${a}"] > ul.forks > li[data-session="${b}"]`);
    await p.waitForSelector(`#sessions li[data-session="${a}"] > ul.forks > li[data-session="${c}"]`);
    await p.click(`#sessions li[data-session="${a}"] > .entry`);
    await p.waitForSelector('#chat .msg[data-index="0"] .branch-nav .position:text("1/3")');
    assert.match((await p.locator("#session-bar").textContent()) ?? "", /2 forks:/);
    await shot(p, "branches-parent");
    await p.click("#chat .branch-nav .next");
    await p.waitForFunction((id) => localStorage.getItem("weft.playground.session") === id, b);
    await p.waitForSelector('#chat .msg[data-index="0"] .branch-nav .position:text("2/3")');
    assert.equal(await p.locator("#chat .msg.user .text").first().textContent(), "An edited first question");
    assert.match((await p.locator("#session-bar .parent-link").textContent()) ?? "", /forked from A first question at message 0/);
    await completed(p);
    await shot(p, "branches-fork");
    await p.click("#chat .branch-nav .next");
    await p.waitForFunction((id) => localStorage.getItem("weft.playground.session") === id, c);
    await p.waitForSelector('#chat .msg[data-index="0"] .branch-nav .position:text("3/3")');
    assert.equal(await p.locator("#chat .msg.user .text").first().textContent(), "Another edit");
    assert.equal(await p.isDisabled("#chat .branch-nav .next"), true, "the last branch");
    await p.click("#chat .branch-nav .prev");
    await p.click("#chat .branch-nav .prev");
    await p.waitForFunction((id) => localStorage.getItem("weft.playground.session") === id, a);
    assert.equal(await p.locator("#chat .msg.user .text").first().textContent(), "A first question");
  });
});
