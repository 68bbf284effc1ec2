"""hygiene-nb: audit disk and workspace usage from Jupyter, with a guarded executor.

The pipeline: scan → snapshot (Parquet) → classify (rules, risk) → annotate (ledger) → plan (file)
→ execute (guarded) → quarantine → restore | purge, with verify; reports read all of it.
"""

from __future__ import annotations

__version__ = "0.1.0"

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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


def __getattr__(name: str) -> Any:
    """Load the library on first use, so ``hygiene_nb.cli`` can set up the process first."""
    if name in __all__ and name != "__version__":
        from hygiene_nb import api

        return getattr(api, name)
    raise AttributeError(f"module 'hygiene_nb' has no attribute {name!r}")
