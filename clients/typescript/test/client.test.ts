// The client against a real `weft serve` (faux provider): remote tools run by the client and
// resumed automatically, approvals, local streaming tools, abort, sessions, API keys, and
// reconnection with Last-Event-ID after the connection drops mid-run.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { WeftClient, WeftError, type NativeEvent, type ToolCall } from "../src/index.js";
import { NativeFrameSchema, SessionListSchema, SessionViewSchema } from "../src/types.js";
import { problems } from "../src/schema.js";
import { startWeft, type Weft } from "./server.js";

async function collect(stream: AsyncIterable<NativeEvent>): Promise<NativeEvent[]> {
  const events: NativeEvent[] = [];
  for await (const event of stream) {
    assert.deepEqual(problems(NativeFrameSchema, event), [], JSON.stringify(event));
    events.push(event);
  }
  return events;
}
const text = (events: NativeEvent[]) => events.map((e) => (e.type === "text_delta" ? e.delta : "")).join("");
const types = (events: NativeEvent[]) => events.map((e) => e.type);

describe("remote tools", () => {
  let weft: Weft;
  before(async () => (weft = await startWeft("weather.json")));
  after(() => weft.stop());

  test("a client tool runs when the run suspends and the run resumes by itself", async () => {
    const client = new WeftClient({ baseUrl: weft.base });
    const calls: { args: unknown; call: ToolCall }[] = [];
    const stream = client.execute("Weather in Paris?", {
      tools: [
        {
          name: "get_weather",
          description: "The weather in a city",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
          execute: async (args: { city: string }, call) => {
            calls.push({ args, call });
            return { output: `Sunny in ${args.city}, 21°C`, details: { celsius: 21 } };
          },
        },
      ],
    });
    const events = await collect(stream);
    const result = await stream.result();
    assert.deepEqual(calls.map((c) => c.args), [{ city: "Paris" }]);
    assert.equal(calls[0]?.call.id, "call_weather_1");
    // Two runs in one stream: suspended, then resumed with the result.
    const completes = events.filter((e) => e.type === "execute_complete");
    assert.deepEqual(completes.map((c) => c.status), ["awaiting_tool_execution", "completed"]);
    assert.ok(types(events).indexOf("awaiting_tool_execution") < types(events).lastIndexOf("session_start"));
    assert.equal(text(events), "Let me look that up.It is sunny in Paris.");
    assert.equal(result.status, "completed");
    assert.equal(result.sessionId, stream.sessionId);
    assert.deepEqual(result.pendingToolCalls, []);
    const toolResult = result.messages.find((m) => m.role === "toolResult");
    assert.ok(toolResult && toolResult.role === "toolResult");
    assert.equal(toolResult.isError, false);
    assert.deepEqual(toolResult.content, [{ type: "text", text: "Sunny in Paris, 21°C" }]);
    assert.deepEqual(toolResult.details, { celsius: 21 });
    // Usage and cost of both runs (the faux model is priced by the test's model file).
    assert.equal(result.usage.input, 100);
    assert.equal(result.usage.output, 19);
    assert.ok(Math.abs(result.cost.total - (100 * 2 + 19 * 8) / 1e6) < 1e-12, String(result.cost.total));

    const session = await client.getSession(result.sessionId);
    assert.deepEqual(problems(SessionViewSchema, session), []);
    assert.equal(session.status, "completed");
    assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant", "toolResult", "assistant"]);
    assert.equal(session.lastEventSeq, stream.lastEventId);
    const list = await client.listSessions();
    assert.deepEqual(problems(SessionListSchema, { sessions: list }), []);
    assert.ok(list.some((s) => s.id === result.sessionId));
  });

  test("without a handler the stream ends suspended, and a manual resume completes it", async () => {
    const client = new WeftClient({ baseUrl: weft.base });
    const first = client.execute("Weather?", { tools: [{ name: "get_weather", parameters: { type: "object" } }] });
    const result = await first.result();
    assert.equal(result.status, "awaiting_tool_execution");
    assert.deepEqual(result.pendingToolCalls, [{ id: "call_weather_1", name: "get_weather", arguments: { city: "Paris" } }]);
    const second = client.execute(
      [{ role: "toolResult", toolCallId: "call_weather_1", toolName: "get_weather", content: "Rain" }],
      { sessionId: result.sessionId },
    );
    assert.equal((await second.result()).status, "completed");
    // A thrown handler error becomes an error result the model sees.
    const failing = client.execute("Weather?", {
      tools: [{ name: "get_weather", execute: () => Promise.reject(new Error("no network in the test")) }],
    });
    const failed = await failing.result();
    const errorResult = failed.messages.find((m) => m.role === "toolResult");
    assert.ok(errorResult?.role === "toolResult" && errorResult.isError);
    assert.deepEqual(errorResult.content, [{ type: "text", text: "no network in the test" }]);
  });

  test("server errors are WeftErrors with the server's code", async () => {
    const client = new WeftClient({ baseUrl: weft.base });
    await assert.rejects(client.getSession("nope"), (e: unknown) => e instanceof WeftError && e.status === 404 && e.code === "session_not_found");
    const stream = client.execute("Hi"); // a new session needs a context
    await assert.rejects(stream.result(), (e: unknown) => e instanceof WeftError && e.status === 400);
  });
});

