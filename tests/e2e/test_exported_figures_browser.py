"""Every notebook, exported with ``jupyter nbconvert --execute --to html``, draws its figures.

The export is the stock one a reader runs (nbconvert's lab template, no option of ours), on the
demo store. Chromium opens each page with the network cut off, at 1,000 and 1,600 px: no page
error and no console error may appear (beyond the template's own CDN assets failing to load,
which the figures must not need), and every plotly figure must have drawn marks. The audit
report, which inlines plotly.js itself, is checked the same way. Screenshots are kept under
``reports/test-artifacts/figures/`` (git-ignored) for a person to look at.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.notebook.demo import DEMO_DIR_ENV, ensure_demo
from hygiene_nb.notebook.report import make_report

HERE = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((HERE / "notebooks").glob("*.ipynb"))
ARTIFACTS = HERE / "reports" / "test-artifacts" / "figures"
WIDTHS = (1000, 1600)

# per figure: how many of its SVG marks (bars, boxes, lines, slices) have a non-empty shape
MARKS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(plot => {
  const marks = plot.querySelectorAll(
    ['path.point', 'g.point path', 'path.js-line', 'g.slice path', '.annotation-text']
      .map(s => '.plot-container svg ' + s).join(', '));
  const drawn = Array.from(marks).filter(m => {
    const d = m.getAttribute('d');
    if (m.tagName === 'path') return !!d && d !== 'M0,0Z' && !d.includes('NaN');
    return m.getBoundingClientRect().width > 0;
  });
  return [plot.id, drawn.length];
})"""


def export(notebook: Path, out: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    jupyter = Path(sys.executable).parent / "jupyter"
    cmd = [str(jupyter), "nbconvert", "--execute", "--to", "html", str(notebook)]
    return subprocess.Popen(
        [*cmd, "--output-dir", str(out)], cwd=out, env=env, stderr=subprocess.PIPE
    )


@pytest.mark.slow
def test_every_exported_notebook_and_the_report_draw_their_figures(
    tmp_path: Path, chromium: Callable[[], AbstractContextManager[Any]]
) -> None:
    demo = ensure_demo(tmp_path / "demo")  # built once; every kernel reuses it
    env = {
        **os.environ,
        DEMO_DIR_ENV: str(tmp_path / "demo"),
        "PYDEVD_DISABLE_FILE_VALIDATION": "1",
    }
    out = tmp_path / "html"
    out.mkdir()
    running = [export(nb, out, env) for nb in NOTEBOOKS]
    for nb, proc in zip(NOTEBOOKS, running, strict=True):
        _, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"{nb.name}: {err.decode(errors='replace')[-2000:]}"
    pages = {nb.stem: out / f"{nb.stem}.html" for nb in NOTEBOOKS}
    report = make_report(str(demo.root), store=demo.store, out=tmp_path / "reports")
    pages["report"] = Path(report.html)
    for name, page_path in pages.items():
        if name != "report":  # the notebook's own figures carry plotly.js once, not per figure
            assert page_path.read_text().count("* plotly.js v") <= 1, name

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with chromium() as browser:
        for name, page_path in pages.items():
            for width in WIDTHS:
                problems += [
                    f"{name} @ {width}px: {e}" for e in look(browser, page_path, name, width)
                ]
    assert problems == [], "\n".join(problems)


def look(browser: Any, page_path: Path, name: str, width: int) -> list[str]:
    """What is wrong with one exported page at one width (nothing: an empty list)."""
    page = browser.new_page(viewport={"width": width, "height": 1000})
    blocked: set[str] = set()
    errors: list[str] = []

    def cut(route: Any) -> None:
        blocked.add(route.request.url)
        route.abort()

    def console(msg: Any) -> None:
        if msg.type == "error" and msg.location.get("url") not in blocked:
            errors.append(f"console: {msg.text}")  # (the template's CDN scripts are cut off)

    page.route(lambda url: not url.startswith("file:"), cut)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", console)
    page.goto(page_path.as_uri())
    page.wait_for_load_state("load")
    page.wait_for_timeout(500)
    marks = page.evaluate(MARKS)
    page.screenshot(path=str(ARTIFACTS / f"{name}-{width}.png"), full_page=True)
    page.close()
    errors += [f"{i} drew nothing" for i, n in marks if n == 0]
    expected = page_path.read_text().count("Plotly.newPlot(")
    if len(marks) != expected:
        errors.append(f"{len(marks)} of {expected} figures drawn")
    return errors
