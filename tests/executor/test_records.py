"""What the executor reports keeps a non-UTF-8 name's exact bytes (``path_b64``)."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

from hygiene_nb import api
from hygiene_nb.executor import execute_plan, verify_receipt
from hygiene_nb.store import Store
from tests.executor.helpers import confirm_for
from tests.helpers import write


def test_moved_and_skipped_names_that_are_not_utf8_carry_their_bytes(
    world: dict[str, Path],
) -> None:
    root, store = world["root"], world["store"]
    goes = os.fsencode(root) + b"/data/old-\xff.bin"
    stays = os.fsencode(root) + b"/data/gone-\xfe.bin"
    for raw in (goes, stays):
        write(Path(os.fsdecode(raw)), 5)
    never = os.fsencode(root) + b"/data/never-\xfd.bin"  # decided on, never scanned
    api.scan_root(root, store=store)
    api.annotate([goes, stays, never], store=store, decision="delete")
    issued = api.make_plan(root, store=store)
    (left_out,) = issued.plan["excluded"]  # the plan keeps its bytes too, and the executor
    assert base64.b64decode(left_out["path_b64"]) == never  # reads them back below
    os.unlink(stays)  # skipped as gone

    dry = execute_plan(issued.plan_path, store=Store(store)).to_json()
    done = execute_plan(issued.plan_path, store=Store(store), confirm=confirm_for(issued))

    for shown in (dry, done.to_json()):
        (moved,) = shown["moved"]
        (skipped,) = shown["skipped"]
        assert base64.b64decode(moved["path_b64"]) == goes
        assert moved["path"] == goes.decode("utf-8", "backslashreplace")
        assert base64.b64decode(skipped["path_b64"]) == stays and skipped["code"] == "gone"
    assert not os.path.lexists(goes)
    receipt = json.loads(Path(str(done.receipt_path)).read_text())
    assert sorted(base64.b64decode(i["path_b64"]) for i in receipt["items"]) == sorted(
        [goes, stays]
    )
    checked = verify_receipt(str(done.receipt_path))  # by the exact bytes: gone, in its batch
    assert checked.status == "verified" and checked.moved == 1
