"""The fleet notebook's parts: its headline, tables, figures and the commands for each host.

``load`` asks a fleet dataset every question once (``hygiene_nb.fleet.answers.ask_many``);
each ``show_…`` function displays one section of ``notebooks/fleet.ipynb`` (and of
``hygiene-nb report --fleet``): a chart and a compact table, or one sentence when there is
nothing to draw, never an empty chart. The ``…_figure`` builders return plotly figures with
fixed ids (``FLEET_FIGURE_IDS``), shown through ``figures.show`` like the audit report's.

A fleet dataset is evidence, never authority: the per-host section names the commands to run
on that host (``summary``, ``report``, ``plan``); no plan is ever made from the fleet.
"""

from __future__ import annotations

import html
import os
import shlex
import sys
import warnings
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import plotly.graph_objects as go

from hygiene_nb import formatting as fmt
from hygiene_nb.classify.summary import RISKS
from hygiene_nb.fleet.answers import ask_many
from hygiene_nb.fleet.reader import Skipped
from hygiene_nb.notebook import figures
from hygiene_nb.notebook.tables import table_html
from hygiene_nb.query.frames import MORE_OWNERS_COLOR, OWNER_COLORS

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

FLEET_FIGURE_IDS = ("fleet-size", "fleet-history", "fleet-top-dirs", "fleet-stale", "fleet-owners")
_LAYOUT: dict[str, Any] = {
    "template": "plotly_white",
    "margin": {"t": 50, "l": 10, "r": 10, "b": 10},
    "height": 380,
}
_HOST_TOP_DIRS = 3  # growing directories named per host in its findings
_ROOT_WIDTH = 40  # characters of a root's path in a table cell
_DAY_S = 86_400

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


def _label(text: object) -> str:
    """A name as plotly text: HTML escaped, ``%`` as an entity (never read as a template)."""
    return html.escape(fmt.shown(str(text)), quote=False).replace("%", "&#37;")


def _when(seconds: object) -> str:
    return f"{fmt.human_datetime(int(seconds))} UTC"  # type: ignore[call-overload]


def _figure(fig_id: str, title: str, traces: Iterable[Any], **layout: Any) -> go.Figure:
    assert fig_id in FLEET_FIGURE_IDS, fig_id
    fig = go.Figure(list(traces))
    fig.update_layout(**{**_LAYOUT, "title": {"text": title}, "meta": {"id": fig_id}, **layout})
    return fig


def _byte_axis(maximum: float, title: str = "allocated bytes") -> dict[str, Any]:
    return {"title": {"text": title}, "rangemode": "tozero", **figures.byte_ticks(maximum)}


def _root_of(path: str, root: str) -> str:
    """A path as it lies under its root (the whole path when not under it)."""
    return fmt.display_path(path, root, 60)


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


def _int(value: Any) -> int:
    return int(value)


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


def size_figure(view: FleetView) -> go.Figure | None:
    """Allocated bytes of each host's latest scans, stacked by risk; None with nothing to draw."""
    mix = view.risk
    if not len(mix) or int(mix["alloc"].sum()) <= 0:
        return None
    hosts = view.hosts
    per = mix.groupby(["host", "risk"])["alloc"].sum()
    traces = []
    for risk in RISKS:
        values = [int(per.get((h, risk), 0)) for h in hosts]
        if not any(values):  # a risk no host holds: no empty bar in the legend
            continue
        traces.append(
            go.Bar(
                x=[_label(h) for h in hosts],
                y=values,
                name=risk,
                marker_color=figures.RISK_COLORS[risk],
                customdata=[fmt.bytes_with_exact(v) for v in values],
                hovertemplate=f"%{{x}}, {risk}: %{{customdata}}<extra></extra>",
            )
        )
    totals = mix.groupby("host")["alloc"].sum()
    return _figure(
        "fleet-size",
        "Size per host, by risk (latest scans)",
        traces,
        barmode="stack",
        showlegend=True,
        yaxis=_byte_axis(float(totals.max())),
        xaxis={"title": {"text": "host"}, "type": "category"},
    )


def show_size(view: FleetView) -> None:
    """The size-per-host chart, or the sentence saying there is nothing to draw."""
    fig = size_figure(view)
    if fig is None:
        _say(NO_SCANS if not len(view.summary) else "No host holds any bytes in its latest scans.")
        return
    figures.show(fig)


