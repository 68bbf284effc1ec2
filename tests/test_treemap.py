"""The treemap: sized by bytes or by files, consistent for plotly, with a legend for its colours.

Random trees are built on disk and scanned; file counts are compared with ``os.walk``, and the
figure is drawn in a real browser (Debian's chromium through Playwright) and clicked.
"""

from __future__ import annotations

import collections
import math
import os
import re
from pathlib import Path

import pandas as pd
import plotly.graph_objects as go
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hygiene_nb import api
from hygiene_nb.formatting import counted, display_path, exact_bytes, human_bytes
from hygiene_nb.notebook import figures
from hygiene_nb.query import views
from hygiene_nb.query.frames import SizeBy
from tests.helpers import TREE_ENTRIES, TreeEntry, build_tree, write

CHROMIUM = Path("/usr/bin/chromium")
# what the widget's FigureWidget sends after a click: the same trace, restyled in one call
RESTYLE = """(t) => {
  const u = {level: t.level};
  for (const k of ['ids', 'labels', 'parents', 'values', 'customdata']) u[k] = [t[k]];
  u['marker.colors'] = [t.marker.colors];
  u['marker.line.color'] = [t.marker.line.color];
  u['marker.line.width'] = [t.marker.line.width];
  return Plotly.restyle(document.getElementById('tree'), u, [0]);
}"""


def walked_bounds(path: Path) -> tuple[int, int]:
    """What a box of ``path`` may count as files: (least, most).

    A hard-linked inode counts once, at its first name in the snapshot (``tree_files``), and a
    box is at least the sum of the boxes drawn inside it: so an inode all of whose names are
    inside counts once or up to once per name drawn; one with names outside too, at most
    once per name inside. With no hard link both bounds are the names os.walk lists.
    """
    if not path.is_dir() or path.is_symlink():
        return 1, 1
    names: collections.Counter[tuple[int, int]] = collections.Counter()
    links: dict[tuple[int, int], int] = {}
    for parent, _, files in os.walk(path):
        for name in files:
            st_ = os.lstat(os.path.join(parent, name))
            names[(st_.st_dev, st_.st_ino)] += 1
            links[(st_.st_dev, st_.st_ino)] = st_.st_nlink
    whole = sum(1 for inode, n in names.items() if n >= links[inode])
    return whole, sum(names.values())


def check_consistent(nodes: pd.DataFrame) -> None:
    """What plotly needs with branchvalues="total": parents exist, hold their children, no NaN."""
    assert nodes["id"].is_unique
    ids = set(nodes["id"])
    assert (nodes["parent"] == "").sum() == 1
    assert set(nodes["parent"]) - {""} <= ids  # every parent is a node
    for column in ("bytes", "files"):
        values = list(nodes[column])
        assert all(v is not None and not math.isnan(float(v)) and v >= 0 for v in values)
        inside = nodes.groupby("parent")[column].sum()
        for node_id, value in zip(nodes["id"], nodes[column], strict=True):
            assert value >= inside.get(node_id, 0), (column, node_id)
    trace = figures.treemap_trace(nodes)
    assert trace.branchvalues == "total"
    value = dict(zip(trace.ids, trace.values, strict=True))
    inside_drawn: dict[str, int] = {}
    for parent, v in zip(trace.parents, trace.values, strict=True):
        inside_drawn[parent] = inside_drawn.get(parent, 0) + v
    assert all(value[p] >= s for p, s in inside_drawn.items() if p)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    entries=TREE_ENTRIES, children=st.integers(1, 6), size_by=st.sampled_from(["bytes", "files"])
)
def test_each_box_counts_the_files_os_walk_finds_and_the_largest_are_named(
    tmp_path_factory: pytest.TempPathFactory,
    entries: list[TreeEntry],
    children: int,
    size_by: SizeBy,
) -> None:
    base = tmp_path_factory.mktemp("treemap")
    root, store = base / "tree", base / "store"
    build_tree(root, entries)
    api.scan_root(root, store=store)
    frame = views.browse_frame(api.classify_snapshot(str(root), store=store))
    queried = views.treemap_of(str(root), store=store, children=children, size_by=size_by)
    in_memory = views.treemap_nodes(frame, str(root), children=children, size_by=size_by)
    pd.testing.assert_frame_equal(queried, in_memory)  # one query reads what the frame gives
    one = views.treemap_nodes(frame, str(root), children=children, size_by=size_by, levels=1)
    check_consistent(one)  # the widget's one level: each box as big as with two
    drawn = in_memory[(in_memory["parent"] == "") | (in_memory["parent"] == str(root))]
    pd.testing.assert_frame_equal(one, drawn)
    assert queried.attrs["size_by"] == size_by
    check_consistent(queried)
    for node_id, files in zip(queried["id"], queried["files"], strict=True):
        if not node_id.endswith("/(other)"):
            least, most = walked_bounds(Path(node_id))
            assert least <= files <= most, node_id
    # the children named are the largest by what the areas are (ties: by name)
    names = sorted(os.listdir(root))
    by_path = frame.set_index("path")
    if size_by == "files":
        key = {n: int(by_path.loc[str(root / n), "files"]) for n in names}  # type: ignore[arg-type]
        for n in names:  # a child's own count, as the walk bounds it
            least, most = walked_bounds(root / n)
            assert least <= key[n] <= most, n
    else:
        key = {n: (root / n).lstat().st_size for n in names if not (root / n).is_dir()}
        key |= {
            n: int(by_path.loc[str(root / n), "bytes"])  # type: ignore[arg-type]
            for n in names
            if (root / n).is_dir()
        }
    ranked = sorted(names, key=lambda n: (-key[n], n))[:children]
    top = queried[(queried["parent"] == str(root)) & ~queried["id"].str.endswith("/(other)")]
    assert list(top["label"]) == ranked
    trace = figures.treemap_trace(queried)
    assert list(trace.values) == [int(v) for v in queried[size_by]]
    if len(names) > children:
        other = queried.set_index("id").loc[str(root) + "/(other)"]
        rest = [walked_bounds(root / n) for n in names if n not in ranked]
        assert sum(lo for lo, _ in rest) <= other["files"] <= sum(hi for _, hi in rest)
        if size_by == "files":
            assert other["files"] == sum(key[n] for n in names if n not in ranked)


