"""The fleet report: papermill runs the packaged fleet notebook, nbconvert writes offline HTML.

``make_fleet_report`` is what ``hygiene-nb report --fleet DEST`` calls. It writes
``<out>/fleet/<dest-slug>/<newest-scan-id>.ipynb`` and ``.html`` with the audit report's
template (no code, plotly.js inlined once, nothing fetched): a fleet that gained no scan gives
the same file name and the same bytes again; a newly published scan, a new report beside the
old one. It reads the fleet dataset and writes only its own two files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import nbformat

from hygiene_nb.errors import ReportFailed, UsageError
from hygiene_nb.fleet.answers import ask
from hygiene_nb.fleet.reader import ENGINES
from hygiene_nb.notebook.report import _execute, _html
from hygiene_nb.pathnames import shown
from hygiene_nb.scan.index import root_slug
from hygiene_nb.store import write_private_file

__all__ = ["FLEET_NOTEBOOK", "FleetReportResult", "make_fleet_report"]

FLEET_NOTEBOOK = "notebooks/fleet.ipynb"  # inside the package
EMPTY_NAME = "no-scans"  # the report's name while the fleet holds no complete scan


@dataclass(frozen=True)
class FleetReportResult:
    """Where a fleet report was written and what it was made from."""

    dest: str
    engine: str
    newest_scan: str | None
    hosts: int
    scans: int
    notebook: str
    html: str

    exit_code = 0  # a failing cell raises ReportFailed (exit 1) instead

    def to_json(self) -> dict[str, Any]:
        """What ``hygiene-nb report --fleet DEST --json`` prints."""
        return {
            "status": "done",
            "fleet": self.dest,
            "engine": self.engine,
            "newest_scan": self.newest_scan,
            "hosts": self.hosts,
            "scans": self.scans,
            "html": self.html,
            "notebook": self.notebook,
        }

    def text(self) -> str:
        """The lines ``hygiene-nb report --fleet`` prints."""
        return f"report: {shown(self.html)}\nnotebook: {shown(self.notebook)}"


def make_fleet_report(
    dest: str,
    *,
    engine: str = "duckdb",
    out: str | os.PathLike[str] = "reports",
    timeout: int = 900,
) -> FleetReportResult:
    """Run the fleet notebook on the fleet dataset ``dest``; write its ``.ipynb`` and ``.html``.

    Args:
        dest: a fleet dataset: a directory, ``file://…`` or ``s3://bucket/prefix``.
        engine: ``duckdb`` or ``spark`` (a directory ``dest`` only), what the notebook asks with.
        out: the reports directory (``fleet/<dest-slug>/<newest-scan>.*`` go inside it).
        timeout: seconds any one cell may run.

    Raises:
        UsageError: an unknown engine.
        NotAFleet, FleetTooNew, FleetUnusable: ``dest`` cannot be read as a fleet dataset.
        ReportFailed: a cell failed (both files are written all the same).
    """
    if engine not in ENGINES:
        raise UsageError(f"--engine {engine!r}: choose one of {', '.join(ENGINES)}.")
    if "://" not in dest:  # the kernel runs in the report's folder: a relative path moves
        dest = os.path.abspath(dest)
    # read once here (DuckDB, the markers only): a DEST that is no fleet fails before a kernel
    answer = ask(dest, "summary")
    summary = answer.frame("summary")
    newest: str | None = None
    if len(summary):
        latest = summary.sort_values(["started_s", "scan"]).iloc[-1]
        newest = str(latest["scan"])
    folder = Path(out) / "fleet" / root_slug(dest)
    name = newest or EMPTY_NAME
    nb_path, html_path = folder / f"{name}.ipynb", folder / f"{name}.html"
    folder.mkdir(parents=True, exist_ok=True)
    env = {"PLOTLY_RENDERER": "plotly_mimetype+notebook", "PYDEVD_DISABLE_FILE_VALIDATION": "1"}
    parameters = {"dest": dest, "engine": engine}
    executed, failure = _execute(FLEET_NOTEBOOK, parameters, env, cwd=folder, timeout=timeout)
    write_private_file(nb_path, nbformat.writes(executed).encode())
    write_private_file(html_path, _html(executed, f"Fleet report: {dest}").encode())
    if failure is not None:
        why = f"{getattr(failure, 'ename', 'error')}: {getattr(failure, 'evalue', failure)}"
        raise ReportFailed(
            f"a cell of the fleet report failed ({why}); see {html_path} for where. Fix "
            "the cause (or report it), then run the report again."
        )
    hosts = len({str(h) for h in summary["host"]})
    return FleetReportResult(
        dest, engine, newest, hosts, answer.scans, str(nb_path), str(html_path)
    )
