"""The breakdowns drawn: owner, type and age charts, and the treemap coloured by owner or type."""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from hygiene_nb import api
from hygiene_nb.classify.filetypes import category_of, extension_of
from hygiene_nb.notebook import figures
from hygiene_nb.query import views
from hygiene_nb.query.breakdowns import AGE_BUCKETS
from hygiene_nb.query.frames import CATEGORY_COLORS, NO_FILES, OWNER_COLORS
from hygiene_nb.render import human_bytes
from tests.helpers import write


@pytest.fixture
def typed_tree(tmp_path: Path, store: Path) -> Path:
    """Directories whose bytes are mostly one kind of file, and loose files at the top."""
    root = tmp_path / "typed"
    write(root / "photos" / "a.jpg", 90_000)
    write(root / "photos" / "b.png", 30_000)
    write(root / "photos" / "notes.txt", 5_000)
    write(root / "code" / "main.py", 4_000)
    write(root / "code" / "data" / "big.csv", 70_000)  # the grandchild holds data
    write(root / "code" / "lib.rs", 3_000)
    write(root / "movie.mkv", 150_000)
    write(root / "README", 100)
    (root / "empty").mkdir()
    old = write(root / "old" / "report.pdf", 20_000)
    os.utime(old, (1_500_000_000, 1_500_000_000))
    api.scan_root(root, store=store)
    return root


def file_bytes_by_category(directory: Path) -> Counter[str]:
    """Bytes of the regular files under ``directory`` by category, from the disk."""
    found: Counter[str] = Counter()
    for folder, _, names in os.walk(directory):
        for name in names:
            path = Path(folder) / name
            found[category_of(extension_of(name))] += path.lstat().st_size
    return found


def test_the_treemap_by_type_colours_each_box_by_the_category_holding_most_bytes(
    typed_tree: Path, store: Path
) -> None:
    nodes = views.treemap_of(str(typed_tree), store=store, colour_by="type").set_index("id")
    for path, row in nodes.iterrows():
        path = str(path)
        if path == str(typed_tree) or path.endswith("/(other)"):
            assert row["colour"] == "" and row["hue"] == ""
            continue
        entry = Path(path)
        if entry.is_dir():
            held = file_bytes_by_category(entry)
            expected = held.most_common(1)[0][0] if held else NO_FILES  # no ties here
        else:
            expected = category_of(extension_of(entry.name))
        assert row["colour"] == expected, path
        assert row["hue"] == CATEGORY_COLORS[expected], path
    assert nodes.loc[str(typed_tree / "code" / "data"), "colour"] == "data"
    assert nodes.loc[str(typed_tree / "empty"), "colour"] == NO_FILES
    # by risk, nothing changes: no colour columns, the same nodes as before
    plain = views.treemap_of(str(typed_tree), store=store)
    assert "colour" not in plain and list(plain["id"]) == list(nodes.index)
    fig = figures.treemap_figure(nodes.reset_index())
    assert fig.layout.meta["id"] == figures.TREEMAP_IDS["type"]
    assert "movie" not in fig.layout.title.text and "video" in fig.layout.title.text  # the key
    trace = fig.data[0]
    at = list(trace.ids).index(str(typed_tree / "photos"))
    assert trace.marker.colors[at] == CATEGORY_COLORS["image"]
    photos = int(nodes["bytes"].to_dict()[str(typed_tree / "photos")])
    assert trace.customdata[at][4].startswith(human_bytes(photos) + " (")


def test_the_treemap_in_memory_colours_files_by_their_own_category(
    typed_tree: Path, store: Path
) -> None:
    frame = views.browse_frame(api.classify_snapshot(str(typed_tree), store=store))
    nodes = views.treemap_nodes(frame, str(typed_tree), colour_by="type").set_index("id")
    assert nodes.loc[str(typed_tree / "movie.mkv"), "colour"] == "video"
    assert nodes.loc[str(typed_tree / "photos" / "a.jpg"), "colour"] == "image"
    assert nodes.loc[str(typed_tree / "photos"), "colour"] == NO_FILES  # no holders given
    holders = views.treemap_holders(str(typed_tree), store=store, colour_by="type")
    given = views.treemap_nodes(frame, str(typed_tree), colour_by="type", holders=holders)
    queried = views.treemap_of(str(typed_tree), store=store, colour_by="type")
    assert given.to_dict("records") == queried.to_dict("records")
    with pytest.raises(ValueError, match="colour_by"):
        views.treemap_nodes(frame, str(typed_tree), colour_by="size")  # type: ignore[arg-type]