# -- history -----------------------------------------------------------------------------------


def host_sizes(history: pd.DataFrame) -> dict[str, list[tuple[int, int]]]:
    """Per host, its size after each of its scans: the sum of every root's latest scan then.

    A host with several roots scanned at different times counts each root at the size of its
    latest scan up to that moment. Points are (start in seconds, bytes), one per scan.
    """
    found: dict[str, list[tuple[int, int]]] = {}
    for host, rows in history.sort_values(["started_s", "scan"]).groupby("host", sort=True):
        latest: dict[str, int] = {}
        points: list[tuple[int, int]] = []
        for row in rows.itertuples(index=False):
            latest[str(row.root)] = _int(row.alloc)
            points.append((_int(row.started_s), sum(latest.values())))
        found[str(host)] = points
    return found


def _time_axis(seconds: list[int]) -> tuple[dict[int, Any], dict[str, Any]]:
    """Where each time sits on the x axis: dates, or (all within a day) named by their time."""
    if not seconds:
        return {}, {}
    if max(seconds) - min(seconds) >= _DAY_S:
        where = {s: pd.Timestamp(s, unit="s", tz="UTC") for s in seconds}
        return where, {"type": "date", "tickformat": "%b %d\n%Y", "title": {"text": "scan"}}
    order = sorted(set(seconds))
    labels = {s: fmt.human_datetime(s, seconds=True) for s in order}
    return labels, {
        "type": "category",
        "categoryorder": "array",
        "categoryarray": [labels[s] for s in order],
        "title": {"text": "scan (UTC)"},
    }


def history_figure(view: FleetView) -> go.Figure | None:
    """One line per host: its size over time; None until some host has two scans."""
    sizes = host_sizes(view.history)
    if not any(len(points) > 1 for points in sizes.values()):
        return None
    where, xaxis = _time_axis([t for points in sizes.values() for t, _ in points])
    traces = [
        go.Scatter(
            x=[where[t] for t, _ in points],
            y=[v for _, v in points],
            name=_label(host),
            mode="lines+markers",
            marker_color=OWNER_COLORS[i % len(OWNER_COLORS)],
            customdata=[[fmt.bytes_with_exact(v), _when(t)] for t, v in points],
            hovertemplate=f"{_label(host)}, %{{customdata[1]}}: %{{customdata[0]}}<extra></extra>",
        )
        for i, (host, points) in enumerate(sizes.items())
    ]
    top = max(v for points in sizes.values() for _, v in points)
    return _figure(
        "fleet-history",
        "Size per host over time (allocated bytes)",
        traces,
        showlegend=True,
        xaxis=xaxis,
        yaxis=_byte_axis(float(top)),
    )


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


def distinct_dirs(top_dirs: pd.DataFrame) -> pd.DataFrame:
    """The growing directories without those whose growth lies whole in one listed below them.

    ``.cache`` (+440 KiB) above ``.cache/pip/wheels`` (+440 KiB) is one place, named by the
    deepest: the rows left keep their order.
    """
    keys = list(
        zip(top_dirs["host"], top_dirs["root"], top_dirs["path"], top_dirs["growth"], strict=True)
    )
    inner: dict[tuple[Any, Any, int], list[str]] = {(h, r, int(g)): [] for h, r, _, g in keys}
    for h, r, p, g in keys:
        inner[(h, r, int(g))].append(str(p))
    keep = [
        not any(q.startswith(str(p).rstrip("/") + "/") for q in inner[(h, r, int(g))])
        for h, r, p, g in keys
    ]
    return top_dirs.loc[pd.Series(keep, index=top_dirs.index, dtype=bool)].reset_index(drop=True)


def _dir_label(row: Any) -> str:
    return f"{fmt.shown(str(row.host))}: {_root_of(str(row.path), str(row.root))}"


