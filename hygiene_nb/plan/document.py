"""The plan file (``hygiene-nb/plan@1``): exactly what would go, and what was left out and why.

``select_candidates`` is pure: it turns ``delete`` decisions and a classified snapshot into
candidates, exclusions (a stable ``code`` each, never silently dropped) and folded nested
deletes. ``api.make_plan`` re-checks the candidates against the disk, then ``assemble_plan``
and ``write_plan`` produce the JSON (digest over its canonical form) and a Markdown list.
A plan carries no authority: its risk fields are evidence; the executor re-checks everything.
"""

from __future__ import annotations

import bisect
import functools
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, overload

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb.classify.summary import freed_bytes, kept_bytes
from hygiene_nb.fs.fingerprint import Fingerprint, fingerprint
from hygiene_nb.ledger import Annotation
from hygiene_nb.pathnames import path_b64, raw_path, shown
from hygiene_nb.plan.schema import EXCLUSIONS, PLAN_SCHEMA, plan_digest
from hygiene_nb.scan.arrays import one_chunk
from hygiene_nb.scan.snapshot import entry_paths, path_order

__all__ = [
    "INDEX_FLAGS",
    "Exclusion",
    "Selection",
    "SnapshotIndex",
    "assemble_plan",
    "check_entries",
    "decided_by_text",
    "first_kept_inside",
    "plan_markdown",
    "select_candidates",
    "selection_summary",
]


# code → what it means and what to do next (the message names the entry's specifics first).


@dataclass(frozen=True)
class Exclusion:
    """A decision that did not become a candidate, with a stable code and the reason."""

    path: str
    code: str
    message: str
    path_raw: bytes = b""

    @classmethod
    def of(cls, path: str, path_raw: bytes, code: str, detail: str = "") -> Exclusion:
        """An exclusion whose message is ``detail`` (if any) and what ``code`` means."""
        message = f"{detail}; {EXCLUSIONS[code]}" if detail else EXCLUSIONS[code]
        return cls(path, code, message[:1].upper() + message[1:] + ".", path_raw)

    def to_json(self) -> dict[str, Any]:
        """The plan-file form."""
        return _with_raw(
            {"path": self.path, "code": self.code, "message": self.message},
            self.path,
            self.path_raw,
        )


