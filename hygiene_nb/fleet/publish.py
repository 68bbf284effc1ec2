"""Publishing: one finished scan of this host's store into a fleet dataset.

What a partition holds (``hygiene_nb.fleet.dataset`` has the layout):

- ``snapshots/…/part-0.parquet``: the snapshot file as the store has it, its footer metadata
  kept, with ``row_no`` (the row's place in the file) added so that any engine can join it to
- ``classified/…/part-0.parquet``: the kept classification (``classify.stored``), row for row,
  with the same ``row_no``;
- ``dirs/…/part-0.parquet``: every directory down to ``depth`` below the root, with its
  recursive sums and what it holds by risk, and the partition's ``host``, ``root``, ``scan``
  as columns: what the fleet's growth question reads;
- the completion marker, written last: the scan's record and the figures the summary gives
  for it (totals, risk mix, reclaimable, staleness, the cleanliness score) and its owners'
  bytes, each computed by the same library calls as ``hygiene-nb summary`` and
  ``summary --by owner``, with ages measured when the scan finished (so publishing again, or
  from another machine, gives the same figures).

``redact`` publishes aggregates only: the directories down to ``depth`` and the marker's
figures, without the snapshot, the verdicts, owner names or ids, the excludes or the cache
tags' paths. A scan whose marker is already there is not published again.
"""

from __future__ import annotations

import json
import os
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hygiene_nb import api
from hygiene_nb.checkpoints import checkpoint
from hygiene_nb.errors import (
    DestInsideStore,
    FleetTooNew,
    FleetUnusable,
    PublishedDifferently,
    SnapshotTooNew,
    StoreError,
    UsageError,
)
from hygiene_nb.fleet.dataset import FLEET_FORMAT, Dest, Partition, check_host, open_dest
from hygiene_nb.scan.index import ScanInfo, find_scan, root_slug
from hygiene_nb.store import utc_now

__all__ = ["DEFAULT_DEPTH", "MAX_DEPTH", "PublishResult", "check_publish", "publish"]

DEFAULT_DEPTH = 3
MAX_DEPTH = 64
_RISKS = ("safe", "caution", "personal", "high", "unknown")
# what a redacted marker keeps of the scan's record: no names below the root, no owners
_REDACTED_FIELDS = (
    "scan_id",
    "root",
    "host",
    "started_at",
    "finished_at",
    "entries",
    "errors",
    "partial",
    "tree_bytes",
    "tree_alloc",
    "tree_files",
    "fs_free",
    "fs_total",
    "walker",
    "tool_version",
    "format_version",
)


