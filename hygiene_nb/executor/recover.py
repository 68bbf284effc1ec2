"""Finish the records of executions that stopped after moving (``hygiene-nb recover``).

A run that died (SIGKILL, power loss) or could not write its records (a full store) leaves its
plan ``executing``, no receipt and no log line, while its batches' manifests say exactly what
moved. ``recover`` finds every such plan whose run is not alive (its reserve file and batches
are not locked), and from the manifests writes the receipt (marked ``recovered``), the ledger's
execution row, the ``cleanup.log`` line and the plan's state ``executed``. A run's own receipt,
if it was written, is kept, and nothing already recorded is recorded twice.

An original an interrupted ``--allow-copy`` removal left in ``.hygiene-nb-removing-*`` (a
duplicate of its verified copy) is put back in its place when nothing is there (never
replacing anything), and its batch item is recorded ``returned``; otherwise it is reported
(``removal-interrupted``). Nothing else is moved.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import os
import secrets
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from hygiene_nb.errors import HygieneError, UsageError
from hygiene_nb.executor.batches import (
    TREE_NAME,
    Batch,
    ManifestItem,
    read_manifest,
    write_manifest,
)
from hygiene_nb.executor.crossdev import CopyMismatch, verify_copy
from hygiene_nb.executor.fileops import (
    DIR_FLAGS,
    LocalFileOps,
    open_dir_at,
    open_dirs_at,
    remove_own_empty_dir,
    remove_own_file,
)
from hygiene_nb.executor.inventory import Unverifiable, inventory
from hygiene_nb.executor.leftovers import (
    REMOVAL_INTERRUPTED,
    find_removal_leftovers,
    removal_leftover_message,
)
from hygiene_nb.executor.listing import batch_dirs
from hygiene_nb.executor.records import ItemOutcome, Skip
from hygiene_nb.executor.registry import known_quarantines
from hygiene_nb.executor.reserve import reserve_name, reserved_by_a_live_run
from hygiene_nb.ledger import IssuedPlan, Ledger
from hygiene_nb.plan.reader import load_plan
from hygiene_nb.plan.records import Candidate
from hygiene_nb.receipts import RECEIPT_SCHEMA, read_receipt, write_receipt
from hygiene_nb.store import Store, utc_now

__all__ = ["RecoverResult", "RecoveredPlan", "recover_store"]


@dataclass
class RecoveredPlan:
    """One plan ``recover`` looked at: what it found and what it wrote."""

    plan_id: str
    status: str  # recovered | incomplete (a batch could not be read) | running
    message: str = ""
    receipt_path: str | None = None
    batches: list[dict[str, str]] = field(default_factory=list)
    moved: int = 0
    skipped: int = 0
    leftovers: list[dict[str, str]] = field(default_factory=list)


@dataclass
class RecoverResult:
    """Every plan left ``executing``; ``done`` when all of them are recovered."""

    status: str = "done"
    plans: list[RecoveredPlan] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """What ``hygiene-nb recover --json`` prints."""
        return {"status": self.status, "plans": [asdict(p) for p in self.plans]}

    @property
    def exit_code(self) -> int:
        """4 unless every plan was recovered (one still running, or a batch unreadable)."""
        return 0 if self.status == "done" else 4


def recover_store(store: Store) -> RecoverResult:
    """Finish the records of every execution of ``store`` that stopped (writes records only).

    Raises:
        UsageError: the store holds no ledger.
        StoreError: the records cannot be written (still no room, say).
    """
    if not store.ledger.exists():
        raise UsageError(f"{store.root} holds no ledger; give the --store that executed the plan.")
    result = RecoverResult()
    with Ledger.open(store) as ledger:
        for issued in ledger.plans():
            if issued.state == "executing":
                result.plans.append(_recover_plan(store, ledger, issued))
    if any(p.status != "recovered" or p.leftovers for p in result.plans):
        result.status = "partial"
    return result


def _recover_plan(store: Store, ledger: Ledger, issued: IssuedPlan) -> RecoveredPlan:
    out = RecoveredPlan(issued.plan_id, "recovered")
    receipts_fd = os.open(store.receipts, DIR_FLAGS)
    try:
        reserve = reserve_name(issued.plan_id)
        if reserved_by_a_live_run(receipts_fd, reserve):
            return _running(out, "its execution is still running (it holds its reserve)")
        unreadable: list[str] = []
        batches = _batches_of(store, issued.plan_id, unreadable)
        if unreadable:
            out.status = "incomplete"
            out.message = (
                f"the manifest of {', '.join(unreadable)} cannot be read, so whether it holds "
                f"items of plan {issued.plan_id} cannot be told; the records were written "
                "without it. Inspect it (`hygiene-nb quarantine list`)."
            )
        try:
            if any(b is None for b in batches):
                return _running(out, "its execution is still running (a batch is locked)")
            found = [b for b in batches if b is not None]
            out.leftovers = _put_back_leftovers(found)
            _write_records(store, ledger, issued, found, out)
        finally:
            for batch in batches:
                if batch is not None:
                    batch.close()
        with contextlib.suppress(FileNotFoundError):
            remove_own_file(receipts_fd, reserve)  # the dead run's reserve: its room is free
    finally:
        os.close(receipts_fd)
    return out


def _running(out: RecoveredPlan, why: str) -> RecoveredPlan:
    out.status = "running"
    out.message = f"plan {out.plan_id}: {why}; nothing was done. Run recover once it ended."
    return out


def _batches_of(store: Store, plan_id: str, unreadable: list[str]) -> list[Batch | None]:
    """Every batch of ``plan_id``, opened and locked (None for one another process holds).

    Batches whose manifest cannot be read (whose plan cannot be told) go to ``unreadable``.
    """
    found: list[Batch | _Other | None] = []
    for qfd, quarantine, name in batch_dirs(known_quarantines(store)):
        try:
            found.append(_open_batch(qfd, quarantine, name, plan_id))
        except (OSError, ValueError, KeyError, TypeError):
            unreadable.append(str(quarantine / name))
    return [b for b in found if not isinstance(b, _Other)]


class _Other:
    """A batch of another plan."""


def _open_batch(qfd: int, quarantine: Path, name: str, plan_id: str) -> Batch | _Other | None:
    fd = open_dir_at(qfd, os.fsencode(name))
    try:
        doc = read_manifest(fd)
        if doc is None or doc.get("plan_id") != plan_id:
            os.close(fd)
            return _Other()
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        batch = Batch(
            quarantine / name,
            name,
            fd,
            doc["created_at"],
            plan_id,
            doc["plan_digest"],
            merged=True,
            root=doc.get("root"),
        )
        for item in doc["items"]:
            entry = ManifestItem(**item)
            batch.items[entry.original_raw] = entry
        return batch
    except BaseException:  # a manifest without a field it needs, too: let go of the batch
        with contextlib.suppress(OSError):
            os.close(fd)
        raise


def _put_back_leftovers(batches: list[Batch]) -> list[dict[str, str]]:
    """Put each original an interrupted removal left back in its place; report the others."""
    reported: list[dict[str, str]] = []
    for batch in batches:
        moved = [raw for raw, i in batch.items.items() if i.state == "moved"]
        changed = False
        for raw, staging in sorted(find_removal_leftovers(moved).items()):
            # only a whole original is the item again: a removal cut short between two unlinks
            # leaves part of it, and then the batch's verified copy is the only whole one
            why = _not_whole(batch, raw, staging) or _put_back(raw, staging)
            if not why:
                batch.items[raw].state = "returned"  # the original is the item again
                batch.items[raw].at = utc_now().isoformat()
                changed = True
                continue
            original, where = os.fsdecode(raw), os.fsdecode(staging)
            message = f"{why}; " + removal_leftover_message(original, where, batch.batch_id)
            reported.append(
                {
                    "code": REMOVAL_INTERRUPTED,
                    "path": original,
                    "staging": where,
                    "message": message,
                }
            )
        if changed:
            write_manifest(batch)
    return reported


def _not_whole(batch: Batch, raw: bytes, staging: bytes) -> str:
    """Why the leftover at ``staging`` is not a whole copy of ``raw``'s item in ``batch`` ("")."""
    parts = raw.strip(b"/").split(b"/")
    name = parts[-1]
    try:
        stage_fd = os.open(os.path.dirname(staging), DIR_FLAGS)
    except OSError as exc:
        return f"its staging directory cannot be read ({exc.strerror})"
    try:
        copy_fd = open_dirs_at(batch.fd, [TREE_NAME, *parts[:-1]])
    except OSError as exc:
        os.close(stage_fd)
        return f"its copy in the batch cannot be read ({exc.strerror})"
    try:
        verify_copy(
            stage_fd, name, copy_fd, name, inventory(stage_fd, name, os.fstat(stage_fd).st_dev)
        )
    except (CopyMismatch, Unverifiable) as exc:
        return (
            f"what is left of the original is not all of it ({exc}): the removal was cut "
            f"short, and batch {batch.batch_id} holds the whole item, so it stays there as "
            "moved; the leftover is only part of a duplicate"
        )
    except OSError as exc:
        return f"the leftover could not be compared with its copy ({exc.strerror})"
    finally:
        os.close(stage_fd)
        os.close(copy_fd)
    return ""


