"""The plan summary kept current one decision at a time (what the widget shows after a click).

``PlanTally(table, annotations, root=...)`` gives what
``selection_summary(select_candidates(table, annotations, root=root), table)`` gives, and keeps
giving it as decisions change (``update``), at the cost of the rows they touch rather than of
the snapshot and the ledger. It keeps the state the summary is made of:

- per decision: the counts, and the text paths reviewed (``unreviewed``);
- per ``keep``: the rows it covers (itself and its subtree); per row, how many keeps cover it;
- per ``delete``: what its entry alone says (``check_entries``, computed once), whether it is a
  candidate now (nothing inside it is kept), and the rows a candidate covers; per row, how many
  candidates cover it. A candidate whose own row is covered by another is folded into it.

Bytes follow ``classify.summary``: each covered row adds its own bytes once, however many
decisions cover it (nested decisions are never counted twice), and a hard-linked inode counts
once, at its first covered name, and for reclaimable bytes only when all its names are covered.
So a change only recounts the rows whose coverage started or stopped, and the hard-link groups
they belong to.
"""

from __future__ import annotations

import bisect
import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb.ledger import Annotation
from hygiene_nb.plan.document import (
    INDEX_FLAGS,
    Exclusion,
    SnapshotIndex,
    check_entries,
    first_kept_inside,
)

__all__ = ["TALLY_COLUMNS", "PlanTally", "tally_table"]

Rows = npt.NDArray[np.int64]
# what the checks of a delete decision read (``check_entries``)
_CHECKED = ("parent", "name", "parent_raw", "name_raw", "kind", "protected", "claim", "rule")
# every column a tally reads: its checks, its bytes and hard links, and its index's paths and
# what the scan did not read whole
TALLY_COLUMNS = (*_CHECKED, "depth", "size", "alloc", "nlink", "dev", "inode", *INDEX_FLAGS)


def tally_table(table: pa.Table) -> pa.Table:
    """The columns of ``table`` a ``PlanTally`` reads (``TALLY_COLUMNS``), no copy made.

    A tally of it gives what a tally of ``table`` gives; the index it builds then combines
    (copies) only these (1M entries: about 170 MB of the 307 MB a classified table holds).
    """
    return table.select([c for c in TALLY_COLUMNS if c in table.column_names])


def _ancestors(raw: bytes) -> Iterable[bytes]:
    """Every directory above ``raw``, nearest first."""
    parent = os.path.dirname(raw)
    while parent != raw:
        yield parent
        raw, parent = parent, os.path.dirname(parent)


def _segments(starts: Rows, ends: Rows) -> Rows:
    """``concatenate([arange(s, e) for s, e in zip(starts, ends)])``, in one pass."""
    lengths = ends - starts
    total = int(lengths.sum())
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    out: Rows = shift + np.arange(total, dtype=np.int64)
    return out


def _union(sets: Sequence[Rows], n: int) -> Rows:
    """The rows in any of ``sets`` (each a set of distinct rows below ``n``), once each."""
    if len(sets) == 1:
        return sets[0]
    mask = np.zeros(n, dtype=bool)  # one pass over a mask of every row (1M: about 1 ms)
    for rows in sets:
        mask[rows] = True
    return np.flatnonzero(mask)


def _add(times: npt.NDArray[np.int32], sets: Sequence[Rows], step: int) -> None:
    """Count each of ``sets`` (each a set of distinct rows) once more in ``times`` (or less)."""
    if len(sets) == 1:
        times[sets[0]] += step  # distinct rows: a plain fancy index adds once to each
    elif sets:
        np.add.at(times, np.concatenate(sets), step)


