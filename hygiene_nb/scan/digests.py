"""Entry digests: what a decision was made on, as one value per entry of a snapshot.

A decision records the snapshot it was made on and the entry's digest there. A plan made from a
later snapshot compares that digest with the entry's digest in its own snapshot: a directory
that gained a ``thesis.tex`` after it was marked delete has another digest, and is left out.

* A file's (or link's) digest hashes its name, kind, size, mtime, ctime and inode.
* A directory's digest hashes, in name order, the lines of its children and their own digests
  (a Merkle tree): any change anywhere below it changes it. The directory's own times are left
  out, so a ``chmod`` of the directory alone does not make a decision stale.
* A directory whose subtree was not read completely (an error, a budget cut, partial sums) has
  no digest: what was not seen cannot be compared, so a decision on it cannot be confirmed.
  Nor has the store or a quarantine directory (its bytes are summed, its entries not recorded),
  nor anything above it. An excluded directory is unseen in the same way (and so is everything
  above it); an excluded file was stat-ed, and its line is hashed like any other.

Directory digests are computed once per snapshot, the first time they are asked for, one
depth level at a time, and kept beside the snapshot in ``digests/host=…/root=…/scan=…/``
(never a cache that authorizes anything: the plan and the executor still re-check the disk).
Paths are compared on their exact bytes (``parent_raw``/``name_raw`` where present).
"""

from __future__ import annotations

import bisect
import hashlib
import io
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hygiene_nb.pathnames import raw_path
from hygiene_nb.scan.index import ScanInfo, digest_dir, partition_dir
from hygiene_nb.scan.snapshot import FORMAT_VERSION, query_engine, read_parquet
from hygiene_nb.store import Store, make_private_dir, write_private_file

__all__ = ["SnapshotDigests", "entry_digests"]

_FILE = "dirs.parquet"

# One row per entry: its exact path bytes, its parent's, and the line its parent hashes.
_ENTRIES = r"""
    SELECT depth, CAST(kind AS VARCHAR) AS kind,
           CASE WHEN parent IS NULL THEN NULL ELSE coalesce(parent_raw, encode(parent)) END AS p,
           CASE WHEN parent IS NULL THEN coalesce(name_raw, encode(name))
                WHEN parent = '/' THEN '/'::BLOB || coalesce(name_raw, encode(name))
                ELSE coalesce(parent_raw, encode(parent)) || '/'::BLOB
                     || coalesce(name_raw, encode(name)) END AS self,
           concat_ws(':', hex(coalesce(name_raw, encode(name))), CAST(kind AS VARCHAR),
                     CAST(size AS VARCHAR), CAST(mtime_ns AS VARCHAR),
                     coalesce(CAST(ctime_ns AS VARCHAR), '?'), CAST(inode AS VARCHAR)) AS line,
           coalesce(partial, false) OR error IS NOT NULL OR coalesce(budget_cut, false)
               OR coalesce(excluded, false) OR coalesce(mount_point, false) AS unseen,
           -- sums beyond the directory's own size: rows below it, or (the store, a quarantine)
           -- a subtree walked for its sums whose entries are not recorded
           CAST(kind AS VARCHAR) = 'dir' AND coalesce(tree_bytes, size) <> size AS holds
    FROM read_parquet(?, union_by_name = true)
"""


def _snapshot_file(store: Store, info: ScanInfo) -> str:
    return str(partition_dir(store, info) / "part-0.parquet")


# A level's children, each with the line its parent hashes (its own digest appended), in the
# order the parent hashes them. DuckDB sorts (and spills); Python hashes each parent's run.
_CHILD_LINES = """
    SELECT c.p, c.line || ':' || coalesce(cd.digest, '') AS l,
           c.kind = 'dir' AND cd.digest IS NULL AND c.self IS NOT NULL AS bad
    FROM e c LEFT JOIN d cd ON cd.self = c.self AND cd.depth = $depth
    WHERE c.depth = $depth
    ORDER BY c.p, c.line
"""
# A level's directories: NULL (unknown) when the directory or any child directory was not seen
# whole; the digest of no lines when it has no children.
_LEVEL = """
    INSERT INTO d
    SELECT e.self,
           CASE WHEN bool_or(e.unseen) OR bool_or(coalesce(g.bad, false))
                     OR (bool_or(e.holds) AND count(g.p) = 0)
                THEN NULL
                ELSE coalesce(any_value(g.digest), sha256(''))
           END,
           $depth
    FROM e LEFT JOIN hashed g ON g.p = e.self
    WHERE e.depth = $depth AND e.kind = 'dir'
    GROUP BY e.self
"""
_BATCH_ROWS = 65_536  # rows of a level's children Python holds at once


