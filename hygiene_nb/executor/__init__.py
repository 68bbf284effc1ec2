"""The guarded executor: the only code that moves or destroys user files.

Only the CLI imports it (import-linter checks). ``execute_plan`` moves a plan's candidates into
a quarantine batch; ``verify_receipt`` checks an execution; batches are listed, restored and
purged (purge is the only destruction, and only with explicit confirmation).
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
