"""The plan summary of the decisions on a snapshot, as queries over its files (a preview).

``preview_summary`` gives what ``PlanTally(table, annotations, root=root).summary()`` gives
(and so ``selection_summary`` of ``select_candidates``), without the classified table in
memory, an index of its paths or a tally's per-row state: DuckDB reads the snapshot and its
verdicts, joins the decisions to their rows by each path's directory and last name, and sums
the bytes they cover. A report's preview reads it; the widget keeps its tally (it changes
with every click). A property test holds the two equal on random decisions.

Subtrees are read as directories. A row lies inside directory ``D`` when its path starts with
``D`` and a slash; its parent's path is then ``D`` or starts so too. So whether something
covers a row is asked of the snapshot's distinct parents (a tenth of its rows), and whether a
directory holds a flagged row or a kept path, of the prefixes of the few flagged parents and
kept paths.

Where a name is not valid UTF-8, two rows may show the same text path, which only their exact
bytes tell apart: ``preview_summary`` then gives None, and the caller tallies.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hygiene_nb.classify.queries import open_entries
from hygiene_nb.ledger import Annotation
from hygiene_nb.scan.snapshot import query_engine, row_keys

__all__ = ["preview_summary"]

_DECIDERS = ("human", "rule")  # as ``check_entries``: an agent only proposes
# a row the scan did not read whole (``document._incomplete_rows``)
_INCOMPLETE = (
    "(coalesce(length(CAST(error AS VARCHAR)), 0) > 0 OR coalesce(partial, false)"
    " OR coalesce(budget_cut, false) OR coalesce(excluded, false)"
    " OR coalesce(mount_point, false))"
)


def _prefixes(path: str) -> Iterable[str]:
    """Each ``path[:i]`` where ``path[i]`` is a slash: the ``D`` for which it lies inside ``D``."""
    i = path.find("/")
    while i >= 0:
        yield path[:i]
        i = path.find("/", i + 1)


def _raw_prefixes(path: bytes) -> Iterable[bytes]:
    i = path.find(b"/")
    while i >= 0:
        yield path[:i]
        i = path.find(b"/", i + 1)


def _holders(parents: Iterable[str]) -> set[str]:
    """Every ``D`` (without its trailing slash) that holds a row whose parent is in ``parents``."""
    found: set[str] = set()
    for parent in parents:
        found.add(parent.rstrip("/"))
        found.update(_prefixes(parent))
    return found


def _covered(parents: pa.Array, keys: Iterable[str]) -> np.ndarray:
    """For each parent, whether one of ``keys`` (directories' text paths) covers its rows.

    A key covers the rows of parent ``P`` when ``P`` with a trailing slash starts with the
    key without its trailing slash and with one: the parents sorted once, each key's range
    found by two binary searches.
    """
    bases = sorted({k.rstrip("/") + "/" for k in keys})
    out = np.zeros(len(parents), dtype=bool)
    if not bases or not len(parents):
        return out  # no parent's text made: none is covered
    text = parents.to_numpy(zero_copy_only=False)
    inside = np.array([p.rstrip("/") + "/" for p in text.tolist()], dtype=object)
    order = np.argsort(inside, kind="stable")
    ordered = inside[order]
    starts = np.array(bases, dtype=object)
    ends = np.array([b[:-1] + "0" for b in bases], dtype=object)  # "0": right after "/"
    lo = np.searchsorted(ordered, starts, side="left")
    hi = np.searchsorted(ordered, ends, side="left")
    marks = np.zeros(len(text) + 1, dtype=np.int64)
    np.add.at(marks, lo, 1)
    np.add.at(marks, hi, -1)
    out[order[np.cumsum(marks[:-1]) > 0]] = True
    return out


# what each decided text path's row says (the rows that show it: one, where names are valid
# UTF-8)
_MATCH = f"""
    SELECT k.i, e.row_no, CAST(e.kind AS VARCHAR) AS kind, {_INCOMPLETE} AS incomplete
    FROM entries e JOIN decided k ON e.parent IS NOT DISTINCT FROM k.parent AND e.name = k.name
    ORDER BY k.i
"""

# The summary's counts and bytes: a row is freed when it is a candidate's or its parent is
# covered by one, kept likewise; a hard-linked inode counts at its first covered name, and
# for freed bytes only when all its names are covered.
_SUMS = """
    WITH r AS (
        SELECT e.row_no, e.depth, e.size, e.alloc, e.dev, e.inode,
               coalesce(e.nlink, 1) AS nlink,
               CAST(e.kind AS VARCHAR) <> 'dir' AND coalesce(e.nlink, 1) > 1 AS linked,
               coalesce(k.freed, false) OR coalesce(p.freed, false) AS freed,
               coalesce(k.kept, false) OR coalesce(p.kept, false) AS kept,
               k.name IS NOT NULL AS seen
        FROM entries e
        LEFT JOIN decided k ON k.parent IS NOT DISTINCT FROM e.parent AND k.name = e.name
        LEFT JOIN parent_cover p ON p.parent = e.parent),
    groups AS (
        SELECT count(*) FILTER (WHERE freed) AS names_freed,
               arg_min(nlink, row_no) FILTER (WHERE freed) AS nlink_freed,
               arg_min(size, row_no) FILTER (WHERE freed) AS size_freed,
               arg_min(alloc, row_no) FILTER (WHERE freed) AS alloc_freed,
               arg_min(size, row_no) FILTER (WHERE kept) AS size_kept
        FROM r WHERE linked GROUP BY dev, inode),
    plain AS (
        SELECT count(*) AS total,
               count(*) FILTER (WHERE depth = 0) AS top,
               count(*) FILTER (WHERE seen AND depth <> 0) AS seen,
               sum(size) FILTER (WHERE freed AND NOT linked) AS freed,
               sum(alloc) FILTER (WHERE freed AND NOT linked) AS freed_alloc,
               sum(size) FILTER (WHERE kept AND NOT linked) AS kept
        FROM r),
    linked AS (
        SELECT sum(size_freed) FILTER (WHERE names_freed >= nlink_freed) AS freed,
               sum(alloc_freed) FILTER (WHERE names_freed >= nlink_freed) AS freed_alloc,
               sum(size_kept) AS kept
        FROM groups)
    SELECT p.total, p.top, p.seen,
           CAST(coalesce(p.freed, 0) + coalesce(l.freed, 0) AS BIGINT),
           CAST(coalesce(p.freed_alloc, 0) + coalesce(l.freed_alloc, 0) AS BIGINT),
           CAST(coalesce(p.kept, 0) + coalesce(l.kept, 0) AS BIGINT)
    FROM plain p, linked l
"""


def _protected(verdicts: Path | pa.Table, rows: Sequence[int]) -> list[bool]:
    """The verdicts' ``protected`` at ``rows`` (a null is not protected)."""
    if isinstance(verdicts, pa.Table):
        column = verdicts.column("protected")
    else:
        column = pq.read_table(verdicts, columns=["protected"]).column("protected")
    flags = pc.fill_null(column, False).to_numpy(zero_copy_only=False)
    return [bool(f) for f in flags[np.asarray(rows, dtype=np.int64)]]


def _normal_inside(paths: Sequence[str], root: str) -> list[bool]:
    """Per path, whether it is in normal form (``os.path.normpath``) and at or under ``root``."""
    inside = root.rstrip("/") + "/"
    out = []
    for path in paths:
        if not (path == root or path.startswith(inside)):
            out.append(False)
        elif "//" in path or "/." in path or (path.endswith("/") and path != "/"):
            out.append(os.path.normpath(path) == path)  # only these can differ from it
        else:
            out.append(True)
    return out


def preview_summary(
    snapshot: Path,
    verdicts: Path | pa.Table,
    annotations: Iterable[Annotation],
    *,
    root: str,
) -> dict[str, int] | None:
    """The plan summary of ``annotations`` on a classified snapshot, from its files.

    Args:
        snapshot: the snapshot's Parquet file.
        verdicts: its kept verdicts (or those computed now), row for row.
        annotations: every annotation at or under ``root`` (the last of a path counts).
        root: the plan's root (the snapshot's).

    Returns:
        What ``PlanTally(...).summary()`` gives; None where a name is not valid UTF-8.
    """
    now = {a.path_raw: a for a in annotations}
    reviewed = [a for a in now.values() if a.is_reviewed]
    counts = {d: sum(a.decision == d for a in reviewed) for d in ("delete", "keep", "unsure")}
    deletes = [a for a in now.values() if a.decision == "delete"]
    keeps = [a for a in now.values() if a.decision == "keep"]
    # the checks of a delete that need only the decision (``check_entries``, in its words)
    fits = _normal_inside([a.path for a in deletes], root)
    asked = {
        a.path
        for a, fit in zip(deletes, fits, strict=True)
        if fit and a.by in _DECIDERS and a.path.encode("utf-8", "surrogatepass") == a.path_raw
    }
    kept_texts = {a.path for a in keeps}
    # every reviewed text path once: its row's facts, then what covers what. The queries
    # name a path by its place in ``texts``: no second text of it is made (100k decisions)
    texts = sorted({a.path for a in reviewed})
    decided = row_keys(texts, root).drop_columns(["path"])  # the queries join on the others
    decided = decided.append_column("i", pa.array(np.arange(len(texts), dtype=np.int64)))
    with query_engine() as con:
        # the snapshot alone (a join to the verdicts row for row would double the queries'
        # time): the one verdict read, ``protected``, is taken at the decided rows
        open_entries(con, snapshot, None)
        ((odd,),) = con.execute(
            "SELECT count(parent_raw) + count(name_raw) FROM entries"
        ).fetchall()
        if odd:
            return None  # a text path may name two rows: only a tally by exact bytes can tell
        con.register("decided", decided)
        found = con.sql(_MATCH).to_arrow_table()
        protected = _protected(verdicts, found.column("row_no").to_pylist())
        flagged = con.execute(
            f"SELECT DISTINCT parent FROM entries WHERE {_INCOMPLETE} AND parent IS NOT NULL"
        ).fetchall()
        holding_flagged = _holders(p for (p,) in flagged)
        holding_kept: set[bytes] = set()
        for ann in keeps:  # the exact bytes of every keep (``first_kept_inside``)
            holding_kept.update(_raw_prefixes(ann.path_raw))
        candidates: list[tuple[str, bool]] = []  # (path, is a directory)
        kept_dirs: list[str] = []
        # a row at a time, from columns: a tuple per row would hold 100k of them at once
        kinds = found.column("kind").combine_chunks().dictionary_encode()
        kind_of = kinds.dictionary.to_pylist()
        rows = zip(
            found.column("i").to_pylist(),
            kinds.indices.to_pylist(),
            found.column("incomplete").to_pylist(),
            protected,
            strict=True,
        )
        del found, kinds
        for i, code, incomplete, guarded in rows:
            path, kind = texts[i], None if code is None else kind_of[code]
            if path in kept_texts and kind == "dir":
                kept_dirs.append(path)
            if path not in asked or guarded or kind in ("symlink", "other") or incomplete:
                continue
            below = path.rstrip("/")
            is_dir = kind == "dir"
            if is_dir and below in holding_flagged:
                continue  # a mount point or a row not read whole inside it
            if below.encode("utf-8", "surrogatepass") in holding_kept:
                continue  # a kept path inside it
            candidates.append((path, is_dir))
        parents = con.sql(
            "SELECT DISTINCT parent FROM entries WHERE parent IS NOT NULL"
        ).to_arrow_table()
        column = parents.column("parent").combine_chunks()
        freed_dirs = [p for p, is_dir in candidates if is_dir]
        freed_parent = _covered(column, freed_dirs)
        kept_parent = _covered(column, kept_dirs)
        # a candidate inside another is folded into it: its parent's rows are covered
        folded = 0
        if freed_dirs:
            cand_parents = row_keys([p for p, _ in candidates], root).column("parent")
            covering = column.filter(pa.array(freed_parent))
            folded = pc.sum(pc.is_in(cand_parents, value_set=covering)).as_py() or 0
        either = freed_parent | kept_parent
        con.register(
            "parent_cover",
            pa.table(
                {
                    "parent": column.filter(pa.array(either)),
                    "freed": pa.array(freed_parent[either]),
                    "kept": pa.array(kept_parent[either]),
                }
            ),
        )
        chosen = {p for p, _ in candidates}
        con.unregister("decided")
        decided = decided.append_column(
            "freed", pa.array([t in chosen for t in texts], pa.bool_())
        ).append_column("kept", pa.array([t in kept_texts for t in texts], pa.bool_()))
        con.register("decided", decided)
        (sums,) = con.execute(_SUMS).fetchall()  # no GROUP BY: one row
    total, top, seen, freed, freed_alloc, kept_bytes = (int(v or 0) for v in sums)
    return {
        "candidates": len(candidates) - folded,
        "delete_count": counts["delete"],
        "keep_count": counts["keep"],
        "unsure_count": counts["unsure"],
        "unreviewed_count": total - top - seen,
        "excluded": len(deletes) - len(candidates),
        "folded": folded,
        "reclaim_bytes": freed,
        "reclaim_alloc": freed_alloc,
        "keep_bytes": kept_bytes,
    }
