"""Plain plotly figures over the views, each with a fixed id; and how a report shows them.

Every builder returns a ``plotly.graph_objects.Figure`` whose ``layout.meta.id`` is the figure's
fixed id (``FIGURE_IDS``). ``show`` displays a figure both ways a reader needs: the plotly JSON
mimetype (rendered by JupyterLab) and an HTML div named by that id (rendered by nbconvert's HTML,
offline, once ``plotlyjs`` has put plotly.js in the page). No random ids reach a report, so two
runs over the same inputs give the same bytes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.offline import get_plotlyjs

from hygiene_nb.classify.summary import RISKS
from hygiene_nb.models import GroupStats, RiskStats, StaleBucket

__all__ = [
    "DECISION_BORDER",
    "FIGURE_IDS",
    "RISK_COLORS",
    "diff_figure",
    "groups_figure",
    "growth_figure",
    "history_figure",
    "plotlyjs",
    "risk_history_figure",
    "risk_mix_figure",
    "show",
    "staleness_figure",
    "treemap_figure",
]

RISK_COLORS = {
    "safe": "#2e7d32",
    "caution": "#f9a825",
    "personal": "#1565c0",
    "high": "#c62828",
    "unknown": "#9e9e9e",
    "mixed": "#8d6e63",  # a directory holding bytes of several risks (classify.content)
    "": "#eeeeee",  # "(other)" buckets and the view's own root
}
# border = decision: (colour, width); undecided entries keep plotly's thin white border
DECISION_BORDER = {
    "delete": ("#000000", 4.0),
    "keep": ("#00c853", 4.0),
    "unsure": ("#aa00ff", 4.0),
    None: ("#ffffff", 1.0),
}
FIGURE_IDS = (
    "history", "growth", "risk-mix", "risk-history", "diff", "groups", "staleness", "treemap",
)  # fmt: skip
_LAYOUT: dict[str, Any] = {
    "template": "plotly_white",
    "margin": {"t": 50, "l": 10, "r": 10, "b": 10},
    "height": 380,
}


def _figure(fig_id: str, title: str, traces: Sequence[Any], **layout: Any) -> go.Figure:
    assert fig_id in FIGURE_IDS, fig_id
    fig = go.Figure(list(traces))
    fig.update_layout(**{**_LAYOUT, "title": {"text": title}, "meta": {"id": fig_id}, **layout})
    return fig


def history_figure(history: pd.DataFrame) -> go.Figure:
    """Apparent and allocated bytes of the root, and the filesystem's free space, per scan."""
    x = history["scanned_at"]
    return _figure(
        "history",
        "Size and free space per scan",
        [
            go.Scatter(x=x, y=history["bytes"], name="apparent bytes", mode="lines+markers"),
            go.Scatter(x=x, y=history["alloc"], name="allocated bytes", mode="lines+markers"),
            go.Scatter(
                x=x,
                y=history["fs_free"],
                name="filesystem free",
                mode="lines+markers",
                yaxis="y2",
                line={"dash": "dot"},
            ),
        ],
        yaxis={"title": {"text": "bytes"}},
        yaxis2={"title": {"text": "free bytes"}, "overlaying": "y", "side": "right"},
    )


def growth_figure(growth: pd.DataFrame) -> go.Figure:
    """Recursive bytes of each direct child over time, stacked (``views.child_growth``)."""
    traces = [
        go.Scatter(
            x=part["scanned_at"], y=part["bytes"], name=str(child), stackgroup="one", mode="lines"
        )
        for child, part in growth.groupby("child", sort=False)
    ]
    return _figure("growth", "Growth of the largest direct children", traces)


def risk_mix_figure(mix: Mapping[str, RiskStats]) -> go.Figure:
    """Bytes per risk level now (hard links once), with the entry counts on hover."""
    levels = [r for r in RISKS if r in mix]
    return _figure(
        "risk-mix",
        "Risk mix (bytes)",
        [
            go.Bar(
                x=levels,
                y=[mix[r].bytes for r in levels],
                customdata=[mix[r].entries for r in levels],
                hovertemplate="%{x}: %{y} bytes in %{customdata} entries<extra></extra>",
                marker_color=[RISK_COLORS[r] for r in levels],
            )
        ],
    )


def risk_history_figure(history: pd.DataFrame) -> go.Figure:
    """Bytes per risk level in every scan, stacked, with the cleanliness score (right axis)."""
    traces: list[Any] = []
    for level in RISKS:
        part = history[history["risk"] == level]
        traces.append(
            go.Bar(
                x=part["scanned_at"], y=part["bytes"], name=level, marker_color=RISK_COLORS[level]
            )
        )
    scores = history.drop_duplicates("scan_id")
    score = go.Scatter(
        x=scores["scanned_at"],
        y=scores["score"],
        name="cleanliness score",
        yaxis="y2",
        mode="lines+markers",
        line={"color": "#000000"},
    )
    traces.append(score)
    return _figure(
        "risk-history",
        "Risk mix over time",
        traces,
        barmode="stack",
        yaxis={"title": {"text": "bytes"}},
        yaxis2={
            "title": {"text": "score"},
            "overlaying": "y",
            "side": "right",
            "range": [0, 100],
        },
    )


