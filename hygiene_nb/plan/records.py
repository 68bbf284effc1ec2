"""A plan as the executor acts on it: typed records built from a validated plan file.

``hygiene_nb.plan.reader.load_plan`` checks every field of a plan file, then builds a ``Plan``
of ``Candidate`` records; nothing on the path that moves files reads the raw JSON.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from hygiene_nb.fs.fingerprint import Fingerprint
from hygiene_nb.recheck import Reviewed

__all__ = ["Candidate", "Kind", "Plan", "PlanRoot"]

Kind = Literal["file", "dir"]


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
        """From a validated plan's candidate object (``reader`` checked every field)."""
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
            self.path,
            self.raw,
            self.kind,
            self.dev,
            self.inode,
            self.size,
            self.mtime_ns,
            self.ctime_ns,
            self.fingerprint,
        )


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
