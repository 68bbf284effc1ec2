"""The ledger (``ledger.sqlite``): decisions, notes, history, claims, rules and issued plans.

Only this module touches SQLite.

WAL mode; every write is one ``BEGIN IMMEDIATE`` transaction, so a notebook and a scheduled report
writing at once lose nothing. The schema lives in ``MIGRATIONS`` (numbered; ``PRAGMA
user_version`` is the schema version). A file newer than this code is refused, never altered.
"""

from __future__ import annotations

import errno
import os
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hygiene_nb.errors import LedgerTooNew, PathNotNormal, StoreError, StoreFull, UsageError
from hygiene_nb.store import FILE_MODE, Store, utc_now

__all__ = [
    "DECISIONS",
    "MIGRATIONS",
    "SCHEMA_VERSION",
    "Annotation",
    "Claim",
    "IssuedPlan",
    "Ledger",
    "display_path",
]

DECISIONS = ("keep", "delete", "unsure")

MIGRATIONS: tuple[tuple[int, str], ...] = (
    (
        1,
        """
        CREATE TABLE annotations (
            path_raw BLOB PRIMARY KEY,          -- the exact path bytes (identity)
            path TEXT NOT NULL,                 -- for display and prefix queries
            decision TEXT CHECK (decision IN ('keep', 'delete', 'unsure')),
            note TEXT,
            by TEXT NOT NULL CHECK (by IN ('human', 'rule', 'agent')),
            rule TEXT,
            at TEXT NOT NULL
        );
        CREATE INDEX annotations_path ON annotations (path);
        CREATE TABLE annotation_history (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            path_raw BLOB NOT NULL,
            path TEXT NOT NULL,
            decision TEXT,
            note TEXT,
            by TEXT NOT NULL,
            rule TEXT,
            at TEXT NOT NULL,
            action TEXT NOT NULL CHECK (action IN ('set', 'removed'))
        );
        CREATE TABLE claims (
            path_raw BLOB NOT NULL,
            path TEXT NOT NULL,
            risk TEXT NOT NULL,
            claim TEXT NOT NULL,
            confidence REAL NOT NULL CHECK (confidence BETWEEN 0 AND 1),
            by TEXT NOT NULL CHECK (by IN ('agent', 'rule')),
            at TEXT NOT NULL,
            PRIMARY KEY (path_raw, by)
        );
        CREATE TABLE remembered_rules (
            group_id TEXT PRIMARY KEY,
            decision TEXT NOT NULL CHECK (decision IN ('keep', 'delete', 'unsure')),
            at TEXT NOT NULL
        );
        CREATE TABLE plans (
            plan_id TEXT PRIMARY KEY,
            plan_digest TEXT NOT NULL,
            root TEXT NOT NULL,
            scan_id TEXT NOT NULL,
            path TEXT NOT NULL,
            created_at TEXT NOT NULL,
            expires_at TEXT NOT NULL,
            candidates INTEGER NOT NULL,
            reclaim_bytes INTEGER NOT NULL,
            state TEXT NOT NULL DEFAULT 'issued'
        );
        """,
    ),
)
MIGRATIONS += (
    (
        2,
        """
        CREATE TABLE executions (
            id INTEGER PRIMARY KEY AUTOINCREMENT,   -- append-only: one row per execution
            plan_id TEXT NOT NULL,
            plan_digest TEXT NOT NULL,
            authorization_id TEXT NOT NULL,
            authorized_at TEXT NOT NULL,
            finished_at TEXT NOT NULL,
            batch_id TEXT,
            receipt_path TEXT NOT NULL,
            moved INTEGER NOT NULL,
            skipped INTEGER NOT NULL,
            moved_bytes INTEGER NOT NULL,
            status TEXT NOT NULL
        );
        """,
    ),
)
MIGRATIONS += (
    (
        3,
        """
        CREATE TABLE declined_suggestions (         -- automatic mode: never repeat these
            root TEXT NOT NULL,
            digest TEXT NOT NULL,                    -- of the suggested candidates as they were
            declined_at TEXT NOT NULL,
            PRIMARY KEY (root, digest)
        );
        """,
    ),
)
MIGRATIONS += (
    (
        4,
        """
        -- What a decision was made on: the snapshot on screen and the entry's digest there
        -- (hygiene_nb.scan.digests). NULL for decisions written before: a plan leaves them out
        -- until a person decides again.
        ALTER TABLE annotations ADD COLUMN snapshot_id TEXT;
        ALTER TABLE annotations ADD COLUMN digest TEXT;
        ALTER TABLE annotation_history ADD COLUMN snapshot_id TEXT;
        ALTER TABLE annotation_history ADD COLUMN digest TEXT;
        """,
    ),
)

