"""Change between two scans as signed bars; the risk mix as one bar, the reclaimable part marked."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
import pytest

from hygiene_nb import api
from hygiene_nb.classify.summary import RISKS
from hygiene_nb.formatting import human_bytes, signed_bytes
from hygiene_nb.notebook import figures
from hygiene_nb.query import views
from tests.helpers import du_bytes, write

TOP = 3


def child_sizes(root: Path) -> dict[str, int]:
    """What du says each child of ``root`` holds (apparent bytes), and the root's own entry."""
    sizes = {child.name: du_bytes(child, apparent=True) for child in root.iterdir()}
    sizes["."] = root.lstat().st_size
    return sizes


def bars(fig: go.Figure) -> dict[str, tuple[int, str, str]]:
    """Each bar of the change chart: its label → (bytes, colour, text written on it)."""
    found: dict[str, tuple[int, str, str]] = {}
    for trace in fig.data:
        for label, x, text in zip(trace.y, trace.x, trace.text, strict=True):
            assert label not in found, label
            found[label] = (int(x), str(trace.marker.color), str(text))
    return found


@pytest.fixture
def changed(tmp_path: Path, store: Path) -> tuple[Path, dict[str, int], dict[str, int]]:
    """A tree scanned twice, with children grown, shrunk, added, removed and left alone."""
    root = tmp_path / "tree"
    for i in range(8):
        write(root / f"d{i}" / "kept", 1_000 * (i + 1))
    write(root / "build" / "out.o", 25_000)
    write(root / "logs" / "big.log", 40_000)
    write(root / "same" / "file", 7_000)
    api.scan_root(root, store=store)
    before = child_sizes(root)
    for i in range(8):
        write(root / f"d{i}" / "more", 37 * (i + 1))  # small growth, most in "(N others)"
    shutil.rmtree(root / "build")
    write(root / "logs" / "big.log", 1_500)  # shrank
    write(root / "new" / "big", 123_456)
    os.utime(root / "same" / "file")  # touched, not resized: no change in bytes
    api.scan_root(root, store=store)
    return root, before, child_sizes(root)


def test_the_change_chart_has_the_top_changes_and_the_rest_summed_adding_up_to_the_roots(
    changed: tuple[Path, dict[str, int], dict[str, int]], store: Path
) -> None:
    root, before, after = changed
    fig = figures.diff_figure(views.diff(str(root), store=store), top=TOP)
    assert fig.layout.meta["id"] == "diff"
    shown = bars(fig)
    # the root's change as the store records it, and as du saw it
    old, new = api.list_snapshots(store=store, root=str(root))[-2:]
    assert old.tree_bytes is not None and new.tree_bytes is not None
    root_change = new.tree_bytes - old.tree_bytes
    assert root_change == sum(after.values()) - sum(before.values())
    assert sum(x for x, _, _ in shown.values()) == root_change
    # each child's change, from du, largest either way first; no bar for no change
    deltas = {k: after.get(k, 0) - before.get(k, 0) for k in {*before, *after}}
    moved = sorted((k for k, d in deltas.items() if d), key=lambda k: (-abs(deltas[k]), k))
    named, rest = moved[:TOP], moved[TOP:]
    assert "same" not in shown and "same" in before
    assert set(shown) == {*named, f"({len(rest)} others)"}
    for key in named:
        assert shown[key][0] == deltas[key], key
    others = shown[f"({len(rest)} others)"]
    assert others[0] == sum(deltas[k] for k in rest) > 0
    # the order on screen: largest on top (plotly draws the first category at the bottom)
    assert list(fig.layout.yaxis.categoryarray) == [f"({len(rest)} others)", *reversed(named)]
    # growth and shrinkage in two colours, both in the legend; the sign written on the bar
    assert deltas["build"] < 0 < deltas["new"]
    assert figures.GREW_COLOR != figures.SHRANK_COLOR
    for x, colour, text in shown.values():
        assert colour == (figures.GREW_COLOR if x > 0 else figures.SHRANK_COLOR)
        assert text == signed_bytes(x)  # the sign every surface writes
        assert text[0] == ("+" if x > 0 else "-")
    assert fig.layout.showlegend and {t.name for t in fig.data} == {"grew", "shrank"}
    assert signed_bytes(root_change) in fig.layout.title.text


