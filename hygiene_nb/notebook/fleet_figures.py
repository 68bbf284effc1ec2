"""The fleet report's figures: plotly figures over a ``FleetView``, each with a fixed id.

Each builder returns a ``plotly.graph_objects.Figure`` whose ``layout.meta.id`` is one of
``FLEET_FIGURE_IDS`` (shown through ``figures.show``, like the audit report's), or None when
there is nothing to draw: the section says so in a sentence instead (``notebook.fleet``).
Bytes are allocated bytes on binary-unit axes, hovers say ``1.4 GiB (1,503,238,553 bytes)``.
"""

from __future__ import annotations

import html
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd
import plotly.graph_objects as go

from hygiene_nb import formatting as fmt
from hygiene_nb.classify.summary import RISKS
from hygiene_nb.notebook import figures
from hygiene_nb.query.frames import MORE_OWNERS_COLOR, OWNER_COLORS

if TYPE_CHECKING:
    from hygiene_nb.notebook.fleet import FleetView

__all__ = [
    "FLEET_FIGURE_IDS",
    "distinct_dirs",
    "history_figure",
    "host_sizes",
    "owners_figure",
    "path_under",
    "said_when",
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
_DAY_S = 86_400


def _int(value: Any) -> int:
    return int(value)


def said_when(seconds: object) -> str:
    """Epoch seconds as a person reads them: ``2026-12-02 07:08 UTC``."""
    return f"{fmt.human_datetime(int(seconds))} UTC"  # type: ignore[call-overload]


def path_under(path: str, root: str) -> str:
    """A path as it lies under its root (the whole path when not under it), fit to 60 columns."""
    return fmt.display_path(path, root, 60)


def _label(text: object) -> str:
    """A name as plotly text: HTML escaped, ``%`` as an entity (never read as a template)."""
    return html.escape(fmt.shown(str(text)), quote=False).replace("%", "&#37;")


def _figure(fig_id: str, title: str, traces: Iterable[Any], **layout: Any) -> go.Figure:
    assert fig_id in FLEET_FIGURE_IDS, fig_id
    fig = go.Figure(list(traces))
    fig.update_layout(**{**_LAYOUT, "title": {"text": title}, "meta": {"id": fig_id}, **layout})
    return fig


def _byte_axis(maximum: float, title: str = "allocated bytes") -> dict[str, Any]:
    return {"title": {"text": title}, "rangemode": "tozero", **figures.byte_ticks(maximum)}


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
            customdata=[[fmt.bytes_with_exact(v), said_when(t)] for t, v in points],
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
    return f"{fmt.shown(str(row.host))}: {path_under(str(row.path), str(row.root))}"


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
