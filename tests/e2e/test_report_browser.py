"""The report in a real browser, on a real temporary tree: every chart drawn, numbers unbroken.

Chromium opens the report with the network cut off at a 1,000 px window (the narrowest the
report is laid out for): each figure draws, nothing is fetched, no console error appears, and
no cell of a number column (sizes, counts, shares) breaks across lines. A screenshot is kept
under ``HYGIENE_NB_ARTIFACTS`` (default: the test's tmp dir) as ``report-1000.png``.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.notebook.report import make_report
from tests.helpers import LONG_NAME, report_tree, write

WIDTH = 1000
ARTIFACTS_ENV = "HYGIENE_NB_ARTIFACTS"

# per number cell: its text, how many line heights its text takes, and the table's heading
NUMBER_CELLS = """() => Array.from(document.querySelectorAll('td.num')).map(td => {
  const range = document.createRange();
  range.selectNodeContents(td);
  const size = parseFloat(getComputedStyle(td).fontSize);
  return [td.innerText, range.getBoundingClientRect().height / size];
})"""


@pytest.mark.slow
def test_the_report_draws_every_chart_and_no_number_wraps_at_1000px(
    tmp_path: Path, chromium: Callable[[], AbstractContextManager[Any]]
) -> None:
    root, store = report_tree(tmp_path / "tree"), tmp_path / "store"
    api.scan_root(root, store=store)
    write(root / LONG_NAME / "second.bin", 250_000)
    for old in sorted((root / "src").glob("m00[0-4]?.py")):
        old.unlink()
    api.scan_root(root, store=store)
    api.annotate([str(root / "src" / "__pycache__")], store=store, decision="delete")
    report = Path(make_report(str(root), store=store, out=tmp_path / "reports").html)
    expected = report.read_text().count("Plotly.newPlot(")
    shots = Path(os.environ.get(ARTIFACTS_ENV) or tmp_path / "artifacts")
    shots.mkdir(parents=True, exist_ok=True)
    fetched: list[str] = []
    errors: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": WIDTH, "height": 1000})

        def cut(route: Any) -> None:
            fetched.append(route.request.url)
            route.abort()

        page.route(lambda url: not url.startswith("file:"), cut)
        page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(report.as_uri())
        page.wait_for_function(
            f"document.querySelectorAll('.js-plotly-plot').length >= {expected}", timeout=30_000
        )
        page.wait_for_timeout(500)
        drawn = page.locator(".js-plotly-plot").count()
        slices = page.locator("#hnb-treemap g.slice").count()
        numbers = page.evaluate(NUMBER_CELLS)
        page.screenshot(path=str(shots / f"report-{WIDTH}.png"), full_page=True)
    assert drawn == expected > 5
    assert slices > 3  # the treemap really drew its boxes
    assert fetched == [] and errors == [], (fetched, errors)
    assert len(numbers) > 20  # the largest entries, the totals, the owners, the diff...
    broken = [(text, lines) for text, lines in numbers if lines > 1.6]
    assert broken == [], broken  # one line each: a line of text is about 1.2 font sizes high
