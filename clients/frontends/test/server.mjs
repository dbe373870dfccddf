// A real `weft serve` for a test: the faux provider playing a script, an in-memory store,
// 127.0.0.1 on a port the OS picks.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

/** `options`: `apiKeys`, `corsOrigins`, `config` (the text of a weft.toml, such as tool policies). */
export async function startWeft(script, options = {}) {
  const home = mkdtempSync(join(tmpdir(), "weft-frontends-"));
  const env = { ...process.env, WEFT_HOME: home, NO_COLOR: "1" };
  for (const name of ["WEFT_ADDR", "WEFT_STORE", "WEFT_PROVIDER", "WEFT_MODEL", "WEFT_API_KEYS", "WEFT_CORS_ORIGINS", "RUST_LOG"]) delete env[name];
  if (options.apiKeys) env.WEFT_API_KEYS = options.apiKeys;
  if (options.corsOrigins) env.WEFT_CORS_ORIGINS = options.corsOrigins;
  const args = ["serve", "--script", join(here, "scripts", script), "--store", "memory", "--addr", "127.0.0.1:0", "--model", "faux"];
  if (options.config) {
    writeFileSync(join(home, "weft.toml"), options.config);
    args.push("--config", join(home, "weft.toml"));
  }
  const child = spawn(
    process.env.WEFT_BIN,
    args,
    { env, stdio: ["ignore", "ignore", "pipe"] },
  );
  const lines = createInterface({ input: child.stderr });
  const base = await new Promise((resolve, reject) => {
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
    async session(id) {
      const response = await fetch(`${base}/api/agent/session/${encodeURIComponent(id)}`);
      if (!response.ok) throw new Error(`GET session ${id}: ${response.status}`);
      return response.json();
    },
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

/** Waits until `check()` is true (polling), at most `ms`. */
export async function until(check, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("timed out waiting");
    await new Promise((r) => setTimeout(r, 20));
  }
}
