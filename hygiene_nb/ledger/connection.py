"""One connection to a store's ledger: opening and migrating it, its transactions and reads.

WAL mode; every write is one ``BEGIN IMMEDIATE`` transaction, so a notebook and a scheduled report
writing at once lose nothing. A full disk and a damaged file become ``StoreFull`` and
``StoreError`` here, for every noun the ledger holds (``annotations``, ``claims``, ``rules``,
``plans``), each of which adds its methods to ``LedgerConnection``.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from hygiene_nb.errors import LedgerTooNew, StoreError, StoreFull
from hygiene_nb.ledger.schema import MIGRATIONS, SCHEMA_VERSION, TABLES
from hygiene_nb.store import FILE_MODE, Store, utc_now

__all__ = ["LedgerConnection", "now"]

_BUSY_MS = 30_000
_LOW_SPACE = 1024 * 1024  # bytes: below this, a failing write is taken to be for want of space


def _is_full(exc: BaseException, path: Path) -> bool:
    """Whether ``exc`` comes from the disk holding ``path`` being (nearly) full."""
    if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == (
        sqlite3.SQLITE_FULL
    ):
        return True
    if isinstance(exc, OSError) and exc.errno == errno.ENOSPC:
        return True
    try:  # SQLite reports some failed writes as a plain "disk I/O error"
        fs = os.statvfs(path.parent)
    except OSError:
        return False
    return fs.f_bavail * fs.f_frsize < _LOW_SPACE


def _full(path: Path, exc: BaseException) -> StoreFull:
    return StoreFull(
        f"the disk holding the store ({path.parent}) is full, so the ledger {path.name} could "
        f"not be written ({exc}); the ledger keeps its last complete state. Free some space "
        "on that disk, then run the command again."
    )


def now() -> str:
    """The time a row records (UTC, ISO 8601, to the microsecond)."""
    return utc_now().isoformat(timespec="microseconds")


class LedgerConnection:
    """The connection, its transactions and reads; opened with ``open(store)``."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._db = connection
        self.path = path

    @classmethod
    def open(cls, store: Store) -> Self:
        """Open (creating and migrating if needed) the ledger of ``store``.

        Raises:
            LedgerTooNew: the file was written by a newer hygiene-nb.
            StoreError: the file cannot be opened or migrated.
        """
        store.ensure()
        path = store.ledger
        try:
            if not path.exists():
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE))
            db = sqlite3.connect(path, timeout=_BUSY_MS / 1000, isolation_level=None)
            db.execute(f"PRAGMA busy_timeout = {_BUSY_MS}")
            ledger = cls(db, path)
            ledger._refuse_if_too_new()  # before anything writes to the file, even its header
            db.execute("PRAGMA journal_mode = WAL")
        except (OSError, sqlite3.Error) as exc:
            if _is_full(exc, path):
                raise _full(path, exc) from exc
            raise StoreError(
                f"cannot open the ledger {path}: {exc}; check the store's permissions."
            ) from exc
        ledger._migrate()
        return ledger

    def _refuse_if_too_new(self) -> None:
        version = self.schema_version
        if version > SCHEMA_VERSION:
            self._db.close()
            raise LedgerTooNew(
                f"the ledger {self.path} has schema {version}, newer than this hygiene-nb "
                f"understands ({SCHEMA_VERSION}); upgrade hygiene-nb (the file is unchanged)."
            )

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        """The schema version recorded in the file."""
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def data_version(self) -> int:
        """A number that changes when another connection commits to the file, and only then.

        SQLite's ``PRAGMA data_version``: what this connection writes leaves it as it was, so a
        reader that keeps its connection (the widget) knows cheaply whether what it read is
        still what the file holds, whoever else wrote (another process, another connection).
        """
        return int(self._read("PRAGMA data_version")[0][0])

    def _damaged(self, exc: sqlite3.Error) -> StoreError:
        return StoreError(
            f"the ledger {self.path} is damaged or unreadable ({exc}); move it aside and run "
            "again (a new ledger starts empty), or restore it from a backup."
        )

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """One immediate transaction: other writers wait, nothing is lost."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            if _is_full(exc, self.path):
                raise _full(self.path, exc) from exc
            raise StoreError(f"the ledger {self.path} is busy or unwritable: {exc}") from exc
        try:
            yield self._db
            self._db.execute("COMMIT")  # a full disk may refuse only this
        except sqlite3.Error as exc:
            self._rollback()
            if _is_full(exc, self.path):
                raise _full(self.path, exc) from exc
            raise self._damaged(exc) from exc
        except BaseException:
            # Undo the half-done write whatever interrupted it, then let it propagate.
            self._rollback()
            raise

    def _rollback(self) -> None:
        """Undo the open transaction, if SQLite has not undone it already."""
        try:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # nothing was committed; the file keeps its last committed state

    def _read(self, query: str, args: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            return list(self._db.execute(query, args).fetchall())
        except sqlite3.Error as exc:
            raise self._damaged(exc) from exc

    @contextmanager
    def _rows(self, query: str, args: tuple[Any, ...] = ()) -> Iterator[Iterator[tuple[Any, ...]]]:
        """``_read``'s rows, fetched a batch at a time, inside a ``with`` block.

        A caller that turns each row into a record never holds all the rows and all the
        records at once. The cursor is closed when the block ends, however it ends: an
        interrupted read (its traceback kept, as a notebook keeps it) leaves no statement open
        to pin the connection to an old snapshot of the file.
        """
        try:
            cursor = self._db.execute(query, args)
        except sqlite3.Error as exc:
            raise self._damaged(exc) from exc
        try:
            yield self._batches(cursor)
        finally:
            cursor.close()

    def _batches(self, cursor: sqlite3.Cursor) -> Iterator[tuple[Any, ...]]:
        try:
            while batch := cursor.fetchmany(4096):
                yield from batch
        except sqlite3.Error as exc:
            raise self._damaged(exc) from exc

    def _migrate(self) -> None:
        with self._write() as db:
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            for number, sql in MIGRATIONS:
                if number > version:
                    for statement in sql.split(";"):
                        if statement.strip():
                            db.execute(statement)
                    db.execute(f"PRAGMA user_version = {number}")
            tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
            missing = TABLES - tables
            if missing:
                raise self._damaged(sqlite3.DatabaseError(f"missing {', '.join(sorted(missing))}"))
