"""Bench section: the views stage, the notebook views and the widget against their targets.

Scans the tree a second time into the shared store, so there are two snapshots to compare (the
tree does not change between them: the diff still joins every row of both), and makes sure the
ledger holds ``VIEWS_DECISIONS`` decisions (the plan section already wrote them when it ran).
Then each row of the views stage is measured in a process of its own, so one measure's memory
never inflates another's:

- ``hygiene-nb summary``, the first one after a fresh scan (a new store each round, so its
  classification is computed inside the timing): wall time and its own peak RSS;
- the annotation widget (``bench/_views_probe.py annotator``): ``import
  hygiene_nb.notebook.ui``, ``Annotator(...)`` until the first listing and treemap are built,
  ``CLICKS`` decisions (a click on a row's decision button, committed to the ledger before it
  returns) and ``CLICKS`` drill-ins, with the ledger's decisions in it;
- ``hygiene-nb report`` of the two scans: wall time, and RSS summed over its process tree (the
  Jupyter kernel included), sampled every ``SAMPLE_EVERY`` seconds;
- ``views.diff(by="risk")`` of the two snapshots (``bench/_views_probe.py diff``);
- ``hygiene-nb --help``: wall time, and whether it imports pyarrow (``PYTHONPROFILEIMPORTTIME``).

Last, in this process as before, the diffs, changed entries, growth, the root's treemap and the
widget (kept for comparison with earlier runs; no target). ``views_targets`` turns the figures
into the stage's rows (targets as ratios of ``du -s`` warm of the same run where the goal is
one), and, given an earlier result file (a 1M run), each command's peak RSS against its figure
there ("flat": at most ``FLAT_GOAL`` times). A row that was not measured says why; it is never
a PASS.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.load import _median_seconds
from bench.measure import MeasureError, Measurement, measure, tail

__all__ = [
    "CLICKS",
    "FLAT_GOAL",
    "NOT_MEASURED",
    "SAMPLE_EVERY",
    "VIEWS_DECISIONS",
    "load_result",
    "print_views",
    "views_section",
    "views_targets",
]

VIEWS_DECISIONS = 100_000  # decisions in the ledger when the widget is timed
CLICKS = int(os.environ.get("BENCH_VIEWS_CLICKS", "5"))  # decisions and drill-ins per round
SAMPLE_EVERY = 0.05  # seconds between samples of the report's process tree
FLAT_GOAL = 1.2  # peak RSS at this size / at 1M
NOT_MEASURED = "not measured"
PROBE = Path(__file__).resolve().with_name("_views_probe.py")
HEAVY = ("pyarrow", "numpy", "pandas", "duckdb")
KIB_PER_MIB = 1024

_Measure = Callable[[], dict[str, Any]]


# --------------------------------------------------------------------------- measuring


def _ok(m: Measurement) -> Measurement:
    if m.returncode != 0:
        raise MeasureError(f"exit {m.returncode}: {tail(m.stderr)}")
    return m


def _line(name: str, seconds: float, rss_kib: int | None, extra: str = "") -> None:
    rss = f" {rss_kib / KIB_PER_MIB:8.1f} MiB" if rss_kib is not None else ""
    print(f"  {name:<24} {seconds:9.3f} s{rss}{extra}", flush=True)


def _json_line(m: Measurement) -> dict[str, Any]:
    lines = m.stdout.decode(errors="replace").strip().splitlines()
    if not lines:
        raise MeasureError(f"the probe printed nothing: {tail(m.stderr)}")
    out = json.loads(lines[-1])
    if not isinstance(out, dict):
        raise MeasureError(f"the probe printed {lines[-1][:200]!r}, not a JSON object")
    return out


def _scan(exe: Path, root: str, store: Path, timeout: float) -> None:
    done = subprocess.run(
        [str(exe), "scan", root, "--store", str(store), "--json"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    if done.returncode != 0:
        raise MeasureError(f"scan exit {done.returncode}: {tail(done.stderr)}")


def _summary(exe: Path, root: str, store_dir: Path, rounds: int, timeout: float) -> dict[str, Any]:
    """``hygiene-nb summary ROOT``, each round on a store that holds one fresh scan only."""
    seconds, rss = [], []
    for _ in range(rounds):
        store = Path(tempfile.mkdtemp(prefix="store-summary-", dir=store_dir))
        try:
            _scan(exe, root, store, timeout)  # untimed: the snapshot summary reads first
            m = _ok(measure([exe, "summary", root, "--store", store], timeout=timeout))
        finally:
            shutil.rmtree(store, ignore_errors=True)
        seconds.append(round(m.seconds, 4))
        rss.append(m.maxrss_kib)
        _line("summary (fresh scan)", m.seconds, m.maxrss_kib)
    return {
        "argv": [str(exe), "summary", root, "--store", "STORE"],
        "seconds": seconds,
        "rss_kib": rss,
    }


def _annotator(root: str, store: Path, rounds: int, timeout: float) -> dict[str, Any]:
    """The widget in a fresh interpreter per round: import, open, decisions, drill-ins."""
    found: dict[str, list[Any]] = {
        k: [] for k in ("import_s", "open_s", "open_rss_kib", "decide_s", "drill_s", "rss_kib")
    }
    for r in range(rounds):
        argv = [sys.executable, str(PROBE), "annotator", root, str(store), str(CLICKS), str(r)]
        m = _ok(measure(argv, capture_stdout=True, timeout=timeout))
        out = _json_line(m)
        for key in ("import_s", "open_s", "open_rss_kib"):
            found[key].append(round(out[key], 4))
        found["decide_s"] += [round(s, 4) for s in out["decide_s"]]
        found["drill_s"] += [round(s, 4) for s in out["drill_s"]]
        found["rss_kib"].append(m.maxrss_kib)
        _line("import notebook.ui", out["import_s"], None)
        _line("Annotator open", out["open_s"], out["open_rss_kib"], " (the process so far)")
        _line(
            f"{len(out['decide_s'])} decisions, median",
            statistics.median(out["decide_s"]),
            None,
            f"  max {max(out['decide_s']):.3f} s",
        )
        _line(
            f"{len(out['drill_s'])} drill-ins, median",
            statistics.median(out["drill_s"]),
            m.maxrss_kib,
            " (the whole process)",
        )
    return found


def _probe(
    mode: str, label: str, root: str, store: Path, rounds: int, timeout: float
) -> dict[str, Any]:
    """One in-process view (``_views_probe.py MODE``), in a fresh process each round."""
    seconds, rss = [], []
    for _ in range(rounds):
        m = _ok(
            measure(
                [sys.executable, PROBE, mode, root, store], capture_stdout=True, timeout=timeout
            )
        )
        out = _json_line(m)
        seconds.append(round(out["seconds"], 4))
        rss.append(m.maxrss_kib)
        _line(label, out["seconds"], m.maxrss_kib, f" ({out['rows']} rows)")
    return {"seconds": seconds, "rss_kib": rss}


def _diff(root: str, store: Path, rounds: int, timeout: float) -> dict[str, Any]:
    return _probe("diff", 'diff(by="risk")', root, store, rounds, timeout)


# The breakdowns (docs/breakdowns.md), each one query over the latest snapshot.
BREAKDOWNS = ("by_owner", "by_type", "age_histogram")


def _report(
    exe: Path, root: str, store: Path, store_dir: Path, rounds: int, timeout: float
) -> dict[str, Any]:
    """``hygiene-nb report ROOT`` on the store with two scans; its process tree sampled."""
    from hygiene_nb import api

    scans = len(api.list_snapshots(store=store, root=root))
    seconds, rss, tree, pss, samples = [], [], [], [], []
    members: list[list[tuple[str, float]]] = []
    for _ in range(rounds):
        out = Path(tempfile.mkdtemp(prefix="report-", dir=store_dir))
        try:
            argv = [str(exe), "report", root, "--store", str(store), "--out", str(out)]
            m = _ok(measure(argv, timeout=timeout, sample_every=SAMPLE_EVERY))
        finally:
            shutil.rmtree(out, ignore_errors=True)
        assert m.tree_peak_kib is not None and m.tree_peak_pss_kib is not None  # sampled
        seconds.append(round(m.seconds, 4))
        rss.append(m.maxrss_kib)
        tree.append(m.tree_peak_kib)
        pss.append(m.tree_peak_pss_kib)
        samples.append(m.samples)
        at_peak = [(p.name, round(p.rss_kib / KIB_PER_MIB, 1)) for p in m.tree_peak_members]
        members.append(at_peak)
        _line(
            "report",
            m.seconds,
            m.tree_peak_kib,
            f" summed over its processes ({m.samples} samples; at the peak: "
            f"{', '.join(f'{n} {mib:.0f}' for n, mib in at_peak) or 'none sampled'}); "
            f"PSS summed {m.tree_peak_pss_kib / KIB_PER_MIB:.0f}; its own "
            f"{m.maxrss_kib / KIB_PER_MIB:.1f} MiB",
        )
    return {
        "scans": scans,
        "seconds": seconds,
        "rss_kib": rss,
        "tree_rss_kib": tree,
        "tree_pss_kib": pss,
        "samples": samples,
        "sample_every_s": SAMPLE_EVERY,
        "tree_at_peak_mib": members,
    }


def _help(exe: Path, rounds: int, timeout: float) -> dict[str, Any]:
    """``hygiene-nb --help``: one warm-up, ``rounds`` timed; then the modules it imports."""
    _ok(measure([exe, "--help"], timeout=timeout))
    seconds, rss = [], []
    for _ in range(rounds):
        m = _ok(measure([exe, "--help"], timeout=timeout))
        seconds.append(round(m.seconds, 4))
        rss.append(m.maxrss_kib)
        _line("hygiene-nb --help", m.seconds, m.maxrss_kib)
    done = subprocess.run(
        [str(exe), "--help"],
        env={**os.environ, "PYTHONPROFILEIMPORTTIME": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=timeout,
        check=False,
    )
    lines = [
        ln
        for ln in done.stderr.decode(errors="replace").splitlines()
        if ln.startswith("import time:")
    ]
    if done.returncode != 0 or len(lines) < 2:
        raise MeasureError(
            f"--help with PYTHONPROFILEIMPORTTIME: exit {done.returncode}, "
            f"{len(lines)} import lines"
        )
    modules = {ln.rsplit("|", 1)[-1].strip() for ln in lines[1:]}
    heavy = sorted({m.split(".")[0] for m in modules} & set(HEAVY))
    print(f"  {'--help imports':<24} {', '.join(heavy) or 'none of ' + ', '.join(HEAVY)}")
    return {"seconds": seconds, "rss_kib": rss, "heavy_imports": heavy}


def _attempt(name: str, func: _Measure) -> dict[str, Any]:
    """``func()``, or ``{"error": why}`` when it could not be measured."""
    try:
        return func()
    except (MeasureError, OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
        print(f"  {name:<24} FAILED: {exc}", flush=True)
        return {"error": f"{type(exc).__name__}: {exc}"}


def _ensure_decisions(root: str, store: Path) -> dict[str, Any]:
    """At least ``VIEWS_DECISIONS`` decisions under ``root``, where the tree has enough files.

    The plan section leaves 100,000 ``delete`` decisions; without it (or with fewer), unprotected
    files not yet decided are marked ``delete`` the same way.
    """
    import pyarrow.compute as pc

    from hygiene_nb import api
    from hygiene_nb.query import views

    before = len(views.human_decisions(store, root))
    added = 0
    if before < VIEWS_DECISIONS:
        table = api.classify_snapshot(root, store=store)
        frame = views.browse_frame(table)
        unprotected = pc.fill_null(pc.invert(table.column("protected")), False)
        eligible = (frame["kind"] == "file").to_numpy() & unprotected.to_numpy(zero_copy_only=False)
        decided = views.human_decisions(store, root)
        paths = [p for p in frame["path"][eligible] if p not in decided]
        paths = paths[: VIEWS_DECISIONS - before]
        if paths:
            api.annotate(paths, store=store, decision="delete", set_note=False)
        added = len(paths)
    count = len(views.human_decisions(store, root))
    print(f"  decisions in the ledger: {count:,} ({added:,} added here)", flush=True)
    return {"decisions_in_ledger": count, "decisions_added": added}


def _in_process(root: str, store: Path, rounds: int) -> dict[str, Any]:
    """The earlier figures, timed in this process (for comparison with earlier runs)."""
    from hygiene_nb import api
    from hygiene_nb.notebook.ui import Annotator
    from hygiene_nb.query import views

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
    print("  in this process (no target; as earlier runs measured them):")
    for key, value in results.items():
        print(f"  {key:<24} {value:9.3f} s")
    print(f"  treemap nodes at the root: {nodes}")
    return {"treemap_nodes": nodes, **{k: round(v, 4) for k, v in results.items()}}


def _peaks(measures: dict[str, Any]) -> dict[str, float]:
    """Each command's peak RSS in MiB over its rounds (report: summed over its processes)."""
    sources = {
        "summary": ("summary", "rss_kib"),
        "annotator_open": ("annotator", "open_rss_kib"),
        "report_tree": ("report", "tree_rss_kib"),
        "diff_risk": ("diff_risk", "rss_kib"),
        "help": ("help", "rss_kib"),
        **{name: (name, "rss_kib") for name in BREAKDOWNS},
    }
    found = {}
    for name, (measure_name, key) in sources.items():
        values = measures.get(measure_name, {}).get(key)
        if values:
            found[name] = round(max(values) / KIB_PER_MIB, 1)
    return found


