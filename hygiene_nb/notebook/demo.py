"""A deterministic demo tree and store, for notebooks, tests and docs (``random.Random(seed)``).

``python -m hygiene_nb.notebook.demo DIR`` builds one in ``DIR`` (``DIR/tree/home``, scanned three
times into ``DIR/store``) and prints the two paths; run again, it reuses them.
``python -m hygiene_nb.notebook.demo --fleet DIR`` builds a demo fleet instead: three hosts, each
a demo home of its own scanned two to four times, every scan published into ``DIR/fleet``
(what the fleet notebook opens by default).

The demo only creates: it builds its tree in a new or empty directory it is given, and between
scans it only adds files and appends to them, so its history shows growth. It never removes,
renames or truncates anything.
"""

from __future__ import annotations

import fcntl
import json
import os
import random
import stat
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hygiene_nb.errors import HygieneError, UsageError
from hygiene_nb.scan.index import ScanInfo
from hygiene_nb.store import Store, write_private_file

__all__ = [
    "DEMO_DIR_ENV",
    "DEMO_EPOCH_NS",
    "DEMO_HOSTS",
    "REPORT_ENV",
    "DemoStore",
    "demo_dir",
    "ensure_demo",
    "ensure_demo_fleet",
    "make_demo_fleet",
    "make_demo_store",
    "make_demo_tree",
    "or_demo",
    "or_demo_fleet",
]

DEMO_EPOCH_NS = 1_767_225_600 * 10**9  # 2026-01-01T00:00:00Z: every demo mtime is before it
_DAY_NS = 86_400 * 10**9


@dataclass
class DemoStore:
    """A demo tree, its store and the scans taken of it (oldest first).

    The scanned root is ``home``, the demo home directory inside ``tree``.
    """

    tree: Path
    store: Path
    home: Path

    @property
    def root(self) -> Path:
        """The scanned root (the demo home directory)."""
        return self.home

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
    _settle(root)
    return root / "home"


