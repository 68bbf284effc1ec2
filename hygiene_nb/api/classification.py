"""Classification of a snapshot: the protection context, risk and rules, and the summary.

``classify_snapshot`` and ``summarize`` use the classification kept beside the snapshot
(computed the first time, ``classify.stored``); ``classify_scan`` always classifies afresh (the
plans use it, never the kept verdicts).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from hygiene_nb.api.snapshots import StoreArg, existing_store, scan_time_ns
from hygiene_nb.classify.classification import (
    CLASSIFY_COLUMNS,
    VERDICT_COLUMNS,
    classify_inputs,
    classify_table,
    classify_verdicts,
    with_verdicts,
)
from hygiene_nb.classify.protect import (
    ProtectContext,
    account_homes,
    find_git_tracked,
    protection_above,
)
from hygiene_nb.classify.queries import open_entries as open_rows
from hygiene_nb.classify.queries import summarize_entries
from hygiene_nb.classify.rules import UserRule, load_user_rules
from hygiene_nb.classify.stored import (
    classification_key,
    keep_classification,
    kept_classification,
    kept_git_parents,
    read_verdicts,
)
from hygiene_nb.config import load_root_config
from hygiene_nb.models import Summary
from hygiene_nb.scan.arrays import string_scalar
from hygiene_nb.scan.index import ScanInfo, classified_dir, find_scan, list_scans
from hygiene_nb.scan.snapshot import (
    ROW_GROUP_ROWS,
    load_snapshot,
    named_rows,
    query_engine,
    read_row_groups,
    snapshot_file,
    snapshot_rows,
)
from hygiene_nb.store import Store

__all__ = [
    "StoredClassification",
    "classify_scan",
    "classify_snapshot",
    "keep_classifications",
    "open_entries",
    "protect_context",
    "stored_classification",
    "summarize",
]


def protect_context(table: pa.Table, info: ScanInfo, store: Store) -> ProtectContext:
    """Gather what protection needs from outside the snapshot: home, store, git-tracked files.

    Runs ``git ls-files`` (read-only) in every git work tree the snapshot holds.
    """
    return _protect_context(_git_parents(table), info, store)


def _git_parents(table: pa.Table) -> list[str]:
    """The parents of the rows named ``.git`` (``parent`` and ``name`` of ``table``), sorted."""
    git_names = table.filter(pc.equal(table.column("name"), string_scalar(".git")))
    return sorted(p for p in git_names.column("parent").to_pylist() if p is not None)


def _protect_context(git_parents: list[str], info: ScanInfo, store: Store) -> ProtectContext:
    """``protect_context`` of a snapshot whose ``.git`` entries are in ``git_parents``."""
    worktrees = list(git_parents)
    enclosing = _enclosing_worktree(info.root)
    if enclosing is not None:
        worktrees.append(enclosing)
    home, git = os.path.expanduser("~"), find_git_tracked(worktrees)
    named = [home, *load_root_config(store, info.root).homes]
    homes = account_homes(info.root) | {os.path.realpath(h) for h in named}
    ctx = ProtectContext(info.root, home, str(store.root), git, other_homes=homes)
    above = protection_above(info.root, ctx)
    tags = tuple(sorted({(t["dir"], t.get("tool", "")) for t in info.cache_tags}))
    return ProtectContext(
        info.root,
        home,
        str(store.root),
        git,
        above_root=above,
        other_homes=homes,
        cache_tags=tags,
    )


def _enclosing_worktree(root: str) -> str | None:
    """The git work tree that holds ``root`` from above (a ``.git`` in an ancestor), if any."""
    path = Path(root)
    for ancestor in [path, *path.parents]:
        if os.path.lexists(ancestor / ".git"):
            return str(ancestor)
    return None


def _user_rules(store: Store, rules: str | os.PathLike[str] | None) -> tuple[UserRule, ...]:
    found = load_user_rules(store.rules, missing_ok=True)
    if rules is not None:
        found += load_user_rules(Path(rules))
    return found


def classify_snapshot(
    root: str | None = None,
    *,
    store: StoreArg = None,
    scan_id: str | None = None,
    rules: str | os.PathLike[str] | None = None,
    now_ns: int | None = None,
    encoded: bool = False,
) -> pa.Table:
    """Classify the latest snapshot of ``root`` (or ``scan_id``): risk, rule, claim, confidence.

    Computed from the snapshot (no rescan), with the store's ``rules.toml`` and ``rules``.
    Ages are measured at ``now_ns`` (default: now); a report passes the scan's own time so that
    rerunning it later gives the same verdicts. ``encoded``: the verdicts' text columns
    (``risk``, ``rule``, ``group``, ``claim``, ``content_risk``) dictionary-encoded, as they
    are kept: a few distinct values each (1M entries: about 105 MB less, and 0.4 s of decoding
    saved), the same values.

    The verdicts are computed once and kept beside the snapshot (``classify.stored``), reused
    while the rules and the protection facts are the same. Plans never come from here:
    ``make_plan`` classifies afresh and re-checks the disk.

    Raises:
        SnapshotNotFound: no snapshot matches.
        RuleInvalid: a rules file is malformed.
    """
    st = existing_store(store)
    info = find_scan(st, root=os.path.abspath(root) if root else None, scan_id=scan_id)
    when = time.time_ns() if now_ns is None else now_ns
    stored = stored_classification(st, info, rules, now_ns=when, load=not encoded)
    return stored.encoded_table() if encoded else stored.table


@dataclass(frozen=True)
class StoredClassification:
    """A snapshot's classification as kept: where, and the verdicts when computed now."""

    store: Store
    info: ScanInfo
    key: str
    path: Path | None  # the kept verdicts (None: the store could not be written)
    computed: pa.Table | None = None  # the verdicts (VERDICT_SCHEMA), when computed now
    loaded: pa.Table | None = None  # the classified rows, when asked for

    @property
    def snapshot_file(self) -> Path:
        """The snapshot's Parquet file, which the verdicts are kept row for row beside."""
        return snapshot_file(self.info)

    @property
    def verdicts(self) -> Path | pa.Table:
        """Where a query reads the verdicts: the kept file, or the table computed now."""
        if self.path is not None:
            return self.path
        assert self.computed is not None
        return self.computed

    def columns(self, names: Sequence[str]) -> pa.Table:
        """The classified rows with only the columns ``names`` (the snapshot's, the verdicts').

        The verdicts' text columns dictionary-encoded as they are kept (as ``encoded_table``:
        1M claims decoded are about 75 MB and half a second); what is not asked for is never
        read.
        """
        mine = [n for n in names if n in VERDICT_COLUMNS]
        rows = load_snapshot(
            self.store, scan_id=self.info.scan_id, columns=[n for n in names if n not in mine]
        )
        if self.computed is not None:
            verdicts = self.computed.select(mine)
        else:
            assert self.path is not None
            with pq.ParquetFile(self.path) as parquet:
                verdicts = read_row_groups(parquet, mine)
        return with_verdicts(rows, verdicts, mine, decode=False).select(list(names))

    @property
    def table(self) -> pa.Table:
        """The classified rows: the snapshot's ``CLASSIFY_COLUMNS`` and the verdicts."""
        if self.loaded is not None:
            return self.loaded
        return self._read(decode=True)

    def encoded_table(self) -> pa.Table:
        """``table``, the verdicts' text columns dictionary-encoded as they are kept."""
        return self._read(decode=False)

    def _read(self, *, decode: bool) -> pa.Table:
        rows = load_snapshot(self.store, scan_id=self.info.scan_id, columns=CLASSIFY_COLUMNS)
        verdicts = self.computed if self.computed is not None else read_verdicts(self.verdicts)
        return with_verdicts(rows, verdicts, decode=decode)


