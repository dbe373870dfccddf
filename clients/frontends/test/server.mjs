// A real `weft serve` for a test: the faux provider playing a script, an in-memory store (or,
// with `persistent`, the default SQLite store in its WEFT_HOME, so that it can be killed and
// restarted), 127.0.0.1 on a port the OS picks.
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

/**
 * `options`: `apiKeys`, `corsOrigins`, `config` (the text of a weft.toml, such as tool policies),
 * `persistent` (the SQLite store in the server's home instead of memory: `kill()` then
 * `restart()` brings the same sessions back on the same address).
 */
export async function startWeft(script, options = {}) {
  const home = mkdtempSync(join(tmpdir(), "weft-frontends-"));
  const env = { ...process.env, WEFT_HOME: home, NO_COLOR: "1" };
  for (const name of ["WEFT_ADDR", "WEFT_STORE", "WEFT_PROVIDER", "WEFT_MODEL", "WEFT_API_KEYS", "WEFT_CORS_ORIGINS", "RUST_LOG"]) delete env[name];
  if (options.apiKeys) env.WEFT_API_KEYS = options.apiKeys;
  if (options.corsOrigins) env.WEFT_CORS_ORIGINS = options.corsOrigins;
  const args = ["serve", "--script", join(here, "scripts", script), "--model", "faux"];
  if (!options.persistent) args.push("--store", "memory");
  if (options.config) {
    writeFileSync(join(home, "weft.toml"), options.config);
    args.push("--config", join(home, "weft.toml"));
  }
  let child;
  /** Starts the server on `addr`; where it listens. */
  async function spawnOn(addr) {
    child = spawn(process.env.WEFT_BIN, [...args, "--addr", addr], { env, stdio: ["ignore", "ignore", "pipe"] });
    const started = child;
    const lines = createInterface({ input: started.stderr });
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error("weft serve did not say where it listens in 10 s")), 10_000);
      lines.on("line", (line) => {
        const match = /http:\/\/(127\.0\.0\.1:\d+)/.exec(line);
        if (match) {
          clearTimeout(timer);
          resolve(`http://${match[1]}`);
        }
      });
      started.once("exit", (code) => reject(new Error(`weft serve exited (${code})`)));
    });
  }
  const base = await spawnOn("127.0.0.1:0");
  const exited = () => (child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((resolve) => child.once("exit", resolve)));
  return {
    base,
    async session(id) {
      const response = await fetch(`${base}/api/agent/session/${encodeURIComponent(id)}`);
      if (!response.ok) throw new Error(`GET session ${id}: ${response.status}`);
      return response.json();
    },
    /** `kill -9`: the process dies at once, whatever it was doing. */
    async kill() {
      const done = exited();
      child.kill("SIGKILL");
      await done;
    },
    /** A new process on the same home, store and address (after `kill()`). */
    async restart() {
      const again = await spawnOn(base.replace("http://", ""));
      if (again !== base) throw new Error(`restarted on ${again}, not ${base}`);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const done = exited();
        child.kill("SIGTERM");
        await done;
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
