// Bundles the npm packages examples/html/*.html import (their import maps point at vendor/):
// @ag-ui/client as vendor/ag-ui-client.js and the `ai` package (the current major, installed
// here as ai7) as vendor/ai.js, each one browser ES module, with esbuild.
//
//   node clients/frontends/scripts/bundle-html.mjs [OUTDIR]   (default: examples/html/vendor)
import { build } from "esbuild";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const root = dirname(dirname(fileURLToPath(import.meta.url)));

/** The files `vendor/` holds, by name, and the module each re-exports. */
const bundles = { "ag-ui-client.js": "@ag-ui/client", "ai.js": "ai7" };

export async function bundleHtml(outdir) {
  for (const [file, module] of Object.entries(bundles)) {
    await build({
      stdin: { contents: `export * from ${JSON.stringify(module)};`, resolveDir: root, loader: "js" },
      bundle: true,
      format: "esm",
      platform: "browser",
      target: "es2022",
      minify: true,
      logLevel: "warning",
      outfile: join(outdir, file),
    });
  }
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const outdir = resolve(process.argv[2] ?? join(root, "..", "..", "examples", "html", "vendor"));
  await bundleHtml(outdir);
  console.log(`bundled ${Object.keys(bundles).join(", ")} into ${outdir}`);
}
