"""The C walker: a thin wrapper turning ``_cwalk``'s column buffers into WALK_SCHEMA batches.

The compiled core (``hygiene_nb/scan/walk/cwalk.c``) is optional; ``is_available`` says if it
was built.
"""

from __future__ import annotations

import importlib
from collections.abc import Generator
from types import ModuleType
from typing import Any

import pyarrow as pa

from hygiene_nb.scan.walk.spec import WALK_SCHEMA, WalkOptions, WalkStats

__all__ = ["CWalker", "is_available"]

_MODULE = "hygiene_nb.scan.walk._cwalk"

# (arrow type, buffers consumed) per column, in WALK_SCHEMA order; the core hands them over
# as: offsets + data for binary columns, one value buffer for the others.
_LAYOUT: tuple[tuple[pa.DataType, int], ...] = tuple(
    (f.type, 2 if pa.types.is_binary(f.type) else 1) for f in WALK_SCHEMA
)


def _load() -> ModuleType | None:
    try:
        return importlib.import_module(_MODULE)
    except ImportError:
        return None


def is_available() -> bool:
    """Return True when the compiled core ``hygiene_nb.scan.walk._cwalk`` imports."""
    return _load() is not None


def _to_batch(rows: int, buffers: tuple[Any, ...]) -> pa.RecordBatch:
    """Wrap one batch of core buffers (no copy) as a WALK_SCHEMA record batch."""
    arrays: list[pa.Array] = []
    i = 0
    for dtype, count in _LAYOUT:
        bufs = [pa.py_buffer(b) for b in buffers[i : i + count]]
        i += count
        arrays.append(pa.Array.from_buffers(dtype, rows, [None, *bufs], null_count=0))
    return pa.RecordBatch.from_arrays(arrays, schema=WALK_SCHEMA)


class CWalker:
    """Walk ``options.root`` with the threaded C core (rows: ``hygiene_nb.scan.walk.spec``).

    Attributes:
        name: The walker's name (``"c"``).
        options: What to walk.
        stats: Counters updated as batches are produced (entries, errors, budget_cut; ``extra``
            holds ``threads`` and ``dirs``).
    """

    name = "c"

    def __init__(self, options: WalkOptions) -> None:
        """Prepare a walk (nothing is read until ``batches`` is iterated).

        Args:
            options: The root, excludes, budgets and thread count.

        Raises:
            RuntimeError: The compiled core is not built.
            ValueError: An option is out of range (e.g. a NUL byte in the root or a pattern).
        """
        module = _load()
        if module is None:
            raise RuntimeError(f"the C walker core ({_MODULE}) is not built")
        self.options = options
        self.stats = WalkStats()
        self._core: Any = module.Walker(
            options.root,
            options.one_file_system,
            [
                (r.pattern, r.anchored, r.dir_only, r.negate, r.pathname, r.globstar)
                for r in options.excludes
            ],
            sorted(options.skip_identities),
            sorted(options.skip_names),
            options.max_entries,
            options.max_seconds,
            options.threads,
            options.batch_rows,
        )
        self._used = False

    def batches(self) -> Generator[pa.RecordBatch, None, None]:
        """Yield the walk's rows in WALK_SCHEMA batches (directories post-order).

        Yields:
            Record batches of at most ``options.batch_rows`` rows.

        Raises:
            OSError: The root cannot be ``lstat``-ed, or a worker failed fatally.
            RuntimeError: The walk was already iterated.
        """
        if self._used:
            raise RuntimeError("a walk can be iterated once")
        self._used = True
        core = self._core
        try:
            while True:
                got = core.next_batch()
                self._sync()
                if got is None:
                    return
                rows, errors, buffers = got
                self.stats.errors += errors
                self.stats.extra["rows"] = self.stats.extra.get("rows", 0) + rows
                yield _to_batch(rows, buffers)
        finally:
            core.close()
            self._sync()

    def _sync(self) -> None:
        core = self._core
        self.stats.entries = int(core.entries)
        self.stats.budget_cut = bool(core.budget_cut)
        self.stats.extra["threads"] = int(core.threads)
        self.stats.extra["dirs"] = int(core.dirs)