def views_section(tree_root: Path, store_dir: Path, report: Any) -> None:
    """The views stage: a second scan, the decisions, then each view in a process of its own."""
    from hygiene_nb import api

    store = store_dir / "shared"
    if not store.exists():
        print("  skipped: the scan section left no shared store")
        report.sections["views"] = {"skipped": "the scan section left no shared store"}
        return
    root = str(tree_root)
    section: dict[str, Any] = {"entries": report.tree.get("entries")}
    report.sections["views"] = section
    api.scan_root(root, store=store)  # the second snapshot: diff and report compare two
    section.update(_ensure_decisions(root, store))
    rounds = max(1, min(3, report.rounds))
    section["rounds"] = rounds
    section["clicks_per_round"] = CLICKS
    exe = Path(sys.executable).with_name("hygiene-nb")
    timeout = report.timeout
    measures: dict[str, Any] = {}
    section["measures"] = measures
    plan: list[tuple[str, _Measure]] = [
        ("summary", lambda: _summary(exe, root, store_dir, rounds, timeout)),
        ("annotator", lambda: _annotator(root, store, rounds, timeout)),
        ("report", lambda: _report(exe, root, store, store_dir, rounds, timeout)),
        ("diff_risk", lambda: _diff(root, store, rounds, timeout)),
        *(
            (name, lambda name=name: _probe(name, f"{name}()", root, store, rounds, timeout))
            for name in BREAKDOWNS
        ),
        ("help", lambda: _help(exe, rounds, timeout)),
    ]
    for name, func in plan:
        if name != "annotator" and not exe.exists():
            measures[name] = {"error": f"console script not found at {exe}"}
            continue
        measures[name] = _attempt(name, func)
    section["peak_rss_mib"] = _peaks(measures)
    section.update(_in_process(root, store, rounds))


