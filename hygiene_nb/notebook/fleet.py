"""The fleet notebook's parts: its headline, tables, figures and the commands for each host.

``load`` asks a fleet dataset every question once (``hygiene_nb.fleet.answers.ask_many``);
each ``show_…`` function displays one section of ``notebooks/fleet.ipynb`` (and of
``hygiene-nb report --fleet``): a chart and a compact table, or one sentence when there is
nothing to draw, never an empty chart. The figures are built in ``notebook.fleet_figures``
(re-exported here: ``size_figure``, ``history_figure``, …), with fixed ids
(``FLEET_FIGURE_IDS``), shown through ``figures.show`` like the audit report's.

A fleet dataset is evidence, never authority: the per-host section names the commands to run
on that host (``summary``, ``report``, ``plan``); no plan is ever made from the fleet.
"""

from __future__ import annotations

import html
import os
import shlex
import sys
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from hygiene_nb import formatting as fmt
from hygiene_nb.fleet.answers import ask_many
from hygiene_nb.fleet.reader import Skipped
from hygiene_nb.notebook import figures
from hygiene_nb.notebook.fleet_figures import (
    FLEET_FIGURE_IDS,
    distinct_dirs,
    history_figure,
    host_sizes,
    owners_figure,
    size_figure,
    stale_figure,
    top_dirs_figure,
)
from hygiene_nb.notebook.fleet_figures import path_under as _root_of
from hygiene_nb.notebook.fleet_figures import said_when as _when
from hygiene_nb.notebook.tables import table_html

__all__ = [
    "FLEET_FIGURE_IDS",
    "FleetView",
    "commands_for",
    "distinct_dirs",
    "fleet_headline_html",
    "history_figure",
    "host_html",
    "host_sizes",
    "latest_frame",
    "load",
    "owners_figure",
    "show_headline",
    "show_history",
    "show_hosts",
    "show_latest",
    "show_owners",
    "show_size",
    "show_skipped",
    "show_stale",
    "show_top_dirs",
    "size_figure",
    "stale_figure",
    "top_dirs_figure",
]

_HOST_TOP_DIRS = 3  # growing directories named per host in its findings
_ROOT_WIDTH = 40  # characters of a root's path in a table cell

NO_SCANS = (
    "This fleet dataset holds no complete scan yet: publish one from each host with "
    "`hygiene-nb publish DEST ROOT`."
)


@dataclass(frozen=True)
class FleetView:
    """Every question's answer for one fleet dataset, as DataFrames."""

    dest: str
    engine: str
    summary: pd.DataFrame
    history: pd.DataFrame
    growth: pd.DataFrame
    top_dirs: pd.DataFrame
    risk: pd.DataFrame
    stale: pd.DataFrame
    owners: pd.DataFrame
    scans: int = 0
    skipped: list[Skipped] = field(default_factory=list)

    @property
    def hosts(self) -> list[str]:
        """The hosts with a complete scan, in name order."""
        return sorted({str(h) for h in self.summary["host"]})


def load(dest: str, *, engine: str = "duckdb", **options: Any) -> FleetView:
    """Ask ``dest`` every fleet question on ``engine`` (options as ``fleet.answers.ask``)."""
    with _engine_output_hidden(engine == "spark"):
        answers = ask_many(dest, engine=engine, **options)
    growth = answers["growth"]
    return FleetView(
        dest=dest,
        engine=engine,
        summary=answers["summary"].frame("summary"),
        history=answers["history"].frame("history"),
        growth=growth.frame("growth"),
        top_dirs=growth.frame("top_dirs"),
        risk=answers["risk"].frame("risk"),
        stale=answers["stale"].frame("stale"),
        owners=answers["owners"].frame("owners"),
        scans=answers["summary"].scans,
        skipped=list(answers["summary"].skipped),
    )


@contextmanager
def _engine_output_hidden(hide: bool) -> Iterator[None]:
    """With ``hide``, the process's stderr (file descriptor 2) goes nowhere meanwhile.

    Spark's JVM logs to the stderr it is started with: started with it closed off, none of
    its logging reaches the notebook's outputs (errors still arrive as exceptions), nor does
    pyspark's warning about the pandas version.
    """
    if not hide:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 2)
        with warnings.catch_warnings():  # pyspark's note on the pandas version it was tested with
            warnings.filterwarnings(
                "ignore", message="PySpark does not yet", category=FutureWarning
            )
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


# -- small helpers -----------------------------------------------------------------------------


def _say(text: str) -> None:
    from IPython.display import Markdown, display

    display(Markdown(text))


