"""Execute a plan: authorize the whole plan, re-check each candidate, move it into quarantine.

Without a ``Confirmation`` it is a pure dry run (nothing is created, not even a batch). With one,
every whole-plan check passes first, the plan is claimed for single use before the first move,
each move is a no-replace rename bracketed by manifest writes, and a receipt records it all.
"""

from __future__ import annotations

import base64
import errno
import os
import secrets
import shlex
import sqlite3
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from hygiene_nb.config import RootConfig, load_root_config
from hygiene_nb.errors import (
    BaselineFailed,
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
from hygiene_nb.executor.batches import (
    TREE_NAME,
    Batch,
    ManifestItem,
    claim_batch,
    claim_batch_at,
    mirror_parent,
    remove_unused_batch,
)
from hygiene_nb.executor.batches import write_manifest as write_batch_manifest
from hygiene_nb.executor.changes import note_arrival, note_origin
from hygiene_nb.executor.crossdev import (
    CopyMismatch,
    Entry,
    QuarantineUntrusted,
    Unverifiable,
    altered_modes,
    copy_verified,
    crossdev_skip,
    inventory,
    open_volume_quarantine,
    predict_volume_quarantine,
    verified_identities,
)
from hygiene_nb.executor.fileops import (
    DIR_FLAGS,
    DryRunFileOps,
    FileOps,
    LocalFileOps,
    RemovalRefused,
    open_dirs_at,
    remove_original_after_verified_copy,
)
from hygiene_nb.executor.guards import check_candidate
from hygiene_nb.executor.hooks import checkpoint
from hygiene_nb.executor.records import Destination, ItemOutcome, Method, Moved, Skip
from hygiene_nb.executor.registry import register_quarantine
from hygiene_nb.executor.reserve import Reserve
from hygiene_nb.executor.restore import restore_batch
from hygiene_nb.executor.verification import failed, run_commands
from hygiene_nb.executor.writers import tree_writer
from hygiene_nb.fs.fingerprint import fingerprint, signed64, walk_subtree_at
from hygiene_nb.fs.mounts import MountInside, mount_id
from hygiene_nb.ledger import Ledger
from hygiene_nb.plan.reader import LoadedPlan, load_plan
from hygiene_nb.plan.records import Candidate, Plan
from hygiene_nb.plan.references import ReferenceBudget, blocking, check_references
from hygiene_nb.receipts import RECEIPT_SCHEMA, write_receipt
from hygiene_nb.recheck import Rechecker, acting_protection
from hygiene_nb.store import Store, utc_now

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
            verification=_planned_verification(config),
        )
        if confirm is None:
            _dry_run(plan, store, config, result, allow_copy)
            return result
        if config.verify:
            result.verification["baseline"] = _baseline(config, plan.parsed)
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


def _planned_verification(config: RootConfig) -> dict[str, Any]:
    """What the receipt will say about project verification, before anything runs."""
    if not config.verify:
        return {
            "mode": "static-only",
            "note": "no verify command is configured for this root: only the per-item checks ran",
        }
    return {
        "mode": "commands",
        "commands": [list(c) for c in config.verify],
        "timeout_seconds": config.verify_timeout,
    }


def _baseline(config: RootConfig, p: Plan) -> list[dict[str, Any]]:
    """Run the verify commands before anything moves; a failure refuses the whole plan."""
    records = run_commands(config.verify, cwd=p.root.path, timeout=config.verify_timeout)
    if failed(records):
        last = records[-1]
        why = "timed out" if last["timed_out"] else f"exited {last['returncode']}"
        raise BaselineFailed(
            f"the baseline check `{shlex.join(last['argv'])}` {why} before anything moved, so "
            f"plan {p.plan_id} was not carried out and nothing moved; fix the project (or "
            f"the verify setting in the store's config.toml), then execute again. Output "
            f"ends: {last['output'][-400:]!r}"
        )
    return records


def _dry_run(
    plan: LoadedPlan, store: Store, config: RootConfig, result: ExecuteResult, allow_copy: bool
) -> None:
    """Check every candidate as execution would, and say which quarantine it would go to."""
    root_path = plan.parsed.root.path
    referenced = _reference_skips(store, config, plan.parsed.candidates, result)
    predict = _Destinations(store, allow_copy)
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


