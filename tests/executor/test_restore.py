"""Restore puts items back exactly where they were and never overwrites, follows or escapes."""

from __future__ import annotations

import base64
import errno
import json
import os
import shutil
import stat
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.errors import BatchInvalid, BatchNotFound
from hygiene_nb.executor import list_store_batches, restore_target
from hygiene_nb.executor.fileops import LocalFileOps
from hygiene_nb.executor.restore import restore_batch
from hygiene_nb.store import Store
from tests.executor.helpers import codes, in_store_batch, quarantine_items, snapshot

# -- helpers of these tests ------------------------------------------------------------------


def contents(snap: dict[bytes, tuple[Any, ...]]) -> dict[bytes, tuple[Any, ...]]:
    """A snapshot without directory mtimes (a move in or out changes its parent's)."""
    return {p: v[:3] + v[4:] if stat.S_ISDIR(v[0]) else v for p, v in snap.items()}


def manifest_states(store: Store, batch_id: str) -> dict[bytes, str]:
    doc = json.loads((store.quarantine / batch_id / "manifest.json").read_bytes())
    return {base64.b64decode(i["original_b64"]): i["state"] for i in doc["items"]}


# -- round trips -----------------------------------------------------------------------------


def test_a_manifest_holds_the_copy_back_fields_only_where_they_are_used(
    qstore: Store, root: Path
) -> None:
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    doc = json.loads((qstore.quarantine / bid / "manifest.json").read_bytes())
    (item,) = doc["items"]
    assert not {"restored_as", "modes", "restoring_at"} & set(item)  # as older versions wrote


def test_file_and_directory_round_trip(qstore: Store, root: Path) -> None:
    (root / "a").mkdir()
    (root / "a" / "f").write_bytes(b"file bytes\x00\xff")
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d" / "sub" / "g").write_bytes(b"nested")
    (root / "d" / "link").symlink_to("/nowhere")
    before = snapshot(root)
    bid = quarantine_items(qstore, [root / "a" / "f", root / "d"])
    assert not (root / "a" / "f").exists() and not (root / "d").exists()

    result = restore_batch(qstore, bid, execute=True)

    assert result.status == "done" and result.blocked == []
    assert sorted(result.restored) == sorted([str(root / "a" / "f"), str(root / "d")])
    assert contents(snapshot(root)) == contents(before)  # same bytes and inodes: a rename
    assert not (qstore.quarantine / bid).exists()  # the empty batch is removed
    assert qstore.quarantine.is_dir()


