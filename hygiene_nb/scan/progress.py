"""What a running scan tells a person: entries, bytes so far and the directory being read.

``ScanProgress`` is what ``scan_root(progress=callable)`` hands the callable after each walk
batch. It *is* the number of entries seen so far (an ``int``), so a callable written for a
plain count keeps working, and it carries ``bytes`` (the apparent bytes of the entries seen,
excluded ones left out; a hard-linked file counts at each of its names, so this can run ahead of
the scan's final total, which counts it once) and ``directory`` (the directory the walker's
latest rows were listed in: the one being read, or just finished).

On a terminal, ``TerminalLine`` draws it as one line on stderr, as ncdu and gdu do::

    scanning 1,234,567 entries, 14.2 GiB  lib/…/site-packages/pandas/tests

redrawn at most five times a second, never wider than the terminal (the directory, relative
to the root and escaped, shortened in the middle), and erased when the scan ends. In a notebook
``progress=True`` keeps a tqdm widget, with the same bytes and directory beside the count.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Callable
from typing import TextIO

import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb.formatting import display_path, human_bytes, progress_line
from hygiene_nb.scan.walk.spec import FLAG_EXCLUDED

__all__ = ["ScanProgress", "TerminalLine", "batch_bytes", "batch_directory", "progress_bar"]


class ScanProgress(int):
    """The entries seen so far (the ``int`` itself), with ``bytes`` and ``directory``."""

    bytes: int
    directory: str

    def __new__(cls, entries: int, nbytes: int = 0, directory: str = "") -> ScanProgress:
        """``entries`` seen so far, ``nbytes`` of them, the latest rows listed in ``directory``."""
        made = super().__new__(cls, entries)
        made.bytes = nbytes
        made.directory = directory
        return made

    @property
    def entries(self) -> int:
        """The number of entries seen so far."""
        return int(self)

    def __repr__(self) -> str:
        return f"ScanProgress({int(self)}, {self.bytes}, {self.directory!r})"


def batch_bytes(rows: pa.RecordBatch) -> int:
    """The apparent bytes of one walk batch's entries, excluded ones left out."""
    counted = pc.equal(
        pc.bit_wise_and(rows.column("flags"), pa.scalar(FLAG_EXCLUDED, pa.uint8())), 0
    )
    total = pc.sum(pc.filter(rows.column("size"), counted)).as_py()
    return int(total or 0)


def batch_directory(rows: pa.RecordBatch) -> str:
    """The directory the batch's last row was listed in (the root's path for the root row)."""
    if not rows.num_rows:
        return ""
    parent = rows.column("parent")[rows.num_rows - 1].as_py()
    if not parent:  # the root row: its name is its path
        parent = rows.column("name")[rows.num_rows - 1].as_py()
    # as snapshots show it: a byte that is not UTF-8 as \xff, never a lone surrogate (which a
    # terminal would be sent as six columns of \udcff)
    return bytes(parent).decode("utf-8", "backslashreplace")


class TerminalLine:
    """The scan's one-line progress on a terminal (stderr): throttled, erased at the end."""

    def __init__(
        self,
        root: str,
        stream: TextIO | None = None,
        *,
        interval: float = 0.2,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = root
        self.stream = stream if stream is not None else sys.stderr
        self.interval = interval
        self.clock = clock
        self.last = -float("inf")
        self.drawn = False

    def width(self) -> int:
        """The terminal's width in columns (80 when it cannot be told)."""
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or 80
        except (OSError, ValueError, AttributeError):
            return shutil.get_terminal_size().columns

    def start(self) -> None:
        """Say what is being scanned before the first batch arrives."""
        width = self.width()
        room = width - 1 - len("scanning  …")
        if room < 1:  # too narrow for a path: as much of the word as fits, never a wrap
            self.draw("scanning …"[: max(width - 1, 0)])
            return
        self.draw(f"scanning {display_path(self.root, None, room)} …")

    def __call__(self, progress: int) -> None:
        """Redraw the line for ``progress`` (at most once per ``interval`` seconds)."""
        now = self.clock()
        if now - self.last < self.interval:
            return
        self.last = now
        seen = progress if isinstance(progress, ScanProgress) else ScanProgress(progress)
        self.draw(
            progress_line(
                seen.entries, seen.bytes, seen.directory or self.root, self.width(), root=self.root
            )
        )

    def draw(self, text: str) -> None:
        """Replace the line with ``text`` (carriage return, text, erase to the end)."""
        self.stream.write("\r" + text + "\x1b[K")
        self.stream.flush()
        self.drawn = True

    def close(self) -> None:
        """Erase the line, so that what the command prints next starts on a clean one."""
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self.drawn = False


def _in_notebook() -> bool:
    """Whether this runs in a Jupyter kernel (tqdm.auto's test), without importing IPython."""
    if "IPython" not in sys.modules:
        return False
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover -- IPython in sys.modules can always be imported
        return False
    shell = get_ipython()
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def progress_bar(root: str) -> tuple[Callable[[int], None], Callable[[], None]]:
    """``progress=True``: a tqdm widget in a notebook, else ``TerminalLine`` on stderr."""
    if not _in_notebook():
        line = TerminalLine(root)
        line.start()
        return line, line.close
    from tqdm.auto import tqdm

    bar = tqdm(unit=" entries", desc="scanning", leave=False, mininterval=0.2)

    def update(progress: int) -> None:
        seen = progress if isinstance(progress, ScanProgress) else ScanProgress(progress)
        bar.set_postfix_str(
            f"{human_bytes(seen.bytes)}, {display_path(seen.directory, root, 60)}", refresh=False
        )
        bar.update(seen.entries - bar.n)

    return update, bar.close
