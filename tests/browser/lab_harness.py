"""Drive a real JupyterLab in headless Chromium: start a server, open notebooks, run cells.

Shared by the browser tests (``tests/browser/conftest.py``) and the front-end benchmark
(``benchmarks/bench_frontend.py``); plain functions, no pytest. Invariants:

* the server runs from *this* interpreter (``sys.executable -m jupyter lab``), so its kernels
  run this interpreter's environment and import dflab from this checkout (``PYTHONPATH``);
* every Jupyter directory (config, data, runtime, IPython) lives under a private work
  directory, so nothing on the machine (user settings, kernelspecs, workspaces) leaks in and
  nothing is left behind;
* ``LabServer.stop`` shuts kernels down, stops the server and then kills, by pid, any process
  still holding one of its kernel connection files: no orphans survive a run;
* every wait has a deadline, so a broken front-end fails a test instead of hanging CI;
* Chromium is the system's (Debian's ``chromium``), launched headless; Playwright never
  downloads a browser of its own.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu"]
SERVER_START_TIMEOUT_S = 120
SERVER_STOP_TIMEOUT_S = 20
NOTEBOOK_OPEN_TIMEOUT_MS = 60_000
RUN_ALL_TIMEOUT_MS = 180_000

# JupyterLab settings for a deterministic page: every cell attached to the DOM (no windowing,
# so off-screen outputs can be inspected), no news or update checks popping up toasts.
LAB_USER_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False},
}

CHROMIUM_MISSING = (
    "Chromium is needed for the browser tests and was not found (looked at $DFLAB_CHROMIUM, "
    "/usr/bin/chromium and chromium/chromium-browser on PATH). Install it (Debian: "
    "`apt-get install chromium`; scripts/test does this in CI) or deselect these tests "
    "locally with -m 'not browser'.")


# --- Chromium -----------------------------------------------------------------------------------

def find_chromium() -> str | None:
    """Path of the system Chromium, or None."""
    override = os.environ.get("DFLAB_CHROMIUM")
    if override:
        return override if os.access(override, os.X_OK) else None
    if os.access("/usr/bin/chromium", os.X_OK):
        return "/usr/bin/chromium"
    return shutil.which("chromium") or shutil.which("chromium-browser")


def launch_chromium(playwright):
    """A headless Chromium browser (Playwright ``Browser``) from the system's binary."""
    path = find_chromium()
    if path is None:
        raise RuntimeError(CHROMIUM_MISSING)
    return playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS, timeout=60_000)


# --- the JupyterLab server ----------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_lab_settings(config_dir: Path) -> None:
    for rel, values in LAB_USER_SETTINGS.items():
        path = config_dir / "lab" / "user-settings" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")


GRAPH_RENDERER = "dflab-graph-renderer"  # the prebuilt extension in dflab/labextension


def _configure_graph_renderer(env: dict[str, str], enabled: bool) -> None:
    """Serve this checkout's build of dflab's graph renderer, or disable the renderer (an
    installed dflab brings it) so a page shows what front-ends without it show: the SVG."""
    if enabled:
        link = Path(env["JUPYTER_DATA_DIR"]) / "labextensions" / GRAPH_RENDERER
        link.parent.mkdir(parents=True, exist_ok=True)
        if not link.is_symlink():
            link.symlink_to(REPO / "dflab" / "labextension", target_is_directory=True)
        return
    page_config = Path(env["JUPYTER_CONFIG_DIR"]) / "labconfig" / "page_config.json"
    page_config.parent.mkdir(parents=True, exist_ok=True)
    page_config.write_text(json.dumps({"disabledExtensions": {GRAPH_RENDERER: True}}),
                           encoding="utf-8")