def _show_html(text: str) -> None:
    from IPython.display import HTML, display

    display(HTML(text))


def _e(text: object) -> str:
    """A name for HTML: control characters shown escaped, then HTML-escaped."""
    return html.escape(fmt.shown(str(text)))


# -- the headline ------------------------------------------------------------------------------

_STYLE = """<style>
.hnb-headline{font-family:system-ui,sans-serif;max-width:1200px}
.hnb-cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(220px,1fr));gap:10px}
.hnb-card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;background:#fafafa}
.hnb-card h3{margin:0 0 4px;font-size:0.85em;font-weight:600;color:#555;text-transform:uppercase}
.hnb-card .big{font-size:1.6em;font-weight:600}
.hnb-card p{margin:2px 0;font-size:0.9em;color:#333}
.hnb-host{border:1px solid #ddd;border-radius:6px;padding:6px 12px;margin:10px 0;
  font-family:system-ui,sans-serif;max-width:1200px}
.hnb-host h3{margin:4px 0}
.hnb-host ul{margin:4px 0 6px 18px;padding:0}
.hnb-host pre{background:#f4f4f4;border-radius:4px;padding:6px 10px;overflow-x:auto;
  margin:4px 0}
</style>"""


def _card(title: str, big: str, lines: list[str]) -> str:
    return (
        f'<div class="hnb-card"><h3>{html.escape(title)}</h3><div class="big">{big}</div>'
        + "".join(f"<p>{line}</p>" for line in lines)
        + "</div>"
    )


def fleet_headline_html(view: FleetView) -> str:
    """One screen: hosts, roots, total size, total safe to remove, the hosts that grew most."""
    where = f"<p>{_e(view.dest)} · read with {_e(view.engine)}</p>"
    if not len(view.summary):
        return f'{_STYLE}<div class="hnb-headline">{where}<p>{html.escape(NO_SCANS)}</p></div>'
    s = view.summary
    hosts = view.hosts
    started = [int(t) for t in s["started_s"]]
    span = (
        f"latest scans from {_when(min(started))} to {_when(max(started))}"
        if min(started) != max(started)
        else f"latest scan {_when(max(started))}"
    )
    cards = [
        _card(
            "Hosts",
            fmt.thousands(len(hosts)),
            [
                f"{fmt.counted(len(s), 'root')}, {fmt.counted(view.scans, 'scan')} published",
                span,
            ],
        ),
        _card(
            "Total size",
            fmt.bytes_html(int(s["alloc"].sum())),
            ["allocated on disk, the latest scan of every root"],
        ),
    ]
    reclaim = s.groupby("host")["reclaimable"].sum()
    holding = int((reclaim > 0).sum())
    cards.append(
        _card(
            "Safe to remove",
            fmt.bytes_html(int(reclaim.sum())),
            [
                f"on {fmt.counted(holding, 'host')}: deleting the entries classified "
                "<em>safe</em>, decided and done on each host"
            ],
        )
    )
    grew = view.growth[view.growth["growth"] > 0]
    if len(grew):
        first, *rest = grew.head(3).itertuples(index=False)
        lines = [f"{_e(first.host)}, since {_when(first.since_s)}"]
        lines += [f"{_e(g.host)}: {_signed(g.growth)}" for g in rest]
        cards.append(_card("Grew most", _signed(first.growth), lines))
    else:
        cards.append(
            _card(
                "Grew most",
                "\u2014",
                ["No host grew between its first and its latest scan."],
            )
        )
    cards.append(
        _card(
            "Untouched for a year",
            fmt.bytes_html(int(s["stale"].sum())),
            ["files no one has modified for a year, as of each scan"],
        )
    )
    skipped = ""
    if view.skipped:
        skipped = (
            f"<p>{fmt.counted(len(view.skipped), 'partition')} not read (incomplete or "
            "damaged): see the end of this report.</p>"
        )
    return (
        f'{_STYLE}<div class="hnb-headline">{where}'
        f'<div class="hnb-cards">{"".join(cards)}</div>{skipped}</div>'
    )


def show_headline(view: FleetView) -> None:
    """Display the fleet's headline."""
    _show_html(fleet_headline_html(view))


# -- the latest scan of every host and root ----------------------------------------------------


def _bytes(value: Any) -> str:
    return "\u2014" if pd.isna(value) else fmt.bytes_html(int(value))


def _signed(value: Any) -> str:
    return "\u2014" if pd.isna(value) else fmt.bytes_html(int(value), signed=True)


def _time(value: Any) -> str:
    return "\u2014" if pd.isna(value) else html.escape(_when(value))


