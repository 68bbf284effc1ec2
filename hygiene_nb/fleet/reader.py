"""Reading a fleet dataset: the marked partitions into relations, and the engines that query them.

``read_fleet`` lists the completion markers (never a glob over the dataset), keeps the hosts
that match, and builds the ``scans`` and ``owners`` relations from the markers and the list of
``dirs`` files they name. A partition whose files are there without its marker (a publish in
progress, or one that was interrupted) is not read; it is counted in ``skipped``.

Two engines run the same SQL: DuckDB, embedded (a directory or an object store, read through
``pyarrow.fs``), and Spark SQL (``pip install 'hygiene-nb[spark]'``; a directory only: its S3
connector is a separate download).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import tempfile
import warnings
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hygiene_nb.errors import FleetTooNew, FleetUnusable, UsageError
from hygiene_nb.fleet.dataset import FLEET_FORMAT, Dest, Partition, fleet_format_of

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "ENGINES",
    "Fleet",
    "Skipped",
    "read_fleet",
    "read_marker",
    "run_sql",
    "spark_can_read",
    "stop_spark",
]

ENGINES = ("duckdb", "spark")
_RISKS = ("safe", "caution", "personal", "high", "unknown")


@dataclass(frozen=True)
class Skipped:
    """A partition not read, and why (``partition-incomplete``, ``partition-damaged``)."""

    code: str
    partition: str
    message: str


@dataclass
class Fleet:
    """The marked partitions of a fleet dataset, as relations the questions read."""

    dest: Dest
    markers: list[dict[str, Any]]
    dirs_files: list[str]  # paths on ``dest.fs`` of the dirs files of the markers kept
    skipped: list[Skipped] = field(default_factory=list)

    def scans(self) -> pa.Table:
        """One row per published scan (``SCANS_SCHEMA``)."""
        import pyarrow as pa

        rows = [_scan_row(m) for m in self.markers]
        return pa.Table.from_pylist(rows, schema=SCANS_SCHEMA())

    def owners(self) -> pa.Table:
        """One row per owner of each published scan that names them (not redacted)."""
        import pyarrow as pa

        part = Partition
        rows = []
        for m in self.markers:
            p = part(*_partition_values(m["partition"]))
            for o in m.get("owners") or []:
                rows.append(
                    {
                        "host": p.host,
                        "root": p.root,
                        "scan": p.scan,
                        "owner": str(o["owner"]),
                        "alloc": int(o["alloc"]),
                        "files": int(o["files"]),
                    }
                )
        return pa.Table.from_pylist(rows, schema=OWNERS_SCHEMA())


def SCANS_SCHEMA() -> pa.Schema:
    """The ``scans`` relation's columns."""
    import pyarrow as pa

    i64, s = pa.int64(), pa.string()
    return pa.schema(
        [("host", s), ("root", s), ("root_path", s), ("scan", s)]
        + [(c, i64) for c in ("started_s", "started_us", "finished_s")]
        + [(c, i64) for c in ("entries", "files", "errors")]
        + [(c, i64) for c in ("bytes", "alloc", "fs_free", "fs_total")]
        + [(f"{r}_alloc", i64) for r in _RISKS]
        + [(c, i64) for c in ("reclaimable_alloc", "reclaimable_caution_alloc", "stale_alloc")]
        + [("cleanliness", i64), ("partial", pa.bool_()), ("redacted", pa.bool_())]
        + [("depth_limit", i64)]
    )


def OWNERS_SCHEMA() -> pa.Schema:
    """The ``owners`` relation's columns."""
    import pyarrow as pa

    i64, s = pa.int64(), pa.string()
    return pa.schema(
        [("host", s), ("root", s), ("scan", s), ("owner", s), ("alloc", i64), ("files", i64)]
    )


def DIRS_SCHEMA() -> pa.Schema:
    """The ``dirs`` files' columns (``hygiene_nb.fleet.publish``)."""
    import pyarrow as pa

    i64, s = pa.int64(), pa.string()
    return pa.schema(
        [("host", s), ("root", s), ("scan", s), ("path", s), ("key", s), ("depth", pa.int32())]
        + [(c, i64) for c in ("bytes", "alloc", "files", "latest_mtime_ns")]
        + [("partial", pa.bool_()), ("holds", s)]
    )


