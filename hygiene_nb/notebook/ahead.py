"""Run by ``hygiene-nb report`` before its kernel starts: the report's scans classified and kept.

``python -m hygiene_nb.notebook.ahead STORE SCAN_ID`` classifies every scan of the root up to
``SCAN_ID`` that has no classification kept (``api.keep_classifications``), in a process of
its own that ends before the kernel starts. The kernel's views then read the kept verdicts:
a classification's working memory (about 300 MiB at 1M entries) is never held beside the
kernel's, and the memory it leaves with the allocator goes with this process.
"""

from __future__ import annotations

import sys

import hygiene_nb._process  # noqa: F401  (before pyarrow: the allocator settings, as the kernel's)
from hygiene_nb import api
from hygiene_nb.errors import HygieneError

__all__ = ["main"]


def main(argv: list[str]) -> int:
    """Classify ahead; 0 when done, else an error's exit code (the report goes on either way)."""
    if len(argv) != 2:
        sys.stderr.write("usage: python -m hygiene_nb.notebook.ahead STORE SCAN_ID\n")
        return 2
    store, scan_id = argv
    try:
        api.keep_classifications(store=store, until=scan_id)
    except HygieneError as exc:
        sys.stderr.write(f"{exc.code}: {exc.message}\n")
        return exc.exit_code
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
