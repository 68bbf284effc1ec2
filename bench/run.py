"""The benchmark: hygiene-nb scan against du/find (and ncdu/gdu where installed) on a 1M tree.

Run with ``make bench`` or ``.venv/bin/python -m bench.run [--entries N] [--rounds R]``; see
``bench/README.md``. Prints a table, the targets with PASS/MISS, and a last line
``BENCH_JSON {...}`` holding every number.

Later stages add themselves to ``SECTIONS``: each is called as ``section(tree_root, store_dir,
report)`` after the baselines, may time commands with ``timed_run`` (or anything else) and records
what it measured in ``report.tools`` / ``report.sections``. ``store_dir`` is a scratch directory
removed at the end; after the scan section ``store_dir / "shared"`` holds a snapshot of the tree.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.classify import classify_section
from bench.executor import executor_section
from bench.formats import format_bytes, two_owner_bytes
from bench.gen_tree import generate_tree
from bench.load import load_section
from bench.measure import MeasureError, Measurement, measure
from bench.measure import tail as _tail
from bench.plan import plan_section
from bench.realism import STATISTICS, tree_statistics
from bench.views import NOT_MEASURED, print_views, views_section, views_targets

__all__ = [
    "SECTIONS",
    "TARGETS",
    "MeasureError",
    "Measurement",
    "Report",
    "Section",
    "ToolResult",
    "choose_sections",
    "main",
    "measure",
    "scan_section",
    "section_names",
    "timed_run",
]

DEFAULT_DIR = "/tmp/hygiene-nb-bench"
DEFAULT_ENTRIES = 1_000_000
DROP_CACHES = Path("/proc/sys/vm/drop_caches")
FIND_FORMAT = "%y %s %b %T@ %i %n %D %p\\0"
SCAN_KEYS = (
    "scan_id", "root", "entries", "tree_bytes", "tree_alloc", "partial", "errors",
    "snapshot_path", "seconds",
)  # fmt: skip
MIB = 1024 * 1024

# (key, label, comparison, goal); values are computed in ``evaluate_targets``
TARGETS: tuple[tuple[str, str, str, float], ...] = (
    ("warm_ratio", "warm ratio du / hygiene-nb", ">=", 1.0),
    ("cold_ratio", "cold ratio du / hygiene-nb", ">=", 2.0),
    ("peak_rss_mib", "hygiene-nb peak RSS (MiB)", "<=", 350.0),
    # Format 2 added ctime_ns, uid, gid and mode. On the generated tree (300k entries) they cost
    # 1.09 B/entry for ctime (creation times with nanoseconds, in listing order) and 0.02 for
    # the other three (dictionary-encoded), so the format-1 goal of 15.0 moves by 1.2.
    ("bytes_per_entry", "snapshot bytes / entry", "<=", 16.2),
)


# --------------------------------------------------------------------------- measuring


def drop_caches() -> None:
    """``sync; echo 3 > /proc/sys/vm/drop_caches`` (root only)."""
    os.sync()
    with DROP_CACHES.open("w") as fh:
        fh.write("3\n")


def cold_cache_status() -> tuple[bool, str]:
    """Whether caches can be dropped here, and a note saying how or why not."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False, "not running as root (dropping the page cache needs root)"
    try:
        drop_caches()
    except OSError as exc:
        return False, f"cannot write {DROP_CACHES}: {exc.strerror or exc}"
    return True, f"sync; echo 3 > {DROP_CACHES} before each timed run"


# --------------------------------------------------------------------------- the report