class _Links:
    """The hard-link groups of a snapshot: non-directories with ``nlink > 1``, by (dev, inode).

    The same groups as ``classify.summary``; each group's rows are kept in row order, so its
    first covered name is the first covered row of its segment.
    """

    def __init__(self, table: pa.Table) -> None:
        def column(name: str) -> npt.NDArray[np.int64]:
            values: npt.NDArray[np.int64] = table.column(name).to_numpy(zero_copy_only=False)
            return values.astype(np.int64)

        self.nlink = column("nlink")
        is_dir = np.asarray(pc.equal(table.column("kind").cast(pa.string()), "dir"), dtype=bool)
        self.linked = (self.nlink > 1) & ~is_dir
        self.group = np.full(table.num_rows, -1, dtype=np.int64)
        rows = np.flatnonzero(self.linked)
        self.count = 0
        if rows.size:
            keys = np.stack([column("dev")[rows], column("inode")[rows]], axis=1)
            _, inverse = np.unique(keys, axis=0, return_inverse=True)
            self.group[rows] = inverse.reshape(-1)
            self.count = int(self.group.max()) + 1
        self.members = rows[np.argsort(self.group[rows], kind="stable")]
        self.starts = np.searchsorted(self.group[self.members], np.arange(self.count + 1))


class _Cover:
    """Rows covered by a union of row sets (how many sets cover each row), and their bytes.

    ``complete``: an inode counts only when all its names are covered (reclaimable bytes);
    otherwise at its first covered name (kept bytes).
    """

    def __init__(self, size: Rows, alloc: Rows, links: _Links, *, complete: bool) -> None:
        self.size, self.alloc, self.links, self.complete = size, alloc, links, complete
        self.times = np.zeros(size.shape, dtype=np.int32)
        self.bytes = 0
        self.alloc_bytes = 0
        self.group_bytes = np.zeros(links.count, dtype=np.int64)
        self.group_alloc = np.zeros(links.count, dtype=np.int64)

    def change(self, plus: Sequence[Rows], minus: Sequence[Rows]) -> None:
        """Cover each of ``plus`` once more and each of ``minus`` once less; recount."""
        if not plus and not minus:
            return
        touched = _union([*plus, *minus], self.times.size)
        before = self.times[touched] > 0
        _add(self.times, plus, 1)
        _add(self.times, minus, -1)
        flipped = touched[before != (self.times[touched] > 0)]
        sign = np.where(self.times[flipped] > 0, 1, -1)
        plain = ~self.links.linked[flipped]
        self.bytes += int((self.size[flipped[plain]] * sign[plain]).sum())
        self.alloc_bytes += int((self.alloc[flipped[plain]] * sign[plain]).sum())
        self._regroup(np.unique(self.links.group[flipped[~plain]]))

    def _regroup(self, groups: Rows) -> None:
        """Recount the bytes of these hard-link groups from their covered names."""
        if not groups.size:
            return
        links = self.links
        starts, ends = links.starts[groups], links.starts[groups + 1]
        members = links.members[_segments(starts, ends)]
        segment = np.repeat(np.arange(groups.size), ends - starts)
        chosen = self.times[members] > 0
        names_in = np.bincount(segment[chosen], minlength=groups.size)
        hit, first_at = np.unique(segment[chosen], return_index=True)
        first = members[chosen][first_at]
        counts = np.ones(first.shape, dtype=bool)
        if self.complete:
            counts = names_in[hit] >= links.nlink[first]
        size = np.zeros(groups.size, dtype=np.int64)
        alloc = np.zeros(groups.size, dtype=np.int64)
        size[hit[counts]] = self.size[first[counts]]
        alloc[hit[counts]] = self.alloc[first[counts]]
        self.bytes += int(size.sum() - self.group_bytes[groups].sum())
        self.alloc_bytes += int(alloc.sum() - self.group_alloc[groups].sum())
        self.group_bytes[groups] = size
        self.group_alloc[groups] = alloc