def _put_back(raw: bytes, staging: bytes) -> str:
    """Move ``staging`` (``PARENT/.hygiene-nb-removing-X/NAME``) back to ``raw`` ("" if done)."""
    parent, name = os.path.dirname(raw), os.path.basename(raw)
    stage_dir = os.path.basename(os.path.dirname(staging))
    try:
        parent_fd = os.open(parent, DIR_FLAGS)
    except OSError as exc:
        return f"its place cannot be opened ({exc.strerror})"
    try:
        stage_fd = open_dir_at(parent_fd, stage_dir)
        try:
            if os.fstat(stage_fd).st_uid != os.geteuid():
                return "its staging directory is not ours"
            LocalFileOps().rename_noreplace(stage_fd, name, parent_fd, name)
        finally:
            os.close(stage_fd)
        with contextlib.suppress(OSError):
            remove_own_empty_dir(parent_fd, stage_dir)
        return ""
    except OSError as exc:
        return f"it could not be put back in its place ({exc.strerror}; nothing was replaced)"
    finally:
        os.close(parent_fd)


def _write_records(
    store: Store, ledger: Ledger, issued: IssuedPlan, batches: list[Batch], out: RecoveredPlan
) -> None:
    items = _items(batches, _candidates(issued), out.leftovers)
    moved = [i for i in items if i["outcome"] == "moved"]
    out.moved, out.skipped = len(moved), len(items) - len(moved)
    out.batches = [{"batch_id": b.batch_id, "batch_path": str(b.path)} for b in batches]
    moved_bytes = sum(int(i["bytes"] or 0) for i in moved)
    finished = utc_now()
    existing = _existing_receipt(store, issued.plan_id)
    if existing is None:
        receipt_id = f"receipt-{finished:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"
        path = store.receipts / f"{receipt_id}.json"
        free = _free(issued.root)
        write_receipt(
            path,
            {
                "schema": RECEIPT_SCHEMA,
                "receipt_id": receipt_id,
                "plan_id": issued.plan_id,
                "plan_digest": issued.plan_digest,
                "plan_file_sha256": None,
                "authorization_id": "recovered",
                "authorized_at": None,
                "started_at": None,
                "finished_at": finished.isoformat(),
                "root": {"path": issued.root},
                "batch_id": batches[0].batch_id if batches else None,
                "batch_path": str(batches[0].path) if batches else None,
                "batches": out.batches,
                "items": items,
                "moved": out.moved,
                "skipped": out.skipped,
                "moved_bytes": moved_bytes,
                "free_before": free,
                "free_after": free,
                "verification": {"mode": "unknown"},
                "reference_check": [],
                "rolled_back": 0,
                "aborted": "the run stopped before its records were written; recovered from the "
                "batches' manifests by `hygiene-nb recover`",
                "recovered": True,
            },
        )
        existing = path
    out.receipt_path = str(existing)
    if not any(e["plan_id"] == issued.plan_id for e in ledger.executions()):
        ledger.record_execution(
            {
                "plan_id": issued.plan_id,
                "plan_digest": issued.plan_digest,
                "authorization_id": "recovered",
                "authorized_at": "",
                "finished_at": finished.isoformat(),
                "batch_id": batches[0].batch_id if batches else None,
                "receipt_path": out.receipt_path,
                "moved": out.moved,
                "skipped": out.skipped,
                "moved_bytes": moved_bytes,
                "status": "recovered",
            }
        )
    _log_once(store, issued.plan_id, out, moved_bytes, finished)
    ledger.finish_plan(issued.plan_id, "executed")


