"""Snapshots: the Parquet dataset of every scan (docs/format.md).

Walk rows become snapshot rows here; each scan is one Hive partition
``snapshots/host=…/root=…/scan=…/part-0.parquet`` with its metadata in the file footer and in
``index.jsonl`` (``hygiene_nb.scan.index``). Only this module reads or writes snapshot files.

Row order is not part of the contract. In each row group the directories come last, and the
other rows keep the walker's order (a listing's entries together, in inode order), which is what
lets zstd find the runs in names, inodes, sizes and mtimes.
"""

from __future__ import annotations

import errno as errno_mod
import functools
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hygiene_nb.errors import QueryMemoryExceeded, SnapshotTooNew, StoreError, UsageError
from hygiene_nb.scan.arrays import int_scalar, string_array, string_scalar
from hygiene_nb.scan.heap import give_back
from hygiene_nb.scan.index import ScanInfo, append_scan, find_scan, partition_dir
from hygiene_nb.scan.walk.spec import FLAG_BUDGET_CUT, FLAG_EXCLUDED, FLAG_MOUNT_POINT, KIND_DIR
from hygiene_nb.store import FILE_MODE, Store, make_private_dir, publish_dir, remove_store_path

if TYPE_CHECKING:
    import duckdb
    import numpy as np

__all__ = [
    "FORMAT_2_COLUMNS",
    "FORMAT_VERSION",
    "KINDS",
    "PATH_SQL",
    "QUERY_MEMORY",
    "ROW_GROUP_ROWS",
    "SNAPSHOT_SCHEMA",
    "SnapshotWriter",
    "entry_paths",
    "load_snapshot",
    "named_rows",
    "parquet_writer",
    "path_order",
    "query_engine",
    "query_memory_error",
    "read_parquet",
    "read_row_groups",
    "row_keys",
    "snapshot_file",
    "snapshot_format",
    "snapshot_rows",
]

KINDS = ("file", "dir", "symlink", "other")
_META_KEY = b"hygiene_nb.scan"


# The constants a scan's conversion uses are built from bytes, not converted from Python values:
# pyarrow's first conversion of a Python value imports pandas (0.2 s, a tenth of a 1M-entry
# scan) to check whether it is a pandas object (``scan.arrays``). A test pins that a scan does
# not import it.
_KIND_DIR = int_scalar(KIND_DIR, pa.uint8())
_NO_FLAGS = int_scalar(0, pa.uint8())
_FLAGS = {
    flag: int_scalar(flag, pa.uint8())
    for flag in (FLAG_EXCLUDED, FLAG_MOUNT_POINT, FLAG_BUDGET_CUT)
}
_ZERO_LENGTH = int_scalar(0, pa.int32())
_SLASH, _EMPTY = string_scalar("/"), string_scalar("")
_NULL_STRING = pa.nulls(1, pa.string())[0]
_NULL_INT64 = pa.nulls(1, pa.int64())[0]
_KIND_NAMES = string_array(KINDS)

# Rows per row group. Each group has one dictionary of parent paths, and the parent column's
# indices are bit-packed at the width that dictionary needs. On the benchmark's tree (about 10
# entries per directory) a 512k-row group holds about 52k parents: 16-bit indices, which zstd
# compresses twice as well as the 15-bit ones of a 256k group (misaligned bits hide the runs:
# padding a 256k group's dictionary past 32,768 entries shrank its indices the same way, from
# 0.95 to 0.47 B/entry).
# Measured on 1M rows: 15.85 -> 15.32 B/entry, +35 MiB peak RSS, no slower.
ROW_GROUP_ROWS = 512 * 1024
_DICTIONARY_PAGE_LIMIT = 64 * 1024 * 1024