class PlanTally:
    """The plan summary of ``annotations`` on a classified snapshot, kept as they change.

    Args:
        table: the classified snapshot of ``root`` (as for ``select_candidates``).
        annotations: every annotation at or under ``root``.
        root: the plan's root.
        index: ``SnapshotIndex(table)``, when the caller keeps one (default: built here).

    Raises:
        ValueError: ``index`` was built from another table.
    """

    def __init__(
        self,
        table: pa.Table,
        annotations: Iterable[Annotation],
        *,
        root: str,
        index: SnapshotIndex | None = None,
    ) -> None:
        if index is not None and index.source is not table:
            raise ValueError("index was built from another table")
        self.tree = index if index is not None else SnapshotIndex(table)
        self.root = root
        t = self.tree.table
        size = t.column("size").to_numpy(zero_copy_only=False).astype(np.int64)
        alloc = t.column("alloc").to_numpy(zero_copy_only=False).astype(np.int64)
        links = _Links(t)
        self._kept_cover = _Cover(size, alloc, links, complete=False)
        self._freed_cover = _Cover(size, alloc, links, complete=True)
        self._candidate_row = np.zeros(t.num_rows, dtype=bool)
        self._folded = 0  # candidates whose own row another candidate covers
        self._annotations: dict[bytes, Annotation] = {}
        self._counts = {"delete": 0, "keep": 0, "unsure": 0}
        self._reviewed: dict[str, int] = {}  # text path → reviewed annotations showing it
        self._reviewed_rows = 0  # rows (not at depth 0) whose text path is reviewed
        self._kept: list[bytes] = []  # the keep decisions' exact paths, sorted
        self._keep_rows: dict[bytes, Rows] = {}
        self._checked: dict[bytes, Rows | None] = {}  # delete → rows it would cover (None: no)
        self._why: dict[bytes, tuple[str, str]] = {}  # delete → (code, detail) when None above
        self._candidates: dict[bytes, Rows] = {}
        self._first_count(annotations)

    @property
    def annotations(self) -> Mapping[bytes, Annotation]:
        """The annotations tallied, by exact path."""
        return self._annotations

    def summary(self) -> dict[str, int]:
        """What ``selection_summary`` gives for the annotations tallied now."""
        excluded = len(self._checked) - len(self._candidates)
        return {
            "candidates": len(self._candidates) - self._folded,
            "delete_count": self._counts["delete"],
            "keep_count": self._counts["keep"],
            "unsure_count": self._counts["unsure"],
            "unreviewed_count": self.tree.table.num_rows - len(self.tree.top) - self._reviewed_rows,
            "excluded": excluded,
            "folded": self._folded,
            "reclaim_bytes": self._freed_cover.bytes,
            "reclaim_alloc": self._freed_cover.alloc_bytes,
            "keep_bytes": self._kept_cover.bytes,
        }

    def left_out(self, raw: bytes) -> Exclusion | None:
        """Why the delete decision on ``raw`` is not a candidate now (None: it is, or none).

        The reasons ``select_candidates`` gives from the snapshot and the ledger alone, in its
        words (``Exclusion``); what only the disk can say (a change since the scan, a
        reference from its project) is known at export.
        """
        ann = self._annotations.get(raw)
        if ann is None or ann.decision != "delete" or raw in self._candidates:
            return None
        why = self._why.get(raw)
        if why is not None:
            return Exclusion.of(ann.path, raw, *why)
        kept = first_kept_inside(raw, self._kept)
        if kept is None:
            return None
        shown = kept.decode("utf-8", "backslashreplace")
        return Exclusion.of(ann.path, raw, "contains-kept-entry", f"{shown} is marked keep")

    def update(self, annotations: Iterable[Annotation], *, gone: Iterable[bytes] = ()) -> None:
        """Tally ``annotations`` in place of what their paths had, and take ``gone`` out.

        ``gone``: exact paths that have no annotation any more (a path also in
        ``annotations`` keeps the one given there).
        """
        changes: dict[bytes, Annotation | None] = dict.fromkeys(gone)
        changes.update((a.path_raw, a) for a in annotations)
        self._apply(changes)

    def resync(self, annotations: Iterable[Annotation]) -> None:
        """Tally exactly ``annotations`` (the ledger read again): only what differs changes."""
        now = {a.path_raw: a for a in annotations}
        gone = [raw for raw in self._annotations if raw not in now]
        self.update([a for raw, a in now.items() if self._annotations.get(raw) != a], gone=gone)

    # -- the state ---------------------------------------------------------------------------

    def _first_count(self, annotations: Iterable[Annotation]) -> None:
        """Tally ``annotations`` from nothing: the state ``update`` makes, a pass per part.

        ``update`` takes each decision through every check of a change (100k decisions: about
        1.5 s of Python); from nothing, each part is one pass over the decisions it concerns.
        """
        now = {a.path_raw: a for a in annotations}  # the last for a path, as ``update`` keeps
        self._annotations = dict(now)
        reviewed = [a for a in now.values() if a.is_reviewed]
        for decision, count in Counter(str(a.decision) for a in reviewed).items():
            self._counts[decision] += count
        self._reviewed = dict(Counter(a.path for a in reviewed))
        # every reviewed path looked up once, for the three parts below, where a text path
        # names one row (else each part finds its rows by their exact bytes)
        at: dict[str, int | None] | None = None
        if not self.tree.undecodable:
            texts = list(self._reviewed)
            at = dict(zip(texts, self.tree.rows_of(texts, [b""] * len(texts)), strict=True))
        self._recount_reviewed(dict.fromkeys(self._reviewed, 1), at)
        keeps = [a for a in now.values() if a.decision == "keep"]
        self._kept = sorted(a.path_raw for a in keeps)
        kept_rows = self._kept_rows_of(keeps, None if at is None else [at[a.path] for a in keeps])
        self._keep_rows = {a.path_raw: rows for a, rows in zip(keeps, kept_rows, strict=True)}
        deletes = [a for a in now.values() if a.decision == "delete"]
        self._check(deletes, None if at is None else [at[a.path] for a in deletes])
        self._kept_cover.change(kept_rows, [])
        kept = self._kept
        for ann in deletes:
            covers = self._checked[ann.path_raw]
            if covers is not None and (not kept or first_kept_inside(ann.path_raw, kept) is None):
                self._candidates[ann.path_raw] = covers
        self._move_candidates(list(self._candidates.values()), [])

    def _apply(self, changes: Mapping[bytes, Annotation | None]) -> None:
        kept_minus: list[Rows] = []
        kept_new: list[Annotation] = []
        affected: set[bytes] = set()  # delete decisions whose candidacy may have changed
        fresh: list[Annotation] = []  # new delete decisions, checked together below
        flips: dict[str, int] = {}  # text paths that became reviewed (1) or not (-1)
        for raw, new in changes.items():
            old = self._annotations.get(raw)
            if old == new:
                continue
            self._count(old, -1, flips)
            self._count(new, 1, flips)
            if old is not None and old.decision == "keep":
                del self._kept[bisect.bisect_left(self._kept, raw)]
                kept_minus.append(self._keep_rows.pop(raw))
                affected.update(_ancestors(raw))
            if new is not None and new.decision == "keep":
                bisect.insort(self._kept, raw)
                kept_new.append(new)
                affected.update(_ancestors(raw))
            if old is not None and old.decision == "delete":
                del self._checked[raw]
                self._why.pop(raw, None)
            if new is not None and new.decision == "delete":
                fresh.append(new)
            affected.add(raw)
            if new is None:
                del self._annotations[raw]
            else:
                self._annotations[raw] = new
        self._recount_reviewed(flips)
        kept_plus = self._kept_rows_of(kept_new)
        self._keep_rows.update(
            (a.path_raw, rows) for a, rows in zip(kept_new, kept_plus, strict=True)
        )
        self._check(fresh)
        self._kept_cover.change(kept_plus, kept_minus)
        freed_plus: list[Rows] = []
        freed_minus: list[Rows] = []
        for raw in affected:
            covers = self._checked.get(raw)
            now = covers is not None and first_kept_inside(raw, self._kept) is None
            was = self._candidates.get(raw)
            if was is not None and (not now or covers is not was):
                freed_minus.append(self._candidates.pop(raw))
            if now and covers is not None and raw not in self._candidates:
                freed_plus.append(covers)
                self._candidates[raw] = covers
        self._move_candidates(freed_plus, freed_minus)

    def _count(self, ann: Annotation | None, step: int, flips: dict[str, int]) -> None:
        if ann is None or not ann.is_reviewed:
            return
        self._counts[str(ann.decision)] += step
        before = self._reviewed.get(ann.path, 0)
        self._reviewed[ann.path] = before + step
        if self._reviewed[ann.path] == 0:
            del self._reviewed[ann.path]
        if (before == 0) != (before + step == 0):  # the text path became (un)reviewed
            flips[ann.path] = flips.get(ann.path, 0) + step

    def _recount_reviewed(
        self, flips: Mapping[str, int], at: Mapping[str, int | None] | None = None
    ) -> None:
        """Count in (or out) the rows (not at depth 0) of text paths that flipped.

        ``at``: the row of each of them, when looked up already (only where no text collides).
        """
        flipped = [(path, step) for path, step in flips.items() if step]
        tree = self.tree
        if tree.undecodable:  # a text path may name more than one row
            for path, step in flipped:
                self._reviewed_rows += step * sum(1 for i in tree.named(path) if i not in tree.top)
            return
        paths = [path for path, _ in flipped]
        # no collisions: the text alone finds it
        rows = tree.rows_of(paths, [b""] * len(paths)) if at is None else [at[p] for p in paths]
        for (_, step), row in zip(flipped, rows, strict=True):
            if row is not None and row not in tree.top:
                self._reviewed_rows += step

    def _kept_rows_of(
        self, keeps: Sequence[Annotation], at: Sequence[int | None] | None = None
    ) -> list[Rows]:
        """The rows each keep decision covers: its entry and everything below it.

        ``at``: each one's row, when looked up already.
        """
        found = at if at is not None else self._rows_of(keeps)
        out = []
        for ann, index in zip(keeps, found, strict=True):
            if index is None:
                out.append(np.zeros(0, dtype=np.int64))
                continue
            below = self.tree.below(ann.path, ann.path_raw, ordered=False)
            out.append(np.concatenate([np.array([index], dtype=np.int64), below]))
        return out

    def _check(self, deletes: list[Annotation], at: Sequence[int | None] | None = None) -> None:
        """What each new delete decision's entry alone says (``check_entries``), kept.

        ``at``: each one's row, when looked up already.
        """
        tree = self.tree
        if at is None:
            at = self._rows_of(deletes)
        checks = check_entries(deletes, at, tree, self.root, ordered=False)
        for ann, index, (code, detail, inside) in zip(deletes, at, checks, strict=True):
            if code or index is None:
                self._checked[ann.path_raw] = None
                self._why[ann.path_raw] = (code or "not-in-snapshot", detail)
            else:
                own = np.array([index], dtype=np.int64)
                self._checked[ann.path_raw] = (
                    own if inside is None else np.concatenate([own, inside])
                )

    def _rows_of(self, anns: Sequence[Annotation]) -> list[int | None]:
        return self.tree.rows_of([a.path for a in anns], [a.path_raw for a in anns])

    def _move_candidates(self, plus: list[Rows], minus: list[Rows]) -> None:
        """Cover the new candidates' rows and uncover the old ones'; recount the folded."""
        if not plus and not minus:
            return
        touched = _union([*plus, *minus], self._candidate_row.size)
        was = self._candidate_row[touched] & (self._freed_cover.times[touched] >= 2)
        # a candidate's own row comes first in its rows
        self._candidate_row[np.array([rows[0] for rows in minus], dtype=np.int64)] = False
        self._candidate_row[np.array([rows[0] for rows in plus], dtype=np.int64)] = True
        self._freed_cover.change(plus, minus)
        now = self._candidate_row[touched] & (self._freed_cover.times[touched] >= 2)
        self._folded += int(now.sum()) - int(was.sum())