def test_the_hover_gives_both_sizes_and_the_path_under_the_root(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "r"
    for i in range(5):
        write(root / "many" / f"f{i}", 10)
    write(root / "big" / "one.bin", 50_000)
    api.scan_root(root, store=store)
    by_files = views.treemap_of(str(root), store=store, size_by="files")
    assert list(by_files.loc[by_files["parent"] == str(root), "label"]) == ["many", "big"]
    by_bytes = views.treemap_of(str(root), store=store)
    assert list(by_bytes.loc[by_bytes["parent"] == str(root), "label"]) == ["big", "many"]
    trace = figures.treemap_trace(by_files)
    at = list(trace.ids).index(str(root / "big" / "one.bin"))
    size = (root / "big" / "one.bin").stat().st_size
    assert trace.customdata[at][4] == f"{human_bytes(size)} ({exact_bytes(size)}) · 1 file"
    assert trace.customdata[at][6] == display_path(str(root / "big" / "one.bin"), str(root))
    many = list(trace.ids).index(str(root / "many"))
    assert trace.customdata[many][4].endswith(" · " + counted(5, "file"))
    assert "%{customdata[6]}" in trace.hovertemplate and "%{id}" not in trace.hovertemplate
    assert figures.treemap_figure(by_files).layout.title.text.startswith("Where the files are")
    odd = root / "<b>x\n&y"
    write(odd, 3)
    api.scan_root(root, store=store)
    labels = figures.treemap_trace(views.treemap_of(str(root), store=store)).labels
    assert "&lt;b&gt;x\\n&amp;y" in labels  # plotly's text is HTML: shown as typed, escaped
    with pytest.raises(ValueError, match="size_by"):
        views.treemap_of(str(root), store=store, size_by="inodes")  # type: ignore[arg-type]


def mixed_tree(root: Path) -> Path:
    """A project (dependencies beside a person's document: mixed), a key, caches, a log."""
    write(root / "web" / "package.json", 20)
    write(root / "web" / "node_modules" / "pkg" / "index.js", 300_000)
    write(root / "web" / "notes.pdf", 40_000)
    write(root / ".ssh" / "id_ed25519", 400)
    write(root / ".cache" / "pip" / "wheel.whl", 9_000)
    write(root / "photo.jpg", 2_000)
    return root


def test_each_colouring_has_a_key_naming_the_colours_in_use(tmp_path: Path, store: Path) -> None:
    root = mixed_tree(tmp_path / "r")
    api.scan_root(root, store=store)
    nodes = views.treemap_of(str(root), store=store)
    fig = figures.treemap_figure(nodes)
    title = fig.layout.title.text
    boxes = nodes[nodes["parent"] != ""]
    used = set(boxes["risk"]) - {""}
    assert "mixed" in used
    for word in used:
        assert f"</span> {word}" in title, word
        assert figures.RISK_COLORS[word] in title
    for word in set(figures.RISK_COLORS) - used - {""}:
        assert f"</span> {word}" not in title, word  # only the colours drawn
    assert "border:" not in title  # no decision yet
    for by in ("type", "owner"):
        coloured = views.treemap_of(str(root), store=store, colour_by=by)
        text = figures.treemap_figure(coloured).layout.title.text
        named = coloured[(coloured["colour"] != "") & (coloured["parent"] != "")]
        assert len(named)
        for word, hue in zip(named["colour"], named["hue"], strict=True):
            assert f"<span style='color:{hue}'>\u25a0</span> {word}" in text, (by, word)


def test_decision_borders_have_a_key_when_a_box_carries_one(tmp_path: Path, store: Path) -> None:
    root = mixed_tree(tmp_path / "r")
    api.scan_root(root, store=store)
    api.annotate([str(root / ".cache")], store=store, decision="delete")
    api.annotate([str(root / "photo.jpg")], store=store, decision="keep")
    nodes = views.treemap_of(str(root), store=store)
    text = figures.treemap_figure(nodes).layout.title.text
    key = text.split("border:", 1)[1]
    for decision in ("delete", "keep"):
        assert f"{figures.DECISION_BORDER[decision][0]}'>\u25a1</span> {decision}" in key
    assert "unsure" not in key
    trace = figures.treemap_trace(nodes)
    at = list(trace.ids).index(str(root / ".cache" / "pip"))  # covered by its parent's
    assert trace.marker.line.color[at] == figures.DECISION_BORDER["delete"][0]
    assert trace.marker.line.width == figures.BORDER_WIDTH  # one width for every box
    by_type = views.treemap_of(str(root), store=store, colour_by="type")
    assert "border:" in figures.treemap_figure(by_type).layout.title.text


def test_empty_and_unreadable_boxes_stay_consistent(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    (root / "empty").mkdir(parents=True)
    write(root / "zero")
    write(root / "locked" / "inside", 500)
    write(root / "fine" / "a", 5)
    (root / "locked").chmod(0)
    try:
        api.scan_root(root, store=store)
    finally:
        (root / "locked").chmod(0o755)
    frame = views.browse_frame(api.classify_snapshot(str(root), store=store))
    for size_by in ("bytes", "files"):
        for levels in (1, 2):
            nodes = views.treemap_nodes(frame, str(root), size_by=size_by, levels=levels)
            check_consistent(nodes)
            assert str(root / "empty") in set(nodes["id"])


def test_a_treemap_zooms_in_a_browser_without_console_errors(tmp_path: Path, store: Path) -> None:
    if not CHROMIUM.exists():
        pytest.skip(f"needs Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    root = mixed_tree(tmp_path / "r")
    write(root / "web" / "empty.txt")  # an empty box beside full ones
    for i in range(8):
        write(root / "web" / "src" / f"m{i}.py", 300 + i)
    api.scan_root(root, store=store)
    api.annotate([str(root / ".cache")], store=store, decision="delete")
    pages = []
    for size_by in ("bytes", "files"):
        fig = figures.treemap_figure(views.treemap_of(str(root), store=store, size_by=size_by))
        page_file = tmp_path / f"treemap-{size_by}.html"
        fig.write_html(page_file, include_plotlyjs=True, full_html=True)
        pages.append((size_by, page_file))
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=str(CHROMIUM), args=["--headless", "--no-sandbox", "--disable-gpu"]
        )
        try:
            for size_by, page_file in pages:
                page = browser.new_page(viewport={"width": 1000, "height": 700})
                page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
                page.on("pageerror", lambda e: errors.append(str(e)))
                page.goto(page_file.as_uri())
                page.wait_for_selector("g.slice")
                assert page.locator("g.slice path.surface").count() > 3  # boxes drawn
                page.screenshot(path=f"/tmp/treemap-{size_by}.png")
                web = page.locator("g.slice").filter(
                    has=page.locator("text.slicetext", has_text=re.compile(r"^web"))
                )
                web.first.click(force=True, position={"x": 5, "y": 5})  # its header: zoom in
                page.wait_for_timeout(1200)  # the zoom's transition
                page.screenshot(path=f"/tmp/treemap-{size_by}-zoomed.png")
                web.first.click(force=True, position={"x": 5, "y": 5})  # and out again
                page.wait_for_timeout(1200)
                page.close()
            # the widget's way: one level drawn, and on a click the kernel restyles the same
            # trace with the clicked directory's boxes while plotly.js still animates
            frame = views.browse_frame(api.classify_snapshot(str(root), store=store))
            shown, inner = (
                figures.treemap_trace(views.treemap_nodes(frame, under, levels=1)).to_plotly_json()
                for under in (str(root), str(root / "web"))
            )
            page_file = tmp_path / "treemap-widget.html"
            go.Figure([shown]).write_html(page_file, include_plotlyjs=True, div_id="tree")
            page = browser.new_page(viewport={"width": 1000, "height": 700})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri())
            page.wait_for_selector("g.slice")
            web = page.locator("g.slice").filter(
                has=page.locator("text.slicetext", has_text=re.compile(r"^web"))
            )
            web.first.click(force=True)
            page.evaluate(RESTYLE, {**inner, "level": str(root / "web")})
            page.wait_for_timeout(1200)
            assert page.locator("text.slicetext", has_text=re.compile(r"^node_modules")).count()
            page.screenshot(path="/tmp/treemap-widget-drilled.png")
        finally:
            browser.close()
    assert errors == []
