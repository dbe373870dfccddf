// The official AG-UI client (@ag-ui/client's HttpAgent) against `POST /api/ag-ui`: a text run, a
// client tool round trip, approval interrupts resolved and cancelled, and a reconnect.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { HttpAgent } from "@ag-ui/client";
import { startWeft } from "./server.mjs";

/** Runs the agent once; returns the events it saw and the RUN_FINISHED (or RUN_ERROR) event. */
async function run(agent, parameters = {}) {
  const events = [];
  let finished;
  await agent.runAgent(parameters, {
    onEvent: ({ event }) => {
      events.push(event);
    },
    onRunFinishedEvent: ({ event }) => {
      finished = event;
    },
  });
  return { events, finished, types: events.map((e) => e.type) };
}

const textOf = (events) => events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");
const lastAssistant = (agent) => [...agent.messages].reverse().find((m) => m.role === "assistant");

describe("AG-UI: a text run", () => {
  let weft;
  before(async () => (weft = await startWeft("text.json")));
  after(() => weft.stop());

  test("streams reasoning and text; the thread is the session; the state comes back", async () => {
    const agent = new HttpAgent({ url: `${weft.base}/api/ag-ui`, threadId: "agui-text", initialState: { theme: "light" } });
    agent.addMessage({ id: "u1", role: "user", content: "Hi there" });
    // Weft's state only when asked.
    const { events, finished, types } = await run(agent, { forwardedProps: { weft: { state: true } } });
    assert.equal(types[0], "RUN_STARTED");
    assert.equal(types.at(-1), "RUN_FINISHED");
    assert.ok(types.includes("REASONING_START") && types.includes("REASONING_MESSAGE_CONTENT"));
    assert.ok(!types.some((t) => t.startsWith("THINKING")));
    assert.equal(textOf(events), "Hello from Weft! How can I help?");
    const reasoning = events.filter((e) => e.type === "REASONING_MESSAGE_CONTENT").map((e) => e.delta).join("");
    assert.equal(reasoning, "The user greets me; I greet back.");
    assert.deepEqual(finished.outcome, { type: "success" });
    assert.equal(lastAssistant(agent).content, "Hello from Weft! How can I help?");
    // STATE_SNAPSHOT: the client's state kept, the session's under `weft`.
    assert.equal(agent.state.theme, "light");
    assert.deepEqual(agent.state.weft, { sessionId: "agui-text", status: "completed" });
    // While the run goes on, each node run's state is under `weft.state` (the client's kept),
    // and what the node changed follows as a JSON Patch the client applied.
    const during = events.find((e) => e.type === "STATE_SNAPSHOT" && e.snapshot.weft.status === "running");
    assert.equal(during.snapshot.theme, "light");
    assert.equal(during.snapshot.weft.state.turns, 1);
    const delta = events.find((e) => e.type === "STATE_DELTA");
    assert.ok(delta.delta.every((op) => op.op === "add" && op.path.startsWith("/weft/state/")), JSON.stringify(delta));
    const session = await weft.session("agui-text");
    assert.equal(session.status, "completed");
    assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant"]);
  });

  test("without forwardedProps.weft.state the client's state is its own: no STATE_* from Weft", async () => {
    const agent = new HttpAgent({ url: `${weft.base}/api/ag-ui`, threadId: "agui-plain", initialState: { theme: "dark" } });
    agent.addMessage({ id: "u1", role: "user", content: "Hi there" });
    const { events, types } = await run(agent);
    assert.equal(textOf(events), "Hello from Weft! How can I help?");
    assert.ok(!types.some((t) => t.startsWith("STATE_")), types.join(" "));
    assert.deepEqual(agent.state, { theme: "dark" });
  });
});

