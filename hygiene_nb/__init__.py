"""hygiene-nb: audit disk and workspace usage from Jupyter, with a guarded executor.

The pipeline: scan → snapshot (Parquet) → classify (rules, risk) → annotate (ledger) → plan (file)
→ execute (guarded) → quarantine → restore | purge, with verify; reports read all of it.
"""

from __future__ import annotations

__version__ = "0.1.0"

import importlib
import importlib.util
import sys
import types
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
    """Load the library on first use, so ``hygiene_nb.cli`` can set up the process first.

    The public functions come from ``hygiene_nb.api``; a submodule (``hygiene_nb.snapshot``)
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


class _Package(types.ModuleType):
    """This package's module type: a public function is never hidden by a same-named submodule.

    Importing ``hygiene_nb.classify`` (the module) binds it as the package's ``classify``
    attribute, and ``__getattr__`` above, which serves the function, would then never be asked.
    """

    def __setattr__(self, name: str, value: Any) -> None:
        # As with the eager package this replaced: ``from hygiene_nb.classify import …`` and
        # ``sys.modules`` reach the module, while ``hygiene_nb.classify`` (and so
        # ``import hygiene_nb.classify as m``) is the function.
        if name in __all__ and isinstance(value, types.ModuleType):
            return
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package
