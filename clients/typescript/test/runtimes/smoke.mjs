// Run by Deno and Bun (see runtimes.test.ts): the built client, a client tool, the whole
// exchange; prints one JSON line with what happened.
import { WeftClient } from "../../dist/index.js";

const base = (globalThis.Deno ? Deno.args : process.argv.slice(2))[0];
const client = new WeftClient({ baseUrl: base });
const calls = [];
const stream = client.execute("Weather in Paris?", {
  tools: [{
    name: "get_weather",
    description: "The weather in a city",
    parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    execute: async (args) => {
      calls.push(args);
      return `Sunny in ${args.city}, 21°C`;
    },
  }],
});
let text = "";
for await (const event of stream) {
  if (event.type === "text_delta") text += event.delta;
}
const result = await stream.result();
console.log(JSON.stringify({ status: result.status, text, calls }));
