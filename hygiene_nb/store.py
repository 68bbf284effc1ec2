"""The store: where snapshots, the ledger, plans, receipts and quarantine live (docs/format.md).

Resolved from ``--store``, else ``$HYGIENE_NB_STORE``, else ``${XDG_DATA_HOME:-~/.local/share}/
hygiene-nb``. Directories are created 0700 and files written 0600, atomically.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hygiene_nb.errors import FleetReadOnly, StoreError

__all__ = [
    "FLEET_MARKER",
    "QUARANTINE_NAME",
    "NotRegularFile",
    "Store",
    "fleet_marker_above",
    "make_private_dir",
    "no_duplicate_keys",
    "publish_dir",
    "read_regular_file",
    "refuse_fleet",
    "remove_store_path",
    "resolve_store",
    "store_above",
    "utc_now",
    "write_private_file",
]

DIR_MODE = 0o700
FILE_MODE = 0o600


@dataclass(frozen=True)
class Store:
    """The paths of one store; ``open_store`` creates what is missing."""

    root: Path

    @property
    def snapshots(self) -> Path:
        """The Hive-partitioned Parquet dataset of every scan."""
        return self.root / "snapshots"

    @property
    def index(self) -> Path:
        """The scan index (one JSON line per scan)."""
        return self.root / "index.jsonl"

    @property
    def incoming(self) -> Path:
        """Snapshots being written (moved under ``snapshots/`` once complete)."""
        return self.root / ".incoming"

    @property
    def ledger(self) -> Path:
        """The SQLite ledger."""
        return self.root / "ledger.sqlite"

    @property
    def rules(self) -> Path:
        """The user's rules (TOML), if any."""
        return self.root / "rules.toml"

    @property
    def plans(self) -> Path:
        """Issued plan files."""
        return self.root / "plans"

    @property
    def receipts(self) -> Path:
        """Execution receipts."""
        return self.root / "receipts"

    @property
    def quarantine(self) -> Path:
        """Quarantine batches on the store's filesystem."""
        return self.root / "quarantine"

    def ensure(self) -> Store:
        """Create the store's directories (0700) if missing and return the store.

        Raises:
            StoreError: a directory cannot be created or is not a directory.
        """
        for path in (self.root, self.snapshots, self.plans, self.receipts, self.quarantine):
            make_private_dir(path)
        return self


def make_private_dir(path: Path) -> None:
    """Create ``path`` (and parents) with mode 0700; tighten an existing one we own.

    Raises:
        StoreError: it cannot be created, or exists and is not a directory.
    """
    try:
        if not path.parent.exists():
            make_private_dir(path.parent)
        path.mkdir(mode=DIR_MODE, exist_ok=True)
        if path.is_symlink() or not path.is_dir():
            raise StoreError(f"{path} is not a directory: point --store at a directory you own.")
        if path.stat().st_mode & 0o077:
            path.chmod(DIR_MODE)
    except OSError as exc:
        raise StoreError(
            f"cannot create the store directory {path}: {exc.strerror}; "
            "choose another with --store or $HYGIENE_NB_STORE."
        ) from exc


def resolve_store(store: str | os.PathLike[str] | None = None) -> Store:
    """Return the store named by the argument, ``$HYGIENE_NB_STORE`` or the XDG default.

    Raises:
        FleetReadOnly: the directory is (or lies inside) a fleet dataset.
    """
    if store is None:
        store = os.environ.get("HYGIENE_NB_STORE") or None
    if store is None:
        data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
        store = Path(data_home) / "hygiene-nb"
    path = Path(store).expanduser().absolute()
    if ".." in path.parts:  # one path for every reader and writer: the one the kernel takes
        path = Path(os.path.realpath(path))
    resolved = Store(path)
    refuse_fleet(resolved.root, "used as a store")
    return resolved


# The file at the top of a fleet dataset (``hygiene_nb.fleet``): published evidence from many
# hosts, which no store, plan or execution may act in.
FLEET_MARKER = "hygiene-nb-fleet.json"


def fleet_marker_above(path: str | os.PathLike[str]) -> Path | None:
    """The fleet dataset ``path`` is, or lies inside (its top directory), else None.

    Read with ``lstat`` from ``path`` up to ``/``, along the path as given and along the one
    the kernel resolves (a symlink on the way may lead into a fleet dataset); a marker reached
    through a symlink counts too (the marker file itself may be anything but absent).
    """
    for candidate in _ancestors(path):
        try:
            os.lstat(candidate / FLEET_MARKER)
        except OSError:
            continue
        return candidate
    return None


def _ancestors(path: str | os.PathLike[str]) -> Iterator[Path]:
    """``path`` and every directory above it: as given, then as the kernel resolves it.

    A symlink on the way may lead somewhere else. The given path keeps its ``..``, which the
    kernel takes after the symlink before it: ``lnk/..`` is the parent of where ``lnk`` leads.
    """
    given = Path(path).absolute()
    resolved = Path(os.path.realpath(given))
    for here in (given, resolved) if resolved != given else (given,):
        yield here
        yield from here.parents


# The quarantine directory at the top of a filesystem other than the store's (the executor's).
QUARANTINE_NAME = ".hygiene-nb-quarantine"


def _looks_like_store(path: Path) -> bool:
    """Whether ``path`` holds what a store does: its scan index or ledger beside snapshots/."""
    try:
        return (path / "snapshots").is_dir() and (
            (path / "index.jsonl").is_file() or (path / "ledger.sqlite").is_file()
        )
    except OSError:
        return False


