"""Classification of a snapshot: the protection context, risk and rules, and the summary.

``classify_snapshot`` reuses its last table for a report's repeated calls at one time;
``classify_scan`` always classifies afresh (the plans use it, never the cached table).
"""

from __future__ import annotations

import functools
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb.api.snapshots import StoreArg, existing_store, scan_time_ns
from hygiene_nb.classify.classification import CLASSIFY_COLUMNS, classify_table
from hygiene_nb.classify.protect import (
    ProtectContext,
    account_homes,
    find_git_tracked,
    protection_above,
)
from hygiene_nb.classify.rules import UserRule, load_user_rules
from hygiene_nb.classify.summary import summarize_table
from hygiene_nb.config import load_root_config
from hygiene_nb.models import Summary
from hygiene_nb.scan.index import ScanInfo, find_scan
from hygiene_nb.scan.snapshot import load_snapshot
from hygiene_nb.store import Store

__all__ = ["classify_scan", "classify_snapshot", "protect_context", "summarize"]


def protect_context(table: pa.Table, info: ScanInfo, store: Store) -> ProtectContext:
    """Gather what protection needs from outside the snapshot: home, store, git-tracked files.

    Runs ``git ls-files`` (read-only) in every git work tree the snapshot holds.
    """
    git_names = table.filter(pc.equal(table.column("name"), ".git"))
    worktrees = [p for p in git_names.column("parent").to_pylist() if p is not None]
    enclosing = _enclosing_worktree(info.root)
    if enclosing is not None:
        worktrees.append(enclosing)
    home, git = os.path.expanduser("~"), find_git_tracked(worktrees)
    named = [home, *load_root_config(store, info.root).homes]
    homes = account_homes(info.root) | {os.path.realpath(h) for h in named}
    ctx = ProtectContext(info.root, home, str(store.root), git, other_homes=homes)
    above = protection_above(info.root, ctx)
    return ProtectContext(
        info.root, home, str(store.root), git, above_root=above, other_homes=homes
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
) -> pa.Table:
    """Classify the latest snapshot of ``root`` (or ``scan_id``): risk, rule, claim, confidence.

    Computed from the snapshot (no rescan), with the store's ``rules.toml`` and ``rules``.
    Ages are measured at ``now_ns`` (default: now); a report passes the scan's own time so that
    rerunning it later gives the same verdicts.

    With an explicit ``now_ns`` the last result is reused while the snapshot, that time, the
    rules files and the store's ``config.toml`` are the same (a report classifies one snapshot
    for several sections). Plans never come from here: ``make_plan`` classifies afresh and
    re-checks the disk.

    Raises:
        SnapshotNotFound: no snapshot matches.
        RuleInvalid: a rules file is malformed.
    """
    st = existing_store(store)
    info = find_scan(st, root=os.path.abspath(root) if root else None, scan_id=scan_id)
    if now_ns is None:
        return classify_scan(st, info, rules)[0]
    states = (
        _file_state(st.rules),
        _file_state(st.root / "config.toml"),  # its homes protect
        _file_state(Path(rules)) if rules else None,
    )
    return _classified_at(str(st.root), info.scan_id, now_ns, str(rules) if rules else None, states)


@functools.lru_cache(maxsize=1)  # one table at a time: a 1M-row table is large
def _classified_at(
    store: str, scan_id: str, now_ns: int, rules: str | None, _states: tuple[object, ...]
) -> pa.Table:
    """The classified table of one snapshot at one time, with the rules files as they are."""
    st = Store(Path(store))
    return classify_scan(st, find_scan(st, scan_id=scan_id), rules, now_ns=now_ns)[0]


def _file_state(path: Path) -> tuple[str, int, int, int] | None:
    """What changes when a rules file is edited (None: there is none)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (str(path), st.st_ino, st.st_size, st.st_mtime_ns)


def classify_scan(
    st: Store,
    info: ScanInfo,
    rules: str | os.PathLike[str] | None,
    *,
    now_ns: int | None = None,
) -> tuple[pa.Table, ProtectContext]:
    """Classify one scan afresh (no cache), with the protection context it was classified in.

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
    table = classify_snapshot(
        store=st, scan_id=info.scan_id, rules=rules, now_ns=now_ns if as_of_scan else None
    )
    return summarize_table(table, info, top=top, now_ns=now_ns)
