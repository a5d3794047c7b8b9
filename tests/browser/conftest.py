"""Fixtures for end-to-end tests of the notebook layer in JupyterLab and headless Chromium.

One JupyterLab server per test session serves a temporary copy of ``tests/browser/notebooks``
(another, with dflab's graph renderer, serves the tutorials of ``notebooks/`` as a teacher sees
them); each test opens a notebook in a fresh browser context, runs it through JupyterLab's own
menus and inspects the DOM. Every test here carries the ``browser`` marker: these tests never
skip. When Chromium or JupyterLab is missing they fail with a message saying what to install; a
developer without them deselects the tests with ``-m "not browser"``.

Screenshots (one per widget, plus one of every failing test) go to ``test-artifacts/screenshots``
(or ``$DFLAB_TEST_ARTIFACTS/screenshots``); the server logs to ``test-artifacts/jupyterlab*.log``.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import lab_harness as lh
import pytest

HERE = Path(__file__).resolve().parent
ARTIFACTS = Path(os.environ.get("DFLAB_TEST_ARTIFACTS", lh.REPO / "test-artifacts"))
SCREENSHOTS = ARTIFACTS / "screenshots"
VIEWPORT = {"width": 1400, "height": 1000}
TUTORIAL_VIEWPORT = {"width": 1400, "height": 900}
ACTION_TIMEOUT_MS = 30_000


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "browser: end-to-end tests in JupyterLab and headless Chromium; they fail "
        "(never skip) without Chromium or JupyterLab; deselect locally with -m 'not browser'")


@pytest.hookimpl(tryfirst=True)  # before -m selects on the markers added here
def pytest_collection_modifyitems(config, items):
    for item in items:
        if HERE in item.path.resolve().parents:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    # Keep each phase's report on the item, so the page fixture knows whether the test failed.
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"_report_{report.when}", report)


@pytest.fixture(scope="session")
def screenshots_dir() -> Path:
    shutil.rmtree(SCREENSHOTS, ignore_errors=True)  # no stale pictures from an earlier run
    SCREENSHOTS.mkdir(parents=True)
    return SCREENSHOTS


def _serve_notebooks(tmp_path_factory, name: str, graph_renderer: bool, source: Path = None):
    missing = lh.jupyterlab_missing()
    if missing:
        pytest.fail(missing, pytrace=False)
    base = tmp_path_factory.mktemp(name)
    root = base / "notebooks"
    shutil.copytree(source or HERE / "notebooks", root)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    server = lh.start_lab(root, base / "jupyter", ARTIFACTS / f"{name}.log",
                          graph_renderer=graph_renderer)
    yield server
    killed = server.stop()
    if killed:
        pytest.fail(f"processes of the JupyterLab server outlived its shutdown and were "
                    f"killed: pids {killed}", pytrace=False)


@pytest.fixture(scope="session")
def lab_server(tmp_path_factory):
    """A JupyterLab server for the whole session, serving a copy of tests/browser/notebooks.
    dflab's graph renderer is disabled here: graph outputs show their SVG, as on GitHub."""
    yield from _serve_notebooks(tmp_path_factory, "jupyterlab", graph_renderer=False)


@pytest.fixture(scope="session")
def renderer_lab_server(tmp_path_factory):
    """Like ``lab_server``, with dflab's JupyterLab graph renderer (dflab/labextension)."""
    yield from _serve_notebooks(tmp_path_factory, "jupyterlab-renderer", graph_renderer=True)


@pytest.fixture(scope="session")
def tutorials_lab_server(tmp_path_factory):
    """A JupyterLab with dflab's graph renderer serving a copy of the tutorials (notebooks/),
    as a class sees them."""
    yield from _serve_notebooks(tmp_path_factory, "jupyterlab-tutorials", graph_renderer=True,
                                source=lh.REPO / "notebooks")


@pytest.fixture(scope="session")
def chromium():
    """A headless system Chromium driven by Playwright, for the whole session."""
    if lh.find_chromium() is None:
        pytest.fail(lh.CHROMIUM_MISSING, pytrace=False)
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as e:
        pytest.fail(f"the browser tests need playwright (Python), from the dev extra: {e}",
                    pytrace=False)
    playwright = sync_playwright().start()
    try:
        browser = lh.launch_chromium(playwright)
        yield browser
        browser.close()
    finally:
        playwright.stop()


