// The tools the page itself runs for the model (remote tools: the run waits for the page's
// result). Which of them a new session gets, and whether each asks for approval first, is chosen
// in the settings; a session keeps the tools it was created with.
import { $ } from "./pg-util.js";
export const PAGE_TOOLS = [
    {
        spec: {
            name: "ask_user",
            label: "Ask the user",
            description: "Asks the person using the page a question and returns their answer.",
            parameters: { type: "object", properties: { question: { type: "string" } }, required: ["question"] },
        },
        approval: false,
        run: (args, call, host, signal) => host.ask(call, String(args.question ?? ""), signal),
    },
    {
        spec: {
            name: "read_page",
            label: "Read the page",
            description: "Reads the playground page's own state: the notes field, the theme and what the chat shows.",
            parameters: { type: "object", properties: {} },
        },
        approval: false,
        run: (_args, call, host) => {
            host.note(call, "read in this browser");
            return JSON.stringify({
                notes: $("notes").value,
                theme: document.documentElement.dataset.theme ?? "light",
                messagesShown: host.messagesShown(),
                title: document.title,
            });
        },
    },
    {
        spec: {
            name: "set_theme",
            label: "Set the theme",
            description: "Switches the page between the light and the dark theme.",
            parameters: { type: "object", properties: { theme: { type: "string", enum: ["light", "dark"] } }, required: ["theme"] },
        },
        approval: true,
        run: (args, call, host) => {
            const theme = args.theme === "dark" ? "dark" : "light";
            document.documentElement.dataset.theme = theme;
            host.note(call, "ran in this browser");
            return `The page's theme is now ${theme}.`;
        },
    },
    {
        spec: {
            name: "browser_time",
            label: "Browser time",
            description: "The date, time and time zone of the person's browser.",
            parameters: { type: "object", properties: {} },
        },
        approval: false,
        run: (_args, call, host) => {
            const now = new Date();
            host.note(call, "read in this browser");
            return JSON.stringify({
                iso: now.toISOString(),
                local: now.toString(),
                timeZone: Intl.DateTimeFormat().resolvedOptions().timeZone,
                utcOffsetMinutes: -now.getTimezoneOffset(),
            });
        },
    },
];
const byName = new Map(PAGE_TOOLS.map((t) => [t.spec.name, t]));
/** The page's handlers for the tools of `specs` it implements (a session's remote tools). */
export function handlersFor(specs, host) {
    return specs.flatMap((spec) => {
        const tool = byName.get(spec.name);
        if (!tool)
            return [];
        const execute = (args, call, context) => tool.run(args ?? {}, call, host, context.signal);
        return [{ ...spec, execute }];
    });
}
/** The specs a new session gets: the chosen tools, each asking for approval when chosen so. */
export function specsFor(choice) {
    return choice.flatMap((c) => {
        const tool = byName.get(c.name);
        if (!tool || !c.enabled)
            return [];
        const spec = { ...tool.spec };
        if (c.approval)
            spec.requiresApproval = true;
        return [spec];
    });
}
