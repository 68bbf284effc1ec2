"""Receipts: what an execution did, item by item, bound by its own digest (0600, ``receipts/``).

Written by the executor, read by ``verify`` and by reports.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from hygiene_nb.errors import UsageError
from hygiene_nb.store import no_duplicate_keys, read_regular_file, write_private_file

__all__ = ["RECEIPT_SCHEMA", "read_receipt", "receipt_digest", "write_receipt"]

RECEIPT_SCHEMA = "hygiene-nb/receipt@1"
_MAX_RECEIPT = 256 * 1024 * 1024


def _canonical(obj: Any) -> bytes:
    return json.dumps(
        obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode()


def receipt_digest(receipt: dict[str, Any]) -> str:
    """``sha256:`` of the canonical JSON of the receipt without its ``receipt_digest``."""
    body = {k: v for k, v in receipt.items() if k != "receipt_digest"}
    return "sha256:" + hashlib.sha256(_canonical(body)).hexdigest()


def write_receipt(path: Path, receipt: dict[str, Any]) -> dict[str, Any]:
    """Seal ``receipt`` with its digest and write it (0600, never replacing a file)."""
    sealed = {**receipt, "receipt_digest": receipt_digest(receipt)}
    write_private_file(
        path, json.dumps(sealed, indent=1, ensure_ascii=False).encode(), exclusive=True
    )
    return sealed


def read_receipt(path: Path) -> dict[str, Any]:
    """Read a receipt strictly (no duplicate keys or NaN).

    Raises:
        UsageError: it cannot be read, is not a receipt, or is larger than any receipt.
    """

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not allowed")

    try:
        data = read_regular_file(path, _MAX_RECEIPT)  # a fifo never hangs verify
        if len(data) > _MAX_RECEIPT:
            raise ValueError("too large")
        doc = json.loads(data, object_pairs_hook=no_duplicate_keys, parse_constant=no_constants)
    except (OSError, ValueError, RecursionError) as exc:
        raise UsageError(f"cannot read the receipt {path}: {exc}; give a receipt file.") from exc
    if not isinstance(doc, dict) or doc.get("schema") != RECEIPT_SCHEMA:
        raise UsageError(f"{path} is not a hygiene-nb receipt; give a file from receipts/.")
    return doc