@pytest.fixture(scope="session")
def expect():
    """Playwright's ``expect`` (imported here so collection works without playwright)."""
    from playwright.sync_api import expect as _expect

    _expect.set_options(timeout=ACTION_TIMEOUT_MS)
    return _expect


class NotebookPage:
    """A browser tab on one notebook, with the checks every browser test wants."""

    def __init__(self, page, server: lh.LabServer, screenshots: Path, test_name: str):
        self.page = page
        self.server = server
        self.screenshots = screenshots
        self.test_name = test_name
        self.dialogs: list[str] = []
        self.page_errors: list[str] = []
        page.on("dialog", self._on_dialog)
        page.on("pageerror", lambda exc: self.page_errors.append(str(exc)))

    def _on_dialog(self, dialog) -> None:
        # A dialog here means some text was executed as script: record it, never block on it.
        self.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    def open_and_run(self, path: str) -> NotebookPage:
        """Open ``path``, run all its cells from the Run menu, and fail on any traceback."""
        from dflab.notebook._saved import SETTLE_S

        lh.open_notebook(self.page, self.server, path)
        lh.run_all_cells(self.page)
        # Widgets changed by the last cells replace their outputs once settled, which draws
        # them anew: a click before that could land on a view about to go.
        self.page.wait_for_timeout((SETTLE_S + 0.5) * 1000)
        self.assert_no_errors()
        return self

    def assert_no_errors(self) -> None:
        errors = lh.error_outputs(self.page)
        assert not errors, "a cell raised:\n" + "\n\n".join(errors)

    def cell(self, marker: str):
        """The code cell whose source contains ``marker``."""
        return lh.code_cell(self.page, marker)

    def output(self, marker: str):
        """The output area of the cell marked ``marker``."""
        return self.cell(marker).locator(".jp-OutputArea")

    def output_text(self, marker: str) -> str:
        return self.output(marker).inner_text()

    def output_json(self, marker: str):
        """What the cell printed, parsed as JSON (the notebooks print facts as JSON)."""
        return json.loads(lh.stdout_text(self.cell(marker)))

    def drawings(self, marker: str) -> list[dict]:
        return lh.svg_drawings(self.output(marker))

    def rerun(self, marker: str) -> None:
        lh.rerun_cell(self.page, marker)
        self.assert_no_errors()

    def screenshot(self, name: str, locator=None) -> Path:
        path = self.screenshots / f"{name}.png"
        self.page.mouse.move(0, 0)  # no tooltip left over from the last hover or click
        if locator is None:
            self.page.screenshot(path=path, full_page=True)
        else:
            locator.scroll_into_view_if_needed()
            locator.screenshot(path=path)
        return path

    def shutdown_kernels(self) -> None:
        """End this notebook's kernel so kernels do not pile up over the session."""
        try:
            for session in self.server.api("GET", "/api/sessions") or []:
                self.server.api("DELETE", f"/api/sessions/{session['id']}", timeout=20)
        except OSError:
            pass  # the server's own shutdown will end it


@pytest.fixture
def notebook(request, chromium, lab_server, screenshots_dir):
    """A fresh browser tab (own context: no shared storage) on the session's JupyterLab."""
    yield from _notebook_page(request, chromium, lab_server, screenshots_dir)


@pytest.fixture
def renderer_notebook(request, chromium, renderer_lab_server, screenshots_dir):
    """A fresh browser tab on the JupyterLab that has dflab's graph renderer."""
    yield from _notebook_page(request, chromium, renderer_lab_server, screenshots_dir)


@pytest.fixture
def tutorial(request, chromium, tutorials_lab_server, screenshots_dir):
    """A fresh browser tab on the JupyterLab serving the tutorials (1400 x 900, a projector's
    shape)."""
    yield from _notebook_page(request, chromium, tutorials_lab_server, screenshots_dir,
                              viewport=TUTORIAL_VIEWPORT)


def _notebook_page(request, chromium, server, screenshots_dir, viewport=None):
    context = chromium.new_context(viewport=viewport or VIEWPORT)
    context.set_default_timeout(ACTION_TIMEOUT_MS)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    nb = NotebookPage(context.new_page(), server, screenshots_dir, name)
    try:
        yield nb
        report = getattr(request.node, "_report_call", None)
        if report is not None and report.failed:
            nb.screenshot(f"FAILED-{name}")
    finally:
        nb.shutdown_kernels()
        context.close()
    # Checked for every test, not only the XSS ones: no text from a graph may ever run as script.
    assert not nb.dialogs, f"a dialog fired: {nb.dialogs}"
