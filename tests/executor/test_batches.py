"""Batches: claimed new and private, manifests merged and read strictly, listed, registered.

Batches are filled the way the executor fills them (``quarantine_items``) in a real store.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.errors import StoreError
from hygiene_nb.executor.batches import (
    MANIFEST_SCHEMA,
    QUARANTINE_NAME,
    Batch,
    ManifestItem,
    read_manifest,
    remove_unused_batch,
    write_manifest,
)
from hygiene_nb.executor.changes import changed_items, check_held
from hygiene_nb.executor.fileops import DIR_FLAGS, REMOVING_PREFIX, open_dirs_at
from hygiene_nb.executor.leftovers import find_removal_leftovers
from hygiene_nb.executor.listing import batch_dirs, batch_state, list_batches
from hygiene_nb.executor.registry import (
    QUARANTINES_NAME,
    known_quarantines,
    read_registry,
    register_quarantine,
    registry_error,
    registry_problems,
)
from hygiene_nb.store import Store
from tests.executor.helpers import (
    PLAN_DIGEST,
    PLAN_ID,
    dir_handle,
    in_store_batch,
    manifest_of,
    new_batch,
    quarantine_items,
)
from tests.executor.helpers import (
    made_up_item as item,
)
from tests.helpers import write


def put_manifest(batch_dir: Path, doc: Any) -> None:
    (batch_dir / "manifest.json").write_text(json.dumps(doc) if not isinstance(doc, str) else doc)


def read(batch_dir: Path) -> dict[str, Any] | None:
    with dir_handle(batch_dir) as fd:
        return read_manifest(fd)


# -- claiming ----------------------------------------------------------------------------------


def test_a_claim_makes_a_new_private_locked_batch_every_time(qstore: Store) -> None:
    quarantine = qstore.root / "fresh-quarantine"
    first, second = new_batch(quarantine), new_batch(quarantine)
    try:
        assert stat.S_IMODE(os.stat(quarantine).st_mode) == 0o700
        assert first.batch_id != second.batch_id
        for batch in (first, second):
            assert re.fullmatch(r"batch-\d{8}T\d{6}Z-[0-9a-f]{8}", batch.batch_id)
            assert batch.path == quarantine / batch.batch_id and batch.path.is_dir()
            assert os.listdir(batch.path) == []  # nothing is written before the first item
            assert batch.fs is not None
            with dir_handle(batch.path) as fd, pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the run holds it
    finally:
        first.close()
        second.close()
    with dir_handle(first.path) as fd:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # closed: free


@pytest.mark.parametrize("how", ["open-mode", "other-owner"])
def test_a_quarantine_that_is_not_private_to_us_is_refused(qstore: Store, how: str) -> None:
    if how == "open-mode":
        qstore.quarantine.chmod(0o755)
    else:
        os.chown(qstore.quarantine, 65534, 65534)
    with pytest.raises(StoreError, match="not private to you"):
        new_batch(qstore.quarantine)
    assert os.listdir(qstore.quarantine) == []


# -- manifests ---------------------------------------------------------------------------------


def test_a_manifest_round_trips_with_exact_names_and_only_the_fields_used(
    qstore: Store, root: Path
) -> None:
    odd = write(Path(os.fsdecode(os.fsencode(root) + b"/caf\xe9")), 3)
    plain = write(root / "plain.txt", 4)
    bid = quarantine_items(qstore, [odd, plain])
    batch_dir = qstore.quarantine / bid
    doc = manifest_of(batch_dir)
    assert doc["schema"] == MANIFEST_SCHEMA and doc["batch_id"] == bid
    assert (doc["plan_id"], doc["plan_digest"]) == (PLAN_ID, PLAN_DIGEST)
    raws = {base64.b64decode(i["original_b64"]): i for i in doc["items"]}
    assert set(raws) == {os.fsencode(odd), os.fsencode(plain)}
    for entry in raws.values():
        assert entry["state"] == "moved" and entry["uid"] == os.geteuid()
        assert entry["ctime_ns"] > 0 and entry["parents"] and entry["fs"]
        assert "restored_as" not in entry and "modes" not in entry  # unset: not written
    assert ManifestItem(**raws[os.fsencode(odd)]).original_raw == os.fsencode(odd)
    assert stat.S_IMODE(os.stat(batch_dir / "manifest.json").st_mode) == 0o600
    assert [n for n in os.listdir(batch_dir) if n.startswith(".manifest-")] == []
    assert os.path.exists(in_store_batch(qstore, bid, odd))


def test_writing_a_manifest_merges_what_is_on_disk_and_never_drops_an_item(
    qstore: Store,
) -> None:
    batch = new_batch(qstore.quarantine)
    batch.items[b"/r/a"] = item(b"/r/a", "moved")
    write_manifest(batch)
    batch.close()
    # another run (recover, restore) opens the same batch knowing only another item
    fd = os.open(batch.path, DIR_FLAGS)
    later = Batch(batch.path, batch.batch_id, fd, batch.created_at, PLAN_ID, PLAN_DIGEST)
    try:
        later.items[b"/r/b"] = item(b"/r/b")
        write_manifest(later)
        later.items[b"/r/b"].state = "moved"
        write_manifest(later)
    finally:
        later.close()
    states = {i["original"]: i["state"] for i in manifest_of(batch.path)["items"]}
    assert states == {"/r/a": "moved", "/r/b": "moved"}


@pytest.mark.parametrize(
    ("doc", "why"),
    [
        ({"schema": "hygiene-nb/quarantine-manifest@3", "items": []}, "unknown manifest version"),
        ({"items": []}, "unknown manifest version"),
        (["not", "an", "object"], "unknown manifest version"),
        ({"schema": MANIFEST_SCHEMA, "items": {}}, "items is not a list"),
        ({"schema": MANIFEST_SCHEMA}, "items is not a list"),
        ({"schema": MANIFEST_SCHEMA, "items": [{**vars(item(b"/r/a")), "extra": 1}]},
         "unknown shape"),
        ({"schema": MANIFEST_SCHEMA, "items": ["/r/a"]}, "unknown shape"),
        ({"schema": MANIFEST_SCHEMA, "items": [vars(item(b"r/relative"))]}, "clean absolute"),
        ({"schema": MANIFEST_SCHEMA, "items": [vars(item(b"/r/../etc"))]}, "clean absolute"),
        ({"schema": MANIFEST_SCHEMA, "items": [vars(item(b"/r/.."))]}, "clean absolute"),
        ({"schema": MANIFEST_SCHEMA, "items": [vars(item(b"/r/a\0b"))]}, "clean absolute"),
        ('{"schema": "hygiene-nb/quarantine-manifest@2", "items": [], "items": []}',
         "duplicate keys"),
        ('{"schema": "hygiene-nb/quarantine-manifest@2", "items": [', "Expecting"),
    ],
)  # fmt: skip
def test_an_invalid_manifest_is_refused(qstore: Store, doc: Any, why: str) -> None:
    batch = new_batch(qstore.quarantine)
    batch.close()
    put_manifest(batch.path, doc)
    with pytest.raises(ValueError, match=why):
        read(batch.path)
    state, found, problems = _state(batch.path)
    assert (state, found) == ("invalid", None) and problems


def test_a_manifest_that_is_a_link_or_a_directory_is_not_read(
    qstore: Store, tmp_path: Path
) -> None:
    batch = new_batch(qstore.quarantine)
    batch.close()
    assert read(batch.path) is None  # none yet
    good = write(
        tmp_path / "elsewhere.json",
        data=json.dumps({"schema": MANIFEST_SCHEMA, "items": []}).encode(),
    )
    (batch.path / "manifest.json").symlink_to(good)
    with pytest.raises(ValueError, match="unreadable manifest"):
        read(batch.path)
    (batch.path / "manifest.json").unlink()
    (batch.path / "manifest.json").mkdir()
    with pytest.raises(ValueError):
        read(batch.path)


def test_a_version_1_manifest_is_still_read(qstore: Store) -> None:
    batch = new_batch(qstore.quarantine)
    batch.close()
    legacy = {
        k: v
        for k, v in vars(item(b"/r/a", "moved")).items()
        if k not in ("uid", "fs", "parents", "ctime_ns", "restored_as", "modes", "restoring_at")
    }
    put_manifest(
        batch.path,
        {
            "schema": "hygiene-nb/quarantine-manifest@1",
            "batch_id": batch.batch_id,
            "items": [legacy],
        },
    )
    doc = read(batch.path)
    assert doc is not None and ManifestItem(**doc["items"][0]).ctime_ns is None  # unknown


def _state(batch_dir: Path) -> tuple[str, dict[str, Any] | None, list[str]]:
    with dir_handle(batch_dir) as fd:
        return batch_state(fd)


# -- listing -----------------------------------------------------------------------------------


def test_list_batches_gives_each_batch_its_items_bytes_and_manifest_state(
    qstore: Store, root: Path
) -> None:
    first = quarantine_items(qstore, [write(root / "a.log", 100)])
    second = quarantine_items(qstore, [write(root / "d" / "b.bin", 20), write(root / "c", 3)])
    write(qstore.quarantine / "stray-file", 1)  # not a batch directory: not listed
    listed = list_batches([qstore.quarantine])
    assert [(b.batch_id, b.items, b.bytes, b.manifest, b.plan_id) for b in listed] == [
        (first, 1, 100, "ok", PLAN_ID),
        (second, 2, 23, "ok", PLAN_ID),
    ]
    assert listed[0].created_at <= listed[1].created_at
    assert [name for _, _, name in batch_dirs([qstore.quarantine])] == sorted([first, second])


def test_a_batch_with_an_unrecorded_entry_is_incomplete_and_one_without_manifest_too(
    qstore: Store, root: Path
) -> None:
    bid = quarantine_items(qstore, [write(root / "a.log", 5)])
    write(Path(os.fsdecode(in_store_batch(qstore, bid, root / "intruder"))), 7)
    (info,) = list_batches([qstore.quarantine])
    assert (info.manifest, info.items) == ("incomplete", 2)
    assert any("intruder is in the batch but not in its manifest" in p for p in info.problems)
    (qstore.quarantine / bid / "manifest.json").unlink()  # lost: the layout still tells
    (info,) = list_batches([qstore.quarantine])
    assert info.manifest == "incomplete" and info.plan_id is None
    empty = new_batch(qstore.quarantine)
    empty.close()
    assert _state(empty.path) == ("ok", None, ["no manifest"])  # claimed, nothing in it yet


def test_list_batches_passes_over_a_quarantine_it_cannot_open(qstore: Store, root: Path) -> None:
    bid = quarantine_items(qstore, [write(root / "a.log", 5)])
    missing = qstore.root / "gone" / QUARANTINE_NAME
    assert [b.batch_id for b in list_batches([missing, qstore.quarantine])] == [bid]


# -- the registry of quarantines on other filesystems ---------------------------------------


def test_registering_a_quarantine_once_and_finding_it(qstore: Store) -> None:
    other = Path("/mnt/disk") / QUARANTINE_NAME
    odd = Path(os.fsdecode(b"/mnt/d\xffsk/" + QUARANTINE_NAME.encode()))
    assert known_quarantines(qstore) == [qstore.quarantine]
    register_quarantine(qstore, other)
    register_quarantine(qstore, odd)
    register_quarantine(qstore, other)  # already there: a no-op
    assert known_quarantines(qstore) == [qstore.quarantine, other, odd]
    registry = qstore.root / QUARANTINES_NAME
    assert stat.S_IMODE(os.stat(registry).st_mode) == 0o600
    assert read_registry(qstore) == ([os.fsencode(other), os.fsencode(odd)], [])
    assert registry_problems(qstore) == [] and registry_error(qstore) is None


@pytest.mark.parametrize(
    "path",
    ["/mnt/disk/quarantine", "mnt/.hygiene-nb-quarantine", "/mnt/../etc/.hygiene-nb-quarantine",
     "/.hygiene-nb-quarantine/x", "/mnt/disk/.hygiene-nb-quarantine-old"],
)  # fmt: skip
def test_only_a_clean_quarantine_path_is_registered(qstore: Store, path: str) -> None:
    with pytest.raises(StoreError, match="not a quarantine directory path"):
        register_quarantine(qstore, Path(path))
    assert not (qstore.root / QUARANTINES_NAME).exists()


def test_a_bad_record_hides_none_of_the_others_and_blocks_rewriting(qstore: Store) -> None:
    good = f"/mnt/a/{QUARANTINE_NAME}"
    registry = qstore.root / QUARANTINES_NAME
    registry.write_text(
        json.dumps(
            {
                "schema": "hygiene-nb/quarantines@1",
                "quarantines": [
                    {"path_b64": base64.b64encode(good.encode()).decode()},
                    {"path_b64": "not base64!"},
                    {"path_b64": base64.b64encode(b"/etc").decode()},
                ],
            }
        )
    )
    found, problems = read_registry(qstore)
    assert found == [good.encode()] and len(problems) == 2
    assert known_quarantines(qstore) == [qstore.quarantine, Path(good)]
    (listed,) = registry_problems(qstore)
    assert listed.manifest == "invalid" and "cannot be fully read" in listed.problems[0]
    assert isinstance(registry_error(qstore), StoreError)
    before = registry.read_bytes()
    with pytest.raises(StoreError, match="cannot be used"):
        register_quarantine(qstore, Path(f"/mnt/b/{QUARANTINE_NAME}"))
    assert registry.read_bytes() == before  # never rewritten without what it could not read


@pytest.mark.parametrize(
    "content", ["{", '{"schema": "hygiene-nb/quarantines@9", "quarantines": []}',
                '{"schema": "hygiene-nb/quarantines@1", "quarantines": {}}'],
)  # fmt: skip
def test_an_unreadable_registry_is_one_problem(qstore: Store, content: str) -> None:
    (qstore.root / QUARANTINES_NAME).write_text(content)
    found, problems = read_registry(qstore)
    assert found == [] and len(problems) == 1
    assert known_quarantines(qstore) == [qstore.quarantine]


REGISTER = """
import sys
from pathlib import Path
from hygiene_nb.executor.registry import register_quarantine
from hygiene_nb.store import Store
store = Store(Path(sys.argv[1]))
for i in range(int(sys.argv[3])):
    register_quarantine(store, Path(f"/mnt/{sys.argv[2]}-{i}/.hygiene-nb-quarantine"))
