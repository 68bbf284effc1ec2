"""Decisions and notes on paths, and their history (the ``annotations`` tables).

A path is its exact bytes (``path_raw``); its text form is for display and prefix queries.
Every change appends a row to ``annotation_history``. A decision records what it was made on:
the snapshot on screen and the entry's digest there (``made_on``).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from hygiene_nb.bulk import without_collection
from hygiene_nb.errors import PathNotNormal, UsageError
from hygiene_nb.ledger.connection import LedgerConnection, now
from hygiene_nb.ledger.records import DECISIONS, Annotation, display_path

__all__ = ["AnnotationLedger", "write_annotation"]

_ANNOTATION_COLUMNS = "path, path_raw, decision, note, by, rule, at, snapshot_id, digest"
_UNSET: Any = object()


class AnnotationLedger(LedgerConnection):
    """The ledger's decisions and notes."""

    def annotate(
        self,
        paths: Iterable[bytes | str],
        *,
        decision: str | None = _UNSET,
        note: str | None = _UNSET,
        by: str = "human",
        rule: str | None = None,
        made_on: Mapping[bytes, tuple[str, str]] | None = None,
    ) -> list[Annotation]:
        """Set the decision and/or note of each path (a batch: deduplicated, all or nothing).

        Args:
            paths: absolute paths (bytes keep non-UTF-8 names exactly).
            decision: ``keep``, ``delete``, ``unsure``, or ``None``/``"none"`` to clear it;
                omitted: leave the decision as it is.
            note: the note text (``""`` or ``None`` clears it); omitted: leave it as it is.
            by: ``human``, ``rule`` or ``agent``.
            rule: the remembered rule that made it (for ``by="rule"``).
            made_on: path → (snapshot id, the entry's digest there): what each decision was
                made on. A decision set without it records none, and cannot be planned until
                it is set again with one. A note alone leaves what was recorded as it was,
                and who made the decision and when (``by``, ``rule``, ``at``).

        Returns:
            The annotations after the change (a path whose decision and note are both empty
            has no annotation any more and is left out).

        Raises:
            UsageError: a path is relative, the decision or author is unknown, or nothing is
                being changed.
            PathNotNormal: a path has a ``.``, ``..`` or empty component.
        """
        if decision == "none":
            decision = None
        if decision is not _UNSET and decision is not None and decision not in DECISIONS:
            raise UsageError(f"decision {decision!r} is not keep, delete, unsure or none.")
        if by not in ("human", "rule", "agent"):
            raise UsageError(f"author {by!r} is not human, rule or agent.")
        if decision is _UNSET and note is _UNSET:
            raise UsageError("say what to write: a decision, a note, or both.")
        raws = list(dict.fromkeys(p if isinstance(p, bytes) else os.fsencode(p) for p in paths))
        relative = [display_path(r) for r in raws if not r.startswith(b"/")]
        if relative:
            raise UsageError(
                f"paths must be absolute, not {', '.join(relative[:3])}; nothing was written."
            )
        unnormal = [display_path(r) for r in raws if os.path.normpath(r) != r]
        if unnormal:
            raise PathNotNormal(
                f"paths must be normalized (no '.', '..' or '//'), not {', '.join(unnormal[:3])};"
                " nothing was written."
            )
        at = now()
        out = []
        with self._write() as db:
            for raw in raws:
                seen = (made_on or {}).get(raw)
                result = write_annotation(db, raw, decision, note, by, rule, at, seen)
                if result is not None:
                    out.append(result)
        return out

    @without_collection
    def annotations(self, *, under: str | None = None) -> list[Annotation]:
        """Every annotation (only those at or under the absolute path ``under``, if given)."""
        if under is None:
            query, args = f"SELECT {_ANNOTATION_COLUMNS} FROM annotations ORDER BY path", ()
        else:
            query, args = _under_query(_ANNOTATION_COLUMNS, under)
        # the words that repeat (the decision, who, the rule, the snapshot) held once each:
        # 100,000 annotations took 107 MiB with a copy of each per row. A time repeats where
        # one write made many (a batch in the widget, ``annotate`` on many paths): a row's is
        # the previous row's when equal (1 text for 100,000 such: 8 MB less), never a table
        # of every distinct time
        common: dict[Any, Any] = {}
        once = common.setdefault
        last = ""
        with self._rows(query, args) as rows:
            return [
                Annotation(
                    path,
                    bytes(raw),
                    once(decision, decision),
                    note,
                    once(by, by),
                    once(rule, rule),
                    (last := at) if at != last else last,
                    once(snapshot, snapshot),
                    digest,
                )
                for path, raw, decision, note, by, rule, at, snapshot, digest in rows
            ]

    def columns(self, names: Sequence[str], *, under: str) -> list[tuple[Any, ...]]:
        """Only the columns ``names`` of every annotation at or under ``under``, in path order.

        As tuples, with no ``Annotation`` made: a view that needs a few fields of 100,000
        annotations reads them in about half the time ``annotations`` takes.

        Raises:
            ValueError: a name is not a column of the annotations.
        """
        unknown = [n for n in names if n not in _ANNOTATION_COLUMNS.split(", ")]
        if unknown or not names:
            raise ValueError(f"not columns of the annotations: {unknown or list(names)}")
        return [tuple(r) for r in self._under(", ".join(names), under)]

    def _under(
        self, columns: str, under: str, condition: str = "", args: tuple[Any, ...] = ()
    ) -> list[Any]:
        """``SELECT columns`` of the annotations at or under ``under`` (and ``condition``).

        In path order; the path is compared exactly (``LIKE`` would ignore ASCII case).
        """
        return self._read(*_under_query(columns, under, condition, args))

    def decisions(self, *, under: str, by: str) -> dict[str, str]:
        """Text path → decision of every keep/delete/unsure by ``by`` at or under ``under``.

        In path order; only the two columns are read, so no ``Annotation`` is made (100,000
        decisions: about 0.3 s, where ``annotations`` takes about 0.9 s).
        """
        rows = self._under("path, decision", under, "by = ? AND decision IS NOT NULL", (by,))
        return {str(path): str(decision) for path, decision in rows}

    def waiting(self, *, under: str) -> list[tuple[str, str, str | None, str]]:
        """The ``delete`` and ``unsure`` decisions a person made at or under ``under``.

        (text path, decision, note, when), in path order: the decisions still to act on, read
        as four columns (100,000 decisions: about 0.3 s, where ``annotations`` takes 0.5 s).
        """
        wanted = "by = 'human' AND decision IN ('delete', 'unsure')"
        rows = self._under("path, decision, note, at", under, wanted)
        return [(str(p), str(d), n, str(at)) for p, d, n, at in rows]

    def annotations_at(self, paths: Iterable[bytes | str]) -> list[Annotation]:
        """The annotations of exactly these paths (those that have one), in path order."""
        raws = list(dict.fromkeys(p if isinstance(p, bytes) else os.fsencode(p) for p in paths))
        found: list[Annotation] = []
        for start in range(0, len(raws), 500):  # SQLite's bound-parameter limit
            chunk = raws[start : start + 500]
            rows = self._read(
                f"SELECT {_ANNOTATION_COLUMNS} FROM annotations"
                f" WHERE path_raw IN ({', '.join('?' * len(chunk))})",
                tuple(chunk),
            )
            found += [Annotation(r[0], bytes(r[1]), *r[2:]) for r in rows]
        return sorted(found, key=lambda a: a.path_raw)

    def history(self, path: bytes | str | None = None) -> list[dict[str, Any]]:
        """The annotation history, oldest first (of one path, if given)."""
        query = "SELECT path, decision, note, by, rule, at, action FROM annotation_history"
        args: tuple[Any, ...] = ()
        if path is not None:
            raw = path if isinstance(path, bytes) else os.fsencode(path)
            query += " WHERE path_raw = ?"
            args = (raw,)
        keys = ("path", "decision", "note", "by", "rule", "at", "action")
        rows = self._read(query + " ORDER BY id", args)
        return [dict(zip(keys, r, strict=True)) for r in rows]


