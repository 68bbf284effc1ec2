"""Plain plotly figures over the views, each with a fixed id; and how a report shows them.

Every builder returns a ``plotly.graph_objects.Figure`` whose ``layout.meta.id`` is the figure's
fixed id (``FIGURE_IDS``). ``show`` displays a figure both ways a reader needs: the plotly JSON
mimetype (rendered by JupyterLab) and an HTML div named by that id (rendered by nbconvert's HTML,
offline, once ``plotlyjs`` has put plotly.js in the page). No random ids reach a report, so two
runs over the same inputs give the same bytes.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from hygiene_nb import formatting as fmt
from hygiene_nb.classify.summary import RISKS
from hygiene_nb.formatting import counted, display_path, exact_bytes, signed_bytes
from hygiene_nb.models import GroupStats, RiskStats, StaleBucket, Summary
from hygiene_nb.query.breakdowns import AGE_BUCKETS, FUTURE
from hygiene_nb.query.frames import CATEGORY_COLORS, MORE_OWNERS_COLOR, OWNER_COLORS

__all__ = [
    "BORDER_WIDTH",
    "CATEGORY_COLORS",
    "DECISION_BORDER",
    "FIGURE_IDS",
    "GREW_COLOR",
    "NAME_WIDTH",
    "RISK_COLORS",
    "RISK_INK",
    "SHRANK_COLOR",
    "TREEMAP_IDS",
    "age_figure",
    "byte_ticks",
    "contrast_ratio",
    "diff_figure",
    "groups_figure",
    "growth_figure",
    "history_figure",
    "ink_for",
    "owners_figure",
    "plotlyjs",
    "risk_badge_css",
    "risk_history_figure",
    "risk_mix_figure",
    "show",
    "staleness_figure",
    "treemap_figure",
    "treemap_key",
    "type_mix_figure",
]

# Told apart with any colour vision: built on Okabe and Ito's palette (darkened where white
# text sits on it), every pair at least 19 CIELAB units (dE76) apart for normal sight and simulated
# deuteranopia, protanopia and tritanopia (Machado et al. 2009). The old green/red pair was 16
# apart for deuteranopia.
RISK_COLORS = {
    "safe": "#008060",  # bluish green
    "caution": "#e69f00",  # orange
    "personal": "#3f51b5",  # indigo
    "high": "#c84e00",  # vermillion
    "unknown": "#a0a0a0",  # grey
    "mixed": "#6e4b2a",  # brown: a directory holding bytes of several risks (classify.content)
    "": "#eeeeee",  # "(other)" buckets and the view's own root
}


def _luminance(colour: str) -> float:
    """WCAG 2 relative luminance of ``#rrggbb``."""
    rgb = [int(colour.lstrip("#")[i : i + 2], 16) / 255 for i in (0, 2, 4)]
    linear = [c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def contrast_ratio(foreground: str, background: str) -> float:
    """WCAG 2 contrast ratio of two ``#rrggbb`` colours, 1 to 21 (text wants at least 4.5)."""
    light, dark = sorted((_luminance(foreground), _luminance(background)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def ink_for(background: str) -> str:
    """Black or white, whichever reads better on ``background``: a badge's text colour."""
    black, white = "#000000", "#ffffff"
    return (
        black if contrast_ratio(black, background) >= contrast_ratio(white, background) else white
    )


# the text colour of a badge filled with each risk's colour: the better of black and white,
# at least 4.5:1 for every one of them (grey "unknown" takes black)
RISK_INK = {risk: ink_for(colour) for risk, colour in RISK_COLORS.items()}


def risk_badge_css(prefix: str = "hnb-risk-") -> str:
    """CSS rules ``.{prefix}{risk}`` for a badge of each risk: its fill and its ink."""
    return "".join(
        f".{prefix}{risk}{{background:{colour};color:{RISK_INK[risk]};"
        "padding:0 4px;border-radius:3px;font-weight:600}"
        for risk, colour in RISK_COLORS.items()
        if risk
    )


# a change between two scans: bytes added, bytes freed (Okabe-Ito vermillion and blue)
GREW_COLOR = "#d55e00"
SHRANK_COLOR = "#0072b2"
# border = decision: (colour, width); undecided entries white. One width for all: plotly.js
# zooms boxes of different border widths into NaN paths (treemap_decisions)
BORDER_WIDTH = 3.0
DECISION_BORDER = {
    "delete": ("#000000", BORDER_WIDTH),
    "keep": ("#00c853", BORDER_WIDTH),
    "unsure": ("#aa00ff", BORDER_WIDTH),
    None: ("#ffffff", BORDER_WIDTH),
}
FIGURE_IDS = (
    "history", "growth", "risk-mix", "risk-history", "diff", "groups", "staleness", "treemap",
    "owners", "type-mix", "age",
)  # fmt: skip
# the treemap's id by its colouring (the report draws the one by risk, "treemap")
TREEMAP_IDS = {"risk": "treemap", "owner": "treemap-owner", "type": "treemap-type"}
_LAYOUT: dict[str, Any] = {
    "template": "plotly_white",
    "margin": {"t": 50, "l": 10, "r": 10, "b": 10},
    "height": 380,
}


# characters of a name in a legend or on an axis: past it, shortened in the middle (the whole
# name is on hover)
NAME_WIDTH = 32


def _short(name: str, width: int = NAME_WIDTH) -> str:
    """A name (or path) for a legend or an axis: escaped, shortened in the middle, as text."""
    return _label(display_path(name, width=width))


def _label(text: str) -> str:
    """A name as plotly text: HTML escaped, and ``%`` as an entity.

    Plotly draws text as HTML and decodes only a few entities (not ``&quot;``: quotes stay as
    they are); ``%{y}`` in a name would be read as a template.
    """
    return html.escape(text, quote=False).replace("%", "&#37;")


def _figure(fig_id: str, title: str, traces: Sequence[Any], **layout: Any) -> go.Figure:
    assert fig_id in FIGURE_IDS or fig_id in TREEMAP_IDS.values(), fig_id
    fig = go.Figure(list(traces))
    fig.update_layout(**{**_LAYOUT, "title": {"text": title}, "meta": {"id": fig_id}, **layout})
    return fig


def _scan_axis(times: pd.Series) -> tuple[list[Any], dict[str, Any]]:
    """Where scans sit on the x axis, and that axis: dates; scans closer than a day, in order.

    Scans days apart are points on a date axis. Scans within one day (a demo, a test, a busy
    afternoon) would get sub-second ticks there, so they are named by their time instead.
    """
    stamps = [pd.Timestamp(t) for t in times]
    if not stamps:
        return [], {}
    if max(stamps) - min(stamps) >= pd.Timedelta(days=1):
        return stamps, {"type": "date", "tickformat": "%b %d\n%Y", "title": {"text": "scan"}}
    order = sorted(set(stamps))
    labels: dict[pd.Timestamp, str] = {}
    for i, at in enumerate(order):
        label = fmt.human_datetime(at, seconds=True)
        labels[at] = label if label not in labels.values() else f"{label} (#{i + 1})"
    return [labels[t] for t in stamps], {
        "type": "category",
        "categoryorder": "array",
        "categoryarray": [labels[t] for t in order],
        "title": {"text": "scan (UTC)"},
    }


def _byte_axis(maximum: float, title: str = "bytes") -> dict[str, Any]:
    return {"title": {"text": title}, "rangemode": "tozero", **byte_ticks(maximum)}


def _most(*values: Any) -> float:
    found = [float(v) for column in values for v in column if not pd.isna(v)]
    return max(found, default=0.0)


def _least(*values: Any) -> float:
    found = [float(v) for column in values for v in column if not pd.isna(v)]
    return min(found, default=0.0)


def history_figure(history: pd.DataFrame) -> go.Figure:
    """Apparent and allocated bytes of the root, and the filesystem's free space, per scan."""
    x, xaxis = _scan_axis(history["scanned_at"])
    mode = "lines+markers" if len(history) > 1 else "markers"
    lines = [
        (history["bytes"], "apparent bytes", "y", {}),
        (history["alloc"], "allocated bytes", "y", {}),
        (history["fs_free"], "filesystem free", "y2", {"dash": "dot"}),
    ]
    return _figure(
        "history",
        "Size and free space per scan",
        [
            go.Scatter(
                x=x,
                y=[None if pd.isna(v) else int(v) for v in values],
                name=name,
                mode=mode,
                yaxis=axis,
                line=line,
                customdata=[fmt.bytes_with_exact(v) for v in values],
                hovertemplate=f"{name}: %{{customdata}}<extra></extra>",
            )
            for values, name, axis, line in lines
        ],
        xaxis=xaxis,
        yaxis=_byte_axis(_most(history["bytes"], history["alloc"]), "size"),
        yaxis2={
            **_byte_axis(_most(history["fs_free"]), "free"),
            "overlaying": "y",
            "side": "right",
            "showgrid": False,
        },
        legend={"x": 1.08, "xanchor": "left"},
    )


def growth_figure(growth: pd.DataFrame) -> go.Figure:
    """Recursive bytes of each direct child over time, stacked (``views.child_growth``).

    Each named child keeps one colour of ten (the owners' palette), the rest summed as
    ``(other)`` in grey; the legend lists them top to bottom as they are stacked, a long name
    shortened in the middle (``NAME_WIDTH``), the whole name on hover.
    """
    x_all, xaxis = _scan_axis(growth["scanned_at"])
    where = dict(zip(growth["scanned_at"], x_all, strict=True))
    traces = []
    for i, (child, part) in enumerate(growth.groupby("child", sort=False)):
        other = str(child) == "(other)"
        label = _label(display_path(str(child)))
        traces.append(
            go.Scatter(
                x=[where[t] for t in part["scanned_at"]],
                y=part["bytes"],
                name=_short(str(child)),
                stackgroup="one",
                mode="lines+markers" if growth["scanned_at"].nunique() > 1 else "markers",
                line={"color": MORE_OWNERS_COLOR if other else OWNER_COLORS[i % len(OWNER_COLORS)]},
                # the child's name reaches the hover as data, never as template text
                customdata=[[label, fmt.bytes_with_exact(v)] for v in part["bytes"]],
                hovertemplate="%{customdata[0]}: %{customdata[1]}<extra></extra>",
            )
        )
    total = growth.groupby("scanned_at")["bytes"].sum()
    return _figure(
        "growth",
        "Size of the largest direct children per scan",
        traces,
        showlegend=True,
        legend={"traceorder": "reversed"},
        xaxis=xaxis,
        yaxis=_byte_axis(_most(total)),
    )


def risk_mix_figure(
    mix: Summary | Mapping[str, RiskStats],
    reclaimable: Mapping[str, RiskStats] | None = None,
) -> go.Figure:
    """Bytes per risk level now (hard links once) as one stacked bar, the reclaimable part marked.

    ``mix`` is a ``Summary`` (its risk mix and reclaimable bytes) or a risk mix alone, with
    ``reclaimable`` beside it. Segments run safe, caution, personal, high, unknown (and mixed
    when present), each with its bytes and entries on hover; a level with no bytes draws
    nothing. Over the bar, hatched, what deleting every *safe* entry would free, and then also
    every *caution* entry (``Summary.reclaimable``: a hard-linked inode only when all its names
    go), with its size written above. With no bytes at all the figure is a sentence.
    """
    if isinstance(mix, Summary):
        reclaimable = mix.reclaimable if reclaimable is None else reclaimable
        mix = mix.risk
    title = "Risk mix (bytes)"
    levels = [r for r in (*RISKS, "mixed") if r in mix and mix[r].bytes > 0]
    total = sum(mix[r].bytes for r in levels)
    if total == 0:
        return _said("risk-mix", title, "No bytes in this snapshot: no risk mix to show.")
    row = ["now"]
    traces: list[Any] = []
    start = 0
    for level in levels:
        stats = mix[level]
        traces.append(
            go.Bar(
                y=row,
                x=[stats.bytes],
                base=[start],
                orientation="h",
                width=0.6,
                name=level,
                marker={"color": RISK_COLORS[level], "line": {"color": "#ffffff", "width": 1}},
                customdata=[
                    f"{fmt.bytes_with_exact(stats.bytes)} in {fmt.counted(stats.entries, 'entry')}"
                    f" ({stats.bytes / total:.1%})"
                ],
                hovertemplate=f"{level}: %{{customdata}}<extra></extra>",
            )
        )
        start += stats.bytes
    annotations: list[dict[str, Any]] = []
    for name, low, high, entries in _reclaim_marks(reclaimable or {}):
        first = name == "safe"  # the safe span, even when there are no safe bytes before it
        traces.append(
            go.Bar(
                y=row,
                x=[high - low],
                base=[low],
                orientation="h",
                width=0.24,
                name=f"reclaimable: {name}",
                marker={
                    "color": "rgba(255,255,255,0.35)",
                    "line": {"color": "#000000", "width": 1},
                    "pattern": {"shape": "/" if first else "x", "fgcolor": "#000000"},
                },
                customdata=[
                    f"{fmt.bytes_with_exact(high)} in all, from {fmt.counted(entries, 'entry')}"
                    if not first
                    else f"{fmt.bytes_with_exact(high)} from {fmt.counted(entries, 'entry')}"
                ],
                hovertemplate=f"reclaimable, {name}: %{{customdata}}<extra></extra>",
            )
        )
        annotations.append(
            {
                # from the span's start rightwards, or leftwards from its end past the middle
                "x": low if low + high < total else high,
                "xanchor": "left" if low + high < total else "right",
                "y": 0.8 if first else 0.2,  # just above the bar, or just under it
                "yanchor": "bottom" if first else "top",
                "yref": "paper",
                "text": f"{'safe to reclaim' if first else 'with caution, in all'}: "
                f"{fmt.human_bytes(high)}",
                "showarrow": False,
                "font": {"size": 12},
            }
        )
    return _figure(
        "risk-mix",
        title + f"<br><sup>{fmt.human_bytes(total)} ({exact_bytes(total)}) in all</sup>",
        traces,
        barmode="overlay",
        height=260,
        showlegend=True,
        legend={"orientation": "h", "x": 0, "y": -0.3, "yanchor": "top"},
        margin={**_LAYOUT["margin"], "t": 70, "b": 20, "r": 40},  # room for the last tick
        xaxis={"range": [0, total * 1.01], **byte_ticks(total)},
        yaxis={"visible": False},
        annotations=annotations,
    )


def _reclaim_marks(reclaimable: Mapping[str, RiskStats]) -> list[tuple[str, int, int, int]]:
    """The reclaimable spans over the risk bar: (name, from, to, entries), in bytes.

    ``safe`` runs from 0 to what deleting the safe entries frees; ``with caution`` from there
    to what deleting the safe and the caution entries frees (the cumulative figure).
    """
    marks = []
    done = 0
    for level, name in (("safe", "safe"), ("caution", "with caution")):
        stats = reclaimable.get(level)
        if stats is None or stats.bytes <= done:
            continue
        marks.append((name, done, stats.bytes, stats.entries))
        done = stats.bytes
    return marks


def risk_history_figure(history: pd.DataFrame) -> go.Figure:
    """Bytes per risk level in every scan, stacked, with the cleanliness score (right axis).

    Only the risks holding bytes in some scan get a trace (and a legend entry).
    """
    x_all, xaxis = _scan_axis(history["scanned_at"])
    history = history.assign(x=x_all)
    traces: list[Any] = []
    for level in RISKS:
        part = history[history["risk"] == level]
        if not (part["bytes"].fillna(0) > 0).any():
            continue
        traces.append(
            go.Bar(
                x=list(part["x"]),
                y=part["bytes"],
                name=level,
                marker_color=RISK_COLORS[level],
                customdata=[fmt.bytes_with_exact(v) for v in part["bytes"]],
                hovertemplate=f"{level}: %{{customdata}}<extra></extra>",
            )
        )
    scores = history.drop_duplicates("scan_id")
    score = go.Scatter(
        x=list(scores["x"]),
        y=scores["score"],
        name="cleanliness score",
        yaxis="y2",
        mode="lines+markers" if len(scores) > 1 else "markers",
        line={"color": "#000000"},
    )
    traces.append(score)
    return _figure(
        "risk-history",
        "Risk mix over time",
        traces,
        barmode="stack",
        showlegend=True,
        xaxis=xaxis,
        yaxis=_byte_axis(_most(history.groupby("scan_id")["bytes"].sum())),
        yaxis2={
            "title": {"text": "score"},
            "overlaying": "y",
            "side": "right",
            "range": [0, 100],
            "tickvals": [0, 20, 40, 60, 80, 100],
            "showgrid": False,
        },
    )


def diff_figure(diff: pd.DataFrame, *, top: int = 10) -> go.Figure:
    """What changed between two scans (``views.diff``): one bar per key, its change in bytes.

    The ``top`` keys whose bytes changed most either way get a bar each, largest on top, growth
    and shrinkage in two colours and written on the bar with their sign; the other keys that
    changed are summed into one ``(N others)`` bar at the bottom, so the bars add up to the
    whole change (by ``dir``: the root's). A key whose bytes did not change has no bar. With
    no change at all the figure is a sentence. A long key is shortened in the middle on the
    axis (``NAME_WIDTH``), whole on hover.
    """
    key = str(diff.columns[0])
    title = f"What changed since the previous scan, by {key}"
    deltas = [0 if pd.isna(d) else int(d) for d in diff["delta"]]
    changed = [(k, d) for k, d in zip(diff[key], deltas, strict=True) if d != 0]
    changed.sort(key=lambda kd: (-abs(kd[1]), str(kd[0])))
    if not changed:
        return _said("diff", title, "Nothing changed between the two scans: no change to show.")
    named, rest = changed[:top], changed[top:]
    bars = []
    taken: set[str] = set()
    for k, d in named:
        label = _diff_label(k, key, NAME_WIDTH)
        if label in taken:  # two long names alike at their ends: one bar each all the same
            label = f"{label} ({len(taken) + 1})"
        taken.add(label)
        bars.append((label, d, _diff_label(k, key)))
    rest_delta = sum(d for _, d in rest)
    if rest and rest_delta != 0:
        others = f"({counted(len(rest), 'other')})"
        bars.append((others, rest_delta, f"{counted(len(rest), 'other ' + key)}, summed"))
    order = [label for label, _, _ in reversed(bars)]  # plotly draws the first at the bottom
    traces = []
    for name, colour, sign in (
        ("grew", GREW_COLOR, 1),
        ("shrank", SHRANK_COLOR, -1),
    ):
        part = [b for b in bars if b[1] * sign > 0]
        traces.append(
            go.Bar(
                y=[label for label, _, _ in part],
                x=[d for _, d, _ in part],
                orientation="h",
                name=name,
                marker_color=colour,
                text=[signed_bytes(d) for _, d, _ in part],
                textposition="outside",
                cliponaxis=False,
                customdata=[f"{what}: {fmt.signed_exact_bytes(d)}" for _, d, what in part],
                hovertemplate="%{customdata}<extra></extra>",
                showlegend=True,
            )
        )
    total = sum(deltas)
    low = min(0, min(d for _, d, _ in bars))
    high = max(0, max(d for _, d, _ in bars))
    pad = 0.3 * max(high - low, 1)
    return _figure(
        "diff",
        f"{title}<br><sup>in all: {signed_bytes(total)} ({fmt.signed_exact_bytes(total)})</sup>",
        traces,
        barmode="relative",
        height=160 + 28 * len(bars),
        margin={**_LAYOUT["margin"], "t": 70},
        showlegend=True,
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": 1.0, "yanchor": "bottom"},
        xaxis={
            "title": {"text": "change in bytes"},
            "range": [low - (pad if low < 0 else 0), high + (pad if high > 0 else 0)],
            "zeroline": True,
            "zerolinecolor": "#444444",
            **_signed_byte_ticks(low, high),
        },
        yaxis={
            "automargin": True,
            "ticksuffix": " ",
            "categoryorder": "array",
            "categoryarray": order,
        },
    )


def _diff_label(value: object, key: str, width: int | None = None) -> str:
    """A key of ``views.diff`` as a bar's label: the root's own entry named, names escaped.

    With ``width`` a long name is shortened in the middle (the axis); without, it is whole
    (the hover).
    """
    if key == "dir" and str(value) == ".":
        return "(the root directory itself)"
    return _label(display_path(str(value), width=width))


def _signed_byte_ticks(low: float, high: float) -> dict[str, Any]:
    """Binary-unit ticks for an axis running from ``low`` (<= 0) to ``high`` (>= 0) bytes."""
    ticks = byte_ticks(max(-low, high))
    if not ticks:
        return {}
    values = [v for v in ticks["tickvals"] if v <= high * 1.2 or v == 0]
    below = [v for v in ticks["tickvals"][1:] if -v >= low * 1.2]
    text = dict(zip(ticks["tickvals"], ticks["ticktext"], strict=True))
    return {
        "tickvals": [-v for v in reversed(below)] + values,
        # the sign as signed_bytes writes it: "-" below zero, "+" above
        "ticktext": ["-" + text[v] for v in reversed(below)]
        + [("+" if v else "") + text[v] for v in values],
    }


def groups_figure(groups: Sequence[GroupStats]) -> go.Figure:
    """Bytes per pattern group (outermost matches only, so nothing is counted twice)."""
    ordered = sorted(groups, key=lambda g: (-g.bytes, g.group))
    return _figure(
        "groups",
        "Pattern groups",
        [
            go.Bar(
                x=[g.group for g in ordered],
                y=[g.bytes for g in ordered],
                customdata=[
                    f"{fmt.bytes_with_exact(g.bytes)} in {fmt.counted(g.count, 'place')}"
                    for g in ordered
                ],
                hovertemplate="%{x}: %{customdata}<extra></extra>",
                marker_color=_HELD,
            )
        ],
        yaxis=_byte_axis(max((g.bytes for g in ordered), default=0)),
    )


def staleness_figure(stale: Sequence[StaleBucket]) -> go.Figure:
    """Bytes of files by age since last modification, stacked by risk.

    Only the risks holding bytes get a trace (and a legend entry); with no file bytes at all
    (an empty directory) the figure is a sentence.
    """
    title = "Age of files (bytes)"
    levels = [r for r in RISKS if any(b.bytes.get(r, 0) > 0 for b in stale)]
    if not levels:
        return _said("staleness", title, "No file bytes in this snapshot: no ages to show.")
    return _figure(
        "staleness",
        title,
        [
            go.Bar(
                x=[b.bucket for b in stale],
                y=[b.bytes.get(r, 0) for b in stale],
                name=r,
                marker_color=RISK_COLORS[r],
                customdata=[fmt.bytes_with_exact(b.bytes.get(r, 0)) for b in stale],
                hovertemplate=f"{r}, %{{x}}: %{{customdata}}<extra></extra>",
            )
            for r in levels
        ],
        barmode="stack",
        showlegend=True,
        yaxis=_byte_axis(max((sum(b.bytes.values()) for b in stale), default=0)),
    )


# -- the breakdowns: who, what kind, how old (views.by_owner, by_type, age_histogram) --------

_UNITS = ("B", "KiB", "MiB", "GiB", "TiB")
_HELD = "#4e79a7"  # bytes held, on the owner and age charts


def byte_ticks(maximum: float, count: int = 5) -> dict[str, Any]:
    """An axis's ticks in binary units up to ``maximum`` bytes (``0``, ``256 KiB``, ``512 KiB``)."""
    if maximum <= 0:
        return {}
    power = 0
    while power < len(_UNITS) - 1 and maximum >= 1024 ** (power + 1):
        power += 1
    scale = 1024**power
    raw = maximum / scale / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    values = [i * step for i in range(int(maximum / scale / step) + 2)]
    return {
        "tickvals": [v * scale for v in values],
        "ticktext": ["0" if v == 0 else f"{v:g} {_UNITS[power]}" for v in values],
    }


def _said(fig_id: str, title: str, sentence: str) -> go.Figure:
    """A figure with nothing to draw: its sentence, no axes."""
    fig = _figure(fig_id, title, [], height=140)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    fig.add_annotation(text=sentence, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    return fig


def owners_figure(owners: pd.DataFrame, *, top: int = 12) -> go.Figure:
    """Bytes per owner (``views.by_owner``), largest on top, with what deleting would free.

    Each owner's bar is what it holds; inside it, what deleting its *safe* (then also its
    *caution*) entries would free (drawn only where some owner has any). Owners past ``top``
    are one ``(N more)`` bar. With no owner (an empty snapshot) the figure is a sentence.
    """
    by = str(owners.attrs.get("by", "user"))
    title = f"Bytes per owner ({by})"
    if not len(owners) or int(owners["bytes"].sum()) == 0:
        return _said("owners", title, "No bytes in this snapshot: no owner to show.")
    columns = ["owner", "bytes", "files", "reclaimable_safe", "reclaimable_caution"]
    shown = owners[columns].head(top).copy()
    rest = owners.iloc[top:]
    if len(rest):
        more = {c: int(rest[c].sum()) for c in columns[1:]}
        shown = pd.concat([shown, pd.DataFrame([{"owner": f"({len(rest)} more)", **more}])])
    shown = shown.iloc[::-1]  # plotly draws the first row at the bottom
    labels = list(shown["owner"])
    held = [
        f"{fmt.human_bytes(int(b))} in {fmt.counted(f, 'file')}"
        for b, f in zip(shown["bytes"], shown["files"], strict=True)
    ]
    traces = [
        go.Bar(
            y=labels,
            x=shown["bytes"],
            name="holds",
            orientation="h",
            marker_color=_HELD,
            width=0.8,
            customdata=held,
            hovertemplate="%{y}: %{customdata}<extra></extra>",
        )
    ]
    for level, name in (("caution", "reclaimable: safe + caution"), ("safe", "reclaimable: safe")):
        values = shown[f"reclaimable_{level}"]
        if not values.any():
            continue  # nothing to free at this level: no bar, no legend entry
        traces.append(
            go.Bar(
                y=labels,
                x=values,
                name=name,
                orientation="h",
                marker_color=RISK_COLORS[level],
                width=0.4,
                customdata=[fmt.human_bytes(int(v)) for v in values],
                hovertemplate=f"%{{y}}: %{{customdata}} {name}<extra></extra>",
            )
        )
    return _figure(
        "owners",
        title,
        traces,
        barmode="overlay",
        height=160 + 34 * len(shown),
        xaxis={"title": {"text": "bytes"}, **byte_ticks(float(shown["bytes"].max()))},
        yaxis={"automargin": True, "ticksuffix": " "},
        legend={"orientation": "h", "x": 1, "xanchor": "right", "y": 1.0, "yanchor": "bottom"},
    )


def type_mix_figure(types: pd.DataFrame, *, per_category: int = 8) -> go.Figure:
    """The files' bytes by type (``views.by_type``), in each category's fixed colour.

    By category: one bar per category, largest on top. By extension: a sunburst, categories
    inside and their extensions around them (the ``per_category`` largest of each; the rest
    one ``(N more)`` slice). With no file bytes the figure is a sentence.
    """
    title = "Type mix (bytes of files)"
    if not len(types) or int(types["bytes"].sum()) == 0:
        return _said("type-mix", title, "No file bytes in this snapshot: no type mix to show.")
    if "extension" not in types:
        rows = types[types["bytes"] > 0].iloc[::-1]
        return _figure(
            "type-mix",
            title,
            [
                go.Bar(
                    y=list(rows["category"]),
                    x=rows["bytes"],
                    orientation="h",
                    marker_color=[CATEGORY_COLORS.get(c, "#bab0ac") for c in rows["category"]],
                    customdata=[
                        f"{fmt.human_bytes(int(b))} in {fmt.counted(f, 'file')} ({fmt.percent(s)})"
                        for b, f, s in zip(rows["bytes"], rows["files"], rows["share"], strict=True)
                    ],
                    hovertemplate="%{y}: %{customdata}<extra></extra>",
                )
            ],
            height=160 + 30 * len(rows),
            xaxis={"title": {"text": "bytes"}, **byte_ticks(float(rows["bytes"].max()))},
            yaxis={"automargin": True, "ticksuffix": " "},
        )
    ids: list[str] = []
    labels: list[str] = []
    parents: list[str] = []
    values: list[int] = []
    colours: list[str] = []
    hover: list[str] = []
    kept = types[types["bytes"] > 0]
    totals = kept.groupby("category")[["bytes", "files"]].sum()
    totals = totals.sort_values("bytes", ascending=False)
    for category, total in totals.iterrows():
        colour = CATEGORY_COLORS.get(str(category), "#bab0ac")
        ids.append(str(category))
        labels.append(str(category))
        parents.append("")
        values.append(int(total["bytes"]))
        colours.append(colour)
        hover.append(
            f"{fmt.human_bytes(int(total['bytes']))} in {fmt.counted(total['files'], 'file')}"
        )
        inside = kept[kept["category"] == category]
        named, rest = inside.head(per_category), inside.iloc[per_category:]
        for extension, size, files in zip(
            named["extension"], named["bytes"], named["files"], strict=True
        ):
            ids.append(f"{category}/{extension}")
            labels.append(f".{extension}" if extension != "(none)" else "(none)")
            parents.append(str(category))
            values.append(int(size))
            colours.append(colour)
            hover.append(f"{fmt.human_bytes(int(size))} in {fmt.counted(files, 'file')}")
        if len(rest):
            ids.append(f"{category}/(more)")
            labels.append(f"({len(rest)} more)")
            parents.append(str(category))
            values.append(int(rest["bytes"].sum()))
            colours.append(colour)
            hover.append(
                f"{fmt.human_bytes(int(rest['bytes'].sum()))} in "
                f"{fmt.counted(rest['files'].sum(), 'file')}"
            )
    return _figure(
        "type-mix",
        title,
        [
            go.Sunburst(
                ids=ids,
                labels=labels,
                parents=parents,
                values=values,
                branchvalues="total",
                marker={"colors": colours, "line": {"color": "#ffffff", "width": 1}},
                customdata=hover,
                hovertemplate="%{label}: %{customdata}<extra></extra>",
                insidetextorientation="radial",
                sort=False,
            )
        ],
        height=520,
    )


def age_figure(age: pd.DataFrame, *, top: int = 6) -> go.Figure:
    """Bytes of files by age since last modification (``views.age_histogram``), files on hover.

    Buckets run youngest to oldest, every one shown. With ``by`` the bars are stacked by key:
    the ``top`` keys with the most bytes, the rest as one ``(N more)`` trace (as on the owners
    chart: a key may itself be called ``other``). With no file bytes the figure is a sentence.
    """
    by = age.attrs.get("by")
    title = "Age of files (bytes)" + (f", by {by}" if by else "")
    if not len(age) or int(age["bytes"].sum()) == 0:
        return _said("age", title, "No file bytes in this snapshot: no ages to show.")
    buckets = [b for b in (FUTURE, *AGE_BUCKETS) if b != FUTURE or b in set(age["bucket"])]
    layout: dict[str, Any] = {
        "xaxis": {"categoryorder": "array", "categoryarray": buckets},
        "yaxis": {"title": {"text": "bytes"}},
    }
    if by is None:
        traces = [
            go.Bar(
                x=list(age["bucket"]),
                y=age["bytes"],
                marker_color=_HELD,
                customdata=[
                    f"{fmt.human_bytes(int(b))} in {fmt.counted(f, 'file')}"
                    for b, f in zip(age["bytes"], age["files"], strict=True)
                ],
                hovertemplate="%{x}: %{customdata}<extra></extra>",
            )
        ]
        highest = float(age["bytes"].max())
    else:
        ranked = age.groupby(by)["bytes"].sum().sort_values(ascending=False)
        named = [str(k) for k in ranked.index[:top]]
        # the rest is one trace of its own, never merged into a key of the same name (a real
        # category, user or extension may be called "other"): kept apart by position
        rest = len(ranked) - len(named)
        where = {key: i for i, key in enumerate(named)}
        slots = [where.get(str(k), len(named)) for k in age[by]]
        grouped = (
            age.assign(slot=slots).groupby(["slot", "bucket"])[["bytes", "files"]].sum()
        ).reset_index()
        labels = [*named, *([f"({rest} more)"] if rest else [])]
        traces = []
        for i, key in enumerate(labels):
            part = grouped[grouped["slot"] == i]
            if i == len(named):
                colour = "#d9d9d9"
            elif by == "category":
                colour = CATEGORY_COLORS.get(key, CATEGORY_COLORS["other"])
            else:
                colour = OWNER_COLORS[i % len(OWNER_COLORS)]
            said = _label(key)  # plotly reads its text as HTML: a key's "<b>" stays text
            traces.append(
                go.Bar(
                    x=list(part["bucket"]),
                    y=part["bytes"],
                    name=said,
                    marker_color=colour,
                    # the key travels as data: a "%{y}" in its text is never a placeholder
                    customdata=[
                        [said, f"{fmt.human_bytes(int(b))} in {fmt.counted(f, 'file')}"]
                        for b, f in zip(part["bytes"], part["files"], strict=True)
                    ],
                    hovertemplate="%{customdata[0]}, %{x}: %{customdata[1]}<extra></extra>",
                )
            )
        layout["barmode"] = "stack"
        highest = float(grouped.groupby("bucket")["bytes"].sum().max())
    layout["yaxis"].update(byte_ticks(highest))
    return _figure("age", title, traces, **layout)


def _size_text(size: object, files: object) -> str:
    """``1.4 GiB (1,503,238,553 bytes) · 12,345 files``: a box's hover, both sizes."""
    n, k = int(size), int(files)  # type: ignore[call-overload]
    return f"{fmt.bytes_with_exact(n)} · {fmt.counted(k, 'file')}"


def _shown_paths(nodes: pd.DataFrame) -> list[str]:
    """Each node's path for its hover: relative to the view's root (the root: in full)."""
    roots = nodes.loc[nodes["parent"] == "", "id"]
    top = str(roots.iloc[0]) if len(roots) else None
    shown = []
    for node_id, parent, label in zip(nodes["id"], nodes["parent"], nodes["label"], strict=True):
        if parent == "":
            shown.append(display_path(str(node_id)))
        elif str(node_id).endswith("/(other)"):
            where = display_path(str(parent), top)
            shown.append(str(label) if where == "." else f"{where}/{label}")
        else:
            shown.append(display_path(str(node_id), top))
    return [_label(p) for p in shown]


def treemap_decisions(nodes: pd.DataFrame) -> tuple[list[tuple[Any, ...]], dict[str, Any]]:
    """What decisions set on the treemap of ``nodes``: its ``customdata`` and ``marker.line``.

    All a decision changes on a treemap already drawn (the widget sets only these after a click).
    The border is one width for every box, its colour the decision: plotly.js draws boxes
    whose borders differ in width with NaN coordinates while it zooms (a console error per
    box on every click).
    """
    borders = [DECISION_BORDER.get(d, DECISION_BORDER[None]) for d in nodes["decision"]]
    blank = [""] * len(nodes)
    files = nodes["files"] if "files" in nodes else [0] * len(nodes)
    customdata = list(
        zip(
            nodes["risk"],
            nodes["decision"].fillna(""),
            nodes["split"].fillna("") if "split" in nodes else blank,
            nodes["verdict"].fillna("") if "verdict" in nodes else blank,
            [_size_text(b, f) for b, f in zip(nodes["bytes"], files, strict=True)],
            nodes["colour"].fillna("") if "colour" in nodes else blank,
            _shown_paths(nodes),
            strict=True,
        )
    )
    return customdata, {"color": [b[0] for b in borders], "width": BORDER_WIDTH}


def _treemap_colouring(nodes: pd.DataFrame) -> str:
    by = nodes.attrs.get("colour_by", "risk")
    return str(by) if "hue" in nodes and by in TREEMAP_IDS else "risk"


def _treemap_sizing(nodes: pd.DataFrame) -> str:
    by = str(nodes.attrs.get("size_by", "bytes"))
    return by if by in nodes else "bytes"


def treemap_trace(nodes: pd.DataFrame) -> go.Treemap:
    """Treemap of ``views.treemap_nodes``: area = bytes or files, colour, border = decision.

    A directory's colour is what it holds (a risk, or ``mixed`` with the split on hover), the
    same bytes the risk mix counts; its own verdict (what removing it whole means) is on hover.
    Nodes coloured by owner or type (``colour_by``) take their ``hue``, the owner or category
    on hover. The areas are what the nodes were ranked by (``size_by``); the hover gives both
    sizes and the path relative to the view's root. Labels and paths are shown escaped
    (control characters visibly, ``<`` and ``&`` as entities: plotly reads its text as HTML).
    """
    customdata, line = treemap_decisions(nodes)
    by = _treemap_colouring(nodes)
    if by == "risk":
        colours = [
            RISK_COLORS[""] if parent == "" else RISK_COLORS.get(r, RISK_COLORS[""])
            for r, parent in zip(nodes["risk"], nodes["parent"], strict=True)
        ]  # the view's own root stays neutral: it frames the others
        first = "holds: %{customdata[2]}"
    else:
        colours = [h or RISK_COLORS[""] for h in nodes["hue"].fillna("")]
        first = f"{'owner' if by == 'owner' else 'type'}: %{{customdata[5]}}"
    return go.Treemap(
        ids=list(nodes["id"]),
        labels=[_label(display_path(str(label))) for label in nodes["label"]],
        parents=list(nodes["parent"]),
        values=[int(v) for v in nodes[_treemap_sizing(nodes)]],
        branchvalues="total",
        maxdepth=3,
        customdata=customdata,
        hovertemplate="%{customdata[6]}<br>%{customdata[4]}<br>" + first + "<br>as a whole: "
        "%{customdata[3]}<br>decision: %{customdata[1]}<extra></extra>",
        marker={"colors": colours, "line": line},
        sort=False,
    )


def treemap_key(nodes: pd.DataFrame, *, top: int = 12) -> str:
    """The treemap's legend as one line of HTML: each colour in use, then each decision border.

    By risk: the risks (and ``mixed``) of the boxes drawn, in ``RISK_COLORS`` order; by owner
    or type: the ``top`` owners or categories, most bytes first. Then, when a box carries a
    decision, ``border:`` and each decision's border colour. A figure puts it under its title
    (``treemap_figure``); the widget can show it beside its treemap.
    """
    by = _treemap_colouring(nodes)
    boxes = nodes[(nodes["parent"] != "") & ~nodes["id"].astype(str).str.endswith("/(other)")]
    if by == "risk":
        used = set(boxes["risk"])
        key = [(RISK_COLORS[w], w) for w in RISK_COLORS if w and w in used]
    else:
        drawn = boxes[(boxes["colour"] != "") & (boxes["hue"] != "")]
        order = drawn.groupby(["colour", "hue"])["bytes"].sum().reset_index()
        order = order.sort_values(["bytes", "colour"], ascending=[False, True]).head(top)
        key = list(zip(order["hue"], order["colour"], strict=True))
    parts = [f"<span style='color:{h}'>\u25a0</span> {_label(str(w))}" for h, w in key]
    decided = set(boxes["decision"].dropna()) if "decision" in boxes else set()
    borders = [
        f"<span style='color:{DECISION_BORDER[d][0]}'>\u25a1</span> {d}"
        for d in DECISION_BORDER
        if d is not None and d in decided
    ]
    if borders:
        parts.append("border: " + " ".join(borders))
    return "  ".join(parts)


def treemap_figure(nodes: pd.DataFrame, *, title: str | None = None) -> go.Figure:
    """The treemap as a plain figure (reports and the explore notebook).

    Its id follows its colouring (``TREEMAP_IDS``), so one page can hold the treemap by risk
    and by type; a key under the title names the colours in use (``treemap_key``) and, when
    a box carries a decision, the border colours. A directory with nothing inside is a
    sentence, not a bare box.
    """
    by = _treemap_colouring(nodes)
    if title is None:
        what = "files" if _treemap_sizing(nodes) == "files" else "bytes"
        title = f"Where the {what} are" + ("" if by == "risk" else f", by {by}")
    if not (nodes["parent"] != "").any():
        return _said(TREEMAP_IDS[by], title, "This directory is empty: no treemap to draw.")
    layout: dict[str, Any] = {"height": 520}
    key = treemap_key(nodes)
    if key:
        title = f"{title}<br><sup>{key}</sup>"
        layout["margin"] = {**_LAYOUT["margin"], "t": 70}
    return _figure(TREEMAP_IDS[by], title, [treemap_trace(nodes)], **layout)


_PAGE = {"plotlyjs": False}  # whether this kernel has put plotly.js in its document yet


def plotlyjs() -> dict[str, str]:
    """A display bundle that puts plotly.js in the page (inline, offline), once per kernel.

    ``show`` calls it before its first figure; a notebook may display it itself first (the
    report does, in its setup cell). Displayed again, it is the same script: harmless.
    """
    _PAGE["plotlyjs"] = True
    return {"text/html": f'<script type="text/javascript">{get_plotlyjs()}</script>'}


def show(fig: go.Figure) -> None:
    """Display ``fig`` for every front end: the plotly JSON and an HTML div named by its id.

    JupyterLab, Notebook 7, VS Code and Voila draw the plotly JSON mimetype; nbconvert's HTML
    (and the report) draws the HTML part, which needs plotly.js in the page: the first figure a
    kernel shows carries it inline, unless ``plotlyjs()`` was displayed before. So an exported
    notebook holds plotly.js once, works offline, and its later figures stay small.
    """
    from IPython.display import display

    fig_id = str(fig.layout.meta["id"]) if fig.layout.meta else "figure"
    html = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"hnb-{fig_id}")
    if not _PAGE["plotlyjs"]:
        html = plotlyjs()["text/html"] + html
    bundle = {"application/vnd.plotly.v1+json": json.loads(fig.to_json()), "text/html": html}
    display(bundle, raw=True)
