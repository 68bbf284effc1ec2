"""The typed records of the safety path: a plan as the executor reads it, and what became of it.

``planfile.load_plan`` validates a plan file and builds a ``Plan`` of ``Candidate`` records;
the executor acts on those, never on the raw JSON, and reports ``Moved`` and ``Skip`` records
and one ``ItemOutcome`` per candidate for the receipt. Each record turns into the JSON of the
documented surface (``docs/format.md``, receipts) with ``to_json``.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hygiene_nb.codes import texts_for
from hygiene_nb.fingerprint import Fingerprint
from hygiene_nb.recheck import Finding, Reviewed

__all__ = [
    "SKIP_HINTS",
    "Candidate",
    "Destination",
    "ItemOutcome",
    "Kind",
    "Method",
    "Moved",
    "Plan",
    "PlanRoot",
    "Skip",
]

Kind = Literal["file", "dir"]
Method = Literal["rename", "copy"]
OutcomeName = Literal["moved", "skipped", "rolled-back"]

SKIP_HINTS = texts_for("execute")  # code → what it means and what to do (``codes``)


@dataclass(frozen=True)
class PlanRoot:
    """The directory a plan was made for: its path and identity then."""

    path: str
    dev: int
    inode: int

    def to_json(self) -> dict[str, Any]:
        """As the plan and the receipt write it."""
        return {"path": self.path, "dev": self.dev, "inode": self.inode}


@dataclass(frozen=True)
class Candidate:
    """One entry a plan would move, with everything the plan recorded of it.

    ``raw`` is the exact path bytes (``path`` is their display form; ``path_b64`` is set when
    the two differ). ``tree_*`` and ``fingerprint`` are set for a directory only.
    """

    path: str
    raw: bytes
    path_b64: str | None
    kind: Kind
    size: int
    alloc: int
    nlink: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    dev: int
    tree_bytes: int | None
    tree_alloc: int | None
    tree_files: int | None
    fingerprint: Fingerprint | None
    risk: str
    rule: str
    claim: str
    note: str | None
    decided_by: str
    decided_at: str
    confidence: float

    @classmethod
    def from_json(cls, cand: Mapping[str, Any]) -> Candidate:
        """From a validated plan's candidate object (``planfile`` checked every field)."""
        b64 = cand.get("path_b64")
        raw = base64.b64decode(b64) if b64 is not None else cand["path"].encode("utf-8")
        fp = cand["fingerprint"]
        return cls(
            path=cand["path"],
            raw=raw,
            path_b64=b64,
            kind=cand["kind"],
            size=cand["size"],
            alloc=cand["alloc"],
            nlink=cand["nlink"],
            mtime_ns=cand["mtime_ns"],
            ctime_ns=cand["ctime_ns"],
            inode=cand["inode"],
            dev=cand["dev"],
            tree_bytes=cand["tree_bytes"],
            tree_alloc=cand["tree_alloc"],
            tree_files=cand["tree_files"],
            fingerprint=Fingerprint(**fp) if fp is not None else None,
            risk=cand["risk"],
            rule=cand["rule"],
            claim=cand["claim"],
            note=cand["note"],
            decided_by=cand["decided_by"],
            decided_at=cand["decided_at"],
            confidence=float(cand["confidence"]),
        )

    @property
    def bytes(self) -> int:
        """What it holds, as the plan counted it (a directory's whole tree, apparent)."""
        return self.tree_bytes if self.tree_bytes is not None else self.size

    def exact(self) -> dict[str, str]:
        """``{"path_b64": …}`` for a name that is not UTF-8, else nothing."""
        return {} if self.path_b64 is None else {"path_b64": self.path_b64}

    def reviewed(self) -> Reviewed:
        """What the re-check compares with the disk."""
        return Reviewed(
            self.path, self.raw, self.kind, self.dev, self.inode, self.size, self.mtime_ns,
            self.ctime_ns, self.fingerprint,
        )  # fmt: skip


@dataclass(frozen=True)
class Plan:
    """A plan file's content once validated (its digest checked), as the executor uses it.

    ``document`` is the validated JSON itself, for what is only shown or copied.
    """

    plan_id: str
    plan_digest: str
    expires_at: str
    root: PlanRoot
    candidates: tuple[Candidate, ...]
    reclaim_bytes: int
    document: Mapping[str, Any]

    @classmethod
    def from_json(cls, plan: Mapping[str, Any]) -> Plan:
        """From a validated plan document."""
        root = plan["root"]
        return cls(
            plan_id=plan["plan_id"],
            plan_digest=plan["plan_digest"],
            expires_at=plan["expires_at"],
            root=PlanRoot(root["path"], root["dev"], root["inode"]),
            candidates=tuple(Candidate.from_json(c) for c in plan["candidates"]),
            reclaim_bytes=plan["summary"]["reclaim_bytes"],
            document=plan,
        )


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
        out: dict[str, Any] = {"path": self.path, "bytes": self.bytes,
                               "decided_by": self.decided_by}  # fmt: skip
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
        out: dict[str, Any] = {"path": c.path, "kind": c.kind, "bytes": c.bytes, "dev": c.dev,
                               "inode": c.inode, **c.exact(), "outcome": self.outcome}  # fmt: skip
        if self.skip is not None:
            out.update(code=self.skip.code, message=self.skip.message)
        if self.dest is not None:
            out.update(self.dest.to_json())
        return out