SNAPSHOT_SCHEMA = pa.schema(
    [
        ("parent", pa.dictionary(pa.int32(), pa.string())),
        ("name", pa.string()),
        ("parent_raw", pa.binary()),  # exact bytes, only where the parent is not valid UTF-8
        ("name_raw", pa.binary()),  # exact bytes, only where the name is not valid UTF-8
        ("kind", pa.dictionary(pa.int8(), pa.string())),
        ("size", pa.int64()),
        ("alloc", pa.int64()),
        ("mtime_ns", pa.int64()),
        ("inode", pa.int64()),
        ("dev", pa.int64()),
        ("nlink", pa.int64()),
        ("depth", pa.int32()),
        ("tree_bytes", pa.int64()),  # directories only; null where the subtree was not read
        ("tree_alloc", pa.int64()),
        ("tree_files", pa.int64()),
        ("tree_latest_mtime_ns", pa.int64()),
        ("partial", pa.bool_()),
        ("error", pa.dictionary(pa.int8(), pa.string())),
        ("excluded", pa.bool_()),
        ("mount_point", pa.bool_()),
        ("budget_cut", pa.bool_()),
        # Format 2 adds these four. ctime is the inode's change time, which no user can set:
        # a rewrite with its mtime put back (`touch -d`) still changes it.
        ("ctime_ns", pa.int64()),
        ("uid", pa.int64()),
        ("gid", pa.int64()),
        ("mode", pa.int32()),
    ]
)

# The snapshot format this code writes (in each file's footer, ``hygiene_nb.format_version``,
# and in the scan's metadata). 1: no ctime_ns/uid/gid/mode columns (read as null). 2: with them.
FORMAT_VERSION = 2
# Columns a format-1 snapshot lacks: loaded as nulls, so every reader sees one schema.
FORMAT_2_COLUMNS = ("ctime_ns", "uid", "gid", "mode")
_FORMAT_KEY = b"hygiene_nb.format_version"

# errno → the stable code a snapshot row carries in ``error``.
_ERROR_CODES = {
    errno_mod.EACCES: "permission-denied",
    errno_mod.EPERM: "permission-denied",
    errno_mod.ENOENT: "vanished",
    errno_mod.ENOTDIR: "vanished",
    errno_mod.ELOOP: "symlink-on-path",
}