# --------------------------------------------------------------------------- targets


def load_result(path: Path) -> dict[str, Any]:
    """A bench result: the JSON file ``bench.run`` writes, or saved output with ``BENCH_JSON``.

    Raises:
        OSError: the file cannot be read.
        ValueError: it holds no result.
    """
    text = path.read_text()
    try:
        found = json.loads(text)
    except ValueError:
        lines = [ln for ln in text.splitlines() if ln.startswith("BENCH_JSON ")]
        if not lines:
            raise ValueError(f"{path} is neither JSON nor holds a BENCH_JSON line") from None
        found = json.loads(lines[-1].removeprefix("BENCH_JSON "))
    if not isinstance(found, dict):
        raise ValueError(f"{path} holds no JSON object")
    return found


def _result_peaks(result: dict[str, Any]) -> dict[str, float]:
    """The peak RSS figures (MiB) a result holds: the scan's and the views stage's."""
    found: dict[str, float] = {}
    scan = result.get("tools", {}).get("hygiene-nb", {}).get("peak_rss_mib")
    if scan is not None:
        found["scan"] = float(scan)
    views = result.get("sections", {}).get("views", {}).get("peak_rss_mib", {})
    found.update({k: float(v) for k, v in views.items()})
    return found


_COMMANDS = {
    "scan": "scan",
    "summary": "summary",
    "annotator_open": "Annotator open",
    "report_tree": "report (process tree)",
    "diff_risk": 'diff(by="risk")',
    "help": "--help",
}


