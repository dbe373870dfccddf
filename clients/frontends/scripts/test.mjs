// `npm test`: the official front-end clients (@ag-ui/client's HttpAgent, the `ai` package's
// DefaultChatTransport and readUIMessageStream, majors 6 and 7) against a real `weft serve`
// ($WEFT_BIN, default: the workspace's target/debug/weft), with Node's test runner.
import { spawnSync } from "node:child_process";
import { existsSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const bin = process.env.WEFT_BIN ?? join(root, "..", "..", "target", "debug", "weft");
if (!existsSync(bin)) {
  console.error(`no weft binary at ${bin}: run \`cargo build -p weft-cli\` or set WEFT_BIN`);
  process.exit(1);
}
const files = process.argv.slice(2).length > 0
  ? process.argv.slice(2)
  : readdirSync(join(root, "test")).filter((f) => f.endsWith(".test.mjs")).map((f) => join("test", f));
console.log(`== node --test (weft: ${bin})`);
const result = spawnSync(process.execPath, ["--test", "--test-reporter=spec", "--test-concurrency=2", ...files], {
  cwd: root,
  stdio: "inherit",
  env: { ...process.env, WEFT_BIN: bin },
});
process.exit(result.status ?? 1);
