// The client in Deno and Bun: the same exchange as in Node, against a real `weft serve`. They
// come from npm (`npm install --no-save deno@2.9.6 bun@1.4.5` here; `.ci/run` does it). A runtime
// that is missing fails the test, unless WEFT_ALLOW_SKIP has `runtimes` (test/skip.ts).
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { startWeft, testDir, type Weft } from "./server.js";
import { skipOrFail } from "./skip.js";

const bin = (name: string) => join(testDir, "..", "node_modules", ".bin", name);
const smoke = join(testDir, "runtimes", "smoke.mjs");
const runtimes: [string, (base: string) => string[]][] = [
  ["deno", (base) => ["run", "--allow-net=127.0.0.1", "--allow-read", smoke, base]],
  ["bun", (base) => [smoke, base]],
];

describe("other runtimes", () => {
  let weft: Weft;
  before(async () => (weft = await startWeft("weather.json")));
  after(() => weft.stop());

  for (const [name, args] of runtimes) {
    test(`${name}: a client tool runs and the run completes`, (t) => {
      if (!existsSync(bin(name))) {
        skipOrFail("runtimes", `the client in ${name}`, `${name} is missing: npm install --no-save ${name} in clients/typescript`);
        t.skip(`SKIPPED: ${name} is not installed`);
        return;
      }
      const out = execFileSync(bin(name), args(weft.base), {
        encoding: "utf8",
        timeout: 60_000,
        env: { ...process.env, NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1" },
      });
      const line = out.trim().split("\n").at(-1) ?? "";
      const seen = JSON.parse(line) as { status: string; text: string; calls: unknown[] };
      assert.equal(seen.status, "completed");
      assert.deepEqual(seen.calls, [{ city: "Paris" }]);
      assert.equal(seen.text, "Let me look that up.It is sunny in Paris.");
    });
  }
});
