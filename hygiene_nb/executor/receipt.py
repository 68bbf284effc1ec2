"""The end of an execution: its receipt, the plan's end state, its ledger row, its log line.

Written once the moves are done, even when the run stopped part way (the rest is reported
``aborted``). The space for them was held since before the first move (``reserve``); if they
still cannot be written, ``records_failed`` says what moved where and that ``hygiene-nb
recover`` writes them from the batches' manifests.
"""

from __future__ import annotations

import os
import secrets
import shlex
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from hygiene_nb.executor.batches import Batch
from hygiene_nb.executor.records import ItemOutcome
from hygiene_nb.ledger import Ledger
from hygiene_nb.plan.reader import LoadedPlan
from hygiene_nb.receipts import RECEIPT_SCHEMA, write_receipt
from hygiene_nb.store import Store, utc_now

if TYPE_CHECKING:
    from hygiene_nb.executor.execute import ExecuteResult, PlanState

__all__ = ["finish", "free_bytes", "records_failed"]


def free_bytes(path: str) -> int:
    """The bytes free to an unprivileged user on ``path``'s filesystem (before and after)."""
    fs = os.statvfs(path)
    return fs.f_bavail * fs.f_frsize


def finish(
    plan: LoadedPlan,
    store: Store,
    ledger: Ledger,
    result: ExecuteResult,
    batches: list[Batch],
    outcomes: list[ItemOutcome],
    auth: tuple[str, str, int],
    *,
    aborted: str = "",
    release: bool = False,
) -> None:
    """Write the receipt, the plan's end state, the execution log and the log line.

    With ``release`` (every item failed before anything moved, no batch kept) the plan goes
    back to ``issued``: it can be executed again once what the skips name is fixed.
    """
    p = plan.parsed
    state: PlanState = "issued" if release else "aborted" if aborted else "executed"
    if not release and not aborted and result.status == "rolled-back":
        state = "rolled-back"
    batch = batches[0] if batches else None
    authorization_id, authorized_at, free_before = auth
    finished = utc_now()
    receipt_id = f"receipt-{finished:%Y%m%dT%H%M%SZ}-{secrets.token_hex(4)}"
    receipt = write_receipt(
        store.receipts / f"{receipt_id}.json",
        {
            "schema": RECEIPT_SCHEMA,
            "receipt_id": receipt_id,
            "plan_id": p.plan_id,
            "plan_digest": p.plan_digest,
            "plan_file_sha256": plan.file_sha256,
            "authorization_id": authorization_id,
            "authorized_at": authorized_at,
            "started_at": authorized_at,
            "finished_at": finished.isoformat(),
            "root": p.root.to_json(),
            "batch_id": batch.batch_id if batch else None,
            "batch_path": str(batch.path) if batch else None,
            "batches": [{"batch_id": b.batch_id, "batch_path": str(b.path)} for b in batches],
            "items": [o.to_json() for o in outcomes],
            "moved": len(result.moved),
            "skipped": len(result.skipped),
            "moved_bytes": result.bytes,
            "free_before": free_before,
            "free_after": free_bytes(p.root.path),
            "aborted": aborted or None,
            "verification": result.verification,
            "reference_check": result.reference_check,
            "rolled_back": len(result.rolled_back),
            "plan_state": state,
        },
    )
    if result.status != "rolled-back":
        result.status = "partial" if result.skipped else "done"
    result.batch_id = batch.batch_id if batch else None
    result.batches = [{"batch_id": b.batch_id, "batch_path": str(b.path)} for b in batches]
    result.receipt_path = str(store.receipts / f"{receipt_id}.json")
    result.plan_state = state
    if release:
        ledger.release_plan(p.plan_id)
    else:
        ledger.finish_plan(p.plan_id, state)
    ledger.record_execution(
        {
            "plan_id": p.plan_id,
            "plan_digest": p.plan_digest,
            "authorization_id": authorization_id,
            "authorized_at": authorized_at,
            "finished_at": receipt["finished_at"],
            "batch_id": result.batch_id,
            "receipt_path": result.receipt_path,
            "moved": len(result.moved),
            "skipped": len(result.skipped),
            "moved_bytes": result.bytes,
            "status": result.status,
        }
    )
    _log_line(store, result, finished)


def _log_line(store: Store, result: ExecuteResult, at: datetime) -> None:
    """One human line per execution in ``cleanup.log`` (what moved, what stayed, where)."""
    into = ", ".join(b["batch_id"] for b in result.batches)
    line = (
        f"{at:%Y-%m-%dT%H:%M:%SZ} plan {result.plan_id}: moved {len(result.moved)} item(s),"
        f" {result.bytes} bytes, into {into or 'no batch'}; skipped"
        f" {len(result.skipped)}; receipt {Path(result.receipt_path or '').name}\n"
    )
    fd = os.open(store.root / "cleanup.log", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(line)


def records_failed(
    store: Store, result: ExecuteResult, batches: list[Batch], exc: Exception
) -> str:
    """What moved and where, when the receipt, ledger or log could not be written after it."""
    why = getattr(exc, "message", None) or getattr(exc, "strerror", None) or str(exc)
    into = ", ".join(f"{b.batch_id} ({b.path})" for b in batches) or "no batch"
    return (
        f"{len(result.moved)} item(s) were moved into {into} and "
        f"{len(result.skipped)} stayed, but the run's records could not be written ({why}). "
        "The moved items are safe in their batch, recorded in its manifest. Free space in the "
        f"store ({store.root}), then run `hygiene-nb recover --store "
        f"{shlex.quote(str(store.root))}`: it writes the receipt, the log line and the plan's "
        "state from the manifests."
    )
