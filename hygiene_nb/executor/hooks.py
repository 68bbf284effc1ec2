"""Test-only checkpoints of the executor: named places where a test may kill or fail a run.

The mechanism is ``hygiene_nb.checkpoints`` (shared with the fleet's publish); this module
names the executor's own. Inert unless the environment names the checkpoint in
``HYGIENE_NB_TEST_CHECKPOINT`` (format ``name:kill`` or ``name:fail``); a test proves they do
nothing otherwise.
"""

from __future__ import annotations

from hygiene_nb.checkpoints import COPY_ONLY, CheckpointFault, checkpoint
from hygiene_nb.checkpoints import EXECUTOR as CHECKPOINTS

__all__ = ["CHECKPOINTS", "COPY_ONLY", "CheckpointFault", "checkpoint"]
