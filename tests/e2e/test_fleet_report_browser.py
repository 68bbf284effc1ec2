"""The fleet report in a real browser: every chart draws, offline, with no console error.

The demo fleet (three hosts' demo homes, scanned two to four times, every scan published) is
reported with ``make_fleet_report``; Chromium opens the page at 1,000 and 1,600 px with the
network cut off. Screenshots go to ``$HYGIENE_NB_ARTIFACTS`` when set, else to
``reports/test-artifacts/fleet/`` (git-ignored), for a person to look at.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.notebook.demo import DEMO_HOSTS, make_demo_fleet
from hygiene_nb.notebook.fleet import FLEET_FIGURE_IDS
from hygiene_nb.notebook.fleet_report import make_fleet_report

HERE = Path(__file__).resolve().parents[2]
WIDTHS = (1000, 1600)

# per figure: how many of its SVG marks (bars, lines, markers) have a non-empty shape
MARKS = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(plot => {
  const marks = plot.querySelectorAll(
    ['path.point', 'g.point path', 'path.js-line'].map(s => '.plot-container svg ' + s).join(', '));
  const drawn = Array.from(marks).filter(m => {
    const d = m.getAttribute('d');
    return !!d && d !== 'M0,0Z' && !d.includes('NaN');
  });
  return [plot.id, drawn.length];
})"""

# a table cell or command line wider than the page would need a sideways scroll of the page
OVERFLOW = """() => document.documentElement.scrollWidth - document.documentElement.clientWidth"""


@pytest.mark.slow
def test_the_fleet_report_draws_every_chart_offline_without_console_errors(
    tmp_path: Path, chromium: Callable[[], AbstractContextManager[Any]]
) -> None:
    dest = make_demo_fleet(tmp_path / "hosts", tmp_path / "fleet")
    done = make_fleet_report(str(dest), out=tmp_path / "reports")
    assert done.hosts == len(DEMO_HOSTS)
    artifacts = Path(
        os.environ.get("HYGIENE_NB_ARTIFACTS") or HERE / "reports/test-artifacts/fleet"
    )
    artifacts.mkdir(parents=True, exist_ok=True)
    problems: list[str] = []
    with chromium() as browser:
        for width in WIDTHS:
            problems += [
                f"@ {width}px: {e}" for e in look(browser, Path(done.html), width, artifacts)
            ]
    assert problems == [], "\n".join(problems)


def look(browser: Any, page_path: Path, width: int, artifacts: Path) -> list[str]:
    """What is wrong with the report at one width (nothing: an empty list)."""
    page = browser.new_page(viewport={"width": width, "height": 1000})
    requests: list[str] = []
    errors: list[str] = []

    def cut(route: Any) -> None:
        requests.append(route.request.url)
        route.abort()

    page.route(lambda url: not url.startswith("file:"), cut)
    page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
    page.on("console", lambda m: errors.append(f"console: {m.text}") if m.type == "error" else None)
    page.goto(page_path.as_uri())
    page.wait_for_function(
        f"document.querySelectorAll('.js-plotly-plot').length >= {len(FLEET_FIGURE_IDS)}",
        timeout=30_000,
    )
    page.wait_for_timeout(300)
    marks = dict(page.evaluate(MARKS))
    overflow = int(page.evaluate(OVERFLOW))
    hosts = page.locator(".hnb-host h3").all_inner_texts()
    page.screenshot(path=str(artifacts / f"fleet-report-{width}.png"), full_page=True)
    page.close()
    errors += [f"{i} drew nothing" for i, n in marks.items() if n == 0]
    if sorted(marks) != sorted(f"hnb-{i}" for i in FLEET_FIGURE_IDS):
        errors.append(f"figures drawn: {sorted(marks)}")
    if hosts != sorted(h for h, _ in DEMO_HOSTS):
        errors.append(f"host sections: {hosts}")
    if overflow > 0:
        errors.append(f"the page scrolls sideways by {overflow} px")
    errors += [f"fetched {u}" for u in requests]
    return errors
