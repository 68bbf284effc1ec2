"""A deterministic demo tree and store, for notebooks, tests and docs (``random.Random(seed)``).

The demo only creates: it builds its tree in a new or empty directory it is given, and between
scans it only adds files and appends to them, so its history shows growth. It never removes,
renames or truncates anything.
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field
from pathlib import Path

from hygiene_nb.errors import UsageError
from hygiene_nb.snapshot import ScanInfo

__all__ = ["DEMO_EPOCH_NS", "DemoStore", "make_demo_store", "make_demo_tree"]

DEMO_EPOCH_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z: every demo mtime is before it
_DAY_NS = 86_400 * 10**9


@dataclass
class DemoStore:
    """A demo tree, its store and the scans taken of it (oldest first)."""

    root: Path
    store: Path
    home: Path
    scans: list[ScanInfo] = field(default_factory=list)


def _write(path: Path, size: int, rng: random.Random, age_days: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        os.write(fd, rng.randbytes(size))
    finally:
        os.close(fd)
    mtime = DEMO_EPOCH_NS - int(age_days * _DAY_NS)
    os.utime(path, ns=(mtime, mtime))


# (relative path, bytes, age in days): a small home with one of every kind of thing.
_LAYOUT: tuple[tuple[str, int, float], ...] = (
    ("home/projects/webapp/package.json", 420, 30),
    ("home/projects/webapp/package-lock.json", 9_800, 30),
    ("home/projects/webapp/src/index.js", 2_400, 3),
    ("home/projects/webapp/node_modules/react/index.js", 48_000, 30),
    ("home/projects/webapp/node_modules/react/package.json", 900, 30),
    ("home/projects/webapp/node_modules/lodash/lodash.js", 120_000, 30),
    ("home/projects/webapp/dist/bundle.js", 96_000, 2),
    ("home/projects/analysis/pyproject.toml", 600, 200),
    ("home/projects/analysis/model.py", 5_200, 12),
    ("home/projects/analysis/__pycache__/model.cpython-311.pyc", 7_100, 12),
    ("home/projects/analysis/.venv/lib/site-packages/numpy/core.py", 250_000, 200),
    ("home/projects/analysis/results/run-01.log", 33_000, 400),
    ("home/projects/analysis/results/run-02.log", 41_000, 90),
    ("home/projects/analysis/results/summary.csv", 12_000, 90),
    ("home/projects/orphan/node_modules/left-pad/index.js", 1_500, 800),
    ("home/projects/orphan/target/debug/app", 64_000, 800),
    ("home/.cache/pip/wheels/abc.whl", 180_000, 60),
    ("home/.cache/thumbnails/large/1.png", 22_000, 15),
    ("home/.ssh/id_ed25519", 411, 900),
    ("home/.bashrc", 3_700, 900),
    ("home/Documents/thesis.pdf", 310_000, 45),
    ("home/Documents/notes.txt", 1_200, 5),
    ("home/Pictures/2025/beach.jpg", 2_100_000, 150),
    ("home/Downloads/installer.tmp", 75_000, 300),
    ("home/Downloads/old-report.pdf.~1~", 40_000, 700),
    ("home/keep-forever/.hygiene-nb-keep", 0, 365),
    ("home/keep-forever/archive.tar", 500_000, 1000),
)


def make_demo_tree(root: Path, *, seed: int = 42) -> Path:
    """Build the demo tree in ``root`` (which must be new or empty); return its home directory.

    The same ``seed`` gives the same names, sizes, contents and modification times.

    Raises:
        UsageError: ``root`` exists and is not an empty directory.
    """
    root = Path(root)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise UsageError(f"{root} is not empty; give a new directory for the demo tree.")
    rng = random.Random(seed)
    for rel, size, age in _LAYOUT:
        _write(root / rel, size, rng, age)
    return root / "home"


def _grow(root: Path, step: int, rng: random.Random) -> None:
    """Between scans: new files in the caches and results, a longer log (appends only)."""
    _write(root / f"home/.cache/pip/wheels/new-{step}.whl", 150_000 * step, rng, 1)
    _write(root / f"home/projects/analysis/results/run-{step + 2:02d}.log", 20_000, rng, 1)
    log = root / "home/projects/analysis/results/run-02.log"
    with log.open("ab") as handle:
        handle.write(rng.randbytes(10_000 * step))
    mtime = DEMO_EPOCH_NS - (10 - step) * _DAY_NS
    os.utime(log, ns=(mtime, mtime))


def make_demo_store(
    root: Path, store: Path, *, seed: int = 42, scans: int = 3, walker: str = "auto"
) -> DemoStore:
    """Build the demo tree, then scan it ``scans`` times, growing it between scans.

    Args:
        root: a new or empty directory for the tree.
        store: the store to scan into.
        seed: the generator's seed.
        scans: how many snapshots to take.
        walker: ``auto``, ``c`` or ``python``.

    Returns:
        The tree, the store and the scans, oldest first. Set ``HOME`` to ``home`` to classify
        the demo the way it would be classified on a real home directory.
    """
    from hygiene_nb import api

    home = make_demo_tree(root, seed=seed)
    rng = random.Random(seed + 1)
    demo = DemoStore(root=Path(root), store=Path(store), home=home)
    for step in range(scans):
        if step:
            _grow(Path(root), step, rng)
        demo.scans.append(api.scan_root(root, store=store, walker=walker))  # type: ignore[arg-type]
    return demo