def _candidates(issued: IssuedPlan) -> Sequence[Candidate]:
    """The plan's candidates, if its file can still be read (else only the manifests count)."""
    try:
        return load_plan(issued.path).parsed.candidates
    except (HygieneError, OSError):
        return []


def _items(
    batches: list[Batch], cands: Sequence[Candidate], leftovers: list[dict[str, str]]
) -> list[dict[str, Any]]:
    """A receipt item per recorded item (and per candidate no batch records: never reached)."""
    left = {r["path"]: r for r in leftovers}
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for batch in batches:
        batch_dev = os.fstat(batch.fd).st_dev
        for raw, item in sorted(batch.items.items()):
            seen.add(item.original_b64)
            entry: dict[str, Any] = {
                "path": item.original,
                "kind": item.kind,
                "bytes": item.tree_bytes if item.tree_bytes is not None else item.size,
                "dev": item.dev,
                "inode": item.inode,
                "batch_id": batch.batch_id,
                "batch_path": str(batch.path),
                "method": _method(raw, batch_dev),
            }
            if raw != item.original.encode("utf-8", "surrogateescape"):
                entry["path_b64"] = item.original_b64  # a name that is not UTF-8: its bytes
            in_batch = _in_batch(batch, raw)
            if item.state == "moved" and in_batch:
                entry["outcome"] = "moved"
                if item.original in left:
                    entry["leftover"] = left[item.original]["staging"]
            elif item.state in ("pending", "held") and in_batch and not os.path.lexists(raw):
                entry["outcome"] = "moved"  # moved by a run that stopped before recording it
            else:
                why = f"recorded {item.state} in its batch"
                if item.state == "returned":
                    why = "it is in its place (recorded returned in its batch)"
                entry.update(outcome="skipped", code="aborted", message=f"Not moved: {why}.")
            out.append(entry)
    never = "Not attempted: the run stopped before it."
    for cand in cands:
        if base64.b64encode(cand.raw).decode("ascii") not in seen:
            skip = Skip(cand.path, "aborted", never)
            out.append(ItemOutcome(cand, "skipped", skip).to_json())
    return out


