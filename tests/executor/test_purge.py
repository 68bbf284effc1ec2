"""Purge destroys exactly one batch, only with every confirmation, never beyond it."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.errors import (
    AcknowledgementMissing,
    BatchBusy,
    BatchContainsMount,
    BatchIncomplete,
    BatchInvalid,
    ConfirmationMismatch,
    HygieneError,
    StoreError,
)
from hygiene_nb.executor.changes import changed_items
from hygiene_nb.executor.fileops import remove_tree
from hygiene_nb.executor.purge import PurgeResult, purge_batch
from hygiene_nb.store import Store
from tests.executor.helpers import in_store_batch, quarantine_items, snapshot
from tests.helpers import (
    acting_as,
    deadline,
    immutable,
    tmpfs,
    world_readable_tmpdir,
    write,
)

PACKAGE = Path(__file__).resolve().parents[2] / "hygiene_nb"


def confirmed(
    store: Store,
    batch_id: str,
    *,
    include_incomplete: bool = False,
    confirm_bytes: int | None = None,
) -> PurgeResult:
    return purge_batch(
        store,
        batch_id,
        execute=True,
        confirm_batch_id=batch_id,
        acknowledge_risk="permanent-delete",
        include_incomplete=include_incomplete,
        confirm_bytes=confirm_bytes,
    )


def two_items(root: Path) -> list[Path]:
    (root / "f").write_bytes(b"12345")
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d" / "sub" / "g").write_bytes(b"abc")
    os.link(root / "d" / "sub" / "g", root / "d" / "g-again")  # counted once in bytes
    return [root / "f", root / "d"]


def test_dry_run_counts_and_changes_nothing(qstore: Store, root: Path, tmp_path: Path) -> None:
    bid = quarantine_items(qstore, two_items(root))
    before = snapshot(tmp_path)

    result = purge_batch(qstore, bid)

    assert snapshot(tmp_path) == before
    assert result.status == "dry-run" and result.manifest == "ok"
    assert result.would_destroy == {"items": 2, "files": 3, "bytes": 8}


def test_purge_destroys_the_batch_and_nothing_else(
    qstore: Store, root: Path, tmp_path: Path
) -> None:
    (root / "keep").write_bytes(b"stays")
    other = quarantine_items(qstore, [root / "keep"])
    bid = quarantine_items(qstore, two_items(root))
    before_other = snapshot(qstore.quarantine / other)

    result = confirmed(qstore, bid)

    assert result.status == "done"
    assert not (qstore.quarantine / bid).exists()
    assert snapshot(qstore.quarantine / other) == before_other
    assert sorted(os.listdir(root)) == []  # nothing comes back, nothing else goes


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"confirm_batch_id": None}, ConfirmationMismatch),
        ({"confirm_batch_id": "batch-other"}, ConfirmationMismatch),
        ({"confirm_bytes": 7}, ConfirmationMismatch),
        ({"acknowledge_risk": None}, AcknowledgementMissing),
        ({"acknowledge_risk": "quarantine"}, AcknowledgementMissing),
    ],
)
def test_a_refused_purge_changes_nothing(
    qstore: Store,
    root: Path,
    tmp_path: Path,
    kwargs: dict[str, object],
    error: type[HygieneError],
) -> None:
    bid = quarantine_items(qstore, two_items(root))
    args: dict[str, object] = {
        "confirm_batch_id": bid,
        "acknowledge_risk": "permanent-delete",
        **kwargs,
    }
    before = snapshot(tmp_path)

    with pytest.raises(error) as info:
        purge_batch(qstore, bid, execute=True, **args)  # type: ignore[arg-type]

    assert info.value.exit_code == 3
    assert re.fullmatch(r"(confirmation-mismatch|acknowledgement-missing)", info.value.code)
    assert "nothing was touched" in info.value.message
    assert snapshot(tmp_path) == before


def test_confirmed_bytes_that_match_are_accepted(qstore: Store, root: Path) -> None:
    bid = quarantine_items(qstore, two_items(root))
    shown = purge_batch(qstore, bid).would_destroy["bytes"]
    assert confirmed(qstore, bid, confirm_bytes=shown).status == "done"


def test_purge_never_follows_a_symlink_to_a_canary(
    qstore: Store, root: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    canary = outside / "canary"
    canary.write_bytes(b"alive")
    (root / "d").mkdir()
    (root / "d" / "dir-link").symlink_to(outside)
    (root / "d" / "file-link").symlink_to(canary)
    (root / "top-link").symlink_to(outside)
    bid = quarantine_items(qstore, [root / "d", root / "top-link"])
    before = snapshot(outside)

    assert purge_batch(qstore, bid).would_destroy == {"items": 2, "files": 0, "bytes": 0}
    confirmed(qstore, bid)

    assert snapshot(outside) == before  # bytes, inode, mtime, nlink of the canary unchanged
    assert not (qstore.quarantine / bid).exists()


def test_a_fifo_in_the_batch_does_not_hang_purge(qstore: Store, root: Path) -> None:
    (root / "d").mkdir()
    os.mkfifo(root / "d" / "pipe")
    os.mkfifo(root / "lone-pipe")
    bid = quarantine_items(qstore, [root / "d", root / "lone-pipe"])

    with deadline(10):
        assert purge_batch(qstore, bid).would_destroy["items"] == 2
        confirmed(qstore, bid)
    assert not (qstore.quarantine / bid).exists()


def test_an_incomplete_batch_needs_include_incomplete(
    qstore: Store, root: Path, tmp_path: Path
) -> None:
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    stray = os.fsdecode(in_store_batch(qstore, bid, root / "stray"))
    Path(stray).write_bytes(b"unrecorded")
    before = snapshot(tmp_path)

    shown = purge_batch(qstore, bid)
    assert shown.manifest == "incomplete"
    assert shown.would_destroy == {"items": 2, "files": 2, "bytes": 11}
    with pytest.raises(BatchIncomplete) as info:
        confirmed(qstore, bid)
    assert info.value.exit_code == 3 and "--include-incomplete" in info.value.message
    assert snapshot(tmp_path) == before

    assert confirmed(qstore, bid, include_incomplete=True).status == "done"
    assert not (qstore.quarantine / bid).exists()


def test_an_invalid_manifest_needs_include_incomplete(
    qstore: Store, root: Path, tmp_path: Path
) -> None:
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    (qstore.quarantine / bid / "manifest.json").write_text(json.dumps({"schema": "other"}))
    before = snapshot(tmp_path)

    assert purge_batch(qstore, bid).manifest == "invalid"
    with pytest.raises(BatchInvalid):
        confirmed(qstore, bid)
    assert snapshot(tmp_path) == before
    confirmed(qstore, bid, include_incomplete=True)
    assert not (qstore.quarantine / bid).exists()


def test_unknown_entries_in_a_batch_refuse_even_the_dry_run(
    qstore: Store, root: Path, tmp_path: Path
) -> None:
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    (qstore.quarantine / bid / "notes.txt").write_bytes(b"who put this here?")
    before = snapshot(tmp_path)

    for call in (lambda: purge_batch(qstore, bid), lambda: confirmed(qstore, bid)):
        with pytest.raises(BatchInvalid):
            call()
    assert snapshot(tmp_path) == before


def test_a_busy_batch_is_refused(qstore: Store, root: Path, tmp_path: Path) -> None:
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    holder = os.open(qstore.quarantine / bid, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)
        before = snapshot(tmp_path)
        with pytest.raises(BatchBusy):
            confirmed(qstore, bid)
        assert snapshot(tmp_path) == before
    finally:
        os.close(holder)


def test_only_purge_reaches_the_removal_routine() -> None:
    """``remove_tree`` is used by purge alone, and purge is called by the CLI alone."""
    users: dict[str, set[str]] = {"remove_tree": set(), "purge_batch": set()}
    for path in PACKAGE.rglob("*.py"):
        text = path.read_text()
        for name, found in users.items():
            if re.search(rf"\b{name}\b", text):
                found.add(path.relative_to(PACKAGE).as_posix())
    assert users["remove_tree"] <= {"executor/fileops.py", "executor/purge.py"}
    # the package re-exports it for the CLI; nothing else names it
    assert users["purge_batch"] <= {"executor/purge.py", "executor/__init__.py", "cli/executing.py"}


def test_leftover_temp_manifests_go_with_the_batch(qstore: Store, root: Path) -> None:
    """A run that died while writing its manifest leaves ``.manifest-<hex>.tmp``: it is ours."""
    bid = quarantine_items(qstore, two_items(root))
    temp = qstore.quarantine / bid / ".manifest-0123456789ab.tmp"
    temp.write_bytes(b'{"schema": "half written')
    assert purge_batch(qstore, bid).would_destroy == {"items": 2, "files": 3, "bytes": 8}
    assert confirmed(qstore, bid).status == "done"
    assert not (qstore.quarantine / bid).exists()


def test_a_batch_whose_tree_is_gone_is_purged_with_nothing_counted(
    qstore: Store, root: Path
) -> None:
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    # what a restore that stopped after emptying the batch leaves: the item back, no tree/
    os.rename(in_store_batch(qstore, bid, root / "f"), root / "f")
    shutil.rmtree(qstore.quarantine / bid / "tree")

    assert purge_batch(qstore, bid).would_destroy == {"items": 0, "files": 0, "bytes": 0}
    result = confirmed(qstore, bid)

    assert result.destroyed == {"entries": 0, "bytes": 0}
    assert not (qstore.quarantine / bid).exists() and (root / "f").read_bytes() == b"x"


def test_a_tree_swapped_for_a_file_while_counting_is_invalid(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The dry run takes no lock: another process may replace ``tree/`` between two reads."""
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    tree = qstore.quarantine / bid / "tree"
    real = changed_items

    def then_swapped(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        os.rename(tree, qstore.quarantine / "moved-tree")
        tree.write_bytes(b"not a directory")
        return found

    monkeypatch.setattr("hygiene_nb.executor.purge.changed_items", then_swapped)
    with pytest.raises(BatchInvalid, match=r"its tree cannot be opened \(Not a directory\)"):
        purge_batch(qstore, bid)
    assert tree.read_bytes() == b"not a directory"  # nothing was touched


def test_a_mount_that_appears_after_counting_stops_the_purge_at_it(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d" / "sub" / "g").write_bytes(b"abc")
    bid = quarantine_items(qstore, [root / "d"])
    sub = Path(os.fsdecode(in_store_batch(qstore, bid, root / "d" / "sub")))
    real = remove_tree
    with contextlib.ExitStack() as mounts:

        def mount_then_remove(dir_fd: int, name: bytes) -> tuple[int, int]:
            mounts.enter_context(tmpfs(sub))  # mounted after the count, before the removal
            write(sub / "on-the-mount", data=b"never purged")
            return real(dir_fd, name)

        monkeypatch.setattr("hygiene_nb.executor.purge.remove_tree", mount_then_remove)
        with pytest.raises(BatchContainsMount, match="appeared after it was counted") as info:
            confirmed(qstore, bid)
        assert str(sub) in info.value.message
        assert (sub / "on-the-mount").read_bytes() == b"never purged"
        assert (qstore.quarantine / bid / "manifest.json").exists()
    monkeypatch.setattr("hygiene_nb.executor.purge.remove_tree", real)
    assert confirmed(qstore, bid).status == "done"  # unmounted: what is left goes
    assert not (qstore.quarantine / bid).exists()


def test_a_removal_that_fails_partway_stops_and_a_second_purge_finishes(
    qstore: Store, root: Path
) -> None:
    bid = quarantine_items(qstore, two_items(root))
    stuck = Path(os.fsdecode(in_store_batch(qstore, bid, root / "d" / "sub" / "g")))
    with immutable(stuck):
        with pytest.raises(StoreError, match="stopped partway") as info:
            purge_batch(
                qstore,
                bid,
                execute=True,
                confirm_batch_id=bid,
                acknowledge_risk="permanent-delete",
                include_changed=True,
            )
        assert info.value.code == "store-unusable"
        assert stuck.read_bytes() == b"abc"
        assert (qstore.quarantine / bid / "manifest.json").exists()  # it goes last
        files = [p for p in (qstore.quarantine / bid / "tree").rglob("*") if p.is_file()]
        inodes = {p.stat().st_ino: p.stat().st_size for p in files}  # hard links once
        shown = purge_batch(qstore, bid).would_destroy  # the dry run shows what is left
        assert (shown["files"], shown["bytes"]) == (len(files), sum(inodes.values()))
    purge_batch(
        qstore,
        bid,
        execute=True,
        confirm_batch_id=bid,
        acknowledge_risk="permanent-delete",
        include_changed=True,
    )
    assert not (qstore.quarantine / bid).exists()


@pytest.mark.parametrize(
    ("unreadable", "says"),
    [
        (b"", "it cannot be read (Permission denied)"),  # the batch's own listing fails
        (b"/d/sub", "its tree cannot be read (Permission denied)"),  # inside an item: the count
    ],
)
def test_a_tree_its_owner_cannot_read_is_invalid_and_untouched(
    unreadable: bytes, says: str
) -> None:
    with world_readable_tmpdir() as top:
        (top / "root").mkdir()
        os.chown(top, 65534, 65534)
        os.chown(top / "root", 65534, 65534)
        with acting_as():  # root reads everything: the owner, nobody, may not
            store = Store(top / "store").ensure()
            bid = quarantine_items(store, [two_items(top / "root")[1]])
            below = os.fsencode(top / "root") + unreadable if unreadable else b""
            os.chmod(in_store_batch(store, bid, below), 0)
        before = snapshot(top)
        with acting_as(), pytest.raises(BatchInvalid) as info:
            purge_batch(store, bid)
        assert says in info.value.message
        assert snapshot(top) == before
