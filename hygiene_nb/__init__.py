"""hygiene-nb: audit disk and workspace usage from Jupyter, with a guarded executor.

The pipeline: scan → snapshot (Parquet) → classify (rules, risk) → annotate (ledger) → plan (file)
→ execute (guarded) → quarantine → restore | purge, with verify; reports read all of it.
"""

from __future__ import annotations

__version__ = "0.1.0"

from hygiene_nb.api import (
    annotate,
    classify,
    forget_rule,
    list_rules,
    list_snapshots,
    load,
    make_plan,
    prune_snapshots,
    remember_rule,
    scan_root,
    summarize,
)

__all__ = [
    "__version__",
    "annotate",
    "classify",
    "forget_rule",
    "list_rules",
    "list_snapshots",
    "load",
    "make_plan",
    "prune_snapshots",
    "remember_rule",
    "scan_root",
    "summarize",
]
