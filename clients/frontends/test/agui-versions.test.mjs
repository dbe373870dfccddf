// `POST /api/ag-ui` speaks each client's AG-UI version: `@ag-ui/client` 1.0 (which declares
// `protocolVersion: "1.0"`) gets 1.0's stream exactly as before, `@ag-ui/client` 0.0.x (the one
// CopilotKit 1.x bundles, installed here as ag-ui-client-0; it declares no version and its zod
// schemas reject 1.0's `pendingToolCallIds` and `cancelled` outcome) gets what it accepts.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { HttpAgent } from "@ag-ui/client";
import { HttpAgent as HttpAgent0 } from "ag-ui-client-0";
import { startWeft, until } from "./server.mjs";

const tools = [{ name: "get_weather", description: "The weather in a city", parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] } }];

/**
 * An agent of `Agent` on `thread` whose request bodies are kept in `bodies`, and the events of
 * each response as the server sent them (the `data:` lines, parsed) in `streams`.
 */
function agentOf(Agent, weft, thread) {
  const bodies = [];
  const streams = [];
  const agent = new Agent({
    url: `${weft.base}/api/ag-ui`,
    threadId: thread,
    fetch: async (url, init) => {
      bodies.push(JSON.parse(init.body));
      const response = await fetch(url, init);
      const raw = response.clone().text();
      streams.push(raw.then((text) => text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => JSON.parse(l.slice(6)))));
      return response;
    },
  });
  return { agent, bodies, streams };
}

/** Runs once; the events the client accepted (after its own validation) and its RUN_FINISHED. */
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
  return { events, finished };
}

/** A stream without what changes between runs: the clock in checkpoints, Weft's run ids. */
function normalized(events, runId) {
  return JSON.parse(JSON.stringify(events).replaceAll(runId, "RUN").replace(/"timestamp":\d+/g, '"timestamp":0'));
}

/** Starts a run of `agent` on a slow script, stops it on the server, returns the run's end. */
async function stopped(weft, agent, thread) {
  agent.addMessage({ id: "u1", role: "user", content: "Tell me a story" });
  const running = run(agent);
  await until(async () => (await fetch(`${weft.base}/api/agent/session/${thread}`)).status === 200 && (await weft.session(thread)).status === "running");
  const abort = await fetch(`${weft.base}/api/agent/session/${thread}/abort`, { method: "POST" });
  assert.equal(abort.status, 200);
  const { finished } = await running;
  assert.equal((await weft.session(thread)).status, "aborted");
  return finished;
}

describe("@ag-ui/client 1.0: the 1.0 stream, unchanged", () => {
  test("a client tool run: every event as the server sent it, exactly as before; pendingToolCallIds named", async (t) => {
    const weft = await startWeft("weather.json");
    t.after(() => weft.stop());
    const { agent, bodies, streams } = agentOf(HttpAgent, weft, "v1-tool");
    agent.addMessage({ id: "u1", role: "user", content: "Weather in Paris?" });
    const { finished } = await run(agent, { tools });
    assert.equal(bodies[0].protocolVersion, "1.0");
    assert.deepEqual(finished.outcome, { type: "success", pendingToolCallIds: ["call_weather_1"] });
    const events = await streams[0];
    const runId = events[0].runId;
    const text = ["Let ", "me l", "ook ", "that", " up."].map((delta) => ({ type: "TEXT_MESSAGE_CONTENT", messageId: "RUN-0", delta }));
    const args = ['{"ci', 'ty":', '"Par', 'is"}'].map((delta) => ({ type: "TOOL_CALL_ARGS", toolCallId: "call_weather_1", delta }));
    const pending = [{ id: "call_weather_1", name: "get_weather", state: "awaiting_result" }];
    const state = { message_count: 2, pending, step_count: 1, turns: 1 };
    assert.deepEqual(normalized(events, runId), [
      { type: "RUN_STARTED", threadId: "v1-tool", runId: "RUN" },
      { type: "STEP_STARTED", stepName: "think" },
      { type: "TEXT_MESSAGE_START", messageId: "RUN-0", role: "assistant" },
      ...text,
      { type: "TEXT_MESSAGE_END", messageId: "RUN-0" },
      { type: "TOOL_CALL_START", toolCallId: "call_weather_1", toolCallName: "get_weather", parentMessageId: "RUN-0" },
      ...args,
      { type: "TOOL_CALL_END", toolCallId: "call_weather_1" },
      { type: "STEP_FINISHED", stepName: "think" },
      // (No STATE_SNAPSHOT / STATE_DELTA: Weft's state goes only to a client that asks for it.)
      { type: "CUSTOM", name: "checkpoint", value: { checkpointId: "think-0", checkpointNs: "react", state, step: 1, threadId: "v1-tool", timestamp: 0 } },
      {
        type: "RUN_FINISHED",
        threadId: "v1-tool",
        runId: "RUN",
        outcome: { type: "success", pendingToolCallIds: ["call_weather_1"] },
        usage: [{ provider: "faux", model: "faux", inputTokens: 40, outputTokens: 12, totalTokens: 52, cachedInputTokens: 0, cacheWriteInputTokens: 0 }],
      },
    ]);
  });

  test("a stopped run finishes cancelled", async (t) => {
    const weft = await startWeft("slow.json");
    t.after(() => weft.stop());
    const { agent, bodies } = agentOf(HttpAgent, weft, "v1-stop");
    const finished = await stopped(weft, agent, "v1-stop");
    assert.equal(bodies[0].protocolVersion, "1.0");
    assert.deepEqual(finished.outcome, { type: "cancelled" });
  });
});

describe("@ag-ui/client 0.0.x (CopilotKit's): outcomes it accepts", () => {
  test("a client tool run finishes with a plain success; its tool message resumes it", async (t) => {
    const weft = await startWeft("weather.json");
    t.after(() => weft.stop());
    const { agent, bodies } = agentOf(HttpAgent0, weft, "v0-tool");
    agent.addMessage({ id: "u1", role: "user", content: "Weather in Paris?" });
    const first = await run(agent, { tools });
    assert.equal("protocolVersion" in bodies[0], false, "0.0.x declares no version");
    assert.deepEqual(first.finished.outcome, { type: "success" });
    const call = agent.messages.at(-1).toolCalls?.[0];
    assert.equal(call?.id, "call_weather_1");
    assert.equal((await weft.session("v0-tool")).status, "awaiting_tool_execution");
    agent.addMessage({ id: "tool-1", role: "tool", toolCallId: call.id, content: "Sunny, 24 °C" });
    const second = await run(agent, { tools });
    const text = second.events.filter((e) => e.type === "TEXT_MESSAGE_CONTENT").map((e) => e.delta).join("");
    assert.equal(text, "It is sunny in Paris.");
    assert.deepEqual(second.finished.outcome, { type: "success" });
    const session = await weft.session("v0-tool");
    assert.equal(session.status, "completed");
    assert.equal(session.messages.find((m) => m.role === "toolResult").content[0].text, "Sunny, 24 °C");
  });

  test("a stopped run finishes without an outcome (0.0.x has no cancelled), not with an error", async (t) => {
    const weft = await startWeft("slow.json");
    t.after(() => weft.stop());
    const { agent } = agentOf(HttpAgent0, weft, "v0-stop");
    const finished = await stopped(weft, agent, "v0-stop");
    assert.equal(finished.type, "RUN_FINISHED");
    assert.equal(finished.outcome, undefined);
  });
});