describe("AG-UI: a client tool", () => {
  let weft;
  before(async () => (weft = await startWeft("weather.json")));
  after(() => weft.stop());

  test("the run finishes with the pending call; the tool message resumes it and is not echoed", async () => {
    const agent = new HttpAgent({ url: `${weft.base}/api/ag-ui`, threadId: "agui-tool" });
    agent.addMessage({ id: "u1", role: "user", content: "Weather in Paris?" });
    const tools = [{ name: "get_weather", description: "The weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];
    const first = await run(agent, { tools });
    assert.deepEqual(first.finished.outcome, { type: "success", pendingToolCallIds: ["call_weather_1"] });
    assert.ok(!first.types.includes("TOOL_CALL_RESULT"));
    const call = lastAssistant(agent).toolCalls?.[0];
    assert.equal(call?.id, "call_weather_1");
    assert.deepEqual(JSON.parse(call.function.arguments), { city: "Paris" });
    assert.equal((await weft.session("agui-tool")).status, "awaiting_tool_execution");

    // The client runs its tool and sends the result in the next run.
    agent.addMessage({ id: "tool-1", role: "tool", toolCallId: call.id, content: "Sunny, 24 °C" });
    const second = await run(agent, { tools });
    assert.ok(!second.types.includes("TOOL_CALL_RESULT"), "the client's own result is not echoed back");
    assert.equal(textOf(second.events), "It is sunny in Paris.");
    assert.deepEqual(second.finished.outcome, { type: "success" });
    assert.equal(agent.messages.filter((m) => m.role === "tool").length, 1);
    const session = await weft.session("agui-tool");
    assert.equal(session.status, "completed");
    const result = session.messages.find((m) => m.role === "toolResult");
    assert.deepEqual(result.content, [{ type: "text", text: "Sunny, 24 °C" }]);
    assert.equal(result.toolName, "get_weather");
  });
});

describe("AG-UI: approvals", () => {
  let weft;
  before(async () => (weft = await startWeft("approval.json")));
  after(() => weft.stop());

  // A client tool whose calls need the user's approval first (Weft's `metadata.requiresApproval`).
  const tools = [{ name: "set_theme", description: "Switches the page's theme", parameters: { type: "object", properties: { theme: { type: "string" } } }, metadata: { requiresApproval: true } }];

  async function interrupted(threadId) {
    const agent = new HttpAgent({ url: `${weft.base}/api/ag-ui`, threadId });
    agent.addMessage({ id: "u1", role: "user", content: "Dark mode please" });
    const first = await run(agent, { tools });
    assert.equal(first.finished.outcome.type, "interrupt");
    assert.equal(first.finished.outcome.interrupts.length, 1);
    const [interrupt] = first.finished.outcome.interrupts;
    assert.equal(interrupt.id, "call_theme_1");
    assert.equal(interrupt.toolCallId, "call_theme_1");
    assert.equal(interrupt.reason, "tool_call");
    assert.equal(interrupt.responseSchema.properties.approved.type, "boolean");
    assert.deepEqual(agent.pendingInterrupts.map((i) => i.id), ["call_theme_1"]);
    assert.equal((await weft.session(threadId)).status, "awaiting_approval");
    return agent;
  }

  test("an interrupt resolved with approval hands the call to the client, whose result ends the run", async () => {
    const agent = await interrupted("agui-approve");
    const second = await run(agent, { tools, resume: [{ interruptId: "call_theme_1", status: "resolved", payload: { approved: true } }] });
    assert.deepEqual(second.finished.outcome, { type: "success", pendingToolCallIds: ["call_theme_1"] });
    assert.deepEqual(agent.pendingInterrupts, []);
    agent.addMessage({ id: "tool-1", role: "tool", toolCallId: "call_theme_1", content: "The theme is dark." });
    const third = await run(agent, { tools });
    assert.ok(!third.types.includes("TOOL_CALL_RESULT"));
    assert.equal(textOf(third.events), "Done after the theme call.");
    assert.deepEqual(third.finished.outcome, { type: "success" });
    const session = await weft.session("agui-approve");
    assert.equal(session.status, "completed");
    const result = session.messages.find((m) => m.role === "toolResult");
    assert.equal(result.isError, false);
    assert.deepEqual(result.content, [{ type: "text", text: "The theme is dark." }]);
  });

  test("a cancelled interrupt denies the call; the model sees why", async () => {
    const agent = await interrupted("agui-cancel");
    const second = await run(agent, { tools, resume: [{ interruptId: "call_theme_1", status: "cancelled" }] });
    const result = second.events.find((e) => e.type === "TOOL_CALL_RESULT");
    assert.equal(result?.toolCallId, "call_theme_1");
    assert.match(result.content, /cancelled/);
    assert.equal(textOf(second.events), "Done after the theme call.");
    assert.deepEqual(second.finished.outcome, { type: "success" });
    const session = await weft.session("agui-cancel");
    assert.equal(session.status, "completed");
    const denial = session.messages.find((m) => m.role === "toolResult");
    assert.equal(denial.isError, true);
    assert.match(JSON.stringify(denial.content), /cancelled/);
  });
});

describe("AG-UI: reconnect", () => {
  let weft;
  before(async () => (weft = await startWeft("slow.json")));
  after(() => weft.stop());

  test("a client that dropped the stream runs again with nothing new and gets the whole run", async () => {
    const story = "Once upon a time a quick brown fox jumped over a lazy dog. The dog did not mind: it was asleep, dreaming of bones and long walks. The fox, proud of itself, jumped back and forth a dozen times, until the farmer came out with a lantern and everyone went to bed. The end.";
    const user = { id: "u1", role: "user", content: "Tell me a story" };
    const first = new HttpAgent({ url: `${weft.base}/api/ag-ui`, threadId: "agui-reconnect", initialMessages: [user] });
    const seen = [];
    let runId;
    await first
      .runAgent({}, {
        onEvent: ({ event }) => {
          seen.push(event);
          if (event.type === "RUN_STARTED") runId = event.runId;
          if (event.type === "TEXT_MESSAGE_CONTENT") first.abortRun();
        },
      })
      .catch(() => {});
    assert.ok(textOf(seen).length < story.length, "the first stream was cut mid-run");
    assert.equal((await weft.session("agui-reconnect")).status, "running");

    // A new client (a reloaded page) with the same thread and messages: nothing new to run.
    const second = new HttpAgent({ url: `${weft.base}/api/ag-ui`, threadId: "agui-reconnect", initialMessages: [user] });
    const again = await run(second);
    assert.equal(again.events.find((e) => e.type === "RUN_STARTED").runId, runId, "the same run");
    assert.equal(textOf(again.events), story);
    assert.deepEqual(again.finished.outcome, { type: "success" });
    assert.equal(lastAssistant(second).content, story);
    const session = await weft.session("agui-reconnect");
    assert.equal(session.status, "completed");
    assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant"], "the run ran once");
  });
});

describe("AG-UI: a server killed mid-run", () => {
  let weft;
  before(async () => (weft = await startWeft("slow.json", { persistent: true })));
  after(() => weft.stop());

  test("kill -9, restart: a reloaded client with the thread's messages gets the recovered answer, once", async () => {
    const story = "Once upon a time a quick brown fox jumped over a lazy dog. The dog did not mind: it was asleep, dreaming of bones and long walks. The fox, proud of itself, jumped back and forth a dozen times, until the farmer came out with a lantern and everyone went to bed. The end.";
    const user = { id: "u1", role: "user", content: "Tell me a story" };
    const first = new HttpAgent({ url: `${weft.base}/api/ag-ui`, threadId: "agui-killed", initialMessages: [user] });
    const seen = [];
    // The page goes away mid-answer (a cut connection makes @ag-ui/client 1.0 rethrow from its
    // reader's cancel() as an unhandled rejection, which Node's test runner counts against the
    // test: the client aborts instead), then the server is killed.
    await first
      .runAgent({}, {
        onEvent: ({ event }) => {
          seen.push(event);
          if (textOf(seen).length >= 24) first.abortRun();
        },
      })
      .catch(() => {});
    await weft.kill();
    assert.ok(textOf(seen).length < story.length, "killed mid-answer");
    await weft.restart();

    const second = new HttpAgent({ url: `${weft.base}/api/ag-ui`, threadId: "agui-killed", initialMessages: [user] });
    const again = await run(second);
    assert.ok(!again.types.includes("RUN_ERROR"), again.types.join());
    assert.equal(again.types.filter((t) => t === "RUN_STARTED").length, 1);
    assert.equal(textOf(again.events), story, "the whole answer, once");
    assert.deepEqual(again.finished.outcome, { type: "success" });
    assert.deepEqual(second.messages.map((m) => m.role), ["user", "reasoning", "assistant"], "one answer, as the server has");
    assert.equal(lastAssistant(second).content, story);
    const session = await weft.session("agui-killed");
    assert.equal(session.status, "completed");
    assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant"]);
  });
});