def stored_classification(
    st: Store,
    info: ScanInfo,
    rules: str | os.PathLike[str] | None,
    *,
    now_ns: int,
    load: bool = True,
) -> StoredClassification:
    """The classification of one scan, kept beside it: read back, or computed and kept now.

    The protection facts are read now (git's tracked files, homes, what is above the root):
    with the rules they make the key the kept verdicts are found under. With ``load=False``
    the classified rows are not built (a query reads the snapshot and the verdicts).
    """
    user_rules = _user_rules(st, rules)
    columns = CLASSIFY_COLUMNS if load else list(classify_inputs(user_rules))
    table = None
    if any(classified_dir(st, info).glob("*.parquet")):
        # where the .git entries are: as a kept file's footer records them, or the snapshot says
        parents = kept_git_parents(st, info)
        if parents is None:
            parents = _git_parents(named_rows(info, [".git"]))
    else:  # nothing kept to reuse: the rows are read now, and they say where .git entries are
        table = load_snapshot(st, scan_id=info.scan_id, columns=columns)
        parents = _git_parents(table)
    ctx = _protect_context(parents, info, st)
    key = classification_key(ctx, user_rules, now_ns)
    path = kept_classification(st, info, key, snapshot_rows(info)) if table is None else None
    if path is not None:
        found = StoredClassification(st, info, key, path)
        return found if not load else StoredClassification(st, info, key, path, None, found.table)
    if table is None:
        table = load_snapshot(st, scan_id=info.scan_id, columns=columns)
        listed = _git_parents(table)
        if listed != parents:  # a footer that says otherwise: the snapshot itself decides
            parents, ctx = listed, _protect_context(listed, info, st)
            key = classification_key(ctx, user_rules, now_ns)
    verdicts = classify_verdicts(table, ctx, user_rules=user_rules, now_ns=now_ns)
    loaded = with_verdicts(table, verdicts) if load else None
    del table  # the snapshot's rows are not held while the verdicts are written
    path = keep_classification(
        st, info, key, verdicts, group_rows=ROW_GROUP_ROWS, git_parents=parents
    )
    if path is not None and not load:
        # the queries read the kept file: the verdicts in memory would only add to their peak
        return StoredClassification(st, info, key, path)
    return StoredClassification(st, info, key, path, verdicts, loaded)