describe("approvals", () => {
  let weft: Weft;
  before(async () => (weft = await startWeft("approval.json")));
  after(() => weft.stop());

  const tool = (ran: unknown[]) => ({
    name: "set_theme",
    parameters: { type: "object", properties: { theme: { type: "string" } } },
    requiresApproval: true,
    execute: (args: unknown) => {
      ran.push(args);
      return "The theme is dark.";
    },
  });

  test("an approved call runs and the run goes on", async () => {
    const client = new WeftClient({ baseUrl: weft.base });
    const ran: unknown[] = [];
    const asked: ToolCall[][] = [];
    const stream = client.execute("Dark mode please", {
      tools: [tool(ran)],
      onApproval: (calls) => {
        asked.push(calls);
        return true;
      },
    });
    const events = await collect(stream);
    const result = await stream.result();
    assert.deepEqual(asked.map((c) => c.map((x) => x.id)), [["call_theme_1"]]);
    assert.ok(types(events).includes("approval_required"));
    assert.deepEqual(ran, [{ theme: "dark" }]);
    assert.equal(result.status, "completed");
    const toolResult = result.messages.find((m) => m.role === "toolResult");
    assert.ok(toolResult?.role === "toolResult" && !toolResult.isError);
    assert.deepEqual(toolResult.content, [{ type: "text", text: "The theme is dark." }]);
  });

  test("a denied call does not run and the model gets the denial", async () => {
    const client = new WeftClient({ baseUrl: weft.base });
    const ran: unknown[] = [];
    const stream = client.execute("Dark mode please", {
      tools: [tool(ran)],
      onApproval: (calls) => calls.map((c) => ({ toolCallId: c.id, approved: false, reason: "not today" })),
    });
    const result = await stream.result();
    assert.deepEqual(ran, []);
    assert.equal(result.status, "completed");
    const session = await client.getSession(result.sessionId);
    const roles = session.messages.map((m) => m.role);
    assert.deepEqual(roles, ["user", "assistant", "toolResult", "assistant"]);
    const denial = session.messages[2];
    assert.ok(denial?.role === "toolResult" && denial.isError);
    assert.match(JSON.stringify(denial.content), /not today/);
  });
});

describe("local tools, abort, keys", () => {
  test("a server tool's output streams as tool_execution_delta", async () => {
    const weft = await startWeft("echo.json");
    try {
      const client = new WeftClient({ baseUrl: weft.base });
      const events = await collect(client.execute("Echo", { context: { messages: [] } }));
      const deltas = events.flatMap((e) => (e.type === "tool_execution_delta" ? [e.delta] : []));
      assert.deepEqual(deltas, ["hello ", "brave ", "new ", "world"]);
      const thinking = events.flatMap((e) => (e.type === "thinking_delta" ? [e.delta] : [])).join("");
      assert.equal(thinking, "The echo tool streams its output.");
      const calls = events.flatMap((e) => (e.type === "toolcall_delta" ? [e.delta] : []));
      assert.ok(calls.length > 1, "tool-call arguments stream in pieces");
      assert.deepEqual(JSON.parse(calls.join("")), { text: "hello brave new world" });
    } finally {
      await weft.stop();
    }
  });

  test("abort stops a running run; the stream ends aborted", async () => {
    const weft = await startWeft("stall.json");
    try {
      const client = new WeftClient({ baseUrl: weft.base });
      const stream = client.execute("Go", { context: { messages: [] } });
      let aborted = false;
      for await (const event of stream) {
        if (event.type === "text_delta" && !aborted) {
          aborted = true;
          await stream.abort();
        }
      }
      const result = await stream.result();
      assert.equal(result.status, "aborted");
      const assistant = result.messages.find((m) => m.role === "assistant");
      assert.ok(assistant?.role === "assistant" && assistant.stopReason === "aborted");
      await assert.rejects(client.abort(result.sessionId), (e: unknown) => e instanceof WeftError && e.status === 409);
    } finally {
      await weft.stop();
    }
  });

  test("with API keys, the bearer key is sent and sessions are the owner's", async () => {
    const weft = await startWeft("weather.json", { apiKeys: "sk-alice-0123=alice,sk-bob-0123=bob" });
    try {
      const anonymous = new WeftClient({ baseUrl: weft.base });
      await assert.rejects(anonymous.listSessions(), (e: unknown) => e instanceof WeftError && e.status === 401);
      const alice = new WeftClient({ baseUrl: weft.base, apiKey: "sk-alice-0123" });
      const result = await alice.execute("Weather?", { tools: [{ name: "get_weather", execute: () => "Fog" }] }).result();
      assert.equal(result.status, "completed");
      assert.deepEqual((await alice.listSessions()).map((s) => s.id), [result.sessionId]);
      const bob = new WeftClient({ baseUrl: weft.base, apiKey: "sk-bob-0123" });
      assert.deepEqual(await bob.listSessions(), []);
      await assert.rejects(bob.getSession(result.sessionId), (e: unknown) => e instanceof WeftError && e.status === 404);
    } finally {
      await weft.stop();
    }
  });
});

