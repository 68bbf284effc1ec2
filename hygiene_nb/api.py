"""The safe use cases, each one call: scan a root, list and prune snapshots, summarize.

The CLI, the widgets and the notebooks call these; they compose the stages and hold no logic of
their own.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shlex
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from hygiene_nb import __version__
from hygiene_nb.classify.classification import CLASSIFY_COLUMNS, classify_table
from hygiene_nb.classify.protect import (
    ProtectContext,
    account_homes,
    find_git_tracked,
    protection_above,
)
from hygiene_nb.classify.rules import GROUPS, UserRule, load_user_rules
from hygiene_nb.classify.summary import summarize_table
from hygiene_nb.config import RootConfig, load_root_config
from hygiene_nb.errors import RootChanged, SnapshotOutdated, UsageError
from hygiene_nb.ledger import Annotation, IssuedPlan, Ledger
from hygiene_nb.models import Summary
from hygiene_nb.pathnames import require_no_dot_components
from hygiene_nb.plan.document import (
    DEFAULT_TTL,
    Exclusion,
    Selection,
    assemble_plan,
    plan_markdown,
    select_candidates,
    selection_summary,
)
from hygiene_nb.plan.references import ReferenceBudget, blocking, check_references
from hygiene_nb.recheck import Rechecker, Reviewed, acting_protection
from hygiene_nb.scan.digests import entry_digests
from hygiene_nb.scan.request import ScanRequest, validate_root, walk_options
from hygiene_nb.scan.snapshot import (
    FORMAT_VERSION,
    ScanInfo,
    SnapshotWriter,
    find_scan,
    int_scalar,
    list_scans,
    load_snapshot,
    path_b64,
    prune_scans,
    raw_path,
)
from hygiene_nb.scan.walk import WalkerName, open_walker
from hygiene_nb.store import Store, resolve_store, utc_now, write_private_file

__all__ = [
    "AnnotateResult",
    "PlanResult",
    "annotate_paths",
    "classify_snapshot",
    "list_snapshots",
    "load",
    "make_plan",
    "preview_plan",
    "protect_context",
    "prune_snapshots",
    "scan_root",
    "stale_decisions",
    "summarize",
]

StoreArg = Store | str | os.PathLike[str] | None
Progress = Callable[[int], None]

# Bounds on every number a caller gives (the CLI's options use the same): beyond them a value
# overflows a C integer or a datetime, or makes a deadline that is already past.
MAX_ENTRIES = 10**12
MAX_SECONDS = 10**7  # about 115 days
MAX_TTL = 366 * 86_400  # a plan is valid for a year at most


def _check_bounded(value: float, name: str, low: float, high: float) -> None:
    """Refuse a number outside [low, high], NaN and infinities included.

    Raises:
        UsageError: names the option and its range.
    """
    if not (isinstance(value, int | float) and low <= value <= high):  # NaN fails both tests
        raise UsageError(f"{name} must be a number from {low} to {high}, not {value!r}.")


def _store(store: StoreArg) -> Store:
    return store if isinstance(store, Store) else resolve_store(store)


def _utcnow() -> str:
    return utc_now().isoformat(timespec="milliseconds")


def _new_scan_id() -> str:
    return f"s{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{secrets.token_hex(3)}"


def scan_root(
    root: str | os.PathLike[str],
    *,
    store: StoreArg = None,
    excludes: tuple[str, ...] | list[str] = (),
    one_file_system: bool = False,
    max_entries: int = 0,
    max_seconds: float = 0.0,
    threads: int = 0,
    walker: WalkerName = "auto",
    progress: Progress | bool = False,
) -> ScanInfo:
    """Scan ``root`` (never following symlinks) into a new snapshot in the store.

    Args:
        root: the directory to scan.
        store: the store (path or ``Store``); default ``$HYGIENE_NB_STORE``, else
            ``${XDG_DATA_HOME:-~/.local/share}/hygiene-nb`` (docs/format.md).
        excludes: gitignore-style patterns to skip (recorded as excluded), added to the
            root's ``.hygieneignore``.
        one_file_system: do not descend into other filesystems (mount points are recorded).
        max_entries: stop after this many entries (0: no limit); shared fairly by the root's
            direct children. What is cut is marked partial.
        max_seconds: stop listing new directories after this long (0: no limit).
        threads: walker threads (0: the walker's default).
        walker: ``auto`` (the C core if built), ``c`` or ``python``.
        progress: ``True`` for a tqdm progress bar (a widget in a notebook, a line on a
            terminal), or a callable given the number of entries seen so far after each batch.

    Returns:
        The scan's metadata, including where its snapshot was written.

    Raises:
        RootInvalid: the root is not a directory.
        UsageError: ``max_entries`` or ``max_seconds`` is out of range (see ``MAX_ENTRIES``,
            ``MAX_SECONDS``).
        ExcludeInvalid: an exclude pattern cannot be used.
        StoreError: the store cannot be written.
    """
    path = validate_root(root)
    _check_bounded(max_entries, "--max-entries", 0, MAX_ENTRIES)
    _check_bounded(max_seconds, "--max-seconds", 0, MAX_SECONDS)
    store = _store(store).ensure()
    request = ScanRequest(
        root=path,
        excludes=tuple(excludes),
        one_file_system=one_file_system,
        max_entries=max_entries,
        max_seconds=max_seconds,
        threads=threads,
        walker=walker,
        skip_dirs=(store.root, store.quarantine),
    )
    options = walk_options(request, path)
    st = os.lstat(path)
    fs = os.statvfs(path)
    info = ScanInfo(
        scan_id=_new_scan_id(),
        root=path,
        host=socket.gethostname(),
        started_at=_utcnow(),
        fs_free=fs.f_bavail * fs.f_frsize,
        fs_total=fs.f_blocks * fs.f_frsize,
        root_dev=st.st_dev,
        root_inode=st.st_ino,
        tool_version=__version__,
        format_version=FORMAT_VERSION,
        options={
            "excludes": list(excludes),
            "ignore_rules": len(options.excludes),
            "one_file_system": one_file_system,
            "max_entries": max_entries,
            "max_seconds": max_seconds,
        },
    )
    started = time.monotonic()
    report, close_bar = _progress(progress)
    writer = SnapshotWriter(store, info)
    try:
        walk = open_walker(options, walker=walker)
        info.walker = walk.name
        for batch in walk.batches():
            writer.write(batch)
            _take_root_totals(batch, info)
            if report is not None:
                report(walk.stats.entries)
        info.entries = walk.stats.entries
        info.errors = walk.stats.errors
    except BaseException:
        # A failed or interrupted scan leaves no half snapshot and no index line behind.
        writer.abort()
        raise
    finally:
        close_bar()
    info.finished_at = _utcnow()
    info.options["seconds"] = round(time.monotonic() - started, 3)
    info = writer.close()
    apply_remembered_rules(store=store, scan_id=info.scan_id)
    return info


def _progress(progress: Progress | bool) -> tuple[Progress | None, Callable[[], None]]:
    """Turn ``progress=True`` into a tqdm bar (tqdm.auto picks notebook or terminal)."""
    if progress is True:
        from tqdm.auto import tqdm

        bar = tqdm(unit=" entries", unit_scale=True, desc="scanning", leave=False)

        def update(entries: int) -> None:
            bar.update(entries - bar.n)

        return update, bar.close
    return (progress or None), lambda: None


_ROOT_DEPTH = int_scalar(0, pa.int32())  # not a Python 0: see snapshot.int_scalar


def _take_root_totals(rows: pa.RecordBatch, info: ScanInfo) -> None:
    """Copy the root row's totals into ``info`` when this walk batch holds it (it comes last)."""
    found = rows.filter(pc.equal(rows.column("depth"), _ROOT_DEPTH))
    if found.num_rows:
        root = found.to_pylist()[0]
        info.tree_bytes = root["tree_bytes"]
        info.tree_alloc = root["tree_alloc"]
        info.tree_files = root["tree_files"]
        info.partial = bool(root["partial"])


def list_snapshots(*, store: StoreArg = None, root: str | None = None) -> list[ScanInfo]:
    """Every scan in the store, oldest first (only those of ``root`` if given)."""
    return list_scans(_store(store), root=validate_root(root) if root else None)


def load(
    root: str | None = None,
    *,
    store: StoreArg = None,
    scan_id: str | None = None,
    columns: list[str] | None = None,
) -> pa.Table:
    """Load the latest snapshot of ``root`` (or ``scan_id``) as an Arrow table.

    Use ``.to_pandas()`` on the result for a DataFrame. Ask for ``columns`` to read less.

    Raises:
        SnapshotNotFound: no snapshot matches.
    """
    return load_snapshot(
        _store(store),
        root=os.path.abspath(root) if root else None,
        scan_id=scan_id,
        columns=columns,
    )


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
    st = _store(store)
    info = find_scan(st, root=os.path.abspath(root) if root else None, scan_id=scan_id)
    if now_ns is None:
        return _classified(st, info, rules)[0]
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
    return _classified(st, find_scan(st, scan_id=scan_id), rules, now_ns=now_ns)[0]


def _file_state(path: Path) -> tuple[str, int, int, int] | None:
    """What changes when a rules file is edited (None: there is none)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (str(path), st.st_ino, st.st_size, st.st_mtime_ns)


def _classified(
    st: Store,
    info: ScanInfo,
    rules: str | os.PathLike[str] | None,
    *,
    now_ns: int | None = None,
) -> tuple[pa.Table, ProtectContext]:
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
    st = _store(store)
    info = find_scan(st, root=os.path.abspath(root) if root else None, scan_id=scan_id)
    now_ns = scan_time_ns(info) if as_of_scan else time.time_ns()
    table = classify_snapshot(
        store=st, scan_id=info.scan_id, rules=rules, now_ns=now_ns if as_of_scan else None
    )
    return summarize_table(table, info, top=top, now_ns=now_ns)


def scan_time_ns(info: ScanInfo) -> int:
    """When a scan finished (started, if it never finished), in nanoseconds since the epoch."""
    when = datetime.fromisoformat(info.finished_at or info.started_at)
    return int(when.timestamp()) * 10**9 + when.microsecond * 1000


def prune_snapshots(
    *,
    store: StoreArg = None,
    keep: int | None = None,
    older_than_days: float | None = None,
    dry_run: bool = False,
) -> list[ScanInfo]:
    """Remove old snapshots (the store's own files), never the latest scan of any root.

    Raises:
        UsageError: neither ``keep`` nor ``older_than_days`` was given.
    """
    if keep is None and older_than_days is None:
        raise UsageError("say what to prune: --keep N or --older-than DAYS.")
    if keep is not None and keep < 1:
        raise UsageError("--keep must be at least 1 (the latest snapshot always stays).")
    return prune_scans(
        _store(store),
        keep=keep,
        older_than_days=older_than_days,
        now=time.time(),
        dry_run=dry_run,
    )


def open_store(store: StoreArg = None) -> Store:
    """The store (created if missing), for the CLI's executor commands."""
    return _store(store).ensure()


def existing_store(store: StoreArg = None) -> Store:
    """The store, as it is: nothing is created (a dry run or a listing creates nothing)."""
    return _store(store)


def store_path(store: StoreArg = None) -> Path:
    """The resolved store directory (for display)."""
    return _store(store).root


# -- annotations, remembered rules, plans ---------------------------------------------------


def annotate(
    paths: Sequence[str | bytes],
    *,
    store: StoreArg = None,
    decision: str | None = None,
    note: str | None = None,
    set_decision: bool = True,
    set_note: bool = True,
    snapshot: str | None = None,
) -> list[Annotation]:
    """Write a person's decision and/or note on each absolute path (one batch, all or nothing).

    Each decision records what it was made on: the snapshot (``snapshot``, the one on screen;
    else the latest scan of the deepest scanned root holding the path) and the entry's digest
    there. A plan leaves the decision out (``changed-since-decision``) once the entry no longer
    has that digest.

    Args:
        paths: absolute paths (bytes keep non-UTF-8 names exactly).
        store: the store.
        decision: ``keep``, ``delete``, ``unsure``, or ``None``/``"none"`` to clear.
        note: the note (``""``/``None`` clears it).
        set_decision: False to leave decisions as they are (a note-only write).
        set_note: False to leave notes as they are (a decision-only write).
        snapshot: the id of the scan the decision was made on.

    Raises:
        UsageError: a path is relative or the decision is unknown.
    """
    st = _store(store)
    kwargs: dict[str, Any] = {}
    if set_decision:
        kwargs["decision"] = decision
        kwargs["made_on"] = _made_on(st, paths, snapshot)
    if set_note:
        kwargs["note"] = note
    with Ledger.open(st) as ledger:
        return ledger.annotate(paths, by="human", **kwargs)


@dataclass(frozen=True)
class AnnotateResult:
    """What ``annotate_paths`` wrote, and what it noticed on the way.

    Attributes:
        annotations: each path's annotation after the write (a path left with none is absent).
        removed: how many of the paths had an annotation before and have none now.
        missing: the annotated paths that do not exist now (their annotations are kept all the
            same: the entry may be gone since the scan, or the path may be a typo).
    """

    annotations: list[Annotation]
    removed: int
    missing: list[str]

    exit_code = 0  # a missing path is noted, not refused: nothing was left undone

    def to_json(self) -> dict[str, Any]:
        """What ``hygiene-nb annotate --json`` prints (``path_b64`` where text is not exact)."""
        rows = []
        for a in self.annotations:
            row: dict[str, Any] = {
                "path": a.path, "decision": a.decision, "note": a.note, "by": a.by, "at": a.at,
            }  # fmt: skip
            exact = path_b64(a.path, a.path_raw)
            if exact is not None:  # a name that is not valid UTF-8: its exact bytes
                row["path_b64"] = exact
            rows.append(row)
        return {
            "status": "done",
            "annotations": rows,
            "removed": self.removed,
            "missing": self.missing,
        }


def annotate_paths(
    paths: Sequence[str | bytes],
    *,
    store: StoreArg = None,
    decision: str | None = None,
    note: str | None = None,
) -> AnnotateResult:
    """Write a decision and/or note on each path as a person typed it (``hygiene-nb annotate``).

    Relative paths are taken from the working directory. ``None`` leaves the decision (or the
    note) as it is; ``"none"`` clears the decision and ``""`` the note.

    Raises:
        UsageError: neither a decision nor a note was given, or the decision is unknown.
        PathNotNormal: a path has a ``.`` or ``..`` component (never resolved as text: after a
            symlink the kernel would not agree); nothing is written.
    """
    if decision is None and note is None:
        raise UsageError("give --decision, --note, or both.")
    require_no_dot_components(tuple(paths))
    absolute = [os.fsencode(os.path.abspath(p)) for p in paths]
    st = _store(store)
    before = {a.path_raw for a in annotations_at(absolute, store=st)}
    written = annotate(
        absolute,
        store=st,
        decision=decision,
        note=note,
        set_decision=decision is not None,
        set_note=note is not None,
    )
    return AnnotateResult(
        annotations=written,
        removed=len(before - {a.path_raw for a in written}),  # had one, have none now
        missing=sorted({a.path for a in written if not os.path.lexists(a.path_raw)}),
    )


def stale_decisions(
    annotations: Sequence[Annotation], info: ScanInfo, *, store: StoreArg = None
) -> set[bytes]:
    """The delete decisions that no longer match what snapshot ``info`` shows (exact bytes).

    Stale: the decision records no digest (it predates that record), or its entry's digest in
    ``info`` differs from the recorded one. A plan leaves these out (``changed-since-decision``;
    one whose entry is still all ``safe`` is planned all the same) until a person decides again.
    """
    deletes = [a for a in annotations if a.decision == "delete"]
    st = _store(store)
    later = [a.path_raw for a in deletes if a.digest is not None and a.snapshot_id != info.scan_id]
    now = entry_digests(st, info, later) if later else {}
    return {
        a.path_raw
        for a in deletes
        if a.digest is None or (a.snapshot_id != info.scan_id and now.get(a.path_raw) != a.digest)
    }


def _made_on(
    st: Store, paths: Sequence[str | bytes], snapshot: str | None
) -> dict[bytes, tuple[str, str]]:
    """Path → (scan id, the entry's digest there), for the paths a snapshot holds."""
    raws = [p if isinstance(p, bytes) else os.fsencode(p) for p in paths]
    scans = [find_scan(st, scan_id=snapshot)] if snapshot is not None else list_scans(st)
    chosen: dict[str, tuple[ScanInfo, list[bytes]]] = {}
    for raw in raws:
        holding = [s for s in scans if within(os.fsdecode(raw), s.root)]
        if not holding:
            continue  # no snapshot holds it: a decision on what nobody saw cannot be planned
        deepest = max(len(s.root) for s in holding)
        latest = [s for s in holding if len(s.root) == deepest][-1]  # scans are oldest first
        chosen.setdefault(latest.scan_id, (latest, []))[1].append(raw)
    made: dict[bytes, tuple[str, str]] = {}
    for info, wanted in chosen.values():
        for raw, digest in entry_digests(st, info, wanted).items():
            made[raw] = (info.scan_id, digest)
    return made


def annotations_at(paths: Sequence[str | bytes], *, store: StoreArg = None) -> list[Annotation]:
    """The annotations of exactly these absolute paths (those that have one)."""
    with Ledger.open(_store(store)) as ledger:
        return ledger.annotations_at(paths)


def remember_rule(group: str, decision: str, *, store: StoreArg = None) -> int:
    """Remember ``decision`` for pattern group ``group`` and apply it to the latest snapshots.

    Returns:
        How many unannotated entries received the decision now.

    Raises:
        UsageError: the group or decision is unknown.
    """
    if group not in GROUPS:
        raise UsageError(f"no pattern group {group!r}; groups: {', '.join(GROUPS)}.")
    st = _store(store)
    with Ledger.open(st) as ledger:
        ledger.remember_rule(group, decision)
    latest = {s.root: s for s in list_scans(st)}
    return sum(apply_remembered_rules(store=st, scan_id=s.scan_id) for s in latest.values())


def forget_rule(group: str, *, store: StoreArg = None) -> int:
    """Forget a remembered rule; take back the annotations it made that nobody changed since."""
    with Ledger.open(_store(store)) as ledger:
        return ledger.forget_rule(group)


def list_rules(*, store: StoreArg = None) -> dict[str, str]:
    """Remembered rules: pattern group → decision."""
    with Ledger.open(_store(store)) as ledger:
        return ledger.remembered_rules()


def apply_remembered_rules(*, store: StoreArg = None, scan_id: str) -> int:
    """Fill the decision of every unannotated entry of a remembered group (``by: rule``)."""
    st = _store(store)
    with Ledger.open(st) as ledger:
        rules = ledger.remembered_rules()
        if not rules:
            return 0
        table = classify_snapshot(store=st, scan_id=scan_id)
        roots = table.filter(pc.fill_null(table.column("group_root"), False))
        written = 0
        info = find_scan(st, scan_id=scan_id)
        for group, decision in rules.items():
            rows = roots.filter(pc.equal(roots.column("group"), group)).to_pylist()
            raws = [raw_path(r) for r in rows]
            made_on = {raw: (scan_id, d) for raw, d in entry_digests(st, info, raws).items()}
            written += ledger.fill_from_rule(group, decision, raws, made_on)
        return written


@dataclass(frozen=True)
class PlanResult:
    """An issued plan: where it is, what it holds, and the command that would carry it out."""

    plan_id: str
    plan_digest: str
    plan_path: str
    markdown_path: str
    expires_at: str
    candidates: int
    reclaim_bytes: int
    excluded: int
    dry_run_command: str
    confirm_command: str
    plan: dict[str, Any]

    exit_code = 0  # issuing a plan moves nothing, so nothing was skipped

    def to_json(self) -> dict[str, Any]:
        """What ``hygiene-nb plan --json`` prints (the plan itself is in its file)."""
        return {
            "status": "done",
            "plan_id": self.plan_id,
            "plan_digest": self.plan_digest,
            "plan_path": self.plan_path,
            "markdown_path": self.markdown_path,
            "expires_at": self.expires_at,
            "candidates": self.candidates,
            "reclaim_bytes": self.reclaim_bytes,
            "excluded": self.excluded,
            "dry_run_command": self.dry_run_command,
            "confirm_command": self.confirm_command,
        }


def _commands(plan_path: Path, store: Store, plan: dict[str, Any]) -> tuple[str, str]:
    base = (
        f"hygiene-nb execute {shlex.quote(str(plan_path))} --store {shlex.quote(str(store.root))}"
    )
    confirm = (
        f"{base} --execute --confirm-plan-id {plan['plan_id']} "
        f"--plan-digest {plan['plan_digest']} --acknowledge-risk quarantine"
    )
    return base, confirm


def _recheck_on_disk(sel: Selection, root: str, homes: Sequence[str]) -> None:
    """Re-check every candidate against the disk (``hygiene_nb.recheck``); exclude what fails.

    The same re-check the executor runs when it acts, with the same codes: what changed, went,
    became unreadable, holds a mount or is protected now is left out.
    """
    kept = []
    with Rechecker(root, acting_protection(root, homes)) as checker:
        for cand in sel.candidates:
            item = Reviewed(
                cand["path"], cand["path_raw"], cand["kind"], cand["dev"], cand["inode"],
                cand["size"], cand["mtime_ns"], cand["ctime_ns"], cand.get("fingerprint"),
            )  # fmt: skip
            found = checker.check(item)
            if found is None:
                kept.append(cand)
            else:
                sel.excluded.append(
                    Exclusion.of(cand["path"], cand["path_raw"], found.code, found.detail)
                )
    sel.candidates = kept


def _check_references(sel: Selection, st: Store, config: RootConfig) -> list[dict[str, Any]]:
    """Exclude candidates their project's text files name, or whose project could not be read.

    Returns what was searched in each workspace, for the plan to record.
    """
    budget = ReferenceBudget(config.reference_max_files, config.reference_max_text_bytes)
    exact = [os.fsdecode(c["path_raw"]) for c in sel.candidates]  # the bytes, not the text
    verdicts, checks = check_references(exact, budget=budget, skip=[str(st.root)])
    kept_out = blocking(verdicts)
    kept = []
    for cand, given in zip(sel.candidates, exact, strict=True):
        if given in kept_out:
            code, detail = kept_out[given]
            sel.excluded.append(Exclusion.of(cand["path"], cand["path_raw"], code, detail))
        else:
            kept.append(cand)
    sel.candidates = kept
    return [asdict(c) for c in checks]


def within(path: str | os.PathLike[str], root: str) -> bool:
    """Whether ``path`` (existing or not) lies in ``root`` once links on the way are resolved."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip("/") + "/")


def _plan_out(out: str | os.PathLike[str], root: str) -> Path:
    """Where ``--out`` really points; refused inside the root (links resolved) or if taken.

    Raises:
        UsageError: the target lies in the tree being cleaned, names a ``.md`` file, or it (or
            the Markdown beside it) exists already.
    """
    given = Path(out)
    if given.suffix == ".md":
        raise UsageError("--out names the plan's JSON file; its Markdown list goes beside it.")
    target = Path(os.path.realpath(given.parent)) / given.name
    if within(target, root):
        raise UsageError(f"write the plan outside the tree being cleaned ({root}), not {out}.")
    for path in (target, target.with_suffix(".md")):
        if os.path.lexists(path):
            raise UsageError(f"{path} exists; choose another --out (a plan never replaces a file).")
    return target


def preview_plan(
    root: str | os.PathLike[str],
    *,
    store: StoreArg = None,
    scan_id: str | None = None,
    rules: str | os.PathLike[str] | None = None,
) -> dict[str, int]:
    """The summary a plan exported now would start from, from the snapshot alone (pure read).

    Counts of delete/keep/unsure/unreviewed, candidates after folding and protection, and the
    bytes they would free (each inode once). ``make_plan`` then re-checks every candidate on
    disk, so the exported plan can only hold fewer.

    Raises:
        SnapshotNotFound: no snapshot of the root.
    """
    st = _store(store)
    path = os.path.abspath(root)
    info = find_scan(st, root=path if scan_id is None else None, scan_id=scan_id)
    table, _ = _classified(st, info, rules)
    with Ledger.open(st) as ledger:
        sel = select_candidates(table, ledger.annotations(under=info.root), root=info.root)
    return selection_summary(sel, table)


def make_plan(
    root: str | os.PathLike[str],
    *,
    store: StoreArg = None,
    scan_id: str | None = None,
    out: str | os.PathLike[str] | None = None,
    ttl: int = DEFAULT_TTL,
    rules: str | os.PathLike[str] | None = None,
) -> PlanResult:
    """Export the plan file for the ``delete`` decisions under ``root`` (nothing is moved).

    Candidates come from the latest snapshot (or ``scan_id``) and are re-checked against the
    disk as it is now; everything left out is listed with a reason code.

    Raises:
        RootInvalid: the root is not a directory.
        RootChanged: the root is not the directory that was scanned.
        SnapshotNotFound: no snapshot of the root.
        UsageError: ``out`` lies inside the root, or ``ttl`` is not from 1 to ``MAX_TTL``.
    """
    path = validate_root(root)
    if ttl <= 0:
        raise UsageError("--ttl must be a positive number of seconds.")
    _check_bounded(ttl, "--ttl", 1, MAX_TTL)
    st = _store(store).ensure()
    info = find_scan(st, root=path if scan_id is None else None, scan_id=scan_id)
    if info.root != path:
        raise UsageError(f"snapshot {info.scan_id} is of {info.root}, not {path}.")
    now_st = os.lstat(path)
    if (now_st.st_dev, now_st.st_ino) != (info.root_dev, info.root_inode):
        raise RootChanged(
            f"{path} is not the directory scanned as {info.scan_id} (another device or inode); "
            f"run `hygiene-nb scan {shlex.quote(path)}` again, review, then plan."
        )
    if info.format_version < FORMAT_VERSION:
        raise SnapshotOutdated(
            f"snapshot {info.scan_id} is in format {info.format_version}, which records no "
            "change times (ctime), so a rewrite with its mtime put back could not be told "
            f"from the reviewed file; run `hygiene-nb scan {shlex.quote(path)}` again, then plan."
        )
    out_path = _plan_out(out, path) if out is not None else None
    table, _ = _classified(st, info, rules)
    with Ledger.open(st) as ledger:
        decided = ledger.annotations(under=path)
        # a decision made on this very snapshot recorded this snapshot's digest: no look-up
        deletes = [
            a.path_raw
            for a in decided
            if a.decision == "delete" and a.digest is not None and a.snapshot_id != info.scan_id
        ]
        sel = select_candidates(
            table, decided, root=path, made_on=(info.scan_id, entry_digests(st, info, deletes))
        )
        config = load_root_config(st, path)
        _recheck_on_disk(sel, path, config.homes)
        checked = _check_references(sel, st, config)
        created = datetime.now(UTC)
        plan_id = f"plan-{created:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"
        plan = assemble_plan(
            sel,
            table,
            plan_id=plan_id,
            created_at=created.isoformat(timespec="seconds"),
            expires_at=(created + timedelta(seconds=ttl)).isoformat(timespec="seconds"),
            ttl=ttl,
            root={"path": path, "dev": now_st.st_dev, "inode": now_st.st_ino},
            snapshot={"scan_id": info.scan_id, "scanned_at": info.started_at, "host": info.host},
            store=str(st.root),
            reference_check=checked,
        )
        plan_path = out_path or st.plans / f"{plan_id}.json"
        md_path = plan_path.with_suffix(".md")
        dry_run, confirm = _commands(plan_path, st, plan)
        plan_bytes = json.dumps(plan, indent=2, ensure_ascii=False).encode()
        write_private_file(plan_path, plan_bytes, exclusive=True)
        markdown = plan_markdown(plan, dry_run_command=dry_run, confirm_command=confirm)
        write_private_file(md_path, markdown.encode(), exclusive=True)
        ledger.record_plan(
            IssuedPlan(
                plan_id,
                plan["plan_digest"],
                path,
                info.scan_id,
                str(plan_path),
                plan["created_at"],
                plan["expires_at"],
                len(plan["candidates"]),
                plan["summary"]["reclaim_bytes"],
                "issued",
            )
        )
    return PlanResult(
        plan_id=plan_id,
        plan_digest=plan["plan_digest"],
        plan_path=str(plan_path),
        markdown_path=str(md_path),
        expires_at=plan["expires_at"],
        candidates=len(plan["candidates"]),
        reclaim_bytes=plan["summary"]["reclaim_bytes"],
        excluded=len(plan["excluded"]),
        dry_run_command=dry_run,
        confirm_command=confirm,
        plan=plan,
    )
