// A real `weft serve` for a test: the faux provider playing a script, an in-memory store,
// 127.0.0.1 on a port the OS picks. Costs come from a model file giving the faux model prices.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

export const here = dirname(fileURLToPath(import.meta.url));
/** The sources' test directory (scripts live there; compiled tests run from .build/test). */
export const testDir = join(here, "..", "..", "test");

export interface Weft {
  base: string;
  stop(): Promise<void>;
}

/** The repository's root (scripts named with a folder, `examples/scripts/tot.json`, are found from it). */
export const repoRoot = join(testDir, "..", "..", "..");

export async function startWeft(script: string, options: { apiKeys?: string; models?: object[] } = {}): Promise<Weft> {
  const home = mkdtempSync(join(tmpdir(), "weft-ts-"));
  const models = join(home, "models.json");
  writeFileSync(models, JSON.stringify({ models: [{ provider: "faux", id: "faux", prices: { input: 2, output: 8 } }, ...(options.models ?? [])] }));
  const env: Record<string, string> = { ...(process.env as Record<string, string>), WEFT_HOME: home, NO_COLOR: "1" };
  for (const name of ["WEFT_ADDR", "WEFT_STORE", "WEFT_PROVIDER", "WEFT_MODEL", "WEFT_API_KEYS", "WEFT_CORS_ORIGINS", "RUST_LOG"]) delete env[name];
  if (options.apiKeys) env.WEFT_API_KEYS = options.apiKeys;
  const child: ChildProcess = spawn(
    process.env.WEFT_BIN!,
    ["serve", "--script", script.includes("/") ? join(repoRoot, script) : join(testDir, "scripts", script), "--store", "memory", "--addr", "127.0.0.1:0", "--models", models, "--model", "faux"],
    { env, stdio: ["ignore", "ignore", "pipe"] },
  );
  const lines = createInterface({ input: child.stderr! });
  const base = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("weft serve did not say where it listens in 10 s")), 10_000);
    lines.on("line", (line) => {
      const match = /http:\/\/(127\.0\.0\.1:\d+)/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve(`http://${match[1]}`);
      }
    });
    child.once("exit", (code) => reject(new Error(`weft serve exited (${code})`)));
  });
  return {
    base,
    async stop() {
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once("exit", resolve));
        child.kill("SIGTERM");
        await exited;
      }
      rmSync(home, { recursive: true, force: true });
    },
  };
}
