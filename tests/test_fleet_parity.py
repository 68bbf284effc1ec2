"""The fleet's questions give the same rows on DuckDB and on Spark SQL.

One fleet for the module: three hosts, two roots each, three scans each, of real trees (files of
varied sizes, nested directories, a hard link, a file two years old, a file of another owner),
changed between scans, each scan published by the real ``hygiene-nb publish`` (one host with
``--redact``). Every question is asked of it on both engines, Spark on ``local[2]``, started
once; the rows must be identical (same order, same Python values) and not empty, and a few
figures are checked against ``hygiene-nb summary`` and the files on disk.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import pwd
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import cli
from hygiene_nb.errors import FleetUnusable
from hygiene_nb.fleet import reader
from hygiene_nb.fleet.answers import COMMANDS, DEFAULT_TOP, ask
from hygiene_nb.fleet.dataset import open_dest
from hygiene_nb.fleet.questions import QUESTIONS, render_sql
from tests.helpers import du_bytes, write

HOSTS = ("host1", "host2", "host3")
REDACTED = "host3"
ROOTS = ("projects", "media")
ROUNDS = 3
MASTER = "local[2]"


def free_uid(start: int = 4242) -> int:
    """A uid no account has: its files' owner is shown as ``uid N``."""
    uid = start
    while True:
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid
        uid += 1


OTHER_UID = free_uid()
TWO_YEARS = 2 * 365 * 86_400


def run(*args: str) -> dict[str, Any]:
    """``hygiene-nb ARGS --json`` in this process: its JSON object (the command must succeed)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            cli.main([*args, "--json"])
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
    assert code == 0, (args, out.getvalue())
    result: dict[str, Any] = json.loads(out.getvalue())
    return result


@dataclass
class Scan:
    host: str
    root: Path
    round: int
    scan_id: str
    summary: dict[str, Any]


@dataclass
class Built:
    dest: Path
    scans: list[Scan] = field(default_factory=list)
    old_files: dict[tuple[str, Path], Path] = field(default_factory=dict)
    owned_files: dict[tuple[str, Path], Path] = field(default_factory=dict)

    def latest(self, host: str, root: Path, back: int = 0) -> Scan:
        mine = [s for s in self.scans if s.host == host and s.root == root]
        return mine[-1 - back]


def alloc(path: Path) -> int:
    return os.lstat(path).st_blocks * 512


def build_tree(root: Path, h: int, r: int, built: Built, host: str) -> None:
    """The first state of a root: sizes differ by host and root so no two rows tie by chance."""
    k = 1 + h * 2 + r
    write(root / "docs" / "report.txt", 3_000 * k)
    os.link(root / "docs" / "report.txt", root / "docs" / "report-link.txt")
    write(root / "docs" / "deep" / "er" / "est" / "file.bin", 20_000 + 1_000 * k)
    write(root / "src" / "__pycache__" / "main.cpython-311.pyc", 9_000 + 100 * k)
    write(root / "src" / "main.py", 1_500)
    write(root / "node_modules" / "pkg" / "index.js", 5_000 * k)
    write(root / "Ünïcode" / "名前.txt", 700 + k)
    write(root / "big.dat", 50_000 * k)
    (root / "empty").mkdir()
    old = write(root / "old" / "archive.tar", 60_000 + 10_000 * k)
    then = time.time() - TWO_YEARS
    os.utime(old, (then, then))
    built.old_files[host, root] = old
    if os.geteuid() == 0:
        owned = write(root / "shared" / "theirs.bin", 30_000 + 4_096 * k)
        os.chown(owned, OTHER_UID, OTHER_UID)
        built.owned_files[host, root] = owned


def change_tree(root: Path, h: int, r: int, round_no: int) -> None:
    """What changes before the next scan: files grow, appear and go, in nested directories."""
    k = 1 + h * 2 + r
    if round_no == 1:
        with (root / "big.dat").open("ab") as out:
            out.write(b"g" * 40_000 * k)
        write(root / "data" / "incoming" / f"new-{r}.bin", 80_000 + 7_000 * k)
        (root / "src" / "main.py").unlink()
    else:
        write(root / "docs" / "deep" / "more.bin", 150_000 * k)
        write(root / "data" / "incoming" / "later.bin", 25_000 * (h + 1))
        (root / "docs" / "report-link.txt").unlink()
        (root / "node_modules" / "pkg" / "index.js").unlink()


def wait_past(second: int) -> None:
    """Sleep until the clock is past ``second``."""
    while time.time() < second + 1:
        time.sleep(0.05)


@pytest.fixture(scope="module")
def module_environ(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """What ``clean_environ`` does for a test, for this module's fixtures."""
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("HOME", str(home))
        env.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
        env.delenv("HYGIENE_NB_STORE", raising=False)
        yield


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, module_environ: None) -> Built:
    base = tmp_path_factory.mktemp("fleet")
    out = Built(base / "dest [fleet]")  # a glob character in the name: engines read it literally
    roots = {
        (host, name): base / host / name for host in HOSTS for name in ROOTS
    }  # fmt: skip
    for round_no in range(ROUNDS):
        if round_no:  # a round's scans start in a later second than the round's before
            wait_past(int(time.time()))
        for h, host in enumerate(HOSTS):
            store = base / host / "store"
            for r, name in enumerate(ROOTS):
                root = roots[host, name]
                if round_no == 0:
                    build_tree(root, h, r, out, host)
                else:
                    change_tree(root, h, r, round_no)
                scan = run("scan", str(root), "--store", str(store))
                summary = run(
                    "summary", str(root), "--snapshot", scan["scan_id"], "--store", str(store)
                )
                extra = ["--redact"] if host == REDACTED else []
                published = run(
                    "publish", str(out.dest), str(root), "--snapshot", scan["scan_id"],
                    "--host", host, "--store", str(store), *extra,
                )  # fmt: skip
                assert published["status"] == "published"
                out.scans.append(Scan(host, root, round_no, scan["scan_id"], summary))
    return out


