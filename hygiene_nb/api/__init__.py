"""The safe use cases, each one call: scan a root, list and prune snapshots, summarize.

The CLI, the widgets and the notebooks call these as ``api.scan_root(...)``; they compose the
stages and hold no logic of their own. By noun, in the order of the pipeline:

- ``scan``: ``scan_root``, a root into a new snapshot (with a progress bar or callback).
- ``snapshots``: the store and its snapshots: ``existing_store``, ``open_store``,
  ``store_path``, ``list_snapshots``, ``load``, ``prune_snapshots``, ``scan_time_ns``.
- ``classification``: ``protect_context``, ``classify_snapshot`` (risk, rule, claim,
  confidence), ``keep_classifications`` (a root's scans classified and kept ahead of a
  report), ``open_entries`` (a DuckDB view of a scan's rows and verdicts, which queries
  read) and ``summarize``.
- ``decisions``: a person's decisions (``annotate``, ``annotate_paths``, ``annotations_at``,
  ``stale_decisions``).
- ``remembered``: the remembered rules (``remember_rule``, ``forget_rule``, ``list_rules``,
  ``apply_remembered_rules``).
- ``plans``: ``preview_plan`` and ``make_plan``, which re-checks the disk and the references
  before it writes the plan file; ``within`` (from ``hygiene_nb.pathnames``: it loads nothing).
- ``bounds``: ``MAX_ENTRIES``, ``MAX_SECONDS``, ``MAX_TTL``, the limits on what a caller gives.

Each name loads its submodule when first used, so a command that only lists quarantines or
rules never imports pyarrow (``tests/test_startup.py`` pins which commands stay light).
"""

from __future__ import annotations

import importlib
from types import FunctionType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hygiene_nb.api.bounds import MAX_ENTRIES as MAX_ENTRIES
    from hygiene_nb.api.bounds import MAX_SECONDS as MAX_SECONDS
    from hygiene_nb.api.bounds import MAX_TTL as MAX_TTL
    from hygiene_nb.api.classification import classify_snapshot as classify_snapshot
    from hygiene_nb.api.classification import keep_classifications as keep_classifications
    from hygiene_nb.api.classification import open_entries as open_entries
    from hygiene_nb.api.classification import protect_context as protect_context
    from hygiene_nb.api.classification import summarize as summarize
    from hygiene_nb.api.decisions import AnnotateResult as AnnotateResult
    from hygiene_nb.api.decisions import annotate as annotate
    from hygiene_nb.api.decisions import annotate_paths as annotate_paths
    from hygiene_nb.api.decisions import annotations_at as annotations_at
    from hygiene_nb.api.decisions import stale_decisions as stale_decisions
    from hygiene_nb.api.plans import PlanResult as PlanResult
    from hygiene_nb.api.plans import make_plan as make_plan
    from hygiene_nb.api.plans import preview_plan as preview_plan
    from hygiene_nb.api.remembered import apply_remembered_rules as apply_remembered_rules
    from hygiene_nb.api.remembered import forget_rule as forget_rule
    from hygiene_nb.api.remembered import list_rules as list_rules
    from hygiene_nb.api.remembered import remember_rule as remember_rule
    from hygiene_nb.api.scan import Progress as Progress
    from hygiene_nb.api.scan import ScanProgress as ScanProgress
    from hygiene_nb.api.scan import scan_root as scan_root
    from hygiene_nb.api.snapshots import StoreArg as StoreArg
    from hygiene_nb.api.snapshots import existing_store as existing_store
    from hygiene_nb.api.snapshots import list_snapshots as list_snapshots
    from hygiene_nb.api.snapshots import load as load
    from hygiene_nb.api.snapshots import open_store as open_store
    from hygiene_nb.api.snapshots import prune_snapshots as prune_snapshots
    from hygiene_nb.api.snapshots import scan_time_ns as scan_time_ns
    from hygiene_nb.api.snapshots import store_path as store_path
    from hygiene_nb.pathnames import within as within

# What ``from hygiene_nb.api import *`` gives; every name of ``_WHERE`` is public, for
# ``api.open_store(...)`` and the like.
__all__ = [
    "AnnotateResult",
    "PlanResult",
    "annotate_paths",
    "classify_snapshot",
    "keep_classifications",
    "list_snapshots",
    "load",
    "make_plan",
    "open_entries",
    "preview_plan",
    "protect_context",
    "prune_snapshots",
    "scan_root",
    "stale_decisions",
    "summarize",
]

_WHERE = {
    "MAX_ENTRIES": "bounds",
    "MAX_SECONDS": "bounds",
    "MAX_TTL": "bounds",
    "classify_snapshot": "classification",
    "keep_classifications": "classification",
    "open_entries": "classification",
    "protect_context": "classification",
    "summarize": "classification",
    "AnnotateResult": "decisions",
    "annotate": "decisions",
    "annotate_paths": "decisions",
    "annotations_at": "decisions",
    "stale_decisions": "decisions",
    "apply_remembered_rules": "remembered",
    "forget_rule": "remembered",
    "list_rules": "remembered",
    "remember_rule": "remembered",
    "PlanResult": "plans",
    "make_plan": "plans",
    "preview_plan": "plans",
    "within": "hygiene_nb.pathnames",  # a module outside the API: named in full
    "Progress": "scan",
    "ScanProgress": "scan",
    "scan_root": "scan",
    "StoreArg": "snapshots",
    "existing_store": "snapshots",
    "list_snapshots": "snapshots",
    "load": "snapshots",
    "open_store": "snapshots",
    "prune_snapshots": "snapshots",
    "scan_time_ns": "snapshots",
    "store_path": "snapshots",
}


def __getattr__(name: str) -> Any:
    """Import the submodule that defines ``name`` on first use, and keep the name here."""
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(
        importlib.import_module(module if "." in module else f"{__name__}.{module}"), name
    )
    # where callers find it (help, reprs), not where defined; a function of another package
    # module (``within``) keeps its own
    if isinstance(value, FunctionType) and value.__module__.startswith(f"{__name__}."):
        value.__module__ = __name__
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names too, before they are loaded (tab completion, ``help``)."""
    return sorted(set(globals()) | set(_WHERE))