def test_dry_run_changes_nothing(qstore: Store, root: Path, tmp_path: Path) -> None:
    for name in ("free", "occupied", "deep/er/f"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(name.encode())
    bid = quarantine_items(qstore, [root / "free", root / "occupied", root / "deep/er/f"])
    (root / "occupied").write_bytes(b"new occupant")
    (root / "deep" / "er").rmdir()
    (root / "deep").rmdir()
    before = snapshot(tmp_path)

    result = restore_batch(qstore, bid)

    assert snapshot(tmp_path) == before
    assert result.status == "dry-run"
    assert sorted(result.restored) == sorted([str(root / "free"), str(root / "deep/er/f")])
    assert codes(result) == ["target-occupied"]


@pytest.mark.parametrize(
    "name",
    [b"with space", b"new\nline", b"-leading-dash", b"x" * 255, b"bad-\xff\xfe-utf8"],
    ids=["space", "newline", "dash", "255-bytes", "invalid-utf8"],
)
def test_hostile_names_round_trip(qstore: Store, root: Path, name: bytes) -> None:
    path = os.fsencode(root) + b"/" + name
    with open(path, "wb") as handle:
        handle.write(name)
    ino = os.lstat(path).st_ino
    bid = quarantine_items(qstore, [path])
    assert not os.path.lexists(path)

    result = restore_batch(qstore, bid, items=[path], execute=True)

    assert result.status == "done", result
    assert result.restored == [path.decode("utf-8", "backslashreplace")]
    assert Path(os.fsdecode(path)).read_bytes() == name
    assert os.lstat(path).st_ino == ino
    assert os.listdir(root) == [os.fsdecode(name)]


# -- never overwrite -------------------------------------------------------------------------


def _occupy(target: Path, occupant: str, tmp_path: Path) -> None:
    if occupant == "file":
        target.write_bytes(b"occupant")
    elif occupant == "empty-dir":
        target.mkdir()
    else:
        target.symlink_to(tmp_path / "nowhere")


@pytest.mark.parametrize("moving", ["file", "dir"])
@pytest.mark.parametrize("occupant", ["file", "empty-dir", "dangling-link"])
def test_target_occupied_leaves_both_alone(
    qstore: Store, root: Path, tmp_path: Path, occupant: str, moving: str
) -> None:
    item = root / "item"
    if moving == "file":
        item.write_bytes(b"quarantined")
    else:
        item.mkdir()
        (item / "inner").write_bytes(b"quarantined")
    bid = quarantine_items(qstore, [item])
    _occupy(item, occupant, tmp_path)
    before = snapshot(tmp_path)

    result = restore_batch(qstore, bid, execute=True)

    assert result.status == "partial" and result.restored == []
    assert codes(result) == ["target-occupied"]
    assert "move it aside" in result.blocked[0].message
    assert snapshot(tmp_path) == before  # occupant and batch exactly as they were
    assert manifest_states(qstore, bid) == {os.fsencode(item): "moved"}


def test_an_occupant_that_appears_after_the_check_is_not_replaced(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = root / "f"
    item.write_bytes(b"quarantined")
    bid = quarantine_items(qstore, [item])
    item.write_bytes(b"raced in")
    monkeypatch.setattr(restore_target, "_check_free", lambda *_: None)  # the race window

    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["target-occupied"]
    assert item.read_bytes() == b"raced in"
    assert Path(os.fsdecode(in_store_batch(qstore, bid, item))).read_bytes() == b"quarantined"


@pytest.mark.parametrize("became", ["symlink", "file"])
def test_target_unusable_when_a_parent_changed(
    qstore: Store, root: Path, tmp_path: Path, became: str
) -> None:
    (root / "p").mkdir()
    (root / "p" / "f").write_bytes(b"quarantined")
    bid = quarantine_items(qstore, [root / "p" / "f"])
    (root / "p").rmdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    if became == "symlink":
        (root / "p").symlink_to(elsewhere)
    else:
        (root / "p").write_bytes(b"a file now")
    before = snapshot(tmp_path)

    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["target-unusable"]
    assert snapshot(tmp_path) == before
    assert list(elsewhere.iterdir()) == []  # nothing restored through the link


def test_missing_parents_are_recreated(qstore: Store, root: Path) -> None:
    (root / "x" / "y").mkdir(parents=True)
    (root / "x" / "y" / "f").write_bytes(b"deep")
    os.chmod(root / "x", 0o750)
    bid = quarantine_items(qstore, [root / "x" / "y" / "f"])
    (root / "x" / "y").rmdir()
    (root / "x").rmdir()

    assert restore_batch(qstore, bid).restored == [str(root / "x" / "y" / "f")]
    assert not (root / "x").exists()  # the dry run created nothing
    result = restore_batch(qstore, bid, execute=True)

    assert result.status == "done"
    assert (root / "x" / "y" / "f").read_bytes() == b"deep"
    # with the mode recorded at quarantine time (a version-1 manifest, none recorded: 0700)
    assert stat.S_IMODE(os.lstat(root / "x").st_mode) == 0o750


def _exdev_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first rename out of the batch fails as if the target were on another filesystem."""
    real = LocalFileOps.rename_noreplace
    calls: list[bytes] = []

    def rename(self: LocalFileOps, src_dir: int, src: bytes, dst_dir: int, dst: bytes) -> None:
        calls.append(src)
        if len(calls) == 1:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        real(self, src_dir, src, dst_dir, dst)

    monkeypatch.setattr(LocalFileOps, "rename_noreplace", rename)


def _restoring_temps(root: Path) -> list[Path]:
    return [p for p in root.rglob(".hygiene-nb-restoring-*")]


def test_across_filesystems_an_item_comes_back_by_a_verified_copy(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "d" / "sub").mkdir(parents=True)
    (root / "d" / "sub" / "g").write_bytes(b"nested")
    (root / "d" / "f").write_bytes(b"file bytes\x00\xff")
    (root / "d" / "f").chmod(0o640)
    before = snapshot(root)
    bid = quarantine_items(qstore, [root / "d"])
    _exdev_once(monkeypatch)

    result = restore_batch(qstore, bid, execute=True)

    assert result.status == "done" and result.restored == [str(root / "d")]
    after = snapshot(root)

    def essence(snap: dict[bytes, tuple[Any, ...]]) -> dict[bytes, tuple[Any, ...]]:
        # mode, size and bytes everywhere, file mtimes too; inodes differ (it is a copy)
        return {
            p: (v[0], v[1], v[5], v[3] if stat.S_ISREG(v[0]) else None) for p, v in snap.items()
        }

    assert essence(after) == essence(before)
    assert os.stat(root / "d").st_ino != before[os.fsencode(root / "d")][2]
    assert _restoring_temps(root) == []
    assert not (qstore.quarantine / bid).exists()  # the batch's copy went, then the empty batch


def test_a_copy_back_never_replaces_what_appeared_at_the_target(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "f").write_bytes(b"ours")
    bid = quarantine_items(qstore, [root / "f"])
    _exdev_once(monkeypatch)
    from hygiene_nb.executor.crossdev import copy_verified as real_copy

    def copy_then_someone_writes(*args: Any, **kwargs: Any) -> Any:
        verified = real_copy(*args, **kwargs)
        (root / "f").write_bytes(b"theirs")
        return verified

    monkeypatch.setattr("hygiene_nb.executor.copy_back.copy_verified", copy_then_someone_writes)
    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["target-occupied"] and result.status == "partial"
    assert (root / "f").read_bytes() == b"theirs"
    assert manifest_states(qstore, bid) == {os.fsencode(root / "f"): "moved"}
    assert Path(os.fsdecode(in_store_batch(qstore, bid, root / "f"))).read_bytes() == b"ours"
    (temp,) = _restoring_temps(root)
    assert temp.read_bytes() == b"ours" and str(temp) in result.blocked[0].message


def test_a_copy_back_that_does_not_verify_leaves_the_batch_as_it_was(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hygiene_nb.executor import crossdev

    (root / "f").write_bytes(b"ours")
    bid = quarantine_items(qstore, [root / "f"])
    before = snapshot(qstore.quarantine / bid / "tree")
    _exdev_once(monkeypatch)
    hashes = iter(["sha256:batch", "sha256:something-else"])
    monkeypatch.setattr(crossdev, "_hash", lambda *_: next(hashes))

    result = restore_batch(qstore, bid, execute=True)

    assert codes(result) == ["restore-copy-failed"] and result.status == "partial"
    assert "differs from its copy" in result.blocked[0].message
    assert not (root / "f").exists()
    assert manifest_states(qstore, bid) == {os.fsencode(root / "f"): "moved"}
    assert contents(snapshot(qstore.quarantine / bid / "tree")) == contents(before)


def test_when_the_batch_copy_cannot_be_removed_the_item_is_back_and_the_leftover_reported(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "f").write_bytes(b"ours")
    bid = quarantine_items(qstore, [root / "f"])
    _exdev_once(monkeypatch)

    def fails(*_: object) -> int:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr("hygiene_nb.executor.copy_back.remove_original_after_verified_copy", fails)
    result = restore_batch(qstore, bid, execute=True)

    assert result.status == "partial" and (root / "f").read_bytes() == b"ours"
    assert result.restored == [str(root / "f")] and codes(result) == ["batch-copy-left"]
    assert "purge" in result.blocked[0].message
    assert manifest_states(qstore, bid) == {os.fsencode(root / "f"): "restored"}
    # the duplicate stays recorded in the batch (purge destroys it), never unrecorded
    assert Path(os.fsdecode(in_store_batch(qstore, bid, root / "f"))).read_bytes() == b"ours"
    (info,) = [b for b in list_store_batches(qstore) if b.batch_id == bid]
    assert info.manifest == "ok"
    assert (info.items, info.bytes) == (1, 4)  # `quarantine list` shows the duplicate it holds


class Crash(BaseException):
    """Stands for the process dying at that instant."""


def test_a_copy_back_interrupted_after_its_rename_is_recognized_next_time(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "d").mkdir()
    (root / "d" / "f").write_bytes(b"ours")
    bid = quarantine_items(qstore, [root / "d"])
    _exdev_once(monkeypatch)

    def dies_after_the_rename(*_: object) -> None:
        raise Crash  # the rename is done; nothing recorded it yet

    monkeypatch.setattr("hygiene_nb.executor.copy_back.record", dies_after_the_rename)
    with pytest.raises(Crash):
        restore_batch(qstore, bid, execute=True)
    assert (root / "d" / "f").read_bytes() == b"ours"  # back, but not recorded yet
    assert manifest_states(qstore, bid) == {os.fsencode(root / "d"): "moved"}
    assert Path(os.fsdecode(in_store_batch(qstore, bid, root / "d"))).is_dir()  # and still there
    monkeypatch.undo()

    again = restore_batch(qstore, bid, execute=True)

    assert again.status == "done" and codes(again) == ["already"]
    assert (root / "d" / "f").read_bytes() == b"ours"
    assert not (qstore.quarantine / bid).exists()  # the duplicate went, then the empty batch


def test_a_copy_back_that_died_mid_copy_names_its_leftover_and_copies_nothing_more(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hygiene_nb.executor import crossdev

    (root / "d").mkdir()
    for name in ("a", "b"):
        (root / "d" / name).write_bytes(name.encode() * 5)
    bid = quarantine_items(qstore, [root / "d"])
    _exdev_once(monkeypatch)
    real = crossdev._copy_file
    calls: list[bytes] = []

    def dies_on_second(src: int, name: bytes, dst: int, *rest: Any) -> None:
        calls.append(name)
        if len(calls) == 2:
            raise Crash
        real(src, name, dst, *rest)

    monkeypatch.setattr(crossdev, "_copy_file", dies_on_second)
    with pytest.raises(Crash):
        restore_batch(qstore, bid, execute=True)
    monkeypatch.undo()
    (leftover,) = _restoring_temps(root)
    _exdev_once(monkeypatch)

    again = restore_batch(qstore, bid, execute=True)

    assert codes(again) == ["restore-leftover"] and str(leftover) in again.blocked[0].message
    assert _restoring_temps(root) == [leftover] and not (root / "d").exists()
    assert manifest_states(qstore, bid) == {os.fsencode(root / "d"): "moved"}
    shutil.rmtree(leftover)  # as the message says
    _exdev_once(monkeypatch)
    done = restore_batch(qstore, bid, execute=True)
    assert done.status == "done" and (root / "d" / "b").read_bytes() == b"bbbbb"


def test_an_occupant_that_only_looks_like_the_copy_is_left_alone(
    qstore: Store, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (root / "f").write_bytes(b"ours")
    bid = quarantine_items(qstore, [root / "f"])
    (root / "f").write_bytes(b"ours")  # same bytes, but someone else's file
    result = restore_batch(qstore, bid, execute=True)
    assert codes(result) == ["target-occupied"]
    assert Path(os.fsdecode(in_store_batch(qstore, bid, root / "f"))).read_bytes() == b"ours"


# -- the batch side --------------------------------------------------------------------------


@pytest.mark.parametrize("change", ["appended", "replaced"])
def test_batch_item_changed(qstore: Store, root: Path, change: str) -> None:
    (root / "f").write_bytes(b"original")
    bid = quarantine_items(qstore, [root / "f"])
    inside = Path(os.fsdecode(in_store_batch(qstore, bid, root / "f")))
    if change == "appended":
        with inside.open("ab") as handle:
            handle.write(b" and more")
    else:
        inside.unlink()
        inside.write_bytes(b"original")  # same bytes, another inode (maybe the same number)

    result = restore_batch(qstore, bid, execute=True)

    if change == "appended":  # the very file, written to: back, and said so (never silently)
        assert codes(result) == ["changed-in-quarantine"] and result.status == "done"
        assert (root / "f").read_bytes() == b"original and more"
        return
    assert codes(result) == ["batch-item-changed"]
    assert not (root / "f").exists() and inside.exists()


def test_missing_from_batch(qstore: Store, root: Path) -> None:
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    os.unlink(in_store_batch(qstore, bid, root / "f"))

    assert codes(restore_batch(qstore, bid, execute=True)) == ["missing-from-batch"]


def test_item_selects_one_and_the_manifest_keeps_the_rest(qstore: Store, root: Path) -> None:
    for name in ("a", "b"):
        (root / name).write_bytes(name.encode())
    bid = quarantine_items(qstore, [root / "a", root / "b"])

    result = restore_batch(qstore, bid, items=[os.fsencode(root / "a")], execute=True)

    assert result.restored == [str(root / "a")] and result.status == "done"
    assert (root / "a").read_bytes() == b"a" and not (root / "b").exists()
    assert manifest_states(qstore, bid) == {
        os.fsencode(root / "a"): "restored",
        os.fsencode(root / "b"): "moved",
    }
    again = restore_batch(qstore, bid, items=[os.fsencode(root / "a")], execute=True)
    assert again.status == "done" and again.restored == [] and codes(again) == ["already"]
    unknown = restore_batch(qstore, bid, items=[os.fsencode(root / "zzz")])
    assert codes(unknown) == ["not-in-batch"]
    assert restore_batch(qstore, bid, execute=True).restored == [str(root / "b")]
    assert not (qstore.quarantine / bid).exists()


def test_an_item_already_back_but_not_recorded_is_already(qstore: Store, root: Path) -> None:
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    os.rename(in_store_batch(qstore, bid, root / "f"), root / "f")  # a crash before the record

    assert codes(restore_batch(qstore, bid)) == ["already"]
    assert manifest_states(qstore, bid) == {os.fsencode(root / "f"): "moved"}  # dry run
    result = restore_batch(qstore, bid, execute=True)

    assert result.status == "done" and codes(result) == ["already"]
    assert not (qstore.quarantine / bid).exists()


def test_a_batch_with_unrecorded_content_is_not_removed(qstore: Store, root: Path) -> None:
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    stray = Path(os.fsdecode(in_store_batch(qstore, bid, root / "stray")))
    stray.write_bytes(b"nobody recorded me")

    assert restore_batch(qstore, bid, execute=True).status == "done"
    assert stray.read_bytes() == b"nobody recorded me"
    assert (qstore.quarantine / bid / "manifest.json").is_file()


# -- refusals --------------------------------------------------------------------------------


@pytest.mark.parametrize("damage", ["missing", "garbage", "unknown-version"])
def test_a_batch_without_a_valid_manifest_is_refused(
    qstore: Store, root: Path, tmp_path: Path, damage: str
) -> None:
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    manifest = qstore.quarantine / bid / "manifest.json"
    if damage == "missing":
        manifest.unlink()
    elif damage == "garbage":
        manifest.write_bytes(b'{"schema": ')
    else:
        manifest.write_text(json.dumps({"schema": "hygiene-nb/quarantine-manifest@9"}))
    before = snapshot(tmp_path)

    with pytest.raises(BatchInvalid) as info:
        restore_batch(qstore, bid, execute=True)

    assert info.value.exit_code == 3 and info.value.code == "batch-invalid"
    assert info.value.message.endswith("inspect it by hand.")
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("batch_id", ["batch-nope", "..", "../store", "a/b", ""])
def test_an_unknown_batch_is_not_found(qstore: Store, batch_id: str) -> None:
    with pytest.raises(BatchNotFound) as info:
        restore_batch(qstore, batch_id, execute=True)
    assert info.value.exit_code == 2


def test_a_symlinked_batch_is_refused(qstore: Store, root: Path, tmp_path: Path) -> None:
    (root / "f").write_bytes(b"x")
    bid = quarantine_items(qstore, [root / "f"])
    os.rename(qstore.quarantine / bid, tmp_path / "moved-batch")
    (qstore.quarantine / bid).symlink_to(tmp_path / "moved-batch")

    with pytest.raises(BatchInvalid):
        restore_batch(qstore, bid, execute=True)
    assert not (root / "f").exists()
