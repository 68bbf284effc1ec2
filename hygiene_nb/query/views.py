"""What the notebooks and the report show: history, change, risk over time, review state.

Every view is one call that returns a pandas DataFrame (or a small dataclass) ready to display;
the notebooks hold no logic. Queries over snapshots run in DuckDB, in the SQL subset DuckDB and
Spark share (the store is for both to read as it is: docs/format.md). Nothing here writes
anything but the ledger, through ``api``.

Byte sums follow the summary's rule: each entry adds its own bytes (a directory its own size, a
file its size), so nested entries count once, and a hard-linked inode counts once (at its first
name in the snapshot, which is the walk's order).

This module names the views (``from hygiene_nb.query import views; views.history(...)``); they
live in ``hygiene_nb.query`` by noun:

- ``history``: ``resolve_scan``, ``classified_as_of_scan``, ``history``, ``child_growth``,
  ``risk_history``.
- ``changes``: ``diff`` (by ``DIFF_BY``: dir, group, risk) and ``changed_entries``.
- ``review``: ``review_coverage`` (a ``Coverage``), ``decided_rows``, ``human_decisions``,
  ``pending_decisions``, ``pending_counts``, ``executions``, ``plans``, ``plan_preview``,
  ``ledger_state``.
- ``frames``: ``browse_frame``, ``FrameIndex``, ``TableIndex``, ``treemap_nodes``,
  ``treemap_of`` (coloured by risk, owner or type), ``treemap_holders``, ``totals_frame``,
  ``entries_frame``, ``groups_frame``, ``risk_frame``, ``owners_frame``, ``owners_line``,
  ``types_frame``.
- ``provenance``: ``provenance`` and ``rules_digest``.
- ``breakdowns``: ``by_owner``, ``by_type``, ``age_histogram`` (who, what kind, how old).
"""

from __future__ import annotations

from types import FunctionType

from hygiene_nb.query.breakdowns import AGE_BUCKETS, age_histogram, by_owner, by_type
from hygiene_nb.query.changes import DIFF_BY, changed_entries, diff
from hygiene_nb.query.changes import DiffBy as DiffBy
from hygiene_nb.query.frames import BROWSE_COLUMNS as BROWSE_COLUMNS
from hygiene_nb.query.frames import (
    FrameIndex,
    TableIndex,
    browse_frame,
    entries_frame,
    groups_frame,
    owners_frame,
    owners_line,
    risk_frame,
    totals_frame,
    treemap_holders,
    treemap_nodes,
    treemap_of,
    types_frame,
)
from hygiene_nb.query.history import (
    child_growth,
    classified_as_of_scan,
    history,
    resolve_scan,
    risk_history,
)
from hygiene_nb.query.provenance import provenance, rules_digest
from hygiene_nb.query.review import (
    Coverage,
    decided_rows,
    decisions_above,
    decisions_of,
    executions,
    human_decisions,
    ledger_state,
    pending_counts,
    pending_decisions,
    plan_preview,
    plans,
    review_coverage,
)

__all__ = [
    "AGE_BUCKETS",
    "DIFF_BY",
    "Coverage",
    "FrameIndex",
    "TableIndex",
    "age_histogram",
    "browse_frame",
    "by_owner",
    "by_type",
    "changed_entries",
    "child_growth",
    "classified_as_of_scan",
    "decided_rows",
    "decisions_above",
    "decisions_of",
    "diff",
    "entries_frame",
    "executions",
    "groups_frame",
    "history",
    "human_decisions",
    "ledger_state",
    "owners_frame",
    "owners_line",
    "pending_counts",
    "pending_decisions",
    "plan_preview",
    "plans",
    "provenance",
    "resolve_scan",
    "review_coverage",
    "risk_frame",
    "risk_history",
    "rules_digest",
    "totals_frame",
    "treemap_holders",
    "treemap_nodes",
    "treemap_of",
    "types_frame",
]

# A view names this module as its own, where the notebooks find it (``help``, reprs), not the
# module by noun that defines it.
for _value in list(globals().values()):
    if isinstance(_value, FunctionType) and _value.__module__.startswith("hygiene_nb.query."):
        _value.__module__ = __name__
del _value
