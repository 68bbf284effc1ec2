"""Opening, locking and loading a quarantine batch for restore and purge.

``open_batch`` finds the batch in the store's quarantine or a registered one on another
filesystem and hands out directory handles (never through a symlink, only a batch that is ours
and not writable by others); ``lock_batch`` takes its exclusive lock; ``load_batch`` reads its
manifest into a ``Batch`` and refuses one that does not say where each item belongs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
from collections.abc import Iterator
from pathlib import Path

from hygiene_nb.errors import BatchBusy, BatchInvalid, BatchNotFound
from hygiene_nb.executor.batches import Batch, ManifestItem, read_manifest
from hygiene_nb.executor.fileops import DIR_FLAGS, open_dir_at
from hygiene_nb.executor.registry import known_quarantines, registry_error
from hygiene_nb.store import Store

__all__ = ["load_batch", "lock_batch", "open_batch"]

_BATCH_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,200}")
_STATES = frozenset({"pending", "moved", "restored", "returned", "held"})


@contextlib.contextmanager
def open_batch(store: Store, batch_id: str) -> Iterator[tuple[int, int, Path]]:
    """Handles on the quarantine directory holding ``batch_id`` and on the batch, and its path.

    The handles are closed after; the path is the batch's real one, in whichever quarantine
    it was found.
    The store's ``quarantine/`` is searched first, then the quarantines at the top of other
    filesystems that the store registered (``known_quarantines``).

    Raises:
        BatchNotFound: no such batch, or ``batch_id`` is not a batch id.
        BatchInvalid: the batch is a symlink, unreadable, not ours or writable by others, or
            its quarantine directory is not private to us.
        StoreError: the batch is not in the store's quarantine nor any readable registered one,
            and the store's quarantine registry cannot be (fully) read.
    """
    name = _batch_name(batch_id)
    qfd, quarantine = _find_quarantine(store, name, batch_id)
    try:
        fd = _open_batch_dir(qfd, name, batch_id)
        try:
            yield qfd, fd, quarantine / batch_id
        finally:
            os.close(fd)
    finally:
        os.close(qfd)


def _find_quarantine(store: Store, name: bytes, batch_id: str) -> tuple[int, Path]:
    """A handle on (and the path of) the first known quarantine that holds an entry ``name``."""
    for index, quarantine in enumerate(known_quarantines(store)):
        try:
            qfd = os.open(quarantine, DIR_FLAGS)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if index == 0:
                raise _invalid(
                    batch_id, f"its quarantine cannot be opened ({exc.strerror})"
                ) from exc
            continue  # another filesystem's quarantine, unreachable now
        try:
            os.stat(name, dir_fd=qfd, follow_symlinks=False)
        except FileNotFoundError:
            os.close(qfd)
            continue
        except OSError:
            pass  # _open_batch_dir says what is wrong with it
        st = os.fstat(qfd)
        if index > 0 and (st.st_uid != os.geteuid() or st.st_mode & 0o077):
            os.close(qfd)
            raise _invalid(batch_id, f"its quarantine {quarantine} is not private to you")
        return qfd, quarantine
    unknown = registry_error(store)  # not found where we could look: unknown is not absent
    raise unknown if unknown is not None else _not_found(batch_id)


def lock_batch(fd: int, batch_id: str) -> None:
    """Take the batch's exclusive lock (held until ``fd`` is closed).

    Raises:
        BatchBusy: another restore or purge holds it.
    """
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise BatchBusy(
            f"batch {batch_id} is being restored or purged by another process; "
            "wait for it to finish and run the command again."
        ) from None


def _batch_name(batch_id: str) -> bytes:
    if not _BATCH_ID.fullmatch(batch_id) or batch_id in (".", ".."):
        raise _not_found(batch_id)
    return batch_id.encode("ascii")


def _not_found(batch_id: str) -> BatchNotFound:
    return BatchNotFound(
        f"there is no quarantine batch {batch_id!r}; list them with `hygiene-nb quarantine list`."
    )


def _invalid(batch_id: str, why: str) -> BatchInvalid:
    return BatchInvalid(f"batch {batch_id}: {why}; nothing was touched, inspect it by hand.")


def _open_batch_dir(qfd: int, name: bytes, batch_id: str) -> int:
    try:
        fd = open_dir_at(qfd, name)
    except FileNotFoundError:
        raise _not_found(batch_id) from None
    except OSError as exc:
        raise _invalid(batch_id, f"it is not a directory we can open ({exc.strerror})") from exc
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & 0o022:
        os.close(fd)
        raise _invalid(batch_id, "it is not owned by you or is writable by others")
    return fd


def load_batch(path: Path, batch_id: str, fd: int) -> Batch:
    """The batch with its manifest items.

    Raises:
        BatchInvalid: no manifest, or one that does not parse into valid items.
    """
    try:
        doc = read_manifest(fd)
        if doc is None:
            raise _invalid(batch_id, "it has no manifest, so nothing says where its items belong")
        items = [ManifestItem(**d) for d in doc["items"]]
        by_path = {i.original_raw: i for i in items}
        if len(by_path) != len(items) or any(i.state not in _STATES for i in items):
            raise ValueError("duplicate items or an unknown item state")
        root = doc.get("root")
        if not (
            isinstance(root, dict)
            and isinstance(root.get("path"), str)
            and root["path"].startswith("/")
            and isinstance(root.get("dev"), int)
            and isinstance(root.get("inode"), int)
        ):
            raise ValueError("it does not record the root its items came from")
        return Batch(
            path,
            batch_id,
            fd,
            str(doc["created_at"]),
            str(doc["plan_id"]),
            str(doc["plan_digest"]),
            by_path,
            root=root,
            fs=doc.get("fs") if isinstance(doc.get("fs"), dict) else None,
        )
    except (ValueError, KeyError, TypeError) as exc:
        raise _invalid(batch_id, f"its manifest is invalid ({exc})") from exc