def top_dirs_figure(view: FleetView, *, top: int = 10) -> go.Figure | None:
    """The directories that grew most across the fleet, coloured by what they hold."""
    rows = distinct_dirs(view.top_dirs).head(top)
    if not len(rows):
        return None
    rows = rows.iloc[::-1]  # the largest on top
    labels = [_label(_dir_label(r)) for r in rows.itertuples(index=False)]
    holds = [str(h) if str(h) in figures.RISK_COLORS else "" for h in rows["holds"]]
    key = ", ".join(
        f'<span style="color:{figures.RISK_COLORS[h]}">\u25a0</span> {h}'
        for h in dict.fromkeys(holds)
        if h
    )
    return _figure(
        "fleet-top-dirs",
        "Directories that grew most (latest scan against the one before)"
        + (f"<br><sup>colour: what each holds, {key}</sup>" if key else ""),
        [
            go.Bar(
                x=[int(g) for g in rows["growth"]],
                y=labels,
                orientation="h",
                marker_color=[figures.RISK_COLORS[h] for h in holds],
                text=[fmt.signed_bytes(int(g)) for g in rows["growth"]],
                textposition="auto",
                customdata=[
                    [fmt.bytes_with_exact(int(g)), h or "unknown"]
                    for g, h in zip(rows["growth"], holds, strict=True)
                ],
                hovertemplate="%{y}: +%{customdata[0]} (holds %{customdata[1]})<extra></extra>",
                showlegend=False,
            )
        ],
        height=max(240, 60 + 32 * len(rows)),
        margin={**_LAYOUT["margin"], "t": 70},
        xaxis=_byte_axis(float(rows["growth"].max()), "growth"),
        yaxis={"automargin": True, "type": "category"},
    )


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


def stale_figure(view: FleetView) -> go.Figure | None:
    """Per host, the bytes no one has modified for a year; None when there are none."""
    st = view.stale.sort_values("host")
    if not len(st) or int(st["stale"].sum()) <= 0:
        return None
    hosts = [str(h) for h in st["host"]]
    stale = [int(v) for v in st["stale"]]
    rest = [max(int(a) - int(v), 0) for a, v in zip(st["alloc"], st["stale"], strict=True)]
    return _figure(
        "fleet-stale",
        "Not modified for a year, per host (latest scans)",
        [
            go.Bar(
                x=[_label(h) for h in hosts],
                y=stale,
                name="untouched for a year",
                marker_color=figures.RISK_COLORS["caution"],
                customdata=[fmt.bytes_with_exact(v) for v in stale],
                hovertemplate="%{x}, untouched 1 year+: %{customdata}<extra></extra>",
            ),
            go.Bar(
                x=[_label(h) for h in hosts],
                y=rest,
                name="modified within a year",
                marker_color=figures.RISK_COLORS["unknown"],
                customdata=[fmt.bytes_with_exact(v) for v in rest],
                hovertemplate="%{x}, modified within a year: %{customdata}<extra></extra>",
            ),
        ],
        barmode="stack",
        showlegend=True,
        xaxis={"title": {"text": "host"}, "type": "category"},
        yaxis=_byte_axis(float(max(int(a) for a in st["alloc"]))),
    )


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


def owners_figure(view: FleetView, *, top: int = 12) -> go.Figure | None:
    """The owners holding most bytes across the fleet, each bar split by host."""
    o = view.owners
    if not len(o) or int(o["alloc"].sum()) <= 0:
        return None
    totals = o.groupby("owner")["alloc"].sum().sort_values(ascending=False, kind="stable")
    shown = [str(x) for x in totals.index[:top]]
    hosts = sorted({str(h) for h in o["host"]})
    per = o.groupby(["owner", "host"])["alloc"].sum()
    order = shown[::-1]  # the largest on top
    traces = []
    for i, host in enumerate(hosts):
        values = [int(per.get((w, host), 0)) for w in order]
        colour = OWNER_COLORS[i] if i < len(OWNER_COLORS) else MORE_OWNERS_COLOR
        traces.append(
            go.Bar(
                x=values,
                y=[_label(w) for w in order],
                name=_label(host),
                orientation="h",
                marker_color=colour,
                customdata=[fmt.bytes_with_exact(v) for v in values],
                hovertemplate=f"%{{y}} on {_label(host)}: %{{customdata}}<extra></extra>",
            )
        )
    return _figure(
        "fleet-owners",
        "Bytes by owner across hosts (latest scans)",
        traces,
        barmode="stack",
        showlegend=True,
        height=max(240, 80 + 32 * len(order)),
        xaxis=_byte_axis(float(totals.iloc[0])),
        yaxis={"automargin": True, "type": "category"},
    )


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
