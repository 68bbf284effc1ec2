"""The safe use cases, each one call: scan a root, list and prune snapshots, summarize.

The CLI, the widgets and the notebooks call these as ``api.scan_root(...)``; they compose the
stages and hold no logic of their own. By noun, in the order of the pipeline:

- ``scan``: ``scan_root``, a root into a new snapshot (with a progress bar or callback).
- ``snapshots``: the store and its snapshots: ``existing_store``, ``open_store``,
  ``store_path``, ``list_snapshots``, ``load``, ``prune_snapshots``, ``scan_time_ns``.
- ``classification``: ``protect_context``, ``classify_snapshot`` (risk, rule, claim,
  confidence) and ``summarize``.
- ``decisions``: a person's decisions (``annotate``, ``annotate_paths``, ``annotations_at``,
  ``stale_decisions``) and the remembered rules (``remember_rule``, ``forget_rule``,
  ``list_rules``, ``apply_remembered_rules``).
- ``plans``: ``preview_plan`` and ``make_plan``, which re-checks the disk and the references
  before it writes the plan file; ``within``.
- ``bounds``: ``MAX_ENTRIES``, ``MAX_SECONDS``, ``MAX_TTL``, the limits on what a caller gives.
"""

from __future__ import annotations

from types import FunctionType

from hygiene_nb.api.bounds import MAX_ENTRIES as MAX_ENTRIES
from hygiene_nb.api.bounds import MAX_SECONDS as MAX_SECONDS
from hygiene_nb.api.bounds import MAX_TTL as MAX_TTL
from hygiene_nb.api.classification import classify_snapshot, protect_context, summarize
from hygiene_nb.api.decisions import AnnotateResult, annotate_paths, stale_decisions
from hygiene_nb.api.decisions import annotate as annotate
from hygiene_nb.api.decisions import annotations_at as annotations_at
from hygiene_nb.api.decisions import apply_remembered_rules as apply_remembered_rules
from hygiene_nb.api.decisions import forget_rule as forget_rule
from hygiene_nb.api.decisions import list_rules as list_rules
from hygiene_nb.api.decisions import remember_rule as remember_rule
from hygiene_nb.api.plans import PlanResult, make_plan, preview_plan
from hygiene_nb.api.plans import within as within
from hygiene_nb.api.scan import Progress as Progress
from hygiene_nb.api.scan import scan_root
from hygiene_nb.api.snapshots import StoreArg as StoreArg
from hygiene_nb.api.snapshots import existing_store as existing_store
from hygiene_nb.api.snapshots import list_snapshots, load, prune_snapshots
from hygiene_nb.api.snapshots import open_store as open_store
from hygiene_nb.api.snapshots import scan_time_ns as scan_time_ns
from hygiene_nb.api.snapshots import store_path as store_path

# What ``from hygiene_nb.api import *`` gives; the names imported ``as`` themselves above are
# public too, for ``api.open_store(...)`` and the like.
__all__ = [
    "AnnotateResult",
    "PlanResult",
    "annotate_paths",
    "classify_snapshot",
    "list_snapshots",
    "load",
    "make_plan",
    "preview_plan",
    "protect_context",
    "prune_snapshots",
    "scan_root",
    "stale_decisions",
    "summarize",
]

# A use case's function names this package as its module, where callers find it (``help``,
# reprs, ``hygiene_nb.scan_root.__module__``), not the submodule that defines it.
for _value in list(globals().values()):
    if isinstance(_value, FunctionType) and _value.__module__.startswith(f"{__name__}."):
        _value.__module__ = __name__
del _value
