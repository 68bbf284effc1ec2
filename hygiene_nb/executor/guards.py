"""Per-candidate checks at the moment of acting: who decided it, the one re-check, the arrival.

The re-check is ``hygiene_nb.recheck``'s, the same one the plan ran: it reaches the candidate
from the root's handle one component at a time with no symlink followed and ends with an open
handle on its parent for the move. A failed check is a ``Skip`` value with a stable code (the
other candidates go on), never an exception. Once moved, what arrived in the batch is checked
against what the plan described (``arrived_differs``); the mover puts back anything else.
"""

from __future__ import annotations

import os

from hygiene_nb.executor.records import SKIP_HINTS, Skip
from hygiene_nb.fs.fingerprint import fingerprint, signed64, walk_subtree_at
from hygiene_nb.fs.mounts import MountInside
from hygiene_nb.plan.records import Candidate
from hygiene_nb.recheck import Rechecker

__all__ = ["SKIP_HINTS", "Skip", "arrived_differs", "check_candidate"]

DECIDERS = ("human", "rule")  # an agent may propose, never decide


def check_candidate(checker: Rechecker, cand: Candidate) -> tuple[int, Skip | None]:
    """Re-check one candidate; return (a handle on its parent, or -1) and a skip, if any.

    The caller closes the handle. First: a person or a remembered rule decided it, never an
    agent (whatever registered the plan); then the one re-check (``hygiene_nb.recheck``).
    """
    if cand.decided_by not in DECIDERS:
        return -1, Skip.of(cand.path, "decided-by-agent", f"decided_by is {cand.decided_by!r}")
    parent, finding = checker.reach(cand.reviewed())
    return parent, None if finding is None else Skip.found(cand.path, finding)


def arrived_differs(target: int, name: bytes, cand: Candidate) -> tuple[str, str]:
    """(code, why) what arrived in the batch is not what the plan described (why "" if it is).

    A directory is fingerprinted again where nobody else can reach it: anything swapped in, or
    added or changed inside it since its check, shows here, and so does a mount made inside it
    meanwhile (``contains-mount``: the walk never enters another mount).
    """
    changed = "changed-since-review"
    st = os.stat(name, dir_fd=target, follow_symlinks=False)
    if (signed64(st.st_dev), signed64(st.st_ino)) != (cand.dev, cand.inode):
        return changed, "another entry was swapped in while moving"
    if cand.kind == "file" and (st.st_size, st.st_mtime_ns) != (cand.size, cand.mtime_ns):
        return changed, "it was written to between the check and the move"  # (ctime: ours now)
    if cand.kind == "dir":
        try:
            entries = walk_subtree_at(target, name, expect=(st.st_dev, st.st_ino))
        except MountInside as exc:
            return "contains-mount", f"a mount appeared inside it while moving ({exc.strerror})"
        except OSError as exc:
            return changed, f"its contents could not be read again ({exc.strerror})"
        if fingerprint(entries) != cand.fingerprint:
            return changed, "its contents changed between the check and the move"
    return changed, ""
