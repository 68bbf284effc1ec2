"""Remembered rules: one decision for a whole pattern group, kept in the ledger.

``remember_rule`` stores it and applies it to the latest snapshot of every root;
``apply_remembered_rules`` fills it in after each scan (``by: rule``, never over a person's
decision); ``forget_rule`` takes back what it filled that nobody changed since. Listing and
forgetting read the ledger only: the classification is imported when a rule is applied.
"""

from __future__ import annotations

from hygiene_nb.api.snapshots import StoreArg, existing_store
from hygiene_nb.classify.rules import GROUPS
from hygiene_nb.errors import UsageError
from hygiene_nb.ledger import Ledger
from hygiene_nb.pathnames import raw_path
from hygiene_nb.scan.index import find_scan, list_scans

__all__ = ["apply_remembered_rules", "forget_rule", "list_rules", "remember_rule"]


def remember_rule(group: str, decision: str, *, store: StoreArg = None) -> int:
    """Remember ``decision`` for pattern group ``group`` and apply it to the latest snapshots.

    Returns:
        How many unannotated entries received the decision now.

    Raises:
        UsageError: the group or decision is unknown.
    """
    if group not in GROUPS:
        raise UsageError(f"no pattern group {group!r}; groups: {', '.join(GROUPS)}.")
    st = existing_store(store)
    with Ledger.open(st) as ledger:
        ledger.remember_rule(group, decision)
    latest = {s.root: s for s in list_scans(st)}
    return sum(apply_remembered_rules(store=st, scan_id=s.scan_id) for s in latest.values())


def forget_rule(group: str, *, store: StoreArg = None) -> int:
    """Forget a remembered rule; take back the annotations it made that nobody changed since."""
    with Ledger.open(existing_store(store)) as ledger:
        return ledger.forget_rule(group)


def list_rules(*, store: StoreArg = None) -> dict[str, str]:
    """Remembered rules: pattern group → decision."""
    with Ledger.open(existing_store(store)) as ledger:
        return ledger.remembered_rules()


def apply_remembered_rules(*, store: StoreArg = None, scan_id: str) -> int:
    """Fill the decision of every unannotated entry of a remembered group (``by: rule``)."""
    st = existing_store(store)
    with Ledger.open(st) as ledger:
        rules = ledger.remembered_rules()
        if not rules:
            return 0
        # Only now: after a scan with no remembered rule (the usual case) these imports (the
        # classification and DuckDB, about 0.2 s of CPU) would be the command's last work.
        import pyarrow.compute as pc

        from hygiene_nb.api.classification import classify_snapshot
        from hygiene_nb.scan.digests import entry_digests

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