def test_a_change_chart_of_one_key_per_bar_has_no_others_bar(
    changed: tuple[Path, dict[str, int], dict[str, int]], store: Path
) -> None:
    root, _, _ = changed
    diff = views.diff(str(root), store=store)
    shown = bars(figures.diff_figure(diff, top=len(diff)))
    assert not any(label.startswith("(") for label in shown)
    assert {k: v[0] for k, v in shown.items()} == {
        str(k): int(d) for k, d in zip(diff["dir"], diff["delta"], strict=True) if d
    }


def test_with_no_change_the_change_chart_is_a_sentence(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "still"
    write(root / "a" / "f", 5_000)
    write(root / "b", 300)
    api.scan_root(root, store=store)
    api.scan_root(root, store=store)
    fig = figures.diff_figure(views.diff(str(root), store=store))
    assert fig.layout.meta["id"] == "diff" and not fig.data
    assert "Nothing changed" in fig.layout.annotations[0].text


@pytest.fixture
def mixed_tree(tmp_path: Path, store: Path) -> Path:
    """Entries of several risks: bytecode (safe), installed packages (caution), files unknown."""
    root = tmp_path / "mixed"
    write(root / "src" / "app.py", 9_000)
    write(root / "src" / "__pycache__" / "app.cpython-312.pyc", 4_000)
    write(root / "lone.pyc", 700)
    write(root / "web" / "node_modules" / "lib" / "index.js", 30_000)
    write(root / "web" / "package.json", 200)
    write(root / "data.bin", 50_000)
    api.scan_root(root, store=store)
    return root


def spans(fig: go.Figure) -> dict[str, tuple[int, int]]:
    """Each bar of the risk mix: its name → (from, to) in bytes."""
    return {t.name: (int(t.base[0]), int(t.base[0] + t.x[0])) for t in fig.data}


def test_the_risk_mix_is_one_stacked_bar_with_the_reclaimable_part_marked(
    mixed_tree: Path, store: Path
) -> None:
    summary = api.summarize(str(mixed_tree), store=store)
    fig = figures.risk_mix_figure(summary)
    assert fig.layout.meta["id"] == "risk-mix"
    drawn = spans(fig)
    levels = [t.name for t in fig.data if not t.name.startswith("reclaimable")]
    present = [r for r in (*RISKS, "mixed") if r in summary.risk]
    assert levels == [r for r in present if summary.risk[r].bytes > 0]
    assert {"safe", "caution", "unknown"} <= set(levels)
    # one row, the segments end to end from 0, each the summary's bytes at its level
    assert {tuple(t.y) for t in fig.data} == {("now",)}
    edge = 0
    for level in levels:
        low, high = drawn[level]
        assert (low, high - low) == (edge, summary.risk[level].bytes), level
        edge = high
    assert edge == sum(s.bytes for s in summary.risk.values())
    for trace in fig.data:
        if trace.name in figures.RISK_COLORS:
            assert trace.marker.color == figures.RISK_COLORS[trace.name]
    # the reclaimable part: hatched, from 0 to the safe figure, then on to the cumulative one
    safe, caution = summary.reclaimable["safe"].bytes, summary.reclaimable["caution"].bytes
    assert 0 < safe < caution
    assert drawn["reclaimable: safe"] == (0, safe)
    assert drawn["reclaimable: with caution"] == (safe, caution)
    for name in ("reclaimable: safe", "reclaimable: with caution"):
        trace = next(t for t in fig.data if t.name == name)
        assert trace.marker.pattern.shape
    # what deleting the safe entries frees: the bytecode, by os.stat
    bytecode = [p for p in mixed_tree.rglob("*.pyc")]
    pycache = mixed_tree / "src" / "__pycache__"
    assert safe == sum(p.lstat().st_size for p in [*bytecode, pycache])
    notes = " ".join(a.text for a in fig.layout.annotations)
    assert f"safe to reclaim: {human_bytes(safe)}" in notes
    assert f"with caution, in all: {human_bytes(caution)}" in notes
    assert fig.layout.showlegend


def test_the_risk_mix_of_a_mapping_alone_has_no_reclaimable_marks(
    mixed_tree: Path, store: Path
) -> None:
    summary = api.summarize(str(mixed_tree), store=store)
    fig = figures.risk_mix_figure(summary.risk)
    assert not any(t.name.startswith("reclaimable") for t in fig.data)
    with_marks = figures.risk_mix_figure(summary.risk, summary.reclaimable)
    assert spans(with_marks) == spans(figures.risk_mix_figure(summary))


def test_every_chart_in_risk_colours_has_a_legend(mixed_tree: Path, store: Path) -> None:
    root = str(mixed_tree)
    write(mixed_tree / "src" / "more.py", 2_000)
    api.scan_root(mixed_tree, store=store)
    summary = api.summarize(root, store=store)
    charts: list[Any] = [
        figures.risk_mix_figure(summary),
        figures.risk_history_figure(views.risk_history(root, store=store)),
        figures.staleness_figure(summary.stale),
    ]
    for fig in charts:
        risks = [t for t in fig.data if t.name in figures.RISK_COLORS]
        assert risks, fig.layout.meta["id"]
        assert fig.layout.showlegend, fig.layout.meta["id"]
        for trace in risks:
            assert trace.marker.color == figures.RISK_COLORS[trace.name]
    # the treemap names its colours in a key under its title
    nodes = views.treemap_of(root, store=store)
    title = figures.treemap_figure(nodes).layout.title.text
    for risk in set(nodes.loc[nodes["parent"] != "", "risk"]):
        assert figures.RISK_COLORS[risk] in title
    # and no two risks share a colour
    assert len(set(figures.RISK_COLORS.values())) == len(figures.RISK_COLORS)


def test_the_growth_chart_sums_each_scan_to_the_roots_children_and_greys_the_rest(
    changed: tuple[Path, dict[str, int], dict[str, int]], store: Path
) -> None:
    root, before, after = changed
    fig = figures.growth_figure(views.child_growth(str(root), store=store, top=TOP))
    assert fig.layout.meta["id"] == "growth" and fig.layout.showlegend
    per_scan: dict[Any, int] = {}
    for trace in fig.data:
        for x, y in zip(trace.x, trace.y, strict=True):
            per_scan[x] = per_scan.get(x, 0) + int(y)
    # per scan, the stacked children hold what du saw under the root, less its own entry
    held = [sum(s for k, s in sizes.items() if k != ".") for sizes in (before, after)]
    assert [per_scan[x] for x in fig.layout.xaxis.categoryarray] == held
    colours = [t.line.color for t in fig.data]
    other = next(t for t in fig.data if t.name == "(other)")
    assert colours.count(other.line.color) == 1  # the rest alone in its grey


def test_caution_bytes_with_no_safe_ones_are_not_called_safe(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "only-caution"
    write(root / "Downloads" / "installer.tmp", 40_000)
    write(root / "notes.txt", 10)
    api.scan_root(root, store=store)
    summary = api.summarize(str(root), store=store)
    assert summary.reclaimable["safe"].bytes == 0 < summary.reclaimable["caution"].bytes
    fig = figures.risk_mix_figure(summary)
    texts = [a.text for a in fig.layout.annotations]
    assert texts and all("safe to reclaim" not in t for t in texts), texts
    assert any(t.startswith("with caution, in all") for t in texts), texts


def test_a_name_is_never_read_as_markup_or_a_template(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "names"
    write(root / "%{y}" / "f", 10)
    write(root / 'say "hi"' / "f", 20)
    api.scan_root(root, store=store)
    write(root / "%{y}" / "g", 30_000)
    write(root / 'say "hi"' / "g", 40_000)
    api.scan_root(root, store=store)
    growth = figures.growth_figure(views.child_growth(str(root), store=store))
    names = [t.name for t in growth.data]
    assert "&#37;{y}" in names and 'say "hi"' in names, names
    assert not any("&quot;" in n or "%{" in n for n in names), names