SCHEMA_VERSION = MIGRATIONS[-1][0]
_TABLES = frozenset(
    {
        "annotations",
        "annotation_history",
        "claims",
        "remembered_rules",
        "plans",
        "executions",
        "declined_suggestions",
    }
)
_BUSY_MS = 30_000
_ANNOTATION_COLUMNS = "path, path_raw, decision, note, by, rule, at, snapshot_id, digest"
_EXECUTION_KEYS = (
    "plan_id", "plan_digest", "authorization_id", "authorized_at", "finished_at", "batch_id",
    "receipt_path", "moved", "skipped", "moved_bytes", "status",
)  # fmt: skip


def display_path(raw: bytes) -> str:
    """The text form of a path, as snapshots show it (invalid UTF-8 bytes escaped)."""
    return raw.decode("utf-8", "backslashreplace")


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


def _now() -> str:
    return utc_now().isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Annotation:
    """A decision and/or note on one path."""

    path: str
    path_raw: bytes
    decision: str | None
    note: str | None
    by: str
    rule: str | None
    at: str
    snapshot_id: str | None = None  # the snapshot the decision was made on
    digest: str | None = None  # the entry's digest in that snapshot (hygiene_nb.scan.digests)

    @property
    def is_reviewed(self) -> bool:
        """Only keep, delete and unsure count as reviewed (a note alone does not)."""
        return self.decision in DECISIONS


@dataclass(frozen=True)
class Claim:
    """A judgement by an agent or rule; kept apart from human decisions, never overriding them."""

    path: str
    risk: str
    claim: str
    confidence: float
    by: str
    at: str


@dataclass(frozen=True)
class IssuedPlan:
    """A plan this store issued, with the digest recorded at issue."""

    plan_id: str
    plan_digest: str
    root: str
    scan_id: str
    path: str
    created_at: str
    expires_at: str
    candidates: int
    reclaim_bytes: int
    state: str


_UNSET: Any = object()


