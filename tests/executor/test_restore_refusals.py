"""Every way restore refuses a batch or an item, and what it leaves: nothing lost, nothing replaced.

An item whose name the filesystem cannot look up in the batch. Each case checks the code and
message restore gives, the bytes on disk and the manifest's states.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

from hygiene_nb.executor import restore_batch
from hygiene_nb.store import Store
from tests.executor.helpers import (
    codes,
    edit_manifest,
    in_store_batch,
    quarantine_items,
    states,
)


def held(store: Store, batch_id: str, original: Path) -> Path:
    """Where the batch ``batch_id`` holds ``original``."""
    return Path(os.fsdecode(in_store_batch(store, batch_id, original)))


# -- one item: the way back and the target ----------------------------------------------------


def test_an_item_whose_name_cannot_be_looked_up_blocks_that_item_only(
    qstore: Store, root: Path
) -> None:
    (root / "a").write_bytes(b"a")
    (root / "b").write_bytes(b"b")
    bid = quarantine_items(qstore, [root / "a", root / "b"])
    too_long = os.fsencode(root) + b"/" + b"x" * 300  # longer than any name can be

    def alter(doc: dict[str, Any]) -> None:
        doc["items"][0]["original_b64"] = base64.b64encode(too_long).decode()
        doc["items"][0]["original"] = os.fsdecode(too_long)

    edit_manifest(qstore.quarantine / bid, alter)

    result = restore_batch(qstore, bid, execute=True)

    assert result.status == "partial" and result.restored == [str(root / "b")]
    assert codes(result) == ["batch-item-changed"]
    assert result.blocked[0].path == os.fsdecode(too_long)
    assert "cannot be looked up inside the batch (File name too long)" in result.blocked[0].message
    assert result.exit_code == 4
    assert result.to_json()["blocked"] == [
        {
            "path": os.fsdecode(too_long),
            "code": "batch-item-changed",
            "message": result.blocked[0].message,
        }
    ]
    assert (root / "b").read_bytes() == b"b" and not (root / "a").exists()
    assert held(qstore, bid, root / "a").read_bytes() == b"a"
    assert states(qstore.quarantine / bid) == {
        too_long: "moved",
        os.fsencode(root / "b"): "restored",
    }