class _Runs:
    """Hashes of the runs of equal parents in a sorted stream of (parent, line, bad) batches.

    Each parent's lines are joined with newlines and hashed (what ``sha256(string_agg(...,
    chr(10) ORDER BY line))`` gives); a run may span batches, and is hashed as it comes.
    """

    def __init__(self) -> None:
        self.parents: list[pa.Array] = []
        self.digests: list[str] = []
        self.bad: list[np.ndarray[Any, np.dtype[np.bool_]]] = []
        self._open: tuple[bytes, Any, bool] | None = None  # parent, hasher, bad so far

    def add(self, batch: pa.RecordBatch) -> None:
        parents, lines = batch.column(0), batch.column(1).cast(pa.large_string())
        bad = pc.fill_null(batch.column(2), False).to_numpy(zero_copy_only=False)
        n = len(parents)
        if not n:
            return
        change = pc.not_equal(parents.slice(1), parents.slice(0, n - 1))
        starts = np.concatenate(
            [[0], np.flatnonzero(pc.fill_null(change, True).to_numpy(zero_copy_only=False)) + 1]
        ).astype(np.int64)
        ends = np.append(starts[1:], n)
        joined = pc.binary_join(
            pa.LargeListArray.from_arrays(pa.array(np.append(starts, n)), lines),
            pa.scalar("\n", pa.large_string()),
        ).cast(pa.large_binary())
        first = 0
        if self._open is not None:
            parent, hasher, was_bad = self._open
            if parents[0].as_py() == parent:  # the open run goes on in this batch
                hasher.update(b"\n" + joined[0].as_py())
                was_bad = was_bad or bool(bad[: ends[0]].any())
                if len(starts) == 1:
                    self._open = parent, hasher, was_bad
                    return
                first = 1
            self._close(parent, hasher, was_bad)
        last = len(starts) - 1  # the batch's last run may go on in the next one
        whole = slice(first, last)
        texts = joined.slice(first, last - first).to_pylist()
        self.digests.extend(hashlib.sha256(t).hexdigest() for t in texts)
        self.parents.append(parents.take(pa.array(starts[whole])))
        self.bad.append(
            np.maximum.reduceat(bad[: starts[last]], starts[whole]).astype(bool)
            if last > first
            else np.zeros(0, dtype=bool)
        )
        if last >= first:
            tail = joined[last].as_py()
            self._open = (
                parents[int(starts[last])].as_py(),
                hashlib.sha256(tail),
                bool(bad[starts[last] :].any()),
            )

    def _close(self, parent: bytes, hasher: Any, bad: bool) -> None:
        self.parents.append(pa.array([parent], pa.binary()))
        self.digests.append(hasher.hexdigest())
        self.bad.append(np.array([bad]))
        self._open = None

    def table(self) -> pa.Table:
        """One row per parent: ``p``, ``digest``, ``bad`` (a child directory has no digest)."""
        if self._open is not None:
            self._close(*self._open)
        return pa.table(
            {
                "p": pa.concat_arrays(self.parents) if self.parents else pa.array([], pa.binary()),
                "digest": pa.array(self.digests, pa.string()),
                "bad": pa.array(np.concatenate(self.bad) if self.bad else [], pa.bool_()),
            }
        )


def _directory_digests(store: Store, info: ScanInfo) -> pa.Table:
    """``(self, digest)`` of every directory of the snapshot, computed once and kept.

    One level at a time, deepest first: a level's children sorted by DuckDB (which spills to
    disk beyond its memory limit), each directory's lines hashed in Python as they stream
    (an ordered ``string_agg`` keeps every directory's lines in memory at once: 5M entries
    needed more than the 512 MB limit).
    """
    target = digest_dir(store, info) / _FILE
    if target.exists():
        return read_parquet(target)
    with query_engine() as con:
        # a view, read again at each level: a table of every entry's line would be most of
        # the query memory (1M entries: about 250 MB), spilled to disk and read back
        quoted = "'" + _snapshot_file(store, info).replace("'", "''") + "'"
        con.execute(
            "CREATE TEMP VIEW e AS "
            + _ENTRIES.replace("read_parquet(?", "read_parquet(" + quoted, 1)
        )
        con.execute("CREATE TEMP TABLE d (self BLOB, digest VARCHAR, depth INTEGER)")
        deepest = con.execute("SELECT coalesce(max(depth), 0) FROM e").fetchall()
        for level in range(int(deepest[0][0] if deepest else 0), -1, -1):
            runs = _Runs()
            lines = con.sql(_CHILD_LINES, params={"depth": level + 1})
            for batch in lines.to_arrow_reader(_BATCH_ROWS):
                runs.add(batch)
            hashed = runs.table()
            con.register("hashed", hashed)
            con.execute(_LEVEL, {"depth": level})
            con.unregister("hashed")
        table = con.sql("SELECT self, digest FROM d").to_arrow_table()
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    make_private_dir(target.parent.parent.parent.parent)
    make_private_dir(target.parent.parent.parent)
    make_private_dir(target.parent.parent)
    make_private_dir(target.parent)
    write_private_file(target, sink.getvalue())
    return table


