// CopilotKit 1.x (@copilotkit/react-core, its v2 `CopilotKitProvider` and `CopilotChat`) in a real
// headless Chromium against a real `weft serve`: the page (test/copilotkit/page.jsx, bundled with
// esbuild) uses the AG-UI client CopilotKit bundles — @ag-ui/client 0.0.x, which sends no
// `protocolVersion` and rejects 1.0's `pendingToolCallIds` and `cancelled` outcome — straight from
// the browser (`agents__unsafe_dev_only`, no CopilotRuntime). A text answer, a `useFrontendTool`
// round trip, `useHumanInTheLoop` approved and denied, and stop; what the page shows and what the
// server stored.
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startWeft, until } from "./server.mjs";
import { skipOrFail } from "./skip.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, "..");
const executable = process.env.CHROMIUM ?? ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));
const [playwright, esbuild] = await Promise.all([import("playwright-core"), import("esbuild")].map((p) => p.catch(() => undefined)));
const copilotkit = join(root, "node_modules", "@copilotkit", "react-core");
const missing = !executable
  ? "no Chromium (/usr/bin/chromium; set CHROMIUM=…)"
  : !playwright || !esbuild || !existsSync(copilotkit)
    ? "playwright-core, esbuild or @copilotkit/react-core is missing from clients/frontends/node_modules (run `npm ci` there)"
    : undefined;
if (missing) skipOrFail(executable ? "node" : "browser", "CopilotKit", missing);

/**
 * The page's bundle (page.js, page.css), in node_modules/.cache keyed by the page and the lock
 * file: CopilotKit is large, and esbuild takes half a minute over it. The AG-UI client is the one
 * CopilotKit depends on, one copy as in an app (here @ag-ui/client 1.0 is the top-level one, so
 * npm nests 0.0.x under each CopilotKit package).
 */
async function bundle() {
  const page = join(here, "copilotkit", "page.jsx");
  const key = createHash("sha256").update(readFileSync(page)).update(readFileSync(join(root, "package-lock.json"))).digest("hex").slice(0, 16);
  const outdir = join(root, "node_modules", ".cache", "weft-copilotkit", key);
  if (existsSync(join(outdir, "page.js")) && existsSync(join(outdir, "page.css"))) return outdir;
  const nested = join(copilotkit, "node_modules", "@ag-ui");
  const version = JSON.parse(readFileSync(join(nested, "client", "package.json"), "utf8")).version;
  assert.match(version, /^0\.0\./, "CopilotKit's own @ag-ui/client is a 0.0.x");
  mkdirSync(outdir, { recursive: true });
  await esbuild.build({
    entryPoints: [page],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    minify: true,
    jsx: "automatic",
    outdir,
    alias: { "@ag-ui/client": join(nested, "client"), "@ag-ui/core": join(nested, "core") },
    define: { "process.env.NODE_ENV": '"production"' },
    loader: { ".woff": "empty", ".woff2": "empty", ".ttf": "empty" },
    logLevel: "error",
  });
  writeFileSync(join(outdir, "version.txt"), version);
  return outdir;
}

