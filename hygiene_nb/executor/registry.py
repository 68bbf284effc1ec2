"""The store's registry of quarantines on other filesystems (``quarantines.json``).

Every ``.hygiene-nb-quarantine`` directory a batch was claimed in is recorded here, so that
``quarantine list``, ``restore`` and ``recover`` find batches that do not live in the store.
One bad record hides none of the others; writes are serialized by a lock file and atomic.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import stat
from pathlib import Path

from hygiene_nb.errors import StoreError
from hygiene_nb.executor.batches import QUARANTINE_NAME
from hygiene_nb.executor.listing import BatchInfo
from hygiene_nb.store import FILE_MODE, Store, write_private_file

__all__ = [
    "QUARANTINES_NAME",
    "QUARANTINES_SCHEMA",
    "known_quarantines",
    "read_registry",
    "register_quarantine",
    "registry_error",
    "registry_problems",
]

QUARANTINES_NAME = "quarantines.json"
QUARANTINES_SCHEMA = "hygiene-nb/quarantines@1"
_MAX_REGISTRY = 4 * 1024 * 1024


def _registry_path(store: Store) -> Path:
    return store.root / QUARANTINES_NAME


def _read_registry(store: Store) -> list[bytes]:
    """The quarantine directories registered in the store (without ``store.quarantine``).

    Raises:
        StoreError: the registry exists but cannot be read, or a record in it is not valid
            (it is never rewritten then: that would drop what it could not read).
    """
    found, problems = read_registry(store)
    if problems:
        raise _bad_registry(_registry_path(store), "; ".join(problems))
    return found


def read_registry(store: Store) -> tuple[list[bytes], list[str]]:
    """The registered quarantine directories that can be read, and what is wrong with the rest.

    One bad record hides none of the others; a registry that cannot be read at all is one
    problem (and then nothing registered is known).
    """
    path = _registry_path(store)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        return [], [exc.strerror or "unreadable"]
    try:
        with os.fdopen(fd, "rb") as handle:
            if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
                return [], ["not a regular file"]
            data = handle.read(_MAX_REGISTRY + 1)
        if len(data) > _MAX_REGISTRY:
            return [], ["absurdly large"]
        doc = json.loads(data)
        if not isinstance(doc, dict) or doc.get("schema") != QUARANTINES_SCHEMA:
            return [], ["unknown version"]
        entries = doc["quarantines"]
        if not isinstance(entries, list):
            return [], ["its quarantines are not a list"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return [], [str(exc)]
    out: list[bytes] = []
    problems: list[str] = []
    for number, entry in enumerate(entries, 1):
        try:
            raw = base64.b64decode(entry["path_b64"], validate=True)
        except (ValueError, KeyError, TypeError) as exc:
            problems.append(f"record {number} is not valid ({exc})")
            continue
        if not _clean_quarantine_path(raw):
            problems.append(f"record {number} is not a quarantine directory path")
            continue
        out.append(raw)
    return out, problems


def _clean_quarantine_path(raw: bytes) -> bool:
    return (
        raw.startswith(b"/")
        and b"\0" not in raw
        and os.path.basename(raw) == QUARANTINE_NAME.encode()
        and all(p not in (b"", b".", b"..") for p in raw[1:].split(b"/"))
    )


def registry_problems(store: Store) -> list[BatchInfo]:
    """One ``invalid`` entry for what the registry could not give (none when it is sound)."""
    problems = read_registry(store)[1]
    if not problems:
        return []
    path = str(_registry_path(store))
    why = "; ".join(problems)
    return [
        BatchInfo(
            QUARANTINES_NAME,
            path,
            "",
            0,
            0,
            "invalid",
            problems=[
                f"the quarantine registry {path} cannot be fully read ({why}): batches on other "
                "filesystems it lists may be missing here; repair or rewrite it (it lists their "
                ".hygiene-nb-quarantine paths)"
            ],
        )
    ]


def registry_error(store: Store) -> StoreError | None:
    """The error to raise when a batch was not found and the registry could not all be read."""
    problems = read_registry(store)[1]
    return _bad_registry(_registry_path(store), "; ".join(problems)) if problems else None


def _bad_registry(path: Path, why: str) -> StoreError:
    return StoreError(
        f"the quarantine registry {path} cannot be used ({why}); batches on other filesystems "
        "cannot be found until it is repaired (it lists their .hygiene-nb-quarantine paths)."
    )


def known_quarantines(store: Store) -> list[Path]:
    """Every quarantine directory of the store: ``store.quarantine`` first, then registered ones.

    Registered ones only as far as the registry can be read (``registry_problems`` says what
    could not be: callers must not take a batch they did not find for one that is not there).
    """
    found = [Path(store.quarantine)]
    for raw in read_registry(store)[0]:
        path = Path(os.fsdecode(raw))
        if path not in found:
            found.append(path)
    return found


def register_quarantine(store: Store, quarantine: Path) -> None:
    """Record ``quarantine`` (a ``.hygiene-nb-quarantine`` directory) in the store's registry.

    Serialized by a lock file beside it; written atomically (0600). A no-op when recorded.

    Raises:
        StoreError: the registry cannot be read or written.
    """
    raw = os.fsencode(quarantine)
    if not _clean_quarantine_path(raw):
        raise StoreError(f"{quarantine} is not a quarantine directory path; nothing registered.")
    lock = store.root / (QUARANTINES_NAME + ".lock")
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    except OSError as exc:
        raise StoreError(f"cannot lock {lock} ({exc.strerror}); check the store.") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        known = _read_registry(store)
        if raw in known:
            return
        doc = {
            "schema": QUARANTINES_SCHEMA,
            "quarantines": [
                {"path": os.fsdecode(p), "path_b64": base64.b64encode(p).decode("ascii")}
                for p in [*known, raw]
            ],
        }
        data = json.dumps(doc, indent=1, ensure_ascii=True).encode()
        write_private_file(_registry_path(store), data)
    finally:
        os.close(fd)  # releases the lock
