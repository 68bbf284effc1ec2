"""Execute a plan: authorize the whole plan, re-check each candidate, move it into quarantine.

Without a ``Confirmation`` it is a pure dry run (nothing is created, not even a batch): each
candidate is checked as execution would and ``destinations`` says where it would go. With one,
every whole-plan check passes first (``authorize``), the plan is claimed for single use before
the first move, the candidates are carried out group by group (``moves``: each move a
no-replace rename bracketed by manifest writes), the project's verify commands run around it
(``verification``), and a receipt records it all (``receipt``), even when the run stops.
"""

from __future__ import annotations

import os
import secrets
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal

from hygiene_nb.config import RootConfig, load_root_config
from hygiene_nb.errors import (
    HygieneError,
    PlanAlreadyExecuted,
    PlanNotIssued,
    RecordsIncomplete,
    RootReplaced,
    StoreError,
)
from hygiene_nb.executor.authorize import (
    Confirmation,
    authorize,
    check_not_expired,
    confirm_command,
    risk_warning,
)
from hygiene_nb.executor.batches import remove_unused_batch
from hygiene_nb.executor.destinations import Destinations, path_mount
from hygiene_nb.executor.fileops import FileOps, LocalFileOps
from hygiene_nb.executor.guards import check_candidate
from hygiene_nb.executor.hooks import checkpoint
from hygiene_nb.executor.moves import Run
from hygiene_nb.executor.receipt import finish, free_bytes, records_failed
from hygiene_nb.executor.records import Destination, ItemOutcome, Moved, Skip
from hygiene_nb.executor.reserve import Reserve
from hygiene_nb.executor.verification import baseline, planned_verification, verify_after
from hygiene_nb.fs.fingerprint import signed64
from hygiene_nb.ledger import Ledger
from hygiene_nb.plan.reader import LoadedPlan, load_plan
from hygiene_nb.plan.records import Candidate
from hygiene_nb.plan.references import ReferenceBudget, blocking, check_references
from hygiene_nb.recheck import Rechecker, acting_protection
from hygiene_nb.store import Store, refuse_fleet, utc_now

__all__ = ["ExecuteResult", "execute_plan"]

Status = Literal["dry-run", "done", "partial", "rolled-back"]
PlanState = Literal["", "executed", "aborted", "rolled-back", "issued"]


@dataclass
class ExecuteResult:
    """What happened (or, in a dry run, would happen)."""

    status: Status
    plan_id: str
    batch_id: str | None = None  # the first batch (see ``batches``)
    batches: list[dict[str, str]] = field(default_factory=list)
    receipt_path: str | None = None
    moved: list[Moved] = field(default_factory=list)
    skipped: list[Skip] = field(default_factory=list)
    candidates: int = 0
    bytes: int = 0
    confirm_command: str = ""
    warning: str = ""
    verification: dict[str, Any] = field(default_factory=dict)
    reference_check: list[dict[str, Any]] = field(default_factory=list)
    rolled_back: list[Moved] = field(default_factory=list)  # moved, then put back
    plan_state: PlanState = ""  # after a run: executed, aborted, rolled-back, or issued

    def to_json(self) -> dict[str, Any]:
        """What ``hygiene-nb execute --json`` prints."""
        return {
            "status": self.status,
            "plan_id": self.plan_id,
            "batch_id": self.batch_id,
            "batches": self.batches,
            "receipt_path": self.receipt_path,
            "moved": [m.to_json() for m in self.moved],
            "skipped": [s.to_json() for s in self.skipped],
            "confirm_command": self.confirm_command,
            "verification": self.verification,
            "rolled_back": [m.to_json() for m in self.rolled_back],
            "plan_state": self.plan_state,
        }

    @property
    def exit_code(self) -> int:
        """4 when a run skipped an item or was rolled back (a dry run only shows), else 0."""
        rolled_back = self.status == "rolled-back"
        return 4 if rolled_back or (self.skipped and self.status != "dry-run") else 0


