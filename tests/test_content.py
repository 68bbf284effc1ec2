"""What a directory holds, by risk: the split the views colour directories by.

Held on random real trees to a small reference written here (every entry at or under the
directory, its own bytes at its own risk, a hard-linked inode once at its first name), and at
the root to the summary's risk mix.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from hygiene_nb import api
from hygiene_nb.classify.content import (
    CONTENT_COLUMNS,
    MIXED,
    RISK_ORDER,
    UNIFORM_SHARE,
    content_risk_of,
)
from hygiene_nb.formatting import percent
from hygiene_nb.notebook import figures
from hygiene_nb.query import views
from hygiene_nb.query.frames import browse_frame, treemap_nodes
from hygiene_nb.scan.snapshot import entry_paths
from tests.helpers import (
    TREE_ENTRIES,
    TREE_EXCLUDES,
    TreeEntry,
    build_tree,
    du_bytes,
    write,
)


def reference_split(rows: list[dict[str, object]]) -> dict[str, dict[str, int]]:
    """Per directory path: bytes by risk of everything at or under it (an inode once).

    Excluded entries are recorded and counted nowhere: not here either.
    """
    seen: set[tuple[object, object]] = set()
    counted = []
    for row in rows:  # snapshot order: an inode counts at its first name
        if row["excluded"]:
            continue
        linked = row["kind"] != "dir" and int(row["nlink"] or 1) > 1  # type: ignore[call-overload]
        if linked and (row["dev"], row["inode"]) in seen:
            continue
        if linked:
            seen.add((row["dev"], row["inode"]))
        counted.append(row)
    out = {}
    for d in (r for r in rows if r["kind"] == "dir"):
        top = str(d["path"])
        split = dict.fromkeys(RISK_ORDER, 0)
        for r in counted:
            p = str(r["path"])
            if p == top or p.startswith(top.rstrip("/") + "/"):
                split[str(r["risk"])] += int(r["size"])  # type: ignore[call-overload]
        out[top] = split
    return out


def expected_word(split: dict[str, int], own: str) -> str:
    total = sum(split.values())
    if total == 0:
        return own
    top = max(RISK_ORDER, key=lambda r: (split[r], -RISK_ORDER.index(r)))
    rest_strong = any(split[r] > 0 for r in ("high", "personal") if r != top)
    return top if split[top] >= UNIFORM_SHARE * total and not rest_strong else MIXED


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(entries=TREE_ENTRIES, excludes=TREE_EXCLUDES)
def test_each_directory_holds_the_split_of_what_is_inside_it(
    tmp_path_factory: pytest.TempPathFactory, entries: list[TreeEntry], excludes: list[str]
) -> None:
    base = tmp_path_factory.mktemp("content")
    root, store = base / "tree", base / "store"
    build_tree(root, entries)
    api.scan_root(root, store=store, excludes=excludes)
    table = api.classify_snapshot(str(root), store=store)
    table = table.append_column("path", entry_paths(table))
    rows = table.to_pylist()
    want = reference_split(rows)
    for row in rows:
        if row["kind"] != "dir":
            assert row["content_risk"] == row["risk"]
            assert all(row[c] is None for c in CONTENT_COLUMNS)
            continue
        got = {r: row[f"content_{r}"] for r in RISK_ORDER}
        assert got == want[row["path"]], row["path"]
        assert row["content_risk"] == expected_word(got, row["risk"]), row["path"]
    summary = api.summarize(str(root), store=store, as_of_scan=True)
    (top,) = [r for r in rows if r["depth"] == 0]
    assert {r: top[f"content_{r}"] for r in RISK_ORDER} == {
        r: summary.risk[r].bytes for r in RISK_ORDER
    }


def web_project(root: Path) -> Path:
    """A project: installed dependencies (300 kB) beside a person's document (40 kB)."""
    write(root / "web" / "package.json", 20)
    write(root / "web" / "package-lock.json", 20)
    write(root / "web" / "node_modules" / "pkg" / "index.js", 300_000)
    write(root / "web" / "notes.pdf", 40_000)  # personal
    return root


def test_a_speck_of_caution_leaves_dependencies_safe_and_a_document_makes_a_project_mixed(
    tmp_path: Path, store: Path
) -> None:
    root = web_project(tmp_path / "r")
    write(root / "web" / "node_modules" / "pkg" / "README.log", 100)  # caution, a speck
    api.scan_root(root, store=store)
    table = api.classify_snapshot(str(root), store=store)
    table = table.append_column("path", entry_paths(table))
    paths, words = table.column("path").to_pylist(), table.column("content_risk").to_pylist()
    word = dict(zip(paths, words, strict=True))
    assert word[str(root / "web" / "node_modules")] == "safe"  # 100 bytes of caution in 300 kB
    assert word[str(root / "web")] == MIXED  # a person's document beside it


