"""Process settings for the ``hygiene-nb`` command.

Imported first by ``hygiene_nb.cli``, so the environment below is set before numpy and pyarrow
load. Library users (a notebook's ``import hygiene_nb``) are not affected: the package loads its
modules lazily and this module only runs for the command.
"""

from __future__ import annotations

import os
import sys

__all__: list[str] = []

# numpy's OpenBLAS starts a worker per core when it loads, and each spins ~0.1 s of CPU before
# sleeping. No command does linear algebra, and on a 2-core machine that spin competes with the
# scan's walker threads. (A value the user set is kept; a papermill kernel started by
# `hygiene-nb report` inherits it.)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


# Arrow allocates through jemalloc in the command (read when pyarrow loads). Measured on a
# 1M-entry scan: peak RSS 264-285 MiB with jemalloc against 306-335 MiB with Arrow's default
# mimalloc, at the same speed. Linux only: pyarrow's Linux builds have jemalloc, and a build
# without it would only warn and keep its default. A value the user set is kept.
if sys.platform.startswith("linux"):
    os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