"""


def test_concurrent_registrations_lose_nothing(qstore: Store) -> None:
    writers = [
        subprocess.Popen([sys.executable, "-c", REGISTER, str(qstore.root), name, "25"])
        for name in ("a", "b", "c", "d")
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0, 0]
    found, problems = read_registry(qstore)
    assert problems == [] and len(found) == len(set(found)) == 100


# -- what a stopped run leaves, and what may go -----------------------------------------------


def test_an_unused_batch_is_removed_and_one_holding_anything_is_kept(
    qstore: Store, root: Path
) -> None:
    batch = new_batch(qstore.quarantine)
    raw = os.fsencode(root / "d" / "f")
    batch.items[raw] = item(raw, "returned")  # moved back at once: nothing of it stays
    write_manifest(batch)
    os.makedirs(in_store_batch(qstore, batch.batch_id, root / "d"))  # its mirror directory
    try:
        assert remove_unused_batch(batch)
    finally:
        batch.close()
    assert not batch.path.exists()
    kept = new_batch(qstore.quarantine)
    kept.items[raw] = item(raw, "returned")
    write_manifest(kept)
    write(Path(os.fsdecode(in_store_batch(qstore, kept.batch_id, root / "d" / "partial"))), 1)
    try:
        assert not remove_unused_batch(kept)  # a partial copy inside: kept as it is
        kept.items[raw].state = "moved"
        assert not remove_unused_batch(kept)
    finally:
        kept.close()
    assert (kept.path / "manifest.json").exists()


def test_removal_leftovers_are_found_beside_their_originals(root: Path) -> None:
    staging = root / "d" / (REMOVING_PREFIX.decode() + "abc123")
    write(staging / "cache" / "x", 3)
    write(root / "d" / "other", 1)
    originals = [
        os.fsencode(root / "d" / "cache"),
        os.fsencode(root / "d" / "other"),
        os.fsencode(root / "missing-parent" / "x"),
    ]
    assert find_removal_leftovers(originals) == {
        os.fsencode(root / "d" / "cache"): os.fsencode(staging / "cache")
    }


# -- is it still the item that was moved? ---------------------------------------------------


def held(qstore: Store, bid: str, original: Path) -> tuple[str, list[str]]:
    doc = manifest_of(qstore.quarantine / bid)
    (record,) = [i for i in doc["items"] if i["original"] == str(original)]
    parts = os.fsencode(original).strip(b"/").split(b"/")
    with dir_handle(qstore.quarantine / bid) as batch_fd:
        parent = open_dirs_at(batch_fd, [b"tree", *parts[:-1]])
        try:
            return check_held(parent, parts[-1], ManifestItem(**record), doc.get("fs"))
        finally:
            os.close(parent)


def test_check_held_tells_the_same_item_a_changed_one_and_a_replaced_one(
    qstore: Store, root: Path
) -> None:
    target = write(root / "f.log", 10)
    bid = quarantine_items(qstore, [target, write(root / "g.log", 5)])
    inside = Path(os.fsdecode(in_store_batch(qstore, bid, target)))
    assert held(qstore, bid, target) == ("same", [])
    with dir_handle(qstore.quarantine / bid) as fd:
        assert changed_items(fd, manifest_of(qstore.quarantine / bid)) == []
    with inside.open("ab") as handle:
        handle.write(b"more")  # a program that kept it open wrote on
    state, what = held(qstore, bid, target)
    assert state == "changed" and any(w.startswith("size 10 → 14") for w in what)
    with dir_handle(qstore.quarantine / bid) as fd:
        changed = changed_items(fd, manifest_of(qstore.quarantine / bid))
    assert [c.original for c, _ in changed] == [str(target)]
    write(inside.with_name("other"), 10)
    os.replace(inside.with_name("other"), inside)  # another file in its place
    state, what = held(qstore, bid, target)
    assert state == "replaced" and any(w.startswith("inode") for w in what)
    inside.unlink()
    with pytest.raises(FileNotFoundError):
        held(qstore, bid, target)
    with dir_handle(qstore.quarantine / bid) as fd:  # missing: nothing of it to destroy
        assert changed_items(fd, manifest_of(qstore.quarantine / bid)) == []


def test_something_written_inside_a_held_directory_changes_it(qstore: Store, root: Path) -> None:
    write(root / "cache" / "sub" / "a", 1)
    write(root / "cache" / "b", 1)
    bid = quarantine_items(qstore, [root / "cache"])
    assert held(qstore, bid, root / "cache") == ("same", [])
    deep = Path(os.fsdecode(in_store_batch(qstore, bid, root / "cache" / "sub" / "a")))
    with deep.open("ab") as handle:  # the directory's own size, mtime and ctime stay
        handle.write(b"!")
    assert held(qstore, bid, root / "cache") == ("changed", ["sub/a inside it changed"])
    write(Path(os.fsdecode(in_store_batch(qstore, bid, root / "cache" / "new"))), 1)
    state, what = held(qstore, bid, root / "cache")
    assert state == "changed" and what[0].startswith("ctime")
