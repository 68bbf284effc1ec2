"""Per-candidate checks at the moment of acting: who decided it, and the one re-check.

The re-check is ``hygiene_nb.recheck``'s, the same one the plan ran: it reaches the candidate
from the root's handle one component at a time with no symlink followed and ends with an open
handle on its parent for the move. A failed check is a ``Skip`` value with a stable code (the
other candidates go on), never an exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hygiene_nb.codes import texts_for
from hygiene_nb.fingerprint import Fingerprint
from hygiene_nb.recheck import Finding, Rechecker, Reviewed

__all__ = ["SKIP_HINTS", "Skip", "check_candidate", "reviewed"]

SKIP_HINTS = texts_for("execute")  # code → what it means and what to do (``codes``)


@dataclass(frozen=True)
class Skip:
    """A candidate that was not moved: why, and what to do next."""

    path: str
    code: str
    message: str

    @classmethod
    def of(cls, path: str, code: str, detail: str = "") -> Skip:
        """A skip whose message is ``detail`` (if any) and the code's next step."""
        hint = SKIP_HINTS[code]
        text = f"{detail}; {hint}" if detail else hint
        return cls(path, code, text[:1].upper() + text[1:] + ".")

    @classmethod
    def found(cls, path: str, finding: Finding) -> Skip:
        """The skip for what the re-check found."""
        return cls.of(path, finding.code, finding.detail)


def reviewed(cand: dict[str, Any], raw: bytes) -> Reviewed:
    """What the plan recorded of a candidate, as the re-check compares it."""
    fp = cand["fingerprint"]
    return Reviewed(
        cand["path"], raw, cand["kind"], cand["dev"], cand["inode"], cand["size"],
        cand["mtime_ns"], cand["ctime_ns"], Fingerprint(**fp) if fp is not None else None,
    )  # fmt: skip


def check_candidate(
    checker: Rechecker, cand: dict[str, Any], raw: bytes
) -> tuple[int, Skip | None]:
    """Re-check one candidate; return (a handle on its parent, or -1) and a skip, if any.

    The caller closes the handle. First: a person or a remembered rule decided it, never an
    agent (whatever registered the plan); then the one re-check (``hygiene_nb.recheck``).
    """
    path = cand["path"]
    if cand.get("decided_by") not in ("human", "rule"):
        return -1, Skip.of(path, "decided-by-agent", f"decided_by is {cand.get('decided_by')!r}")
    parent, finding = checker.reach(reviewed(cand, raw))
    return parent, None if finding is None else Skip.found(path, finding)
