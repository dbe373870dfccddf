// The example pages (examples/html/) in a real headless Chromium (Debian's, driven by
// playwright-core): each page is served from its own origin on 127.0.0.1 with the npm packages
// it imports bundled by scripts/bundle-html.mjs, and talks to a real `weft serve` (faux provider)
// that allows that origin by CORS.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join, normalize } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startWeft, until } from "./server.mjs";
import { skipOrFail } from "./skip.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const pages = join(here, "..", "..", "..", "examples", "html");
const executable = process.env.CHROMIUM ?? ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));
// playwright-core and esbuild came with this test: a node_modules installed before it lacks them.
const [playwright, bundler] = await Promise.all([import("playwright-core"), import("../scripts/bundle-html.mjs")].map((p) => p.catch(() => undefined)));
const missing = !executable
  ? "no Chromium (/usr/bin/chromium; set CHROMIUM=…)"
  : !playwright || !bundler
    ? "playwright-core or esbuild is missing from clients/frontends/node_modules (run `npm ci` there)"
    : undefined;
if (missing) skipOrFail(executable ? "node" : "browser", "the example pages", missing);

/** A static server for examples/html/ (vendor/ from `vendor`) on 127.0.0.1; its origin. */
async function servePages(vendor) {
  const types = { ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8" };
  const server = createServer((request, response) => {
    const path = normalize(new URL(request.url, "http://x").pathname).replace(/^(\.\.[/\\])+/, "");
    const file = path.startsWith("/vendor/") ? join(vendor, path.slice("/vendor/".length)) : join(pages, path);
    if (!existsSync(file) || !/\.(html|js)$/.test(file)) {
      response.writeHead(404).end();
      return;
    }
    response.writeHead(200, { "content-type": types[file.slice(file.lastIndexOf("."))] }).end(readFileSync(file));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { origin: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

describe("the example pages in Chromium", { skip: Boolean(missing) }, () => {
  let browser, site, vendor;
  before(async () => {
    vendor = mkdtempSync(join(tmpdir(), "weft-html-"));
    await bundler.bundleHtml(vendor);
    site = await servePages(vendor);
    browser = await playwright.chromium.launch({ executablePath: executable, headless: true, args: ["--no-sandbox"] });
  });
  after(async () => {
    await browser?.close();
    site?.close();
    if (vendor) rmSync(vendor, { recursive: true, force: true });
  });

  /** Opens `file` against `weft`; uncaught page errors fail the test. */
  async function open(t, weft, file) {
    const context = await browser.newContext();
    t.after(() => context.close());
    const page = await context.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    t.after(() => assert.deepEqual(errors, [], "no uncaught error in the page"));
    await page.goto(`${site.origin}/${file}?server=${encodeURIComponent(weft.base)}`);
    return page;
  }

  const texts = (page, selector) => page.$$eval(selector, (nodes) => nodes.map((n) => n.textContent));

  test("ag-ui.html: HttpAgent streams the answer; the page's own tool goes round", async (t) => {
    const weft = await startWeft("browser-time.json", { corsOrigins: site.origin });
    t.after(() => weft.stop());
    const page = await open(t, weft, "ag-ui.html");
    await page.fill("#prompt", "What time is it for me?");
    await page.click("#send");
    await page.waitForFunction(() => [...document.querySelectorAll("#log .assistant")].some((n) => n.textContent === "Your browser's clock is ticking."), null, { timeout: 20_000 });
    assert.deepEqual(await texts(page, "#log .user"), ["What time is it for me?"]);
    assert.deepEqual(await texts(page, "#log .assistant"), ["Let me look at your clock.", "Your browser's clock is ticking."]);
    const tools = await texts(page, "#log .tool");
    assert.equal(tools[0], "get_browser_time {}");
    assert.match(tools[1], /^get_browser_time → \d{4}-\d\d-\d\dT/);
    // The session on the server: the browser's answer is the tool's result, the run completed.
    const id = await page.evaluate(() => document.body.dataset.session);
    await until(async () => (await weft.session(id)).status === "completed");
    const session = await weft.session(id);
    const result = session.messages.find((m) => m.role === "toolResult");
    assert.equal(result.toolCallId, "call_time_1");
    assert.equal(result.content[0].text, tools[1].split(" → ")[1]);
  });

  test("use-chat.html: the AI SDK's chat client streams reasoning and text", async (t) => {
    const weft = await startWeft("text.json", { corsOrigins: site.origin });
    t.after(() => weft.stop());
    const page = await open(t, weft, "use-chat.html");
    await page.fill("#prompt", "Hi there");
    await page.click("#send");
    await page.waitForFunction(() => document.body.dataset.status === "ready" && document.querySelector("#log .assistant"), null, { timeout: 20_000 });
    assert.deepEqual(await texts(page, "#log .user"), ["Hi there"]);
    assert.deepEqual(await texts(page, "#log .reasoning"), ["The user greets me; I greet back."]);
    assert.deepEqual(await texts(page, "#log .assistant"), ["Hello from Weft! How can I help?"]);
    assert.deepEqual(await texts(page, "#log .error"), []);
    const session = await weft.session(await page.evaluate(() => document.body.dataset.session));
    assert.equal(session.status, "completed");
    assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant"]);
  });
});
