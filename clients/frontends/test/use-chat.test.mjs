// The AI SDK's React `useChat` (AI SDK 6: @ai-sdk/react 3.0.327 + ai 6.0.324; AI SDK 7:
// @ai-sdk/react 4.0.177 + ai 7.0.173) in a real headless Chromium against a real `weft serve`
// (faux provider). test/use-chat/page.jsx is bundled per major by esbuild and served from
// 127.0.0.1; Weft allows that origin by CORS. Each scenario checks what the page shows and what
// the server stored (GET /api/agent/session/{id}).
//
// Every scenario asserts the behaviour a `useChat` app needs. One that the server does not give
// yet is marked `todo` (the reason says what the server does wrong), so the suite stays green
// while it runs. test/use-chat/ai-sdk-contract.md says, from the AI SDK's source, what the client
// does that each check relies on.
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer, request as forward } from "node:http";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { after, before, describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { startWeft, until } from "./server.mjs";
import { skipOrFail } from "./skip.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const executable = process.env.CHROMIUM ?? ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((p) => existsSync(p));
// playwright-core, esbuild, react and @ai-sdk/react came with these tests: an older node_modules lacks them.
const [playwright, bundler] = await Promise.all(
  [import("playwright-core"), import("./use-chat/bundle.mjs")].map((p) => p.catch(() => undefined)),
);
const hasPackages = ["react", "react-dom", "ai-sdk-react6", "ai-sdk-react7"].every((name) => existsSync(join(here, "..", "node_modules", name)));
const missing = !executable
  ? "no Chromium (/usr/bin/chromium; set CHROMIUM=…)"
  : !playwright || !bundler || !hasPackages
    ? "playwright-core, esbuild, react or @ai-sdk/react is missing from clients/frontends/node_modules (run `npm ci` there)"
    : undefined;
if (missing) skipOrFail(executable ? "node" : "browser", "useChat in a browser", missing);

/**
 * The scenarios the server does not pass yet, each with what it sends wrong (the test runs, its
 * failure is reported as a TODO). Delete an entry once the server does it.
 */
const todo = {};

const story = "Once upon a time a quick brown fox jumped over a lazy dog, and then it waited for the end of the story.";

/** A static server for the bundled pages on 127.0.0.1; its origin. */
async function servePages(dir) {
  const server = createServer((request, response) => {
    const match = /^\/page-(6|7)\.(html|js)$/.exec(new URL(request.url, "http://x").pathname);
    if (!match) {
      response.writeHead(404).end();
      return;
    }
    const [, major, ext] = match;
    const type = ext === "html" ? "text/html; charset=utf-8" : "text/javascript; charset=utf-8";
    const content = ext === "html" ? bundler.html(major) : readFileSync(join(dir, `page-${major}.js`));
    response.writeHead(200, { "content-type": type }).end(content);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { origin: `http://127.0.0.1:${server.address().port}`, close: () => server.close() };
}

/**
 * A pass-through proxy in front of Weft that can cut a connection the way a network does: after
 * `cut()`, the next `POST /api/chat` response is dropped (both sockets destroyed) once three
 * text deltas have gone through.
 */
async function startProxy(target) {
  const upstream = new URL(target);
  let armed = false;
  const server = createServer((request, response) => {
    // Uncompressed, so that the proxy can see where the first text delta is.
    const { "accept-encoding": _, ...headers } = request.headers;
    const outgoing = forward(
      { host: upstream.hostname, port: upstream.port, path: request.url, method: request.method, headers },
      (incoming) => {
        response.writeHead(incoming.statusCode, incoming.headers);
        const cutThis = armed && request.method === "POST" && new URL(request.url, "http://x").pathname === "/api/chat";
        if (cutThis) armed = false;
        let deltas = 0;
        incoming.on("data", (chunk) => {
          if (!cutThis) return void response.write(chunk);
          if (deltas >= 3) return;
          deltas += chunk.toString().split('"type":"text-delta"').length - 1;
          // Once the page has had some text, the connection drops.
          response.write(chunk, () => {
            if (deltas < 3) return;
            response.destroy();
            outgoing.destroy();
          });
        });
        incoming.on("end", () => response.end());
        incoming.on("error", () => response.destroy());
      },
    );
    outgoing.on("error", () => response.destroy());
    request.pipe(outgoing);
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    base: `http://127.0.0.1:${server.address().port}`,
    cut: () => (armed = true),
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** The page as data: status, error, and the messages with their parts. */
const view = (page) =>
  page.evaluate(() => {
    const app = document.querySelector("#app");
    return {
      status: app?.dataset.status,
      session: app?.dataset.session,
      error: document.querySelector("#error")?.textContent ?? "",
      reconnects: window.__weft.reconnects,
      errors: window.__weft.errors.length,
      finishes: window.__weft.finishes.length,
      finished: window.__weft.finishes.at(-1)?.ids,
      messages: [...document.querySelectorAll("#log .message")].map((m) => ({
        role: m.classList.contains("user") ? "user" : m.classList.contains("assistant") ? "assistant" : "system",
        id: m.dataset.id,
        parts: [...m.querySelectorAll(".part")].map((p) => {
          const kind = p.classList[1];
          if (kind === "tool") {
            return {
              kind,
              name: p.dataset.name,
              call: p.dataset.call,
              state: p.dataset.state,
              input: JSON.parse(p.querySelector(".input").textContent),
              ...(p.querySelector(".output") ? { output: JSON.parse(p.querySelector(".output").textContent) } : {}),
              ...(p.querySelector(".output-error") ? { errorText: p.querySelector(".output-error").textContent } : {}),
            };
          }
          if (kind === "data" || kind === "other") return { kind, type: p.dataset.type };
          if (kind === "step-start") return { kind };
          return { kind, state: p.dataset.state, text: p.textContent };
        }),
      })),
    };
  });

const roles = (v) => v.messages.map((m) => m.role);
const assistants = (v) => v.messages.filter((m) => m.role === "assistant");
/** The text of a page message (its text parts joined). */
const shownText = (m) => m.parts.filter((p) => p.kind === "text").map((p) => p.text).join("");
const tools = (v) => v.messages.flatMap((m) => m.parts.filter((p) => p.kind === "tool"));
/** The text of a stored Weft message. */
const storedText = (m) => (m.content ?? []).filter((c) => c.type === "text").map((c) => c.text).join("");
/**
 * What the server holds for chat `id`: its session or, once edits and regenerations have forked
 * it, the branch it points at (`branchId`, followed).
 */
async function chatSession(weft, id) {
  let session = await weft.session(id);
  for (let hops = 0; session.branchId && session.branchId !== session.id && hops < 10; hops++) session = await weft.session(session.branchId);
  return session;
}
const lastAssistantText = (v) => {
  const last = assistants(v).at(-1);
  return last ? shownText(last) : "";
};

// The two majors run side by side (each scenario has its own weft serve and browser context).
describe("useChat (React) in Chromium", { skip: Boolean(missing), concurrency: 2 }, () => {
  let browser, site, dir;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "weft-use-chat-"));
    await Promise.all([bundler.bundlePage(6, dir), bundler.bundlePage(7, dir)]);
    site = await servePages(dir);
    browser = await playwright.chromium.launch({ executablePath: executable, headless: true, args: ["--no-sandbox"] });
  });
  after(async () => {
    await browser?.close();
    site?.close();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  for (const major of ["6", "7"]) {
    describe(`AI SDK ${major}`, { concurrency: 1 }, () => {
      /**
       * Starts Weft with `script` (and `options`), opens the page against it (or against
       * `options.via`, a proxy) with `query`; uncaught page errors fail the test. `posts` are
       * the bodies of the page's `POST /api/chat` requests, in order.
       */
      async function open(t, script, query = {}, options = {}) {
        // A short shutdown grace: some scenarios leave a (stalled) run behind.
        const config = `${options.config ?? ""}\n[limits]\nshutdown_grace = "100ms"\n`;
        const weft = await startWeft(script, { corsOrigins: site.origin, config, persistent: options.persistent });
        t.after(() => weft.stop());
        let server = weft.base;
        let proxy;
        if (options.proxy) {
          proxy = await startProxy(weft.base);
          t.after(() => proxy.close());
          server = proxy.base;
        }
        const context = await browser.newContext();
        t.after(() => context.close());
        const page = await context.newPage();
        const errors = [];
        page.on("pageerror", (e) => errors.push(String(e)));
        t.after(() => assert.deepEqual(errors, [], "no uncaught error in the page"));
        const posts = [];
        page.on("request", (r) => {
          if (r.method() === "POST" && r.url() === `${server}/api/chat`) posts.push(JSON.parse(r.postData()));
        });
        const chat = query.chat ?? `chat-${t.name.replace(/[^A-Za-z0-9]+/g, "-").slice(0, 40)}-${major}`;
        const search = new URLSearchParams({ server, chat });
        for (const [k, v] of Object.entries(query)) if (k !== "chat") search.set(k, typeof v === "string" ? v : JSON.stringify(v));
        await page.goto(`${site.origin}/page-${major}.html?${search}`);
        await page.waitForSelector("#app");
        return { weft, page, posts, chat, proxy };
      }

      /** Polls the page until `check(view)` holds; returns that view. */
      async function waitFor(page, check, ms = 10_000) {
        let last;
        try {
          await until(async () => check((last = await view(page))), ms);
        } catch (e) {
          throw new Error(`${e.message}; the page: ${JSON.stringify(last)}`);
        }
        return last;
      }

      async function send(page, text) {
        await page.fill("#prompt", text);
        await page.click("#send");
      }

      /** Sends `text` and waits for the reply to end (or fail). */
      async function ask(page, text, count) {
        const before = (await view(page)).messages.length;
        await send(page, text);
        return waitFor(page, (v) => v.status === "error" || (v.status === "ready" && v.messages.length >= (count ?? before + 2)));
      }

      const ended = (v) => v.status === "ready" || v.status === "error";
      /** The page shows the end of its request number `n` (from 1): onFinish ran, React rendered it. */
      const finished = (v, n) => v.finishes >= n && ended(v) && JSON.stringify(v.messages.map((m) => m.id)) === JSON.stringify(v.finished);

      test("text: the reply streams in, and the session holds the exchange", async (t) => {
        const { weft, page, posts, chat } = await open(t, "text.json");
        const v = await ask(page, "Hi there");
        assert.equal(v.error, "");
        assert.equal(v.session, chat);
        assert.deepEqual(roles(v), ["user", "assistant"]);
        assert.equal(shownText(v.messages[0]), "Hi there");
        assert.equal(shownText(v.messages[1]), "Hello from Weft! How can I help?");
        assert.ok(v.messages[1].parts.filter((p) => p.kind === "text").every((p) => p.state === "done"));
        assert.equal(posts.length, 1);
        assert.equal(posts[0].id, chat);
        assert.equal(posts[0].trigger, "submit-message");
        assert.deepEqual(posts[0].messages.map((m) => m.id), [v.messages[0].id], "the user message's id is the page's");
        const session = await weft.session(chat);
        assert.equal(session.status, "completed");
        assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant"]);
        assert.equal(storedText(session.messages[0]), "Hi there");
        assert.equal(storedText(session.messages[1]), "Hello from Weft! How can I help?");
      });

      test("reasoning: the thinking arrives as a finished reasoning part before the text", async (t) => {
        const { weft, page, chat } = await open(t, "text.json");
        const v = await ask(page, "Hi there");
        const kinds = v.messages[1].parts.filter((p) => p.kind === "reasoning" || p.kind === "text").map((p) => p.kind);
        assert.deepEqual(kinds, ["reasoning", "text"]);
        const reasoning = v.messages[1].parts.find((p) => p.kind === "reasoning");
        assert.equal(reasoning.text, "The user greets me; I greet back.");
        assert.equal(reasoning.state, "done");
        const session = await weft.session(chat);
        const thinking = session.messages[1].content.find((c) => c.type === "thinking");
        assert.equal(thinking?.thinking, "The user greets me; I greet back.");
      });

      test("Weft's data parts are transient: onData gets them, the messages keep none", { todo: todo.transient }, async (t) => {
        const { page } = await open(t, "text.json");
        const v = await ask(page, "Hi there");
        assert.equal(v.error, "");
        const data = await page.evaluate(() => window.__weft.data);
        assert.ok(data.length > 0, "Weft sent data parts (state, updates, checkpoints)");
        assert.deepEqual(data.filter((d) => d.transient !== true).map((d) => d.type), [], "every data part is transient");
        assert.deepEqual(v.messages.flatMap((m) => m.parts.filter((p) => p.kind === "data").map((p) => p.type)), [], "no data part in the messages");
      });

      test("a client tool: onToolCall answers with addToolOutput, which goes back once", async (t) => {
        const output = { forecast: "sunny", celsius: 24 };
        const body = { tools: [{ name: "get_weather", description: "The weather in a city", parameters: { type: "object", properties: { city: { type: "string" } } } }] };
        const { weft, page, posts, chat } = await open(t, "weather.json", { body, run: "get_weather", outputs: { get_weather: output } });
        await send(page, "Weather in Paris?");
        const v = await waitFor(page, (v) => v.status === "error" || (v.status === "ready" && lastAssistantText(v).endsWith("It is sunny in Paris.")));
        assert.equal(v.error, "");
        assert.deepEqual(roles(v), ["user", "assistant"], "one assistant message for the whole run");
        assert.equal(shownText(v.messages[1]), "Let me look that up.It is sunny in Paris.");
        assert.deepEqual(tools(v), [{ kind: "tool", name: "get_weather", call: "call_weather_1", state: "output-available", input: { city: "Paris" }, output }]);
        assert.equal(posts.length, 2, "the question, then the tool's output");
        assert.equal(posts[1].messageId, v.messages[1].id, "the output continues the assistant message");
        const session = await weft.session(chat);
        assert.equal(session.status, "completed");
        const result = session.messages.find((m) => m.role === "toolResult");
        assert.equal(result.toolCallId, "call_weather_1");
        assert.deepEqual(JSON.parse(storedText(result)), output);
      });

      const echoPolicy = '[tools.echo]\napproval = "always"\n';

      test("a server tool needing approval, approved: it runs on the server; its streamed output stays out of the messages", async (t) => {
        const { weft, page, posts, chat } = await open(t, "echo-approval.json", {}, { config: echoPolicy });
        await send(page, "Echo one two three");
        let v = await waitFor(page, (v) => ended(v) && tools(v)[0]?.state === "approval-requested");
        assert.equal((await weft.session(chat)).status, "awaiting_approval");
        await page.click(".part.tool .approve");
        v = await waitFor(page, (v) => v.status === "error" || (v.status === "ready" && lastAssistantText(v).endsWith("Echoed.")));
        assert.equal(v.error, "");
        assert.deepEqual(roles(v), ["user", "assistant"]);
        assert.equal(shownText(v.messages[1]), "I will echo it.Echoed.");
        assert.deepEqual(tools(v), [{ kind: "tool", name: "echo", call: "call_echo_1", state: "output-available", input: { text: "one two three" }, output: "one two three" }]);
        assert.equal(posts.length, 2, "the question, then the approval");
        assert.equal(posts[1].messages.at(-1).parts.find((p) => p.type === "tool-echo").approval.approved, true);
        // The tool's output deltas came as transient data parts: onData saw them, the message has none.
        const deltas = (await page.evaluate(() => window.__weft.data)).filter((d) => d.type === "data-tool-output");
        assert.ok(deltas.length > 0 && deltas.every((d) => d.transient === true && d.data.toolCallId === "call_echo_1"), JSON.stringify(deltas));
        assert.equal(deltas.map((d) => d.data.delta).join(""), "one two three");
        assert.ok(v.messages.every((m) => m.parts.every((p) => p.type !== "data-tool-output")));
        const session = await weft.session(chat);
        assert.equal(session.status, "completed");
        const result = session.messages.find((m) => m.role === "toolResult");
        assert.equal(result.isError, false);
        assert.equal(storedText(result), "one two three");
      });

      test("a server tool needing approval, denied: tool-output-denied, and the model reads the reason", async (t) => {
        const { weft, page, posts, chat } = await open(t, "echo-approval.json", {}, { config: echoPolicy });
        await send(page, "Echo one two three");
        await waitFor(page, (v) => ended(v) && tools(v)[0]?.state === "approval-requested");
        await page.click(".part.tool .deny");
        const v = await waitFor(page, (v) => v.status === "error" || (v.status === "ready" && lastAssistantText(v).endsWith("Echoed.")));
        assert.equal(v.error, "");
        assert.deepEqual(roles(v), ["user", "assistant"]);
        assert.equal(tools(v)[0].state, "output-denied");
        assert.equal(posts.length, 2);
        const data = await page.evaluate(() => window.__weft.data);
        assert.deepEqual(data.filter((d) => d.type === "data-tool-output"), [], "the tool never ran");
        const session = await weft.session(chat);
        assert.equal(session.status, "completed");
        const denial = session.messages.find((m) => m.role === "toolResult");
        assert.equal(denial.isError, true);
        assert.match(storedText(denial), /Not now, thanks\./);
      });

      test("a client tool needing approval that onToolCall runs: it runs only once approved", { todo: todo.approvalFirst }, async (t) => {
        const body = { tools: [{ name: "set_theme", description: "Switches the theme", parameters: { type: "object", properties: { theme: { type: "string" } } }, requiresApproval: true }] };
        const { weft, page, posts, chat } = await open(t, "approval.json", { body, run: "set_theme", outputs: { set_theme: "The theme is dark." } });
        await send(page, "Dark mode please");
        let v = await waitFor(page, (v) => finished(v, 1));
        assert.deepEqual(tools(v).map((p) => p.state), ["approval-requested"]);
        assert.deepEqual(await page.evaluate(() => window.__weft.toolCalls), [], "onToolCall waits for the approval");
        await page.click(".part.tool .approve");
        v = await waitFor(page, (v) => posts.length > 3 || v.status === "error" || (v.status === "ready" && lastAssistantText(v).endsWith("Done after the theme call.")));
        assert.equal(v.error, "");
        assert.deepEqual(await page.evaluate(() => window.__weft.toolCalls), [{ toolName: "set_theme", toolCallId: "call_theme_1" }]);
        assert.deepEqual(tools(v).map((p) => [p.state, p.output]), [["output-available", "The theme is dark."]]);
        assert.equal(posts.length, 3, "the question, the approval, the output");
        const session = await weft.session(chat);
        assert.equal(session.status, "completed");
        assert.equal(storedText(session.messages.find((m) => m.role === "toolResult")), "The theme is dark.");
      });

      test("a client tool needing approval, run only later: no request loop in between", { todo: todo.approvalLoop }, async (t) => {
        const body = { tools: [{ name: "set_theme", description: "Switches the theme", parameters: { type: "object", properties: { theme: { type: "string" } } }, requiresApproval: true }] };
        const { weft, page, posts, chat } = await open(t, "approval.json", { body, outputs: { set_theme: "The theme is dark." } });
        await send(page, "Dark mode please");
        await waitFor(page, (v) => ended(v) && tools(v)[0]?.state === "approval-requested");
        await page.click(".part.tool .approve");
        // Approved, and now the page's to run: the part must leave `approval-responded`
        // (`tool-input-available` again), or sendAutomaticallyWhen posts again and again.
        let v = await waitFor(page, (v) => posts.length > 2 || (ended(v) && tools(v)[0]?.state === "input-available"));
        assert.equal(posts.length, 2, `no request loop after the approval (${posts.length} posts)`);
        assert.equal(v.error, "");
        assert.equal((await weft.session(chat)).status, "awaiting_tool_execution");
        await page.click(".part.tool .run");
        v = await waitFor(page, (v) => v.status === "error" || (v.status === "ready" && lastAssistantText(v).endsWith("Done after the theme call.")));
        assert.equal(v.error, "");
        assert.equal(posts.length, 3, "the question, the approval, the output");
        assert.deepEqual(roles(v), ["user", "assistant"]);
        assert.deepEqual(tools(v).map((p) => [p.state, p.output]), [["output-available", "The theme is dark."]]);
        const session = await weft.session(chat);
        assert.equal(session.status, "completed");
        assert.equal(storedText(session.messages.find((m) => m.role === "toolResult")), "The theme is dark.");
      });

      test("stop ends the run on the server; a new message then gets its answer", { todo: todo.stop }, async (t) => {
        const { weft, page, chat } = await open(t, "story-stall.json");
        await send(page, "Tell me a story");
        await waitFor(page, (v) => v.status === "streaming" && lastAssistantText(v).length > 0);
        const stopped = page.waitForResponse((r) => r.url().endsWith(`/api/chat/${chat}/stop`));
        await page.click("#stop");
        assert.ok((await stopped).ok(), `POST /api/chat/{id}/stop: ${(await stopped).status()}`);
        let v = await waitFor(page, (v) => v.status === "ready");
        const partial = lastAssistantText(v);
        assert.ok(story.startsWith(partial), partial);
        await until(async () => (await weft.session(chat)).status !== "running", 5_000);
        assert.equal((await weft.session(chat)).status, "aborted");
        v = await ask(page, "Another one");
        assert.equal(v.error, "");
        assert.deepEqual(roles(v), ["user", "assistant", "user", "assistant"]);
        assert.equal(shownText(v.messages[3]), "Here is another answer.");
        const session = await weft.session(chat);
        assert.equal(session.status, "completed");
        assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant", "user", "assistant"]);
        assert.ok(story.startsWith(storedText(session.messages[1])));
        assert.equal(storedText(session.messages[3]), "Here is another answer.");
      });

      test("stop() alone leaves the run going; a new message interrupts it and gets its answer", { todo: todo.interrupt }, async (t) => {
        const { weft, page, posts, chat } = await open(t, "story-stall.json", { stopEndpoint: "0" });
        await send(page, "Tell me a story");
        await waitFor(page, (v) => v.status === "streaming" && lastAssistantText(v).length > 0);
        await page.click("#stop");
        let v = await waitFor(page, (v) => v.status === "ready");
        // The AI SDK's stop() only closes the connection: to Weft that is a disconnect.
        assert.equal((await weft.session(chat)).status, "running");
        v = await ask(page, "Another one");
        assert.equal(v.error, "");
        assert.deepEqual(roles(v), ["user", "assistant", "user", "assistant"]);
        assert.equal(shownText(v.messages[3]), "Here is another answer.");
        assert.equal(posts.length, 2);
        const session = await weft.session(chat);
        assert.equal(session.status, "completed");
        assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant", "user", "assistant"]);
        assert.ok(story.startsWith(storedText(session.messages[1])));
        assert.equal(storedText(session.messages[3]), "Here is another answer.");
      });

      test("send only the last message (the docs' prepareSendMessagesRequest)", { todo: todo.lastOnly }, async (t) => {
        const { weft, page, posts, chat } = await open(t, "two-answers.json", { lastOnly: "1" });
        let v = await ask(page, "Hi");
        assert.equal(v.error, "");
        v = await ask(page, "And again?");
        assert.equal(v.error, "");
        assert.deepEqual(posts.map((p) => Object.keys(p).sort()), [["id", "message"], ["id", "message"]]);
        assert.deepEqual(v.messages.map((m) => [m.role, shownText(m)]), [
          ["user", "Hi"],
          ["assistant", "First answer."],
          ["user", "And again?"],
          ["assistant", "Second answer."],
        ]);
        const session = await weft.session(chat);
        assert.deepEqual(session.messages.map((m) => [m.role, storedText(m)]), [
          ["user", "Hi"],
          ["assistant", "First answer."],
          ["user", "And again?"],
          ["assistant", "Second answer."],
        ]);
      });

      test("reload mid-run with resume: true: the run streams on, its message shown once", async (t) => {
        const { weft, page, chat } = await open(t, "story-stall.json", { resume: "1", persist: "1" });
        await send(page, "Tell me a story");
        // The faux model streams the whole story, then stalls: the run goes on.
        let v = await waitFor(page, (v) => v.status === "error" || lastAssistantText(v) === story);
        const assistantId = assistants(v)[0].id;
        await page.reload();
        // The page comes back with its stored messages and resumes: the replay rebuilds the message.
        v = await waitFor(page, (v) => v.status === "error" || (v.status === "streaming" && lastAssistantText(v).length >= story.length));
        assert.equal(v.error, "");
        assert.deepEqual(roles(v), ["user", "assistant"], "the resumed run is the same message, not a second one");
        assert.equal(assistants(v)[0].id, assistantId);
        assert.equal(lastAssistantText(v), story, "the story once");
        // The run ends (aborted here): the resumed stream ends with it.
        assert.equal((await fetch(`${weft.base}/api/agent/session/${chat}/abort`, { method: "POST" })).status, 200);
        v = await waitFor(page, ended);
        assert.equal(v.status, "ready");
        assert.equal(lastAssistantText(v), story);
        const session = await weft.session(chat);
        assert.equal(session.status, "aborted");
        assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant"]);
        assert.equal(storedText(session.messages[1]), story);
      });

      // The page keeps its messages (in session storage, or by asking the server on load); the
      // server is killed while it streams, restarted on the same store, and the page reloaded.
      const fable =
        "Once upon a time a quick brown fox jumped over a lazy dog. The dog did not mind: it was asleep, dreaming of bones and long walks. The fox, proud of itself, jumped back and forth a dozen times, until the farmer came out with a lantern and everyone went to bed. The end.";
      for (const keep of ["persist", "restore"]) {
        test(`kill -9 of the server mid-run, restart, reload (${keep}): the recovered answer, once, in one message`, async (t) => {
          const { weft, page, chat } = await open(t, "slow.json", { resume: "1", [keep]: "1" }, { persistent: true });
          await send(page, "Tell me a story");
          let v = await waitFor(page, (v) => v.status === "error" || lastAssistantText(v).length >= 24);
          assert.equal(v.error, "");
          await weft.kill();
          assert.ok(lastAssistantText(await view(page)).length < fable.length, "killed mid-answer");
          await weft.restart();
          await page.reload();
          await page.waitForSelector("#app");
          v = await waitFor(page, (v) => v.status === "error" || (v.status === "ready" && lastAssistantText(v) === fable), 20_000);
          assert.equal(v.error, "", "no error on the page");
          assert.deepEqual(roles(v), ["user", "assistant"], "one assistant message, as the server has");
          assert.equal(shownText(assistants(v)[0]), fable, "the whole answer, once");
          const session = await weft.session(chat);
          assert.equal(session.status, "completed");
          assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant"]);
          assert.equal(storedText(session.messages[1]), fable);
        });
      }

      test("a new chat with resume: true: nothing to resume (204), no error; then it chats", { todo: todo.newChatResume }, async (t) => {
        const { weft, page, chat } = await open(t, "text.json", { resume: "1" });
        await page.waitForFunction(() => window.__weft.reconnects >= 1);
        assert.deepEqual(await page.evaluate(() => window.__weft.errors), [], "useChat reported no error");
        let v = await waitFor(page, (v) => v.status !== "submitted");
        assert.equal(v.status, "ready");
        assert.equal(v.error, "");
        v = await ask(page, "Hi there");
        assert.equal(v.error, "");
        assert.equal(lastAssistantText(v), "Hello from Weft! How can I help?");
        assert.equal((await weft.session(chat)).status, "completed");
      });

      test("edit a message (sendMessage({ text, messageId })): the chat goes on from the edited message", { todo: todo.edit }, async (t) => {
        const { weft, page, posts, chat } = await open(t, "two-answers.json");
        let v = await ask(page, "Hi");
        const userId = v.messages[0].id;
        await page.evaluate((messageId) => void window.chat.sendMessage({ text: "Hello instead", messageId }), userId);
        v = await waitFor(page, (v) => v.status === "error" || (v.status === "ready" && posts.length === 2 && v.messages[0] && shownText(v.messages[0]) === "Hello instead" && v.messages.length === 2));
        assert.equal(v.error, "");
        assert.deepEqual(roles(v), ["user", "assistant"]);
        assert.equal(v.messages[0].id, userId, "the edited message keeps its id");
        const answer = shownText(v.messages[1]);
        assert.ok(answer.length > 0);
        assert.equal(posts[1].trigger, "submit-message");
        assert.equal(posts[1].messageId, userId);
        assert.equal(posts[1].messages.length, 1);
        const session = await chatSession(weft, chat);
        assert.equal(session.status, "completed");
        assert.deepEqual(session.messages.map((m) => [m.role, storedText(m)]), [
          ["user", "Hello instead"],
          ["assistant", answer],
        ], "the chat id points at the edited branch");
        // The next message goes on from there.
        v = await ask(page, "And again?");
        assert.equal(v.error, "");
        assert.deepEqual(roles(v), ["user", "assistant", "user", "assistant"]);
        const next = await chatSession(weft, chat);
        assert.deepEqual(next.messages.map((m) => [m.role, storedText(m)]), [
          ["user", "Hello instead"],
          ["assistant", answer],
          ["user", "And again?"],
          ["assistant", lastAssistantText(v)],
        ]);
      });

      test("regenerate(): a new answer replaces the last one", { todo: todo.regenerate }, async (t) => {
        const { weft, page, posts, chat } = await open(t, "two-answers.json");
        let v = await ask(page, "Hi");
        assert.equal(lastAssistantText(v), "First answer.");
        const clicked = Date.now();
        await page.click("#regenerate");
        v = await waitFor(page, (v) => finished(v, 2));
        assert.equal(v.error, "");
        assert.deepEqual(roles(v), ["user", "assistant"]);
        assert.equal(posts[1].trigger, "regenerate-message");
        assert.deepEqual(posts[1].messages.map((m) => m.role), ["user"]);
        const answer = lastAssistantText(v);
        const session = await chatSession(weft, chat);
        assert.equal(session.status, "completed");
        assert.deepEqual(session.messages.map((m) => [m.role, storedText(m)]), [
          ["user", "Hi"],
          ["assistant", answer],
        ], "the chat id points at the regenerated branch");
        // (The faux model may well say the same again: the stored answer must be the new one.)
        assert.ok(session.messages[1].timestamp >= clicked, "the stored answer is the regenerated one");
      });

      // @ai-sdk/react 3.0.327 (AI SDK 6) drops the transport's `resumeStreamIsReplay` in
      // useChat({ transport }), so a replayed resume doubles the text in the page whatever the
      // server sends (test/use-chat/ai-sdk-contract.md, b); AI SDK 6 pages build their Chat themselves.
      test(`a network cut inside the page, then resumeStream(): the message is whole, once${major === "6" ? " (useChat({ chat: new Chat(…) }))" : ""}`, async (t) => {
        const query = major === "6" ? { chatObject: "1" } : {};
        const { weft, page, chat, proxy } = await open(t, "story-stall.json", query, { proxy: true });
        proxy.cut();
        await send(page, "Tell me a story");
        let v = await waitFor(page, ended);
        assert.equal(v.status, "error", "the cut is a network error");
        const partial = lastAssistantText(v);
        assert.ok(story.startsWith(partial) && partial.length > 0 && partial.length < story.length, partial);
        assert.equal((await weft.session(chat)).status, "running");
        await page.evaluate(() => void window.chat.resumeStream());
        // (The page shows its error state until the resumed stream writes: a new error is a failure.)
        v = await waitFor(page, (v) => v.errors > 1 || (v.status === "streaming" && lastAssistantText(v).length >= story.length));
        assert.equal(v.error, "");
        assert.deepEqual(roles(v), ["user", "assistant"]);
        assert.equal(lastAssistantText(v), story, "the story once");
        assert.deepEqual(v.messages[1].parts.map((p) => p.kind).filter((k) => k !== "data"), ["step-start", "text"], "no part twice");
        assert.equal((await fetch(`${weft.base}/api/agent/session/${chat}/abort`, { method: "POST" })).status, 200);
        v = await waitFor(page, ended);
        assert.equal(v.status, "ready");
        assert.equal(lastAssistantText(v), story);
        const session = await weft.session(chat);
        assert.equal(session.status, "aborted");
        assert.equal(storedText(session.messages[1]), story);
      });

      test("a failed model call: an error chunk puts the page in its error state with the message", async (t) => {
        const { weft, page, chat } = await open(t, "model-error.json");
        await send(page, "Think hard");
        const v = await waitFor(page, ended);
        assert.equal(v.status, "error");
        assert.match(v.error, /overloaded/);
        assert.doesNotMatch(v.error, /^\s*\{/, "the message, not a JSON body");
        const session = await weft.session(chat);
        assert.equal(session.status, "error");
      });
    });
  }
});