def entry_digests(store: Store, info: ScanInfo, raws: Sequence[bytes]) -> dict[bytes, str]:
    """The digest of each of ``raws`` (exact path bytes) in snapshot ``info``.

    A path that the snapshot does not hold, or whose subtree was not read whole, is left out:
    unknown, never a match.
    """
    wanted = list(dict.fromkeys(raws))
    if not wanted or info.format_version < FORMAT_VERSION:
        return {}  # a format-1 snapshot records no ctimes: what it shows cannot be vouched for
    dirs = _directory_digests(store, info)
    asked = pa.table({"self": pa.array(wanted, pa.binary())})
    with query_engine() as con:
        con.register("asked", asked)
        con.register("dirs", dirs)
        rows = con.execute(
            f"""
            SELECT e.self, e.kind, e.line, e.unseen, dirs.digest
            FROM ({_ENTRIES}) e
            JOIN asked ON asked.self = e.self
            LEFT JOIN dirs ON dirs.self = e.self
            """,
            [_snapshot_file(store, info)],
        ).fetchall()
    out: dict[bytes, str] = {}
    for self_, kind, line, unseen, dir_digest in rows:
        if unseen:
            continue
        if kind == "dir":
            if dir_digest is not None:
                out[bytes(self_)] = "sha256:" + dir_digest
        else:
            out[bytes(self_)] = "sha256:" + hashlib.sha256(line.encode()).hexdigest()
    return out


_UNSEEN = ("partial", "budget_cut", "excluded", "mount_point")


def _file_line(row: Mapping[str, Any]) -> str:
    """The line ``_ENTRIES`` hashes for a row (``concat_ws`` leaves out what is null)."""
    name = bytes(row["name_raw"]) if row.get("name_raw") is not None else row["name"].encode()
    parts = (row["kind"], row["size"], row["mtime_ns"], row.get("ctime_ns"), row["inode"])
    kind, size, mtime, ctime, inode = parts
    fields = [name.hex().upper(), kind, size, mtime, "?" if ctime is None else ctime, inode]
    return ":".join(str(f) for f in fields if f is not None)


class SnapshotDigests:
    """Digests of a few entries at a time, from snapshot rows the caller already holds.

    ``entry_digests`` reads the whole snapshot at each call. The widget records the digest of
    the one or few entries a click decides, and holds the snapshot's rows: it keeps one of
    these, which reads the directory digests when made (computed once per snapshot, as for
    ``entry_digests``) and hashes a file's digest from its row. The two give the same digests.
    """

    def __init__(self, store: Store, info: ScanInfo) -> None:
        self.info = info
        # held as Arrow columns sorted by path, a click's few directories found by binary
        # search (1M entries: 100k directories, about 15 MB here where a dictionary of Python
        # objects took about 60 MB; a hash lookup would hash all of them at every click)
        self._selves = _Sorted(pa.array([], pa.binary()))
        self._digests = pa.array([], pa.string())
        if info.format_version >= FORMAT_VERSION:
            dirs = _directory_digests(store, info)
            dirs = dirs.filter(pc.is_valid(dirs.column("digest")))
            dirs = dirs.take(pc.sort_indices(dirs.column("self"))).combine_chunks()
            if dirs.num_rows:
                self._selves = _Sorted(dirs.column("self").cast(pa.binary()).chunk(0))
                self._digests = dirs.column("digest").chunk(0)

    def of_rows(self, rows: pa.Table) -> dict[bytes, str]:
        """The digest of each of ``rows`` (rows of this snapshot), by exact path bytes.

        What ``entry_digests`` gives for their paths: a row whose subtree was not read whole
        is left out, and so is every row of a format-1 snapshot.
        """
        if self.info.format_version < FORMAT_VERSION:
            return {}
        out: dict[bytes, str] = {}
        dirs: list[bytes] = []
        for row in rows.to_pylist():
            if row.get("error") is not None or any(row.get(c) for c in _UNSEEN):
                continue
            raw = raw_path(row)
            if row["kind"] != "dir":
                out[raw] = "sha256:" + hashlib.sha256(_file_line(row).encode()).hexdigest()
            else:
                dirs.append(raw)
        for raw in dirs:
            i = self._selves.find(raw)
            if i is not None:  # else no digest: the subtree was not read whole
                out[raw] = "sha256:" + str(self._digests[i].as_py())
        return out


class _Sorted:
    """An Arrow binary array in byte order, searched without making Python objects of it."""

    def __init__(self, values: pa.Array) -> None:
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i: int) -> bytes:
        return bytes(self.values[i].as_py())

    def find(self, raw: bytes) -> int | None:
        """The position of ``raw`` (None when it is not there)."""
        i = bisect.bisect_left(self, raw)
        return i if i < len(self) and self[i] == raw else None