def test_the_content_word_by_its_definition() -> None:
    order = {r: i for i, r in enumerate(RISK_ORDER)}

    def word(**split: int) -> str:
        row = np.array([[split.get(r, 0) for r in RISK_ORDER]], dtype=np.int64)
        got = content_risk_of(row, np.array([order["unknown"]]))
        return [*RISK_ORDER, MIXED][int(got[0])]

    assert word() == "unknown"  # nothing inside: its own risk
    # at the share and just under it, in whole bytes out of a total the share divides
    total = 10_000
    at = int(UNIFORM_SHARE * total)
    assert at == UNIFORM_SHARE * total
    assert word(safe=at, caution=total - at) == "safe"
    assert word(safe=at - 1, caution=total - at + 1) == MIXED
    assert word(safe=at - 1, caution=1, unknown=total - at) == MIXED  # the rest, whatever it is
    assert word(caution=at, safe=total - at) == "caution"  # any risk can hold the share
    assert word(unknown=at, caution=total - at) == "unknown"
    assert word(safe=10_000, high=1) == MIXED  # a key is never a speck
    assert word(safe=10_000, personal=1) == MIXED
    assert word(safe=at, caution=total - at - 1, personal=1) == MIXED
    assert word(high=10_000, safe=1) == "high"
    assert word(personal=at, safe=total - at) == "personal"  # the rest is not strong
    assert word(personal=at, high=total - at) == MIXED


def test_the_docs_state_the_share_the_code_uses() -> None:
    docs = Path(__file__).resolve().parents[1] / "docs"
    share = f"at least {UNIFORM_SHARE:.0%}".replace("%", " %")
    for page in ("format.md", "notebooks.md", "rules.md"):
        text = " ".join((docs / page).read_text().split())  # lines joined
        assert share in text, page
        assert "however few" in text, page  # and the strong risks' exception


def test_a_twentieth_of_logs_leaves_compiled_files_safe_and_a_third_makes_them_mixed(
    tmp_path: Path, store: Path
) -> None:
    """On a real tree: the word follows the share of the bytes the scan counted (du's)."""
    root = tmp_path / "r"
    for name, logs in (("twentieth", 5_000), ("third", 33_000)):
        write(root / name / "module.pyc", 100_000 - logs)  # safe
        write(root / name / "run.log", logs)  # caution
    api.scan_root(root, store=store)
    table = api.classify_snapshot(str(root), store=store)
    table = table.append_column("path", entry_paths(table))
    rows = {r["path"]: r for r in table.to_pylist()}
    words = {}
    for name in ("twentieth", "third"):
        row = rows[str(root / name)]
        split = {r: row[f"content_{r}"] for r in RISK_ORDER}
        assert sum(split.values()) == du_bytes(root / name, apparent=True)
        assert split["caution"] == (root / name / "run.log").stat().st_size
        assert split["high"] == split["personal"] == 0
        share = split["safe"] / sum(split.values())
        words[name] = (row["content_risk"], share >= UNIFORM_SHARE)
    assert words == {"twentieth": ("safe", True), "third": (MIXED, False)}


def test_the_treemap_colours_a_directory_by_what_it_holds_in_both_paths(
    tmp_path: Path, store: Path
) -> None:
    """The report's query path and the widget's in-memory path draw the same colours."""
    root = web_project(tmp_path / "r")
    write(root / ".ssh" / "id_ed25519", 400)
    api.scan_root(root, store=store)
    queried = views.treemap_of(str(root), store=store)
    frame = browse_frame(api.classify_snapshot(str(root), store=store))
    in_memory = treemap_nodes(frame, str(root))
    columns = ["id", "risk", "split", "verdict"]
    assert queried[columns].to_dict("records") == in_memory[columns].to_dict("records")
    node = {r["id"]: r for r in queried.to_dict("records")}
    web, ssh = node[str(root / "web")], node[str(root / ".ssh")]
    own = frame.set_index("path").loc[str(root / "web")]
    assert web["risk"] == MIXED and web["verdict"] == f"{own['risk']} ({own['rule']})"
    shares = dict(
        part.rsplit(" ", 2)[0:2] for part in web["split"].removeprefix("mixed: ").split(" · ")
    )
    held = {r: int(str(own[f"content_{r}"])) for r in RISK_ORDER}
    held = {r: b for r, b in held.items() if b > 0}
    assert list(shares) == sorted(held, key=lambda r: -held[r])  # largest first
    assert list(shares)[:2] == ["safe", "personal"]
    assert web["split"].startswith("mixed: safe ")
    assert ssh["risk"] == "high" and ssh["split"] == f"high {percent(1.0)}"
    trace = figures.treemap_trace(queried)
    colours = dict(zip(trace.ids, trace.marker.colors, strict=True))
    assert colours[str(root / "web")] == figures.RISK_COLORS[MIXED]
    assert "holds: %{customdata[2]}" in trace.hovertemplate


def test_the_summary_ranks_a_directory_by_what_it_holds_and_says_its_own_verdict(
    tmp_path: Path, store: Path
) -> None:
    root = web_project(tmp_path / "r")
    api.scan_root(root, store=store)
    summary = api.summarize(str(root), store=store, top=3)
    (web,) = [e for e in summary.children if e.path == str(root / "web")]
    assert (web.holds, web.risk, web.rule) == (MIXED, "high", "contains-protected")
    modules = [e for e in summary.largest if e.path.endswith("/node_modules")]
    assert [(e.holds, e.risk) for e in modules] == [("safe", "safe")]
    assert all(e.holds is None for e in summary.largest_files)
    table = views.entries_frame(summary.children).set_index("path")  # the report's table
    assert tuple(table.loc[str(root / "web"), ["holds", "risk"]]) == (MIXED, "high")
    shown = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "summary", str(root), "--store", str(store)],
        capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    ending = f"{root / 'web'}  [as a whole: high, contains-protected]"
    (line,) = [x for x in shown.splitlines() if x.rstrip().endswith(ending)]
    assert " mixed " in line
