// A small chat page on the AI SDK's React `useChat`, bundled once per major by
// test/use-chat.test.mjs (`ai` and `@ai-sdk/react` are aliased to ai6 + ai-sdk-react6, or
// ai7 + ai-sdk-react7). The query string sets it up:
//
//   server=URL        Weft's base URL (the API is URL/api/chat)
//   chat=ID           the chat id (default: one the AI SDK generates)
//   body=JSON         DefaultChatTransport({ body }): Weft's extras (tools, system, options)
//   run=a,b           client tools the page runs as soon as they are called (onToolCall);
//                     other client calls wait for a click on their "Run" button
//   outputs=JSON      { toolName: output } the page answers with
//   resume=1          useChat({ resume: true })
//   persist=1         the messages live in sessionStorage (restored on load, as an app would)
//   restore=1         the page starts with the server's messages (GET /api/chat/{id})
//   lastOnly=1        the docs' "send only the last message" prepareSendMessagesRequest
//   chatObject=1      useChat({ chat: new Chat({ transport, … }) }) instead of useChat({ transport, … })
//   stopEndpoint=0    the Stop button only calls useChat's stop() (no POST /api/chat/{id}/stop)
//
// What the tests read: #app's data-status / data-session / data-error, the messages in #log
// (`.message.<role>[data-id]`, each part `.part.<kind>`, tool parts with data-state /
// data-call / data-name), and window.__weft (onError's messages, onData's parts, onFinish's
// message ids, onToolCall's calls, settled reconnects).
import { Chat, useChat } from "@ai-sdk/react";
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai";
import { useEffect, useState } from "react";
import { createRoot } from "react-dom/client";

const params = new URLSearchParams(location.search);
const flag = (name) => params.get(name) === "1";
const api = `${params.get("server")}/api/chat`;
const chatId = params.get("chat") ?? undefined;
const body = params.has("body") ? JSON.parse(params.get("body")) : undefined;
const runAtOnce = new Set((params.get("run") ?? "").split(",").filter(Boolean));
const outputs = params.has("outputs") ? JSON.parse(params.get("outputs")) : {};
const storageKey = `weft-chat:${chatId}`;
/** The messages the page starts with: the server's (GET /api/chat/{id}), the session storage's, or none. */
async function restoredMessages() {
  if (flag("restore")) {
    const response = await fetch(`${api}/${encodeURIComponent(chatId)}`);
    return response.ok ? (await response.json()).messages : [];
  }
  return flag("persist") ? JSON.parse(sessionStorage.getItem(storageKey) ?? "[]") : [];
}
const initialMessages = await restoredMessages();

/** What the tests observe besides the DOM. */
const observed = (window.__weft = { errors: [], data: [], finishes: [], toolCalls: [], reconnects: 0 });

const transport = new DefaultChatTransport({
  api,
  body,
  ...(flag("lastOnly")
    ? {
        // The AI SDK docs (chatbot message persistence): only send the last message.
        prepareSendMessagesRequest({ messages, id }) {
          return { body: { message: messages[messages.length - 1], id } };
        },
      }
    : {}),
});
// Counts settled reconnects (GET …/stream), so a test knows when `resume` has had its answer.
const reconnect = transport.reconnectToStream.bind(transport);
transport.reconnectToStream = async (options) => {
  try {
    return await reconnect(options);
  } finally {
    observed.reconnects += 1;
  }
};

/** The chat's helpers, for onToolCall (which runs outside React) and for the tests. */
let helpers;

