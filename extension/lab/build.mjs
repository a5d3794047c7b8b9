// Builds the JupyterLab graph renderer into dflab/labextension/ (a prebuilt extension: JupyterLab
// loads it as it is, no rebuild of JupyterLab), or with --check rebuilds it and fails when the
// committed build differs, putting the committed files back either way.
//
// The webpack build comes from @jupyterlab/builder (pinned in package.json), against the
// JupyterLab installed in the Python environment (pinned in binder/constraints.txt), whose
// package list decides which modules are shared with JupyterLab. Set DFLAB_PYTHON to choose
// that environment's interpreter; the default is the repository's .venv, else python3.

import { execFileSync } from "node:child_process";
import { cpSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync }
  from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const repo = join(here, "..", "..");
const shipped = join(repo, "dflab", "labextension");

function python() {
  if (process.env.DFLAB_PYTHON) return process.env.DFLAB_PYTHON;
  const venv = join(repo, ".venv", "bin", "python");
  return existsSync(venv) ? venv : "python3";
}

function corePath() {
  const code = "import jupyterlab, pathlib; "
    + "print(pathlib.Path(jupyterlab.__file__).parent / 'staging')";
  return execFileSync(python(), ["-c", code], { encoding: "utf8" }).trim();
}

function build() {
  const builder = join(here, "node_modules", "@jupyterlab", "builder", "lib",
    "build-labextension.js");
  if (!existsSync(builder)) {
    console.error("@jupyterlab/builder is not installed: cd extension/lab && npm ci");
    process.exit(1);
  }
  execFileSync(process.execPath, [builder, "--core-path", corePath(), here],
    { stdio: ["ignore", "ignore", "inherit"] });
}

// Every file under dir, as paths relative to it, sorted.
function listing(dir, base = dir) {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? listing(path, base) : [relative(base, path)];
  }).sort();
}

function differences(committed, fresh) {
  const have = listing(committed);
  const made = listing(fresh);
  const problems = [];
  for (const f of made) {
    if (!have.includes(f)) problems.push(`${f}: missing from dflab/labextension`);
    else if (!readFileSync(join(committed, f)).equals(readFileSync(join(fresh, f)))) {
      problems.push(`${f}: differs from a fresh build`);
    }
  }
  for (const f of have) if (!made.includes(f)) problems.push(`${f}: not produced by the build`);
  return problems;
}

if (process.argv.includes("--check")) {
  // The builder writes only to package.json's outputDir: build there, compare with a copy of
  // what was committed, and put that copy back.
  const tmp = mkdtempSync(join(tmpdir(), "dflab-labextension-"));
  const saved = join(tmp, "committed");
  const fresh = join(tmp, "fresh");
  if (existsSync(shipped)) cpSync(shipped, saved, { recursive: true });
  let problems;
  try {
    build();
    cpSync(shipped, fresh, { recursive: true });
    problems = differences(saved, fresh);
  } finally {
    rmSync(shipped, { recursive: true, force: true });
    if (existsSync(saved)) cpSync(saved, shipped, { recursive: true });
  }
  const count = listing(fresh).length;
  rmSync(tmp, { recursive: true, force: true });
  if (problems.length) {
    console.error(`The shipped JupyterLab extension is stale:\n  ${problems.join("\n  ")}\n`
      + "Rebuild it with: cd extension/lab && npm ci && npm run build");
    process.exit(1);
  }
  console.log(`dflab/labextension is up to date (${count} files).`);
} else {
  build();
  console.log(`built ${listing(shipped).join(", ")} into dflab/labextension`);
}