def execute_plan(
    plan_path: str | os.PathLike[str],
    *,
    store: Store,
    confirm: Confirmation | None = None,
    ops: FileOps | None = None,
    allow_copy: bool = False,
) -> ExecuteResult:
    """Dry-run (no ``confirm``) or carry out a plan into quarantine batches (**moves files**).

    Items on the store's filesystem go to a batch in the store's quarantine; items on another
    filesystem go to a batch in ``.hygiene-nb-quarantine`` at the top of that filesystem. Only
    when that quarantine cannot be used and ``allow_copy`` is set is an item copied into the
    store's batch, verified, and then removed from its place (else it is skipped
    ``cross-device``).

    Raises:
        PlanMalformed, PlanUntrusted: the plan file cannot be trusted (nothing touched).
        Refused: a whole-plan check failed (nothing touched).
    """
    plan = load_plan(plan_path)
    refuse_fleet(plan.path, "executed from")
    refuse_fleet(plan.parsed.root.path, "executed in")
    refuse_fleet(store.quarantine, "moved into")
    if not store.ledger.exists():  # refuse without creating anything in a store that is not one
        raise PlanNotIssued(
            f"{store.root} holds no ledger, so it issued no plan; give the --store that made "
            f"plan {plan.parsed.plan_id}."
        )
    with Ledger.open(store) as ledger:
        authorize(plan, store, ledger, confirm)
        config = load_root_config(store, plan.parsed.root.path)
        result = ExecuteResult(
            status="dry-run",
            plan_id=plan.parsed.plan_id,
            candidates=len(plan.parsed.candidates),
            confirm_command=confirm_command(plan, store),
            warning=risk_warning(plan.parsed),
            verification=planned_verification(config),
        )
        if confirm is None:
            _dry_run(plan, store, config, result, allow_copy)
            return result
        if config.verify:
            result.verification["baseline"] = baseline(config, plan.parsed)
            check_not_expired(plan.parsed)  # the baseline may have outlived the plan
        reserve = Reserve.hold(store, plan.parsed.plan_id, len(plan.parsed.candidates))
        try:
            if not ledger.claim_plan(plan.parsed.plan_id, plan.parsed.plan_digest):
                raise PlanAlreadyExecuted(
                    f"plan {plan.parsed.plan_id} is being executed or was executed; a plan acts "
                    "once."
                )
            checkpoint("after-claim")
            _carry_out(
                plan, store, ledger, result, ops or LocalFileOps(), allow_copy, config, reserve
            )
        finally:
            reserve.close()
    return result


def _dry_run(
    plan: LoadedPlan, store: Store, config: RootConfig, result: ExecuteResult, allow_copy: bool
) -> None:
    """Check every candidate as execution would, and say which quarantine it would go to."""
    root_path = plan.parsed.root.path
    referenced = _reference_skips(store, config, plan.parsed.candidates, result)
    predict = Destinations(store, allow_copy)
    checker = Rechecker(root_path, acting_protection(root_path, config.homes))
    try:
        for cand in plan.parsed.candidates:
            if cand.path in referenced:
                _record(result, cand, referenced[cand.path])
                continue
            raw = cand.raw
            parent, skip = check_candidate(checker, cand)
            where: Destination | None = None
            try:
                if skip is None:
                    where, skip = predict.where(parent, raw, cand)
            finally:
                if parent >= 0:
                    os.close(parent)
            _record(result, cand, skip, where)
    finally:
        checker.close()


def _record(
    result: ExecuteResult, cand: Candidate, skip: Skip | None, dest: Destination | None = None
) -> None:
    if skip is None:
        assert dest is not None  # a move always has a destination
        result.moved.append(Moved(cand.path, cand.bytes, cand.decided_by, dest, cand.path_b64))
        if not dest.open_at_move:  # its space is not freed while a program has it open
            result.bytes += cand.bytes
    else:
        mine = cand.path_b64 if skip.path == cand.path else None  # non-UTF-8 names
        result.skipped.append(replace(skip, path_b64=mine))


_GROUP = 256  # at least this many items are re-checked, recorded pending, moved and recorded
_MAX_GROUPS = 64  # larger plans use larger groups: the manifest is rewritten whole each time