def _size(entries: Any) -> str:
    if not isinstance(entries, int):
        return "the earlier"
    return f"{entries / 1e6:g}M" if entries >= 1_000_000 else f"{entries:,}-entry"


def _row(
    label: str,
    value: float | None,
    goal: float | None,
    unit: str,
    *,
    why: str = "",
    goal_note: str = "",
    note: str = "",
    condition_unmet: str = "",
) -> dict[str, Any]:
    """One row: PASS/MISS against ``goal`` (<=), or ``not measured`` with ``why``.

    ``condition_unmet`` names a condition of the target that this run did not meet: the row is
    then a MISS if it is over the goal anyway, else SKIP (never a PASS).
    """
    if value is None or goal is None:
        status = NOT_MEASURED
        note = why or "the goal is a ratio of du -s warm, which was not measured"
    else:
        status = "MISS" if value > goal else ("SKIP" if condition_unmet else "PASS")
        note = "; ".join(n for n in (note, condition_unmet) if n)
    return {
        "label": label,
        "op": "<=",
        "goal": goal,
        "value": value,
        "unit": unit,
        "status": status,
        "goal_note": goal_note,
        "note": note,
    }


@dataclass(frozen=True)
class Row:
    """One row of the views stage: which figure, how it is reduced, and its goal.

    ``goal`` is absolute, or ``du_factor`` times ``du -s`` warm of the same run. ``how``:
    ``median`` (seconds), ``median_ms``, ``peak`` (KiB to MiB), ``pyarrow`` (1 if imported).
    ``needs``: a condition of the target (``decisions``: the ledger holds ``VIEWS_DECISIONS``;
    ``scans``: the store holds two scans).
    """

    key: str
    label: str
    measure: str
    field: str
    how: str
    unit: str
    goal: float | None = None
    du_factor: float | None = None
    note: str = ""
    needs: str = ""


