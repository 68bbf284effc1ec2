"""Remembered rules: a decision for every unannotated entry of a pattern group.

A rule fills in the entries nobody decided on (``by: rule``); forgetting it takes back the
decisions it made that nobody changed since.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hygiene_nb.errors import UsageError
from hygiene_nb.ledger.annotations import write_annotation
from hygiene_nb.ledger.connection import LedgerConnection, now
from hygiene_nb.ledger.records import DECISIONS

__all__ = ["RuleLedger"]


class RuleLedger(LedgerConnection):
    """The ledger's remembered rules (``remembered_rules``)."""

    def remember_rule(self, group: str, decision: str) -> None:
        """Remember ``decision`` for every unannotated entry of pattern group ``group``."""
        if decision not in DECISIONS:
            raise UsageError(f"decision {decision!r} is not keep, delete or unsure.")
        with self._write() as db:
            db.execute(
                "INSERT INTO remembered_rules (group_id, decision, at) VALUES (?, ?, ?)"
                " ON CONFLICT (group_id) DO UPDATE SET decision = excluded.decision,"
                " at = excluded.at",
                (group, decision, now()),
            )

    def forget_rule(self, group: str) -> int:
        """Drop a remembered rule and the annotations it made that nobody changed since.

        Returns:
            How many rule-made annotations were taken back.
        """
        at = now()
        with self._write() as db:
            gone = db.execute(
                "SELECT path_raw, path FROM annotations WHERE by = 'rule' AND rule = ?", (group,)
            ).fetchall()
            db.execute("DELETE FROM annotations WHERE by = 'rule' AND rule = ?", (group,))
            db.executemany(
                "INSERT INTO annotation_history (path_raw, path, decision, note, by, rule, at,"
                " action) VALUES (?, ?, NULL, NULL, 'rule', ?, ?, 'removed')",
                [(raw, path, group, at) for raw, path in gone],
            )
            db.execute("DELETE FROM remembered_rules WHERE group_id = ?", (group,))
        return len(gone)

    def remembered_rules(self) -> dict[str, str]:
        """Pattern group → remembered decision."""
        return dict(self._read("SELECT group_id, decision FROM remembered_rules ORDER BY 1"))

    def fill_from_rule(
        self,
        group: str,
        decision: str,
        paths: Sequence[bytes],
        made_on: Mapping[bytes, tuple[str, str]] | None = None,
    ) -> int:
        """Give ``decision`` to each of ``paths`` that has no annotation at all (``by: rule``).

        ``made_on`` is what each path was in the snapshot the rule filled from (see
        ``annotate``).

        Returns:
            How many annotations were written.
        """
        at = now()
        written = 0
        with self._write() as db:
            for raw in dict.fromkeys(paths):
                exists = db.execute(
                    "SELECT 1 FROM annotations WHERE path_raw = ?", (raw,)
                ).fetchone()
                if exists is None:
                    seen = (made_on or {}).get(raw)
                    write_annotation(db, raw, decision, None, "rule", group, at, seen)
                    written += 1
        return written
