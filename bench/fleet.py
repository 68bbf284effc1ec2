"""The fleet benchmark: HOSTS hosts x 2 scans x ENTRIES entries, every question on each engine.

``python -m bench.fleet [--hosts 20] [--entries 500000] [--engines duckdb,spark]``

Generates (or reuses) the benchmark tree of ENTRIES entries, scans it, adds a directory of new
files and scans again (the growth the questions find), removes that directory, then publishes
both scans under HOSTS host names into one fleet dataset on a directory: HOSTS x 2 x ENTRIES
snapshot rows. Then each question runs as the command a person types
(``hygiene-nb fleet DEST Q --engine E --json``), timed with its process tree's peak RSS (the JVM
included for Spark), and one ad hoc question that reads every snapshot row (the risk mix joined
from ``snapshots`` and ``classified`` on ``row_no``) runs on each engine in-process. Prints a
table and writes the figures as JSON (``--results``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.gen_tree import generate_tree
from bench.measure import measure

HNB = [sys.executable, "-m", "hygiene_nb"]
QUESTIONS = ("summary", "history", "growth", "risk", "stale", "owners")


def _run(*args: str) -> dict[str, Any]:
    done = subprocess.run([*HNB, *args, "--json"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(args)} failed: {done.stdout} {done.stderr}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _prepare(base: Path, hosts: int, entries: int) -> tuple[Path, dict[str, Any]]:
    tree = base / f"tree-{entries}-s42"
    generate_tree(tree, entries, 42)
    store, dest = base / f"fleet-store-{entries}", base / f"fleet-{hosts}x{entries}"
    for old in (store, dest):
        if old.exists():
            shutil.rmtree(old)
    growth = tree / "fleet-growth"
    if growth.exists():  # left by an interrupted run
        shutil.rmtree(growth)
    first = _run("scan", str(tree), "--store", str(store))
    growth.mkdir()
    for i in range(64):
        (growth / f"new-{i}.bin").write_bytes(os.urandom(64 * 1024))
    try:
        second = _run("scan", str(tree), "--store", str(store))
    finally:
        shutil.rmtree(growth)
    publish: list[float] = []
    for n in range(hosts):
        for scan in (first, second):
            started = time.perf_counter()
            _run(
                "publish", str(dest), "--snapshot", scan["scan_id"],
                "--store", str(store), "--host", f"host{n:02d}",
            )  # fmt: skip
            publish.append(time.perf_counter() - started)
    on_disk = sum(p.stat().st_size for p in dest.rglob("*") if p.is_file())
    files = sum(1 for p in dest.rglob("*") if p.is_file())
    facts = {
        "rows": hosts * (first["entries"] + second["entries"]),
        "partitions": hosts * 2,
        "bytes_on_disk": on_disk,
        "files": files,
        "publish_s_median": sorted(publish)[len(publish) // 2],
        "publish_s_max": max(publish),
    }
    return dest, facts


ADHOC = Path(__file__).with_name("_fleet_adhoc.py")


def _measure_cli(dest: Path, question: str, engine: str) -> dict[str, Any]:
    argv = [*HNB, "fleet", str(dest), question, "--engine", engine, "--json"]
    if engine == "spark":
        argv += ["--spark-master", "local[2]"]
    m = measure(argv, capture_stdout=True, sample_every=0.05, timeout=1800)
    if m.returncode != 0:
        raise SystemExit(f"fleet {question} on {engine}: {m.stderr.decode()[-2000:]}")
    answer = json.loads(m.stdout.splitlines()[-1])
    return {
        "seconds": round(m.seconds, 2),
        "tree_peak_mib": round((m.tree_peak_kib or m.maxrss_kib) / 1024, 1),
        "rows": sum(len(rows) for rows in answer["questions"].values()),
        "answer": answer["questions"],
    }


def _measure_adhoc(dest: Path, engine: str) -> dict[str, Any]:
    m = measure(
        [sys.executable, str(ADHOC), engine, str(dest)],
        capture_stdout=True, sample_every=0.05, timeout=3600,
    )  # fmt: skip
    if m.returncode != 0:
        raise SystemExit(f"ad hoc on {engine}: {m.stderr.decode()[-2000:]}")
    out = json.loads(m.stdout.splitlines()[-1])
    return {
        "seconds": round(m.seconds, 2),
        "query_seconds": round(out["seconds"], 2),
        "tree_peak_mib": round((m.tree_peak_kib or m.maxrss_kib) / 1024, 1),
        "answer": out["rows"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hosts", type=int, default=20)
    parser.add_argument("--entries", type=int, default=500_000)
    parser.add_argument("--engines", default="duckdb,spark")
    parser.add_argument("--dir", default="/tmp/hygiene-nb-bench")
    parser.add_argument("--results", default="")
    parser.add_argument(
        "--reuse", action="store_true", help="Ask the dataset a previous run published."
    )
    args = parser.parse_args(argv)
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    facts_file = base / f"fleet-{args.hosts}x{args.entries}.json"
    if args.reuse and facts_file.exists():
        dest = base / f"fleet-{args.hosts}x{args.entries}"
        facts = json.loads(facts_file.read_text())
    else:
        dest, facts = _prepare(base, args.hosts, args.entries)
        facts_file.write_text(json.dumps(facts))
    engines = args.engines.split(",")
    results: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load": os.getloadavg(),
        "hosts": args.hosts,
        "entries": args.entries,
        **facts,
        "questions": {},
        "adhoc": {},
    }
    for question in QUESTIONS:
        results["questions"][question] = {e: _measure_cli(dest, question, e) for e in engines}
        answers = [results["questions"][question][e].pop("answer") for e in engines]
        results["questions"][question]["same"] = all(a == answers[0] for a in answers)
        if args.results:  # what was measured so far survives a failure further on
            Path(args.results).write_text(json.dumps(results, indent=1) + "\n")
    adhoc = {e: _measure_adhoc(dest, e) for e in engines}
    answers = [adhoc[e].pop("answer") for e in engines]
    results["adhoc"] = {**adhoc, "same": all(a == answers[0] for a in answers)}
    print(
        f"fleet: {args.hosts} hosts x 2 scans x {args.entries:,} entries = {facts['rows']:,} "
        f"rows, {facts['files']} files, {facts['bytes_on_disk'] / 2**20:.0f} MiB; publish "
        f"median {facts['publish_s_median'] or float('nan'):.1f} s"
    )
    for question, by in results["questions"].items():
        cells = "  ".join(
            f"{e} {by[e]['seconds']:6.2f} s {by[e]['tree_peak_mib']:7.1f} MiB" for e in engines
        )
        print(f"  {question:8} {cells}  same: {by['same']}")
    cells = "  ".join(
        f"{e} {adhoc[e]['seconds']:6.2f} s {adhoc[e]['tree_peak_mib']:7.1f} MiB" for e in engines
    )
    print(f"  {'ad hoc':8} {cells}  same: {results['adhoc']['same']}")
    if args.results:
        Path(args.results).write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
