"""Receipts: sealed by their own digest, written once (0600), read strictly."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.errors import StoreError, UsageError
from hygiene_nb.receipts import RECEIPT_SCHEMA, read_receipt, receipt_digest, write_receipt
from tests.helpers import deadline, write


def receipt(**extra: Any) -> dict[str, Any]:
    return {
        "schema": RECEIPT_SCHEMA,
        "plan_id": "plan-20260101T000000Z-0badc0de",
        "items": [{"path": "/home/u/café/名前.log", "state": "moved", "bytes": 12}],
        **extra,
    }


def test_a_written_receipt_is_sealed_private_and_reads_back_as_written(tmp_path: Path) -> None:
    (tmp_path / "receipts").mkdir()
    path = tmp_path / "receipts" / "receipt-1.json"
    sealed = write_receipt(path, receipt())
    assert sealed == {**receipt(), "receipt_digest": receipt_digest(receipt())}
    assert sealed["receipt_digest"].startswith("sha256:") and len(sealed["receipt_digest"]) == 71
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert read_receipt(path) == sealed
    assert "名前" in path.read_text(encoding="utf-8")  # names as they are, not \\u escapes
    assert [p.name for p in path.parent.iterdir()] == ["receipt-1.json"]  # no temporary left


def test_the_digest_covers_every_field_but_itself_in_any_key_order() -> None:
    base = receipt()
    digest = receipt_digest(base)
    assert receipt_digest(dict(reversed(list(base.items())))) == digest
    assert receipt_digest({**base, "receipt_digest": "sha256:" + "0" * 64}) == digest
    assert receipt_digest({**base, "plan_id": "plan-20260101T000000Z-0badc0df"}) != digest
    edited = json.loads(json.dumps(base))
    edited["items"][0]["bytes"] = 13
    assert receipt_digest(edited) != digest
    assert receipt_digest({**base, "extra": None}) != digest


def test_a_receipt_edited_after_it_was_written_no_longer_matches_its_seal(tmp_path: Path) -> None:
    path = tmp_path / "receipt.json"
    write_receipt(path, receipt())
    doc = json.loads(path.read_text())
    doc["items"][0]["state"] = "restored"
    path.chmod(0o600)
    path.write_text(json.dumps(doc))
    again = read_receipt(path)  # still a receipt: verify compares the seal
    assert receipt_digest(again) != again["receipt_digest"]


def test_a_receipt_is_never_written_over_another(tmp_path: Path) -> None:
    path = tmp_path / "receipt.json"
    first = write_receipt(path, receipt())
    with pytest.raises(StoreError):
        write_receipt(path, receipt(recovered=True))
    assert read_receipt(path) == first
    (tmp_path / "link.json").symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(StoreError):
        write_receipt(tmp_path / "link.json", receipt())
    assert not (tmp_path / "elsewhere.json").exists()


def test_a_receipt_that_cannot_be_canonical_json_is_not_written(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_receipt(tmp_path / "r.json", receipt(bytes_freed=float("nan")))
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"schema": "hygiene-nb/receipt@1", "schema": "hygiene-nb/receipt@1"}', "duplicate"),
        ('{"schema": "hygiene-nb/receipt@1", "items": [{"a": 1, "a": 2}]}', "duplicate"),
        ('{"schema": "hygiene-nb/receipt@1", "bytes": NaN}', "NaN is not allowed"),
        ('{"schema": "hygiene-nb/receipt@1", "bytes": -Infinity}', "Infinity is not allowed"),
        ('{"schema": "hygiene-nb/receipt@1"', "cannot read"),
        ("", "cannot read"),
        ("[" * 100_000 + "]" * 100_000, "cannot read"),  # nested past any receipt
        ('{"schema": "hygiene-nb/receipt@1", "note": "\udcff"}', "cannot read"),  # not UTF-8
        ('{"schema": "hygiene-nb/receipt@2"}', "is not a hygiene-nb receipt"),
        ('{"plan_id": "plan-x"}', "is not a hygiene-nb receipt"),
        ('["hygiene-nb/receipt@1"]', "is not a hygiene-nb receipt"),
        ('"hygiene-nb/receipt@1"', "is not a hygiene-nb receipt"),
    ],
)
def test_a_malformed_receipt_is_refused(tmp_path: Path, text: str, why: str) -> None:
    path = write(tmp_path / "r.json", data=text.encode("utf-8", "surrogateescape"))
    with pytest.raises(UsageError, match=why):
        read_receipt(path)


def test_what_is_not_a_receipt_file_is_refused_without_hanging(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with deadline(10):
        for path in (tmp_path / "fifo", tmp_path, tmp_path / "missing", Path("/dev/zero")):
            with pytest.raises(UsageError, match="cannot read the receipt"):
                read_receipt(path)