def test_the_treemap_by_owner_colours_boxes_by_who_holds_most_bytes(
    tmp_path: Path, store: Path
) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving files to other owners needs root")
    root = tmp_path / "shared"
    big, small = 61_001, 61_002  # ids no account has: shown as ``uid N``
    for path, size, uid in [
        (root / "mostly-big" / "a.bin", 50_000, big),
        (root / "mostly-big" / "b.bin", 20_000, small),
        (root / "mostly-small" / "c.bin", 30_000, small),
        (root / "mostly-small" / "d.bin", 1_000, big),
        (root / "loose.bin", 5_000, small),
    ]:
        write(path, size)
        os.chown(path, uid, uid)
    for directory in ("mostly-big", "mostly-small"):
        os.chown(root / directory, big if directory == "mostly-big" else small, 0)
    api.scan_root(root, store=store)
    nodes = views.treemap_of(str(root), store=store, colour_by="owner").set_index("id")

    def holder(directory: Path) -> int:
        held: Counter[int] = Counter({directory.lstat().st_uid: directory.lstat().st_size})
        for entry in directory.rglob("*"):
            held[entry.lstat().st_uid] += entry.lstat().st_size
        return held.most_common(1)[0][0]

    for name in ("mostly-big", "mostly-small"):
        assert nodes.loc[str(root / name), "colour"] == f"uid {holder(root / name)}"
    assert nodes.loc[str(root / "loose.bin"), "colour"] == f"uid {small}"
    # owners take the palette in order of the bytes they colour among the children
    by_owner = nodes[nodes["parent"] == str(root)].groupby("colour")["bytes"].sum()
    first = by_owner.sort_values(ascending=False).index[0]
    assert set(nodes.loc[nodes["colour"] == first, "hue"]) == {OWNER_COLORS[0]}
    fig = figures.treemap_figure(nodes.reset_index())
    assert fig.layout.meta["id"] == figures.TREEMAP_IDS["owner"]


def test_the_owner_chart_draws_what_by_owner_counts_in_binary_units(
    typed_tree: Path, store: Path
) -> None:
    owners = views.by_owner(str(typed_tree), store=store)
    fig = figures.owners_figure(owners)
    held = fig.data[0]
    assert list(held.y)[::-1] == list(owners["owner"])  # the largest on top
    assert list(held.x)[::-1] == list(owners["bytes"])
    freed = {t.name: list(t.x)[::-1] for t in fig.data[1:]}
    for level, name in (("caution", "reclaimable: safe + caution"), ("safe", "reclaimable: safe")):
        if owners[f"reclaimable_{level}"].any():
            assert freed[name] == list(owners[f"reclaimable_{level}"])
        else:
            assert name not in freed
    assert human_bytes(int(owners["bytes"].iloc[0])) in held.customdata[-1]
    ticks = fig.layout.xaxis.ticktext
    assert ticks[0] == "0" and all(t.endswith("KiB") for t in ticks[1:])
    shown = views.owners_frame(owners)
    assert list(shown["owner"]) == list(owners["owner"])
    assert list(shown["size"]) == [human_bytes(int(b)) for b in owners["bytes"]]
    redacted = views.owners_frame(owners, redact=True)
    assert list(redacted.columns) == ["owners", "size", "files"]
    assert int(redacted["owners"].iloc[0]) == len(owners)
    assert views.owners_line(owners) == f"{len(owners)} owner" + ("s" if len(owners) > 1 else "")


def test_the_type_mix_adds_up_to_the_files_bytes(typed_tree: Path, store: Path) -> None:
    on_disk = file_bytes_by_category(typed_tree)
    categories = views.by_type(str(typed_tree), store=store, by="category")
    bars = figures.type_mix_figure(categories).data[0]
    assert dict(zip(bars.y, bars.x, strict=True)) == {c: b for c, b in on_disk.items() if b}
    assert list(bars.marker.color) == [CATEGORY_COLORS[c] for c in bars.y]
    extensions = views.by_type(str(typed_tree), store=store, by="extension")
    sun = figures.type_mix_figure(extensions, per_category=1).data[0]
    values = dict(zip(sun.ids, sun.values, strict=True))
    for category, size in on_disk.items():
        assert values[category] == size
        inside = [v for i, v in values.items() if i.startswith(f"{category}/")]
        assert sum(inside) == size and len(inside) <= 2  # one named, the rest one slice
    assert values["image/(more)"] == 30_000
    assert "largest" not in views.types_frame(categories, redact=True)
    assert views.types_frame(categories)["largest"].iloc[0] == str(typed_tree / "movie.mkv")