def _partition_values(key: str) -> tuple[str, str, str]:
    host, root, scan = (piece.split("=", 1)[1] for piece in key.split("/"))
    return host, root, scan


def _microseconds(text: str | None) -> int | None:
    """An ISO time as integer microseconds since the epoch: what orders a root's scans."""
    if not text:
        return None
    moment = datetime.fromisoformat(text)
    return int(moment.timestamp()) * 1_000_000 + moment.microsecond


def _seconds(text: str | None) -> int | None:
    if not text:
        return None
    return int(datetime.fromisoformat(text).timestamp())


def _scan_row(marker: dict[str, Any]) -> dict[str, Any]:
    host, root, scan = _partition_values(marker["partition"])
    record, fig = marker["scan"], marker["figures"]
    row: dict[str, Any] = {
        "host": host,
        "root": root,
        "root_path": marker["root"],
        "scan": scan,
        "started_s": _seconds(record.get("started_at")),
        "started_us": _microseconds(record.get("started_at")),
        "finished_s": _seconds(record.get("finished_at")),
        "entries": fig["entries"],
        "files": fig["files"],
        "errors": fig["errors"],
        "bytes": fig["bytes"],
        "alloc": fig["alloc"],
        "fs_free": fig["fs_free"],
        "fs_total": fig["fs_total"],
        "reclaimable_alloc": fig["reclaimable_alloc"],
        "reclaimable_caution_alloc": fig["reclaimable_caution_alloc"],
        "stale_alloc": fig["stale_alloc"],
        "cleanliness": fig["cleanliness"],
        "partial": bool(fig["partial"]),
        "redacted": bool(marker["redacted"]),
        "depth_limit": int(marker["depth"]),
    }
    for risk in _RISKS:
        row[f"{risk}_alloc"] = int(fig["risk_alloc"].get(risk, 0))
    return row


def _scan_started(scan_id: str) -> int | None:
    """When a scan started, from its id (``sYYYYmmddTHHMMSSZ-…``), else None."""
    try:
        return int(
            datetime.strptime(scan_id[1:17], "%Y%m%dT%H%M%S").replace(tzinfo=UTC).timestamp()
        )
    except ValueError:
        return None


_READERS = 16  # markers read at once (an object store answers each in tens of milliseconds)


def read_fleet(dest: Dest, *, hosts: str | None = None, since_s: int = 0) -> Fleet:
    """The marked partitions of ``dest``, of the hosts ``hosts`` (a glob), since ``since_s``.

    Both are pruned by the markers' names (host, and the scan id's time, with a day's margin):
    only the markers kept are read, and only the matching hosts' ``dirs`` files are listed. Of
    those, only each host and root's two latest scans whose ``dirs`` file is there are used,
    since no question reads older ones. A marker that is damaged, or that a newer hygiene-nb
    wrote, is not read: it is listed in ``skipped`` (``partition-damaged``,
    ``partition-too-new``), so one host's scan never stops the fleet's questions.

    Raises:
        NotAFleet, FleetTooNew: ``dest`` is not a fleet dataset this code reads.
        FleetUnusable: the dataset cannot be listed or read.
    """
    from concurrent.futures import ThreadPoolExecutor

    dest.check_marker()
    marked, wanted = set(), []
    for part, relative in dest.published():
        marked.add(part.key)
        if hosts is not None and not fnmatch.fnmatchcase(part.host, hosts):
            continue
        started = _scan_started(part.scan)
        if since_s and started is not None and started < since_s - 86_400:
            continue
        wanted.append((part, relative))
    with ThreadPoolExecutor(_READERS) as pool:
        read = list(pool.map(lambda pr: _marker_or_skip(dest, *pr), wanted))
    skipped = [r for r in read if isinstance(r, Skipped)]
    markers = [r for r in read if not isinstance(r, Skipped)]
    present = set(_dirs_files(dest, hosts))
    latest: dict[tuple[str, str], list[tuple[int, str, dict[str, Any]]]] = {}
    for marker in markers:
        host, root, scan = _partition_values(marker["partition"])
        started = marker["scan"].get("started_at")
        if (_seconds(started) or 0) >= since_s:
            latest.setdefault((host, root), []).append((_microseconds(started) or 0, scan, marker))
    files, damaged = [], set()
    for (host, _), scans in sorted(latest.items()):
        used = 0
        for _, _, marker in sorted(scans, key=lambda t: (t[0], t[1]), reverse=True):
            if used == 2:
                break
            dirs = marker["files"]["dirs"]  # checked by read_marker: its own partition's
            if dirs not in present:
                damaged.add(marker["partition"])
                skipped.append(
                    Skipped(
                        "partition-damaged",
                        marker["partition"],
                        f"its marker names {dirs}, which is missing; publish it again from "
                        f"host {host}.",
                    )
                )
                continue
            files.append(dest.path(dirs))
            used += 1
    kept = [m for m in markers if m["partition"] not in damaged]
    for relative in sorted(present):
        key = relative.removeprefix("dirs/").rsplit("/", 1)[0]
        if key not in marked:
            skipped.append(
                Skipped(
                    "partition-incomplete",
                    key,
                    "its files are there without its completion marker (being published, or "
                    "interrupted): not read until a publish completes it.",
                )
            )
    return Fleet(dest, kept, files, skipped)


