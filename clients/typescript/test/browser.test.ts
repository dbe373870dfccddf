// The playground in a real headless Chromium (Debian's, driven by playwright-core), against a
// real `weft serve` with scripted (faux) runs. Screenshots of each state go to
// clients/typescript/test-artifacts/.
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test, type TestContext } from "node:test";

import { chromium, type Browser, type Page } from "playwright-core";

import { WeftClient } from "../src/index.js";
import { startWeft, testDir, type Weft } from "./server.js";

const executable = process.env.CHROMIUM ?? ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));
const artifacts = join(testDir, "..", "test-artifacts");
mkdirSync(artifacts, { recursive: true });

if (!executable) {
  const message = "no Chromium (/usr/bin/chromium; set CHROMIUM=…): the browser tests did not run";
  if (process.env.CI === "true") throw new Error(message);
  console.warn(`\n!!! SKIPPED: ${message}\n`);
}

const STORY =
  "Once upon a time a quick brown fox jumped over a lazy dog. The dog did not mind: it was asleep, dreaming of bones and long walks. The fox, proud of itself, jumped back and forth a dozen times, until the farmer came out with a lantern and everyone went to bed. The end.";

let browser: Browser;

async function page(t: TestContext, weft: Weft): Promise<Page> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  t.after(() => context.close());
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

const shot = (p: Page, name: string) => p.screenshot({ path: join(artifacts, `${name}.png`) });
const lastText = (p: Page) => p.evaluate(() => [...document.querySelectorAll("#chat .msg.assistant .text")].map((n) => n.textContent).join("|"));