def diff_figure(diff: pd.DataFrame, *, top: int = 20) -> go.Figure:
    """Bytes added and removed per key of ``views.diff`` (new + grew vs gone + shrank)."""
    key = diff.columns[0]
    rows = diff.head(top).iloc[::-1]
    added = rows["new_entry_bytes"] + rows["grew_bytes"]
    removed = -(rows["gone_entry_bytes"] + rows["shrank_bytes"])
    return _figure(
        "diff",
        f"What changed, by {key}",
        [
            go.Bar(
                y=rows[key],
                x=added,
                name="added (new, grew)",
                orientation="h",
                marker_color="#c62828",
            ),
            go.Bar(
                y=rows[key],
                x=removed,
                name="removed (gone, shrank)",
                orientation="h",
                marker_color="#2e7d32",
            ),
        ],
        barmode="relative",
        xaxis={"title": {"text": "bytes"}},
    )


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
                customdata=[g.count for g in ordered],
                hovertemplate="%{x}: %{y} bytes in %{customdata} places<extra></extra>",
            )
        ],
    )


def staleness_figure(stale: Sequence[StaleBucket]) -> go.Figure:
    """Bytes of files by age since last modification, stacked by risk."""
    return _figure(
        "staleness",
        "Age of files (bytes)",
        [
            go.Bar(
                x=[b.bucket for b in stale],
                y=[b.bytes[r] for b in stale],
                name=r,
                marker_color=RISK_COLORS[r],
            )
            for r in RISKS
        ],
        barmode="stack",
    )


def treemap_decisions(nodes: pd.DataFrame) -> tuple[list[tuple[Any, ...]], dict[str, list[Any]]]:
    """What decisions set on the treemap of ``nodes``: its ``customdata`` and ``marker.line``.

    All a decision changes on a treemap already drawn (the widget sets only these after a click).
    """
    borders = [DECISION_BORDER.get(d, DECISION_BORDER[None]) for d in nodes["decision"]]
    customdata = list(
        zip(
            nodes["risk"],
            nodes["decision"].fillna(""),
            nodes["split"].fillna("") if "split" in nodes else [""] * len(nodes),
            nodes["verdict"].fillna("") if "verdict" in nodes else [""] * len(nodes),
            strict=True,
        )
    )
    return customdata, {"color": [b[0] for b in borders], "width": [b[1] for b in borders]}


def treemap_trace(nodes: pd.DataFrame) -> go.Treemap:
    """Treemap of ``views.treemap_nodes``: area = bytes, colour = what it holds, border = decision.

    A directory's colour is what it holds (a risk, or ``mixed`` with the split on hover), the
    same bytes the risk mix counts; its own verdict (what removing it whole means) is on hover.
    """
    customdata, line = treemap_decisions(nodes)
    return go.Treemap(
        ids=list(nodes["id"]),
        labels=list(nodes["label"]),
        parents=list(nodes["parent"]),
        values=[int(v) for v in nodes["bytes"]],
        branchvalues="total",
        maxdepth=3,
        customdata=customdata,
        hovertemplate="%{id}<br>%{value} bytes<br>holds: %{customdata[2]}"
        "<br>as a whole: %{customdata[3]}<br>decision: %{customdata[1]}<extra></extra>",
        marker={
            "colors": [
                RISK_COLORS[""] if parent == "" else RISK_COLORS.get(r, RISK_COLORS[""])
                for r, parent in zip(nodes["risk"], nodes["parent"], strict=True)
            ],  # the view's own root stays neutral: it frames the others
            "line": line,
        },
        sort=False,
    )


def treemap_figure(nodes: pd.DataFrame, *, title: str = "Where the bytes are") -> go.Figure:
    """The treemap as a plain figure (reports and the explore notebook)."""
    return _figure("treemap", title, [treemap_trace(nodes)], height=520)


def plotlyjs() -> dict[str, str]:
    """A display bundle that puts plotly.js in the page once (offline HTML reports)."""
    return {"text/html": f'<script type="text/javascript">{get_plotlyjs()}</script>'}


def show(fig: go.Figure) -> None:
    """Display ``fig`` for JupyterLab (plotly JSON) and for HTML export (a div named by its id).

    The HTML part expects plotly.js in the page already (``display(plotlyjs(), raw=True)``).
    """
    from IPython.display import display

    fig_id = str(fig.layout.meta["id"]) if fig.layout.meta else "figure"
    html = fig.to_html(full_html=False, include_plotlyjs=False, div_id=f"hnb-{fig_id}")
    bundle = {"application/vnd.plotly.v1+json": json.loads(fig.to_json()), "text/html": html}
    display(bundle, raw=True)
