// The TypeScript types (inferred from the schemas in src/types.ts) checked against the Rust
// side: every golden stream of crates/weft-conformance, the tags of `AgentEvent::kind`, the
// server's `/openapi.json`, and live frames (client.test.ts validates every frame it reads).
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { SseParser } from "../src/sse.js";
import { problems, type ObjectSchema } from "../src/schema.js";
import {
  AgentEventSchema,
  ErrorBodySchema,
  ExecuteContextSchema,
  ExecuteOptionsSchema,
  ExecuteRequestSchema,
  NATIVE_EVENT_TYPES,
  NativeFrameSchema,
  SessionListSchema,
  SessionViewSchema,
} from "../src/types.js";
import { startWeft, testDir, type Weft } from "./server.js";

const repo = join(testDir, "..", "..", "..");
const snapshots = join(repo, "crates", "weft-conformance", "tests", "snapshots");
const body = (file: string) => readFileSync(join(snapshots, file), "utf8").split("\n---\n").slice(1).join("\n---\n");

describe("golden streams", () => {
  const files = readdirSync(snapshots);

  test("every canonical event of every scenario is an AgentEvent (strictly: no unknown field)", () => {
    const canonical = files.filter((f) => f.endsWith("__canonical.snap"));
    assert.ok(canonical.length >= 7, `${canonical.length} canonical snapshots`);
    let count = 0;
    for (const file of canonical) {
      for (const line of body(file).split("\n").filter((l) => l.startsWith("{"))) {
        assert.deepEqual(problems(AgentEventSchema, JSON.parse(line)), [], `${file}: ${line}`);
        count++;
      }
    }
    assert.ok(count > 100, `${count} events`);
  });

  test("every native frame of every scenario is a NativeEvent, and ids are on every event's last frame", () => {
    const native = files.filter((f) => f.endsWith("__native.snap"));
    assert.ok(native.length >= 7);
    const seen = new Set<string>();
    for (const file of native) {
      const frames = new SseParser().push(body(file) + "\n\n");
      assert.ok(frames.length > 5, file);
      for (const frame of frames) {
        const value = JSON.parse(frame.data) as { type: string };
        assert.deepEqual(problems(NativeFrameSchema, value), [], `${file}: ${frame.data}`);
        seen.add(value.type);
        if (value.type !== "session_end") assert.ok(frame.id !== undefined, `${file}: ${value.type} has an id`);
      }
    }
    for (const t of ["session_start", "text_delta", "thinking_delta", "toolcall_delta", "tool_execution_delta", "approval_required", "awaiting_tool_execution", "execute_complete", "error"]) {
      assert.ok(seen.has(t), `the golden streams show ${t}`);
    }
  });

  test("the event tags are exactly AgentEvent::kind's", () => {
    const source = readFileSync(join(repo, "crates", "weft-core", "src", "event.rs"), "utf8");
    // ModeProgress::kind (the `kind` of a `progress` event), then AgentEvent::kind.
    const modeKinds = source.slice(source.indexOf("pub fn kind"), source.indexOf("impl AgentEvent"));
    const eventKinds = source.slice(source.indexOf("impl AgentEvent"), source.indexOf("pub fn is_plan_event"));
    const literals = (text: string) => [...text.matchAll(/=> "([a-z_]+)"/g)].map((m) => m[1]).sort();
    const rust = [...literals(eventKinds), "progress"].sort();
    assert.ok(rust.length > 20);
    assert.deepEqual([...AgentEventSchema.tags].sort(), rust);
    assert.deepEqual([...(AgentEventSchema.subTags.progress ?? [])].sort(), literals(modeKinds));
    assert.ok(literals(modeKinds).length >= 8);
    const native = readFileSync(join(repo, "crates", "weft-protocol", "src", "native", "mod.rs"), "utf8");
    const list = native.slice(native.indexOf("const PLAN_EVENTS"), native.indexOf("];", native.indexOf("const PLAN_EVENTS")));
    assert.deepEqual([...list.matchAll(/"([a-z_]+)"/g)].map((m) => m[1]), [...NATIVE_EVENT_TYPES]);
  });
});

describe("the server's own description and answers", () => {
  let weft: Weft;
  before(async () => (weft = await startWeft("weather.json")));
  after(() => weft.stop());

  test("request and response bodies have the properties /openapi.json gives them", async () => {
    const doc = (await (await fetch(`${weft.base}/openapi.json`)).json()) as {
      components: { schemas: Record<string, { properties?: Record<string, unknown>; required?: string[] }> };
    };
    const pairs: [string, ObjectSchema<never>][] = [
      ["ExecuteRequest", ExecuteRequestSchema as unknown as ObjectSchema<never>],
      ["ExecuteOptions", ExecuteOptionsSchema as unknown as ObjectSchema<never>],
      ["ExecuteContext", ExecuteContextSchema as unknown as ObjectSchema<never>],
      ["SessionView", SessionViewSchema as unknown as ObjectSchema<never>],
      ["SessionList", SessionListSchema as unknown as ObjectSchema<never>],
      ["ErrorBody", ErrorBodySchema as unknown as ObjectSchema<never>],
    ];
    for (const [name, schema] of pairs) {
      const described = doc.components.schemas[name];
      assert.ok(described?.properties, name);
      assert.deepEqual(Object.keys(schema.shape).sort(), Object.keys(described.properties).sort(), name);
      for (const key of described.required ?? []) {
        assert.ok(!("optional" in (schema.shape as Record<string, object>)[key]!), `${name}.${key} is required`);
      }
    }
  });

  test("an error body is an ErrorBody", async () => {
    const response = await fetch(`${weft.base}/api/agent/session/nope`);
    assert.equal(response.status, 404);
    assert.deepEqual(problems(ErrorBodySchema, await response.json()), []);
  });
});
