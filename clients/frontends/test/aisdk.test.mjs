// The Vercel AI SDK's own client code (DefaultChatTransport, readUIMessageStream), majors 6 and 7,
// against `POST /api/chat` and `GET /api/chat/{id}/stream`: text with reasoning, a client-side
// tool, approvals granted and denied, and a resume after a dropped connection.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import * as ai6 from "ai6";
import * as ai7 from "ai7";
import { startWeft } from "./server.mjs";

const story = "Once upon a time a quick brown fox jumped over a lazy dog. The dog did not mind: it was asleep, dreaming of bones and long walks. The fox, proud of itself, jumped back and forth a dozen times, until the farmer came out with a lantern and everyone went to bed. The end.";
const user = (id, text) => ({ id, role: "user", parts: [{ type: "text", text }] });
const textOf = (message) => message.parts.filter((p) => p.type === "text").map((p) => p.text).join("");

for (const [major, ai] of [["6", ai6], ["7", ai7]]) {
  /** Sends `messages` and reads the response into the assistant message (continuing `message`). */
  async function send(transport, chatId, messages, message) {
    const stream = await transport.sendMessages({ chatId, messages, trigger: "submit-message", messageId: undefined, abortSignal: undefined });
    return read(stream, message);
  }
  async function read(stream, message) {
    let last;
    for await (const m of ai.readUIMessageStream({ message, stream, terminateOnError: true })) last = m;
    // A stream that changes nothing (a run that only hands a call to the client) yields no message.
    return structuredClone(last ?? message);
  }

  describe(`AI SDK ${major}: text with reasoning`, () => {
    let weft;
    before(async () => (weft = await startWeft("text.json")));
    after(() => weft.stop());

    test("the reply's reasoning and text parts; the header; the session", async () => {
      const response = await fetch(`${weft.base}/api/chat`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ id: `raw-${major}`, messages: [user("u0", "Hi")], trigger: "submit-message" }) });
      assert.equal(response.headers.get("x-vercel-ai-ui-message-stream"), "v1");
      assert.match(response.headers.get("content-type"), /text\/event-stream/);
      assert.match(await response.text(), /data: \[DONE\]/);

      const transport = new ai.DefaultChatTransport({ api: `${weft.base}/api/chat` });
      const chatId = `chat-text-${major}`;
      const reply = await send(transport, chatId, [user("u1", "Hi there")]);
      assert.equal(reply.role, "assistant");
      const reasoning = reply.parts.find((p) => p.type === "reasoning");
      assert.equal(reasoning?.text, "The user greets me; I greet back.");
      assert.equal(reasoning.state, "done");
      assert.equal(textOf(reply), "Hello from Weft! How can I help?");
      const session = await weft.session(chatId);
      assert.equal(session.status, "completed");
      assert.deepEqual(session.messages.map((m) => m.role), ["user", "assistant"]);
    });
  });

  describe(`AI SDK ${major}: a client-side tool`, () => {
    let weft;
    before(async () => (weft = await startWeft("weather.json")));
    after(() => weft.stop());

    test("the tool part waits for the client, whose output resumes the run", async () => {
      const tools = [{ name: "get_weather", description: "The weather in a city", parameters: { type: "object", properties: { city: { type: "string" } } } }];
      const transport = new ai.DefaultChatTransport({ api: `${weft.base}/api/chat`, body: { tools } });
      const chatId = `chat-tool-${major}`;
      const question = user("u1", "Weather in Paris?");
      const first = await send(transport, chatId, [question]);
      const part = first.parts.find((p) => p.type === "tool-get_weather");
      assert.equal(part?.toolCallId, "call_weather_1");
      assert.equal(part.state, "input-available");
      assert.deepEqual(part.input, { city: "Paris" });
      assert.equal((await weft.session(chatId)).status, "awaiting_tool_execution");

      // What useChat does on addToolOutput: the part gets its output, the messages go back.
      part.state = "output-available";
      part.output = { forecast: "sunny", celsius: 24 };
      const second = await send(transport, chatId, [question, first], first);
      assert.equal(second.id, first.id, "the same assistant message goes on");
      const answered = second.parts.find((p) => p.type === "tool-get_weather");
      assert.equal(answered.state, "output-available");
      assert.deepEqual(answered.output, { forecast: "sunny", celsius: 24 }, "the client's output is not replaced by an echo");
      assert.equal(textOf(second), "Let me look that up.It is sunny in Paris.");
      const session = await weft.session(chatId);
      assert.equal(session.status, "completed");
      const result = session.messages.find((m) => m.role === "toolResult");
      assert.deepEqual(JSON.parse(result.content[0].text), { forecast: "sunny", celsius: 24 });
    });
  });

  describe(`AI SDK ${major}: approvals`, () => {
    let weft;
    before(async () => (weft = await startWeft("approval.json")));
    after(() => weft.stop());
    const tools = [{ name: "set_theme", description: "Switches the theme", parameters: { type: "object", properties: { theme: { type: "string" } } }, requiresApproval: true }];

    async function requested(chatId) {
      const transport = new ai.DefaultChatTransport({ api: `${weft.base}/api/chat`, body: { tools } });
      const question = user("u1", "Dark mode please");
      const first = await send(transport, chatId, [question]);
      const part = first.parts.find((p) => p.type === "tool-set_theme");
      assert.equal(part?.state, "approval-requested");
      assert.equal(part.approval.id, "call_theme_1");
      assert.equal((await weft.session(chatId)).status, "awaiting_approval");
      return { transport, question, first, part };
    }

    test("an approval granted: the call goes to the client, whose output ends the run", async () => {
      const chatId = `chat-approve-${major}`;
      const { transport, question, first, part } = await requested(chatId);
      // What useChat does on addToolApprovalResponse.
      part.state = "approval-responded";
      part.approval = { id: part.approval.id, approved: true };
      const second = await send(transport, chatId, [question, first], first);
      // The approved call is handed to the client to run (input-available, its approval kept),
      // so useChat's approval check is false and it does not post the approval again.
      const waiting = second.parts.find((p) => p.type === "tool-set_theme");
      assert.equal(waiting.state, "input-available");
      assert.equal(waiting.approval?.approved, true);
      assert.equal((await weft.session(chatId)).status, "awaiting_tool_execution");
      waiting.state = "output-available";
      waiting.output = "The theme is dark.";
      const third = await send(transport, chatId, [question, second], second);
      const done = third.parts.find((p) => p.type === "tool-set_theme");
      assert.equal(done.state, "output-available");
      assert.equal(done.output, "The theme is dark.");
      assert.match(textOf(third), /Done after the theme call\.$/);
      const session = await weft.session(chatId);
      assert.equal(session.status, "completed");
      assert.equal(session.messages.find((m) => m.role === "toolResult").isError, false);
    });

    test("an approval denied: tool-output-denied, and the model sees the reason", async () => {
      const chatId = `chat-deny-${major}`;
      const { transport, question, first, part } = await requested(chatId);
      part.state = "approval-responded";
      part.approval = { id: part.approval.id, approved: false, reason: "not today" };
      const second = await send(transport, chatId, [question, first], first);
      const denied = second.parts.find((p) => p.type === "tool-set_theme");
      assert.equal(denied.state, "output-denied");
      assert.match(textOf(second), /Done after the theme call\.$/);
      const session = await weft.session(chatId);
      assert.equal(session.status, "completed");
      const denial = session.messages.find((m) => m.role === "toolResult");
      assert.equal(denial.isError, true);
      assert.match(JSON.stringify(denial.content), /not today/);
    });
  });

  describe(`AI SDK ${major}: resume`, () => {
    let weft;
    before(async () => (weft = await startWeft("slow.json")));
    after(() => weft.stop());

    test("after a dropped connection, reconnectToStream gets the running stream; 204 once it is over", async () => {
      const transport = new ai.DefaultChatTransport({ api: `${weft.base}/api/chat` });
      const chatId = `chat-resume-${major}`;
      const controller = new AbortController();
      const stream = await transport.sendMessages({ chatId, messages: [user("u1", "A story please")], trigger: "submit-message", messageId: undefined, abortSignal: controller.signal });
      const reader = stream.getReader();
      let partial = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        if (value.type === "text-delta") {
          partial += value.delta;
          controller.abort();
          break;
        }
      }
      await reader.cancel().catch(() => {});
      assert.ok(partial.length > 0 && partial.length < story.length);
      assert.equal((await weft.session(chatId)).status, "running");

      const resumed = await transport.reconnectToStream({ chatId });
      assert.ok(resumed, "a stream while the run goes on");
      const reply = await read(resumed);
      assert.equal(textOf(reply), story);
      assert.equal(reply.parts.find((p) => p.type === "reasoning")?.text, "A story about a fox.");
      assert.equal((await weft.session(chatId)).status, "completed");
      assert.equal(await transport.reconnectToStream({ chatId }), null, "204: nothing runs");
    });
  });
}