def keep_classifications(
    *,
    store: StoreArg = None,
    until: str,
    rules: str | os.PathLike[str] | None = None,
) -> bool:
    """Classify and keep every scan of ``until``'s root up to it that has none kept yet.

    ``until`` first, then the older scans, newest first; each as of its own time, as a
    report's views read them (``summarize`` with ``as_of_scan``, ``risk_history``), so they
    find these kept and classify nothing. Stops at the first classification the store could
    not keep (full, read-only): the views would compute the same again. Returns whether
    every one is kept.

    Raises:
        SnapshotNotFound: no scan ``until``.
    """
    st = existing_store(store)
    last = find_scan(st, scan_id=until)
    older = [
        info
        for info in list_scans(st, root=last.root)
        if (info.started_at, info.scan_id) < (last.started_at, last.scan_id)
    ]
    for info in [last, *reversed(older)]:
        stored = stored_classification(st, info, rules, now_ns=scan_time_ns(info), load=False)
        if stored.path is None:
            return False
    return True


def open_entries(
    con: duckdb.DuckDBPyConnection,
    info: ScanInfo,
    *,
    store: StoreArg = None,
    classified: bool = True,
    rules: str | os.PathLike[str] | None = None,
    now_ns: int | None = None,
    name: str = "entries",
) -> None:
    """Define the view ``name`` on a DuckDB connection: scan ``info``'s rows as its file has them.

    With ``classified`` the verdicts (kept beside the snapshot, computed first if they are not)
    are joined row for row, with ages measured at ``now_ns`` (default: now). Queries over the
    view read only the columns they name.
    """
    st = existing_store(store)
    if not classified:
        open_rows(con, snapshot_file(info), None, name=name)
        return
    when = time.time_ns() if now_ns is None else now_ns
    stored = stored_classification(st, info, rules, now_ns=when, load=False)
    open_rows(con, stored.snapshot_file, stored.verdicts, name=name)


def classify_scan(
    st: Store,
    info: ScanInfo,
    rules: str | os.PathLike[str] | None,
    *,
    now_ns: int | None = None,
) -> tuple[pa.Table, ProtectContext]:
    """Classify one scan afresh (nothing kept is used), with the protection context it was in.

    Ages are measured at ``now_ns`` (default: now); the store's rules file and ``rules`` apply.
    """
    user_rules = _user_rules(st, rules)
    table = load_snapshot(st, scan_id=info.scan_id, columns=CLASSIFY_COLUMNS)
    ctx = protect_context(table, info, st)
    when = time.time_ns() if now_ns is None else now_ns
    return classify_table(table, ctx, user_rules=user_rules, now_ns=when), ctx


def summarize(
    root: str | None = None,
    *,
    store: StoreArg = None,
    scan_id: str | None = None,
    top: int = 20,
    rules: str | os.PathLike[str] | None = None,
    as_of_scan: bool = False,
) -> Summary:
    """Summarize the latest snapshot of ``root`` (or ``scan_id``).

    Totals, risk mix, pattern groups, staleness, cleanliness score and the largest entries.
    Ages are measured now, or with ``as_of_scan`` at the time the scan finished (so a report
    rerun later says the same).

    Raises:
        SnapshotNotFound: no snapshot matches.
        RuleInvalid: a rules file is malformed.
    """
    st = existing_store(store)
    info = find_scan(st, root=os.path.abspath(root) if root else None, scan_id=scan_id)
    now_ns = scan_time_ns(info) if as_of_scan else time.time_ns()
    for attempt in (1, 2):
        stored = stored_classification(st, info, rules, now_ns=now_ns, load=False)
        try:
            with query_engine() as con:
                open_rows(con, stored.snapshot_file, stored.verdicts)
                return summarize_entries(con, info, top=top, now_ns=now_ns)
        except duckdb.IOException:
            if attempt == 2:
                raise  # the kept file went away twice while being read: a broken store
    raise AssertionError("unreachable")