describe("the playground in Chromium", { skip: !executable }, () => {
  before(async () => {
    browser = await chromium.launch({ executablePath: executable!, headless: true, args: ["--no-sandbox"] });
  });
  after(() => browser?.close());

  test("weft serve embeds this build of the page (else: rebuild weft)", async (t) => {
    const weft = await startWeft("slow.json");
    t.after(() => weft.stop());
    for (const [served, file] of [["playground.js", "dist/playground.js"], ["client.js", "dist/client.js"], ["sse.js", "dist/sse.js"], ["style.css", "playground/style.css"]]) {
      const body = await (await fetch(`${weft.base}/playground/${served}`)).text();
      assert.equal(body, readFileSync(join(testDir, "..", file!), "utf8"), `${served} is ${file}`);
    }
    assert.equal(await (await fetch(`${weft.base}/`)).text(), readFileSync(join(testDir, "..", "playground", "index.html"), "utf8"));
  });

  test("text streams in progressively; thinking is dimmed and collapsible; cost per turn and session", async (t) => {
    const weft = await startWeft("slow.json");
    t.after(() => weft.stop());
    const p = await page(t, weft);
    await send(p, "Tell me a story");
    const states: string[] = [];
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const text = await lastText(p);
      if (text && states.at(-1) !== text) states.push(text);
      if (states.length === 4) await shot(p, "streaming-midway");
      if (text === STORY) break;
      await p.waitForTimeout(50);
    }
    assert.equal(states.at(-1), STORY);
    const partial = states.filter((s) => s.length < STORY.length);
    assert.ok(partial.length >= 5, `${partial.length} intermediate states seen`);
    for (let i = 1; i < states.length; i++) assert.ok(states[i]!.startsWith(states[i - 1]!), "each state extends the last");
    await p.waitForSelector('#status[data-status="completed"]');
    const thinking = p.locator("details.thinking");
    assert.equal(await thinking.locator(".body").textContent(), "The user wants a story; a short one about a fox will do.");
    assert.equal(await thinking.evaluate((d) => (d as HTMLDetailsElement).open), false, "collapsed once done");
    assert.ok(Number(await thinking.evaluate((d) => getComputedStyle(d).opacity)) < 1 || (await thinking.evaluate((d) => getComputedStyle(d).color)) !== (await p.evaluate(() => getComputedStyle(document.body).color)), "dimmed");
    await thinking.locator("summary").click();
    assert.equal(await thinking.evaluate((d) => (d as HTMLDetailsElement).open), true, "opens on click");
    // Usage and cost: 25 in, 70 out at $2 / $8 per million.
    assert.deepEqual(await p.locator("#turns tbody td").allTextContents(), ["1", "25", "70", "$0.00061"]);
    assert.match((await p.locator("#totals").textContent()) ?? "", /25 in · 70 out · \$0\.00061/);
    assert.equal(await p.locator("#timeline .row.span-model").count(), 1);
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
    await shot(p, "remote-tool-asks");
    await ask.locator("input").fill("Ada");
    await ask.locator("button").click();
    await p.waitForFunction(() => document.querySelector("#chat")?.textContent?.includes("Thanks, I have your name and your notes."));
    await p.waitForSelector('#status[data-status="completed"]');
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
    assert.equal(await p.locator("#timeline .row.span-model").count(), 3);
    assert.equal(await p.locator("#timeline .row.span-tool").count(), 2);
    assert.equal(await p.locator("#turns tbody tr").count(), 3);
    await shot(p, "remote-tools-done");
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
    await p.waitForSelector('#status[data-status="completed"]');
    assert.equal(await p.getAttribute("html", "data-theme"), "dark", "the approved tool ran in the page");
    assert.equal(await p.getAttribute('.tool[data-call="call_theme_1"]', "data-state"), "done");
    assert.match((await lastText(p)) ?? "", /Done: I answered after the theme call's result\./);
    await shot(p, "approval-approved");

    await p.click("#new-session");
    await send(p, "Dark mode please");
    const deny = p.locator('.tool[data-call="call_theme_1"] button.deny');
    await deny.waitFor();
    await deny.click();
    await p.waitForSelector('#status[data-status="completed"]');
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

  test("a reload mid-run resumes the stream: no text missing, none twice", async (t) => {
    // The story's slow script (8 s): the run must still be going on when the reloaded page
    // draws, however loaded the machine is.
    const weft = await startWeft("reload.json");
    t.after(() => weft.stop());
    const p = await page(t, weft);
    await send(p, "Tell me a story");
    await p.waitForFunction(() => (document.querySelector("#chat .msg.assistant .text")?.textContent?.length ?? 0) > 60);
    const client = new WeftClient({ baseUrl: weft.base });
    const [head] = await client.listSessions();
    assert.equal(head?.status, "running", "reloading while the run goes on");
    await p.reload();
    await p.waitForSelector("#chat .msg.assistant .text");
    const afterReload: string[] = [];
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      const text = await lastText(p);
      if (text && afterReload.at(-1) !== text) afterReload.push(text);
      if (afterReload.length === 2) await shot(p, "reload-resumed");
      if (text === STORY || text.length > STORY.length) break;
      await p.waitForTimeout(50);
    }
    assert.equal(afterReload.at(-1), STORY, "the whole text, once");
    assert.ok(afterReload.length >= 3, "it went on streaming after the reload");
    // Redrawn from what the page had kept (its saved log may lag the screen by a few events):
    // a non-empty beginning of the story, mid-run, and every sample a prefix of the story.
    const first = afterReload[0]!;
    assert.ok(first.length > 0 && first.length < STORY.length, `redrawn mid-run: ${first.length} chars`);
    assert.ok(afterReload.every((text) => STORY.startsWith(text)), "no text out of place");
    await p.waitForSelector('#status[data-status="completed"]');
    assert.equal(await p.locator("#chat .msg.user").count(), 1);
    assert.equal(await p.locator("#chat .msg.assistant").count(), 1);
    assert.equal(await p.locator("#turns tbody tr").count(), 1);
    const session = await client.getSession(head.id);
    const assistant = session.messages[1];
    assert.ok(assistant?.role === "assistant");
    assert.deepEqual(assistant.content.find((b) => b.type === "text"), { type: "text", text: STORY });
    await shot(p, "reload-done");
  });

  test("API key: the page works with a key kept in localStorage; tree/graph-of-thought progress is drawn", async (t) => {
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
    await send(p, "Weather?"); // get_weather is no tool of the page's sessions: the model is told
    await p.waitForSelector('#status[data-status="completed"]');
    assert.equal(await p.getAttribute('.tool[data-call="call_weather_1"]', "data-state"), "error");
    assert.match((await p.locator('.tool[data-call="call_weather_1"] .output').textContent()) ?? "", /not found/);
    assert.equal(await p.locator("#sessions li").count(), 1);

    // The native stream never carries ToT/GoT progress, so the view is fed the canonical
    // events (`{type: "progress", kind, …}`) directly.
    await p.evaluate(() => {
      const w = (globalThis as unknown as { weftPlayground: { apply(e: unknown): void } }).weftPlayground;
      const progress = (kind: string, fields: object) => w.apply({ type: "progress", kind, ...fields });
      progress("tot_expand", { candidates: ["search first", "answer directly", "ask the user"] });
      progress("tot_evaluate", { chosen: 1, scores: [0.4, 0.9, 0.2] });
      progress("got_plan", { node_count: 3, edge_count: 2, node_ids: ["a", "b", "c"] });
      progress("got_node_start", { id: "a" });
      progress("got_node_complete", { id: "a", result_summary: "found it" });
      progress("got_node_start", { id: "b" });
      progress("got_node_failed", { id: "c", error: "timeout" });
    });
    assert.equal(await p.isVisible("#reasoning"), true);
    assert.equal(await p.locator("#tot li.chosen").textContent(), "answer directly — 0.90");
    assert.deepEqual(await p.locator("#got .node").evaluateAll((ns) => ns.map((n) => `${n.textContent}:${(n as HTMLElement).dataset.state}`)), ["a:done", "b:running", "c:failed"]);
    await shot(p, "keys-and-reasoning");
  });
});