def _decode(arr: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Binary → (string column, raw column holding bytes only where not valid UTF-8)."""
    try:
        return arr.cast(pa.string()), pa.nulls(len(arr), pa.binary())
    except pa.ArrowInvalid:
        pass
    texts: list[str] = []
    raws: list[bytes | None] = []
    for value in arr.to_pylist():
        try:
            texts.append(value.decode("utf-8"))
            raws.append(None)
        except UnicodeDecodeError:
            texts.append(value.decode("utf-8", "backslashreplace"))
            raws.append(value)
    return pa.array(texts, pa.string()), pa.array(raws, pa.binary())


def _errors(errnos: pa.Array) -> pa.Array:
    """Errno column → dictionary of codes (null where 0)."""
    seen = sorted({e for e in pc.unique(errnos).to_pylist() if e})
    if not seen:
        return pa.nulls(len(errnos), SNAPSHOT_SCHEMA.field("error").type)
    labels = sorted({_ERROR_CODES.get(e, "io-error") for e in seen})
    mapping = {e: labels.index(_ERROR_CODES.get(e, "io-error")) for e in seen}
    keys = pa.array(list(mapping), pa.int32())
    codes = pc.take(pa.array(list(mapping.values()), pa.int8()), pc.index_in(errnos, keys))
    return pa.DictionaryArray.from_arrays(codes, pa.array(labels, pa.string()))


def convert_batch(batch: pa.RecordBatch) -> pa.RecordBatch:
    """Turn one WALK_SCHEMA batch into SNAPSHOT_SCHEMA rows."""
    col = batch.column
    parent, parent_raw = _decode(col("parent"))
    name, name_raw = _decode(col("name"))
    is_root = pc.equal(pc.binary_length(col("parent")), _ZERO_LENGTH)
    if is_root.true_count:  # one batch of the walk holds the root: the others keep their strings
        parent = pc.if_else(is_root, _NULL_STRING, parent)
    flags = col("flags")
    excluded, mount, cut = (
        pc.not_equal(pc.bit_wise_and(flags, _FLAGS[flag]), _NO_FLAGS)
        for flag in (FLAG_EXCLUDED, FLAG_MOUNT_POINT, FLAG_BUDGET_CUT)
    )
    kind = col("kind")
    # A directory's sums are known only where its subtree was read (not excluded, not mounted).
    summed = pc.and_(pc.equal(kind, _KIND_DIR), pc.invert(pc.or_(excluded, mount)))

    def tree(column: str) -> pa.Array:
        return pc.if_else(summed, col(column), _NULL_INT64)

    arrays = [
        pc.dictionary_encode(parent).cast(SNAPSHOT_SCHEMA.field("parent").type),
        name,
        parent_raw,
        name_raw,
        pa.DictionaryArray.from_arrays(kind.cast(pa.int8()), _KIND_NAMES),
        col("size"),
        col("alloc"),
        col("mtime_ns"),
        col("inode").cast(pa.int64(), safe=False),
        col("dev").cast(pa.int64(), safe=False),
        col("nlink").cast(pa.int64()),
        col("depth"),
        tree("tree_bytes"),
        tree("tree_alloc"),
        tree("tree_files"),
        tree("tree_latest_mtime_ns"),
        col("partial"),
        _errors(col("errno")),
        excluded,
        mount,
        cut,
        col("ctime_ns"),
        col("uid").cast(pa.int64()),
        col("gid").cast(pa.int64()),
        col("mode").cast(pa.int32(), safe=False),
    ]
    return pa.RecordBatch.from_arrays(arrays, schema=SNAPSHOT_SCHEMA)


# zstd level per column, 3 for the rest. Measured on the benchmark's 1M rows (512k-row groups):
# - sizes compress better at 1 than at 3 (-0.23 B/entry) and no slower;
# - parent paths at 7 save 0.18 B/entry for 0.04 s of CPU per 1M rows (at 9: 0.21, 0.06 s);
# - names at 7 save 0.25 B/entry for 0.11 s of CPU (at 6: 0.20, 0.09 s; at 9: 0.36, 0.15 s);
# - mtimes save 0.02 B/entry at 9 (not worth it); the other columns were not tried above 3.
# The 512k groups and these levels raise a 1M scan's peak RSS from about 240 to 320 MiB with
# Arrow's default allocator (mimalloc); `hygiene-nb scan` uses jemalloc, which brings it to
# about 270 (see `hygiene_nb._process`).
_ZSTD_LEVELS = {
    name: {"size": 1, "tree_bytes": 1, "tree_alloc": 1, "parent": 7, "name": 7}.get(name, 3)
    for name in SNAPSHOT_SCHEMA.names
}


_DICTIONARY_COLUMNS = (
    "parent",
    "kind",
    "error",
    "dev",
    "nlink",
    "depth",
    "alloc",
    "uid",
    "gid",
    "mode",
)
# Listings come in inode order, so inodes delta-encode well; names are stored without their
# lengths interleaved. (BYTE_STREAM_SPLIT on inode and size saves 0.5 B/entry more, but Spark
# before 4.0 cannot read it, and the store is for Spark to read as it is.)
_COLUMN_ENCODINGS = {
    "inode": "DELTA_BINARY_PACKED",
    "name": "DELTA_LENGTH_BYTE_ARRAY",
    "row_no": "DELTA_BINARY_PACKED",  # a fleet dataset's copy (``hygiene_nb.fleet.publish``)
}
_STATISTICS_COLUMNS = ("depth", "size", "tree_bytes", "mtime_ns")


def parquet_writer(path: Path, schema: pa.Schema = SNAPSHOT_SCHEMA) -> pq.ParquetWriter:
    """A Parquet writer with the store's settings, for ``schema``.

    The snapshot's schema, or a subset of its columns: the benchmark writes a snapshot without
    the format-2 ones to weigh them.
    """
    names = set(schema.names)
    return pq.ParquetWriter(
        path,
        schema,
        compression="zstd",
        compression_level={k: v for k, v in _ZSTD_LEVELS.items() if k in names},
        use_dictionary=[c for c in _DICTIONARY_COLUMNS if c in names],
        # One dictionary page holds a row group's distinct parents (the 1 MiB default would
        # fall back to plain strings on a wide tree).
        dictionary_pagesize_limit=_DICTIONARY_PAGE_LIMIT,
        column_encoding={k: v for k, v in _COLUMN_ENCODINGS.items() if k in names},
        write_statistics=[c for c in _STATISTICS_COLUMNS if c in names],
    )


def _split_dirs(walk_batch: pa.RecordBatch) -> tuple[pa.RecordBatch, pa.RecordBatch]:
    """A walk batch's rows as (non-directories, directories), each part in the walk's order.

    The C walker already puts a batch's directories after its other rows: then the parts are
    slices (no copy). Otherwise each column is filtered, before converting (far cheaper on the
    raw columns than after).
    """
    is_dir = pc.equal(walk_batch.column("kind"), _KIND_DIR)
    files = walk_batch.num_rows - is_dir.true_count
    if is_dir.slice(files).true_count == walk_batch.num_rows - files:
        return walk_batch.slice(0, files), walk_batch.slice(files)
    return walk_batch.filter(pc.invert(is_dir)), walk_batch.filter(is_dir)


class SnapshotWriter:
    """Stream converted batches into a new snapshot; publish it atomically on ``close``.

    Rows go to the store's ``.incoming/<scan>/`` first and the partition directory appears under
    ``snapshots/host=…/root=…/`` only once the file is complete, so readers never see half a scan.
    """

    def __init__(self, store: Store, info: ScanInfo) -> None:
        self.store = store.ensure()
        self.info = info
        make_private_dir(store.incoming)
        self._staging = store.incoming / info.scan_id
        make_private_dir(self._staging)
        self._file = self._staging / "part-0.parquet"
        self._writer = parquet_writer(self._file)
        # Within each row group, directories come after everything else: a directory row among
        # a listing's files breaks every column's run (names, inodes, mtimes, sizes), and the
        # tree_* columns (null for files) become one dense stretch. One row group, not two, so
        # both share the group's dictionary of parent paths.
        self._files: list[pa.RecordBatch] = []
        self._dirs: list[pa.RecordBatch] = []
        self._pending_rows = 0

    def write(self, walk_batch: pa.RecordBatch) -> None:
        """Convert and buffer one walk batch (a row group is written once enough rows wait)."""
        for pending, part in zip((self._files, self._dirs), _split_dirs(walk_batch), strict=True):
            if part.num_rows:
                pending.append(convert_batch(part))
        self._pending_rows += walk_batch.num_rows
        if self._pending_rows >= ROW_GROUP_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._pending_rows:
            table = pa.Table.from_batches(self._files + self._dirs, schema=SNAPSHOT_SCHEMA)
            # one dictionary of parents per group, not one per walk batch (-0.45 B/entry)
            table = table.unify_dictionaries()
            # one row group per flush (a fixed size would leave a tiny group of the remainder)
            self._writer.write_table(table, row_group_size=table.num_rows)
        self._files, self._dirs, self._pending_rows = [], [], 0
        give_back()  # the walk buffers those rows were in (see ``scan.heap``)

    def close(self) -> ScanInfo:
        """Finish the file, move it into its partition and append the scan to the index."""
        self._flush()
        final = partition_dir(self.store, self.info)
        self.info.path = str(final)
        self._writer.add_key_value_metadata(
            {_META_KEY: self.info.to_json().encode(), _FORMAT_KEY: str(FORMAT_VERSION).encode()}
        )
        self._writer.close()
        self._file.chmod(FILE_MODE)
        make_private_dir(final.parent)
        publish_dir(self.store, self._staging, final)
        append_scan(self.store, self.info)
        return self.info

    def abort(self) -> None:
        """Discard what was written (the scan failed); the store is left as it was."""
        try:
            self._writer.close()
        finally:
            remove_store_path(self.store, self._staging)


# A snapshot row's path as SQL over its ``parent`` and ``name`` (the root's parent is NULL):
# display text, shown and ranked by, never joined on.
PATH_SQL = (
    "CASE WHEN parent IS NULL THEN name WHEN parent = '/' THEN concat('/', name) "
    "ELSE concat(parent, '/', name) END"
)


def row_keys(paths: Sequence[str], root: str) -> pa.Table:
    """``paths`` (text) with the ``parent`` and ``name`` of the row ``PATH_SQL`` shows so.

    The inverse of ``PATH_SQL``: a row's path is its parent, a slash and its name (a name holds
    no slash), or a slash and its name below "/" itself; the root's row (``root``) has no
    parent and its whole path as its name. A text no row can show (``//x``, no slash at all)
    gets a name no row has (a NUL), so a join on both columns finds exactly the rows that show
    each text. Columns ``path``, ``parent``, ``name``.
    """
    text = pa.array(paths, pa.string())
    # split at the last slash; a text without one is split like one of a NUL name
    safe = pc.if_else(pc.match_substring(text, "/"), text, "\0/\0")
    halves = pc.split_pattern(safe, "/", max_splits=1, reverse=True)
    head, name = pc.list_element(halves, 0), pc.list_element(halves, 1)
    at_root = pc.equal(text, root)
    no_row = pc.equal(head, "/")
    missing = pa.scalar(None, pa.string())
    parent = pc.if_else(pc.or_(at_root, no_row), missing, pc.if_else(pc.equal(head, ""), "/", head))
    name = pc.if_else(at_root, text, pc.if_else(no_row, "\0", name))
    return pa.table({"path": text, "parent": parent, "name": name})


# From this many rows on, DuckDB makes the paths: a connection costs about 20 ms, after which
# 1M paths take 0.1 s, where Arrow's element-wise join takes 0.9 s.
_PATHS_IN_SQL = 20_000


def entry_paths(table: pa.Table, *, whole: bool = False) -> pa.ChunkedArray:
    """Absolute path strings for snapshot rows (``parent`` + ``/`` + ``name``; root: ``name``).

    A table that already holds ``path`` (as ``load_snapshot`` adds it) gives that column back.
    A large table's are made by DuckDB (``PATH_SQL``) from the table's own buffers, in row
    order; a small one's by Arrow, the same text. ``whole``: made in one chunk (DuckDB with one
    thread: 1M paths in about 0.12 s, where combining its chunks afterwards copies every path,
    about 0.3 s).
    """
    if "path" in table.column_names:
        return table.column("path")
    if table.num_rows < _PATHS_IN_SQL:
        parent = table.column("parent").cast(pa.string())
        name = table.column("name")
        joined = pc.binary_join_element_wise(parent, name, _SLASH)
        at_top = pc.equal(parent, _SLASH)  # children of the root "/" are "/x", not "//x"
        joined = pc.if_else(at_top, pc.binary_join_element_wise(parent, name, _EMPTY), joined)
        return pc.coalesce(joined, name)
    with query_engine() as con:
        if whole:  # one thread hands its rows over as one batch
            con.execute("SET threads = 1")
        con.register("named", table.select(["parent", "name"]))
        # a NULL name gives NULL, as Arrow's join does (concat would skip it)
        query = f"SELECT CASE WHEN name IS NULL THEN NULL ELSE {PATH_SQL} END AS path FROM named"
        made = con.sql(query)
        found = made.to_arrow_table(max(table.num_rows, 1)) if whole else made.to_arrow_table()
        paths = found.column(0)
    if paths.type != pa.string():
        paths = paths.cast(pa.string())
    return paths


def path_order(paths: pa.ChunkedArray | pa.Array) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The rows of ``paths`` in the order of their texts (code point order, as Python compares).

    ``paths[order[k]]`` is the k-th path in that order; rows with the same path (only
    undecodable names can collide) stay in row order. Arrow sorts the row numbers, comparing
    the paths where they are (its sort is stable; UTF-8's byte order is code point order):
    1M paths in about 0.5 s on one core and 10 MiB, where DuckDB, copying them to sort, took
    0.75 s on one core and 176 MiB more (measured 2026-12-08 on the benchmark's 1M paths).
    Arrow lets go of the interpreter while it sorts.
    """
    import numpy as np  # a scan never needs it

    order: np.ndarray[Any, np.dtype[np.int64]] = pc.sort_indices(paths).to_numpy().astype(np.int64)
    return order