def _under_query(
    columns: str, under: str, condition: str = "", args: tuple[Any, ...] = ()
) -> tuple[str, tuple[Any, ...]]:
    """The query and arguments of ``AnnotationLedger._under``."""
    prefix = under.rstrip("/") + "/"
    where = f"{condition} AND " if condition else ""
    return (
        f"SELECT {columns} FROM annotations"
        f" WHERE {where}(path = ? OR substr(path, 1, ?) = ?) ORDER BY path",
        (*args, under, len(prefix), prefix),
    )


def write_annotation(
    db: sqlite3.Connection,
    raw: bytes,
    decision: str | None,
    note: str | None,
    by: str,
    rule: str | None,
    at: str,
    made_on: tuple[str, str] | None = None,
) -> Annotation | None:
    """Write one path's annotation and its history row in the open transaction ``db``.

    ``decision`` and ``note`` as ``AnnotationLedger.annotate`` has checked them (``_UNSET``:
    leave it as it is); ``made_on`` is (snapshot id, the entry's digest there).

    Returns:
        The annotation after the change, or None if the path has none any more.
    """
    row = db.execute(
        "SELECT decision, note, snapshot_id, digest, by, rule, at FROM annotations"
        " WHERE path_raw = ?",
        (raw,),
    ).fetchone()
    old_decision, old_note, old_snapshot, old_digest, old_by, old_rule, old_at = (
        row if row else (None,) * 7
    )
    snapshot_id, digest = (
        (old_snapshot, old_digest) if decision is _UNSET else (made_on or (None, None))
    )
    new_decision = old_decision if decision is _UNSET else decision
    # The row says who made its decision, and when: a note alone changes neither (a person's
    # note on an agent's proposal must not turn it into a person's decision). The history row
    # still says who wrote the note.
    by_row, rule_row, at_row = by, rule, at
    if decision is _UNSET and old_decision is not None:
        by_row, rule_row, at_row = str(old_by), old_rule, str(old_at)
    new_note = old_note if note is _UNSET else (note or None)
    path = display_path(raw)
    if new_decision is None and new_note is None:
        if row is None:
            return None  # nothing was there and nothing is set: no history to write
        db.execute("DELETE FROM annotations WHERE path_raw = ?", (raw,))
        db.execute(
            "INSERT INTO annotation_history (path_raw, path, decision, note, by, rule, at,"
            " action) VALUES (?, ?, NULL, NULL, ?, ?, ?, 'removed')",
            (raw, path, by, rule, at),
        )
        return None
    db.execute(
        "INSERT INTO annotations (path_raw, path, decision, note, by, rule, at, snapshot_id,"
        " digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (path_raw) DO UPDATE SET"
        " decision = excluded.decision, note = excluded.note, by = excluded.by,"
        " rule = excluded.rule, at = excluded.at, snapshot_id = excluded.snapshot_id,"
        " digest = excluded.digest",
        (raw, path, new_decision, new_note, by_row, rule_row, at_row, snapshot_id, digest),
    )
    db.execute(
        "INSERT INTO annotation_history (path_raw, path, decision, note, by, rule, at, action,"
        " snapshot_id, digest) VALUES (?, ?, ?, ?, ?, ?, ?, 'set', ?, ?)",
        (raw, path, new_decision, new_note, by, rule, at, snapshot_id, digest),
    )
    return Annotation(
        path, raw, new_decision, new_note, by_row, rule_row, at_row, snapshot_id, digest
    )
