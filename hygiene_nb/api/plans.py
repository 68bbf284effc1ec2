"""Plans: preview one from the snapshot, or export the plan file after re-checking the disk.

``make_plan`` re-checks every candidate on disk (``hygiene_nb.recheck``) and searches its
project for references before writing the plan; nothing here moves a file.
"""

from __future__ import annotations

import json
import os
import secrets
import shlex
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from hygiene_nb.api.bounds import MAX_TTL, check_bounded
from hygiene_nb.api.classification import classify_scan, stored_classification
from hygiene_nb.api.snapshots import StoreArg, existing_store, open_store
from hygiene_nb.bulk import without_collection
from hygiene_nb.config import RootConfig, load_root_config
from hygiene_nb.errors import RootChanged, SnapshotOutdated, UsageError
from hygiene_nb.ledger import Annotation, IssuedPlan, Ledger
from hygiene_nb.pathnames import within
from hygiene_nb.plan.document import (
    Exclusion,
    Selection,
    assemble_plan,
    plan_markdown,
    select_candidates,
)
from hygiene_nb.plan.preview import preview_summary
from hygiene_nb.plan.references import ReferenceBudget, blocking, check_references
from hygiene_nb.plan.schema import DEFAULT_TTL
from hygiene_nb.plan.tally import TALLY_COLUMNS, PlanTally
from hygiene_nb.recheck import Rechecker, Reviewed, acting_protection
from hygiene_nb.scan.digests import entry_digests
from hygiene_nb.scan.index import find_scan
from hygiene_nb.scan.request import validate_root
from hygiene_nb.scan.snapshot import FORMAT_VERSION
from hygiene_nb.store import Store, refuse_fleet, write_private_file

__all__ = ["PlanResult", "make_plan", "preview_plan", "within"]


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
                cand["path"],
                cand["path_raw"],
                cand["kind"],
                cand["dev"],
                cand["inode"],
                cand["size"],
                cand["mtime_ns"],
                cand["ctime_ns"],
                cand.get("fingerprint"),
            )
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


def _plan_out(out: str | os.PathLike[str], root: str) -> Path:
    """Where ``--out`` really points; refused inside the root (links resolved) or if taken.

    Raises:
        UsageError: the target lies in the tree being cleaned, names a ``.md`` file, or it (or
            the Markdown beside it) exists already.
        FleetReadOnly: the target lies inside a fleet dataset (which ``execute`` refuses).
    """
    given = Path(out)
    if given.suffix == ".md":
        raise UsageError("--out names the plan's JSON file; its Markdown list goes beside it.")
    target = Path(os.path.realpath(given.parent)) / given.name
    if within(target, root):
        raise UsageError(f"write the plan outside the tree being cleaned ({root}), not {out}.")
    refuse_fleet(target, "written into")
    for path in (target, target.with_suffix(".md")):
        if os.path.lexists(path):
            raise UsageError(f"{path} exists; choose another --out (a plan never replaces a file).")
    return target


@without_collection
def preview_plan(
    root: str | os.PathLike[str],
    *,
    store: StoreArg = None,
    scan_id: str | None = None,
    rules: str | os.PathLike[str] | None = None,
    annotations: Sequence[Annotation] | None = None,
) -> dict[str, int]:
    """The summary a plan exported now would start from, from the snapshot alone (pure read).

    Counts of delete/keep/unsure/unreviewed, candidates after folding and protection, and the
    bytes they would free (each inode once). ``make_plan`` then re-checks every candidate on
    disk, so the exported plan can only hold fewer.

    Raises:
        SnapshotNotFound: no snapshot of the root.
    """
    st = existing_store(store)
    path = os.path.abspath(root)
    info = find_scan(st, root=path if scan_id is None else None, scan_id=scan_id)
    # a preview authorizes nothing: the kept verdicts (the same as classifying afresh under
    # the same key) are enough; make_plan classifies afresh
    stored = stored_classification(st, info, rules, now_ns=time.time_ns(), load=False)
    if annotations is None:
        with Ledger.open(st) as ledger:
            found: Sequence[Annotation] = ledger.annotations(under=info.root)
    else:  # read already (a report reads the ledger once for all its sections)
        found = annotations
    # queries over the snapshot's and the verdicts' files (the same summary as the tally's,
    # tests/test_plan_tally.py), where every name is valid UTF-8
    summary = preview_summary(stored.snapshot_file, stored.verdicts, found, root=info.root)
    if summary is not None:
        return summary
    # else the widget's tally, which tells rows apart by their exact bytes: only the columns
    # it reads, in one chunk now, while nothing else is held (its index would otherwise
    # combine a copy of it and keep both)
    table = stored.columns(TALLY_COLUMNS).combine_chunks()
    pa.default_memory_pool().release_unused()  # the chunks read: given back, not kept
    summary = PlanTally(table, found, root=info.root).summary()
    del table, found
    # what the index and the tally held goes back to the system, not only to Arrow's pool (in
    # a report's kernel the sections after it would otherwise start from that peak)
    pa.default_memory_pool().release_unused()
    return summary


@without_collection
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
    refuse_fleet(path, "planned in")
    if ttl <= 0:
        raise UsageError("--ttl must be a positive number of seconds.")
    check_bounded(ttl, "--ttl", 1, MAX_TTL)
    st = open_store(store)
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
    table, _ = classify_scan(st, info, rules)
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