ROWS = (
    Row("views_summary_s", "summary, first after a fresh scan", "summary", "seconds", "median",
        "s", du_factor=0.5),
    Row("views_summary_rss_mib", "summary, peak RSS", "summary", "rss_kib", "peak", "MiB",
        400.0),
    Row("views_annotator_open_s", "Annotator open (listing + treemap)", "annotator", "open_s",
        "median", "s", du_factor=0.75),
    Row("views_annotator_rss_mib", "Annotator open, peak RSS", "annotator", "open_rss_kib",
        "peak", "MiB", 600.0, note="the process until the widget is open, import included"),
    Row("views_import_ui_s", "import hygiene_nb.notebook.ui", "annotator", "import_s", "median",
        "s", 1.0),
    Row("views_decision_ms", "a decision in the widget", "annotator", "decide_s", "median_ms",
        "ms", 150.0, needs="decisions"),
    Row("views_drill_ms", "a drill-in in the widget", "annotator", "drill_s", "median_ms", "ms",
        150.0, needs="decisions"),
    Row("views_report_s", "report (two scans)", "report", "seconds", "median", "s",
        du_factor=5.0, needs="scans"),
    Row("views_report_rss_mib", "report, peak RSS summed over processes", "report",
        "tree_rss_kib", "peak", "MiB", 600.0, needs="scans",
        note=f"RSS of every process, sampled every {SAMPLE_EVERY * 1000:.0f} ms (shared pages in "
        "each: an upper bound; a shorter peak can be missed; never below the command's own "
        "ru_maxrss)"),
    Row("views_diff_risk_s", 'diff(by="risk") of two snapshots', "diff_risk", "seconds",
        "median", "s", 1.0),
    Row("views_by_owner_s", "by_owner() of the latest snapshot", "by_owner", "seconds",
        "median", "s", 1.0, note="the classification kept by the summary before it"),
    Row("views_by_owner_rss_mib", "by_owner(), peak RSS", "by_owner", "rss_kib", "peak", "MiB",
        400.0),
    Row("views_by_type_s", "by_type() of the latest snapshot", "by_type", "seconds", "median",
        "s", 1.0),
    Row("views_age_histogram_s", "age_histogram() of the latest snapshot", "age_histogram",
        "seconds", "median", "s", 1.0),
    Row("views_help_s", "hygiene-nb --help", "help", "seconds", "median", "s", 0.15),
    Row("views_help_pyarrow", "hygiene-nb --help imports pyarrow", "help", "heavy_imports",
        "pyarrow", "bool", 0.0),
)  # fmt: skip