@dataclass
class Selection:
    """What the decisions under a root become, before the disk is asked."""

    candidates: list[dict[str, Any]] = field(default_factory=list)
    excluded: list[Exclusion] = field(default_factory=list)
    folded: list[tuple[str, str]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    keep_bytes: int = 0


def _with_raw(obj: dict[str, Any], path: str, raw: bytes) -> dict[str, Any]:
    """Add ``path_b64`` when the text path does not give back the exact bytes."""
    exact = path_b64(path, raw)
    if exact is not None:
        obj["path_b64"] = exact
    return obj


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _exclude(sel: Selection, ann: Annotation, code: str, detail: str = "") -> None:
    sel.excluded.append(Exclusion.of(ann.path, ann.path_raw, code, detail))


class _SortedTexts(Sequence[str]):
    """Paths read in the order of their texts, one at a time (``bisect`` searches them).

    A look-up makes about 20 Python strings; every path as a Python string would be about
    110 MB for 1M paths and half a second to make, and a sorted copy of the paths 70 MB.
    """

    def __init__(
        self, paths: pa.ChunkedArray | pa.Array, order: np.ndarray[Any, np.dtype[np.int64]]
    ) -> None:
        self.paths = paths
        self.order = order

    def __len__(self) -> int:
        return len(self.order)

    @overload
    def __getitem__(self, i: int) -> str: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[str]: ...
    def __getitem__(self, i: int | slice) -> str | Sequence[str]:
        if isinstance(i, slice):
            return _SortedTexts(self.paths, self.order[i])
        text: str = self.paths[int(self.order[i])].as_py()
        return text


# below this many paths, ``SnapshotIndex.rows_of`` looks each one up by itself (no hash table
# of them is built)
_LOOK_UP_ONE_BY_ONE = 64


# look-ups an index answers by reading every path (1M paths: about 7 ms each) before it sorts
# them (about 0.5 s): a tally of a few directory decisions needs no sort
_SCANS_BEFORE_SORTING = 16


class SnapshotIndex:
    """Snapshot rows addressable by path, with subtrees as ranges of the sorted paths.

    The paths stay an Arrow array (the table's own column where it has one, as the widget's
    does); a look-up reads the few it compares. The order of the paths is made when look-ups
    need it (1M rows: about 0.5 s): the first few read every path instead, and many exact
    paths at once (``rows_of``) need none. Either way a look-up gives the same rows, in the
    order of their paths.
    """

    def __init__(self, table: pa.Table) -> None:
        self.source = table  # what it was built from (select_candidates checks it)
        # One chunk: a take on chunked dictionary columns re-unifies them every time. (No copy
        # when the table has one chunk already, as the widget's has.)
        self.table = table.combine_chunks()
        # the table's own column where it has one; else made by DuckDB, in its chunks (to
        # combine them would copy every path: 1M, about 110 MB and 0.25 s)
        self.paths = entry_paths(self.table)
        self._sorting: tuple[threading.Thread, dict[str, Any]] | None = None
        self._scans = 0  # look-ups answered by reading every path, before any sort
        self.top = frozenset(np.flatnonzero(pc.equal(self.table.column("depth"), 0)).tolist())
        self.incomplete = _incomplete_rows(self.table)
        self.mount_points = _flag_rows(self.table, "mount_point")
        # some name is not valid UTF-8, so two text paths may stand for different bytes
        self.undecodable = any(
            self.table.column(c).null_count < self.table.num_rows
            for c in ("parent_raw", "name_raw")
            if c in self.table.column_names
        )

    def sort_soon(self) -> None:
        """Start sorting the paths in another thread, for a look-up later to find done.

        Arrow sorts without holding the interpreter, on one core, so what the caller does
        meanwhile (the widget reads the ledger and tallies it) runs beside it on the other.
        ``order`` waits for it (and raises what it raised).
        """
        if "order" in self.__dict__ or self._sorting is not None:
            return
        done: dict[str, Any] = {}

        def sort() -> None:
            try:
                done["order"] = path_order(self.paths)
            except BaseException as exc:  # noqa: BLE001 (handed to the thread reading ``order``)
                done["error"] = exc

        thread = threading.Thread(target=sort, name="hygiene-nb-path-order", daemon=True)
        self._sorting = (thread, done)
        thread.start()

    @functools.cached_property
    def order(self) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The rows in the order of their paths (``scan.snapshot.path_order``)."""
        if self._sorting is None:
            return path_order(self.paths)
        thread, done = self._sorting
        thread.join()
        self._sorting = None
        if "error" in done:
            raise done["error"]
        order: np.ndarray[Any, np.dtype[np.int64]] = done["order"]
        return order

    @functools.cached_property
    def sorted(self) -> Sequence[str]:
        """The paths in that order, read one at a time."""
        return _SortedTexts(self.paths, self.order)

    def row_of(self, path: str, raw: bytes | None = None) -> int | None:
        """The row of ``path``; where text paths collide, the one whose exact bytes are ``raw``.

        Text paths collide only when a name is not valid UTF-8 (its text shows the bad bytes
        as backslash escapes) and a sibling is literally named that way.
        """
        hits = self.named(path)
        if len(hits) > 1 and raw is not None:
            for hit, row in zip(hits, self.rows(hits), strict=True):
                if raw_path(row) == raw:
                    return hit
        return hits[0] if hits else None

    def rows_of(self, paths: Sequence[str], raws: Sequence[bytes]) -> list[int | None]:
        """``[row_of(p, r) for p, r in zip(paths, raws)]``, many at once.

        Where no text path collides (every name is valid UTF-8), one hash look-up of every
        path of the snapshot among them (100k paths in 1M: about 0.1 s, no sort needed).
        """
        if self.undecodable or len(paths) < _LOOK_UP_ONE_BY_ONE:
            return [self.row_of(p, r) for p, r in zip(paths, raws, strict=True)]
        # the paths looked for are hashed, and every path of the snapshot looked up among them
        asked = pa.array(paths, type=pa.string())
        at = pc.index_in(self.paths, value_set=asked)
        where = np.flatnonzero(at.is_valid().to_numpy(zero_copy_only=False))
        # a path asked for twice: index_in names its first place in ``paths`` only
        which = one_chunk(at.drop_null())
        row_of = dict(zip(asked.take(which).to_pylist(), where.tolist(), strict=True))
        return [row_of.get(p) for p in paths]

    def _sorted_yet(self) -> bool:
        """Whether a look-up searches the order: it is made (or the scans are spent)."""
        if "order" in self.__dict__:
            return True
        if self._sorting is not None and not self._sorting[0].is_alive():
            return True  # sorted in the other thread: ``order`` takes it
        self._scans += 1  # (while it sorts, a look-up need not wait for it)
        return self._scans > _SCANS_BEFORE_SORTING

    def named(self, path: str) -> list[int]:
        """Every row whose text path is ``path`` (more than one only for undecodable names)."""
        if not self._sorted_yet():  # every path read; the rows in order (as the sort keeps ties)
            hits = pc.fill_null(pc.equal(self.paths, path), False)
            return np.flatnonzero(hits.to_numpy(zero_copy_only=False)).tolist()
        i = bisect.bisect_left(self.sorted, path)
        hits = []
        while i < len(self.sorted) and self.sorted[i] == path:
            hits.append(int(self.order[i]))
            i += 1
        return hits

    def below(
        self, path: str, raw: bytes | None = None, *, ordered: bool = True
    ) -> np.ndarray[Any, np.dtype[np.int64]]:
        """The rows inside directory ``path`` (only those below the exact bytes ``raw``).

        In the order of their paths; with ``ordered=False`` the same rows in any order (a
        caller that only covers them spares the sort of a large subtree's paths).
        """
        prefix = path.rstrip("/") + "/"
        found: np.ndarray[Any, np.dtype[np.int64]]
        if not self._sorted_yet():
            # every path read, and the rows inside put in the order of their paths (rows with
            # the same path in row order), as the range of the sorted paths below gives them
            inside = pc.fill_null(pc.starts_with(self.paths, prefix), False)
            found = np.flatnonzero(inside.to_numpy(zero_copy_only=False)).astype(np.int64)
            if ordered and len(found) > 1:
                keys = pa.table({"path": self.paths.take(pa.array(found)), "row": pa.array(found)})
                sort_keys = [("path", "ascending"), ("row", "ascending")]
                found = found[pc.sort_indices(keys, sort_keys=sort_keys).to_numpy()]
        else:
            lo = bisect.bisect_left(self.sorted, prefix)
            hi = bisect.bisect_left(self.sorted, prefix[:-1] + "0", lo)  # "0": right after "/"
            found = self.order[lo:hi].astype(np.int64)
        if raw is not None and self.undecodable and len(found):
            inside = raw.rstrip(b"/") + b"/"
            mine = [raw_path(r).startswith(inside) for r in self.rows(found)]
            found = found[np.array(mine, dtype=bool)]
        return found

    def rows(self, indices: Sequence[int] | np.ndarray[Any, Any]) -> list[dict[str, Any]]:
        """The rows at ``indices``, as dictionaries (one take for all of them)."""
        taken = self.table.take(pa.array(np.asarray(indices, dtype=np.int64)))
        # dictionary columns (parent, kind, error) decoded first: Arrow turns plain strings
        # into Python objects about twice as fast (100k rows: 0.27 s against 0.55 s)
        plain = [
            column.cast(column.type.value_type) if pa.types.is_dictionary(column.type) else column
            for column in taken.columns
        ]
        rows: list[dict[str, Any]] = pa.table(plain, names=taken.column_names).to_pylist()
        return rows


_INCOMPLETE = ("partial", "budget_cut", "excluded", "mount_point")
# what a ``SnapshotIndex`` reads of each row to tell whether the scan read it whole
INDEX_FLAGS = ("error", *_INCOMPLETE)


def _incomplete_rows(table: pa.Table) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Which rows were not read completely (one vectorized pass over the snapshot).

    An error, partial sums, a budget cut, an excluded subtree or a mount point not descended.
    """
    mask = np.zeros(table.num_rows, dtype=bool)
    names = set(table.column_names)
    if "error" in names:
        error = table.column("error")
        if pa.types.is_dictionary(error.type):
            error = error.cast(error.type.value_type)
        mask |= pc.fill_null(pc.greater(pc.utf8_length(error), 0), False).to_numpy()
    for column in _INCOMPLETE:
        if column in names:
            mask |= pc.fill_null(table.column(column), False).to_numpy()
    return mask


def _flag_rows(table: pa.Table, column: str) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Which rows have the boolean ``column`` set (none when the snapshot lacks it)."""
    if column not in table.column_names:
        return np.zeros(table.num_rows, dtype=bool)
    flags: np.ndarray[Any, np.dtype[np.bool_]] = pc.fill_null(
        table.column(column), False
    ).to_numpy()
    return flags


def _subtree_fingerprint(root_row: Mapping[str, Any], rows: list[dict[str, Any]]) -> Fingerprint:
    base = raw_path(root_row) + b"/"
    return fingerprint(
        (raw_path(r)[len(base) :], r["kind"], r["size"], r["mtime_ns"], r["inode"], r["ctime_ns"])
        for r in rows
    )


def select_candidates(
    table: pa.Table,
    annotations: Sequence[Annotation],
    *,
    root: str,
    index: SnapshotIndex | None = None,
    made_on: tuple[str, Mapping[bytes, str]] | None = None,
) -> Selection:
    """Turn the ``delete`` decisions under ``root`` into candidates and exclusions (pure).

    Args:
        table: the classified snapshot of ``root`` (with ``risk``, ``rule``, ``protected``).
        annotations: every annotation at or under ``root``.
        root: the plan's root.
        index: ``SnapshotIndex(table)``, when the caller keeps one (default: built here).
        made_on: (this snapshot's id, path → entry digest in it) for the delete decisions: a
            decision whose recorded digest differs, or that recorded none, is left out
            (``changed-since-decision``), unless the entry and all below it are still ``safe``.
            None: only a preview, which does not compare.

    Returns:
        Candidates (snapshot rows plus decision, note and, for directories, the subtree's
        fingerprint and rows), exclusions with codes, and nested deletes folded into outer ones.

    Raises:
        ValueError: ``index`` was built from another table.
    """
    if index is not None and index.source is not table:
        raise ValueError("index was built from another table")
    tree = index if index is not None else SnapshotIndex(table)
    sel = Selection()
    deletes = [a for a in annotations if a.decision == "delete"]
    keeps = [a for a in annotations if a.decision == "keep"]
    sel.counts = {
        d: sum(a.decision == d for a in annotations) for d in ("delete", "keep", "unsure")
    }
    kept_paths = sorted(a.path_raw for a in keeps)
    deletes = sorted(deletes, key=lambda a: a.path)
    found = tree.rows_of([a.path for a in deletes], [a.path_raw for a in deletes])
    checks = check_entries(deletes, found, tree, root)
    present = sorted({i for i in found if i is not None})
    rows = dict(zip(present, tree.rows(present), strict=True))  # one take for all of them
    ok: list[dict[str, Any]] = []
    for ann, at, check in zip(deletes, found, checks, strict=True):
        row = rows.get(at) if at is not None else None
        candidate = _check_one(ann, row, at, check, tree, kept_paths, sel, made_on)
        if candidate is not None:
            ok.append(candidate)
    outer: list[tuple[bytes, str]] = []  # exact bytes: look-alike texts must not fold
    for cand in ok:  # sorted by path: an outer directory comes before what it contains
        raw = cand["path_raw"]
        holder = next((text for o, text in outer if raw.startswith(o.rstrip(b"/") + b"/")), None)
        if holder is not None:
            sel.folded.append((cand["path"], holder))
            continue
        if cand["kind"] == "dir":
            outer.append((raw, cand["path"]))
        sel.candidates.append(cand)
    sel.counts["unreviewed"] = _unreviewed(tree, annotations)
    sel.keep_bytes = _keep_bytes(tree, keeps)
    return sel


_DECIDERS = ("human", "rule")  # who may decide; an agent only proposes (a claim)


Check = tuple[str, str, "np.ndarray[Any, np.dtype[np.int64]] | None"]
# what ``check_entries`` reads of each decision's row (the exact bytes only where a name is not
# valid UTF-8)
_FACTS = ("kind", "protected")
_RAW_NAMES = ("parent", "name", "parent_raw", "name_raw")


def check_entries(
    anns: Sequence[Annotation],
    at: Sequence[int | None],
    tree: SnapshotIndex,
    root: str,
    *,
    ordered: bool = True,
) -> list[Check]:
    """What each delete decision's entry alone says: (code, detail, the rows inside it).

    ``at`` holds each decision's row (``tree.row_of``; None: not in the snapshot). The checks
    of ``select_candidates`` that need nothing but the decision and the snapshot, in its order;
    ``code`` is "" when they all pass, and the rows inside are those of a directory (None for
    anything else). The keep decisions inside it and what it was made on are checked after
    these (``PlanTally`` keeps the results of these checks). The rows' columns are read once
    for all of them (100k decisions: about 0.3 s). ``ordered``: the rows inside in the order of
    their paths (as ``SnapshotIndex.below``: a plan's fingerprints need it, a tally does not).
    """
    slots: list[int | None] = []
    rows: list[int] = []
    for i in at:
        slots.append(None if i is None else len(rows))
        if i is not None:
            rows.append(i)
    present = np.array(rows, dtype=np.int64)
    t = tree.table
    names = [*_FACTS, *(_RAW_NAMES if tree.undecodable else ())]
    taken = t.select([c for c in names if c in t.column_names]).take(pa.array(present))
    kind = taken.column("kind")
    kinds: list[str] = (
        kind.cast(pa.string()) if pa.types.is_dictionary(kind.type) else kind
    ).to_pylist()
    protected: list[bool] = taken.column("protected").to_pylist()
    mounts: list[bool] = tree.mount_points[present].tolist()
    incomplete: list[bool] = tree.incomplete[present].tolist()
    raws = [raw_path(r) for r in taken.select(_RAW_NAMES).to_pylist()] if tree.undecodable else []
    out: list[Check] = []
    for ann, slot in zip(anns, slots, strict=True):
        if ann.by not in _DECIDERS:
            out.append(
                ("decided-by-agent", f"written by {ann.by!r}, not by a person or rule", None)
            )
            continue
        normal = os.path.normpath(ann.path)
        if normal != ann.path or not _inside(normal, root):
            out.append(("outside-root", f"{ann.path} is outside {root}", None))
            continue
        if slot is None:
            out.append(("not-in-snapshot", "", None))
            continue
        # where every name is valid UTF-8, a row's exact bytes are its text path's
        raw = raws[slot] if tree.undecodable else ann.path.encode("utf-8", "surrogatepass")
        if raw != ann.path_raw:
            out.append(("not-in-snapshot", "only a differently-encoded name matches", None))
            continue
        if protected[slot]:
            claim, rule = (t.column(c)[rows[slot]].as_py() for c in ("claim", "rule"))
            out.append(("protected", f"{claim} ({rule})", None))
            continue
        if kinds[slot] in ("symlink", "other"):
            out.append(("symlink" if kinds[slot] == "symlink" else "special-file", "", None))
            continue
        inside = (
            tree.below(ann.path, ann.path_raw, ordered=ordered) if kinds[slot] == "dir" else None
        )
        if mounts[slot] or (inside is not None and tree.mount_points[inside].any()):
            out.append(("contains-mount", "the scan recorded a mount point there", None))
        elif incomplete[slot] or (inside is not None and tree.incomplete[inside].any()):
            out.append(("incomplete-scan", "", None))
        else:
            out.append(("", "", inside))
    return out


def _check_one(
    ann: Annotation,
    row: dict[str, Any] | None,
    index: int | None,
    check: Check,
    tree: SnapshotIndex,
    kept_paths: list[bytes],
    sel: Selection,
    made_on: tuple[str, Mapping[bytes, str]] | None = None,
) -> dict[str, Any] | None:
    code, detail, inside = check
    if code:
        _exclude(sel, ann, code, detail)
        return None
    assert row is not None and index is not None  # check_entries found it
    row = dict(row)
    below = tree.rows(inside) if inside is not None else []
    kept = first_kept_inside(ann.path_raw, kept_paths)
    if kept is not None:
        shown = kept.decode("utf-8", "backslashreplace")
        _exclude(sel, ann, "contains-kept-entry", f"{shown} is marked keep")
        return None
    if made_on is not None:
        stale = _changed_since_decision(ann, row, below, made_on)
        if stale:
            _exclude(sel, ann, "changed-since-decision", stale)
            return None
    row.update(
        note=ann.note,
        decided_by=ann.by,
        decided_at=ann.at,
        path=ann.path,
        path_raw=ann.path_raw,
        row_index=index,
    )
    if row["kind"] == "dir":
        row["fingerprint"] = _subtree_fingerprint(row, below)
        row["subtree_rows"] = inside
    return row


def _changed_since_decision(
    ann: Annotation,
    row: Mapping[str, Any],
    below: Sequence[Mapping[str, Any]],
    made_on: tuple[str, Mapping[bytes, str]],
) -> str:
    """Why the entry is not what the decision was made on ("" when it is)."""
    scan_id, digests = made_on
    if ann.digest is None:
        return "the decision records no snapshot it was made on (it predates that record)"
    if ann.snapshot_id == scan_id:
        return ""  # made on this very snapshot: its digest is this snapshot's
    now = digests.get(ann.path_raw)
    if now == ann.digest:
        return ""
    if row["kind"] == "dir" and row["risk"] == "safe" and all(r["risk"] == "safe" for r in below):
        return ""  # a cache or dependency directory: new content that is still all safe
    if now is None:
        return f"snapshot {scan_id} did not read it completely, so it cannot be compared"
    return f"it changed after the decision (made on snapshot {ann.snapshot_id})"


def first_kept_inside(path: bytes, kept_paths: Sequence[bytes]) -> bytes | None:
    """The first of ``kept_paths`` (sorted exact paths) strictly inside ``path``, if any."""
    prefix = path.rstrip(b"/") + b"/"
    i = bisect.bisect_left(kept_paths, prefix)
    if i < len(kept_paths) and kept_paths[i].startswith(prefix):
        return kept_paths[i]
    return None


def _unreviewed(tree: SnapshotIndex, annotations: Sequence[Annotation]) -> int:
    """Entries below the root without a keep, delete or unsure decision."""
    reviewed = {a.path for a in annotations if a.is_reviewed}
    hit = sum(1 for path in reviewed for i in tree.named(path) if i not in tree.top)
    return int(tree.table.num_rows) - len(tree.top) - hit


def _keep_bytes(tree: SnapshotIndex, keeps: Sequence[Annotation]) -> int:
    """Bytes under the kept entries: their subtrees' union, each inode once."""
    chosen = np.zeros(tree.table.num_rows, dtype=bool)
    for ann in keeps:
        index = tree.row_of(ann.path, ann.path_raw)
        if index is not None:
            chosen[index] = True
            chosen[tree.below(ann.path, ann.path_raw, ordered=False)] = True
    return kept_bytes(tree.table, chosen)


# -- the file ---------------------------------------------------------------------------------


_CANDIDATE_KEYS = (
    "kind", "size", "alloc", "mtime_ns", "ctime_ns", "inode", "dev", "nlink", "tree_bytes",
    "tree_alloc", "tree_files", "risk", "rule", "claim", "note", "decided_by", "decided_at",
)  # fmt: skip


def _candidate_json(row: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"path": row["path"]}
    out.update({k: row.get(k) for k in _CANDIDATE_KEYS})
    out["confidence"] = round(float(row["confidence"]), 3)
    fp = row.get("fingerprint")
    out["fingerprint"] = asdict(fp) if fp is not None else None
    return _with_raw(out, row["path"], row["path_raw"])


def selection_summary(sel: Selection, table: pa.Table) -> dict[str, int]:
    """Counts and the bytes the candidates would free (each inode once, only when all its names go).

    The plan's ``summary``; the widget shows it live before a plan is exported.
    """
    mask = np.zeros(table.num_rows, dtype=bool)
    for cand in sel.candidates:
        mask[cand["row_index"]] = True
        if "subtree_rows" in cand:
            mask[cand["subtree_rows"]] = True
    freed, freed_alloc = freed_bytes(table, mask)
    return {
        "candidates": len(sel.candidates),
        "delete_count": sel.counts.get("delete", 0),
        "keep_count": sel.counts.get("keep", 0),
        "unsure_count": sel.counts.get("unsure", 0),
        "unreviewed_count": sel.counts.get("unreviewed", 0),
        "excluded": len(sel.excluded),
        "folded": len(sel.folded),
        "reclaim_bytes": freed,
        "reclaim_alloc": freed_alloc,
        "keep_bytes": sel.keep_bytes,
    }


def assemble_plan(
    sel: Selection,
    table: pa.Table,
    *,
    plan_id: str,
    created_at: str,
    expires_at: str,
    ttl: int,
    root: Mapping[str, Any],
    snapshot: Mapping[str, Any],
    store: str,
    reference_check: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The plan@1 document (digest included) from checked candidates (pure).

    ``reference_check`` records each workspace searched for references (and whether the
    search was complete); it is part of what the digest binds.
    """
    plan: dict[str, Any] = {
        "schema": PLAN_SCHEMA,
        "plan_id": plan_id,
        "created_at": created_at,
        "expires_at": expires_at,
        "ttl_seconds": ttl,
        "store": store,
        "root": dict(root),
        "snapshot": dict(snapshot),
        "authority": "none: a plan is evidence, not permission; execute re-checks every entry",
        "candidates": [_candidate_json(c) for c in sel.candidates],
        "excluded": [e.to_json() for e in sel.excluded],
        "folded": [{"path": p, "into": into} for p, into in sel.folded],
        "summary": selection_summary(sel, table),
        "reference_check": [dict(c) for c in reference_check],
    }
    plan["plan_digest"] = plan_digest(plan)
    return plan


def decided_by_text(by: Any) -> str:
    """Who made a candidate's decision, for people: ``you`` or ``a remembered rule``."""
    return {"human": "you", "rule": "**a remembered rule**"}.get(str(by), str(by))


def _md_cell(text: Any) -> str:
    """A table cell: control characters escaped visibly (a name may hold any), pipes too."""
    return shown(str(text if text is not None else "")).replace("|", "\\|")


def plan_markdown(plan: Mapping[str, Any], *, dry_run_command: str, confirm_command: str) -> str:
    """The human list beside the plan: summary, candidates by rule, exclusions, folded."""
    s = plan["summary"]
    lines = [
        f"# hygiene-nb plan {plan['plan_id']}",
        "",
        f"- root: `{shown(plan['root']['path'])}`",
        f"- snapshot: `{plan['snapshot']['scan_id']}`",
        f"- created: {plan['created_at']}; **expires: {plan['expires_at']}**",
        f"- digest: `{plan['plan_digest']}`",
        "",
        "## Summary",
        "",
        "| candidates | reclaim (apparent) | reclaim (on disk) | excluded | folded | keep | "
        "unsure | unreviewed |",
        "|---|---|---|---|---|---|---|---|",
        f"| {s['candidates']} | {s['reclaim_bytes']} | {s['reclaim_alloc']} | {s['excluded']} "
        f"| {s['folded']} | {s['keep_count']} | {s['unsure_count']} | {s['unreviewed_count']} |",
        "",
        *(
            [
                "Nothing has been moved. The executor re-checks every candidate when it acts and "
                "moves it into a restorable quarantine. Dry run first, then confirm:",
                "",
                "```sh",
                shown(dry_run_command),
                shown(confirm_command),
                "```",
            ]
            if s["candidates"]
            else ["Nothing to execute: this plan has no candidates (see Excluded for why)."]
        ),
        "",
        "## Candidates",
    ]
    by_rule: dict[str, list[Mapping[str, Any]]] = {}
    for cand in plan["candidates"]:
        by_rule.setdefault(cand["rule"], []).append(cand)
    for rule, cands in sorted(by_rule.items()):
        lines += [
            "",
            f"### {shown(str(rule))}: {shown(str(cands[0]['claim']))}",
            "",
            "| path | kind | bytes | risk | decided by | note |",
            "|---|---|---|---|---|---|",
        ]
        for c in cands:
            size = c["tree_bytes"] if c["tree_bytes"] is not None else c["size"]
            lines.append(
                f"| `{_md_cell(c['path'])}` | {c['kind']} | {size} | {c['risk']} "
                f"| {decided_by_text(c['decided_by'])} "
                f"| {_md_cell(c['note'])} |"
            )
    lines += ["", "## Excluded", "", "| path | code | why |", "|---|---|---|"]
    lines += [
        f"| `{_md_cell(e['path'])}` | `{e['code']}` | {_md_cell(e['message'])} |"
        for e in plan["excluded"]
    ]
    if plan["folded"]:
        lines += ["", "## Folded into an outer candidate", ""]
        lines += [f"- `{_md_cell(f['path'])}` → `{_md_cell(f['into'])}`" for f in plan["folded"]]
    return "\n".join(lines) + "\n"
