"""Whole-plan checks before anything moves: issued here, unaltered, unexpired, unused, confirmed.

``authorize`` raises a ``Refused`` subclass and touches nothing; the per-item checks come
after it, at the moment of acting (``guards``, ``hygiene_nb.recheck``).
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from hygiene_nb.errors import (
    AcknowledgementMissing,
    CandidateForbidden,
    ConfirmationMismatch,
    PlanAlreadyExecuted,
    PlanDigestMismatch,
    PlanExpired,
    PlanNotIssued,
    RootReplaced,
)
from hygiene_nb.fs.fingerprint import signed64
from hygiene_nb.ledger import Ledger
from hygiene_nb.plan.reader import LoadedPlan
from hygiene_nb.plan.records import Plan
from hygiene_nb.store import Store, utc_now

__all__ = [
    "ACKNOWLEDGEMENT",
    "Confirmation",
    "authorize",
    "check_not_expired",
    "confirm_command",
    "risk_warning",
]

ACKNOWLEDGEMENT = "quarantine"


@dataclass(frozen=True)
class Confirmation:
    """What a person typed to authorize exactly one plan."""

    plan_id: str | None
    plan_digest: str | None
    acknowledge_risk: str | None


def confirm_command(plan: LoadedPlan, store: Store) -> str:
    """The exact command that confirms this plan, as the dry run prints it."""
    p = plan.parsed
    return (
        f"hygiene-nb execute {shlex.quote(str(plan.path))} --store {shlex.quote(str(store.root))}"
        f" --execute --confirm-plan-id {p.plan_id} --plan-digest {p.plan_digest}"
        f" --acknowledge-risk {ACKNOWLEDGEMENT}"
    )


def authorize(plan: LoadedPlan, store: Store, ledger: Ledger, confirm: Confirmation | None) -> None:
    """Every whole-plan check; raises a ``Refused`` subclass, touching nothing."""
    p = plan.parsed
    issued = ledger.issued_plan(p.plan_id)
    if issued is None:
        raise PlanNotIssued(
            f"plan {p.plan_id} was not issued by the store {store.root}; export a plan "
            "with `hygiene-nb plan ROOT` using this store."
        )
    if issued.plan_digest != p.plan_digest:
        raise PlanDigestMismatch(
            f"plan {p.plan_id} differs from the plan this store issued (digest "
            f"{issued.plan_digest}); it was altered. Export a new plan."
        )
    check_not_expired(p)
    if issued.state != "issued":
        raise PlanAlreadyExecuted(
            f"plan {p.plan_id} was already executed ({issued.state}); a plan acts once. "
            "Export a new plan for what is left."
        )
    _check_forbidden(p, store)
    if confirm is not None:
        _check_confirmation(p, confirm)
    _check_root(p)


def check_not_expired(p: Plan) -> None:
    """Refuse a plan past its ``expires_at``.

    Raises:
        PlanExpired: it expired; a new plan must be exported and reviewed.
    """
    if utc_now() > datetime.fromisoformat(p.expires_at):
        raise PlanExpired(
            f"plan {p.plan_id} expired at {p.expires_at}; export a new one with "
            f"`hygiene-nb plan {shlex.quote(p.root.path)}` and review it."
        )


def _check_confirmation(p: Plan, confirm: Confirmation) -> None:
    if confirm.plan_id != p.plan_id:
        raise ConfirmationMismatch(
            f"--confirm-plan-id must be exactly {p.plan_id}; read the plan, then confirm it."
        )
    if confirm.plan_digest != p.plan_digest:
        raise PlanDigestMismatch(
            f"--plan-digest must be exactly {p.plan_digest} (the plan you reviewed)."
        )
    if confirm.acknowledge_risk != ACKNOWLEDGEMENT:
        raise AcknowledgementMissing(
            f"add --acknowledge-risk {ACKNOWLEDGEMENT}: the candidates will be moved into a "
            "quarantine batch (restorable until you purge it)."
        )


def _identity(path: str | os.PathLike[str]) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return signed64(st.st_dev), signed64(st.st_ino)


def _check_forbidden(p: Plan, store: Store) -> None:
    """Refuse a plan naming what no planner emits: by path and by (device, inode).

    Forbidden: ``/``, the home directory, the store, the plan's root, and any ancestor of the
    home directory or the store (removing one would take them along).
    """
    home = os.path.realpath(os.path.expanduser("~"))
    store_path = os.path.realpath(store.root)
    keep = [Path("/"), Path(home), Path(store_path), Path(p.root.path)]
    forbidden_ids = {i for i in map(_identity, keep) if i is not None}
    forbidden_paths = {"/", home, str(store.root), store_path, p.root.path}
    for cand in p.candidates:
        path = cand.path
        prefix = path.rstrip("/") + "/"
        if (
            path in forbidden_paths
            or (cand.dev, cand.inode) in forbidden_ids
            or path.startswith(str(store.root).rstrip("/") + "/")
            or home.startswith(prefix)
            or store_path.startswith(prefix)
        ):
            raise CandidateForbidden(
                f"plan {p.plan_id} names {path}, which no plan may hold; it was not made by "
                "hygiene-nb plan. Nothing was moved."
            )


def _check_root(p: Plan) -> None:
    root = p.root
    try:
        st = os.lstat(root.path)
    except OSError as exc:
        raise RootReplaced(f"the plan's root {root.path} cannot be read ({exc.strerror}).") from exc
    if (signed64(st.st_dev), signed64(st.st_ino)) != (root.dev, root.inode):
        raise RootReplaced(
            f"{root.path} is not the directory the plan was made for (device/inode "
            "changed); scan and plan again."
        )


def risk_warning(p: Plan) -> str:
    """What confirming this plan does, in one paragraph."""
    return (
        f"This moves {len(p.candidates)} item(s), {p.reclaim_bytes} bytes freed by deleting, "
        f"out of {p.root.path} into a quarantine batch. They stay restorable with "
        "`hygiene-nb restore BATCH` until you purge the batch; nothing is destroyed now."
    )
