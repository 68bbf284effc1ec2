"""Process settings for the ``hygiene-nb`` command, made before numpy and pyarrow load.

Imported first by ``hygiene_nb.cli``. Library users (a notebook's ``import hygiene_nb``) are not
affected: the package loads its modules lazily and this module only runs for the command.
"""

from __future__ import annotations

import os

__all__: list[str] = []

# numpy's OpenBLAS starts a worker per core when it loads, and each spins ~0.1 s of CPU before
# sleeping. No command does linear algebra, and on a 2-core machine that spin competes with the
# scan's walker threads. (A value the user set is kept; a papermill kernel started by
# `hygiene-nb report` inherits it.)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
