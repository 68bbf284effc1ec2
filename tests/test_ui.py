"""The annotation widget, driven the way the front-end drives it, without a browser.

Buttons are clicked with ``Button.click()``, controls changed by assigning their traits, and a
treemap click is the exact message plotly's FigureWidget front-end sends (a private API: this
test is the canary for plotly upgrades).
"""

from __future__ import annotations

import functools
import json
import os
import re
import time
from html import escape
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hygiene_nb import api
from hygiene_nb.ledger import Ledger
from hygiene_nb.ledger.annotations import AnnotationLedger
from hygiene_nb.notebook.demo import DemoStore, make_demo_store
from hygiene_nb.notebook.figures import (
    BORDER_WIDTH,
    DECISION_BORDER,
    RISK_COLORS,
    treemap_key,
    treemap_key_entries,
    treemap_trace,
)
from hygiene_nb.notebook.ui import Annotator
from hygiene_nb.plan.document import select_candidates, selection_summary
from hygiene_nb.plan.schema import EXCLUSIONS
from hygiene_nb.query import views
from hygiene_nb.render import human_bytes
from hygiene_nb.scan.digests import entry_digests
from hygiene_nb.scan.index import find_scan
from hygiene_nb.scan.snapshot import entry_paths
from hygiene_nb.scan.walk.spec import WalkOptions
from hygiene_nb.store import Store
from tests.helpers import du_bytes, write


@pytest.fixture
def demo(tmp_path: Path) -> DemoStore:
    return make_demo_store(tmp_path / "tree", tmp_path / "store", scans=1)


def click_treemap(panel: Annotator, node_id: str) -> None:
    ids = list(panel.fig.data[0].ids)
    panel.fig._js2py_pointsCallback = {
        "event_type": "plotly_click",
        "points": {
            "trace_indexes": [0],
            "point_indexes": [ids.index(node_id)],
            "xs": [None],
            "ys": [None],
        },
        "device_state": {
            "ctrl": False,
            "alt": False,
            "shift": False,
            "meta": False,
            "button": 0,
            "buttons": 1,
        },
        "selector": None,
    }


def row(panel: Annotator, name: str) -> Any:
    return next(r for r in panel.rows if Path(r.path).name == name)


def ledger_rows(demo: DemoStore) -> dict[str, tuple[str | None, str | None, str]]:
    with Ledger.open(Store(demo.store)) as ledger:
        return {a.path: (a.decision, a.note, a.by) for a in ledger.annotations()}


