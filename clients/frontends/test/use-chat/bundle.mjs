// Bundles test/use-chat/page.jsx for one AI SDK major with esbuild: `ai` and `@ai-sdk/react`
// resolve to that major's packages (ai6 + ai-sdk-react6 = @ai-sdk/react 3.0.327, or ai7 +
// ai-sdk-react7 = @ai-sdk/react 4.0.177), so the page and the React binding share one `ai`.
import { build } from "esbuild";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));

/** The packages each major's page is built from. */
export const majors = {
  6: { ai: "ai6", "@ai-sdk/react": "ai-sdk-react6" },
  7: { ai: "ai7", "@ai-sdk/react": "ai-sdk-react7" },
};

/** The page's HTML (it loads `page-<major>.js` from the same directory). */
export const html = (major) =>
  `<!doctype html><html><head><meta charset="utf-8"><title>useChat ${major}</title></head>` +
  `<body><div id="root"></div><script type="module" src="page-${major}.js"></script></body></html>`;

/** Writes `page-<major>.js` into `outdir`. */
export async function bundlePage(major, outdir) {
  await build({
    entryPoints: [join(here, "page.jsx")],
    bundle: true,
    format: "esm",
    platform: "browser",
    target: "es2022",
    jsx: "automatic",
    alias: majors[major],
    define: { "process.env.NODE_ENV": '"production"' },
    minify: true,
    logLevel: "warning",
    outfile: join(outdir, `page-${major}.js`),
  });
}
