// `npm test`: type-check everything (strict), check that the committed build (dist/, embedded
// by weft-server) is what the sources compile to, then run the tests with Node's test runner
// against a real `weft serve` ($WEFT_BIN, default: the workspace's target/debug/weft).
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const tsc = join(root, "node_modules", "typescript", "bin", "tsc");
const run = (args) => execFileSync(process.execPath, args, { cwd: root, stdio: "inherit" });

console.log("== tsc (strict type-check of src and test)");
rmSync(join(root, ".build"), { recursive: true, force: true });
run([tsc, "-p", "tsconfig.json"]);

console.log("== dist/ is the build of src/ (the playground weft-server embeds)");
const fresh = mkdtempSync(join(tmpdir(), "weft-dist-"));
try {
  run([tsc, "-p", "tsconfig.build.json", "--outDir", fresh]);
  const stale = [];
  const names = new Set([...readdirSync(fresh), ...readdirSync(join(root, "dist"))]);
  for (const name of names) {
    const a = join(fresh, name);
    const b = join(root, "dist", name);
    if (!existsSync(a) || !existsSync(b) || readFileSync(a, "utf8") !== readFileSync(b, "utf8")) stale.push(name);
  }
  if (stale.length > 0) {
    console.error(`dist/ is stale (${stale.join(", ")}): run \`npm run build\` in clients/typescript and commit dist/`);
    process.exit(1);
  }
} finally {
  rmSync(fresh, { recursive: true, force: true });
}

const bin = process.env.WEFT_BIN ?? join(root, "..", "..", "target", "debug", "weft");
if (!existsSync(bin)) {
  console.error(`no weft binary at ${bin}: run \`cargo build -p weft-cli\` or set WEFT_BIN`);
  process.exit(1);
}
console.log(`== node --test (weft: ${bin})`);
const files = process.argv.slice(2).length > 0 ? process.argv.slice(2) : readdirSync(join(root, ".build", "test")).filter((f) => f.endsWith(".test.js")).map((f) => join(".build", "test", f));
const result = spawnSync(process.execPath, ["--test", "--test-reporter=spec", "--test-concurrency=2", ...files], {
  cwd: root,
  stdio: "inherit",
  env: { ...process.env, WEFT_BIN: bin },
});
process.exit(result.status ?? 1);
