"""The ledger's schema: numbered migrations, the version they reach, the tables they make.

``PRAGMA user_version`` is the schema version of a file. Opening a ledger
(``hygiene_nb.ledger.connection``) runs the migrations numbered above it, in order; a file
newer than ``SCHEMA_VERSION`` is refused, never altered.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "TABLES"]

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
TABLES = frozenset(
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
