"""Run by ``hygiene-nb report`` before its kernel starts: the report's scans classified and kept.

``python -P -m hygiene_nb.notebook.ahead STORE SCAN_ID`` classifies every scan of the root up
to ``SCAN_ID`` that has no classification kept (``api.keep_classifications``), in a process
of its own that ends before the kernel starts. The kernel's views then read the kept
verdicts: a classification's working memory (about 300 MiB at 1M entries) is never held
beside the kernel's, and the memory it leaves with the allocator goes with this process.

It stops cleanly on SIGTERM (a file being kept is removed, not left half-written), and
receives one when the report command that started it ends (Linux), so it never outlives it.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
from types import FrameType

from hygiene_nb.errors import HygieneError, StoreError

__all__ = ["PARENT_VARIABLE", "main"]

PARENT_VARIABLE = "HYGIENE_NB_AHEAD_PARENT"  # the pid of the command that started it
_PR_SET_PDEATHSIG = 1  # prctl(2)


def _stop(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds: a file being written is removed


def _end_with_parent() -> bool:
    """SIGTERM when the command that started this process ends; False if it has already."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    parent = os.environ.get(PARENT_VARIABLE)
    return parent is None or parent == str(os.getppid())


def main(argv: list[str]) -> int:
    """Classify ahead: 0 when every scan is kept, else non-zero (the report goes on)."""
    if len(argv) != 2:
        sys.stderr.write("usage: python -P -m hygiene_nb.notebook.ahead STORE SCAN_ID\n")
        return 2
    store, scan_id = argv
    # the command's process settings (the allocator, as the kernel's), before pyarrow loads;
    # here, not on import: the report command imports this module for ``PARENT_VARIABLE``
    import hygiene_nb._process  # noqa: F401
    from hygiene_nb import api

    try:
        kept = api.keep_classifications(store=store, until=scan_id)
    except HygieneError as exc:
        sys.stderr.write(f"{exc.code}: {exc.message}\n")
        return exc.exit_code
    if not kept:
        gone = StoreError(f"{store} could not keep a classification: is it full or read-only?")
        sys.stderr.write(f"{gone.code}: {gone.message}\n")
        return gone.exit_code
    return 0


def _process_main() -> int:
    """``main`` as the process the report starts: stopped by SIGTERM, ended with its parent."""
    signal.signal(signal.SIGTERM, _stop)
    if not _end_with_parent():
        return 1
    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(_process_main())
