"""Test-only checkpoints: named places where a test may kill or fail a process that writes.

Inert unless the environment names the checkpoint in ``HYGIENE_NB_TEST_CHECKPOINT`` (format
``name:kill`` or ``name:fail``); tests prove they do nothing otherwise. The executor's are
re-exported by ``hygiene_nb.executor.hooks``; a fleet publish has its own (``PUBLISH``), so a
test can kill a publish between its files and before its completion marker. This module sits
at the bottom layer so that both can reach it without the fleet importing the executor.
"""

from __future__ import annotations

import os
import signal

__all__ = ["CHECKPOINTS", "COPY_ONLY", "EXECUTOR", "PUBLISH", "CheckpointFault", "checkpoint"]

EXECUTOR = (
    "after-claim",
    "after-batch",
    "after-intent",
    "after-move",
    "after-manifest",
    "before-receipt",
    "before-records",  # the space reserved for the records was just given back to write them
    "before-rollback",  # reached only when a configured verify command fails after the move
    # reached only when a verified copy's original is removed (``--allow-copy``, a copy-back):
    "before-removal",  # the copy is verified and recorded; the original is still in place
    "during-removal",  # the original is in its private staging directory, nothing removed yet
    "between-unlinks",  # a file of the original was unlinked: the staging holds only the rest
)
COPY_ONLY = ("before-removal", "during-removal", "between-unlinks")
PUBLISH = (
    "publish-between-files",  # a partition's first data file is in DEST, the others are not
    "publish-before-marker",  # every data file is in DEST; the completion marker is not
)
CHECKPOINTS = EXECUTOR + PUBLISH
_ENV = "HYGIENE_NB_TEST_CHECKPOINT"


class CheckpointFault(RuntimeError):
    """Raised at a checkpoint a test asked to fail (never outside tests)."""


def checkpoint(name: str) -> None:
    """Do nothing, unless a test asked for ``name`` (then die by SIGKILL, or raise)."""
    wanted = os.environ.get(_ENV)
    if not wanted:
        return
    target, _, action = wanted.partition(":")
    if target != name or name not in CHECKPOINTS:
        return
    if action == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if action == "fail":
        raise CheckpointFault(name)
