"""Bench section: the notebook views and the annotation widget on the 1M-entry snapshot.

Scans the tree a second time into the shared store, so there are two snapshots to compare (the
tree does not change between them: the diff still joins every row of both).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.load import _median_seconds

__all__ = ["views_section"]


def views_section(tree_root: Path, store_dir: Path, report: Any) -> None:
    """Time diff (by child, by risk), changed entries, growth, treemap and the widget."""
    from hygiene_nb import api
    from hygiene_nb.notebook.ui import Annotator
    from hygiene_nb.query import views

    store = store_dir / "shared"
    if not store.exists():
        print("  skipped: the scan section left no shared store")
        return
    root = str(tree_root)
    api.scan_root(root, store=store)
    rounds = max(1, min(3, report.rounds))
    panel: list[Annotator] = []
    first_dir = str(
        views.browse_frame(api.classify_snapshot(root, store=store))
        .query("kind == 'dir' and parent == @root")
        .sort_values("bytes", ascending=False)["path"]
        .iloc[0]
    )
    results = {
        "diff_by_dir_s": _median_seconds(lambda: views.diff(root, store=store), rounds),
        "diff_by_risk_s": _median_seconds(lambda: views.diff(root, store=store, by="risk"), 1),
        "changed_entries_s": _median_seconds(
            lambda: views.changed_entries(root, store=store), rounds
        ),
        "child_growth_s": _median_seconds(lambda: views.child_growth(root, store=store), rounds),
        "treemap_of_root_s": _median_seconds(lambda: views.treemap_of(root, store=store), 1),
        "widget_open_s": _median_seconds(
            lambda: panel.append(Annotator(root, store=store, figure_widget=False)), 1
        ),
        "widget_drill_s": _median_seconds(lambda: panel[0].open(first_dir), rounds),
    }
    nodes = len(views.treemap_of(root, store=store))
    for key, value in results.items():
        print(f"  {key:<22} {value:7.3f} s")
    print(f"  treemap nodes at the root: {nodes}")
    report.sections["views"] = {
        "treemap_nodes": nodes,
        **{k: round(v, 4) for k, v in results.items()},
    }