def _score(value: Any) -> str:
    return "\u2014" if pd.isna(value) else f"{int(value)} / 100"


def _count(value: Any) -> str:
    return "\u2014" if pd.isna(value) else fmt.thousands(int(value))


def _name(value: Any) -> str:
    return _e(value)


def _path(value: Any) -> str:
    """A root's path, shortened in the middle to fit a cell (the whole path on hover)."""
    text = str(value)
    return f'<span title="{_e(text)}">{_e(fmt.display_path(text, width=_ROOT_WIDTH))}</span>'


def _wide(table: str) -> str:
    """A table that scrolls sideways inside its cell when the page is narrower than it."""
    return f'<div style="overflow-x:auto;max-width:100%">{table}</div>'


def latest_frame(view: FleetView) -> pd.DataFrame:
    """The latest scan of every host and root, the columns people read, in host order."""
    s = view.summary
    return pd.DataFrame(
        {
            "host": s["host"],
            "root": s["root"],
            "scanned": s["started_s"],
            "size": s["alloc"],
            "growth": s["growth"],
            "free": s["fs_free"],
            "safe to remove": s["reclaimable"],
            "untouched 1 year+": s["stale"],
            "score": s["cleanliness"],
            "entries": s["entries"],
        }
    )


_LATEST_FORMATS = {
    "host": _name,
    "root": _path,
    "scanned": _time,
    "size": _bytes,
    "growth": _signed,
    "free": _bytes,
    "safe to remove": _bytes,
    "untouched 1 year+": _bytes,
    "score": _score,
    "entries": _count,
}


def show_latest(view: FleetView) -> None:
    """The table of the latest scan of every host and root (growth: since the scan before)."""
    if not len(view.summary):
        _say(NO_SCANS)
        return
    _show_html(_wide(table_html(latest_frame(view), _LATEST_FORMATS)))


# -- size per host, stacked by risk ------------------------------------------------------------


def show_size(view: FleetView) -> None:
    """The size-per-host chart, or the sentence saying there is nothing to draw."""
    fig = size_figure(view)
    if fig is None:
        _say(NO_SCANS if not len(view.summary) else "No host holds any bytes in its latest scans.")
        return
    figures.show(fig)


# -- history -----------------------------------------------------------------------------------


def show_history(view: FleetView) -> None:
    """The history chart, or what it will show once a host has a second scan."""
    fig = history_figure(view)
    if fig is None:
        _say(
            NO_SCANS
            if not len(view.summary)
            else "Every host has one scan so far: after a host's next published scan, this "
            "shows its size over time."
        )
        return
    figures.show(fig)


# -- the directories that grew most ------------------------------------------------------------


def show_top_dirs(view: FleetView) -> None:
    """The top growing directories: a chart and the table, or why there are none."""
    fig = top_dirs_figure(view)
    if fig is None:
        _say(
            NO_SCANS
            if not len(view.summary)
            else "No directory grew: growth compares a root's latest scan with the one before, "
            "so it needs two published scans of a root."
        )
        return
    figures.show(fig)
    t = distinct_dirs(view.top_dirs)
    frame = pd.DataFrame(
        {
            "host": t["host"],
            "directory": [
                _root_of(str(p), str(r)) for p, r in zip(t["path"], t["root"], strict=True)
            ],
            "root": t["root"],
            "growth": t["growth"],
            "before": t["before_alloc"],
            "now": t["alloc"],
            "holds": t["holds"],
        }
    )
    formats = {
        "host": _name,
        "directory": _name,
        "root": _path,
        "growth": _signed,
        "before": _bytes,
        "now": _bytes,
        "holds": _name,
    }
    _show_html(_wide(table_html(frame, formats)))


# -- stale per host ----------------------------------------------------------------------------


def show_stale(view: FleetView) -> None:
    """Stale bytes per host: a chart and a table, or the sentence when nothing is stale."""
    if not len(view.stale):
        _say(NO_SCANS)
        return
    fig = stale_figure(view)
    if fig is None:
        _say("Nothing on any host has gone unmodified for a year.")
        return
    figures.show(fig)
    st = view.stale
    share = [
        fmt.percent(int(v) / int(a)) if int(a) else "-"
        for v, a in zip(st["stale"], st["alloc"], strict=True)
    ]
    frame = pd.DataFrame(
        {
            "host": st["host"],
            "roots": st["roots"],
            "untouched 1 year+": st["stale"],
            "size": st["alloc"],
            "share": share,
        }
    )
    formats = {
        "host": _name,
        "roots": _count,
        "untouched 1 year+": _bytes,
        "size": _bytes,
        "share": _name,
    }
    _show_html(_wide(table_html(frame, formats)))