describe("reconnection", () => {
  let weft: Weft;
  before(async () => (weft = await startWeft("slow.json")));
  after(() => weft.stop());

  /** A fetch whose event streams break after `cut` bytes, the first `times` times. */
  function flaky(cut: number, times: number): { fetch: typeof fetch; urls: string[]; lastEventIds: (string | null)[] } {
    let left = times;
    const urls: string[] = [];
    const lastEventIds: (string | null)[] = [];
    const wrapped: typeof fetch = async (input, init) => {
      const response = await fetch(input, init);
      urls.push(String(input));
      lastEventIds.push(new Headers(init?.headers).get("last-event-id"));
      if (!response.body || !response.headers.get("content-type")?.startsWith("text/event-stream") || left <= 0) return response;
      left--;
      const reader = response.body.getReader();
      let sent = 0;
      const body = new ReadableStream<Uint8Array>({
        async pull(controller) {
          const { done, value } = await reader.read();
          if (done) return controller.close();
          if (sent + value.length >= cut) {
            controller.enqueue(value.slice(0, Math.max(0, cut - sent)));
            void reader.cancel();
            controller.error(new TypeError("network error (cut by the test)"));
            return;
          }
          sent += value.length;
          controller.enqueue(value);
        },
      });
      return new Response(body, { status: response.status, headers: response.headers });
    };
    return { fetch: wrapped, urls, lastEventIds };
  }

  test("a dropped stream is resumed with Last-Event-ID: every delta once, in order", async () => {
    const net = flaky(700, 3);
    const client = new WeftClient({ baseUrl: weft.base, fetch: net.fetch, reconnectDelayMs: 20 });
    const stream = client.execute("A story", { context: { messages: [] } });
    const events = await collect(stream);
    const result = await stream.result();
    assert.equal(stream.reconnects, 3);
    assert.equal(net.urls.filter((u) => u.includes("/stream")).length, 3);
    assert.ok(net.lastEventIds.slice(1).every((id) => id !== null && Number(id) > 0), String(net.lastEventIds));
    const assistant = result.messages.find((m) => m.role === "assistant");
    assert.ok(assistant?.role === "assistant");
    const full = assistant.content.find((b) => b.type === "text");
    assert.ok(full?.type === "text");
    assert.equal(text(events), full.text, "no delta lost or repeated");
    assert.equal(types(events).filter((t) => t === "session_start").length, 1);
    assert.equal(types(events).filter((t) => t === "execute_complete").length, 1);
    assert.equal(result.status, "completed");
  });

  test("attach resumes a run after a given event, as a reloaded page does", async () => {
    const client = new WeftClient({ baseUrl: weft.base });
    let cursor: { sessionId: string; lastEventId: number } | undefined;
    const before: NativeEvent[] = [];
    const controller = new AbortController();
    // Read until some text arrived, then go away (the run goes on on the server).
    const reading = client.execute("A story", {
      context: { messages: [] },
      signal: controller.signal,
      onCursor: (c) => (cursor = c),
    });
    try {
      for await (const event of reading) {
        before.push(event);
        if (text(before).length > 40) controller.abort();
      }
    } catch {
      // aborted by the test
    }
    assert.ok(cursor, "the cursor was reported");
    const rest = await collect(client.attach(cursor.sessionId, { lastEventId: cursor.lastEventId }));
    const session = await client.getSession(cursor.sessionId);
    const assistant = session.messages.find((m) => m.role === "assistant");
    const full = assistant?.role === "assistant" ? assistant.content.find((b) => b.type === "text") : undefined;
    assert.ok(full?.type === "text");
    assert.equal(text(before) + text(rest), full.text);
    assert.ok(!types(rest).includes("session_start"));
    assert.equal(rest.at(-1)?.type, "execute_complete");
  });
});
