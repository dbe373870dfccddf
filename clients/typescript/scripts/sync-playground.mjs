// Copies the playground (its page and style, and the compiled modules it loads) into
// crates/weft-server/playground/, the copy weft-server embeds: inside the crate, so that the
// crate builds from its published package too. `npm run build` runs it after tsc; weft-server's
// tests/playground.rs fails when the copy differs from what is here.
import { copyFileSync, mkdirSync, readdirSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const target = join(root, "..", "..", "crates", "weft-server", "playground");
rmSync(target, { recursive: true, force: true });
mkdirSync(target, { recursive: true });
for (const name of readdirSync(join(root, "playground"))) {
  copyFileSync(join(root, "playground", name), join(target, name));
}
// The modules the page loads: dist/'s JavaScript (the type declarations are not served).
for (const name of readdirSync(join(root, "dist"))) {
  if (name.endsWith(".js")) copyFileSync(join(root, "dist", name), join(target, name));
}
console.log(`playground copied to ${target}`);
