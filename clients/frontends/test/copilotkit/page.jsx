// A CopilotKit 1.x page as an app would write it, talking to `weft serve` straight from the
// browser: CopilotKit's own `HttpAgent` (the @ag-ui/client 0.0.x it bundles) under
// `agents__unsafe_dev_only`, no CopilotRuntime. `?server=` is Weft's origin, `?thread=` the
// thread (Weft's session), `?cancelOnDisconnect=1` sends `forwardedProps.weft.onDisconnect:
// "cancel"` (CopilotKit's `properties`). What the tools saw is kept in `window.seen`.
import { createRoot } from "react-dom/client";
import {
  CopilotChat,
  CopilotKitProvider,
  HttpAgent,
  useFrontendTool,
  useHumanInTheLoop,
  useInterrupt,
} from "@copilotkit/react-core/v2";
import "@copilotkit/react-core/v2/styles.css";
import { z } from "zod";

const query = new URLSearchParams(location.search);
const server = query.get("server");
const thread = query.get("thread");
const properties = query.get("cancelOnDisconnect") ? { weft: { onDisconnect: "cancel" } } : {};
// CopilotKit's stop only aborts the request; Weft's run goes on after a disconnect (so a reload
// can follow it). The few lines that make stop stop the run: tell Weft, then abort as usual.
class WeftAgent extends HttpAgent {
  abortRun() {
    void fetch(`${server}/api/ag-ui/${encodeURIComponent(this.threadId)}/stop`, { method: "POST" });
    super.abortRun();
  }
}
const agent = new WeftAgent({ url: `${server}/api/ag-ui`, threadId: thread });
window.seen = { browserTime: [], themes: [] };
window.agent = agent;

function Tools() {
  useFrontendTool({
    name: "get_browser_time",
    description: "The time on the user's browser",
    parameters: z.object({}),
    handler: async (args) => {
      window.seen.browserTime.push(args);
      return "2026-01-02T03:04:05Z";
    },
  });
  useHumanInTheLoop({
    name: "set_theme",
    description: "Switches the page's theme, once the user agrees",
    parameters: z.object({ theme: z.string() }),
    render: ({ args, status, respond, result }) => (
      <div className="approval" data-status={status}>
        <span className="question">Switch to the {args.theme} theme?</span>
        {respond && (
          <>
            <button
              className="approve"
              onClick={() => {
                window.seen.themes.push(args.theme);
                document.body.dataset.theme = args.theme;
                respond({ approved: true });
              }}
            >
              Approve
            </button>
            <button className="deny" onClick={() => respond({ approved: false, reason: "I like it light" })}>
              Deny
            </button>
          </>
        )}
        {result !== undefined && <span className="answer">{typeof result === "string" ? result : JSON.stringify(result)}</span>}
      </div>
    ),
  });
  // Weft's approvals (a server tool configured `approval = "always"`) are AG-UI interrupts.
  useInterrupt({
    render: ({ interrupt, resolve, cancel }) => (
      <div className="interrupt">
        <span className="question">{interrupt?.message}</span>
        <button className="resolve" onClick={() => resolve({ approved: true })}>
          Allow
        </button>
        <button className="cancel" onClick={() => cancel()}>
          Cancel
        </button>
      </div>
    ),
  });
  return null;
}

createRoot(document.getElementById("root")).render(
  <CopilotKitProvider agents__unsafe_dev_only={{ default: agent }} properties={properties}>
    <Tools />
    <CopilotChat agentId="default" threadId={thread} />
  </CopilotKitProvider>,
);
