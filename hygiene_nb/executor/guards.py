"""Per-candidate checks at the moment of acting: who decided it, and the one re-check.

The re-check is ``hygiene_nb.recheck``'s, the same one the plan ran: it reaches the candidate
from the root's handle one component at a time with no symlink followed and ends with an open
handle on its parent for the move. A failed check is a ``Skip`` value with a stable code (the
other candidates go on), never an exception.
"""

from __future__ import annotations

from hygiene_nb.executor.records import SKIP_HINTS, Skip
from hygiene_nb.plan.records import Candidate
from hygiene_nb.recheck import Rechecker

__all__ = ["SKIP_HINTS", "Skip", "check_candidate"]

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