def _reduce(how: str, values: list[Any]) -> tuple[float, str]:
    """The row's value from a measure's list, and what it was reduced from."""
    if how == "pyarrow":
        return float("pyarrow" in values), f"heavy modules imported: {', '.join(values) or 'none'}"
    if how == "peak":
        return max(values) / KIB_PER_MIB, f"largest of {len(values)}" if len(values) > 1 else ""
    if how == "median_ms":
        ms = [v * 1000 for v in values]
        return statistics.median(ms), f"median of {len(ms)}, max {max(ms):.0f} ms"
    return statistics.median(values), f"median of {len(values)}" if len(values) > 1 else ""


def views_targets(report: Any) -> dict[str, dict[str, Any]]:
    """The views stage's rows: each measured value against its goal (see the module doc)."""
    du = report.tools.get("du")
    du_warm = du.warm_median() if du is not None else None
    section = report.sections.get("views")
    if section is None:
        absent = "the views section did not run"
    elif "skipped" in section:
        absent = f"the views section was skipped: {section['skipped']}"
    else:
        absent = ""
    section = {} if absent else section
    measures: dict[str, Any] = section.get("measures", {})
    decisions = section.get("decisions_in_ledger")
    scans = measures.get("report", {}).get("scans")
    unmet = {
        "decisions": f"the ledger held {decisions:,} decisions, not {VIEWS_DECISIONS:,} (the "
        "tree has too few unprotected files)"
        if isinstance(decisions, int) and decisions < VIEWS_DECISIONS
        else "",
        "scans": f"the store held {scans} scans, not 2" if scans is not None and scans < 2 else "",
    }
    held = {
        "decisions": f"{decisions:,} decisions in the ledger" if decisions is not None else "",
        "scans": f"{scans} scans" if scans is not None else "",
    }
    rows: dict[str, dict[str, Any]] = {}
    for row in ROWS:
        found = measures.get(row.measure)
        values = None if found is None else found.get(row.field)
        if absent:
            why = absent
        elif found is None:
            why = f"the views section stopped before {row.measure} (see its error)"
        elif found.get("error"):
            why = f"{row.measure} failed: {found['error'][:160]}"
        elif values is None or (not values and row.how != "pyarrow"):
            why, values = f"{row.measure} gave no {row.field}", None
        else:
            why = ""
        value, how = _reduce(row.how, values) if values is not None else (None, "")
        goal = row.goal
        goal_note = ""
        condition = unmet.get(row.needs, "")
        notes = [how, row.note, "" if condition else held.get(row.needs, "")]
        if row.du_factor is not None:
            goal = row.du_factor * du_warm if du_warm else None
            goal_note = f"{row.du_factor:g}x du -s"
            if value is not None and du_warm:
                notes.insert(0, f"{value / du_warm:.2f}x du -s")
        rows[row.key] = _row(
            row.label,
            value,
            goal,
            row.unit,
            why=why,
            goal_note=goal_note,
            note="; ".join(n for n in notes if n),
            condition_unmet=condition,
        )
    pss = measures.get("report", {}).get("tree_pss_kib")
    if pss and rows["views_report_rss_mib"]["value"] is not None:
        rows["views_report_rss_mib"]["note"] += (
            f"; PSS summed (shared pages split): {max(pss) / KIB_PER_MIB:.1f} MiB"
        )
    rows.update(_flat_rows(report, section or None))
    return rows


