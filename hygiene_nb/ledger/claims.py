"""Claims: an agent's or a rule's judgement of a path (the ``claims`` table).

Kept apart from the decisions people make (``annotations``): a claim never becomes or
overrides a decision.
"""

from __future__ import annotations

import os

from hygiene_nb.errors import UsageError
from hygiene_nb.ledger.connection import LedgerConnection, now
from hygiene_nb.ledger.records import Claim, display_path

__all__ = ["ClaimLedger"]


class ClaimLedger(LedgerConnection):
    """The ledger's claims."""

    def put_claim(
        self, path: bytes | str, *, risk: str, claim: str, confidence: float, by: str = "agent"
    ) -> Claim:
        """Record an agent's or rule's judgement of a path (never a decision).

        Raises:
            UsageError: the author, risk or confidence is invalid, or the path is relative.
        """
        raw = path if isinstance(path, bytes) else os.fsencode(path)
        if not raw.startswith(b"/"):
            raise UsageError(f"paths must be absolute, not {display_path(raw)}.")
        if by not in ("agent", "rule"):
            raise UsageError("claims are made by an agent or a rule; people write decisions.")
        if risk not in ("safe", "caution", "personal", "high", "unknown"):
            raise UsageError(f"risk {risk!r} is not a risk level.")
        if not 0 <= confidence <= 1:
            raise UsageError("confidence must be between 0 and 1.")
        at = now()
        with self._write() as db:
            db.execute(
                "INSERT INTO claims (path_raw, path, risk, claim, confidence, by, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (path_raw, by) DO UPDATE SET"
                " risk = excluded.risk, claim = excluded.claim,"
                " confidence = excluded.confidence, at = excluded.at",
                (raw, display_path(raw), risk, claim, confidence, by, at),
            )
        return Claim(display_path(raw), risk, claim, confidence, by, at)

    def claims(self) -> list[Claim]:
        """Every claim, by path."""
        rows = self._read("SELECT path, risk, claim, confidence, by, at FROM claims ORDER BY path")
        return [Claim(*r) for r in rows]