def _dirs_files(dest: Dest, hosts: str | None) -> list[str]:
    """The ``dirs`` files of the hosts matching ``hosts``: one listing per host directory."""
    if hosts is None:
        return dest.files_under("dirs")
    found = []
    for entry in dest.entries_under("dirs"):
        host = entry.removeprefix("dirs/").removeprefix("host=")
        if entry.startswith("dirs/host=") and fnmatch.fnmatchcase(host, hosts):
            found.extend(dest.files_under(entry))
    return found


def _marker_or_skip(dest: Dest, part: Partition, relative: str) -> dict[str, Any] | Skipped:
    """The checked marker, or why its partition is not read."""
    try:
        return read_marker(dest, part, relative)
    except FleetTooNew as exc:
        return Skipped("partition-too-new", part.key, exc.message)
    except FleetUnusable as exc:
        return Skipped("partition-damaged", part.key, exc.message)


def read_marker(dest: Dest, part: Partition, relative: str | None = None) -> dict[str, Any]:
    """The completion marker of ``part``, checked against damage.

    Every figure a question reads is there, of its column's type, and the files it names are
    its own partition's.

    Raises:
        FleetTooNew: a newer hygiene-nb published it (checked first: a newer format may name
            its figures differently, and is not damage).
        FleetUnusable: it cannot be read, or is damaged.
    """
    import pyarrow as pa

    from hygiene_nb.scan.snapshot import FORMAT_VERSION

    relative = relative or part.marker
    try:
        marker = json.loads(dest.read_bytes(relative))
        version = fleet_format_of(marker)
        snapshot_format = int(marker["scan"].get("format_version", 1))
    except (ValueError, KeyError, TypeError, AttributeError, OverflowError, RecursionError) as exc:
        raise _damaged(dest, relative, part, exc) from exc
    if version > FLEET_FORMAT or snapshot_format > FORMAT_VERSION:
        raise FleetTooNew(
            f"{dest.text}/{relative} was published by a newer hygiene-nb (fleet format "
            f"{version}, snapshot format {snapshot_format}); upgrade hygiene-nb to read it "
            "(it is left unchanged)."
        )
    try:
        if marker["partition"] != part.key:
            raise ValueError(f"it names {marker['partition']}")
        pa.Table.from_pylist([_scan_row(marker)], schema=SCANS_SCHEMA())
        for owner in marker.get("owners") or []:
            int(owner["alloc"]), int(owner["files"]), str(owner["owner"])
        named = marker["files"]
        if "dirs" not in named:
            raise KeyError("dirs")
        for table, path in named.items():
            if path != part.file(table):  # its own partition's files, never one elsewhere
                raise ValueError(f"its {table} file is {path!r}, not {part.file(table)}")
    except (
        ValueError,
        KeyError,
        TypeError,
        AttributeError,
        OverflowError,
        RecursionError,
        pa.ArrowException,
    ) as exc:
        raise _damaged(dest, relative, part, exc) from exc
    return dict(marker)


def _damaged(dest: Dest, relative: str, part: Partition, exc: Exception) -> FleetUnusable:
    return FleetUnusable(
        f"the completion marker {dest.text}/{relative} is damaged ({exc}); publish that scan "
        f"again from host {part.host}."
    )


