// Builds the widgets' front-end into dflab/notebook/static/ (one ES module per widget plus one
// stylesheet), or with --check builds into a temporary directory and fails when the shipped
// files differ from a fresh build. The build is deterministic: pinned esbuild, no source maps,
// no timestamps, fixed entry order.

import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";

const here = dirname(fileURLToPath(import.meta.url));
const shipped = join(here, "..", "dflab", "notebook", "static");
const entries = ["graph_view", "stepper", "timeline", "monitor", "widgets"];
const banner = "/* Built from extension/src by `npm run build` (see extension/README.md). */";

async function build(outdir) {
  await esbuild.build({
    entryPoints: entries.map((name) =>
      join(here, "src", name === "widgets" ? "widgets.css" : `${name}.js`)),
    outdir,
    bundle: true,
    format: "esm",
    target: ["es2020"],
    minify: true,
    legalComments: "none",
    charset: "utf8",
    sourcemap: false,
    banner: { js: banner, css: banner },
    logLevel: "warning",
  });
}

function listing(dir) {
  return readdirSync(dir).filter((f) => f.endsWith(".js") || f.endsWith(".css")).sort();
}

if (process.argv.includes("--check")) {
  const tmp = mkdtempSync(join(tmpdir(), "dflab-widgets-"));
  try {
    await build(tmp);
    const fresh = listing(tmp);
    const have = listing(shipped);
    const problems = [];
    for (const f of fresh) {
      if (!have.includes(f)) problems.push(`${f}: missing from dflab/notebook/static`);
      else if (!readFileSync(join(tmp, f)).equals(readFileSync(join(shipped, f)))) {
        problems.push(`${f}: differs from a fresh build`);
      }
    }
    for (const f of have) if (!fresh.includes(f)) problems.push(`${f}: not produced by the build`);
    if (problems.length) {
      console.error(`The shipped widget assets are stale:\n  ${problems.join("\n  ")}\n`
        + "Rebuild them with: cd extension && npm ci && npm run build");
      process.exit(1);
    }
    console.log(`dflab/notebook/static is up to date (${fresh.length} files).`);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
} else {
  await build(shipped);
  console.log(`built ${listing(shipped).join(", ")} into dflab/notebook/static`);
}