def _carry_out(
    plan: LoadedPlan,
    store: Store,
    ledger: Ledger,
    result: ExecuteResult,
    ops: FileOps,
    allow_copy: bool,
    config: RootConfig,
    reserve: Reserve,
) -> None:
    p = plan.parsed
    authorized_at = utc_now().isoformat()
    authorization_id = "auth-" + secrets.token_hex(8)
    free_before = free_bytes(p.root.path)
    quarantine_mount = path_mount(store.quarantine)
    checker = Rechecker(p.root.path, acting_protection(p.root.path, config.homes))
    run = Run(store, p, ops, quarantine_mount, allow_copy)
    aborted = ""
    unexpected: Exception | None = None
    cands = p.candidates
    try:
        root_st = os.fstat(checker.fd)
        if (signed64(root_st.st_dev), signed64(root_st.st_ino)) != (p.root.dev, p.root.inode):
            raise RootReplaced(f"{p.root.path} was replaced just before acting on it.")
        referenced = _reference_skips(store, config, cands, result)
        size = max(_GROUP, -(-len(cands) // _MAX_GROUPS))
        for start in range(0, len(cands), size):
            group = []
            for cand in cands[start : start + size]:
                if cand.path in referenced:
                    _record(result, cand, referenced[cand.path])
                    run.outcomes.append(_outcome(cand, referenced[cand.path]))
                else:
                    group.append(cand)
            for cand, skip, where in run.group(checker, group):
                _record(result, cand, skip, where)
                run.outcomes.append(_outcome(cand, skip, where))
    except Exception as exc:  # noqa: BLE001 - re-raised below when unexpected
        # Stop moving (what is moved is recorded in its batch), but always write the receipt:
        # the rest is reported as aborted, and the plan can never act again.
        aborted = f"the run stopped: {exc}"
        _abort_rest(result, run, cands, aborted)
        if not isinstance(exc, (OSError, HygieneError)):
            unexpected = exc  # a bug: written down in the receipt first, then exit 1
    finally:
        checker.close()
        unused = [b for b in run.batches if remove_unused_batch(b)]  # no empty batch stays
        for batch in run.batches:
            batch.close()
        run.batches = [b for b in run.batches if b not in unused]
        run.untouched = bool(not result.moved and run.batches == [] and not aborted)
    if config.verify and result.moved:
        verify_after(store, config, p, result, run)
    checkpoint("before-receipt")
    reserve.release()  # the space held for the records since before the first move
    checkpoint("before-records")
    try:
        finish(
            plan,
            store,
            ledger,
            result,
            run.batches,
            run.outcomes,
            (authorization_id, authorized_at, free_before),
            aborted=aborted,
            release=run.untouched,
        )
    except (OSError, StoreError, sqlite3.Error) as exc:
        raise RecordsIncomplete(records_failed(store, result, run.batches, exc)) from exc
    if unexpected is not None:
        raise unexpected


def _reference_skips(
    store: Store, config: RootConfig, cands: Sequence[Candidate], result: ExecuteResult
) -> dict[str, Skip]:
    """Search each candidate's project again, now: what it names, or could not clear, stays."""
    budget = ReferenceBudget(config.reference_max_files, config.reference_max_text_bytes)
    exact = {os.fsdecode(c.raw): c.path for c in cands}  # the bytes, not the text
    verdicts, checks = check_references(list(exact), budget=budget, skip=[str(store.root)])
    result.reference_check = [asdict(c) for c in checks]
    return {
        exact[given]: Skip.of(exact[given], code, detail)
        for given, (code, detail) in blocking(verdicts).items()
    }


def _abort_rest(result: ExecuteResult, run: Run, cands: Sequence[Candidate], reason: str) -> None:
    seen = {o.path for o in run.outcomes}
    pending = {
        raw: b for b in run.batches for raw, i in b.items.items() if i.state in ("pending", "moved")
    }
    for cand in cands:
        if cand.path not in seen:
            batch = pending.get(cand.raw)
            why = (
                reason
                if batch is None
                else (
                    f"{reason}; it was being moved, so it may be in batch {batch.batch_id} "
                    f"(recorded there): `hygiene-nb restore {batch.batch_id}` brings it back"
                )
            )
            skip = Skip.of(cand.path, "aborted", why)
            _record(result, cand, skip)
            run.outcomes.append(_outcome(cand, skip))


def _outcome(cand: Candidate, skip: Skip | None, where: Destination | None = None) -> ItemOutcome:
    return ItemOutcome(cand, "moved" if skip is None else "skipped", skip, where)