@dataclass(frozen=True)
class PublishResult:
    """What ``publish`` did: the partition, and whether it was published now or before."""

    dest: str
    partition: Partition
    root: str
    status: str  # "published" or "already-published"
    redacted: bool
    files: dict[str, int] = field(default_factory=dict)  # relative path → bytes written
    seconds: float = 0.0
    exit_code: int = 0

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` object."""
        return {
            "status": self.status,
            "dest": self.dest,
            "host": self.partition.host,
            "root": self.root,
            "scan_id": self.partition.scan,
            "partition": self.partition.key,
            "redacted": self.redacted,
            "files": self.files,
            "seconds": round(self.seconds, 3),
        }

    def text(self) -> str:
        """The line ``hygiene-nb publish`` prints."""
        from hygiene_nb.formatting import human_bytes

        if self.status == "already-published":
            return (
                f"{self.partition.scan} of {self.partition.host}:{self.root} is already in "
                f"{self.dest}; nothing was written."
            )
        written = sum(self.files.values())
        kind = "aggregates only (redacted)" if self.redacted else "snapshot and classification"
        return (
            f"published {self.partition.scan} of {self.partition.host}:{self.root} to "
            f"{self.dest} ({kind}: {len(self.files)} files, {human_bytes(written)}) "
            f"in {self.seconds:.1f} s"
        )


def publish(
    dest: str,
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    host: str | None = None,
    redact: bool = False,
    depth: int = DEFAULT_DEPTH,
    endpoint_url: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> PublishResult:
    """Publish one finished scan (the latest of ``root``, or ``scan_id``) into ``dest``.

    Raises:
        SnapshotNotFound: no scan matches.
        SnapshotTooNew: the snapshot's format is newer than this code.
        HostInvalid: the host name cannot name a partition.
        NotAFleet: ``dest`` holds something that is not a fleet dataset.
        FleetReadOnly: the store lies inside a fleet dataset.
        FleetUnusable: ``dest`` cannot be written.
    """
    from hygiene_nb.scan.snapshot import FORMAT_VERSION

    started = time.monotonic()
    if not 0 <= depth <= MAX_DEPTH:
        raise UsageError(f"--depth must be from 0 to {MAX_DEPTH}.")
    st = api.existing_store(store)
    info = find_scan(st, root=os.path.abspath(root) if root else None, scan_id=scan_id)
    # the index's record and the file's footer, before DEST is touched: either may be newer
    footer = _footer_format(info)
    version = footer if footer < 1 else max(info.format_version, footer)
    if not 1 <= version <= FORMAT_VERSION:
        raise SnapshotTooNew(
            f"snapshot {info.scan_id} is in format {version}, and this hygiene-nb "
            f"reads formats 1 to {FORMAT_VERSION}; upgrade hygiene-nb to publish it."
        )
    # an empty --host is refused, never taken for "not given"
    name = check_host(host if host is not None else (info.host or socket.gethostname()))
    part = Partition(name, root_slug(info.root), info.scan_id)
    target = open_dest(dest, endpoint_url=endpoint_url)
    if target.local:
        _refuse_store_dest(st, target)
    target.ensure_marker()
    before, whole = _published(target, part)
    if before is not None:  # its recorded form counts even where its files are damaged
        _same_publication(target, part, before, redact=redact, depth=depth)
        if whole:
            return PublishResult(dest, part, info.root, "already-published", redact)
    _not_under_another_host(target, part)
    say = progress or (lambda _text: None)
    files: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="hygiene-nb-publish-") as work:
        say("classifying and summarizing the scan")
        marker = _marker(st, info, part, redact=redact, depth=depth)
        local = Path(work)
        tables = {"dirs": _dirs_file(st, info, part, depth, local)}
        if not redact:
            say("copying the snapshot and its classification")
            tables.update(_row_numbered_files(st, info, local))
        for number, (table, source) in enumerate(tables.items()):
            if number:
                checkpoint("publish-between-files")
            relative = part.file(table)
            say(f"writing {relative}")
            target.put_file(relative, source)
            files[relative] = source.stat().st_size
        if redact:  # what an earlier, unfinished publish of the whole scan left is not kept
            target.clear_tables(part, ("snapshots", "classified"))
        marker["files"] = {table: part.file(table) for table in tables}
        checkpoint("publish-before-marker")
        data = json.dumps(marker, sort_keys=True, indent=1).encode() + b"\n"
        target.put_bytes(part.marker, data)  # last: the partition is complete
        files[part.marker] = len(data)
    return PublishResult(
        dest, part, info.root, "published", redact, files, time.monotonic() - started
    )


def check_publish(
    dest: str,
    *,
    store: api.StoreArg = None,
    host: str | None = None,
    endpoint_url: str | None = None,
) -> None:
    """What would refuse a publish into ``dest``, found without writing anything.

    ``scan --publish`` asks this before it scans, so a long scan is not followed by a refusal
    that was known before it began (the scan itself is kept whatever the publish then says).

    Raises:
        HostInvalid, DestInsideStore, NotAFleet, FleetTooNew, FleetUnusable: as ``publish``.
    """
    # the name the scan will record when none is given: this machine's, which may not do
    check_host(host if host is not None else socket.gethostname(), option="--publish-host")
    target = open_dest(dest, endpoint_url=endpoint_url)
    if target.local:
        _refuse_store_dest(api.existing_store(store), target)
    target.is_fleet_or_empty()


def _published(target: Dest, part: Partition) -> tuple[dict[str, Any] | None, bool]:
    """The marker of ``part`` as it reads (None: none, or damaged), and whether it is whole.

    Whole: every file the marker names is there with a Parquet footer that reads. A damaged
    marker, or one whose files are missing or cut short, is published again (what the
    reader's message for them says to do): the same scan's files replace what is there,
    marker last. One a newer hygiene-nb wrote is left as it is (an empty record, whole).
    """
    from hygiene_nb.fleet.reader import read_marker

    if not target.exists(part.marker):
        return None, False
    try:
        marker = read_marker(target, part)
    except FleetTooNew:
        return {}, True
    except FleetUnusable:
        return None, False
    return marker, all(target.parquet_whole(path) for path in marker["files"].values())


def _not_under_another_host(target: Dest, part: Partition) -> None:
    """Refuse a scan that the dataset already holds under another host name.

    Raises:
        PublishedDifferently: the same scan of the same root is published as another host's
            (every question would count it twice).
    """
    for other, _ in target.published():
        if (other.scan, other.root) == (part.scan, part.root) and other.host != part.host:
            raise PublishedDifferently(
                f"scan {part.scan} is already in {target.text} as host {other.host}'s; "
                f"published again as {part.host}'s, every fleet question would count it "
                f"twice. Nothing was written: publish it as --host {other.host}, or have the "
                f"dataset's keeper remove {other.marker} and its files first."
            )


def _same_publication(
    target: Dest, part: Partition, marker: dict[str, Any], *, redact: bool, depth: int
) -> None:
    """Refuse to call a scan published when it is there in another form than asked for.

    Raises:
        PublishedDifferently: it was published redacted and now is not, or the other way
            round, or to another depth.
    """
    if not marker:  # a newer hygiene-nb's: its form is its own
        return
    was_redacted, was_depth = bool(marker.get("redacted")), marker.get("depth")
    if was_redacted == redact and was_depth == depth:
        return
    form = "redacted (aggregates only)" if was_redacted else "whole (snapshot and verdicts)"
    raise PublishedDifferently(
        f"scan {part.scan} of host {part.host} is already in {target.text}, published {form} "
        f"to depth {was_depth}, and this publish asks for "
        f"{'redacted' if redact else 'whole'} to depth {depth}; nothing was written. A "
        "published scan is never changed in place: publish with the same options, or have the "
        f"dataset's keeper remove {part.marker} and its files first."
    )


def _refuse_store_dest(st: Any, target: Dest) -> None:
    """Refuse a DEST in a store or a quarantine: its marker would make the store a fleet's.

    Raises:
        DestInsideStore: DEST is, or lies inside, this store, another store or a quarantine.
    """
    from hygiene_nb.store import store_above

    found = store_above(target.base, st)
    if found is not None:
        raise DestInsideStore(
            f"{target.text} lies inside the hygiene-nb store or quarantine {found}; a fleet "
            "dataset there would make the store read-only (`fleet-is-read-only`) and mix "
            "published evidence with quarantined files. Publish into a directory outside "
            "any store, such as a shared one: `hygiene-nb publish /srv/fleet ROOT`."
        )


def _footer_format(info: ScanInfo) -> int:
    """The format its snapshot file's footer records (0: not a number, no format).

    Raises:
        StoreError: the snapshot file cannot be read.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hygiene_nb.scan.snapshot import snapshot_file, snapshot_format

    try:
        version = snapshot_format(pq.read_metadata(snapshot_file(info)))
    except (OSError, pa.ArrowException) as exc:
        raise StoreError(
            f"cannot read snapshot {info.scan_id} at {info.path}: {exc}; scan again, or prune "
            "the damaged snapshot."
        ) from exc
    return version


def _marker(
    st: Any, info: ScanInfo, part: Partition, *, redact: bool, depth: int
) -> dict[str, Any]:
    from hygiene_nb.classify.summary import STALE_DAYS

    summary = api.summarize(store=st, scan_id=info.scan_id, top=0, as_of_scan=True)
    record = {k: v for k, v in vars(info).items() if k != "path"}
    if redact:
        record = {k: record[k] for k in _REDACTED_FIELDS}
    record["host"] = part.host
    risk = {r: summary.risk[r].alloc if r in summary.risk else 0 for r in _RISKS}
    stale_alloc = _stale_alloc(st, info, STALE_DAYS)
    figures = {
        "entries": summary.entries,
        "files": summary.files,
        "dirs": summary.dirs,
        "errors": summary.errors,
        "partial": summary.partial,
        "bytes": summary.tree_bytes,
        "alloc": summary.tree_alloc,
        "fs_free": summary.fs_free,
        "fs_total": summary.fs_total,
        "risk_alloc": risk,
        "reclaimable_alloc": summary.reclaimable["safe"].alloc,
        "reclaimable_caution_alloc": summary.reclaimable["caution"].alloc,
        "stale_alloc": stale_alloc,
        "stale_days": STALE_DAYS,
        "cleanliness": (
            summary.cleanliness.score
            if summary.cleanliness and not summary.cleanliness.no_score
            else None
        ),
    }
    owners: list[dict[str, Any]] = []
    if not redact:
        from hygiene_nb.query.breakdowns import by_owner

        frame = by_owner(store=st, scan_id=info.scan_id, top_dirs=0, as_of_scan=True)
        owners = [
            {
                "owner": str(row["owner"]),
                "bytes": int(row["bytes"]),
                "alloc": int(row["alloc"]),
                "files": int(row["files"]),
            }
            for row in frame[["owner", "bytes", "alloc", "files"]].to_dict("records")
        ]
    return {
        "fleet_format": FLEET_FORMAT,
        "partition": part.key,
        "host": part.host,
        "root": info.root,
        "scan_id": info.scan_id,
        "redacted": redact,
        "depth": depth,
        "published_at": utc_now().isoformat(timespec="seconds"),
        "scan": record,
        "figures": figures,
        "owners": owners,
    }


def _stale_alloc(st: Any, info: ScanInfo, days: int) -> int:
    """Allocated bytes of the files no one modified in the ``days`` before the scan finished.

    Hard-linked files count once; excluded entries count nowhere.
    """
    from hygiene_nb.scan.snapshot import query_engine

    cutoff = api.scan_time_ns(info) - days * 86_400 * 10**9
    with query_engine() as con:
        api.open_entries(con, info, store=st, classified=False)
        row = con.execute(
            f"""
            SELECT CAST(coalesce(sum(alloc), 0) AS BIGINT) FROM (
              SELECT dev, inode, max(alloc) AS alloc FROM entries
              WHERE kind = 'file' AND NOT coalesce(excluded, false) AND mtime_ns < {int(cutoff)}
              GROUP BY dev, inode)
            """
        ).fetchone()
    return int(row[0]) if row else 0


def _dirs_file(st: Any, info: ScanInfo, part: Partition, depth: int, work: Path) -> Path:
    """The directories down to ``depth`` below the root, with their sums and content split."""
    from hygiene_nb.classify.queries import sql_literal
    from hygiene_nb.scan.snapshot import query_engine

    out = work / "dirs.parquet"
    with query_engine() as con:
        api.open_entries(con, info, store=st, now_ns=api.scan_time_ns(info))
        con.execute(
            f"""
            COPY (
              SELECT {sql_literal(part.host)} AS host, {sql_literal(part.root)} AS root,
                     {sql_literal(part.scan)} AS scan,
                     CASE WHEN parent IS NULL THEN name
                          ELSE CAST(parent AS VARCHAR) || '/' || name END AS path,
                     -- the exact path, where its text is an escaped stand-in (not UTF-8):
                     -- two names that read alike never share a key
                     CASE WHEN parent_raw IS NULL AND name_raw IS NULL
                          THEN 'u:' || CASE WHEN parent IS NULL THEN name
                                            ELSE CAST(parent AS VARCHAR) || '/' || name END
                          ELSE 'x:' || hex(CASE
                            WHEN parent IS NULL THEN coalesce(name_raw, encode(name))
                            ELSE coalesce(parent_raw, encode(CAST(parent AS VARCHAR)))
                                 || encode('/') || coalesce(name_raw, encode(name)) END)
                     END AS key,
                     depth,
                     CAST(tree_bytes AS BIGINT) AS bytes, CAST(tree_alloc AS BIGINT) AS alloc,
                     CAST(tree_files AS BIGINT) AS files,
                     CAST(tree_latest_mtime_ns AS BIGINT) AS latest_mtime_ns,
                     coalesce(partial, false) AS partial, CAST(content_risk AS VARCHAR) AS holds
              FROM entries
              WHERE kind = 'dir' AND depth <= {int(depth)} AND NOT coalesce(excluded, false)
              ORDER BY key
            ) TO {sql_literal(str(out))} (FORMAT parquet, COMPRESSION zstd)
            """
        )
    return out


def _row_numbered_files(st: Any, info: ScanInfo, work: Path) -> dict[str, Path]:
    """The snapshot and its verdicts as local files, each with ``row_no`` added."""
    from hygiene_nb.api.classification import stored_classification

    stored = stored_classification(st, info, None, now_ns=api.scan_time_ns(info), load=False)
    files = {
        "snapshots": _with_row_no(stored.snapshot_file, work / "snapshot.parquet", store_like=True)
    }
    verdicts = stored.verdicts
    if not isinstance(verdicts, Path):  # the store could not keep them: write them here
        import pyarrow.parquet as pq

        kept = work / "verdicts-in.parquet"
        pq.write_table(verdicts, kept, compression="zstd")
        verdicts = kept
    files["classified"] = _with_row_no(verdicts, work / "classified.parquet")
    return files


def _with_row_no(source: Path, out: Path, *, store_like: bool = False) -> Path:
    """``source`` rewritten row group by row group with ``row_no``; its footer metadata kept.

    With ``store_like`` it is written with the store's encodings (``parquet_writer``).
    """
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    from hygiene_nb.scan.snapshot import parquet_writer

    reader = pq.ParquetFile(source)
    footer = {k: v for k, v in (reader.metadata.metadata or {}).items() if k != b"ARROW:schema"}
    schema = reader.schema_arrow.append(pa.field("row_no", pa.int64()))
    schema = schema.with_metadata({**(schema.metadata or {}), **footer})
    offset = 0
    opened = (
        parquet_writer(out, schema)
        if store_like
        else pq.ParquetWriter(out, schema, compression="zstd")
    )
    with opened as writer:
        for group in range(reader.num_row_groups):
            table = reader.read_row_group(group)
            numbers = np.arange(offset, offset + table.num_rows, dtype=np.int64)
            column = pa.Array.from_buffers(
                pa.int64(), table.num_rows, [None, pa.py_buffer(numbers)]
            )
            writer.write_table(table.append_column("row_no", column).cast(schema))
            offset += table.num_rows
    return out