def load_snapshot(
    store: Store,
    *,
    root: str | None = None,
    scan_id: str | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """Load the latest snapshot of ``root`` (or scan ``scan_id``) as an Arrow table.

    Args:
        store: the store to read.
        root: the scanned root (absolute path), when ``scan_id`` is not given.
        scan_id: a specific scan.
        columns: only these columns (much faster); ``path`` is derived from parent and name.

    Raises:
        SnapshotNotFound: there is no such snapshot.
        StoreError: the snapshot file cannot be read.
    """
    info = find_scan(store, root=root, scan_id=scan_id)
    wanted = list(columns) if columns is not None else None
    read = None
    if wanted is not None:
        read = [c for c in wanted if c != "path"]
        if "path" in wanted:
            read = list(dict.fromkeys([*read, "parent", "name"]))
    file = snapshot_file(info)
    try:
        with pq.ParquetFile(file) as parquet:
            footer = parquet.metadata
            _check_format(footer, info)
            present = set(footer.schema.names)
            lacking = [c for c in FORMAT_2_COLUMNS if c not in present]  # a format-1 snapshot
            if read is not None:
                lacking = [c for c in lacking if c in read]
                read = [c for c in read if c not in lacking]
                unknown = [c for c in read if c not in present]
                if unknown:  # reading would leave them out without a word
                    raise pa.ArrowInvalid(f"no such column: {', '.join(unknown)}")
            table = read_row_groups(parquet, read)
    except (OSError, pa.ArrowException) as exc:
        raise StoreError(
            f"cannot read snapshot {info.scan_id} at {info.path}: {exc}; "
            "scan again, or prune the damaged snapshot."
        ) from exc
    for column in lacking:  # unknown, never zero: a null owner, a null ctime
        table = table.append_column(
            SNAPSHOT_SCHEMA.field(column),
            pa.nulls(table.num_rows, SNAPSHOT_SCHEMA.field(column).type),
        )
    if wanted is None or "path" in wanted:
        table = table.append_column("path", entry_paths(table))
    if wanted is not None:
        table = table.select(wanted)
    return table.replace_schema_metadata({_META_KEY: info.to_json().encode()})


def read_row_groups(parquet: pq.ParquetFile, columns: Sequence[str] | None = None) -> pa.Table:
    """The rows of an open Parquet file (``columns`` of them), one chunk per row group.

    What ``pq.read_table`` gives, without going through ``pyarrow.dataset``, which imports
    pandas (``scan.arrays``); ``ParquetFile.read`` would join the row groups into one chunk.
    """
    wanted = list(columns) if columns is not None else None
    parts = [parquet.read_row_group(i, columns=wanted) for i in range(parquet.num_row_groups)]
    return pa.concat_tables(parts) if parts else parquet.read(columns=wanted)


def read_parquet(path: Path | str) -> pa.Table:
    """A whole Parquet file the store wrote (see ``read_row_groups``)."""
    with pq.ParquetFile(path) as parquet:
        return read_row_groups(parquet)


def snapshot_file(info: ScanInfo) -> Path:
    """A scan's Parquet file (one per scan)."""
    return Path(info.path) / "part-0.parquet"


def snapshot_rows(info: ScanInfo) -> int:
    """How many rows a scan's snapshot holds (its footer's count).

    Raises:
        StoreError: the snapshot file cannot be read.
    """
    try:
        return int(pq.read_metadata(snapshot_file(info)).num_rows)
    except (OSError, pa.ArrowException) as exc:
        raise StoreError(
            f"cannot read snapshot {info.scan_id} at {info.path}: {exc}; "
            "scan again, or prune the damaged snapshot."
        ) from exc


QUERY_MEMORY = "512MB"  # DuckDB's working memory per connection; past it, it spills


def query_memory_error(exc: BaseException) -> QueryMemoryExceeded | None:
    """``exc`` as the error a person can act on, when it is DuckDB running out of memory.

    None for anything else (and without importing DuckDB where nothing has).
    """
    duckdb = sys.modules.get("duckdb")
    if duckdb is None or not isinstance(exc, duckdb.OutOfMemoryException):
        return None
    limit = os.environ.get("HYGIENE_NB_QUERY_MEMORY") or QUERY_MEMORY
    first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return QueryMemoryExceeded(
        f"a query needed more than its working memory, HYGIENE_NB_QUERY_MEMORY={limit} "
        f"(DuckDB: {first}); the command stopped there. Run it again with a larger "
        "HYGIENE_NB_QUERY_MEMORY (such as 2GB), or on a machine with more memory."
    )


@functools.cache
def _spill_dir() -> tempfile.TemporaryDirectory[str]:
    """A private directory (0700) for what queries spill, removed when the process exits.

    Set explicitly: DuckDB's default for an in-memory database is ``.tmp`` in the current
    directory, which may lie inside a scanned tree.
    """
    return tempfile.TemporaryDirectory(prefix="hygiene-nb-query-")


def query_engine() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection for queries over snapshot files: bounded memory, no progress bar.

    Joins and sorts larger than ``$HYGIENE_NB_QUERY_MEMORY`` (default ``QUERY_MEMORY``) spill
    to a private temporary directory, so a view's memory does not grow with the tree. The bar
    DuckDB draws on stderr (or in a notebook cell) would be noise in a report, a CLI command's
    output or a test log: views are library calls.
    """
    import duckdb  # only the commands that read snapshots pay for it

    limit = os.environ.get("HYGIENE_NB_QUERY_MEMORY") or QUERY_MEMORY
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        con.execute("SET temp_directory = $dir", {"dir": _spill_dir().name})
        con.execute("SET memory_limit = $limit", {"limit": limit})
    except duckdb.Error as exc:
        con.close()
        raise UsageError(
            f"HYGIENE_NB_QUERY_MEMORY={limit!r} is not a memory size DuckDB takes: "
            "give one like 512MB or 2GB."
        ) from exc
    return con


def named_rows(info: ScanInfo, names: Sequence[str]) -> pa.Table:
    """``parent`` and ``name`` of the rows whose name is one of ``names`` (e.g. ``.git``).

    A query that reads two columns and keeps a few rows: a tenth of the time of loading them.

    Raises:
        StoreError: the snapshot file cannot be read.
    """
    import duckdb  # only the commands that read snapshots pay for it

    try:
        with query_engine() as con:
            return con.sql(
                "SELECT CAST(parent AS VARCHAR) AS parent, name FROM read_parquet($file) "
                "WHERE list_contains($names, name) ORDER BY parent, name",
                params={"file": str(snapshot_file(info)), "names": list(names)},
            ).to_arrow_table()
    except duckdb.Error as exc:
        raise query_memory_error(exc) or StoreError(
            f"cannot read snapshot {info.scan_id} at {info.path}: {exc}; "
            "scan again, or prune the damaged snapshot."
        ) from exc


def snapshot_format(footer: pq.FileMetaData) -> int:
    """The format version a snapshot file's footer records (1 when it records none)."""
    raw = (footer.metadata or {}).get(_FORMAT_KEY, b"1")
    try:
        return int(raw)
    except ValueError:
        return 0  # not a number: not a format this code knows


def _check_format(footer: pq.FileMetaData, info: ScanInfo) -> None:
    version = snapshot_format(footer)
    if not 1 <= version <= FORMAT_VERSION:
        raise SnapshotTooNew(
            f"snapshot {info.scan_id} is in format {version}, and this hygiene-nb reads formats "
            f"1 to {FORMAT_VERSION}; upgrade hygiene-nb to read it (it is left unchanged)."
        )


def read_scan_info(snapshot_file: Path) -> ScanInfo:
    """Read the scan metadata stored in a snapshot file's footer."""
    metadata = pq.read_metadata(snapshot_file).metadata or {}
    return ScanInfo.from_dict(json.loads(metadata[_META_KEY]))