def _method(raw: bytes, batch_dev: int) -> str:
    """``copy`` when the original's place is on another filesystem than its batch."""
    try:
        return "copy" if os.stat(os.path.dirname(raw)).st_dev != batch_dev else "rename"
    except OSError:
        return "unknown"


def _in_batch(batch: Batch, raw: bytes) -> bool:
    try:
        os.stat(TREE_NAME + raw, dir_fd=batch.fd, follow_symlinks=False)
    except OSError:
        return False
    return True


def _existing_receipt(store: Store, plan_id: str) -> Path | None:
    """A receipt already written for ``plan_id`` (the run got that far), if any."""
    for path in sorted(store.receipts.glob("receipt-*.json")):
        with contextlib.suppress(HygieneError):
            if read_receipt(path).get("plan_id") == plan_id:
                return path
    return None


def _free(path: str) -> int:
    try:
        fs = os.statvfs(path)
    except OSError:
        return 0
    return fs.f_bavail * fs.f_frsize


def _log_once(
    store: Store, plan_id: str, out: RecoveredPlan, moved_bytes: int, at: datetime
) -> None:
    """The run's ``cleanup.log`` line, unless the run wrote it."""
    log = store.root / "cleanup.log"
    with contextlib.suppress(FileNotFoundError):
        if f" plan {plan_id}: " in log.read_text(encoding="utf-8", errors="replace"):
            return
    into = ", ".join(b["batch_id"] for b in out.batches)
    line = (
        f"{at:%Y-%m-%dT%H:%M:%SZ} plan {plan_id}: moved {out.moved} item(s), {moved_bytes} "
        f"bytes, into {into or 'no batch'}; skipped {out.skipped}; receipt "
        f"{Path(out.receipt_path or '').name} (recovered)\n"
    )
    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(line)