class _Destinations:
    """The dry run's answer to "which quarantine?", with the executor's rules, read-only.

    The store's quarantine for items on its filesystem; else the quarantine at the top of the
    item's filesystem if it exists and is trusted or could be made; else, with ``allow_copy``,
    a verified copy into the store's quarantine; else a ``cross-device`` skip.
    """

    def __init__(self, store: Store, allow_copy: bool) -> None:
        self.store, self.allow_copy = store, allow_copy
        here = store.quarantine if store.quarantine.exists() else store.root
        self.mount = _path_mount(here)
        self.volumes: dict[_Mount, tuple[_Dest, str]] = {}  # mount → (choice, its quarantine)

    def where(
        self, parent: int, raw: bytes, cand: Candidate
    ) -> tuple[Destination | None, Skip | None]:
        """Where an item would move (quarantine and method), else why it would not."""
        if _read_only(parent):  # as ``_Run.dest_for``
            return None, crossdev_skip(cand.path, "read-only-filesystem")
        mount = _mount_of(parent)
        if _same(mount, self.mount):
            return Destination("rename", quarantine=str(self.store.quarantine)), None
        if mount not in self.volumes:
            self.volumes[mount] = self._volume(parent, raw)
        dest, quarantine = self.volumes[mount]
        if dest.skip is not None:
            return None, crossdev_skip(cand.path, *dest.skip)
        if dest.copy:
            _, skip = _copyable(parent, raw, cand)
            if skip is not None:
                return None, skip
            return Destination("copy", quarantine=str(self.store.quarantine)), None
        return Destination("rename", quarantine=quarantine), None

    def _volume(self, parent: int, raw: bytes) -> tuple[_Dest, str]:
        try:
            return _Dest(), str(predict_volume_quarantine(parent, os.path.dirname(raw)))
        except QuarantineUntrusted as exc:
            return _Dest(skip=("quarantine-untrusted", str(exc))), ""
        except OSError as exc:
            return _failed(exc, "no quarantine at the top of its filesystem", self.allow_copy), ""


_Mount = tuple[int, int | None]  # (st_dev, mount id or None when it cannot be told)


def _mount_of(fd: int) -> _Mount:
    """Which mount a handle is on: (device, mount id).

    A rename works only within one mount (``EXDEV`` across two, even two bind mounts of the
    same filesystem, which share ``st_dev``).
    """
    return os.fstat(fd).st_dev, mount_id(fd)


def _path_mount(path: Path) -> _Mount:
    fd = os.open(path, DIR_FLAGS)
    try:
        return _mount_of(fd)
    finally:
        os.close(fd)


def _same(a: _Mount, b: _Mount) -> bool:
    """Whether a rename between the two can work (not when a mount id cannot be told)."""
    return a == b and a[1] is not None


def _read_only(fd: int) -> bool:
    """Whether the directory open at ``fd`` is on a read-only mount (nothing can leave it)."""
    return bool(os.fstatvfs(fd).f_flag & os.ST_RDONLY)


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