def test_a_row_decision_is_written_to_the_ledger_at_once(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    row(panel, ".cache").buttons["delete"].click()
    cache = str(demo.root / ".cache")
    assert ledger_rows(demo)[cache] == ("delete", None, "human")
    assert panel.status.value == "delete: 1 entry"
    assert row(panel, ".cache").buttons["delete"].button_style == "danger"
    row(panel, ".cache").buttons["clear"].click()
    assert ledger_rows(demo).get(cache, (None,))[0] is None
    assert cache not in panel.decisions


def test_a_note_is_saved_without_touching_the_decision(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    row(panel, "Downloads").buttons["unsure"].click()
    row(panel, "Downloads").note.value = "ask before the audit"
    assert ledger_rows(demo)[str(demo.root / "Downloads")] == (
        "unsure", "ask before the audit", "human"
    )  # fmt: skip


def test_decisions_survive_a_new_panel(demo: DemoStore) -> None:
    first = Annotator(str(demo.root), store=demo.store)
    row(first, "Pictures").buttons["keep"].click()
    row(first, "Pictures").note.value = "family photos"
    again = Annotator(str(demo.root), store=demo.store)
    assert again.decisions[str(demo.root / "Pictures")] == "keep"
    assert row(again, "Pictures").note.value == "family photos"
    assert row(again, "Pictures").buttons["keep"].button_style == "success"


def decisions_at(demo: DemoStore, paths: list[str]) -> dict[str, str | None]:
    return {a.path: a.decision for a in api.annotations_at(paths, store=demo.store)}


def test_select_all_then_a_batch_on_entries_not_all_safe_asks_first(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    panel.open(str(demo.root / "projects"))
    listed = sorted(panel.listed()["path"])
    panel.select_all_box.value = True
    assert all(r.check.value for r in panel.rows)
    assert panel.confirm_box.layout.display == "none"
    panel.batch_buttons["delete"].click()
    # nothing is written yet: the confirmation lists the risk mix (entries and bytes per risk)
    assert ledger_rows(demo) == {}
    assert panel.confirm_box.layout.display != "none"
    shown = panel.confirm_text.value
    assert f"mark delete {len(listed)} listed entries?" in shown
    classified = api.classify_snapshot(str(demo.root), store=demo.store).to_pylist()
    mine = [r for r in classified if r["parent"] == str(demo.root / "projects")]
    for risk in {r["risk"] for r in mine}:
        of = [r for r in mine if r["risk"] == risk]
        total = sum(du_bytes(Path(r["parent"]) / r["name"], apparent=True) for r in of)
        entries = f"{len(of)} {'entry' if len(of) == 1 else 'entries'}"
        assert f">{risk}</span> {entries}, " in shown and f"({total:,} bytes)" in shown
    assert "not <i>safe</i>" in shown
    panel.cancel_button.click()  # cancel: the ledger stays as it was
    assert ledger_rows(demo) == {} and panel.confirm_box.layout.display == "none"
    assert panel.status.value.startswith("batch cancelled: nothing written")
    assert all(r.check.value for r in panel.rows)  # the selection stays, to try again
    panel.batch_buttons["unsure"].click()
    assert ledger_rows(demo) == {}
    panel.confirm_button.click()
    rows = ledger_rows(demo)
    assert {p for p, (d, _, _) in rows.items() if d == "unsure"} == set(listed)
    assert panel.status.value == f"unsure: {len(listed)} listed entries"
    assert not panel.selected and not panel.select_all_box.value
    assert panel.confirm_box.layout.display == "none"


def test_a_batch_on_safe_entries_only_is_written_at_once(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    panel.open(str(demo.root / ".cache"))
    assert set(panel.listed()["risk"]) == {"safe"}
    panel.select_all_box.value = True
    panel.batch_buttons["delete"].click()
    assert panel.confirm_box.layout.display == "none" and panel.pending is None
    listed = [r.path for r in panel.rows]
    assert decisions_at(demo, listed) == dict.fromkeys(listed, "delete")


def test_a_batch_decision_with_nothing_selected_writes_nothing(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    panel.batch_buttons["delete"].click()
    assert ledger_rows(demo) == {}
    assert panel.status.value == "nothing selected"


def test_filters_and_sorting_change_the_listing(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    sizes = [b for b in panel.listed()["bytes"]]
    assert sizes == sorted(sizes, reverse=True)
    panel.sort.value = "name"
    names = list(panel.listed()["name"])
    assert names == sorted(names)
    panel.min_size.value = "≥ 1 MB"
    assert all(b >= 10**6 for b in panel.listed()["bytes"])
    assert [Path(r.path).name for r in panel.rows] == list(panel.listed()["name"])
    panel.min_size.value = "any size"
    listed = panel.listed().set_index("path")
    risk = listed.loc[str(demo.root / "Documents"), "risk"]
    panel.risk.value = risk
    assert set(panel.listed()["risk"]) == {risk}
    panel.risk.value = "all"
    panel.min_age.value = "untouched 2 years"
    old = panel.listed()
    ages = [panel.age_days(m) for m in old["latest_mtime_ns"]]
    assert len(old) and all(a is not None and a >= 730 for a in ages)


def test_a_treemap_click_drills_in_and_a_click_on_the_centre_goes_up(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    projects = str(demo.root / "projects")
    click_treemap(panel, projects)
    assert panel.cwd == projects
    assert {Path(r.path).name for r in panel.rows} == {"analysis", "webapp", "orphan"}
    assert panel.fig.data[0].ids[0] == projects
    assert [b.description for b in panel.breadcrumb.children[1:]] == [str(demo.root), "projects"]
    click_treemap(panel, projects)  # the view's own root: back up
    assert panel.cwd == str(demo.root)


def test_the_breadcrumb_and_up_never_leave_the_root(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    panel.open(str(demo.root / "projects" / "webapp"))
    panel.breadcrumb.children[2].click()  # "projects"
    assert panel.cwd == str(demo.root / "projects")
    panel.up_button.click()
    panel.up_button.click()
    assert panel.cwd == str(demo.root)
    panel.open(str(demo.root / ".bashrc"))
    assert panel.cwd == str(demo.root) and "not a directory" in panel.status.value


def test_the_treemap_border_shows_the_decision(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    row(panel, "Pictures").buttons["keep"].click()
    trace = panel.fig.data[0]
    at = list(trace.ids).index(str(demo.root / "Pictures"))
    assert trace.marker.line.color[at] == "#00c853"
    assert trace.marker.line.width == BORDER_WIDTH  # one width: plotly.js zooms mixed ones to NaN
    # no path bar: plotly.js drew it from per-box border widths as NaN while zooming into a
    # clicked box (console errors); the breadcrumb does its work
    assert trace.pathbar.visible is False
    # the key names the borders in use, and no other
    assert [e[1:] for e in key_entries(panel.legend.value, "border")] == [
        (DECISION_BORDER["keep"][0], "keep")
    ]
    row(panel, ".cache").buttons["delete"].click()
    assert [e[1:] for e in key_entries(panel.legend.value, "border")] == [
        (DECISION_BORDER[d][0], d) for d in ("delete", "keep")
    ]


def key_entries(key: str, part: str | None = None) -> list[tuple[str, str, str]]:
    """The entries a key's HTML shows: ``(part, colour, name)``, read back from its squares."""
    found = re.findall(r"<span style='color:(#[0-9a-f]{6})'>([\u25a0\u25a1])</span> ([^<\s]+)", key)
    entries = [("fill" if sq == "\u25a0" else "border", c, name) for c, sq, name in found]
    return [e for e in entries if part is None or e[0] == part]


def test_the_widget_shows_the_reports_treemap_key_for_the_same_boxes(demo: DemoStore) -> None:
    """One key for both: the widget's reads what the report's treemap key reads, box for box."""
    root = str(demo.root)
    panel = Annotator(root, store=demo.store)
    row(panel, "Pictures").buttons["keep"].click()
    row(panel, ".cache").buttons["unsure"].click()
    for where in (root, str(demo.root / "projects")):
        panel.open(where)
        queried = views.treemap_of(root, store=demo.store, under=where)  # the report's nodes
        level = queried[queried["parent"].isin(["", where])]  # the widget draws one level
        assert set(level["id"]) == set(panel.tree_nodes()["id"])
        entries = treemap_key_entries(level)
        shown = key_entries(panel.legend.value)
        assert shown == entries == treemap_key_entries(panel.tree_nodes())
        assert treemap_key(level) in panel.legend.value
        boxes = level[(level["parent"] != "") & ~level["id"].str.endswith("/(other)")]
        risks = set(boxes["risk"])
        assert [w for p, _c, w in shown if p == "fill"] == [r for r in RISK_COLORS if r in risks]
        assert all(c == RISK_COLORS[w] for p, c, w in shown if p == "fill")
    panel.open(root)
    shown = key_entries(panel.legend.value)
    assert ("fill", RISK_COLORS["mixed"], "mixed") in shown  # projects/: code beside results
    assert [w for p, _c, w in shown if p == "border"] == ["keep", "unsure"]


def test_the_plan_summary_and_export_match_the_plan_file(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    panel.open(str(demo.root / "projects" / "webapp"))
    row(panel, "node_modules").buttons["delete"].click()
    row(panel, "dist").buttons["delete"].click()
    summary = panel.plan_summary()
    assert summary["delete_count"] == 2 and summary["candidates"] == 2
    assert f"{summary['reclaim_bytes']:,} bytes" in panel.summary.value
    assert "2 candidates would reclaim" in panel.summary.value
    panel.export_button.click()
    html = panel.export_out.value
    plans = list((demo.store / "plans").glob("*.json"))
    assert len(plans) == 1 and str(plans[0]) in html
    issued = api.make_plan(demo.root, store=demo.store)
    assert issued.reclaim_bytes == summary["reclaim_bytes"]
    assert f"<b>2 candidates</b>, <b>{human_bytes(issued.reclaim_bytes)}</b> to reclaim" in html
    assert "Left out" not in html  # nothing was
    # two labelled commands, dry run first, each on one line with its copy button
    plan = json.loads(plans[0].read_text())
    store = demo.store
    dry = f"hygiene-nb execute {plans[0]} --store {store}"
    execute = (
        f"{dry} --execute --confirm-plan-id {plan['plan_id']} --plan-digest "
        f"{plan['plan_digest']} --acknowledge-risk quarantine"
    )
    commands = re.findall(
        r"<b>([^<]*)</b>[^<]*<span[^>]*>[^<]*</span> <button[^>]*>copy</button>"
        r"</div><pre style='white-space:pre;[^']*'>([^<]*)</pre>",
        html,
    )
    assert commands == [("1. dry run", dry), ("2. execute", execute)]
    assert html.count("navigator.clipboard.writeText") == 2
    assert (demo.root / "projects" / "webapp" / "node_modules").is_dir()  # nothing moved


def test_export_shows_what_the_plan_left_out(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    (demo.root / "Documents" / "notes.txt").write_text("changed since the scan")
    row(panel, "Documents").buttons["delete"].click()
    assert "⚠" not in row(panel, "Documents").info.value  # only the disk knows: at export
    result = panel.export_plan()
    assert result is not None and result.candidates == 0 and result.excluded == 1
    html = panel.export_out.value
    (code,) = {e["code"] for e in result.plan["excluded"]}
    assert f"<b>1 entry: {code}</b> · {escape(EXCLUSIONS[code])}" in html
    assert "Nothing can be planned</b>: every delete decision was left out" in html
    assert "hygiene-nb execute" not in html and "copy</button>" not in html


def test_export_with_no_delete_decision_says_so_and_shows_no_command(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    row(panel, "Pictures").buttons["keep"].click()
    panel.export_button.click()
    html = panel.export_out.value
    assert "<b>0 candidates</b>" in html
    assert "Nothing can be planned</b>: no entry under the root is marked delete" in html
    assert "hygiene-nb execute" not in html


def test_a_protected_entry_marked_delete_says_why_on_its_row_at_once(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    ssh = str(demo.root / ".ssh")
    classified = api.classify_snapshot(str(demo.root), store=demo.store).to_pylist()
    (entry,) = [r for r in classified if r["parent"] == str(demo.root) and r["name"] == ".ssh"]
    assert entry["protected"]
    row(panel, ".cache").buttons["delete"].click()
    assert "⚠" not in row(panel, ".cache").info.value
    row(panel, ".ssh").buttons["delete"].click()
    shown = row(panel, ".ssh").info.value
    assert "⚠ protected</span>" in shown
    assert escape(EXCLUSIONS["protected"], quote=True) in shown  # the plan's words, on hover
    assert panel.status.value.startswith("delete: 1 entry · not a plan candidate: ")
    assert EXCLUSIONS["protected"] in panel.status.value
    assert "1 left out" in panel.summary.value
    assert decisions_at(demo, [ssh]) == {ssh: "delete"}  # decided all the same
    panel.export_button.click()
    html = panel.export_out.value
    assert "<b>1 candidate</b>" in html
    assert f"<b>1 entry: protected</b> · {escape(EXCLUSIONS['protected'])}" in html
    assert f"<code>{ssh}</code>" in html
    assert "1. dry run" in html and "2. execute" in html
    row(panel, ".ssh").buttons["clear"].click()
    assert "⚠" not in row(panel, ".ssh").info.value
    # the plan shown is the one before that click: no command stays on screen for it
    assert panel.export_out.value.startswith("Decisions changed since the last export")


def test_a_keep_inside_a_directory_marked_delete_is_shown_on_both_sides(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    row(panel, "Downloads").buttons["delete"].click()
    assert "⚠" not in row(panel, "Downloads").info.value
    row(panel, "Downloads").name.click()
    inside = panel.rows[0]
    inside.buttons["keep"].click()
    downloads = str(demo.root / "Downloads")
    assert f" · the delete of {downloads} is no plan candidate now: " in panel.status.value
    assert f"{inside.path} is marked keep" in panel.status.value
    panel.up_button.click()
    shown = row(panel, "Downloads").info.value
    assert "⚠ keep inside</span>" in shown
    assert escape(EXCLUSIONS["contains-kept-entry"], quote=True) in shown


def test_a_directory_the_scan_did_not_read_whole_says_so_on_its_row(tmp_path: Path) -> None:
    root, store = tmp_path / "r", tmp_path / "store"
    write(root / "build" / "out.o", 100)
    write(root / "build" / "skipped" / "big.bin", 1000)
    api.scan_root(root, store=store, excludes=["skipped"])
    panel = Annotator(str(root), store=store)
    (build,) = panel.rows
    build.buttons["delete"].click()
    assert "⚠ incomplete scan</span>" in build.info.value
    assert EXCLUSIONS["incomplete-scan"][1:] in panel.status.value  # its first letter is upper
    assert panel.plan_summary()["candidates"] == 0


def test_a_row_reads_as_a_person_would_say_it(tmp_path: Path) -> None:
    """Ages in days, months or years; "1 file"; the rule and claim on the badge's hover."""
    root, store = tmp_path / "r", tmp_path / "store"
    now = time.time()
    day = 86_400
    for name, files, age in (
        ("days", 1, 3.5),
        ("months", 2, 11.5 * 30.44),
        ("years", 1, 2.42 * 365.25),
    ):
        for i in range(files):
            path = write(root / name / f"f{i}.txt", 10)
            os.utime(path, (now - age * day, now - age * day))
        os.utime(root / name, (now - age * day, now - age * day))  # its newest entry too
    api.scan_root(root, store=store)
    panel = Annotator(str(root), store=store)
    info = {Path(r.path).name: r.info.value for r in panel.rows}
    assert ">3 days</span>" in info["days"] and ">1 file</span>" in info["days"]
    assert ">11 months</span>" in info["months"] and ">2 files</span>" in info["months"]
    assert ">2.4 years</span>" in info["years"]
    for r in panel.rows:
        assert r.entry.rule and f"rule: {r.entry.rule}" in r.info.value
        assert all(b.description == "" and b.icon and b.tooltip for b in r.buttons.values())
        assert r.buttons["delete"].tooltip.startswith("delete")


def test_export_shows_a_refusal_with_its_code_and_writes_no_plan(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    row(panel, ".cache").buttons["delete"].click()
    demo.root.rename(demo.tree / "home-moved")
    demo.root.mkdir()  # another directory at the scanned path
    assert panel.export_plan() is None
    assert "root-changed" in panel.export_out.value
    assert not list((demo.store / "plans").glob("*.json"))


def test_the_widget_suggests_a_tidy_place_for_scattered_logs(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    panel.open(str(demo.root / "projects" / "analysis"))
    assert panel.tidy.value == ""  # on demand only
    panel.tidy_toggle.value = True
    found = panel.tidy_suggestions()
    logs = {str(demo.root / "projects" / "analysis" / "results" / f"run-0{i}.log") for i in (1, 2)}
    assert logs <= set(found["path"])
    places = dict(zip(found["path"], found["suggested"], strict=True))
    home = str(demo.root / "projects" / "analysis" / "logs") + "/"
    assert all(places[log].startswith(home) for log in logs)
    assert "nothing is moved" in panel.tidy.value and "run-01.log" in panel.tidy.value
    row(panel, "results").buttons["delete"].click()
    assert not logs & set(panel.tidy_suggestions()["path"])  # going away: no tidy place


def test_a_decision_on_a_name_that_is_not_utf8_reaches_the_plan(tmp_path: Path) -> None:
    root, store = tmp_path / "r", tmp_path / "store"
    root.mkdir()
    with open(os.fsencode(root) + b"/caf\xe9.tmp", "wb") as handle:
        handle.write(b"x" * 10)
    api.scan_root(root, store=store)
    panel = Annotator(str(root), store=store)
    (only,) = panel.rows
    only.buttons["delete"].click()
    plan = api.make_plan(root, store=store)
    assert plan.candidates == 1 and plan.excluded == 0
    assert panel.decisions == {only.path: "delete"}


@pytest.fixture(scope="module")
def linked(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Nested directories and hard links across them, scanned once for the module."""
    base = tmp_path_factory.mktemp("linked")
    root = base / "r"
    write(root / "a" / "f1", 5000)
    os.link(root / "a" / "f1", root / "a" / "f1-again")
    write(root / "a" / "b" / "own", 40)
    os.link(root / "a" / "f1", root / "a" / "b" / "f1-nested")
    write(root / "d" / "e" / "g", 123)
    os.link(root / "a" / "f1", root / "d" / "e" / "f1-cousin")
    os.link(root / "d" / "e" / "g", root / "a" / "b" / "g-link")
    write(root / "d" / "h", 300)
    write(root / "cache" / "c.tmp", 2000)
    store = base / "store"
    api.scan_root(root, store=store)
    return root, store


def from_scratch(panel: Annotator, store: Path) -> dict[str, int]:
    """The plan summary by its definition, from the whole ledger and the whole snapshot."""
    with Ledger.open(Store(store)) as ledger:
        found = ledger.annotations(under=panel.root)
    selection = select_candidates(panel.table, found, root=panel.root)
    return selection_summary(selection, panel.table)


_LINKED = (
    "a", "a/f1", "a/f1-again", "a/b", "a/b/own", "a/b/f1-nested", "a/b/g-link", "d", "d/e",
    "d/e/g", "d/e/f1-cousin", "d/h", "cache", "cache/c.tmp",
)  # fmt: skip
_CLICKS = st.lists(
    st.tuples(
        st.sampled_from(_LINKED),
        st.sampled_from(["keep", "delete", "unsure", "clear", "elsewhere"]),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=25, deadline=None)
@given(clicks=_CLICKS)
def test_after_any_clicks_the_plan_summary_is_the_one_computed_from_scratch(
    linked: tuple[Path, Path], clicks: list[tuple[str, str]]
) -> None:
    """Clicks on rows (nested, hard-linked), and decisions written by another process."""
    root, store = linked
    with Ledger.open(Store(store)) as ledger:  # each example starts from an empty ledger
        left = [a.path_raw for a in ledger.annotations()]
        if left:
            ledger.annotate(left, decision=None, note=None)
    panel = Annotator(str(root), store=store, figure_widget=False)
    assert panel.plan_summary() == from_scratch(panel, store)
    for name, decision in clicks:
        path = root / name
        if decision == "elsewhere":  # another process decides: the widget catches up
            api.annotate([str(path)], store=store, decision="delete")
        else:
            panel.open(os.fsencode(path.parent))
            row(panel, path.name).buttons[decision].click()
            assert panel.status.value.startswith("cleared" if decision == "clear" else decision)
        expected = from_scratch(panel, store)
        if decision != "elsewhere":  # shown as it was clicked (another's: at the next redraw)
            assert f"({expected['reclaim_bytes']:,} bytes, each inode once)" in panel.summary.value
        assert panel.plan_summary() == expected


def test_a_click_reads_neither_the_whole_ledger_nor_the_whole_snapshot(
    linked: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, store = linked
    panel = Annotator(str(root), store=store)
    reads: list[str] = []
    whole_ledger = AnnotationLedger.annotations

    def read_ledger(self: AnnotationLedger, **kw: Any) -> Any:
        reads.append("ledger")
        return whole_ledger(self, **kw)

    def read_snapshot(*args: Any, **kw: Any) -> Any:
        reads.append("snapshot")
        return entry_digests(*args, **kw)

    monkeypatch.setattr(AnnotationLedger, "annotations", read_ledger)
    monkeypatch.setattr("hygiene_nb.api.decisions.entry_digests", read_snapshot)
    panel.open(os.fsencode(root / "d"))
    row(panel, "h").buttons["delete"].click()
    row(panel, "e").buttons["keep"].click()
    assert reads == []
    st = Store(store)
    h, e = os.fsencode(root / "d" / "h"), os.fsencode(root / "d" / "e")
    digests = {a.path_raw: a.digest for a in api.annotations_at([h, e], store=store)}
    assert digests == entry_digests(st, find_scan(st, scan_id=panel.info.scan_id), [h, e])
    api.annotate([str(root / "cache")], store=store, decision="delete")  # someone else
    reads.clear()
    summary = panel.plan_summary()
    assert reads == ["ledger"]  # read again once, because another connection wrote
    assert panel.plan_summary() == summary and reads == ["ledger"]
    assert summary == from_scratch(panel, store)


def test_a_decision_redraws_its_row_in_place_and_leaves_the_listing(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    before = list(panel.rows)
    boxes = panel.listing.children
    row(panel, "Downloads").buttons["delete"].click()
    assert panel.rows == before and panel.listing.children == boxes
    assert row(panel, "Downloads").buttons["delete"].button_style == "danger"
    assert all(
        r.buttons["delete"].button_style == ""
        for r in panel.rows
        if r.path != str(demo.root / "Downloads")
    )


def test_a_row_shown_again_acts_on_the_entry_it_shows_now(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    first = row(panel, "projects")
    first.note.value = "big"
    first.name.click()  # the same widgets now show the children of projects
    assert panel.cwd == str(demo.root / "projects")
    assert ledger_rows(demo) == {str(demo.root / "projects"): (None, "big", "human")}
    shown = panel.rows[0]
    assert shown.note.value == "" and not shown.check.value
    shown.note.value = "inside"
    shown.check.value = True
    shown.buttons["keep"].click()
    inside = shown.path
    assert ledger_rows(demo)[inside] == ("keep", "inside", "human")
    assert panel.selected == {shown.path_raw}
    panel.up_button.click()
    assert row(panel, "projects").note.value == "big"
    assert ledger_rows(demo) == {
        str(demo.root / "projects"): (None, "big", "human"),
        inside: ("keep", "inside", "human"),
    }  # showing rows again wrote nothing


def test_after_decisions_the_treemap_is_what_drawing_it_anew_gives(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    row(panel, "Pictures").buttons["keep"].click()
    row(panel, ".cache").buttons["delete"].click()
    row(panel, "Pictures").buttons["clear"].click()
    drawn = panel.fig.data[0].to_plotly_json()
    fresh = treemap_trace(panel.tree_nodes()).to_plotly_json()
    for prop in ("ids", "labels", "parents", "values", "customdata", "marker"):
        assert drawn[prop] == fresh[prop], prop
    at = list(drawn["ids"]).index(str(demo.root / ".cache"))
    assert drawn["marker"]["line"]["color"][at] == DECISION_BORDER["delete"][0]


def test_a_decision_outside_the_root_is_not_in_its_plan_summary(
    linked: tuple[Path, Path], tmp_path: Path
) -> None:
    root, store = linked
    panel = Annotator(str(root), store=store, figure_widget=False)
    before = panel.plan_summary()
    elsewhere = tmp_path / "elsewhere"
    assert panel.decide([str(elsewhere)], "keep")
    assert [a.decision for a in api.annotations_at([str(elsewhere)], store=store)] == ["keep"]
    assert panel.plan_summary() == before == from_scratch(panel, store)
    panel.set_note(str(elsewhere), "not here")
    assert panel.plan_summary() == before


def test_the_widget_holds_the_classified_snapshot_once_in_one_chunk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # small walk batches and row groups: the snapshot file holds many groups, so the
    # classified table comes back in several chunks (what a large tree gives)
    small = functools.partial(WalkOptions, batch_rows=5)
    monkeypatch.setattr("hygiene_nb.scan.request.WalkOptions", small)
    monkeypatch.setattr("hygiene_nb.scan.snapshot.ROW_GROUP_ROWS", 5)
    monkeypatch.setattr("hygiene_nb.api.classification.ROW_GROUP_ROWS", 5)
    demo = make_demo_store(tmp_path / "tree", tmp_path / "store", scans=1, walker="python")
    classified = api.classify_snapshot(str(demo.root), store=demo.store)
    assert classified.column("name").num_chunks > 1
    panel = Annotator(str(demo.root), store=demo.store)
    assert {column.num_chunks for column in panel.table.columns} == {1}
    assert panel.table.column_names == [*classified.column_names, "path"]
    for name in ("risk", "rule", "group", "claim", "content_risk"):  # held encoded
        assert pa.types.is_dictionary(panel.table.schema.field(name).type)
    decoded = [
        c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c
        for c in panel.table.drop_columns(["path"]).columns
    ]
    plain = [
        c.cast(c.type.value_type) if pa.types.is_dictionary(c.type) else c
        for c in classified.combine_chunks().columns
    ]
    assert all(a.equals(b) for a, b in zip(decoded, plain, strict=True))  # the same values
    assert panel.table.column("path").to_pylist() == entry_paths(classified).to_pylist()
    before = panel.plan_summary()
    assert before == selection_summary(
        select_candidates(panel.table, [], root=panel.root), panel.table
    )


def test_a_directory_row_and_its_tile_show_what_it_holds(demo: DemoStore) -> None:
    """The listing's badge and the treemap's colour are the same word: what the bytes are."""
    panel = Annotator(str(demo.root), store=demo.store)
    projects = row(panel, "projects")
    assert projects.entry.risk == "high"  # as a whole: it holds a project's manifests
    holds = str(projects.entry.content_risk)
    assert holds == "mixed"
    assert f">{holds}</span>" in projects.info.value
    assert "holds: " in projects.info.value and "as a whole: high" in projects.info.value
    trace = panel.fig.data[0]
    at = list(trace.ids).index(str(demo.root / "projects"))
    assert trace.marker.colors[at] == RISK_COLORS[holds]


def test_a_confirmed_batch_says_which_deletes_a_plan_would_leave_out(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    classified = api.classify_snapshot(str(demo.root), store=demo.store).to_pylist()
    protected = {
        str(Path(r["parent"]) / r["name"])
        for r in classified
        if r["parent"] == str(demo.root) and r["protected"]
    }
    assert protected  # the demo home holds credentials and a config file
    panel.select_all_box.value = True
    panel.batch_buttons["delete"].click()
    panel.confirm_button.click()
    listed = [r.path for r in panel.rows]
    assert decisions_at(demo, listed) == dict.fromkeys(listed, "delete")
    assert f"protected: {len(protected)}" in panel.status.value
    assert "not plan candidates" in panel.status.value
    for r in panel.rows:
        assert ("⚠ protected</span>" in r.info.value) == (r.path in protected), r.path


def test_a_long_name_is_cut_in_the_middle_and_whole_on_hover(tmp_path: Path) -> None:
    root, store = tmp_path / "r", tmp_path / "store"
    name = "a-very-long-directory-name-that-goes-on-and-on-2024"
    write(root / name / "f", 10)
    api.scan_root(root, store=store)
    panel = Annotator(str(root), store=store)
    (shown,) = panel.rows
    text = shown.name.description
    assert len(text) < len(name) and "…" in text
    head, _, tail = text.partition("…")
    assert (name + "/").startswith(head) and (name + "/").endswith(tail)
    assert shown.name.tooltip == str(root / name)