/** Serves the page and its bundle on 127.0.0.1; its origin. */
async function servePage(dir) {
  const html = `<!doctype html><html><head><meta charset="utf-8"><title>CopilotKit on Weft</title>
<link rel="stylesheet" href="/page.css"></head><body><div id="root" style="height:100vh"></div>
<script type="module" src="/page.js"></script></body></html>`;
  const files = { "/page.js": ["text/javascript", "page.js"], "/page.css": ["text/css", "page.css"] };
  const server = createServer((request, response) => {
    const path = new URL(request.url, "http://x").pathname;
    if (path === "/") response.writeHead(200, { "content-type": "text/html; charset=utf-8" }).end(html);
    else if (files[path]) response.writeHead(200, { "content-type": files[path][0] }).end(readFileSync(join(dir, files[path][1])));
    else if (path === "/favicon.ico") response.writeHead(204).end();
    else response.writeHead(404).end();
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { origin: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

describe("CopilotKit 1.x in Chromium", { skip: Boolean(missing) }, () => {
  let browser, site;
  before(async () => {
    site = await servePage(await bundle());
    browser = await playwright.chromium.launch({ executablePath: executable, headless: true, args: ["--no-sandbox"] });
  });
  after(async () => {
    await browser?.close();
    site?.close();
  });

  /**
   * Opens the page on `thread` against `weft`; records every /api/ag-ui request body and every
   * response's last event; uncaught page errors and CopilotKit's error banner fail the test.
   */
  async function open(t, weft, thread, query = "") {
    const context = await browser.newContext();
    const page = await context.newPage();
    const errors = [];
    const requests = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    page.on("console", (m) => m.type() === "error" && errors.push(m.text()));
    page.on("request", (r) => r.url().endsWith("/api/ag-ui") && r.method() === "POST" && requests.push(JSON.parse(r.postData())));
    t.after(async () => {
      try {
        // WEFT_SCREENSHOTS=DIR keeps a picture of each page as the test left it.
        if (process.env.WEFT_SCREENSHOTS) await page.screenshot({ path: join(process.env.WEFT_SCREENSHOTS, `${thread}.png`) });
        const banner = await page.getByTestId("copilot-error-banner").allInnerTexts();
        assert.deepEqual(banner, [], "no error banner");
        assert.deepEqual(errors, [], "no error in the page");
      } finally {
        await context.close();
      }
    });
    await page.goto(`${site.origin}/?server=${encodeURIComponent(weft.base)}&thread=${thread}${query}`);
    await page.getByTestId("copilot-chat-textarea").waitFor({ timeout: 20_000 });
    return { page, requests };
  }

  async function send(page, text) {
    await page.getByTestId("copilot-chat-textarea").fill(text);
    await page.getByTestId("copilot-send-button").click();
  }

  const assistantTexts = (page) => page.getByTestId("copilot-assistant-message").allInnerTexts();
  const running = (page) => page.locator('[data-copilot-running="true"]').count().then((n) => n > 0);
  /** Waits until an assistant message reads `text` and the chat is idle. */
  async function answered(page, text) {
    await page.getByTestId("copilot-assistant-message").filter({ hasText: text }).waitFor({ timeout: 20_000 });
    await until(async () => !(await running(page)));
  }

  test("a text answer: the reasoning and the text are shown, the session stored", async (t) => {
    const weft = await startWeft("text.json", { corsOrigins: site.origin });
    t.after(() => weft.stop());
    const { page, requests } = await open(t, weft, "ck-text");
    await send(page, "Hi there");
    await answered(page, "Hello from Weft! How can I help?");
    assert.deepEqual(await page.getByTestId("copilot-user-message").allInnerTexts(), ["Hi there"]);
    // The reasoning (REASONING_* events) is CopilotKit's collapsed "Thought for …", opened on click.
    await page.getByText(/^Thought for/).click();
    await page.getByText("The user greets me; I greet back.").waitFor({ timeout: 5_000 });
    // The client is CopilotKit's 0.0.x: it declares no protocol version.
    assert.equal(requests.length, 1);
    assert.equal(requests[0].threadId, "ck-text");
    assert.equal("protocolVersion" in requests[0], false);
    const session = await weft.session("ck-text");
    assert.equal(session.status, "completed");
    assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant"]);
    assert.equal(session.messages[1].content.find((b) => b.type === "text").text, "Hello from Weft! How can I help?");
  });

  test("useFrontendTool: the browser runs the call, its result resumes the run", async (t) => {
    const weft = await startWeft("browser-time.json", { corsOrigins: site.origin });
    t.after(() => weft.stop());
    const { page, requests } = await open(t, weft, "ck-tool");
    await send(page, "What time is it for me?");
    await answered(page, "Your browser's clock is ticking.");
    assert.deepEqual(await page.evaluate(() => window.seen.browserTime), [{}]);
    // Two runs: the question, then the tool's result (CopilotKit's follow-up).
    assert.equal(requests.length, 2);
    const tool = requests[1].messages.find((m) => m.role === "tool");
    assert.deepEqual([tool.toolCallId, tool.content], ["call_time_1", "2026-01-02T03:04:05Z"]);
    const session = await weft.session("ck-tool");
    assert.equal(session.status, "completed");
    assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"]);
    const result = session.messages[2];
    assert.deepEqual([result.toolCallId, result.content[0].text], ["call_time_1", "2026-01-02T03:04:05Z"]);
  });

  for (const [choice, answer] of [
    ["approve", { approved: true }],
    ["deny", { approved: false, reason: "I like it light" }],
  ]) {
    test(`useHumanInTheLoop: the user's ${choice} is the call's result`, async (t) => {
      const weft = await startWeft("approval.json", { corsOrigins: site.origin });
      t.after(() => weft.stop());
      const thread = `ck-hitl-${choice}`;
      const { page, requests } = await open(t, weft, thread);
      await send(page, "Dark mode please");
      const card = page.locator(".approval");
      await card.locator(`.${choice}`).waitFor({ timeout: 20_000 });
      assert.equal(await card.locator(".question").innerText(), "Switch to the dark theme?");
      // The run waits for the user: the server has it suspended on the call.
      await until(async () => (await weft.session(thread)).status === "awaiting_tool_execution");
      await card.locator(`.${choice}`).click();
      await answered(page, "Done after the theme call.");
      assert.equal(await card.locator(".answer").innerText(), JSON.stringify(answer));
      assert.deepEqual(await page.evaluate(() => window.seen.themes), choice === "approve" ? ["dark"] : []);
      assert.equal(requests.length, 2);
      const session = await weft.session(thread);
      assert.equal(session.status, "completed");
      const result = session.messages.find((m) => m.role === "toolResult");
      assert.equal(result.toolCallId, "call_theme_1");
      assert.deepEqual(JSON.parse(result.content[0].text), answer);
    });
  }

  for (const [choice, approved] of [
    ["resolve", true],
    ["cancel", false],
  ]) {
    test(`useInterrupt: a server tool that needs approval, ${choice === "resolve" ? "allowed" : "cancelled"}`, async (t) => {
      const config = '[tools.echo]\napproval = "always"\n';
      const weft = await startWeft("copilotkit-echo-approval.json", { corsOrigins: site.origin, config });
      t.after(() => weft.stop());
      const thread = `ck-interrupt-${choice}`;
      const { page, requests } = await open(t, weft, thread);
      await send(page, "Echo hello there");
      const card = page.locator(".interrupt");
      await card.locator(`.${choice}`).waitFor({ timeout: 20_000 });
      assert.equal(await card.locator(".question").innerText(), "Approve the call to echo?");
      assert.equal((await weft.session(thread)).status, "awaiting_approval");
      await card.locator(`.${choice}`).click();
      await answered(page, "The echo is done.");
      assert.equal(await card.count(), 0, "the interrupt is gone");
      // CopilotKit resumes with `resume` (and a tool message of its own for the call).
      assert.equal(requests.length, 2);
      // Its stand-in tool message is replaced by the call's real result, as the server has it.
      assert.ok(requests[1].messages.some((m) => m.role === "tool" && m.toolCallId === "call_echo_1"));
      const held = await page.evaluate(() => window.agent.messages);
      const results = held.filter((m) => m.role === "tool" && m.toolCallId === "call_echo_1");
      assert.equal(results.length, 1, JSON.stringify(held));
      if (approved) assert.equal(results[0].content, "hello there");
      else assert.match(results[0].content, /denied by the user: The user cancelled the call/);
      assert.deepEqual(held.filter((m) => m.role === "assistant").map((m) => m.content), ["Let me echo that.", "The echo is done."]);
      assert.deepEqual(await assistantTexts(page), ["Let me echo that.", "The echo is done."], "each answer shown once");
      assert.deepEqual(requests[1].resume.map((r) => [r.interruptId, r.status]), [["call_echo_1", choice === "resolve" ? "resolved" : "cancelled"]]);
      const session = await weft.session(thread);
      assert.equal(session.status, "completed");
      const result = session.messages.find((m) => m.role === "toolResult");
      assert.equal(result.toolCallId, "call_echo_1");
      assert.equal(result.isError, !approved);
      if (approved) assert.equal(result.content[0].text, "hello there");
    });
  }

  test("stop with forwardedProps.weft.onDisconnect: the run is aborted on the server", async (t) => {
    const weft = await startWeft("slow.json", { corsOrigins: site.origin });
    t.after(() => weft.stop());
    const { page } = await open(t, weft, "ck-stop-cancel", "&cancelOnDisconnect=1");
    await send(page, "Tell me a story");
    await page.getByTestId("copilot-assistant-message").filter({ hasText: "Once upon" }).waitFor({ timeout: 20_000 });
    // While it runs, the send button is CopilotKit's stop button.
    await page.getByTestId("copilot-send-button").click();
    await until(async () => !(await running(page)));
    await until(async () => (await weft.session("ck-stop-cancel")).status === "aborted");
    const shown = (await assistantTexts(page)).join("");
    assert.ok(shown.startsWith("Once upon") && !shown.includes("The end."), shown);
    const session = await weft.session("ck-stop-cancel");
    const text = session.messages.at(-1).content.find((b) => b.type === "text")?.text ?? "";
    assert.ok(!text.includes("The end."), "the model was stopped: " + text);
  });

  test(
    "stop: the page's agent calls POST /api/ag-ui/{threadId}/stop from abortRun; the run is aborted on the server",
    async (t) => {
      const weft = await startWeft("slow.json", { corsOrigins: site.origin });
      t.after(() => weft.stop());
      const { page } = await open(t, weft, "ck-stop");
      await send(page, "Tell me a story");
      await page.getByTestId("copilot-assistant-message").filter({ hasText: "Once upon" }).waitFor({ timeout: 20_000 });
      await page.getByTestId("copilot-send-button").click();
      await until(async () => !(await running(page)));
      await until(async () => (await weft.session("ck-stop")).status !== "running", 10_000);
      assert.equal((await weft.session("ck-stop")).status, "aborted");
    },
  );
});
