"""The guarded executor: the only code that moves or destroys user files.

Only the CLI imports it (import-linter checks). ``execute_plan`` moves a plan's candidates into
a quarantine batch; ``verify_receipt`` checks an execution; batches are listed, restored and
purged (purge is the only destruction, and only with explicit confirmation).
``list_store_batches``, defined here, joins the registry's problems to the batches it lists.

Its modules, by what they do:

- executing a plan: ``execute`` (the run), ``authorize`` (the whole-plan checks), ``guards``
  (each candidate at the moment of acting), ``destinations`` (where each item goes), ``moves``
  (carrying the moves out), ``reserve`` (room for the records), ``writers`` (is anyone writing
  to it now), ``verification`` (the project's own check around a run), ``receipt`` (the end
  of a run), ``records`` (what became of each candidate);
- the quarantine: ``batches`` (a batch and its manifest), ``changes`` (what is recorded of an
  item and compared after), ``listing`` (``quarantine list``), ``registry`` (quarantines on
  other filesystems), ``crossdev`` (items on another filesystem: the verified copy),
  ``inventory`` (what a copy is compared on), ``volume`` (the quarantine at another
  filesystem's top), ``filesystems`` (which filesystem, across remounts), ``leftovers`` (what a
  stopped run left);
- afterwards: ``verify`` (a receipt against the disk), ``recover`` (finishing a stopped run's
  records), ``restore`` with ``batch_access``, ``restore_target``, ``copy_back`` and
  ``restore_outcomes`` (putting items back), ``purge`` (the one destruction);
- underneath: ``fileops`` (the only code that renames or removes a user's file), ``hooks``
  (the checkpoints tests kill or fail the executor at).
"""

from __future__ import annotations

from hygiene_nb.executor.authorize import Confirmation
from hygiene_nb.executor.execute import ExecuteResult, execute_plan
from hygiene_nb.executor.listing import BatchInfo, list_batches
from hygiene_nb.executor.purge import PurgeResult, purge_batch
from hygiene_nb.executor.recover import RecoverResult, recover_store
from hygiene_nb.executor.registry import known_quarantines, registry_problems
from hygiene_nb.executor.restore import RestoreResult, restore_batch
from hygiene_nb.executor.verify import VerifyResult, verify_receipt
from hygiene_nb.store import Store

__all__ = [
    "BatchInfo",
    "Confirmation",
    "ExecuteResult",
    "PurgeResult",
    "RecoverResult",
    "RestoreResult",
    "VerifyResult",
    "execute_plan",
    "list_store_batches",
    "purge_batch",
    "recover_store",
    "restore_batch",
    "verify_receipt",
]


def list_store_batches(store: Store) -> list[BatchInfo]:
    """Every quarantine batch of the store (and of the quarantines it registered), oldest first.

    A registry that cannot be (fully) read hides none of the batches it can give, nor the
    store's own: it is listed first as one ``invalid`` entry saying what is wrong.
    """
    return registry_problems(store) + list_batches(known_quarantines(store))
