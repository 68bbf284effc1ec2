"""What a report was made from: the snapshot, the rules digest, the ledger, the versions."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from hygiene_nb import api
from hygiene_nb.classify.rules import rules_table_markdown
from hygiene_nb.formatting import counted, human_datetime, thousands
from hygiene_nb.ledger import Annotation
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
    annotations: Sequence[Annotation] | None = None,
) -> pd.DataFrame:
    """What a report was made from: snapshot, rules, ledger state, versions, parameters.

    One row per fact (``what``, ``value``), every value text for people: times as dates (UTC),
    the ledger's decisions counted by kind and its digest, each parameter on its own row (paths
    as they are: whatever shows them escapes them). With ``redact`` the root, the host and the
    parameters (which hold paths) are left out. ``annotations``: every annotation at or under
    the root, in path order, when read already.
    """
    info = resolve_scan(root, store=store, scan_id=scan_id)
    ledger = ledger_state(store=store, root=info.root, annotations=annotations)
    versions = {name: _version(name) for name in _VERSIONED}
    rows: list[tuple[str, str]] = [
        ("snapshot", info.scan_id),
        *([] if redact else [("root", info.root), ("host", info.host)]),
        ("scanned", f"{_when(info.started_at)} \u2192 {_when(info.finished_at)}"),
        ("walker", info.walker),
        ("rules", rules_digest(store=store)),
        ("ledger", _decisions(ledger)),
        ("ledger digest", str(ledger["digest"])),
        ("versions", ", ".join(f"{k} {v}" for k, v in versions.items())),
    ]
    if not redact:
        given = parameters or {}
        rows += [(f"parameter {k}", _parameter(given[k])) for k in sorted(given)]
    return pd.DataFrame(rows, columns=["what", "value"])


def _when(at: str) -> str:
    return human_datetime(at, seconds=True) + (" UTC" if at else "")


def _decisions(ledger: dict[str, object]) -> str:
    """``3 annotations: 1 keep, 2 delete, 0 unsure`` (counts in the ledger under the root)."""
    per = ledger["decisions"]
    assert isinstance(per, dict)
    annotations = ledger["annotations"]
    assert isinstance(annotations, int)
    said = ", ".join(f"{thousands(int(n))} {d}" for d, n in per.items())
    return f"{counted(annotations, 'annotation')}: {said}"


def _parameter(value: object) -> str:
    """A report parameter as text, nothing given as ``none``."""
    return "none" if value is None else str(value)


_VERSIONED = ("hygiene-nb", "pyarrow", "duckdb", "pandas", "plotly", "papermill", "nbconvert")


def _version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "not installed"
