"""Issued plans, their claims and ends, declined suggestions and the execution log.

A plan this store issued is recorded with its digest (``plans``); an execution claims it
(``executing``) in one transaction, so of two executions of one plan exactly one runs, and
appends one row to ``executions`` when it ends. ``declined_suggestions`` keep automatic mode
from suggesting again what a person declined.
"""

from __future__ import annotations

from typing import Any

from hygiene_nb.ledger.connection import LedgerConnection, now
from hygiene_nb.ledger.records import IssuedPlan

__all__ = ["PlanLedger"]

_EXECUTION_KEYS = (
    "plan_id", "plan_digest", "authorization_id", "authorized_at", "finished_at", "batch_id",
    "receipt_path", "moved", "skipped", "moved_bytes", "status",
)  # fmt: skip


class PlanLedger(LedgerConnection):
    """The ledger's issued plans and executions."""

    def record_plan(self, plan: IssuedPlan) -> None:
        """Register a plan this store issued, with its digest."""
        with self._write() as db:
            db.execute(
                "INSERT INTO plans (plan_id, plan_digest, root, scan_id, path, created_at,"
                " expires_at, candidates, reclaim_bytes, state)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    plan.plan_id,
                    plan.plan_digest,
                    plan.root,
                    plan.scan_id,
                    plan.path,
                    plan.created_at,
                    plan.expires_at,
                    plan.candidates,
                    plan.reclaim_bytes,
                    plan.state,
                ),
            )

    def issued_plan(self, plan_id: str) -> IssuedPlan | None:
        """The plan with this id, if this store issued it."""
        rows = self._read(
            "SELECT plan_id, plan_digest, root, scan_id, path, created_at, expires_at,"
            " candidates, reclaim_bytes, state FROM plans WHERE plan_id = ?",
            (plan_id,),
        )
        return IssuedPlan(*rows[0]) if rows else None

    def plans(self, *, root: str | None = None) -> list[IssuedPlan]:
        """Every plan this store issued (of ``root`` only, if given), oldest first."""
        query = (
            "SELECT plan_id, plan_digest, root, scan_id, path, created_at, expires_at,"
            " candidates, reclaim_bytes, state FROM plans"
        )
        args: tuple[Any, ...] = ()
        if root is not None:
            query += " WHERE root = ?"
            args = (root,)
        return [IssuedPlan(*r) for r in self._read(query + " ORDER BY created_at, plan_id", args)]

    def decline_suggestion(self, root: str, digest: str) -> None:
        """Record that a person declined the suggestion ``digest`` for ``root``."""
        with self._write() as db:
            db.execute(
                "INSERT OR IGNORE INTO declined_suggestions (root, digest, declined_at)"
                " VALUES (?, ?, ?)",
                (root, digest, now()),
            )

    def declined_at(self, root: str, digest: str) -> str | None:
        """When the suggestion ``digest`` for ``root`` was declined, if it was."""
        rows = self._read(
            "SELECT declined_at FROM declined_suggestions WHERE root = ? AND digest = ?",
            (root, digest),
        )
        return str(rows[0][0]) if rows else None

    def claim_plan(self, plan_id: str, plan_digest: str) -> bool:
        """Mark an issued plan ``executing``; False if it is not (any more) ``issued``.

        One transaction: of two executions of one plan, exactly one claims it.
        """
        with self._write() as db:
            cursor = db.execute(
                "UPDATE plans SET state = 'executing' WHERE plan_id = ? AND plan_digest = ?"
                " AND state = 'issued'",
                (plan_id, plan_digest),
            )
            return cursor.rowcount == 1

    def finish_plan(self, plan_id: str, state: str) -> None:
        """Record how a claimed plan ended (``executed``); a plan is never issued again."""
        with self._write() as db:
            db.execute("UPDATE plans SET state = ? WHERE plan_id = ?", (state, plan_id))

    def release_plan(self, plan_id: str) -> None:
        """Give a claimed plan back (``issued``): its run moved nothing and left nothing behind."""
        with self._write() as db:
            db.execute(
                "UPDATE plans SET state = 'issued' WHERE plan_id = ? AND state = 'executing'",
                (plan_id,),
            )

    def record_execution(self, row: dict[str, Any]) -> None:
        """Append one execution to the execution log."""
        keys = _EXECUTION_KEYS
        with self._write() as db:
            db.execute(
                f"INSERT INTO executions ({', '.join(keys)}) VALUES ({', '.join('?' * len(keys))})",
                tuple(row[k] for k in keys),
            )

    def executions(self) -> list[dict[str, Any]]:
        """The execution log, oldest first."""
        keys = _EXECUTION_KEYS
        rows = self._read(f"SELECT {', '.join(keys)} FROM executions ORDER BY id")
        return [dict(zip(keys, r, strict=True)) for r in rows]