def run_sql(
    fleet: Fleet, sqls: dict[str, str], *, engine: str = "duckdb", spark_master: str | None = None
) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """Run each SQL text over the fleet's relations: name → (columns, rows).

    Raises:
        UsageError: an unknown engine, or Spark asked to read an object store.
        FleetUnusable: the engine cannot read the dataset.
    """
    if engine == "duckdb":
        return _duckdb(fleet, sqls)
    if engine == "spark":
        return _spark(fleet, sqls, spark_master or "local[*]")
    raise UsageError(f"--engine {engine!r}: choose one of {', '.join(ENGINES)}.")


def _dirs_table(fleet: Fleet) -> Any:
    import pyarrow.dataset as ds

    if not fleet.dirs_files:
        return DIRS_SCHEMA().empty_table()
    return ds.dataset(
        fleet.dirs_files, schema=DIRS_SCHEMA(), format="parquet", filesystem=fleet.dest.fs
    )


def _duckdb(
    fleet: Fleet, sqls: dict[str, str]
) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    import duckdb

    from hygiene_nb.scan.snapshot import query_engine

    try:
        with query_engine() as con:
            con.register("scans", fleet.scans())
            con.register("owners", fleet.owners())
            con.register("dirs", _dirs_table(fleet))
            out = {}
            for name, sql in sqls.items():
                result = con.sql(sql)
                out[name] = (list(result.columns), [tuple(r) for r in result.fetchall()])
            return out
    except (duckdb.Error, OSError) as exc:
        raise FleetUnusable(
            f"DuckDB cannot read the fleet dataset {fleet.dest.text}: {exc}"
        ) from exc


def spark_can_read(dest: Dest) -> None:
    """Refuse an object store DEST for Spark (its S3 connector is a separate download).

    Raises:
        UsageError: ``dest`` is not a directory.
    """
    if not dest.local:
        raise UsageError(
            f"Spark reads a fleet dataset on a directory only ({dest.text} is an object "
            "store, and Spark's S3 connector is a separate download): use --engine duckdb, or "
            "copy the dataset to a directory Spark's workers share."
        )


def _spark(
    fleet: Fleet, sqls: dict[str, str], master: str
) -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    spark_can_read(fleet.dest)
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ImportError as exc:
        raise UsageError(
            "--engine spark needs pyspark: pip install 'hygiene-nb[spark]' (and Java 17 or "
            "later on the machine)."
        ) from exc
    spark = _session(master)
    try:
        scans = _spark_frame(spark, fleet.scans())
        owners = _spark_frame(spark, fleet.owners())
        if fleet.dirs_files:
            # the files the markers name, each read as itself: host, root and scan are columns
            # in them (no partition discovery), and no character of a path is a glob
            dirs = (
                spark.read.schema(_spark_schema(DIRS_SCHEMA()))
                .option("recursiveFileLookup", "true")
                .parquet(*(_hadoop_path(path) for path in fleet.dirs_files))
            )
        else:
            dirs = _spark_frame(spark, DIRS_SCHEMA().empty_table())
        scans.createOrReplaceTempView("scans")
        owners.createOrReplaceTempView("owners")
        dirs.createOrReplaceTempView("dirs")
        out = {}
        for name, sql in sqls.items():
            frame = spark.sql(sql)
            out[name] = (list(frame.columns), [tuple(r) for r in frame.collect()])
        return out
    except (PySparkException, Py4JError) as exc:
        said = _ESCAPED.sub(r"\1", _first_line(exc))  # the paths as they are on disk
        raise FleetUnusable(
            f"Spark cannot read the fleet dataset {fleet.dest.text}: {said}. Check that the "
            "machines Spark runs on see the dataset at this path, or use --engine duckdb."
        ) from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


# Hadoop expands these in a path it is given (``[1]`` matches ``1``); a backslash keeps each
_GLOB = re.compile(r"([\\{}\[\]*?])")
_ESCAPED = re.compile(r"\\([\\{}\[\]*?])")


def _hadoop_path(path: str) -> str:
    """A local path as Spark reads it literally, glob characters escaped.

    It names the local filesystem, never the cluster's default (HDFS).
    """
    return "file://" + _GLOB.sub(r"\\\1", os.path.abspath(path))


@dataclass
class _Spark:
    master: str
    session: Any
    scratch: tempfile.TemporaryDirectory[str]


_SPARK: list[_Spark] = []  # the session this process started (one SparkContext per process)


