"""The benchmark's views stage: its process-tree memory, its rows and goals, and its 1M baseline.

A row that was not measured says why and is never a PASS; goals given as a ratio of ``du -s``
follow the du of the same run; peak RSS is compared with an earlier result's figure.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from bench.measure import measure
from bench.run import Report, choose_sections, evaluate_targets, section_names
from bench.views import FLAT_GOAL, NOT_MEASURED, ROWS, VIEWS_DECISIONS, views_targets

MIB = 48  # what each process of the tree below holds at once

_HOLD = "import time; b = bytearray({mib} << 20); b[::4096] = b'x' * len(b[::4096]); {then}"


def test_a_process_trees_memory_is_summed_where_each_process_holds_less(tmp_path: Path) -> None:
    child = _HOLD.format(mib=MIB, then="time.sleep(1.0)")
    parent = _HOLD.format(
        mib=MIB, then=f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    )
    m = measure([sys.executable, "-c", parent], timeout=60, sample_every=0.02)
    assert m.returncode == 0 and m.samples > 0
    assert m.tree_peak_kib is not None
    assert m.tree_peak_kib >= 2 * MIB * 1024  # both held their buffers during the child's sleep
    assert m.maxrss_kib < 2 * MIB * 1024  # each process alone held one buffer and an interpreter
    assert m.tree_peak_kib >= m.maxrss_kib
    unsampled = measure([sys.executable, "-c", "pass"], timeout=60)
    assert unsampled.tree_peak_kib is None and unsampled.samples == 0


def test_pages_a_fork_left_shared_count_twice_in_the_rss_sum_and_once_in_the_pss_sum() -> None:
    code = _HOLD.format(
        mib=MIB,
        then="import os\npid = os.fork()\nif pid == 0:\n    time.sleep(1.0)\n    os._exit(0)\n"
        "os.waitpid(pid, 0)",
    )
    m = measure([sys.executable, "-c", code], timeout=60, sample_every=0.02)
    assert m.returncode == 0 and m.samples > 0
    assert m.tree_peak_kib is not None and m.tree_peak_pss_kib is not None
    assert m.tree_peak_kib >= 2 * MIB * 1024  # the child maps the parent's buffer too
    interpreters = m.tree_peak_kib - 2 * MIB * 1024  # what the RSS sum holds beside the buffers
    assert m.tree_peak_pss_kib < MIB * 1024 + interpreters + MIB * 1024 // 2  # the buffer once


def _report(du_warm: float | None, views: dict[str, Any] | None, **kwargs: Any) -> Report:
    report = Report(
        tree_root=Path("/nonexistent"),
        tree={"entries": 1000},
        rounds=1,
        cold_rounds=1,
        cold=False,
        cold_note="not asked",
        timeout=60,
        **kwargs,
    )
    du = report.add_tool("du", ["du", "-s", "/nonexistent"])
    if du_warm is not None:
        du.warm.append(du_warm)
    if views is not None:
        report.sections["views"] = views
    return report


def _views(**measures: dict[str, Any]) -> dict[str, Any]:
    return {"decisions_in_ledger": VIEWS_DECISIONS, "measures": measures}


def _views_rows(targets: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {k: t for k, t in targets.items() if k.startswith("views_")}


def test_without_the_views_section_every_row_is_not_measured_and_says_why() -> None:
    targets = evaluate_targets(_report(2.0, None))
    rows = _views_rows(targets)
    assert set(rows) == {row.key for row in ROWS}  # no flat rows without a baseline
    for t in rows.values():
        assert t["status"] == NOT_MEASURED and t["value"] is None
        assert "did not run" in t["note"]


def test_goals_given_as_a_ratio_of_du_follow_the_du_of_the_same_run() -> None:
    du = 2.0
    factors = {row.key: row.du_factor for row in ROWS if row.du_factor is not None}
    assert factors  # summary, Annotator open, report
    under = {"seconds": [0.5 * du * 0.9]}  # within the summary's goal of half du
    over = {"seconds": [5.0 * du * 1.1]}  # over the report's goal of five times du
    rows = views_targets(_report(du, _views(summary=under, report={**over, "scans": 2})))
    for key, factor in factors.items():
        assert rows[key]["goal"] == pytest.approx(factor * du)
    assert rows["views_summary_s"]["status"] == "PASS"
    assert rows["views_report_s"]["status"] == "MISS"
    assert rows["views_annotator_open_s"]["status"] == NOT_MEASURED  # not in this section
    without_du = views_targets(_report(None, _views(summary=under)))
    assert without_du["views_summary_s"]["status"] == NOT_MEASURED
    assert "du -s" in without_du["views_summary_s"]["note"]


def test_a_failed_measure_is_not_measured_with_its_error() -> None:
    rows = views_targets(_report(1.0, _views(help={"error": "MeasureError: exit 2: no such"})))
    for key in ("views_help_s", "views_help_pyarrow"):
        assert rows[key]["status"] == NOT_MEASURED
        assert "exit 2: no such" in rows[key]["note"]


def test_help_that_imports_pyarrow_misses_and_one_that_does_not_passes() -> None:
    heavy = views_targets(
        _report(1.0, _views(help={"seconds": [0.1], "heavy_imports": ["pyarrow"]}))
    )
    light = views_targets(_report(1.0, _views(help={"seconds": [0.1], "heavy_imports": []})))
    assert heavy["views_help_pyarrow"]["status"] == "MISS"
    assert light["views_help_pyarrow"]["status"] == "PASS"


def test_with_fewer_decisions_than_the_target_asks_a_fast_click_is_no_pass() -> None:
    goal_ms = next(row.goal for row in ROWS if row.key == "views_decision_ms")
    assert goal_ms is not None
    goal_s = goal_ms / 1000
    clicks = {"annotator": {"decide_s": [goal_s / 2], "drill_s": [goal_s * 2]}}
    few = {**_views(**clicks), "decisions_in_ledger": VIEWS_DECISIONS // 10}
    rows = views_targets(_report(1.0, few))
    assert rows["views_decision_ms"]["status"] == "SKIP"  # under the goal, condition unmet
    assert rows["views_drill_ms"]["status"] == "MISS"  # over it anyway
    assert f"{VIEWS_DECISIONS // 10:,} decisions" in rows["views_decision_ms"]["note"]
    enough = views_targets(_report(1.0, _views(**clicks)))
    assert enough["views_decision_ms"]["status"] == "PASS"


def _result(tmp_path: Path, name: str, scan_mib: float, peaks: dict[str, float]) -> Path:
    payload = {
        "entries": 1_000_000,
        "tools": {"hygiene-nb": {"peak_rss_mib": scan_mib}},
        "sections": {"views": {"peak_rss_mib": peaks}},
    }
    path = tmp_path / name
    path.write_text(json.dumps(payload))
    return path


def test_peak_rss_is_compared_with_the_earlier_results_figure(tmp_path: Path) -> None:
    earlier = {"summary": 300.0, "help": 20.0}
    baseline = _result(tmp_path, "bench-1000000.json", 200.0, earlier)
    now = {"summary": earlier["summary"] * FLAT_GOAL * 1.1, "help": earlier["help"]}
    report = _report(1.0, {**_views(), "peak_rss_mib": now}, baseline=baseline)
    scan = report.add_tool("hygiene-nb", ["hygiene-nb", "scan"])
    scan.rss_kib.append(int(200.0 * 1024))
    rows = views_targets(report)
    assert rows["views_flat_summary"]["value"] == pytest.approx(now["summary"] / earlier["summary"])
    assert rows["views_flat_summary"]["status"] == "MISS"
    assert rows["views_flat_help"]["status"] == "PASS"
    assert rows["views_flat_scan"]["status"] == "PASS"
    assert rows["views_flat_report_tree"]["status"] == NOT_MEASURED  # in neither run
    # saved output of a run, its BENCH_JSON line last, is read the same way
    saved = tmp_path / "bench-1000000.log"
    saved.write_text("tree: ...\nBENCH_JSON " + baseline.read_text() + "\n")
    report.baseline = saved
    assert views_targets(report)["views_flat_summary"]["status"] == "MISS"


def test_without_the_earlier_result_the_flat_rows_say_so(tmp_path: Path) -> None:
    missing = tmp_path / "bench-1000000-s42.json"
    report = _report(1.0, {**_views(), "peak_rss_mib": {"summary": 100.0}}, baseline=missing)
    rows = {k: t for k, t in views_targets(report).items() if k.startswith("views_flat_")}
    assert rows
    for t in rows.values():
        assert t["status"] == NOT_MEASURED
        assert str(missing) in t["note"]


def test_sections_are_chosen_by_name_and_the_scan_always_runs() -> None:
    names = section_names()
    assert "views" in names and "scan" not in names
    chosen = choose_sections("views")
    assert [s.__name__ for s in chosen] == ["scan_section", "views_section"]
    assert len(choose_sections("")) == len(names) + 1
    with pytest.raises(ValueError, match="unknown section nope"):
        choose_sections("views,nope")