def _server_env(work_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    dirs = {"JUPYTER_CONFIG_DIR": "config", "JUPYTER_DATA_DIR": "data",
            "JUPYTER_RUNTIME_DIR": "runtime", "IPYTHONDIR": "ipython"}
    for var, sub in dirs.items():
        (work_dir / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(work_dir / sub)
    env.pop("JUPYTER_PATH", None)
    env["JUPYTER_PLATFORM_DIRS"] = "1"
    # The private data directory before the virtualenv's share/jupyter: its link to this
    # checkout's dflab/labextension must win over one an installed dflab put there.
    env["JUPYTER_PREFER_ENV_PATH"] = "0"
    # Kernels inherit this environment: import dflab from this checkout, find this
    # interpreter's tools first, and keep BLAS from oversubscribing a small machine.
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env["PATH"] = os.pathsep.join((str(Path(sys.executable).parent), env.get("PATH", "")))
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    return env


@dataclass
class LabServer:
    """A running ``jupyter lab`` serving ``root_dir``; create it with :func:`start_lab`."""

    proc: subprocess.Popen
    port: int
    token: str
    root_dir: Path
    work_dir: Path
    log_path: Path
    _log_file: object = field(repr=False, default=None)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def notebook_url(self, path: str, workspace: str) -> str:
        """URL opening ``path`` in a fresh, named workspace (no tabs from earlier pages)."""
        return (f"{self.base_url}/lab/workspaces/{workspace}/tree/{path}"
                f"?reset&token={self.token}")

    def api(self, method: str, path: str, timeout: float = 10.0):
        req = urllib.request.Request(f"{self.base_url}{path}", method=method,
                                     headers={"Authorization": f"token {self.token}"})
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            body = resp.read()
        return json.loads(body) if body else None

    def log_tail(self, n: int = 40) -> str:
        try:
            lines = self.log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return "(no server log)"
        return "\n".join(lines[-n:])

    def kernel_pids(self) -> list[int]:
        """Processes still using a connection file of this server's runtime directory."""
        marker = str(self.work_dir / "runtime")
        pids = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == self.proc.pid:
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if marker in cmdline:
                pids.append(int(entry.name))
        return pids

    def stop(self) -> list[int]:
        """Stop kernels and server; returns the pids that had to be killed (should be [])."""
        if self.proc.poll() is None:
            self._shutdown_kernels()
            try:
                self.api("POST", "/api/shutdown")
            except (OSError, urllib.error.URLError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(SERVER_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        killed = []
        for pid in self.kernel_pids():
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except ProcessLookupError:
                pass
        if self._log_file is not None:
            self._log_file.close()
        return killed

    def _shutdown_kernels(self) -> None:
        try:
            for kernel in self.api("GET", "/api/kernels") or []:
                self.api("DELETE", f"/api/kernels/{kernel['id']}", timeout=SERVER_STOP_TIMEOUT_S)
        except (OSError, urllib.error.URLError):
            pass  # the server is going away anyway; stop() kills whatever is left


def start_lab(root_dir: Path, work_dir: Path, log_path: Path,
              timeout_s: float = SERVER_START_TIMEOUT_S,
              graph_renderer: bool = False) -> LabServer:
    """Start ``jupyter lab`` on a free port and wait until its REST API answers.
    ``graph_renderer``: with dflab's JupyterLab graph renderer (from this checkout) enabled;
    without it, graph outputs show as their SVG fallback."""
    work_dir.mkdir(parents=True, exist_ok=True)
    env = _server_env(work_dir)
    _write_lab_settings(Path(env["JUPYTER_CONFIG_DIR"]))
    _configure_graph_renderer(env, graph_renderer)
    port, token = _free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "jupyter", "lab", "--no-browser",
           f"--port={port}", "--ip=127.0.0.1", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={root_dir}",
           "--ServerApp.terminals_enabled=False", "--LabApp.news_url=None",
           # window.jupyterapp lets a page wait for the kernel session to be ready: the DOM
           # shows "Idle" before the session has a kernel, and cells run then are dropped.
           "--LabApp.expose_app_in_browser=True"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-root")  # CI containers run as root; the server refuses otherwise
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_file = open(log_path, "w", encoding="utf-8")  # noqa: SIM115 - closed by stop()
    # Own process group, so a server that ignores shutdown can be killed with its children.
    proc = subprocess.Popen(cmd, env=env, cwd=root_dir, stdout=log_file,
                            stderr=subprocess.STDOUT, start_new_session=True)
    server = LabServer(proc, port, token, root_dir, work_dir, log_path, log_file)
    try:
        _wait_ready(server, timeout_s)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_ready(server: LabServer, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if server.proc.poll() is not None:
            raise RuntimeError(f"jupyter lab exited with code {server.proc.returncode} before "
                               f"it was ready; its log:\n{server.log_tail()}")
        try:
            server.api("GET", "/api/status", timeout=2)
            return
        except (OSError, urllib.error.URLError):
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"jupyter lab did not answer within {timeout_s:.0f} s; "
                               f"its log:\n{server.log_tail()}")
        time.sleep(0.25)


def jupyterlab_missing() -> str | None:
    """Why JupyterLab cannot run from this interpreter, or None when it can."""
    try:
        import ipykernel  # noqa: F401
        import jupyterlab  # noqa: F401
    except ImportError as e:
        return (f"the browser tests need JupyterLab and ipykernel in {sys.executable}'s "
                f"environment ({e}); install the dev extra (pip install -e '.[dev]', as "
                "scripts/test does) or deselect these tests locally with -m 'not browser'")
    return None


# --- a notebook page ----------------------------------------------------------------------------

# Run All is over when every code cell has an execution count, or when none is queued any more
# and a cell shows a traceback (JupyterLab skips the cells after a failing one).
_PROMPTS_DONE_JS = """() => {
    const panel = '.jp-NotebookPanel:not(.lm-mod-hidden) ';
    const prompts = [...document.querySelectorAll(panel + '.jp-CodeCell .jp-InputPrompt')]
        .map(p => p.textContent.trim());
    if (prompts.length === 0 || prompts.includes('[*]:')) return false;
    if (prompts.every(p => /^\\[\\d+\\]:$/.test(p))) return true;
    const stderr = document.querySelectorAll(
        panel + ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stderr']");
    return [...stderr].some(e => /Traceback|\\b\\w+Error\\b/.test(e.textContent));
}"""

_KERNEL_IDLE_JS = """() => {
    const ctx = window.jupyterapp?.shell.currentWidget?.sessionContext;
    const kernel = ctx?.session?.kernel;
    return !!ctx && ctx.isReady && !ctx.hasNoKernel && !!kernel
        && kernel.connectionStatus === 'connected' && kernel.status === 'idle';
}"""


def open_notebook(page, server: LabServer, path: str, workspace: str | None = None) -> None:
    """Open ``path`` (relative to the server root) and wait for its kernel to be idle."""
    workspace = workspace or re.sub(r"[^A-Za-z0-9]+", "-", path).strip("-")
    page.goto(server.notebook_url(path, workspace), timeout=NOTEBOOK_OPEN_TIMEOUT_MS)
    page.locator(".jp-NotebookPanel .jp-Notebook .jp-Cell").first.wait_for(
        timeout=NOTEBOOK_OPEN_TIMEOUT_MS)
    wait_kernel_idle(page, NOTEBOOK_OPEN_TIMEOUT_MS)


def wait_kernel_idle(page, timeout_ms: float = RUN_ALL_TIMEOUT_MS) -> None:
    """Wait until the current notebook's kernel is connected and idle."""
    page.wait_for_function(_KERNEL_IDLE_JS, timeout=timeout_ms, polling=100)


def run_menu_command(page, menu: str, label: str) -> None:
    """Click ``menu`` in JupyterLab's main menu bar, then its item ``label``."""
    page.locator("#jp-MainMenu .lm-MenuBar-itemLabel", has_text=re.compile(
        rf"^{re.escape(menu)}$")).click()
    page.locator(".lm-Menu:not(.lm-MenuBar) .lm-Menu-itemLabel", has_text=re.compile(
        rf"^{re.escape(label)}$")).click()


def run_all_cells(page, timeout_ms: float = RUN_ALL_TIMEOUT_MS) -> None:
    """Run > Run All Cells, then wait until every code cell has run and the kernel is idle."""
    run_menu_command(page, "Run", "Run All Cells")
    wait_cells_done(page, timeout_ms)


def wait_cells_done(page, timeout_ms: float = RUN_ALL_TIMEOUT_MS) -> None:
    page.wait_for_function(_PROMPTS_DONE_JS, timeout=timeout_ms, polling=100)
    wait_kernel_idle(page, timeout_ms)


def code_cell(page, marker: str):
    """The code cell whose source contains ``marker`` (a comment such as ``# [graph]``)."""
    cells = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-CodeCell").filter(
        has=page.locator(".cm-content", has_text=marker))
    return cells.first


def rerun_cell(page, marker: str, timeout_ms: float = RUN_ALL_TIMEOUT_MS) -> None:
    """Run one cell again the way a user does: select it, press Ctrl+Enter."""
    cell = code_cell(page, marker)
    prompt = cell.locator(".jp-InputPrompt").inner_text().strip()
    cell.locator(".jp-InputPrompt").click()  # selects the cell in command mode
    page.keyboard.press("Control+Enter")
    page.wait_for_function(
        """([cell, before]) => {
            const p = cell.querySelector('.jp-InputPrompt').textContent.trim();
            return p !== before && /^\\[\\d+\\]:$/.test(p);
        }""", arg=[cell.element_handle(), prompt], timeout=timeout_ms, polling=100)
    wait_kernel_idle(page, timeout_ms)


def stdout_text(cell) -> str:
    """What a cell printed to stdout (not stderr warnings, not display data)."""
    return "".join(cell.locator(
        ".jp-OutputArea-output[data-mime-type='application/vnd.jupyter.stdout']")
        .all_inner_texts())


def error_outputs(page) -> list[str]:
    """Texts of tracebacks shown in the open notebook (errors render as stderr outputs)."""
    texts = page.locator(
        ".jp-NotebookPanel:not(.lm-mod-hidden) .jp-OutputArea-output"
        "[data-mime-type='application/vnd.jupyter.stderr']").all_inner_texts()
    return [t for t in texts if "Traceback" in t or re.search(r"\b\w+Error\b", t)]


# --- reading drawings out of the DOM ------------------------------------------------------------

# JupyterLab shows an image/svg+xml output as <img src="data:image/svg+xml,...">, widgets insert
# <svg> elements. Either way this reads back the drawing the browser has: whether it rendered
# (the <img> decodes and has a size), its node titles and its visible texts.
_SVG_DRAWINGS_JS = """async (host) => {
    // A node's <title> is its tooltip: first line "name (OpType)", or "scope/ — N ops".
    const opName = (title) => {
        const first = title.split('\\n')[0];
        const m = /^(.*) \\([^()]*\\)$/.exec(first) || /^(.*\\/) \u2014 \\d+ ops$/.exec(first);
        return m ? m[1] : first;
    };
    const describe = (svg, rendered, how) => ({
        how, rendered,
        nodes: [...svg.querySelectorAll('g.node')].map(g => {
            const title = g.querySelector(':scope > title')?.textContent ?? '';
            return {id: g.getAttribute('id'), title, name: opName(title),
                    state: g.getAttribute('data-state')};
        }),
        texts: [...svg.querySelectorAll('text')].map(t => t.textContent),
        elements: [...svg.querySelectorAll('*')].map(e => e.localName),
    });
    const out = [];
    for (const img of host.querySelectorAll('img')) {
        const src = img.getAttribute('src') || '';
        const m = /^data:image\\/svg\\+xml(;base64)?,(.*)$/s.exec(src);
        if (!m) continue;
        const text = m[1] ? atob(m[2]) : decodeURIComponent(m[2]);
        const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
        let decoded = false;
        try { await img.decode(); decoded = img.naturalWidth > 0; } catch (e) { decoded = false; }
        const parsed = !doc.querySelector('parsererror');
        out.push(describe(doc.documentElement, parsed && decoded, 'img'));
    }
    for (const svg of host.querySelectorAll('svg')) {
        if (svg.parentElement.closest('svg')) continue;  // nested <svg> is part of another
        if (!svg.querySelector('g.node')) continue;     // icons, not drawings
        const box = svg.getBoundingClientRect();
        out.push(describe(svg, box.width > 0 && box.height > 0, 'inline'));
    }
    return out;
}"""


def svg_drawings(locator) -> list[dict]:
    """The graph drawings inside ``locator``: ``how`` (img|inline), ``rendered``, ``nodes``
    (id, title, op ``name`` read from the title, data-state), ``texts`` and the tag names of
    all ``elements``."""
    return locator.evaluate(_SVG_DRAWINGS_JS)


def hover_names(root) -> dict[str, str]:
    """Node id -> op name, read the way a user reads it: hover each node, read the tooltip's
    first line ("name (OpType)"). Widgets move the drawing's <title>s into that tooltip."""
    tip = root.locator(".dflab-tip")
    names = {}
    for node in root.locator("svg g.node").all():
        root.page.mouse.move(0, 0)  # off the drawing: the previous tooltip goes away
        tip.wait_for(state="hidden")
        node.hover()
        tip.wait_for(state="visible")
        first = tip.inner_text().splitlines()[0]
        names[node.get_attribute("id")] = first.rsplit(" (", 1)[0] if first.endswith(")") \
            else first
    root.page.mouse.move(0, 0)
    return names


def node_id(names: dict[str, str], name: str) -> str:
    ids = [i for i, n in names.items() if n == name]
    assert len(ids) == 1, f"expected one node for op {name!r}, found {ids}"
    return ids[0]