@dataclass
class ToolResult:
    """Everything measured for one tool: timed warm/cold runs and peak RSS over all its runs."""

    name: str
    argv: list[str]
    warm: list[float] = field(default_factory=list)
    cold: list[float] = field(default_factory=list)
    rss_kib: list[int] = field(default_factory=list)
    error: str | None = None
    skipped: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Measured without error (and not skipped)."""
        return self.error is None and self.skipped is None and bool(self.warm)

    def warm_median(self) -> float | None:
        """Median warm wall time in seconds, if measured."""
        return statistics.median(self.warm) if self.warm else None

    def cold_median(self) -> float | None:
        """Median cold wall time in seconds, if measured."""
        return statistics.median(self.cold) if self.cold else None

    def peak_rss_mib(self) -> float | None:
        """Largest ``ru_maxrss`` over all runs, in MiB."""
        return max(self.rss_kib) / 1024 if self.rss_kib else None

    def to_json(self) -> dict[str, Any]:
        """The numbers, for BENCH_JSON."""
        return {
            "argv": self.argv,
            "warm_seconds": [round(s, 4) for s in self.warm],
            "cold_seconds": [round(s, 4) for s in self.cold],
            "warm_median": _round(self.warm_median(), 4),
            "cold_median": _round(self.cold_median(), 4),
            "peak_rss_mib": _round(self.peak_rss_mib(), 1),
            "rss_kib": self.rss_kib,
            "error": self.error,
            "skipped": self.skipped,
            **self.extra,
        }


@dataclass
class Report:
    """The benchmark's configuration and results, passed to every section."""

    tree_root: Path
    tree: dict[str, Any]
    rounds: int
    cold_rounds: int
    cold: bool  # cold-cache runs requested and possible
    cold_note: str
    timeout: float
    real_tree: Path | None = None  # a real directory whose snapshot size is shown beside
    baseline: Path | None = None  # an earlier (1M) result whose peak RSS figures are compared
    tools: dict[str, ToolResult] = field(default_factory=dict)
    sections: dict[str, Any] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def add_tool(self, name: str, argv: Sequence[str]) -> ToolResult:
        """Register a tool (table rows keep registration order)."""
        result = ToolResult(name, list(argv))
        self.tools[name] = result
        return result