Table = tuple[list[str], list[tuple[Any, ...]]]


@dataclass
class Answers:
    duckdb: dict[str, Table]  # every question: as ``ask`` asks it, @since, @empty
    spark: dict[str, Table]
    json: dict[str, dict[str, Any]]  # engine → ``hygiene-nb fleet DEST summary --json``
    missing_file: FleetUnusable  # what Spark said of a dirs file gone after the markers were read
    workdir: Path


def java_or_fail() -> None:
    home = os.environ.get("JAVA_HOME")
    if not (home and Path(home, "bin", "java").exists()) and shutil.which("java") is None:
        pytest.fail(
            "the Spark parity test needs Java 17 or later (java on PATH, or JAVA_HOME): "
            "install a JDK (apt-get install openjdk-17-jre-headless) and run it again."
        )


def since_last_round(built: Built, fleet: reader.Fleet) -> int:
    """The start of the last round's first scan: ``since`` it, each root has one scan."""
    scans = fleet.scans()
    started = dict(zip(scans["scan"].to_pylist(), scans["started_s"].to_pylist(), strict=True))
    cut = min(started[s.scan_id] for s in built.scans if s.round == ROUNDS - 1)
    assert cut > max(started[s.scan_id] for s in built.scans if s.round < ROUNDS - 1)
    return int(cut)


