"""Notebook 7 (the ``notebook`` package) runs a packaged notebook and draws its figures offline.

``jupyter notebook`` on loopback (``tests/helpers_jupyter.py``) serves notebooks/history.ipynb
on the demo store; chromium opens it with every request beyond the server cut off, runs all
cells through ``window.jupyterapp``, and each figure the notebook shows must be drawn by the
plotly mime renderer with marks (non-empty SVG paths), with no console or page error. A
screenshot of each figure is kept under ``reports/test-artifacts/notebook7/`` (git-ignored).
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import nbformat
import pytest

from hygiene_nb.notebook.demo import ensure_demo
from tests.helpers_jupyter import (
    KERNEL_CONNECTED,
    PLOTLY_MARKS,
    TOKEN,
    free_port,
    jupyter_env,
    start_jupyter,
    stop,
    wait_for_port,
)

HERE = Path(__file__).resolve().parents[2]
NOTEBOOK = HERE / "notebooks" / "history.ipynb"
ARTIFACTS = HERE / "reports" / "test-artifacts" / "notebook7"
TIMEOUT_MS = 60_000

# Notebook 7's own keyboard-shortcuts plugin reads a settings schema before the registry holds
# it while the page loads (jupyter/notebook#7862, open; JupyterLab does not): that one page
# error, thrown from Notebook 7's core bundle before any cell runs, is the only one let through
NOTEBOOK_7_LOAD_RACE = "Cannot read properties of undefined (reading 'schema')"


def notebook_7_load_race(error: Any, page_url: str) -> bool:
    """Whether a page error is jupyter/notebook#7862's, thrown by Notebook 7's core bundle."""
    stack = str(error.stack or "").splitlines()
    return (
        error.message == NOTEBOOK_7_LOAD_RACE
        and len(stack) > 1
        and f"{page_url}static/notebook/notebook_core." in stack[1]
    )


# whether every code cell has run (an execution count, none waiting) and how many figures the
# plotly mime renderer drew (not the HTML fallback: its outputs carry the plotly mimetype)
STATE = """() => {
  const panel = window.jupyterapp.shell.currentWidget;
  const cells = panel.content.widgets.filter(c => c.model.type === 'code');
  const ran = cells.every(c => c.model.executionCount !== null &&
                               !c.node.querySelector('.jp-InputPrompt').textContent.includes('*'));
  const mime = 'application/vnd.plotly.v1+json';
  let figures = 0;
  for (const c of cells) {
    for (let i = 0; i < c.model.outputs.length; i++) {
      if (mime in c.model.outputs.get(i).data) figures += 1;
    }
  }
  return {ran: ran, figures: figures, drawn: document.querySelectorAll('.js-plotly-plot').length};
}"""


def shown_figures(notebook: Path) -> int:
    """How many figures the notebook's code shows (one per ``figures.show(`` call)."""
    cells = nbformat.read(notebook, as_version=4).cells
    return sum(c.source.count("figures.show(") for c in cells if c.cell_type == "code")


@pytest.mark.slow
def test_notebook_7_draws_the_history_figures_offline(
    tmp_path: Path, chromium: Callable[[], AbstractContextManager[Any]]
) -> None:
    from playwright.sync_api import expect

    want = shown_figures(NOTEBOOK)
    assert want >= 3
    ensure_demo(tmp_path / "demo")  # built before the server; the kernel reuses it
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(NOTEBOOK, served / NOTEBOOK.name)
    log = tmp_path / "notebook.log"
    port = free_port()
    env = jupyter_env(tmp_path / "jupyter", tmp_path / "demo")
    server = start_jupyter("notebook", served, port, env, log)
    local = f"http://127.0.0.1:{port}/"
    try:
        wait_for_port(port, server)
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            page.set_default_timeout(30_000)
            blocked: list[str] = []
            errors: list[str] = []

            def cut(route: Any) -> None:
                blocked.append(route.request.url)
                route.abort()

            page.route(lambda url: not url.startswith(local), cut)  # offline: the server only
            ran_cells = False

            def page_error(error: Any) -> None:
                if ran_cells or not notebook_7_load_race(error, local):
                    errors.append(f"page error: {error}\n{error.stack}")

            def console(msg: Any) -> None:
                if msg.type == "error":
                    errors.append(f"console: {msg.text} ({msg.location.get('url')})")

            page.on("console", console)
            page.on("pageerror", page_error)
            page.goto(f"{local}notebooks/{NOTEBOOK.name}?token={TOKEN}", timeout=TIMEOUT_MS)
            page.wait_for_function(KERNEL_CONNECTED, timeout=TIMEOUT_MS)
            # Notebook 7, not JupyterLab: its own shell, one document per page
            assert page.evaluate("window.jupyterapp.name") == "Jupyter Notebook"
            ran_cells = True  # from here on, every error counts
            page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
            page.wait_for_function(
                f"() => {{ const s = ({STATE})(); return s.ran && s.drawn >= {want}; }}",
                timeout=TIMEOUT_MS,
            )
            page.wait_for_timeout(500)  # plotly.js's first draw settles
            state = page.evaluate(STATE)
            marks = page.evaluate(PLOTLY_MARKS)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            plots = page.locator(".js-plotly-plot")  # the page scrolls inside: one shot each
            for i in range(plots.count()):
                plots.nth(i).screenshot(path=str(ARTIFACTS / f"history-figure-{i + 1}.png"))
            tracebacks = page.locator(".jp-OutputArea-output[data-mime-type*='error']")
            expect(tracebacks).to_have_count(0)
            assert state == {"ran": True, "figures": want, "drawn": want}, state
            assert len(marks) == want and all(n > 0 for _, n in marks), marks
            assert not any(re.search(r"plotly", u, re.I) for u in blocked), blocked
            assert errors == [], "\n".join(errors)
    except BaseException:
        print(f"--- jupyter notebook log (tail of {log}) ---")
        print("\n".join(log.read_text(errors="replace").splitlines()[-60:]))
        raise
    finally:
        stop(server)
