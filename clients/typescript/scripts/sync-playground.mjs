// Copies the playground (its page and style, and the compiled modules it loads, nothing else) into
// crates/weft-server/playground/, the copy weft-server embeds: inside the crate, so that the
// crate builds from its published package too. `npm run build` runs it after tsc; weft-server's
// tests/playground.rs fails when the copy differs from what is here.
import { copyFileSync, mkdirSync, readFileSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const target = join(root, "..", "..", "crates", "weft-server", "playground");
rmSync(target, { recursive: true, force: true });
mkdirSync(target, { recursive: true });
for (const name of readdirSync(join(root, "playground"))) {
  copyFileSync(join(root, "playground", name), join(target, name));
}
// The modules the page loads: dist/playground.js and what it imports, and so on (type-only
// imports are gone from the compiled modules, so types.js and schema.js are not among them).
const modules = ["playground.js"];
for (let i = 0; i < modules.length; i++) {
  const text = readFileSync(join(root, "dist", modules[i]), "utf8");
  for (const [, name] of text.matchAll(/(?:from|import) "\.\/([\w-]+\.js)"/g)) {
    if (!modules.includes(name)) modules.push(name);
  }
}
for (const name of modules) copyFileSync(join(root, "dist", name), join(target, name));
console.log(`playground copied to ${target}`);
