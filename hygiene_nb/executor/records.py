"""What became of each candidate of a plan: typed records, turned into JSON at the edge.

The executor acts on the ``Plan`` and ``Candidate`` records ``hygiene_nb.plan.reader`` builds
(never on the raw JSON) and reports ``Moved`` and ``Skip`` records, a ``Destination`` for
where each went, and one ``ItemOutcome`` per candidate for the receipt. Each record turns into
the JSON of ``--json`` and the receipt with ``to_json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hygiene_nb.codes import texts_for
from hygiene_nb.plan.records import Candidate
from hygiene_nb.recheck import Finding

__all__ = [
    "SKIP_HINTS",
    "Destination",
    "ItemOutcome",
    "Method",
    "Moved",
    "Skip",
]

Method = Literal["rename", "copy"]
OutcomeName = Literal["moved", "skipped", "rolled-back"]

SKIP_HINTS = texts_for("execute")  # code → what it means and what to do (``codes``)


@dataclass(frozen=True)
class Skip:
    """A candidate that was not moved (it is where it was): why, and what to do next."""

    path: str
    code: str
    message: str
    path_b64: str | None = None

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

    def to_json(self) -> dict[str, Any]:
        """As ``--json`` and the receipt show it."""
        out: dict[str, Any] = {"path": self.path, "code": self.code, "message": self.message}
        if self.path_b64 is not None:
            out["path_b64"] = self.path_b64
        return out


@dataclass(frozen=True)
class Destination:
    """Where a candidate went (or would go): its batch, or in a dry run the quarantine.

    ``open_at_move``: a program had it open for writing when it was renamed, so its space is
    not freed until that program closes it (the receipt does not count its bytes as freed).
    A copy that was skipped keeps its destination too: ``verify`` looks there for leftovers.
    """

    method: Method
    quarantine: str | None = None  # a dry run's prediction
    batch_id: str | None = None
    batch_path: str | None = None
    batch_dev: int | None = None  # a copy: where the copy is
    batch_inode: int | None = None
    open_at_move: bool = False
    open_at_move_detail: str = ""

    def to_json(self) -> dict[str, Any]:
        """The fields that apply, as the receipt's items and ``--json`` show them."""
        out: dict[str, Any] = {}
        if self.quarantine is not None:
            out["quarantine"] = self.quarantine
        if self.batch_id is not None:
            out.update(batch_id=self.batch_id, batch_path=self.batch_path)
        out["method"] = self.method
        if self.batch_dev is not None:
            out.update(batch_dev=self.batch_dev, batch_inode=self.batch_inode)
        if self.open_at_move:
            out.update(open_at_move=True, open_at_move_detail=self.open_at_move_detail)
        return out


@dataclass(frozen=True)
class Moved:
    """A candidate that moved (or, in a dry run, would move), and where to."""

    path: str
    bytes: int
    decided_by: str
    dest: Destination
    path_b64: str | None = None

    @property
    def open_at_move(self) -> bool:
        """Whether a program still had it open for writing when it moved."""
        return self.dest.open_at_move

    def to_json(self) -> dict[str, Any]:
        """As ``--json`` shows it."""
        out: dict[str, Any] = {
            "path": self.path,
            "bytes": self.bytes,
            "decided_by": self.decided_by,
        }
        if self.path_b64 is not None:
            out["path_b64"] = self.path_b64
        return {**out, **self.dest.to_json()}


@dataclass
class ItemOutcome:
    """The receipt's record of one candidate: moved, skipped (why) or rolled back."""

    cand: Candidate
    outcome: OutcomeName
    skip: Skip | None = None
    dest: Destination | None = None

    @property
    def path(self) -> str:
        """The candidate's path."""
        return self.cand.path

    def to_json(self) -> dict[str, Any]:
        """As the receipt's ``items`` list holds it."""
        c = self.cand
        out: dict[str, Any] = {
            "path": c.path,
            "kind": c.kind,
            "bytes": c.bytes,
            "dev": c.dev,
            "inode": c.inode,
            **c.exact(),
            "outcome": self.outcome,
        }
        if self.skip is not None:
            out.update(code=self.skip.code, message=self.skip.message)
        if self.dest is not None:
            out.update(self.dest.to_json())
        return out