def _free(path: str) -> int:
    fs = os.statvfs(path)
    return fs.f_bavail * fs.f_frsize


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
    free_before = _free(p.root.path)
    quarantine_mount = _path_mount(store.quarantine)
    checker = Rechecker(p.root.path, acting_protection(p.root.path, config.homes))
    run = _Run(store, p, ops, quarantine_mount, allow_copy)
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
        _verify_after(store, config, p, result, run)
    checkpoint("before-receipt")
    reserve.release()  # the space held for the records since before the first move
    checkpoint("before-records")
    try:
        _finish(
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
        raise RecordsIncomplete(_records_failed(store, result, run.batches, exc)) from exc
    if unexpected is not None:
        raise unexpected


def _records_failed(
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


def _verify_after(
    store: Store, config: RootConfig, p: Plan, result: ExecuteResult, run: _Run
) -> None:
    """Run the verify commands again; if they fail, put every moved item back (never over)."""
    after = run_commands(config.verify, cwd=p.root.path, timeout=config.verify_timeout)
    result.verification["after"] = after
    if not failed(after):
        result.verification["outcome"] = "passed"
        return
    checkpoint("before-rollback")
    restored: list[str] = []
    blocked: list[dict[str, str]] = []
    for batch in run.batches:
        try:
            back = restore_batch(store, batch.batch_id, execute=True)
        except (OSError, HygieneError) as exc:
            blocked.append(
                {
                    "batch_id": batch.batch_id,
                    "code": getattr(exc, "code", "os-error"),
                    "message": str(exc),
                }
            )
            continue
        restored += back.restored
        blocked += [{"path": b.path, "code": b.code, "message": b.message} for b in back.blocked]
    result.verification["outcome"] = "failed"
    result.verification["rollback"] = {"restored": len(restored), "blocked": blocked}
    result.status = "rolled-back"
    # what came back is no longer "moved": the receipt, the ledger and the log count net moves
    back_home = set(restored)
    for outcome in run.outcomes:
        if outcome.outcome == "moved" and outcome.path in back_home:
            outcome.outcome = "rolled-back"
    result.rolled_back = [m for m in result.moved if m.path in back_home]
    result.moved = [m for m in result.moved if m.path not in back_home]
    result.bytes -= sum(m.bytes for m in result.rolled_back if not m.open_at_move)


def _abort_rest(result: ExecuteResult, run: _Run, cands: Sequence[Candidate], reason: str) -> None:
    seen = {o.path for o in run.outcomes}
    pending = {
        raw: b for b in run.batches for raw, i in b.items.items() if i.state in ("pending", "moved")
    }
    for cand in cands:
        if cand.path not in seen:
            batch = pending.get(cand.raw)
            why = reason if batch is None else (
                f"{reason}; it was being moved, so it may be in batch {batch.batch_id} "
                f"(recorded there): `hygiene-nb restore {batch.batch_id}` brings it back"
            )  # fmt: skip
            skip = Skip.of(cand.path, "aborted", why)
            _record(result, cand, skip)
            run.outcomes.append(_outcome(cand, skip))


@dataclass
class _Dest:
    """Where the items of one other filesystem go: its own batch, a copy, or nowhere (skip)."""

    batch: Batch | None = None
    copy: bool = False
    skip: tuple[str, str] | None = None  # (code, detail)


_Done = tuple[Candidate, Skip | None, Destination | None]


class _Run:
    """One execution's moving parts: its batches (each claimed on first use) and outcomes.

    Items on the store's filesystem go to the store's batch; items on another filesystem go to
    a batch in the quarantine at the top of that filesystem, or (only when that quarantine
    cannot be used and ``allow_copy``) are copied into the store's batch, verified, and only
    then removed from their place.
    """

    def __init__(
        self,
        store: Store,
        p: Plan,
        ops: FileOps,
        mount: _Mount,
        allow_copy: bool,
    ) -> None:
        self.store, self.p, self.ops, self.mount = store, p, ops, mount
        self.allow_copy = allow_copy
        self.batch: Batch | None = None  # the store's batch
        self.batches: list[Batch] = []  # every batch claimed, in order
        self.dests: dict[_Mount, _Dest] = {}  # by the mount of the item's parent
        self.outcomes: list[ItemOutcome] = []
        self.untouched = False  # nothing moved, no batch kept: the plan stays usable

    def store_batch(self) -> Batch:
        """The store's batch, claimed on first use."""
        if self.batch is None:
            self.batch = _new_batch(self.store, self.p, self.ops)
            self.batches.append(self.batch)
        return self.batch

    def group(self, checker: Rechecker, cands: Sequence[Candidate]) -> list[_Done]:
        """Re-check a group, record the movable ones as pending, move them, record outcomes."""
        done: list[_Done] = []
        ready: list[tuple[Candidate, bytes, int, Batch | None]] = []
        copies: list[tuple[Candidate, bytes, int, dict[bytes, Entry]]] = []
        try:
            for cand in cands:
                raw = cand.raw
                parent, skip = check_candidate(checker, cand)
                dest = _Dest()
                if skip is None:
                    try:
                        dest = self.dest_for(parent, raw)
                    except BaseException:
                        os.close(parent)
                        raise
                    if dest.skip is not None:
                        skip = crossdev_skip(cand.path, *dest.skip)
                    elif dest.copy:
                        planned, skip = _copyable(parent, raw, cand)
                        if skip is None:
                            copies.append((cand, raw, parent, planned))
                            continue
                if skip is not None:
                    if parent >= 0:
                        os.close(parent)
                    done.append((cand, skip, None))
                    continue
                ready.append((cand, raw, parent, dest.batch))
            if ready:
                self._rename(ready, done)
            for cand, raw, parent, planned in copies:
                batch = self.store_batch()
                skip = _copy(batch, parent, raw, cand, planned, self.ops)
                where = _where(batch, "copy")  # a skipped copy too: verify looks for leftovers
                if not skip:  # where the copy is (the original's identity is in dev/inode)
                    item = batch.items[raw]
                    where = replace(where, batch_dev=item.dev, batch_inode=item.inode)
                done.append((cand, skip, where))
        finally:
            for _, _, parent, _ in ready:
                os.close(parent)
            for _, _, parent, _ in copies:
                os.close(parent)
        return done

    def _rename(
        self, ready: list[tuple[Candidate, bytes, int, Batch | None]], done: list[_Done]
    ) -> None:
        """Record every ready item as pending in its batch, move them, record the outcomes."""
        placed = [
            (cand, raw, parent, batch or self.store_batch()) for cand, raw, parent, batch in ready
        ]
        used = list({id(b): b for *_, b in placed}.values())
        for cand, raw, parent, batch in placed:
            batch.items[raw] = _pending(batch, raw, cand, parent)
        for batch in used:
            write_batch_manifest(batch)  # every item's origin is recorded before it moves
        checkpoint("after-intent")
        for cand, raw, parent, batch in placed:
            skip = _move(batch, parent, raw, cand, self.ops)
            where = None if skip else _where(batch, "rename")
            if where is not None and not isinstance(self.ops, DryRunFileOps):
                writing = _open_at_move(batch, raw)
                if writing:
                    where = replace(where, open_at_move=True, open_at_move_detail=writing)
            done.append((cand, skip, where))
        for batch in used:
            write_batch_manifest(batch)
        checkpoint("after-manifest")

    def dest_for(self, parent: int, raw: bytes) -> _Dest:
        """Where an item whose parent is open at ``parent`` goes (decided once per mount)."""
        if _read_only(parent):  # a read-only mount of part of a filesystem, too
            return _Dest(skip=("read-only-filesystem", ""))
        mount = _mount_of(parent)
        if _same(mount, self.mount):
            return _Dest()
        if mount not in self.dests:
            self.dests[mount] = self._volume(parent, raw)
        return self.dests[mount]

    def _volume(self, parent: int, raw: bytes) -> _Dest:
        """Claim a batch in the quarantine at the top of ``parent``'s filesystem, or say why not."""
        try:
            volume = open_volume_quarantine(parent, os.path.dirname(raw), self.ops)
        except QuarantineUntrusted as exc:
            return _Dest(skip=("quarantine-untrusted", str(exc)))
        except OSError as exc:
            return _failed(exc, "no quarantine at the top of its filesystem", self.allow_copy)
        try:
            register_quarantine(self.store, volume.path)
            batch = claim_batch_at(
                volume.fd,
                volume.path,
                plan_id=self.p.plan_id,
                plan_digest=self.p.plan_digest,
                ops=self.ops,
            )
            batch.root = self.p.root.to_json()
        except StoreError as exc:
            detail = f"{volume.path} cannot be registered ({exc.message})"
            return _unusable(detail, self.allow_copy)
        except OSError as exc:
            return _failed(exc, f"no batch can be made in {volume.path}", self.allow_copy)
        finally:
            volume.close()
        checkpoint("after-batch")
        self.batches.append(batch)
        return _Dest(batch=batch)


def _unusable(detail: str, allow_copy: bool) -> _Dest:
    """A volume quarantine that cannot be used: a verified copy if allowed, else a skip."""
    return _Dest(copy=True) if allow_copy else _Dest(skip=("cross-device", detail))


def _failed(exc: OSError, what: str, allow_copy: bool) -> _Dest:
    """``_unusable`` for an OSError, except that nothing leaves a read-only filesystem."""
    if exc.errno == errno.EROFS:
        return _Dest(skip=("read-only-filesystem", ""))
    return _unusable(f"{what} ({exc.strerror})", allow_copy)


def _where(batch: Batch, method: Method) -> Destination:
    return Destination(method, batch_id=batch.batch_id, batch_path=str(batch.path))


def _new_batch(store: Store, p: Plan, ops: FileOps) -> Batch:
    batch = claim_batch(store.quarantine, plan_id=p.plan_id, plan_digest=p.plan_digest, ops=ops)
    batch.root = p.root.to_json()
    checkpoint("after-batch")
    return batch


def _pending(batch: Batch, raw: bytes, cand: Candidate, parent: int) -> ManifestItem:
    """The item's manifest record before it moves, with what restore needs (``note_origin``)."""
    item = ManifestItem(
        original=cand.path,
        original_b64=base64.b64encode(raw).decode("ascii"),
        kind=cand.kind,
        size=cand.size,
        tree_bytes=cand.tree_bytes,
        dev=cand.dev,
        inode=cand.inode,
        mtime_ns=cand.mtime_ns,
        plan_id=batch.plan_id,
        rule=cand.rule,
        note=cand.note,
        state="pending",
        at=utc_now().isoformat(),
    )
    note_origin(batch, item, parent)
    return item


def _move(batch: Batch, parent: int, raw: bytes, cand: Candidate, ops: FileOps) -> Skip | None:
    """Move with no replace and check what arrived (the caller records the outcome)."""
    name = os.path.basename(raw)
    item = batch.items[raw]
    try:
        target = mirror_parent(batch, raw, ops)
    except OSError as exc:
        item.state = "returned"
        return Skip.of(cand.path, "move-failed", exc.strerror or "")
    try:
        try:
            ops.rename_noreplace(parent, name, target, name)
        except OSError as exc:
            item.state = "returned"
            return Skip.of(cand.path, "move-failed", exc.strerror or "")
        checkpoint("after-move")
        code, problem = _arrived_differs(target, name, cand)
        if problem:
            return _put_back(item, cand, (code, problem), (target, parent, name), ops)
        item.state = "moved"
        item.at = utc_now().isoformat()
        note_arrival(item, target, name)  # our rename changed its ctime: compare with this
        return None
    finally:
        os.close(target)


def _open_at_move(batch: Batch, raw: bytes) -> str:
    """Why a moved item may still be written to by another program ("" if nobody writes).

    A rename takes an open file along (its writer keeps writing into the batch, nothing is
    lost), but its space is not freed while it is open: the receipt says so.
    """
    parts = (TREE_NAME + raw).split(b"/")
    try:
        fd = open_dirs_at(batch.fd, parts[:-1])
    except OSError as exc:
        return f"it cannot be reached in the batch to ask ({exc.strerror})"
    try:
        return tree_writer(fd, parts[-1])
    finally:
        os.close(fd)


def _arrived_differs(target: int, name: bytes, cand: Candidate) -> tuple[str, str]:
    """(code, why) what arrived in the batch is not what the plan described (why "" if it is).

    A directory is fingerprinted again where nobody else can reach it: anything swapped in, or
    added or changed inside it since its check, shows here, and so does a mount made inside it
    meanwhile (``contains-mount``: the walk never enters another mount).
    """
    changed = "changed-since-review"
    st = os.stat(name, dir_fd=target, follow_symlinks=False)
    if (signed64(st.st_dev), signed64(st.st_ino)) != (cand.dev, cand.inode):
        return changed, "another entry was swapped in while moving"
    if cand.kind == "file" and (st.st_size, st.st_mtime_ns) != (cand.size, cand.mtime_ns):
        return changed, "it was written to between the check and the move"  # (ctime: ours now)
    if cand.kind == "dir":
        try:
            entries = walk_subtree_at(target, name, expect=(st.st_dev, st.st_ino))
        except MountInside as exc:
            return "contains-mount", f"a mount appeared inside it while moving ({exc.strerror})"
        except OSError as exc:
            return changed, f"its contents could not be read again ({exc.strerror})"
        if fingerprint(entries) != cand.fingerprint:
            return changed, "its contents changed between the check and the move"
    return changed, ""


def _put_back(
    item: ManifestItem,
    cand: Candidate,
    why: tuple[str, str],
    where: tuple[int, int, bytes],
    ops: FileOps,
) -> Skip:
    """Move an unplanned arrival back (never replacing); if impossible, hold it, recorded."""
    code, problem = why
    target, parent, name = where
    try:
        ops.rename_noreplace(target, name, parent, name)
    except OSError as exc:
        item.state = "held"  # in the batch with its origin recorded; a person decides
        held = (
            f"{problem}; it could not be put back ({exc.strerror}) and is held in the batch "
            "with its origin recorded: check it, then restore it by hand"
        )
        return Skip.of(cand.path, code, held)
    item.state = "returned"
    return Skip.of(cand.path, code, f"{problem}; it was put back")


def _copyable(parent: int, raw: bytes, cand: Candidate) -> tuple[dict[bytes, Entry], Skip | None]:
    """The item's inventory, if a copy of it can be verified (else a skip; nothing created)."""
    name = os.path.basename(raw)
    try:
        planned = inventory(parent, name, os.fstat(parent).st_dev)
    except Unverifiable as exc:
        return {}, crossdev_skip(cand.path, "copy-unverifiable", str(exc))
    except OSError as exc:
        return {}, crossdev_skip(cand.path, "copy-failed", exc.strerror or "unreadable")
    top = planned[b""]
    if (signed64(top.dev), signed64(top.ino)) != (cand.dev, cand.inode):
        return {}, Skip.of(cand.path, "changed-since-review", "it was replaced")
    return planned, None


def _copy(
    batch: Batch,
    parent: int,
    raw: bytes,
    cand: Candidate,
    planned: dict[bytes, Entry],
    ops: FileOps,
) -> Skip | None:
    """Copy into the store's batch, verify, record, and only then remove the original.

    The item is recorded ``pending`` before the first byte is copied (a crash mid-copy leaves
    the original in place and a partial copy recorded), ``moved`` (with the copy's identity)
    once the copy is verified, and only after that is the original removed.
    """
    name = os.path.basename(raw)
    item = batch.items[raw] = _pending(batch, raw, cand, parent)
    write_batch_manifest(batch)
    try:
        target = mirror_parent(batch, raw, ops)
    except OSError as exc:
        return _copy_kept(batch, item, cand, "copy-failed", exc.strerror or "")
    try:
        try:
            verified = copy_verified(parent, name, target, planned, ops)
        except Unverifiable as exc:
            return _copy_kept(batch, item, cand, "copy-unverifiable", str(exc))
        except CopyMismatch as exc:
            return _copy_kept(batch, item, cand, "copy-failed", str(exc))
        except OSError as exc:
            return _copy_kept(batch, item, cand, "copy-failed", exc.strerror or "")
        arrived = os.stat(name, dir_fd=target, follow_symlinks=False)
    finally:
        os.close(target)
    item.dev, item.inode = signed64(arrived.st_dev), signed64(arrived.st_ino)
    item.size, item.state, item.at = arrived.st_size, "moved", utc_now().isoformat()
    item.ctime_ns = arrived.st_ctime_ns  # the copy's, once its modes and times were set
    item.modes = altered_modes(verified) or None  # for a restore to give them back
    write_batch_manifest(batch)  # the verified copy is recorded before the original goes
    checkpoint("before-removal")
    try:
        remove_original_after_verified_copy(parent, name, verified_identities(verified))
    except RemovalRefused as exc:
        # put back whole: the original is the item again; the copy is a duplicate, not moved
        item.state, item.at = "returned", utc_now().isoformat()
        write_batch_manifest(batch)
        detail = (
            f"{exc.strerror} ({exc.filename}); it was put back in its place and stays there, "
            f"and its verified copy in batch {batch.batch_id} is not counted as moved (it "
            "goes when the batch is purged)"
        )
        if exc.code == "in-use":
            return crossdev_skip(cand.path, "in-use", detail)
        return Skip.of(cand.path, exc.code, detail)
    except OSError as exc:
        return Skip(
            cand.path,
            "copy-failed",
            f"A verified copy is in batch {batch.batch_id}, but the original could not be "
            f"removed ({exc.strerror}); what is left of it stays in place and the batch holds "
            "all of it. Compare them before removing either.",
        )
    return None


def _copy_kept(batch: Batch, item: ManifestItem, cand: Candidate, code: str, detail: str) -> Skip:
    """The copy failed: the original is in place; the (partial) copy stays recorded."""
    item.state = "returned"
    item.at = utc_now().isoformat()
    write_batch_manifest(batch)
    where = f"a partial copy may stay in batch {batch.batch_id} until purged"
    return crossdev_skip(cand.path, code, f"{detail}; {where}" if detail else where)


def _outcome(cand: Candidate, skip: Skip | None, where: Destination | None = None) -> ItemOutcome:
    return ItemOutcome(cand, "moved" if skip is None else "skipped", skip, where)


def _finish(
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
            "free_after": _free(p.root.path),
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
