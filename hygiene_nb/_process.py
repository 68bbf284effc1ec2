"""Process settings for the ``hygiene-nb`` command.

Imported first by ``hygiene_nb.cli``, so the environment below is set before numpy and pyarrow
load. Library users (a notebook's ``import hygiene_nb``) are not affected: the package loads its
modules lazily and this module only runs for the command, and in the papermill kernel that
``hygiene-nb report`` starts (before its first cell: ``notebook.report``), which inherits the
environment as well.
"""

from __future__ import annotations

import importlib.util
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
# mimalloc, at the same speed. Only where the installed pyarrow was built with jemalloc (x86_64
# Linux wheels are; ARM wheels since pyarrow 18 and some distributions' builds are not, and
# Arrow would print a warning for each command). A value the user set is kept.


def _arrow_has_jemalloc() -> bool:
    """Whether the installed pyarrow was built with jemalloc, without loading pyarrow.

    Its C++ build configuration (``include/arrow/util/config.h``, shipped in the wheels)
    defines ``ARROW_JEMALLOC`` when it was; no readable configuration counts as no.
    """
    spec = importlib.util.find_spec("pyarrow")
    for location in (spec.submodule_search_locations or []) if spec else []:
        try:
            with open(os.path.join(location, "include", "arrow", "util", "config.h")) as config:
                return any(line.split()[:2] == ["#define", "ARROW_JEMALLOC"] for line in config)
        except OSError:
            continue
    return False


if (
    sys.platform.startswith("linux")
    and "ARROW_DEFAULT_MEMORY_POOL" not in os.environ
    and _arrow_has_jemalloc()
):
    os.environ["ARROW_DEFAULT_MEMORY_POOL"] = "jemalloc"


# jsonschema registers an IRI format checker when ``rfc3987_syntax`` imports, and that import
# builds a parsing grammar: 0.9 s of every `hygiene-nb report`, whose nbformat and nbconvert
# import jsonschema (measured 2026-12-04: `import nbformat` 1.03 s, 0.11 s without it). The
# command never checks an IRI's syntax (nothing it validates uses that format), so it is
# recorded as absent for this process (and a report's kernel) only; a module imported already
# is left as it is.
sys.modules.setdefault("rfc3987_syntax", None)  # type: ignore[arg-type]
