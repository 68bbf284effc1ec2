"""Verify a receipt against the disk, read-only.

What moved must be gone from its place and in its batch with the recorded identity; what a
rollback put back must be at its place; no original copied with ``--allow-copy`` may be left
in the staging directory of an interrupted removal (``removal-interrupted``); and the receipt
must match its own digest. Where the batch's manifest records the item, the manifest decides
(``check_held``): a remount that gave the filesystem a new device number is not a mismatch, and
an item written to after it was quarantined (a process kept it open) is reported as changed.
"""

from __future__ import annotations

import base64
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hygiene_nb.errors import ReceiptTampered
from hygiene_nb.executor.batches import TREE_NAME, ManifestItem, read_manifest
from hygiene_nb.executor.changes import check_held
from hygiene_nb.executor.fileops import DIR_FLAGS, open_dirs_at
from hygiene_nb.executor.leftovers import (
    REMOVAL_INTERRUPTED,
    find_removal_leftovers,
    removal_leftover_message,
)
from hygiene_nb.fs.fingerprint import signed64
from hygiene_nb.receipts import read_receipt, receipt_digest

__all__ = ["VerifyResult", "verify_receipt"]


@dataclass
class VerifyResult:
    """``verified`` when every moved item is in its batch, unchanged, and none came back.

    ``changed`` when the only finding is items written to in their batch after the move;
    ``mismatch`` when anything reappeared, is missing or was not rolled back.
    """

    status: str
    receipt_id: str
    reappeared: list[str] = field(default_factory=list)
    missing_from_batch: list[str] = field(default_factory=list)
    not_back: list[str] = field(default_factory=list)  # rolled back, yet not at its place
    # an original whose removal after its verified copy was cut short: {code, path, message}
    removal_interrupted: list[dict[str, str]] = field(default_factory=list)
    changed_in_quarantine: list[str] = field(default_factory=list)  # written to in the batch
    moved: int = 0
    freed_bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        """What ``hygiene-nb verify --json`` prints."""
        return {
            "status": self.status,
            "reappeared": self.reappeared,
            "missing_from_batch": self.missing_from_batch,
            "not_back": self.not_back,
            "removal_interrupted": self.removal_interrupted,
            "changed_in_quarantine": self.changed_in_quarantine,
            "freed_bytes": self.freed_bytes,
        }

    @property
    def exit_code(self) -> int:
        """4 unless ``verified``."""
        return 0 if self.status == "verified" else 4


def verify_receipt(path: str | os.PathLike[str]) -> VerifyResult:
    """Check a receipt against the disk (changes nothing).

    Raises:
        UsageError: not a readable receipt.
        ReceiptTampered: its digest does not match its content.
    """
    receipt = read_receipt(Path(path))
    if receipt.get("receipt_digest") != receipt_digest(receipt):
        raise ReceiptTampered(
            f"{path} does not match its own digest: it was altered; trust the ledger's execution "
            "log and `hygiene-nb quarantine list` instead."
        )
    result = VerifyResult(status="verified", receipt_id=str(receipt.get("receipt_id")))
    batch = receipt.get("batch_path")
    manifests: dict[str, tuple[dict[bytes, ManifestItem], dict[str, Any] | None]] = {}
    for item in receipt.get("items", []):
        raw = base64.b64decode(item["path_b64"]) if "path_b64" in item else item["path"].encode()
        if item.get("outcome") == "rolled-back":  # put back after a failed verification
            if not os.path.lexists(raw):
                result.not_back.append(item["path"])
            continue
        if item.get("outcome") != "moved":
            continue
        result.moved += 1
        if os.path.lexists(raw):
            result.reappeared.append(item["path"])
        # each item names its own batch (one run may use a batch per filesystem); a copied
        # item has the copy's identity (batch_dev/batch_inode), a renamed one keeps its own
        home = str(item.get("batch_path") or batch or "")
        if home and home not in manifests:
            manifests[home] = _manifest_items(os.fsencode(home))
        items, batch_fs = manifests.get(home, ({}, None)) if home else ({}, None)
        recorded = items.get(raw)
        if recorded is not None:
            state = _held_state(os.fsencode(home), raw, recorded, batch_fs)
            if state == "changed":
                result.changed_in_quarantine.append(item["path"])
            elif state != "same":
                result.missing_from_batch.append(item["path"])
            continue
        inside = os.fsencode(home) + b"/" + TREE_NAME + raw if home else b""
        expected = (item.get("batch_dev", item["dev"]), item.get("batch_inode", item["inode"]))
        try:
            st = os.lstat(inside)
            same = (signed64(st.st_dev), signed64(st.st_ino)) == expected
        except OSError:
            same = False
        if not same:
            result.missing_from_batch.append(item["path"])
    result.removal_interrupted = _leftovers(receipt)
    result.freed_bytes = int(receipt.get("free_after", 0)) - int(receipt.get("free_before", 0))
    if (
        result.reappeared
        or result.missing_from_batch
        or result.not_back
        or result.removal_interrupted
    ):
        result.status = "mismatch"
    elif result.changed_in_quarantine:
        result.status = "changed"
    return result


def _leftovers(receipt: dict[str, object]) -> list[dict[str, str]]:
    """Originals of the receipt's copied items left in an interrupted removal's staging dir."""
    items = receipt.get("items")
    copied: dict[bytes, dict[str, str]] = {}
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("method") == "copy":
            raw = (
                base64.b64decode(item["path_b64"]) if "path_b64" in item else item["path"].encode()
            )
            copied[raw] = item
    out = []
    for raw, staging in sorted(find_removal_leftovers(list(copied)).items()):
        item, where = copied[raw], os.fsdecode(staging)
        message = removal_leftover_message(item["path"], where, str(item.get("batch_id")))
        out.append(
            {
                "code": REMOVAL_INTERRUPTED,
                "path": item["path"],
                "staging": where,
                "message": message,
            }
        )
    return out


def _manifest_items(
    home: bytes,
) -> tuple[dict[bytes, ManifestItem], dict[str, Any] | None]:
    """The items a batch's manifest records (by original path) and the batch's filesystem.

    Empty when the batch or its manifest cannot be read: the receipt's identities decide then.
    """
    try:
        fd = os.open(home, DIR_FLAGS)
    except OSError:
        return {}, None
    try:
        doc = read_manifest(fd)
        if doc is None:
            return {}, None
        items = [ManifestItem(**i) for i in doc["items"]]
        return {i.original_raw: i for i in items if i.state == "moved"}, doc.get("fs")
    except (ValueError, KeyError, TypeError):
        return {}, None
    finally:
        os.close(fd)


def _held_state(
    home: bytes, raw: bytes, item: ManifestItem, batch_fs: dict[str, Any] | None
) -> str:
    """``check_held`` for the item at ``raw`` in the batch at ``home`` (``missing`` if absent)."""
    parts = raw.strip(b"/").split(b"/")
    try:
        fd = os.open(home, DIR_FLAGS)
        try:
            parent = open_dirs_at(fd, [TREE_NAME, *parts[:-1]])
        finally:
            os.close(fd)
        try:
            return check_held(parent, parts[-1], item, batch_fs)[0]
        finally:
            os.close(parent)
    except OSError:
        return "missing"