@pytest.fixture(scope="module")
def answers(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Answers:
    """Every question on both engines: as ``ask`` asks it, with ``since`` leaving one scan of
    each root (no growth: nulls) and ``top`` 3, and of a fleet with nothing published; and the
    summary command's JSON. Spark is started once, in an empty working directory, and stopped
    when its answers are in."""
    java_or_fail()
    dest = str(built.dest)
    fleet = reader.read_fleet(open_dest(dest))
    cut = since_last_round(built, fleet)
    sqls = {q: render_sql(q, since=0, top=DEFAULT_TOP) for q in QUESTIONS}
    sqls |= {f"{q}@since": render_sql(q, since=cut, top=3) for q in QUESTIONS}
    duck = reader.run_sql(fleet, sqls, engine="duckdb")
    empty_dest = open_dest(str(tmp_path_factory.mktemp("empty-fleet")))
    empty_dest.ensure_marker()  # a fleet dataset nothing is published in yet
    empty = reader.read_fleet(empty_dest)
    empty_sqls = {f"{q}@empty": sql for q, sql in sqls.items() if "@" not in q}
    duck |= reader.run_sql(empty, empty_sqls, engine="duckdb")
    for command, questions in COMMANDS.items():  # what ask runs is what is compared
        asked = ask(dest, command, engine="duckdb").tables
        assert asked == {q: duck[q] for q in questions}
    json_out = {"duckdb": run("fleet", dest, "summary")}
    workdir = tmp_path_factory.mktemp("spark-cwd")
    with pytest.MonkeyPatch.context() as env:
        # a JVM that answers small queries and exits: compiled quickly beats compiled best
        env.setenv("JAVA_TOOL_OPTIONS", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
        env.chdir(workdir)
        try:
            spark = reader.run_sql(fleet, sqls, engine="spark", spark_master=MASTER)
            spark |= reader.run_sql(empty, empty_sqls, engine="spark", spark_master=MASTER)
            json_out["spark"] = run(
                "fleet", dest, "summary", "--engine", "spark", "--spark-master", MASTER
            )
            gone = replace(fleet, dirs_files=[*fleet.dirs_files, f"{dest}/dirs/gone.parquet"])
            with pytest.raises(FleetUnusable) as missing:
                reader.run_sql(
                    gone, {"history": sqls["history"]}, engine="spark", spark_master=MASTER
                )
        finally:
            reader.stop_spark()
    return Answers(duck, spark, json_out, missing.value, workdir)


def rows(answers: dict[str, Table], question: str) -> Table:
    return answers[question]


def typed(table: Table) -> list[list[tuple[str, Any]]]:
    """Each row's values with their Python types: 1 and True, or 1 and 1.0, are not the same."""
    return [[(type(v).__name__, v) for v in row] for row in table[1]]


def test_every_command_covers_every_question() -> None:
    assert sorted(q for qs in COMMANDS.values() for q in qs) == sorted(QUESTIONS)


@pytest.mark.parametrize("variant", ["", "@since", "@empty"])
@pytest.mark.parametrize("question", QUESTIONS)
def test_spark_gives_the_rows_duckdb_gives(answers: Answers, question: str, variant: str) -> None:
    duck, spark = answers.duckdb[question + variant], answers.spark[question + variant]
    if variant == "@empty" or (question, variant) == ("top_dirs", "@since"):
        assert duck[1] == [] and duck[0] == answers.duckdb[question][0]
    else:
        assert duck[1], f"{question}{variant} has no rows: the fixture should give it some"
    assert spark[0] == duck[0]
    assert typed(spark) == typed(duck)


def test_since_leaves_one_scan_of_each_root_and_no_growth(answers: Answers) -> None:
    columns, table = answers.duckdb["summary@since"]
    growth, previous = columns.index("growth"), columns.index("previous_s")
    assert len(table) == len(HOSTS) * len(ROOTS)
    assert {(row[growth], row[previous]) for row in table} == {(None, None)}
    assert len(answers.duckdb["history@since"][1]) == len(HOSTS) * len(ROOTS)


def test_top_dirs_is_cut_at_top(answers: Answers) -> None:
    assert len(answers.duckdb["top_dirs"][1]) == DEFAULT_TOP


def test_the_json_of_the_command_is_the_same_on_both_engines(answers: Answers) -> None:
    duck, spark = answers.json["duckdb"], answers.json["spark"]
    assert (duck["engine"], spark["engine"]) == ("duckdb", "spark")
    assert duck["questions"] == spark["questions"] and duck["questions"]["summary"]
    assert json.dumps(duck["questions"]) == json.dumps(spark["questions"])


def test_spark_leaves_nothing_in_the_working_directory(answers: Answers) -> None:
    assert sorted(os.listdir(answers.workdir)) == []
    assert not reader._SPARK  # stopped: the next Spark question starts its own


def test_a_file_spark_cannot_read_is_a_coded_error(built: Built, answers: Answers) -> None:
    error = answers.missing_file
    assert error.code == "fleet-unusable"
    assert f"{built.dest}/dirs/gone.parquet" in error.message


def test_without_java_the_spark_engine_says_to_install_it(built: Built) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "fleet", str(built.dest), "--engine", "spark",
         "--json"],
        capture_output=True, text=True, timeout=120,
        env={**os.environ, "JAVA_HOME": str(built.dest.parent / "no-java-here")},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "bad-usage" and "Java 17" in error["message"]
    assert "Traceback" not in done.stderr


def test_history_has_one_row_per_published_scan(built: Built, answers: Answers) -> None:
    columns, table = rows(answers.duckdb, "history")
    got = [dict(zip(columns, row, strict=True)) for row in table]
    assert len(got) == len(built.scans) == len(HOSTS) * len(ROOTS) * ROUNDS
    assert sorted(r["scan"] for r in got) == sorted(s.scan_id for s in built.scans)
    by_scan = {s.scan_id: s for s in built.scans}
    for r in got:
        scan = by_scan[r["scan"]]
        assert (r["host"], r["root"]) == (scan.host, str(scan.root))
        assert (r["entries"], r["alloc"]) == (scan.summary["entries"], scan.summary["tree_alloc"])


def test_summary_is_each_roots_latest_scan_and_its_growth(built: Built, answers: Answers) -> None:
    columns, table = rows(answers.duckdb, "summary")
    got = {(r[0], r[1]): dict(zip(columns, r, strict=True)) for r in table}
    assert len(got) == len(HOSTS) * len(ROOTS)
    for host in HOSTS:
        for name in ROOTS:
            root = built.dest.parent / host / name
            latest, before = built.latest(host, root), built.latest(host, root, 1)
            row = got[host, str(root)]
            assert row["scan"] == latest.scan_id
            assert row["alloc"] == latest.summary["tree_alloc"] == du_bytes(root, apparent=False)
            assert row["entries"] == latest.summary["entries"]
            assert row["growth"] == latest.summary["tree_alloc"] - before.summary["tree_alloc"]
            assert row["growth"] > 0
            assert row["redacted"] is (host == REDACTED)
            assert row["partial"] is False


def test_growth_sums_each_hosts_roots_from_first_to_latest(built: Built, answers: Answers) -> None:
    columns, table = rows(answers.duckdb, "growth")
    got = {r[0]: dict(zip(columns, r, strict=True)) for r in table}
    assert sorted(got) == sorted(HOSTS)
    for host in HOSTS:
        roots = [built.dest.parent / host / name for name in ROOTS]
        first = sum(built.latest(host, root, ROUNDS - 1).summary["tree_alloc"] for root in roots)
        last = sum(built.latest(host, root).summary["tree_alloc"] for root in roots)
        assert (got[host]["roots"], got[host]["alloc"]) == (len(ROOTS), last)
        assert got[host]["growth"] == last - first


def test_top_dirs_grew_by_what_du_says_they_hold_now(built: Built, answers: Answers) -> None:
    columns, table = rows(answers.duckdb, "top_dirs")
    got = [dict(zip(columns, r, strict=True)) for r in table]
    assert got and all(r["growth"] == r["alloc"] - r["before_alloc"] > 0 for r in got)
    for r in got:
        assert r["alloc"] == du_bytes(Path(r["path"]), apparent=False), r
    assert [r["growth"] for r in got] == sorted((r["growth"] for r in got), reverse=True)


def test_stale_is_the_old_files_of_each_hosts_latest_scans(built: Built, answers: Answers) -> None:
    columns, table = rows(answers.duckdb, "stale")
    got = {r[0]: dict(zip(columns, r, strict=True)) for r in table}
    for host in HOSTS:
        old = [f for (h, _), f in built.old_files.items() if h == host]
        assert got[host]["stale"] == sum(alloc(f) for f in old) > 0


def test_owners_are_those_of_the_hosts_that_are_not_redacted(
    built: Built, answers: Answers
) -> None:
    columns, table = rows(answers.duckdb, "owners")
    got = [dict(zip(columns, r, strict=True)) for r in table]
    assert {r["host"] for r in got} == set(HOSTS) - {REDACTED}
    if os.geteuid() != 0:
        return  # no file of another owner could be made
    for host in set(HOSTS) - {REDACTED}:
        theirs = [r for r in got if r["host"] == host and r["owner"] == f"uid {OTHER_UID}"]
        owned = [f for (h, _), f in built.owned_files.items() if h == host]
        assert [(r["alloc"], r["files"]) for r in theirs] == [(sum(alloc(f) for f in owned), 2)]


def test_risk_lists_every_class_of_every_latest_scan(answers: Answers) -> None:
    _, table = rows(answers.duckdb, "risk")
    assert len(table) == len(HOSTS) * len(ROOTS) * 5
    assert {r[2] for r in table if r[3] > 0} >= {"safe", "unknown"}


@pytest.mark.parametrize(
    ("master", "cores"),
    [("local", 1), ("local[2]", 2), ("local[3, 4]", 3), ("local[*]", os.cpu_count()),
     ("spark://head:7077", None), ("yarn", None)],
)  # fmt: skip
def test_a_local_master_shuffles_into_as_many_parts_as_it_has_cores(
    master: str, cores: int | None
) -> None:
    assert reader._local_cores(master) == cores


def test_a_path_spark_reads_names_the_local_filesystem_with_its_globs_escaped() -> None:
    assert reader._hadoop_path("/data/fleet [a]/{b}*?.parquet") == (
        "file:///data/fleet \\[a\\]/\\{b\\}\\*\\?.parquet"
    )