def store_above(path: str | os.PathLike[str], store: Store | None = None) -> Path | None:
    """The store or quarantine ``path`` is, or lies inside, else None.

    That is ``store``'s directory, any directory that holds a store's index or ledger beside
    ``snapshots/``, or a ``.hygiene-nb-quarantine``; looked for along the path as given and
    along the one the kernel resolves.
    """
    own = {store.root.absolute(), Path(os.path.realpath(store.root))} if store else set()
    for candidate in _ancestors(path):
        if candidate in own or candidate.name == QUARANTINE_NAME or _looks_like_store(candidate):
            return candidate
    return None


def refuse_fleet(path: str | os.PathLike[str], use: str) -> None:
    """Refuse to act in a fleet dataset: it is evidence, never authority.

    Raises:
        FleetReadOnly: ``path`` is, or lies inside, a directory carrying the fleet marker.
    """
    top = fleet_marker_above(path)
    if top is not None:
        same = Path(os.path.realpath(path)) == Path(os.path.realpath(top))
        where = "is" if same else "lies inside"
        raise FleetReadOnly(
            f"{path} {where} the fleet dataset {top} (it has {FLEET_MARKER}), which cannot be "
            f"{use}: a fleet dataset is published evidence, never authority. Plan and execute "
            "on the host itself, with its own store (`hygiene-nb plan ROOT` there)."
        )


class NotRegularFile(OSError):
    """A file argument that is a fifo, socket, device or directory: never read."""


_READ_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC


def read_regular_file(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of the regular file ``path`` (at most ``limit`` + 1), read without blocking.

    Opened with ``O_NONBLOCK``, so a fifo never hangs the command, then required to be a
    regular file before a byte is read.

    Raises:
        NotRegularFile: it is a fifo, socket, device or directory.
        OSError: it cannot be opened or read.
    """
    fd = os.open(path, _READ_FLAGS)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(
                errno.EINVAL,
                "not a regular file (a fifo, socket, device or directory is never read)",
                os.fspath(path),
            )
        chunks: list[bytes] = []
        total = 0
        while total <= limit:
            chunk = os.read(fd, min(1024 * 1024, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def write_private_file(path: Path, data: bytes, *, exclusive: bool = False) -> None:
    """Write ``data`` to ``path`` atomically (temp file, fsync, rename) with mode 0600.

    With ``exclusive`` the file must not exist yet (it is linked into place, never replacing
    anything; ``StoreError`` if something is there).

    Used for the store's own files and for files a person names (``plan --out``); callers
    refuse targets inside a scanned tree.

    Raises:
        StoreError: the file cannot be written.
    """
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, FILE_MODE)
            if exclusive:
                os.link(tmp, path)  # EEXIST if anything is there: never replaces
                Path(tmp).unlink()
            else:
                os.replace(tmp, path)  # noqa: TID251 - atomic replace of the store's own file
        except BaseException:
            # Leave no half-written temp file behind, whatever interrupted us.
            with contextlib.suppress(OSError):
                Path(tmp).unlink()
            raise
    except OSError as exc:
        raise StoreError(
            f"cannot write {path}: {exc.strerror}; check the store's permissions and free space."
        ) from exc


def _inside_store(store: Store, path: Path) -> Path:
    """Return ``path`` if it lies strictly inside the store (no symlink on the way), else raise."""
    root = store.root.resolve()
    resolved = path.parent.resolve() / path.name
    if root not in resolved.parents or path.is_symlink():
        raise StoreError(
            f"refusing to touch {path}: it is not inside the store {root}. "
            "This is a bug in hygiene-nb; please report it."
        )
    return resolved


def publish_dir(store: Store, staging: Path, final: Path) -> None:
    """Move a finished directory of the store's own files into place (never overwriting).

    Raises:
        StoreError: either path is outside the store, or ``final`` already exists.
    """
    staging, final = _inside_store(store, staging), _inside_store(store, final)
    if final.exists():
        raise StoreError(f"{final} already exists; scan again (a new scan gets a new id).")
    try:
        os.rename(staging, final)  # noqa: TID251 - the store's own files, inside the store
    except OSError as exc:
        raise StoreError(f"cannot publish {final}: {exc.strerror}; scan again.") from exc


def remove_store_path(store: Store, path: Path) -> None:
    """Remove one of the store's own files or directories (pruned snapshots, aborted scans).

    Never reaches outside the store, and never follows a symlink.

    Raises:
        StoreError: ``path`` is outside the store or cannot be removed.
    """
    path = _inside_store(store, path)
    try:
        if path.is_dir():
            shutil.rmtree(path)  # noqa: TID251 - the store's own files; rmtree never follows links
        elif path.exists():
            path.unlink()
    except OSError as exc:
        raise StoreError(
            f"cannot remove {path}: {exc.strerror}; check the store's permissions."
        ) from exc


def utc_now() -> datetime:
    """Now, in UTC: every timestamp the store writes (plans, manifests, receipts, the ledger)."""
    return datetime.now(UTC)


def no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads`` hook for the store's own records: a key given twice is refused.

    Raises:
        ValueError: a key appears twice in one object.
    """
    obj = dict(pairs)
    if len(obj) != len(pairs):
        raise ValueError("duplicate keys")
    return obj