def test_the_age_chart_shows_every_bucket_in_order(typed_tree: Path, store: Path) -> None:
    age = views.age_histogram(str(typed_tree), store=store)
    bars = figures.age_figure(age).data[0]
    assert list(bars.x) == list(AGE_BUCKETS)
    assert list(bars.y) == list(age["bytes"])
    old = list(bars.x).index("3 years or more")
    assert bars.customdata[old] == f"{human_bytes(20_000)} in 1 file"
    stacked = figures.age_figure(views.age_histogram(str(typed_tree), store=store, by="category"))
    assert {t.name for t in stacked.data} == set(file_bytes_by_category(typed_tree))
    assert stacked.layout.barmode == "stack"


def test_the_age_chart_draws_every_byte_once_when_a_key_is_called_other(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "named"
    # nine extensions, the largest literally "other"; two whose text a hover could misread
    sizes = {"other": 90_000, "%{y}": 80_000, "<b>": 70_000, "txt": 60_000, "csv": 50_000}
    sizes |= {"json": 40_000, "log": 30_000, "md": 20_000, "ini": 10_000}
    for extension, size in sizes.items():
        write(root / f"f.{extension}", size)
        write(root / "more" / f"g.{extension}", size // 10)
    api.scan_root(root, store=store)
    age = views.age_histogram(str(root), store=store, by="extension")
    fig = figures.age_figure(age, top=6)
    on_disk = Counter[str]()
    for folder, _, names in os.walk(root):
        for name in names:
            on_disk[extension_of(name)] += (Path(folder) / name).lstat().st_size
    drawn = [sum(int(v) for v in trace.y) for trace in fig.data]
    assert sum(drawn) == int(age["bytes"].sum()) == sum(on_disk.values())
    names = [trace.name for trace in fig.data]
    assert len(names) == len(set(names)) == 7  # six keys and one for the rest
    assert names[-1] == f"({len(on_disk) - 6} more)"
    by_name = dict(zip(names, drawn, strict=True))
    assert by_name["other"] == on_disk["other"]  # the real key, drawn once
    assert by_name[names[-1]] == sum(sorted(on_disk.values())[: len(on_disk) - 6])
    assert by_name["&lt;b&gt;"] == on_disk["<b>"]  # shown as text, not as bold
    for trace in fig.data:
        assert "%{y}" not in trace.hovertemplate and "<b>" not in trace.hovertemplate
    shown = {row[0] for trace in fig.data for row in trace.customdata}
    assert {"&#37;{y}", "&lt;b&gt;", "other"} <= shown  # drawn as "%{y}", never expanded


def test_with_nothing_to_draw_a_chart_is_a_sentence_without_axes(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "bare"
    (root / "only-dirs" / "inside").mkdir(parents=True)
    api.scan_root(root, store=store)
    types = views.by_type(str(root), store=store, by="category")
    age = views.age_histogram(str(root), store=store)
    owners = views.by_owner(str(root), store=store).iloc[0:0]
    for fig in (
        figures.type_mix_figure(types),
        figures.age_figure(age),
        figures.owners_figure(owners),
        figures.type_mix_figure(pd.DataFrame(columns=["extension", "bytes"])),
    ):
        assert len(fig.data) == 0
        assert fig.layout.xaxis.visible is False and fig.layout.yaxis.visible is False
        assert "No " in fig.layout.annotations[0].text


def test_byte_ticks_are_round_binary_units() -> None:
    ticks = figures.byte_ticks(5 * 1024**3)
    assert ticks["ticktext"][:3] == ["0", "1 GiB", "2 GiB"]
    assert ticks["tickvals"][1] == 1024**3
    assert figures.byte_ticks(0) == {}
    assert figures.byte_ticks(700)["ticktext"][-1].endswith(" B")