class Ledger:
    """One connection to the store's ledger; opened with ``Ledger.open(store)``."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._db = connection
        self.path = path

    @classmethod
    def open(cls, store: Store) -> Ledger:
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

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def schema_version(self) -> int:
        """The schema version recorded in the file."""
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

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
            missing = _TABLES - tables
            if missing:
                raise self._damaged(sqlite3.DatabaseError(f"missing {', '.join(sorted(missing))}"))

    # -- annotations ------------------------------------------------------------------------

    def annotate(
        self,
        paths: Iterable[bytes | str],
        *,
        decision: str | None = _UNSET,
        note: str | None = _UNSET,
        by: str = "human",
        rule: str | None = None,
        made_on: Mapping[bytes, tuple[str, str]] | None = None,
    ) -> list[Annotation]:
        """Set the decision and/or note of each path (a batch: deduplicated, all or nothing).

        Args:
            paths: absolute paths (bytes keep non-UTF-8 names exactly).
            decision: ``keep``, ``delete``, ``unsure``, or ``None``/``"none"`` to clear it;
                omitted: leave the decision as it is.
            note: the note text (``""`` or ``None`` clears it); omitted: leave it as it is.
            by: ``human``, ``rule`` or ``agent``.
            rule: the remembered rule that made it (for ``by="rule"``).
            made_on: path → (snapshot id, the entry's digest there): what each decision was
                made on. A decision set without it records none, and cannot be planned until
                it is set again with one. A note alone leaves what was recorded as it was.

        Returns:
            The annotations after the change (a path whose decision and note are both empty
            has no annotation any more and is left out).

        Raises:
            UsageError: a path is relative, the decision or author is unknown, or nothing is
                being changed.
            PathNotNormal: a path has a ``.``, ``..`` or empty component.
        """
        if decision == "none":
            decision = None
        if decision is not _UNSET and decision is not None and decision not in DECISIONS:
            raise UsageError(f"decision {decision!r} is not keep, delete, unsure or none.")
        if by not in ("human", "rule", "agent"):
            raise UsageError(f"author {by!r} is not human, rule or agent.")
        if decision is _UNSET and note is _UNSET:
            raise UsageError("say what to write: a decision, a note, or both.")
        raws = list(dict.fromkeys(p if isinstance(p, bytes) else os.fsencode(p) for p in paths))
        relative = [display_path(r) for r in raws if not r.startswith(b"/")]
        if relative:
            raise UsageError(
                f"paths must be absolute, not {', '.join(relative[:3])}; nothing was written."
            )
        unnormal = [display_path(r) for r in raws if os.path.normpath(r) != r]
        if unnormal:
            raise PathNotNormal(
                f"paths must be normalized (no '.', '..' or '//'), not {', '.join(unnormal[:3])};"
                " nothing was written."
            )
        at = _now()
        out = []
        with self._write() as db:
            for raw in raws:
                seen = (made_on or {}).get(raw)
                result = self._annotate_one(db, raw, decision, note, by, rule, at, seen)
                if result is not None:
                    out.append(result)
        return out

    def _annotate_one(
        self,
        db: sqlite3.Connection,
        raw: bytes,
        decision: str | None,
        note: str | None,
        by: str,
        rule: str | None,
        at: str,
        made_on: tuple[str, str] | None = None,
    ) -> Annotation | None:
        row = db.execute(
            "SELECT decision, note, snapshot_id, digest FROM annotations WHERE path_raw = ?",
            (raw,),
        ).fetchone()
        old_decision, old_note, old_snapshot, old_digest = row if row else (None, None, None, None)
        snapshot_id, digest = (
            (old_snapshot, old_digest) if decision is _UNSET else (made_on or (None, None))
        )
        new_decision = old_decision if decision is _UNSET else decision
        new_note = old_note if note is _UNSET else (note or None)
        path = display_path(raw)
        if new_decision is None and new_note is None:
            if row is None:
                return None  # nothing was there and nothing is set: no history to write
            db.execute("DELETE FROM annotations WHERE path_raw = ?", (raw,))
            db.execute(
                "INSERT INTO annotation_history (path_raw, path, decision, note, by, rule, at,"
                " action) VALUES (?, ?, NULL, NULL, ?, ?, ?, 'removed')",
                (raw, path, by, rule, at),
            )
            return None
        db.execute(
            "INSERT INTO annotations (path_raw, path, decision, note, by, rule, at, snapshot_id,"
            " digest) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (path_raw) DO UPDATE SET"
            " decision = excluded.decision, note = excluded.note, by = excluded.by,"
            " rule = excluded.rule, at = excluded.at, snapshot_id = excluded.snapshot_id,"
            " digest = excluded.digest",
            (raw, path, new_decision, new_note, by, rule, at, snapshot_id, digest),
        )
        db.execute(
            "INSERT INTO annotation_history (path_raw, path, decision, note, by, rule, at, action,"
            " snapshot_id, digest) VALUES (?, ?, ?, ?, ?, ?, ?, 'set', ?, ?)",
            (raw, path, new_decision, new_note, by, rule, at, snapshot_id, digest),
        )
        return Annotation(path, raw, new_decision, new_note, by, rule, at, snapshot_id, digest)

    def annotations(self, *, under: str | None = None) -> list[Annotation]:
        """Every annotation (only those at or under the absolute path ``under``, if given)."""
        query = f"SELECT {_ANNOTATION_COLUMNS} FROM annotations"
        args: tuple[Any, ...] = ()
        if under is not None:
            prefix = under.rstrip("/") + "/"  # compared exactly: LIKE would ignore ASCII case
            query += " WHERE path = ? OR substr(path, 1, ?) = ?"
            args = (under, len(prefix), prefix)
        rows = self._read(query + " ORDER BY path", args)
        return [Annotation(r[0], bytes(r[1]), *r[2:]) for r in rows]

    def annotations_at(self, paths: Iterable[bytes | str]) -> list[Annotation]:
        """The annotations of exactly these paths (those that have one), in path order."""
        raws = list(dict.fromkeys(p if isinstance(p, bytes) else os.fsencode(p) for p in paths))
        found: list[Annotation] = []
        for start in range(0, len(raws), 500):  # SQLite's bound-parameter limit
            chunk = raws[start : start + 500]
            rows = self._read(
                f"SELECT {_ANNOTATION_COLUMNS} FROM annotations"
                f" WHERE path_raw IN ({', '.join('?' * len(chunk))})",
                tuple(chunk),
            )
            found += [Annotation(r[0], bytes(r[1]), *r[2:]) for r in rows]
        return sorted(found, key=lambda a: a.path_raw)

    def history(self, path: bytes | str | None = None) -> list[dict[str, Any]]:
        """The annotation history, oldest first (of one path, if given)."""
        query = "SELECT path, decision, note, by, rule, at, action FROM annotation_history"
        args: tuple[Any, ...] = ()
        if path is not None:
            raw = path if isinstance(path, bytes) else os.fsencode(path)
            query += " WHERE path_raw = ?"
            args = (raw,)
        keys = ("path", "decision", "note", "by", "rule", "at", "action")
        rows = self._read(query + " ORDER BY id", args)
        return [dict(zip(keys, r, strict=True)) for r in rows]

    # -- claims ------------------------------------------------------------------------------

    def put_claim(
        self, path: bytes | str, *, risk: str, claim: str, confidence: float, by: str = "agent"
    ) -> Claim:
        """Record an agent's or rule's judgement of a path (never a decision).

        Raises:
            UsageError: the author, risk or confidence is invalid, or the path is relative.
        """
        raw = path if isinstance(path, bytes) else os.fsencode(path)
        if not raw.startswith(b"/"):
            raise UsageError(f"paths must be absolute, not {display_path(raw)}.")
        if by not in ("agent", "rule"):
            raise UsageError("claims are made by an agent or a rule; people write decisions.")
        if risk not in ("safe", "caution", "personal", "high", "unknown"):
            raise UsageError(f"risk {risk!r} is not a risk level.")
        if not 0 <= confidence <= 1:
            raise UsageError("confidence must be between 0 and 1.")
        at = _now()
        with self._write() as db:
            db.execute(
                "INSERT INTO claims (path_raw, path, risk, claim, confidence, by, at)"
                " VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT (path_raw, by) DO UPDATE SET"
                " risk = excluded.risk, claim = excluded.claim,"
                " confidence = excluded.confidence, at = excluded.at",
                (raw, display_path(raw), risk, claim, confidence, by, at),
            )
        return Claim(display_path(raw), risk, claim, confidence, by, at)

    def claims(self) -> list[Claim]:
        """Every claim, by path."""
        rows = self._read("SELECT path, risk, claim, confidence, by, at FROM claims ORDER BY path")
        return [Claim(*r) for r in rows]

    # -- remembered rules --------------------------------------------------------------------

    def remember_rule(self, group: str, decision: str) -> None:
        """Remember ``decision`` for every unannotated entry of pattern group ``group``."""
        if decision not in DECISIONS:
            raise UsageError(f"decision {decision!r} is not keep, delete or unsure.")
        with self._write() as db:
            db.execute(
                "INSERT INTO remembered_rules (group_id, decision, at) VALUES (?, ?, ?)"
                " ON CONFLICT (group_id) DO UPDATE SET decision = excluded.decision,"
                " at = excluded.at",
                (group, decision, _now()),
            )

    def forget_rule(self, group: str) -> int:
        """Drop a remembered rule and the annotations it made that nobody changed since.

        Returns:
            How many rule-made annotations were taken back.
        """
        at = _now()
        with self._write() as db:
            gone = db.execute(
                "SELECT path_raw, path FROM annotations WHERE by = 'rule' AND rule = ?", (group,)
            ).fetchall()
            db.execute("DELETE FROM annotations WHERE by = 'rule' AND rule = ?", (group,))
            db.executemany(
                "INSERT INTO annotation_history (path_raw, path, decision, note, by, rule, at,"
                " action) VALUES (?, ?, NULL, NULL, 'rule', ?, ?, 'removed')",
                [(raw, path, group, at) for raw, path in gone],
            )
            db.execute("DELETE FROM remembered_rules WHERE group_id = ?", (group,))
        return len(gone)

    def remembered_rules(self) -> dict[str, str]:
        """Pattern group → remembered decision."""
        return dict(self._read("SELECT group_id, decision FROM remembered_rules ORDER BY 1"))

    def fill_from_rule(
        self,
        group: str,
        decision: str,
        paths: Sequence[bytes],
        made_on: Mapping[bytes, tuple[str, str]] | None = None,
    ) -> int:
        """Give ``decision`` to each of ``paths`` that has no annotation at all (``by: rule``).

        ``made_on`` is what each path was in the snapshot the rule filled from (see
        ``annotate``).

        Returns:
            How many annotations were written.
        """
        at = _now()
        written = 0
        with self._write() as db:
            for raw in dict.fromkeys(paths):
                exists = db.execute(
                    "SELECT 1 FROM annotations WHERE path_raw = ?", (raw,)
                ).fetchone()
                if exists is None:
                    seen = (made_on or {}).get(raw)
                    self._annotate_one(db, raw, decision, None, "rule", group, at, seen)
                    written += 1
        return written

    # -- plans -------------------------------------------------------------------------------

    def record_plan(self, plan: IssuedPlan) -> None:
        """Register a plan this store issued, with its digest."""
        with self._write() as db:
            db.execute(
                "INSERT INTO plans (plan_id, plan_digest, root, scan_id, path, created_at,"
                " expires_at, candidates, reclaim_bytes, state)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    plan.plan_id,
                    plan.plan_digest,
                    plan.root,
                    plan.scan_id,
                    plan.path,
                    plan.created_at,
                    plan.expires_at,
                    plan.candidates,
                    plan.reclaim_bytes,
                    plan.state,
                ),
            )

    def issued_plan(self, plan_id: str) -> IssuedPlan | None:
        """The plan with this id, if this store issued it."""
        rows = self._read(
            "SELECT plan_id, plan_digest, root, scan_id, path, created_at, expires_at,"
            " candidates, reclaim_bytes, state FROM plans WHERE plan_id = ?",
            (plan_id,),
        )
        return IssuedPlan(*rows[0]) if rows else None

    def plans(self, *, root: str | None = None) -> list[IssuedPlan]:
        """Every plan this store issued (of ``root`` only, if given), oldest first."""
        query = (
            "SELECT plan_id, plan_digest, root, scan_id, path, created_at, expires_at,"
            " candidates, reclaim_bytes, state FROM plans"
        )
        args: tuple[Any, ...] = ()
        if root is not None:
            query += " WHERE root = ?"
            args = (root,)
        return [IssuedPlan(*r) for r in self._read(query + " ORDER BY created_at, plan_id", args)]

    def decline_suggestion(self, root: str, digest: str) -> None:
        """Record that a person declined the suggestion ``digest`` for ``root``."""
        with self._write() as db:
            db.execute(
                "INSERT OR IGNORE INTO declined_suggestions (root, digest, declined_at)"
                " VALUES (?, ?, ?)",
                (root, digest, _now()),
            )

    def declined_at(self, root: str, digest: str) -> str | None:
        """When the suggestion ``digest`` for ``root`` was declined, if it was."""
        rows = self._read(
            "SELECT declined_at FROM declined_suggestions WHERE root = ? AND digest = ?",
            (root, digest),
        )
        return str(rows[0][0]) if rows else None

    def claim_plan(self, plan_id: str, plan_digest: str) -> bool:
        """Mark an issued plan ``executing``; False if it is not (any more) ``issued``.

        One transaction: of two executions of one plan, exactly one claims it.
        """
        with self._write() as db:
            cursor = db.execute(
                "UPDATE plans SET state = 'executing' WHERE plan_id = ? AND plan_digest = ?"
                " AND state = 'issued'",
                (plan_id, plan_digest),
            )
            return cursor.rowcount == 1

    def finish_plan(self, plan_id: str, state: str) -> None:
        """Record how a claimed plan ended (``executed``); a plan is never issued again."""
        with self._write() as db:
            db.execute("UPDATE plans SET state = ? WHERE plan_id = ?", (state, plan_id))

    def release_plan(self, plan_id: str) -> None:
        """Give a claimed plan back (``issued``): its run moved nothing and left nothing behind."""
        with self._write() as db:
            db.execute(
                "UPDATE plans SET state = 'issued' WHERE plan_id = ? AND state = 'executing'",
                (plan_id,),
            )

    def record_execution(self, row: dict[str, Any]) -> None:
        """Append one execution to the execution log."""
        keys = _EXECUTION_KEYS
        with self._write() as db:
            db.execute(
                f"INSERT INTO executions ({', '.join(keys)}) VALUES ({', '.join('?' * len(keys))})",
                tuple(row[k] for k in keys),
            )

    def executions(self) -> list[dict[str, Any]]:
        """The execution log, oldest first."""
        keys = _EXECUTION_KEYS
        rows = self._read(f"SELECT {', '.join(keys)} FROM executions ORDER BY id")
        return [dict(zip(keys, r, strict=True)) for r in rows]
