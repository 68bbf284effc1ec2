"""Walkers: list a tree without following symlinks and emit raw rows (see ``spec``).

Two implementations keep one contract: a C core (``_cwalk``, built by the package's own build,
threaded) and a pure-Python fallback used where no compiler was available. ``open_walker`` picks
the C core when it is importable.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal, Protocol

import pyarrow as pa

from hygiene_nb.scan.walk.spec import WalkOptions, WalkStats

__all__ = ["Walker", "WalkerName", "available_walkers", "open_walker"]

WalkerName = Literal["auto", "c", "python"]


class Walker(Protocol):
    """A walk in progress: ``batches()`` yields WALK_SCHEMA batches; ``stats`` tracks it."""

    name: str
    stats: WalkStats

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Yield the walk's rows in batches (each walk can be iterated once)."""
        ...


def _c_core_built() -> bool:
    try:
        from hygiene_nb.scan.walk import cwalk
    except ImportError:
        return False
    return cwalk.is_available()


def available_walkers() -> list[str]:
    """Return the walker names usable here, fastest first."""
    return (["c"] if _c_core_built() else []) + ["python"]


def open_walker(options: WalkOptions, *, walker: WalkerName = "auto") -> Walker:
    """Start a walk of ``options.root`` with the named walker (``auto``: the C core if built).

    Raises:
        RuntimeError: ``walker="c"`` was asked for and the C core is not built.
    """
    from hygiene_nb.scan.walk import pywalk

    if walker == "c" or (walker == "auto" and _c_core_built()):
        from hygiene_nb.scan.walk import cwalk

        return cwalk.CWalker(options)
    return pywalk.PyWalker(options)