def _settle(root: Path) -> None:
    """Give each demo directory the time of its newest entry (as if written with its files)."""
    for top, dirs, files in os.walk(root, topdown=False):
        times = [os.lstat(os.path.join(top, n)).st_mtime_ns for n in (*dirs, *files)]
        if times:
            os.utime(top, ns=(max(times), max(times)), follow_symlinks=False)


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
        The tree, the store and the scans (of ``home``), oldest first. The store's
        ``config.toml`` names ``home`` as a home directory, so the demo is classified the way
        a real home directory would be (its ``.cache``, its dotfiles).
    """
    from hygiene_nb import api

    home = make_demo_tree(root, seed=seed)
    config = Store(Path(store)).ensure().root / "config.toml"
    if not config.exists():
        table = f"[roots.{json.dumps(str(home))}]\nhomes = [{json.dumps(str(home))}]\n"
        write_private_file(config, table.encode(), exclusive=True)
    rng = random.Random(seed + 1)
    demo = DemoStore(tree=Path(root), store=Path(store), home=home)
    for step in range(scans):
        if step:
            _grow(Path(root), step, rng)
            _settle(Path(root))
        demo.scans.append(api.scan_root(home, store=store, walker=walker))  # type: ignore[arg-type]
    return demo


DEMO_DIR_ENV = "HYGIENE_NB_DEMO_DIR"


def demo_dir() -> Path:
    """Where ``ensure_demo`` keeps the demo: ``$HYGIENE_NB_DEMO_DIR``, else a per-user temp dir."""
    found = os.environ.get(DEMO_DIR_ENV)
    if found:
        return Path(found)
    return Path(tempfile.gettempdir()) / f"hygiene-nb-demo-{os.getuid()}"


def _private_base(directory: Path | None) -> Path:
    """``directory`` (default ``demo_dir()``), made if missing; refused unless private to us."""
    base = Path(directory) if directory is not None else demo_dir()
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    st = os.lstat(base)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        # a predictable path in a shared /tmp: someone else could have made it first
        raise UsageError(
            f"{base} is not a private directory of yours (a link, another owner, or open to "
            f"others); remove it, or set {DEMO_DIR_ENV} to a directory of your own."
        )
    return base


def ensure_demo(directory: Path | None = None, *, seed: int = 42, scans: int = 3) -> DemoStore:
    """The demo tree and store in ``directory`` (default ``demo_dir()``), built on first use.

    Safe to call from several processes at once (notebooks under nbval run in parallel): one
    builds under a lock, the others wait and reuse it.
    """
    from hygiene_nb import api

    base = _private_base(directory)
    lock = os.open(base / ".lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        tree, store, ready = base / "tree", base / "store", base / "ready"
        if not ready.exists():
            if tree.exists() or store.exists():
                raise UsageError(
                    f"{base} holds an unfinished demo; give another directory "
                    f"(or set {DEMO_DIR_ENV}) and try again."
                )
            made = make_demo_store(tree, store, seed=seed, scans=scans)
            fd = os.open(ready, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(f"seed={seed} scans={scans}\n")
            return made
        demo = DemoStore(tree=tree, store=store, home=tree / "home")
        demo.scans = api.list_snapshots(store=store, root=str(demo.home))
        return demo
    finally:
        os.close(lock)


REPORT_ENV = ("HYGIENE_NB_REPORT_ROOT", "HYGIENE_NB_REPORT_STORE")


def or_demo(root: str | None, store: str | None) -> tuple[str, str]:
    """A notebook's ``root`` and ``store`` parameters; where both are None, where to look.

    A redacted report passes them in ``HYGIENE_NB_REPORT_ROOT``/``_STORE`` (so that no path is
    written into the notebook as a parameter); without those, the demo.

    Raises:
        UsageError: only one of the two was given.
    """
    from_env = [os.environ.get(name) for name in REPORT_ENV]
    if root is None and store is None and from_env[0] and from_env[1]:
        return from_env[0], from_env[1]
    if root is None and store is None:
        demo = ensure_demo()
        return str(demo.root), str(demo.store)
    if root is None or store is None:
        raise UsageError("give both root and store, or neither (to use the demo).")
    return root, store


# the demo fleet's hosts and how many scans each publishes: their sizes and growth differ
DEMO_HOSTS = (("atlas", 4), ("borealis", 2), ("cygnus", 3))


def make_demo_fleet(root: Path, dest: Path, *, seed: int = 42) -> Path:
    """Build a demo home per host of ``DEMO_HOSTS`` under ``root``, scan and publish each.

    Every host's tree and store lie in ``root/<host>/``; every scan is published into the
    fleet dataset ``dest`` under that host's name. Returns ``dest``.
    """
    from hygiene_nb import api
    from hygiene_nb.fleet.publish import publish

    for i, (host, scans) in enumerate(DEMO_HOSTS):
        made = make_demo_store(root / host / "tree", root / host / "store", seed=seed + i, scans=1)
        rng = random.Random(seed + i + 1)
        for step in range(1, scans):
            _grow(made.tree, step, rng)
            _settle(made.tree)
            made.scans.append(api.scan_root(made.home, store=made.store))
        for info in made.scans:
            publish(str(dest), str(made.home), store=made.store, scan_id=info.scan_id, host=host)
    return Path(dest)


def ensure_demo_fleet(directory: Path | None = None, *, seed: int = 42) -> Path:
    """The demo fleet dataset in ``directory`` (default ``demo_dir()``), built on first use.

    Its hosts' trees and stores lie in ``DIR/hosts``, the dataset in ``DIR/fleet`` (returned).
    Safe to call from several processes at once, like ``ensure_demo``.
    """
    base = _private_base(directory)
    lock = os.open(base / ".fleet-lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        hosts, dest, ready = base / "hosts", base / "fleet", base / "fleet-ready"
        if not ready.exists():
            if hosts.exists() or dest.exists():
                raise UsageError(
                    f"{base} holds an unfinished demo fleet; give another directory "
                    f"(or set {DEMO_DIR_ENV}) and try again."
                )
            make_demo_fleet(hosts, dest, seed=seed)
            fd = os.open(ready, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
            with os.fdopen(fd, "w") as handle:
                handle.write(f"seed={seed} hosts={len(DEMO_HOSTS)}\n")
        return dest
    finally:
        os.close(lock)


def or_demo_fleet(dest: str | None) -> str:
    """The fleet notebook's ``dest`` parameter; None: the demo fleet, built on first use."""
    return str(ensure_demo_fleet()) if dest is None else dest


def main(argv: list[str] | None = None) -> int:
    """``python -m hygiene_nb.notebook.demo [--fleet] [DIR]``: build (or reuse) the demo."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    fleet = bool(args) and args[0] == "--fleet"
    args = args[1:] if fleet else args
    if len(args) > 1 or any(a.startswith("-") for a in args):
        sys.stderr.write("usage: python -m hygiene_nb.notebook.demo [--fleet] [DIR]\n")
        return 2
    where = Path(args[0]).absolute() if args else None
    try:
        if fleet:
            sys.stdout.write(f"fleet: {ensure_demo_fleet(where)}\n")
            return 0
        demo = ensure_demo(where)
    except HygieneError as exc:
        sys.stderr.write(f"error: {exc.message}\n")
        return exc.exit_code
    sys.stdout.write(f"root:  {demo.root}\nstore: {demo.store}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
