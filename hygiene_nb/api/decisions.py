"""A person's decisions: annotate paths, read them back, find the stale ones.

Each decision records the snapshot and the entry's digest it was made on, so a plan can tell a
decision on what changed since. The remembered rules, which fill the decision of a pattern
group's unannotated entries (``by: rule``), are in ``hygiene_nb.api.remembered``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from hygiene_nb.api.snapshots import StoreArg, existing_store
from hygiene_nb.errors import UsageError
from hygiene_nb.ledger import Annotation, Ledger
from hygiene_nb.pathnames import path_b64, require_no_dot_components, within
from hygiene_nb.scan.digests import entry_digests
from hygiene_nb.scan.index import ScanInfo, find_scan, list_scans
from hygiene_nb.store import Store

__all__ = [
    "AnnotateResult",
    "annotate",
    "annotate_paths",
    "annotations_at",
    "stale_decisions",
]


def annotate(
    paths: Sequence[str | bytes],
    *,
    store: StoreArg = None,
    decision: str | None = None,
    note: str | None = None,
    set_decision: bool = True,
    set_note: bool = True,
    snapshot: str | None = None,
    digests: Mapping[bytes, str] | None = None,
    ledger: Ledger | None = None,
) -> list[Annotation]:
    """Write a person's decision and/or note on each absolute path (one batch, all or nothing).

    Each decision records what it was made on: the snapshot (``snapshot``, the one on screen;
    else the latest scan of the deepest scanned root holding the path) and the entry's digest
    there. A plan leaves the decision out (``changed-since-decision``) once the entry no longer
    has that digest.

    Args:
        paths: absolute paths (bytes keep non-UTF-8 names exactly).
        store: the store.
        decision: ``keep``, ``delete``, ``unsure``, or ``None``/``"none"`` to clear.
        note: the note (``""``/``None`` clears it).
        set_decision: False to leave decisions as they are (a note-only write).
        set_note: False to leave notes as they are (a decision-only write).
        snapshot: the id of the scan the decision was made on.
        digests: the entries' digests in ``snapshot`` (exact path → digest), where the caller
            holds the snapshot's rows and has them already (``scan.digests.SnapshotDigests``,
            as the widget does): nothing is looked up then, and a path it leaves out records
            no digest, as one ``entry_digests`` does not find.
        ledger: an open ledger to write through (default: one opened for this call); the
            widget writes through the connection it watches for other writers.

    Raises:
        UsageError: a path is relative or the decision is unknown, or ``digests`` is given
            without ``snapshot``.
    """
    if digests is not None and snapshot is None:
        raise UsageError("digests are of one snapshot: give its id as snapshot too.")
    st = existing_store(store)
    kwargs: dict[str, Any] = {}
    if set_decision:
        kwargs["decision"] = decision
        kwargs["made_on"] = (
            _made_on(st, paths, snapshot)
            if digests is None or snapshot is None
            else {raw: (snapshot, digest) for raw, digest in digests.items()}
        )
    if set_note:
        kwargs["note"] = note
    with Ledger.open(st) if ledger is None else nullcontext(ledger) as writing:
        return writing.annotate(paths, by="human", **kwargs)


@dataclass(frozen=True)
class AnnotateResult:
    """What ``annotate_paths`` wrote, and what it noticed on the way.

    Attributes:
        annotations: each path's annotation after the write (a path left with none is absent).
        removed: how many of the paths had an annotation before and have none now.
        missing: the annotated paths that do not exist now (their annotations are kept all the
            same: the entry may be gone since the scan, or the path may be a typo).
    """

    annotations: list[Annotation]
    removed: int
    missing: list[str]

    exit_code = 0  # a missing path is noted, not refused: nothing was left undone

    def to_json(self) -> dict[str, Any]:
        """What ``hygiene-nb annotate --json`` prints (``path_b64`` where text is not exact)."""
        rows = []
        for a in self.annotations:
            row: dict[str, Any] = {
                "path": a.path,
                "decision": a.decision,
                "note": a.note,
                "by": a.by,
                "at": a.at,
            }
            exact = path_b64(a.path, a.path_raw)
            if exact is not None:  # a name that is not valid UTF-8: its exact bytes
                row["path_b64"] = exact
            rows.append(row)
        return {
            "status": "done",
            "annotations": rows,
            "removed": self.removed,
            "missing": self.missing,
        }


def annotate_paths(
    paths: Sequence[str | bytes],
    *,
    store: StoreArg = None,
    decision: str | None = None,
    note: str | None = None,
) -> AnnotateResult:
    """Write a decision and/or note on each path as a person typed it (``hygiene-nb annotate``).

    Relative paths are taken from the working directory. ``None`` leaves the decision (or the
    note) as it is; ``"none"`` clears the decision and ``""`` the note.

    Raises:
        UsageError: neither a decision nor a note was given, or the decision is unknown.
        PathNotNormal: a path has a ``.`` or ``..`` component (never resolved as text: after a
            symlink the kernel would not agree); nothing is written.
    """
    if decision is None and note is None:
        raise UsageError("give --decision, --note, or both.")
    require_no_dot_components(tuple(paths))
    absolute = [os.fsencode(os.path.abspath(p)) for p in paths]
    st = existing_store(store)
    before = {a.path_raw for a in annotations_at(absolute, store=st)}
    written = annotate(
        absolute,
        store=st,
        decision=decision,
        note=note,
        set_decision=decision is not None,
        set_note=note is not None,
    )
    return AnnotateResult(
        annotations=written,
        removed=len(before - {a.path_raw for a in written}),  # had one, have none now
        missing=sorted({a.path for a in written if not os.path.lexists(a.path_raw)}),
    )


def stale_decisions(
    annotations: Sequence[Annotation], info: ScanInfo, *, store: StoreArg = None
) -> set[bytes]:
    """The delete decisions that no longer match what snapshot ``info`` shows (exact bytes).

    Stale: the decision records no digest (it predates that record), or its entry's digest in
    ``info`` differs from the recorded one. A plan leaves these out (``changed-since-decision``;
    one whose entry is still all ``safe`` is planned all the same) until a person decides again.
    """
    deletes = [a for a in annotations if a.decision == "delete"]
    st = existing_store(store)
    later = [a.path_raw for a in deletes if a.digest is not None and a.snapshot_id != info.scan_id]
    now = entry_digests(st, info, later) if later else {}
    return {
        a.path_raw
        for a in deletes
        if a.digest is None or (a.snapshot_id != info.scan_id and now.get(a.path_raw) != a.digest)
    }


def _made_on(
    st: Store, paths: Sequence[str | bytes], snapshot: str | None
) -> dict[bytes, tuple[str, str]]:
    """Path → (scan id, the entry's digest there), for the paths a snapshot holds."""
    raws = [p if isinstance(p, bytes) else os.fsencode(p) for p in paths]
    scans = [find_scan(st, scan_id=snapshot)] if snapshot is not None else list_scans(st)
    chosen: dict[str, tuple[ScanInfo, list[bytes]]] = {}
    for raw in raws:
        holding = [s for s in scans if within(os.fsdecode(raw), s.root)]
        if not holding:
            continue  # no snapshot holds it: a decision on what nobody saw cannot be planned
        deepest = max(len(s.root) for s in holding)
        latest = [s for s in holding if len(s.root) == deepest][-1]  # scans are oldest first
        chosen.setdefault(latest.scan_id, (latest, []))[1].append(raw)
    made: dict[bytes, tuple[str, str]] = {}
    for info, wanted in chosen.values():
        for raw, digest in entry_digests(st, info, wanted).items():
            made[raw] = (info.scan_id, digest)
    return made


def annotations_at(paths: Sequence[str | bytes], *, store: StoreArg = None) -> list[Annotation]:
    """The annotations of exactly these absolute paths (those that have one)."""
    with Ledger.open(existing_store(store)) as ledger:
        return ledger.annotations_at(paths)