const options = {
  transport,
  messages: initialMessages,
  // The docs' combination: send again when every client call has its output, or every
  // approval its answer.
  sendAutomaticallyWhen: (arg) =>
    lastAssistantMessageIsCompleteWithToolCalls(arg) || lastAssistantMessageIsCompleteWithApprovalResponses(arg),
  onToolCall({ toolCall }) {
    observed.toolCalls.push({ toolName: toolCall.toolName, toolCallId: toolCall.toolCallId });
    if (toolCall.dynamic || !runAtOnce.has(toolCall.toolName)) return;
    // Not awaited (the AI SDK docs: awaiting addToolOutput in onToolCall can deadlock).
    void helpers.addToolOutput({ tool: toolCall.toolName, toolCallId: toolCall.toolCallId, output: outputs[toolCall.toolName] });
  },
  onData(part) {
    observed.data.push(part);
  },
  onError(error) {
    observed.errors.push(error.message);
  },
  // Each request's end, with the messages as it left them (a test waits for the page to show them).
  onFinish({ messages, isAbort, isDisconnect, isError }) {
    observed.finishes.push({ ids: messages.map((m) => m.id), isAbort, isDisconnect, isError });
  },
};
if (chatId) options.id = chatId;
const chatObject = flag("chatObject") ? new Chat(options) : undefined;

function Part({ part }) {
  if (part.type === "text" || part.type === "reasoning") {
    return <div className={`part ${part.type}`} data-state={part.state}>{part.text}</div>;
  }
  if (part.type === "step-start") return <hr className="part step-start" />;
  if (part.type.startsWith("data-")) {
    return <div className="part data" data-type={part.type}>{JSON.stringify(part.data)}</div>;
  }
  if (part.type.startsWith("tool-") || part.type === "dynamic-tool") {
    const name = part.type === "dynamic-tool" ? part.toolName : part.type.slice("tool-".length);
    const call = part.toolCallId;
    return (
      <div className="part tool" data-name={name} data-call={call} data-state={part.state}>
        <span className="input">{JSON.stringify(part.input ?? null)}</span>
        {part.state === "output-available" && <span className="output">{JSON.stringify(part.output)}</span>}
        {part.state === "output-error" && <span className="output-error">{part.errorText}</span>}
        {part.state === "approval-requested" && (
          <>
            <button className="approve" onClick={() => helpers.addToolApprovalResponse({ id: part.approval.id, approved: true })}>Approve</button>
            <button className="deny" onClick={() => helpers.addToolApprovalResponse({ id: part.approval.id, approved: false, reason: "Not now, thanks." })}>Deny</button>
          </>
        )}
        {part.state === "input-available" && !runAtOnce.has(name) && (
          <button className="run" onClick={() => helpers.addToolOutput({ tool: name, toolCallId: call, output: outputs[name] })}>Run</button>
        )}
      </div>
    );
  }
  return <div className={`part other`} data-type={part.type} />;
}

function App() {
  const chat = useChat(chatObject ? { chat: chatObject, resume: flag("resume") } : { ...options, resume: flag("resume") });
  helpers = chat;
  window.chat = chat;
  const { id, messages, status, error, sendMessage, regenerate, stop, resumeStream } = chat;
  const [input, setInput] = useState("");

  useEffect(() => {
    if (flag("persist")) sessionStorage.setItem(storageKey, JSON.stringify(messages));
  }, [messages]);

  /** Stop: Weft ends the run, then the page stops reading (the AI SDK's resumable-stream docs). */
  function stopRun() {
    if (params.get("stopEndpoint") !== "0") void fetch(`${api}/${encodeURIComponent(id)}/stop`, { method: "POST" }).catch(() => {});
    void stop();
  }

  return (
    <main id="app" data-status={status} data-session={id} data-error={error ? "true" : "false"}>
      <div id="log">
        {messages.map((m) => (
          <div key={m.id} className={`message ${m.role}`} data-id={m.id}>
            {m.parts.map((part, i) => <Part key={i} part={part} />)}
          </div>
        ))}
      </div>
      <div id="error">{error?.message ?? ""}</div>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          if (!input.trim()) return;
          void sendMessage({ text: input });
          setInput("");
        }}
      >
        <input id="prompt" value={input} onChange={(e) => setInput(e.target.value)} />
        <button id="send" type="submit">Send</button>
      </form>
      <button id="stop" onClick={stopRun}>Stop</button>
      <button id="regenerate" onClick={() => void regenerate()}>Regenerate</button>
      <button id="resume" onClick={() => void resumeStream()}>Resume</button>
    </main>
  );
}

createRoot(document.getElementById("root")).render(<App />);
