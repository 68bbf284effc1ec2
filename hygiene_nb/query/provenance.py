"""What a report was made from: the snapshot, the rules digest, the ledger, the versions."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd

from hygiene_nb import api
from hygiene_nb.classify.rules import rules_table_markdown
from hygiene_nb.query.history import resolve_scan
from hygiene_nb.query.review import ledger_state

__all__ = ["provenance", "rules_digest"]


def rules_digest(*, store: api.StoreArg = None, rules: str | None = None) -> str:
    """``sha256:`` of the rules in force: the built-in table and the user's rules files."""
    digest = hashlib.sha256(rules_table_markdown().encode())
    for path in (api.open_store(store).rules, Path(rules) if rules else None):
        if path is not None and path.is_file():
            digest.update(path.read_bytes())
    return "sha256:" + digest.hexdigest()


def provenance(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    parameters: dict[str, object] | None = None,
    redact: bool = False,
) -> pd.DataFrame:
    """What a report was made from: snapshot, rules, ledger state, versions, parameters.

    With ``redact`` the root, the host and the parameters (which hold paths) are left out.
    """
    info = resolve_scan(root, store=store, scan_id=scan_id)
    ledger = ledger_state(store=store, root=info.root)
    versions = {name: _version(name) for name in _VERSIONED}
    rows: list[tuple[str, object]] = [
        ("snapshot", info.scan_id),
        *([] if redact else [("root", info.root), ("host", info.host)]),
        ("scanned", f"{info.started_at} → {info.finished_at}"),
        ("walker", info.walker),
        ("rules", rules_digest(store=store)),
        (
            "ledger",
            f"{ledger['annotations']} annotations {ledger['decisions']}, {ledger['digest']}",
        ),
        ("versions", ", ".join(f"{k} {v}" for k, v in versions.items())),
    ]
    if not redact:
        rows.append(("parameters", json.dumps(parameters or {}, sort_keys=True, default=str)))
    return pd.DataFrame(rows, columns=["what", "value"])


_VERSIONED = ("hygiene-nb", "pyarrow", "duckdb", "pandas", "plotly", "papermill", "nbconvert")


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"
