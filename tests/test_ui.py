"""The annotation widget, driven the way the front-end drives it, without a browser.

Buttons are clicked with ``Button.click()``, controls changed by assigning their traits, and a
treemap click is the exact message plotly's FigureWidget front-end sends (a private API: this
test is the canary for plotly upgrades).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.ledger import Ledger
from hygiene_nb.notebook.demo import DemoStore, make_demo_store
from hygiene_nb.notebook.ui import Annotator
from hygiene_nb.store import Store


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


def test_select_all_then_a_batch_decision_covers_every_listed_entry(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    panel.open(str(demo.root / "projects"))
    listed = set(panel.listed()["path"])
    panel.select_all_box.value = True
    assert all(r.check.value for r in panel.rows)
    panel.batch_buttons["unsure"].click()
    rows = ledger_rows(demo)
    assert {p for p, (d, _, _) in rows.items() if d == "unsure"} == listed
    assert not panel.selected and not panel.select_all_box.value


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
    risk = panel.frame.set_index("path").loc[str(demo.root / "Documents"), "risk"]
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
    assert trace.marker.line.width[at] > 1
    assert trace.marker.line.color[at] == "#00c853"


def test_the_plan_summary_and_export_match_the_plan_file(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    panel.open(str(demo.root / "projects" / "webapp"))
    row(panel, "node_modules").buttons["delete"].click()
    row(panel, "dist").buttons["delete"].click()
    summary = panel.plan_summary()
    assert summary["delete_count"] == 2 and summary["candidates"] == 2
    assert f"{summary['reclaim_bytes']} bytes" in panel.summary.value
    panel.export_button.click()
    html = panel.export_out.value
    plans = list((demo.store / "plans").glob("*.json"))
    assert len(plans) == 1 and str(plans[0]) in html
    assert "hygiene-nb execute" in html and "--execute" in html
    issued = api.make_plan(demo.root, store=demo.store)
    assert issued.reclaim_bytes == summary["reclaim_bytes"]
    assert (demo.root / "projects" / "webapp" / "node_modules").is_dir()  # nothing moved


def test_export_shows_what_the_plan_left_out(demo: DemoStore) -> None:
    panel = Annotator(str(demo.root), store=demo.store)
    (demo.root / "Documents" / "notes.txt").write_text("changed since the scan")
    row(panel, "Documents").buttons["delete"].click()
    result = panel.export_plan()
    assert result is not None and result.candidates == 0 and result.excluded == 1
    assert "1 left out" in panel.export_out.value


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
