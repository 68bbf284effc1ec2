"""hygiene-nb: audit disk and workspace usage from Jupyter, with a guarded executor.

The pipeline: scan → snapshot (Parquet) → classify (rules, risk) → annotate (ledger) → plan (file)
→ execute (guarded) → quarantine → restore | purge, with verify; reports read all of it.
"""

from __future__ import annotations

__version__ = "0.1.0"

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hygiene_nb.api import (
        annotate,
        classify_snapshot,
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
    "classify_snapshot",
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
    """Load the library on first use, so ``hygiene_nb.cli`` can set up the process first.

    The public functions come from ``hygiene_nb.api``; a submodule (``hygiene_nb.scan.snapshot``)
    is imported when it is first named, as an eager package would have done.
    """
    if name in __all__ and name != "__version__":
        from hygiene_nb import api

        return getattr(api, name)
    if not name.startswith("__") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names too, before they are loaded (tab completion, ``help``)."""
    return sorted(set(globals()) | set(__all__))