def _round(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def timed_run(
    report: Report,
    result: ToolResult,
    argv: Sequence[str | os.PathLike[str]],
    *,
    cold: bool = False,
    warmup: bool = False,
    capture_stdout: bool = False,
) -> Measurement | None:
    """Run ``argv`` once and record it on ``result``; ``None`` (and ``result.error``) on failure.

    ``cold`` drops the page cache first; a ``warmup`` run counts towards peak RSS but not time.
    """
    if cold:
        drop_caches()
    label = "warm-up" if warmup else ("cold" if cold else "warm")
    try:
        m = measure(argv, capture_stdout=capture_stdout, timeout=report.timeout)
    except (MeasureError, OSError) as exc:
        result.error = str(exc)
    else:
        if m.returncode == 0:
            result.rss_kib.append(m.maxrss_kib)
            if not warmup:
                (result.cold if cold else result.warm).append(m.seconds)
            print(
                f"  {result.name:<11} {label:<8} {m.seconds:9.3f} s {m.maxrss_kib / 1024:8.1f} MiB"
            )
            return m
        result.error = f"exit {m.returncode}: {_tail(m.stderr)}"
    print(f"  {result.name:<11} {label:<8} FAILED: {result.error}")
    return None


def _tool_path(name: str) -> str:
    usr_bin = Path("/usr/bin") / name
    return str(usr_bin) if usr_bin.exists() else (shutil.which(name) or name)


# --------------------------------------------------------------------------- baselines


def measure_baselines(report: Report) -> None:
    """du, find, and ncdu/gdu where installed: one warm-up, then ``rounds`` warm runs each."""
    root = str(report.tree_root)
    du_bin = _tool_path("du")
    du = report.add_tool("du", [du_bin, "-s", root])
    # the warm-up passes also give the reference totals the scan is checked against
    for flag, key in (("-sB1", "du_alloc_bytes"), ("-sb", "du_apparent_bytes")):
        m = timed_run(report, du, [du_bin, flag, root], warmup=True, capture_stdout=True)
        if m is not None:
            du.extra[key] = int(m.stdout.split()[0])
    if du.error is None:
        for _ in range(report.rounds):
            timed_run(report, du, du.argv)

    tools = [("find", [_tool_path("find"), root, "-printf", FIND_FORMAT])]
    for name, args in (("ncdu", ["-o", "/dev/null", root]), ("gdu", ["-n", root])):
        exe = shutil.which(name)
        if exe is None:
            print(f"{name}: not installed, skipped")
            report.add_tool(name, [name, *args]).skipped = "not installed"
        else:
            tools.append((name, [exe, *args]))
    for name, argv in tools:
        result = report.add_tool(name, argv)
        if timed_run(report, result, argv, warmup=True) is not None:
            for _ in range(report.rounds):
                if timed_run(report, result, argv) is None:
                    break

    if report.cold and du.error is None:
        for _ in range(report.cold_rounds):
            timed_run(report, du, du.argv, cold=True)


# --------------------------------------------------------------------------- sections

Section = Callable[[Path, Path, Report], None]


def _parse_scan(result: ToolResult, m: Measurement) -> dict[str, Any] | None:
    text = m.stdout.decode(errors="replace").strip()
    candidates = [text, *[ln for ln in reversed(text.splitlines()) if ln.startswith("{")]]
    for candidate in candidates:
        try:
            out = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(out, dict):
            missing = [k for k in SCAN_KEYS if k not in out]
            if missing:
                result.error = f"scan --json output lacks {missing}"
                break
            return out
    else:
        result.error = f"scan --json printed no JSON object: {text[:200]!r}"
    print(f"  {result.name:<11} FAILED: {result.error}")
    return None


def _snapshot_bytes(out: dict[str, Any], store: Path) -> int | None:
    path = Path(str(out["snapshot_path"]))
    if not path.is_absolute() and (store / path).exists():
        path = store / path
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*.parquet") if p.is_file())
    if path.is_file():
        return path.stat().st_size
    return None


def scan_section(tree_root: Path, store_dir: Path, report: Report) -> None:
    """``hygiene-nb scan ROOT --store STORE --json``: warm (fresh store per round) and cold.

    The untimed warm-up scans into ``store_dir / "shared"``, which later sections can read.
    """
    exe = Path(sys.executable).with_name("hygiene-nb")

    def argv(store: Path | str) -> list[str]:
        return [str(exe), "scan", str(tree_root), "--store", str(store), "--json"]

    result = report.add_tool("hygiene-nb", argv("STORE"))
    if not exe.exists():
        result.error = f"console script not found at {exe} (is the package installed?)"
        print(f"  hygiene-nb  FAILED: {result.error}")
        return
    shared = store_dir / "shared"
    shared.mkdir(parents=True, exist_ok=True)
    m = timed_run(report, result, argv(shared), warmup=True, capture_stdout=True)
    out = _parse_scan(result, m) if m is not None else None
    if out is None:
        return
    generated = _statistics(out, shared)  # of the warm-up's snapshot, which stays
    report.sections["scan"] = {
        "warmup_output": out,
        "shared_store": str(shared),
        "tree_statistics": generated,
    }
    checks = result.extra.setdefault("checks", {})
    du = report.tools["du"].extra
    for key, theirs, label in (
        ("entries", report.tree["entries"], "find | wc -l"),
        ("tree_alloc", du.get("du_alloc_bytes"), "du -sB1"),
        ("tree_bytes", du.get("du_apparent_bytes"), "du -sb"),
    ):
        ok = out[key] == theirs
        checks[key] = {"scan": out[key], "reference": theirs, "match": ok}
        print(f"  check: scan {key} {out[key]} vs {label} {theirs}: {'ok' if ok else 'MISMATCH'}")

    snap_sizes: list[int] = result.extra.setdefault("snapshot_bytes", [])
    internal: dict[str, list[float]] = result.extra.setdefault(
        "scan_reported_seconds", {"warm": [], "cold": []}
    )
    entries: list[int] = result.extra.setdefault("scan_entries", [])
    runs = [False] * report.rounds + ([True] * report.cold_rounds if report.cold else [])
    for cold in runs:
        store = Path(tempfile.mkdtemp(prefix="store-", dir=store_dir))
        try:
            m = timed_run(report, result, argv(store), cold=cold, capture_stdout=True)
            out = _parse_scan(result, m) if m is not None else None
            if out is None:
                return
            size = _snapshot_bytes(out, store)
            if size is None:
                result.error = f"snapshot_path {out['snapshot_path']!r} does not exist"
                print(f"  hygiene-nb  FAILED: {result.error}")
                return
            snap_sizes.append(size)
            entries.append(int(out["entries"]))
            internal["cold" if cold else "warm"].append(float(out["seconds"]))
        finally:
            shutil.rmtree(store, ignore_errors=True)
    real: dict[str, Any] = {}
    if report.real_tree is not None:
        real = _real_tree_size(exe, report.real_tree, store_dir)
        report.sections["scan"]["real_tree"] = real
    _print_statistics(generated, real.get("tree_statistics"), report.real_tree)
    warmup = report.sections["scan"]["warmup_output"]  # its snapshot stays; the rounds' do not
    report.sections["scan"]["formats"] = _format_sizes(warmup, shared, store_dir)


def _format_sizes(out: dict[str, Any], shared: Path, store_dir: Path) -> dict[str, Any]:
    """Snapshot bytes per entry without format 2's columns (before) and with them (after): the
    warm-up's snapshot rewritten both ways, then a small tree of two owners (bench/formats.py)."""
    path = Path(str(out["snapshot_path"]))
    rewrites = Path(tempfile.mkdtemp(prefix="formats-", dir=store_dir))
    try:
        bench_tree = format_bytes(path if path.is_absolute() else shared / path, rewrites)
    finally:
        shutil.rmtree(rewrites, ignore_errors=True)
    rows = {"bench_tree": bench_tree, "two_owners": two_owner_bytes(store_dir)}
    print(f"  {'snapshot bytes / entry':<56} {'format 1':>9} {'format 2':>9} {'cost':>6}")
    for key, label in (("bench_tree", "this tree"), ("two_owners", "two-owner tree")):
        row = rows[key]
        if "skipped" in row:
            print(f"  {label:<56} skipped: {row['skipped']}")
            continue
        label = f"{label} ({row['entries']:,} entries)"
        print(
            f"  {label:<56} {row['format_1_bytes_per_entry']:9.2f} "
            f"{row['format_2_bytes_per_entry']:9.2f} {row['format_2_cost']:+6.2f}"
        )
        columns = ", ".join(f"{k} {v:.2f}" for k, v in row["column_bytes_per_entry"].items())
        print(f"    of which {columns}")
    return rows


def _statistics(out: dict[str, Any], store: Path) -> dict[str, float]:
    path = Path(str(out["snapshot_path"]))
    return {
        k: round(v, 4)
        for k, v in tree_statistics(path if path.is_absolute() else store / path).items()
    }


def _print_statistics(
    generated: dict[str, float], real: dict[str, float] | None, tree: Path | None
) -> None:
    """The generated tree beside the real one on what decides a snapshot's size."""
    name = str(tree)[-12:] if tree else "real tree"
    print(f"  {'tree statistics (bench/README.md)':<56} {'generated':>9} {name:>12}")
    for key, label in STATISTICS.items():
        theirs = f"{real[key]:12.0%}" if real else f"{'-':>12}"
        print(f"  {label:<56} {generated[key]:9.0%} {theirs}")


def _real_tree_size(exe: Path, tree: Path, store_dir: Path) -> dict[str, Any]:
    """Snapshot bytes per entry on a real directory (not a target: what a real tree costs).

    Also its ``tree_statistics``, to set beside the generated tree's.
    """
    if not tree.is_dir():
        print(f"  real tree {tree}: not a directory, skipped")
        return {"path": str(tree), "skipped": "not a directory"}
    store = Path(tempfile.mkdtemp(prefix="store-real-", dir=store_dir))
    try:
        done = subprocess.run(
            [str(exe), "scan", str(tree), "--store", str(store), "--json"],
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if done.returncode not in (0, 4):
            print(f"  real tree {tree}: scan failed ({done.stderr.strip()[-200:]}), skipped")
            return {"path": str(tree), "skipped": "scan failed"}
        out = json.loads(done.stdout)
        size = _snapshot_bytes(out, store) or 0
        per = size / max(1, int(out["entries"]))
        print(
            f"  real tree {tree}: {int(out['entries']):,} entries, {per:.2f} B/entry "
            "(not a target; shown for comparison)"
        )
        return {
            "path": str(tree),
            "entries": out["entries"],
            "bytes_per_entry": round(per, 2),
            "tree_statistics": _statistics(out, store),
        }
    finally:
        shutil.rmtree(store, ignore_errors=True)


# Later issues append classification, plan building and executor timing here.
SECTIONS: list[Section] = [
    scan_section,
    load_section,
    classify_section,
    plan_section,
    executor_section,
    views_section,
]


def section_names() -> list[str]:
    """The names ``--sections`` takes: each section's function name without ``_section``."""
    return [_name(s) for s in SECTIONS if s is not scan_section]


def _name(section: Section) -> str:
    return getattr(section, "__name__", repr(section)).removesuffix("_section")


def choose_sections(names: str) -> list[Section]:
    """The scan section and the sections ``names`` lists (comma-separated; empty: all).

    Raises:
        ValueError: a name is not a section's.
    """
    wanted = {n.strip() for n in names.split(",") if n.strip()}
    unknown = wanted - set(section_names())
    if unknown:
        raise ValueError(
            f"unknown section {', '.join(sorted(unknown))}; the sections are "
            f"{', '.join(section_names())} (the scan always runs)"
        )
    return [s for s in SECTIONS if s is scan_section or not wanted or _name(s) in wanted]


# --------------------------------------------------------------------------- summary


def evaluate_targets(report: Report) -> dict[str, dict[str, Any]]:
    """Each target's value, goal and status (PASS, MISS, or SKIP when it could not be measured)."""
    du = report.tools.get("du")
    hnb = report.tools.get("hygiene-nb")
    hnb_ok = hnb is not None and hnb.ok
    values: dict[str, float | None] = dict.fromkeys(key for key, *_ in TARGETS)
    if hnb is not None and hnb_ok and du is not None:
        du_warm, du_cold = du.warm_median(), du.cold_median()
        warm, cold = hnb.warm_median(), hnb.cold_median()
        values["warm_ratio"] = du_warm / warm if du_warm and warm else None
        values["cold_ratio"] = du_cold / cold if du_cold and cold else None
        values["peak_rss_mib"] = hnb.peak_rss_mib()
        sizes, entries = hnb.extra.get("snapshot_bytes"), hnb.extra.get("scan_entries")
        if sizes and entries:
            values["bytes_per_entry"] = statistics.median(sizes) / max(1, entries[-1])
    targets: dict[str, dict[str, Any]] = {}
    for key, label, op, goal in TARGETS:
        value = values[key]
        if value is None:
            skip = key == "cold_ratio" and hnb_ok and not report.cold
            status = "SKIP" if skip else "MISS"
        else:
            status = "PASS" if (value >= goal if op == ">=" else value <= goal) else "MISS"
        targets[key] = {"label": label, "op": op, "goal": goal, "value": value, "status": status}
    targets.update(views_targets(report))  # keys "views_*"
    return targets


def print_report(report: Report, targets: dict[str, dict[str, Any]]) -> None:
    """The human-readable table and targets."""
    du = report.tools.get("du")
    du_warm = du.warm_median() if du else None
    du_cold = du.cold_median() if du else None

    def num(value: float | None, fmt: str) -> str:
        width = int(fmt.split(".")[0] or 0)
        return f"{'-':>{width}}" if value is None else format(value, fmt)

    def ratio(base: float | None, value: float | None) -> float | None:
        return base / value if base and value else None

    tree = report.tree
    print()
    print(
        f"tree: {tree['entries']:,} entries ({tree['files']:,} files, {tree['dirs']:,} dirs, "
        f"{tree['hardlinks']:,} hard links, {tree['symlinks']:,} symlinks) at {report.tree_root}"
    )
    print(f"warm: median of {report.rounds} after one warm-up; cold: {report.cold_note}")
    header = (
        f"{'tool':<12} {'warm s':>9} {'du/tool':>8} {'peak RSS MiB':>13} "
        f"{'cold s':>9} {'du/tool':>8}  notes"
    )
    print(header)
    print("-" * len(header))
    for result in report.tools.values():
        if result.skipped:
            print(f"{result.name:<12} {result.skipped}, skipped")
            continue
        warm, cold = result.warm_median(), result.cold_median()
        notes = []
        if result.name == "hygiene-nb":
            sizes, entries = result.extra.get("snapshot_bytes"), result.extra.get("scan_entries")
            if sizes and entries:
                bpe = statistics.median(sizes) / max(1, entries[-1])
                notes.append(f"{bpe:.2f} B/entry ({statistics.median(sizes) / MIB:.1f} MiB)")
            internal = result.extra.get("scan_reported_seconds", {})
            if internal.get("warm"):
                notes.append(f"scan-reported {statistics.median(internal['warm']):.3f} s warm")
        if result.error:
            notes.append(f"ERROR: {result.error.split(' | ')[-1][:120]}")
        print(
            f"{result.name:<12} {num(warm, '9.3f')} {num(ratio(du_warm, warm), '8.2f')} "
            f"{num(result.peak_rss_mib(), '13.1f')} {num(cold, '9.3f')} "
            f"{num(ratio(du_cold, cold), '8.2f')}  {'; '.join(notes)}"
        )
    print()
    print(f"{'target':<30} {'value':>9} {'goal':>9}  result")
    for key, t in targets.items():
        if key.startswith("views_"):
            continue  # the views stage's own table, below
        note = f" ({report.cold_note})" if t["status"] == "SKIP" else ""
        goal = f"{t['op']} {t['goal']}"
        print(f"{t['label']:<30} {num(t['value'], '9.2f')} {goal:>9}  {t['status']}{note}")
    print_views(report, targets)
    for error in report.errors:
        print(f"error: {error}")


def machine_info() -> dict[str, Any]:
    """Where the numbers came from."""
    info: dict[str, Any] = {
        "cpus": os.cpu_count(),
        "kernel": platform.release(),
        "python": platform.python_version(),
        "ncdu": shutil.which("ncdu"),
        "gdu": shutil.which("gdu"),
    }
    try:
        du_version = subprocess.run(
            [_tool_path("du"), "--version"], capture_output=True, text=True, check=False
        ).stdout
        info["du"] = du_version.splitlines()[0] if du_version else None
    except OSError:
        info["du"] = None
    return info


# --------------------------------------------------------------------------- main


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        return int(value)
    except ValueError:
        return int(float(value))  # 1e6


def compile_package() -> Path:
    """Write the bytecode of ``hygiene_nb`` (and of ``bench``) where Python looks for it.

    An installed package has its bytecode cached; an editable one gets it the first time each
    module is imported, unless ``PYTHONDONTWRITEBYTECODE`` is set, and then every process
    compiles the package again (about 0.3 s on the project's VM). Each timed command here
    reads what this writes, whatever the environment says.
    """
    import hygiene_nb

    package = Path(hygiene_nb.__file__).parent
    for directory in (package, Path(__file__).parent):
        compileall.compile_dir(directory, quiet=1)
    return package


def main(argv: list[str] | None = None) -> int:
    """Command line entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m bench.run", description="hygiene-nb scan vs du/find on a generated tree"
    )
    parser.add_argument(
        "--entries",
        type=int,
        default=_env_int("BENCH_ENTRIES", DEFAULT_ENTRIES),
        help="tree size as `find | wc -l` counts (default: $BENCH_ENTRIES or 1,000,000)",
    )
    parser.add_argument("--rounds", type=int, default=3, help="timed warm rounds per tool")
    parser.add_argument(
        "--cold-rounds", type=int, default=None, help="timed cold rounds (default: rounds - 1)"
    )
    parser.add_argument(
        "--dir",
        type=Path,
        default=Path(os.environ.get("BENCH_DIR") or DEFAULT_DIR),
        help=f"where trees and scratch stores live (default: $BENCH_DIR or {DEFAULT_DIR})",
    )
    parser.add_argument("--seed", type=int, default=42, help="tree generator seed")
    parser.add_argument(
        "--keep",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep the generated tree for the next run (default; regenerating 1M takes minutes)",
    )
    parser.add_argument(
        "--cold",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also measure with a dropped page cache (needs root)",
    )
    parser.add_argument("--timeout", type=float, default=3600.0, help="per-command timeout, s")
    parser.add_argument(
        "--real-tree",
        type=Path,
        default=Path("/usr"),
        help="a real directory whose snapshot bytes/entry is shown beside the generated tree's "
        "(default /usr; '' to skip)",
    )
    parser.add_argument(
        "--sections",
        default=os.environ.get("BENCH_SECTIONS", ""),
        help="comma-separated sections to run after the baselines and the scan, which always run "
        f"(default: $BENCH_SECTIONS, else all: {', '.join(section_names())})",
    )
    parser.add_argument(
        "--results",
        default=None,
        help="where to write this run's BENCH_JSON as a file (default: DIR/bench-N-sSEED.json; "
        "'' writes none)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=Path(os.environ["BENCH_BASELINE"]) if os.environ.get("BENCH_BASELINE") else None,
        help="an earlier result (its --results file, or saved output with its BENCH_JSON line) "
        "whose peak RSS figures each command's are compared with (default: $BENCH_BASELINE, "
        "else DIR/bench-1000000-sSEED.json when --entries is over 1,000,000)",
    )
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 if any target is MISS or not measured"
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be >= 1")
    try:
        sections = choose_sections(args.sections)
    except ValueError as exc:
        parser.error(str(exc))

    bench_dir: Path = args.dir.resolve()
    bench_dir.mkdir(parents=True, exist_ok=True)
    results = (
        bench_dir / f"bench-{args.entries}-s{args.seed}.json"
        if args.results is None
        else (Path(args.results) if args.results else None)
    )
    baseline = args.baseline
    if baseline is None and args.entries > DEFAULT_ENTRIES:
        baseline = bench_dir / f"bench-{DEFAULT_ENTRIES}-s{args.seed}.json"
    tree_root = bench_dir / f"tree-{args.entries}-s{args.seed}"
    print(f"bytecode: {compile_package()} compiled (every timed process reads it)", flush=True)
    print(f"tree: {tree_root} ({args.entries:,} entries, seed {args.seed})", flush=True)
    tree = generate_tree(tree_root, args.entries, args.seed)
    if not tree["reused"]:
        print(f"tree generated in {tree['seconds']:.1f} s", flush=True)

    if args.cold:
        cold, cold_note = cold_cache_status()
        if not cold:
            print(f"cold cache: skipped, {cold_note}")
    else:
        cold, cold_note = False, "--no-cold given"
    cold_rounds = args.cold_rounds if args.cold_rounds is not None else max(1, args.rounds - 1)
    report = Report(
        tree_root=tree_root,
        tree=tree,
        rounds=args.rounds,
        cold_rounds=cold_rounds,
        cold=cold,
        cold_note=cold_note if cold else f"skipped: {cold_note}",
        timeout=args.timeout,
        real_tree=args.real_tree if str(args.real_tree) not in ("", ".") else None,
        baseline=baseline,
    )

    store_dir = Path(tempfile.mkdtemp(prefix="stores-", dir=bench_dir))
    try:
        print("baselines:", flush=True)
        measure_baselines(report)
        for section in sections:
            name = getattr(section, "__name__", repr(section))
            print(f"{name}:", flush=True)
            try:
                section(tree_root, store_dir, report)
            except Exception as exc:  # noqa: BLE001 - a broken section must not lose the rest
                traceback.print_exc()
                report.errors.append(f"{name}: {exc!r}")
    finally:
        shutil.rmtree(store_dir, ignore_errors=True)

    targets = evaluate_targets(report)
    print_report(report, targets)
    if args.keep:
        print(f"\nkeeping the tree at {tree_root} (regenerating it is slow; --no-keep deletes it)")
    else:
        shutil.rmtree(tree_root, ignore_errors=True)
        print(f"\nremoved the tree at {tree_root}")
    payload = {
        "entries": args.entries,
        "seed": args.seed,
        "rounds": report.rounds,
        "cold_rounds": report.cold_rounds if report.cold else 0,
        "cold": report.cold_note,
        "tree": tree,
        "machine": machine_info(),
        "tools": {name: result.to_json() for name, result in report.tools.items()},
        "targets": {k: {**t, "value": _round(t["value"], 4)} for k, t in targets.items()},
        "sections": report.sections,
        "errors": report.errors,
    }
    text = json.dumps(payload, ensure_ascii=False, default=str)
    if results is not None:
        results.write_text(text + "\n")
        print(f"results written to {results}")
    print("BENCH_JSON " + text, flush=True)
    if args.strict and any(t["status"] in ("MISS", NOT_MEASURED) for t in targets.values()):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