# -- owners across hosts -----------------------------------------------------------------------


def show_owners(view: FleetView) -> None:
    """Owners across hosts: a chart and a table, or why there are none to show."""
    fig = owners_figure(view)
    if fig is None:
        _say(
            NO_SCANS
            if not len(view.summary)
            else "No owner to show: the published scans are redacted (no owner names) or "
            "hold no bytes."
        )
        return
    figures.show(fig)
    o = view.owners
    frame = pd.DataFrame(
        {"owner": o["owner"], "host": o["host"], "size": o["alloc"], "files": o["files"]}
    )
    formats = {"owner": _name, "host": _name, "size": _bytes, "files": _count}
    _show_html(_wide(table_html(frame, formats)))


# -- each host: its findings and the commands to run there -------------------------------------


def commands_for(root: str) -> list[tuple[str, str]]:
    """The commands to run on a root's own host, each with what it does there."""
    quoted = shlex.quote(root)
    return [
        (f"hygiene-nb summary {quoted}", "what the latest scan holds, by risk"),
        (f"hygiene-nb report {quoted} --out reports", "this root's full audit report"),
        (
            f"hygiene-nb plan {quoted}",
            "a plan from the decisions made on that host (checked against its disk)",
        ),
    ]


def _findings(row: Any, dirs: pd.DataFrame) -> list[str]:
    said = [
        f"size {fmt.bytes_html(int(row.alloc))}"
        + ("" if pd.isna(row.fs_free) else f", {fmt.bytes_html(int(row.fs_free))} free")
        + f", scanned {html.escape(_when(row.started_s))}"
    ]
    if not pd.isna(row.growth) and int(row.growth) != 0:
        said.append(
            f"{'grew' if int(row.growth) > 0 else 'shrank'} "
            f"{fmt.bytes_html(int(row.growth), signed=True)} since the scan before"
        )
    if int(row.reclaimable) > 0:
        said.append(f"{fmt.bytes_html(int(row.reclaimable))} safe to remove")
    if int(row.stale) > 0:
        said.append(f"{fmt.bytes_html(int(row.stale))} untouched for a year")
    if not pd.isna(row.cleanliness):
        said.append(f"cleanliness {int(row.cleanliness)} / 100")
    if bool(row.partial):
        said.append("some entries could not be read: these figures are lower bounds")
    mine = dirs[(dirs["host"] == row.host) & (dirs["root"] == row.root)].head(_HOST_TOP_DIRS)
    grew = [
        f"{_e(_root_of(str(d.path), str(d.root)))} {fmt.bytes_html(int(d.growth), signed=True)}"
        for d in mine.itertuples(index=False)
    ]
    if grew:
        said.append("grew most: " + ", ".join(grew))
    return said


def host_html(view: FleetView, host: str) -> str:
    """One host's findings, root by root, and the commands to run on that host."""
    rows = view.summary[view.summary["host"] == host]
    dirs = distinct_dirs(view.top_dirs)
    parts = [f'<div class="hnb-host"><h3>{_e(host)}</h3>']
    for row in rows.itertuples(index=False):
        parts.append(f"<p><strong>{_e(row.root)}</strong></p>")
        parts.append("<ul>" + "".join(f"<li>{f}</li>" for f in _findings(row, dirs)))
        parts.append("</ul>")
        lines = "\n".join(
            f"# {html.escape(what)}\n{html.escape(fmt.shown(cmd))}"
            for cmd, what in commands_for(str(row.root))
        )
        parts.append(f"<p>On {_e(host)}:</p><pre>{lines}</pre>")
    parts.append("</div>")
    return "".join(parts)


def show_hosts(view: FleetView) -> None:
    """Every host's findings with the commands to run on it (plans are made there, never here)."""
    if not len(view.summary):
        _say(NO_SCANS)
        return
    _say(
        "The fleet dataset is evidence, never authority: decisions and plans are made on each "
        "host, against its own disk. Run these commands there."
    )
    _show_html(_STYLE + "".join(host_html(view, h) for h in view.hosts))


def show_skipped(view: FleetView) -> None:
    """The partitions not read (incomplete or damaged), or that every partition was read."""
    if not view.skipped:
        _say(f"Every published partition was read ({fmt.counted(view.scans, 'scan')}).")
        return
    frame = pd.DataFrame(
        {
            "code": [s.code for s in view.skipped],
            "partition": [s.partition for s in view.skipped],
            "why": [s.message for s in view.skipped],
        }
    )
    _show_html(table_html(frame, {"code": _name, "partition": _name, "why": _name}))