def _flat_rows(report: Any, section: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    """Each command's peak RSS against its figure in the earlier (1M) result, if one is given."""
    baseline: Path | None = getattr(report, "baseline", None)
    if baseline is None:
        return {}
    current = dict(section.get("peak_rss_mib", {})) if section else {}
    scan = report.tools.get("hygiene-nb")
    if scan is not None and scan.peak_rss_mib() is not None:
        current["scan"] = scan.peak_rss_mib()
    try:
        earlier = load_result(baseline)
    except (OSError, ValueError) as exc:
        earlier = None
        problem = f"no earlier result ({exc}): run the 1M bench first, or give --baseline"
    else:
        problem = ""
    base = _result_peaks(earlier) if earlier else {}
    size = _size(earlier.get("entries")) if earlier else "1M"
    rows = {}
    for name, label in _COMMANDS.items():
        value, why = None, problem
        if not why and name not in base:
            why = f"{baseline} has no peak RSS for {label}"
        elif not why and name not in current:
            why = f"{label} was not measured in this run"
        elif not why:
            value = current[name] / base[name]
        rows[f"views_flat_{name}"] = _row(
            f"flat: {label} RSS / {size} run",
            value,
            FLAT_GOAL,
            "x",
            why=why,
            note=f"{current[name]:.1f} / {base[name]:.1f} MiB" if value is not None else "",
        )
    return rows


def _shown(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bool":
        return "yes" if value else "no"
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "ms":
        return f"{value:.0f} ms"
    if unit == "x":
        return f"{value:.2f}x"
    return f"{value:.1f} {unit}"


def print_views(report: Any, targets: dict[str, dict[str, Any]]) -> None:
    """The views stage's table: each row's value, its goal, PASS/MISS, and why where not."""
    rows = {k: t for k, t in targets.items() if k.startswith("views_")}
    if not rows:
        return
    du = report.tools.get("du")
    du_warm = du.warm_median() if du is not None else None
    section = report.sections.get("views") or {}
    print()
    how = (
        f"{section['rounds']} round(s), each in a fresh process ({section['clicks_per_round']} "
        "decisions and drill-ins per round); CLI peak RSS is the command's own ru_maxrss"
        if "rounds" in section
        else "the views section measured nothing"
    )
    print(f"views stage: du -s warm {_shown(du_warm, 's')} in this run; {how}")
    baseline = getattr(report, "baseline", None)
    if baseline is not None:
        print(f"flat rows: peak RSS against {baseline}")
    width = max(44, *(len(t["label"]) for t in rows.values()))
    header = f"{'row':<{width}} {'value':>10}  {'target':<24} {'result':<12} notes"
    print(header)
    print("-" * len(header))
    for t in rows.values():
        if t["unit"] == "bool":
            goal = "no"
        else:
            goal = f"<= {_shown(t['goal'], t['unit'])}" if t["goal"] is not None else "-"
        if t["goal_note"]:
            goal += f" ({t['goal_note']})"
        print(
            f"{t['label']:<{width}} {_shown(t['value'], t['unit']):>10}  {goal:<24} "
            f"{t['status']:<12} {t['note']}"
        )
