"""The review state: what a person decided, what waits, and the plans and executions since.

Coverage and the pending decisions count human decisions only (a remembered rule's ``by:
rule`` is not a review); a decision covers its whole subtree (``decided_rows``).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
from collections import Counter
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb import api
from hygiene_nb.bulk import without_collection
from hygiene_nb.classify.summary import kept_bytes
from hygiene_nb.errors import UsageError
from hygiene_nb.ledger import DECISIONS, Annotation, Ledger
from hygiene_nb.query.history import resolve_scan
from hygiene_nb.receipts import read_receipt
from hygiene_nb.scan.index import ScanInfo
from hygiene_nb.scan.snapshot import query_engine, row_keys

__all__ = [
    "COVERAGE",
    "Coverage",
    "decided_rows",
    "decisions_above",
    "decisions_of",
    "executions",
    "human_decisions",
    "ledger_state",
    "pending_counts",
    "pending_decisions",
    "plan_preview",
    "plans",
    "review_coverage",
]


@dataclass(frozen=True)
class Coverage:
    """How much of a snapshot a person has decided on (a decision covers its whole subtree)."""

    scan_id: str
    entries: int
    bytes: int
    reviewed_entries: int
    reviewed_bytes: int
    by_decision: dict[str, tuple[int, int]]  # decision → (entries, bytes)

    @property
    def share_entries(self) -> float:
        """Share of entries covered by a human decision (0 when the snapshot is empty)."""
        return self.reviewed_entries / self.entries if self.entries else 0.0

    @property
    def share_bytes(self) -> float:
        """Share of bytes covered by a human decision (0 when there are no bytes)."""
        return self.reviewed_bytes / self.bytes if self.bytes else 0.0


def decided_rows(paths: pa.ChunkedArray | pa.Array, decided: dict[str, str]) -> np.ndarray:
    """For each path, the decision that covers it (its own, else its nearest decided ancestor).

    Returns an object array holding a decision or ``None``. Two ways, one answer (a property
    test holds them to a reference): few paths against many decisions (a treemap's 2,000 nodes
    against a ledger of 100,000) look each path's ancestors up in ``decided``; many paths sort
    once, so every decided subtree is a contiguous range found by binary search.
    """
    text = np.asarray(paths.to_numpy(zero_copy_only=False), dtype=object)
    if not decided or not text.size:
        return np.full(text.shape, None, dtype=object)
    if 2 * text.size < len(decided):
        return _covering_walked(text, decided)
    return _covering_sorted(text, paths, decided)


def _covering_walked(text: np.ndarray, decided: dict[str, str]) -> np.ndarray:
    """Per path, the longest key covering it: itself, then each ancestor from the nearest.

    A key covers a path when it is the path or the path starts with the key (without a
    trailing slash) and a slash; so above the path, both ``/a`` and ``/a/`` cover ``/a/x``,
    and the longer of the two is the nearer.
    """
    out = np.full(text.shape, None, dtype=object)
    for i, path in enumerate(text.tolist()):
        found = decided.get(path)
        end = len(path)
        while found is None and end > 0:
            end = path.rfind("/", 0, end)
            if end < 0:
                break
            found = decided.get(path[: end + 1])
            if found is None:
                found = decided.get(path[:end])
        out[i] = found
    return out


def _covering_sorted(
    text: np.ndarray, paths: pa.ChunkedArray | pa.Array, decided: dict[str, str]
) -> np.ndarray:
    """Sort the paths once, then four binary searches per decision (ancestors applied first)."""
    out = np.full(text.shape, None, dtype=object)
    # Arrow sorts UTF-8 bytes, which is code point order: the order numpy compares str in
    order = pc.sort_indices(paths).to_numpy()
    ordered = text[order]
    keys = sorted(decided, key=len)  # ancestors first, so nearer decisions win
    bases = [k.rstrip("/") + "/" for k in keys]
    ends = [b[:-1] + "0" for b in bases]  # '0' sorts right after '/'
    found = [
        np.searchsorted(ordered, np.array(keys, dtype=object), side="left"),
        np.searchsorted(ordered, np.array(keys, dtype=object), side="right"),
        np.searchsorted(ordered, np.array(bases, dtype=object), side="left"),
        np.searchsorted(ordered, np.array(ends, dtype=object), side="left"),
    ]
    own_lo, own_hi, lo, hi = found
    touching = np.flatnonzero((own_hi > own_lo) | (hi > lo))  # still ancestors first
    for k in touching.tolist():
        out[order[own_lo[k] : own_hi[k]]] = decided[keys[k]]
        out[order[lo[k] : hi[k]]] = decided[keys[k]]
    return out


def decisions_above(
    decided: dict[str, str],
    directories: Iterable[str],
    *,
    exact: Container[str] = (),
    closed: bool = False,
) -> dict[str, str]:
    """The decisions of ``decided`` that can cover a path in ``directories`` or below them.

    A decision covers a path when it is on the path itself (``exact``) or on a directory
    above it: one of ``directories`` or of their ancestors (``closed``: ``directories``
    holds every directory above each of them already, as a snapshot's parents do). Most of a
    ledger is decisions on files, which cover nothing else; leaving them out first makes
    ``decided_rows`` search for a few keys instead of every one (100k: about 0.5 s less).
    """
    known = set(directories)
    if not closed:
        for directory in list(known):
            up = posixpath.dirname(directory)
            while up != directory and up not in known:
                known.add(up)
                directory, up = up, posixpath.dirname(up)
    return {k: d for k, d in decided.items() if k in exact or (k.rstrip("/") or "/") in known}


def human_decisions(store: api.StoreArg, root: str) -> dict[str, str]:
    """Path → decision of every keep/delete/unsure a person made at or under ``root``."""
    with Ledger.open(api.open_store(store)) as ledger:
        return ledger.decisions(under=root, by="human")


def decisions_of(annotations: Sequence[Annotation]) -> dict[str, str]:
    """What ``human_decisions`` gives, from annotations read already (in path order)."""
    return {a.path: str(a.decision) for a in annotations if a.by == "human" and a.is_reviewed}


# Per decision (NULL: not reviewed), entries and bytes three ways: a hard-linked inode counted
# once among all rows, once among the reviewed ones, and once among those of its decision.
COVERAGE = """
    WITH covered AS (
        SELECT e.row_no, e.kind, e.size, e.dev, e.inode, e.nlink,
               coalesce(d.decision, p.decision) AS decision
        FROM entries e
        LEFT JOIN own_decisions d ON d.parent IS NOT DISTINCT FROM e.parent AND d.name = e.name
        LEFT JOIN parent_decisions p ON p.parent = e.parent),
    ranked AS (
        SELECT row_no,
               row_number() OVER (PARTITION BY dev, inode ORDER BY row_no) AS in_all,
               row_number() OVER (
                   PARTITION BY decision IS NOT NULL, dev, inode ORDER BY row_no) AS in_reviewed,
               row_number() OVER (PARTITION BY decision, dev, inode ORDER BY row_no) AS in_decision
        FROM covered WHERE coalesce(nlink, 1) > 1 AND kind <> 'dir')
    SELECT c.decision, count(*) AS entries,
           CAST(sum(CASE WHEN r.row_no IS NULL OR r.in_all = 1 THEN c.size ELSE 0 END)
                AS BIGINT) AS all_bytes,
           CAST(sum(CASE WHEN r.row_no IS NULL OR r.in_reviewed = 1 THEN c.size ELSE 0 END)
                AS BIGINT) AS reviewed_bytes,
           CAST(sum(CASE WHEN r.row_no IS NULL OR r.in_decision = 1 THEN c.size ELSE 0 END)
                AS BIGINT) AS decision_bytes
    FROM covered c LEFT JOIN ranked r ON r.row_no = c.row_no
    GROUP BY c.decision
"""


def _own_keys(decided: dict[str, str], root: str) -> pa.Table:
    """The decisions on an entry itself, keyed as snapshot rows are: (parent, name).

    Split by Arrow at the last slash (100k decisions: about 30 ms, against 0.45 s one by one),
    as ``os.path.dirname`` splits a ledger's paths (normalised: a doubled slash only leads).
    """
    own = {p: d for p, d in decided.items() if p == "/" or not p.endswith("/")}  # "/a/": inside
    paths = pa.array(list(own), pa.string())
    halves = pc.split_pattern(paths, "/", max_splits=1, reverse=True)
    head = pc.list_element(halves, 0)
    # "/a" -> "/", "//a" -> "//": a head of slashes only keeps them all, as dirname does
    slashes = pc.match_substring_regex(head, "^/*$")
    parent = pc.if_else(slashes, pc.binary_join_element_wise(head, "/", ""), head)
    at_root = pc.equal(paths, root)
    return pa.table(
        {
            "parent": pc.if_else(at_root, None, parent),
            "name": pc.if_else(at_root, paths, pc.list_element(halves, 1)),
            "decision": pa.array(list(own.values()), pa.string()),
        }
    )


def review_coverage(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    annotations: Sequence[Annotation] | None = None,
) -> Coverage:
    """Share of a snapshot's entries and bytes that carry a human decision (keep/delete/unsure).

    Decisions a remembered rule filled in (``by: rule``) do not count as reviewed. A query over
    the snapshot's file: an entry takes its own decision, else the one covering its directory
    (``decided_rows`` over the distinct directories, a tenth of the rows). ``annotations``:
    every annotation at or under the root, in path order, when read already (a report reads
    the ledger once for all its sections).
    """
    info = resolve_scan(root, store=store, scan_id=scan_id)
    decided = (
        human_decisions(store, info.root) if annotations is None else decisions_of(annotations)
    )
    with query_engine() as con:
        api.open_entries(con, info, store=store, classified=False)
        parents = con.sql(
            "SELECT DISTINCT parent FROM entries WHERE parent IS NOT NULL"
        ).to_arrow_table()
        texts = parents.column("parent").to_pylist()
        inside = [p.rstrip("/") + "/" for p in texts]
        covering = decided_rows(
            pa.array(inside, pa.string()), decisions_above(decided, texts, closed=True)
        )
        del texts, inside  # 100k parents: about 25 MB of text, given back before the join
        con.register(
            "parent_decisions",
            pa.table(
                {
                    "parent": parents.column("parent"),
                    "decision": pa.array(covering.tolist(), pa.string()),
                }
            ),
        )
        del covering
        con.register("own_decisions", _own_keys(decided, info.root))
        groups = con.execute(COVERAGE).fetchall()
    by_decision = {d: (0, 0) for d in DECISIONS}
    entries = total = reviewed_entries = reviewed_bytes = 0
    for decision, count, all_bytes, in_reviewed, in_decision in groups:
        entries += count
        total += all_bytes or 0
        if decision is not None:
            reviewed_entries += count
            reviewed_bytes += in_reviewed or 0
            by_decision[decision] = (int(count), int(in_decision or 0))
    return Coverage(
        scan_id=info.scan_id,
        entries=entries,
        bytes=total,
        reviewed_entries=reviewed_entries,
        reviewed_bytes=reviewed_bytes,
        by_decision=by_decision,
    )


def _bytes(table: pa.Table, mask: np.ndarray) -> int:
    """Apparent bytes of the masked rows, each hard-linked inode once."""
    return kept_bytes(table, mask.astype(bool))


@without_collection
def pending_decisions(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    annotations: Sequence[Annotation] | None = None,
) -> pd.DataFrame:
    """Human decisions still waiting: every ``unsure``, and every ``delete`` still on disk.

    "On disk" means present in the snapshot (the latest of ``root`` by default). Columns:
    ``path``, ``decision``, ``note``, ``at``, ``bytes`` (recursive for a directory; missing
    when the path is not in the snapshot). ``annotations``: as for ``review_coverage``.
    """
    info = resolve_scan(root, store=store, scan_id=scan_id)
    if annotations is None:
        with Ledger.open(api.open_store(store)) as ledger:
            waiting = ledger.waiting(under=info.root)
    else:  # what Ledger.waiting reads
        waiting = [
            (a.path, str(a.decision), a.note, a.at)
            for a in annotations
            if a.by == "human" and a.decision in ("delete", "unsure")
        ]
    paths, decisions, notes, ats = zip(*waiting, strict=True) if waiting else ((), (), (), ())
    asked = pa.table(
        {
            "path": pa.array(paths, pa.string()),
            "decision": pa.array(decisions, pa.string()),
            "note": pa.array([n or "" for n in notes], pa.string()),
            "at": pa.array(ats, pa.string()),
        }
    )
    frame: pd.DataFrame = _waiting_on_disk(asked, info, store).to_pandas(
        types_mapper={pa.int64(): pd.Int64Dtype()}.get
    )
    return frame


def _waiting_on_disk(asked: pa.Table, info: ScanInfo, store: api.StoreArg) -> pa.Table:
    """``asked`` (path, decision, note, at) with each path's ``bytes`` in the snapshot, sorted.

    A ``delete`` whose path the snapshot does not hold is left out (it is not waiting); bytes
    are recursive for a directory. One query, which joins each path's ``row_keys`` to the
    rows' ``parent`` and ``name``: no row's path is made. Sorted by decision, bytes (largest
    first, unknown last) and path.
    """
    keys = row_keys(asked.column("path").to_pylist(), info.root)
    split = asked.append_column("parent", keys.column("parent"))
    split = split.append_column("name", keys.column("name"))
    with query_engine() as con:
        api.open_entries(con, info, store=store, classified=False)
        con.register("asked", split)
        # where two rows show the same text (an undecodable name beside one literally named
        # like its text), the path is held, and its bytes are the larger
        return con.sql(
            """
            WITH found AS (
                SELECT a.path, e.kind, e.size, e.tree_bytes
                FROM entries e
                JOIN asked a ON e.parent IS NOT DISTINCT FROM a.parent AND e.name = a.name
            ), held AS (
                SELECT path,
                       max(CASE WHEN CAST(kind AS VARCHAR) = 'dir' THEN tree_bytes ELSE size END)
                       AS bytes
                FROM found GROUP BY path
            )
            SELECT a.path, a.decision, a.note, a.at, CAST(h.bytes AS BIGINT) AS bytes
            FROM asked a LEFT JOIN held h ON h.path = a.path
            WHERE a.decision = 'unsure' OR h.path IS NOT NULL
            ORDER BY a.decision, h.bytes DESC NULLS LAST, a.path
            """
        ).to_arrow_table()


def pending_counts(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    pending: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """How many pending decisions of each kind, and their bytes (no paths, no notes).

    ``unknown`` counts entries whose size is not known (not in the snapshot, or unreadable):
    where it is not 0, ``bytes`` is a lower bound. ``pending``: what ``pending_decisions``
    gave for the same snapshot, when the caller has it (else it is read).
    """
    if pending is None:
        pending = pending_decisions(root, store=store, scan_id=scan_id)
    pending = pending.assign(unknown=pending["bytes"].isna().astype("int64"))
    counts = pending.groupby("decision").agg(
        entries=("path", "size"), bytes=("bytes", "sum"), unknown=("unknown", "sum")
    )
    return counts.reindex(["delete", "unsure"], fill_value=0).rename_axis("decision").reset_index()


def executions(
    *, store: api.StoreArg = None, limit: int = 20, redact: bool = False
) -> pd.DataFrame:
    """The latest executions (newest first) and whether each batch is still in quarantine.

    With ``redact`` the receipt's path is left out.

    ``in_quarantine`` is True while a batch directory the receipt names exists, False once it
    was purged, and missing when the receipt names none (nothing moved) or cannot be read.
    """
    with Ledger.open(api.open_store(store)) as ledger:
        rows = ledger.executions()
    frame = pd.DataFrame(
        rows,
        columns=[
            "plan_id",
            "plan_digest",
            "authorization_id",
            "authorized_at",
            "finished_at",
            "batch_id",
            "receipt_path",
            "moved",
            "skipped",
            "moved_bytes",
            "status",
        ],
    )
    frame["in_quarantine"] = [_batch_present(p) for p in frame["receipt_path"]]
    if redact:
        frame = frame.drop(columns=["receipt_path"])
    return frame.iloc[::-1].head(limit).reset_index(drop=True)


def _batch_present(receipt_path: str) -> bool | None:
    """Whether a quarantine batch of a receipt still exists (read-only: ``lstat`` only)."""
    try:
        receipt = read_receipt(Path(receipt_path))
    except UsageError:  # gone or unreadable: nothing to say about its batch
        return None
    batches = [b for b in receipt.get("batches") or [] if isinstance(b, dict)]
    where = [str(b["batch_path"]) for b in batches if isinstance(b.get("batch_path"), str)]
    if not where:
        return None
    return any(os.path.lexists(w) for w in where)


def plan_preview(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    annotations: Sequence[Annotation] | None = None,
) -> dict[str, int]:
    """What ``make_plan`` would put in a plan now (counts and reclaimable bytes), without the disk.

    The same selection as the plan (nested deletes folded, keeps and protected entries left
    out), so its ``reclaim_bytes`` never double counts. Exporting re-checks the disk.
    ``annotations``: as for ``review_coverage``.
    """
    info = resolve_scan(root, store=store, scan_id=scan_id)
    return api.preview_plan(info.root, store=store, scan_id=info.scan_id, annotations=annotations)


def plans(root: str | None = None, *, store: api.StoreArg = None) -> pd.DataFrame:
    """The plans issued for ``root``, newest first: id, created, expiry, candidates, state."""
    info = resolve_scan(root, store=store)
    with Ledger.open(api.open_store(store)) as ledger:
        issued = ledger.plans(root=info.root)
    rows = [
        (p.plan_id, p.created_at, p.expires_at, p.candidates, p.reclaim_bytes, p.state)
        for p in reversed(issued)
    ]
    columns = ["plan_id", "created_at", "expires_at", "candidates", "reclaim_bytes", "state"]
    return pd.DataFrame(rows, columns=columns)


def ledger_state(
    *, store: api.StoreArg = None, root: str, annotations: Sequence[Annotation] | None = None
) -> dict[str, object]:
    """A fingerprint of the ledger's decisions under ``root``: counts and a digest of every row.

    ``annotations``: every annotation at or under ``root``, in path order, when read already.
    """
    found: Sequence[tuple[Any, ...]]
    if annotations is None:
        with Ledger.open(api.open_store(store)) as ledger:
            found = ledger.columns(("path_raw", "decision", "note", "by", "at"), under=root)
    else:
        found = [(a.path_raw, a.decision, a.note, a.by, a.at) for a in annotations]
    digest = hashlib.sha256()
    for row in found:  # (path_raw, decision, note, by, at), in path order
        digest.update(repr((bytes(row[0]), *row[1:])).encode())
    decided = Counter(row[1] for row in found)
    return {
        "annotations": len(found),
        "decisions": {d: decided.get(d, 0) for d in DECISIONS},
        "digest": "sha256:" + digest.hexdigest(),
    }