def _session(master: str) -> Any:
    """The Spark session on ``master``, started on first use (it costs seconds) and kept.

    Spark allows one context per process: asking for another master stops the one started
    before. A session the caller started (a notebook's, a cluster's) is used as it is, and left
    running. Nothing lands in the working directory: the SQL warehouse is a private temporary
    directory (removed by ``stop_spark``), the catalog is in memory (no Derby metastore, no
    ``derby.log``), and Spark's scratch files go where ``spark.local.dir`` says (``/tmp``).

    Raises:
        UsageError: Spark cannot start (no Java).
    """
    from pyspark.errors import PySparkException
    from pyspark.sql import SparkSession

    if _SPARK and (_SPARK[0].master != master or _SPARK[0].session.sparkContext._jsc is None):
        stop_spark()
    if not _SPARK:
        active = SparkSession.getActiveSession()
        if active is not None:
            return active
        scratch = tempfile.TemporaryDirectory(prefix="hygiene-nb-spark-")
        where = scratch.name
        builder = (
            SparkSession.builder.master(master)
            .appName("hygiene-nb fleet")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.catalogImplementation", "in-memory")
            .config("spark.sql.warehouse.dir", f"file://{where}/warehouse")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.sql.ansi.enabled", "true")
        )
        cores = _local_cores(master)
        if cores:  # on one machine, a shuffle split finer than its cores only costs tasks
            builder = builder.config("spark.sql.shuffle.partitions", str(cores))
        try:
            with warnings.catch_warnings():
                # pyspark warns on import that it was tested with pandas 2, not 3; the fleet
                # hands it no pandas
                warnings.filterwarnings(
                    "ignore", message="PySpark does not yet fully support", category=FutureWarning
                )
                spark = _started_quietly(builder, Path(where) / "spark-driver.log")
        except PySparkException as exc:
            said = _last_line((Path(where) / "spark-driver.log").read_bytes())
            scratch.cleanup()
            raise UsageError(
                "--engine spark could not start Spark, which needs Java 17 or later on PATH or "
                f"in $JAVA_HOME (pyspark said: {_first_line(exc)}{'; ' + said if said else ''})."
                " Install Java, or use --engine duckdb."
            ) from exc
        spark.sparkContext.setLogLevel("ERROR")
        _SPARK.append(_Spark(master, spark, scratch))
    return _SPARK[0].session


def _started_quietly(builder: Any, log: Path) -> Any:
    """``builder.getOrCreate()`` with the driver's standard error going to ``log``.

    The JVM inherits the descriptor it starts with: its start-up lines (the host's name, native
    libraries, the shell's log level) and its own log go to that file, not among the fleet's
    answers. What goes wrong in a query still reaches Python as an exception.
    """
    import sys

    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(log, "ab") as handle:
            os.dup2(handle.fileno(), 2)
            return builder.getOrCreate()
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _last_line(data: bytes) -> str:
    """The last line of a log that says something, as text ('' for none)."""
    lines = [line.strip() for line in data.decode("utf-8", "replace").splitlines()]
    said = [line for line in lines if line]
    return said[-1][:300] if said else ""


def _local_cores(master: str) -> int | None:
    """How many cores a ``local``, ``local[N]`` or ``local[*]`` master runs on (else None)."""
    found = re.fullmatch(r"local(?:\[(\d+|\*)(?:,\s*\d+)?\])?", master.strip())
    if not found:
        return None
    count = found.group(1)
    if count is None:
        return 1
    return int(count) if count != "*" else os.cpu_count() or 1


def stop_spark() -> None:
    """Stop the Spark session the fleet started (if any) and remove its scratch directory.

    The next Spark question starts a new one. Nothing to do without one.
    """
    while _SPARK:
        running = _SPARK.pop()
        try:
            running.session.stop()
        finally:
            running.scratch.cleanup()


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql import types as T

    kinds = {
        "int64": T.LongType(),
        "int32": T.IntegerType(),
        "string": T.StringType(),
        "bool": T.BooleanType(),
    }
    return T.StructType([T.StructField(f.name, kinds[str(f.type)], nullable=True) for f in schema])


def _spark_frame(spark: Any, table: pa.Table) -> Any:
    """A small relation built here (``scans``, ``owners``) as a Spark frame, through Arrow.

    Its column types (``int32``, ``bool``) and nulls arrive as they are, through no Python
    objects on the way.
    """
    return spark.createDataFrame(table)
