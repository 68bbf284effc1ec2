"""Owner names recorded at scan time: real trees whose files belong to real accounts made by
useradd, accounts deleted before and after the scan, an id cap, and records that predate them.
"""

from __future__ import annotations

import grp
import os
import pwd
from contextlib import suppress
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.scan import owners
from hygiene_nb.scan.index import ScanInfo, find_scan
from hygiene_nb.scan.owners import OwnerNames, group_name, owner_name
from hygiene_nb.scan.snapshot import read_scan_info, snapshot_file
from hygiene_nb.store import Store
from tests.helpers import Account, added_account, as_format_1, remove_account, write


def ids_on_disk(root: Path) -> tuple[set[int], set[int]]:
    """Every entry's (uid, gid) as lstat gives them, the root included."""
    uids, gids = set(), set()
    for path in [root, *root.rglob("*")]:
        st = os.lstat(path)
        uids.add(st.st_uid)
        gids.add(st.st_gid)
    return uids, gids


def names_now(uids: set[int], gids: set[int]) -> tuple[dict[str, str], dict[str, str]]:
    """What the password and group databases say of these ids (ids without an account left out)."""
    users, groups = {}, {}
    for uid in uids:
        with suppress(KeyError):
            users[str(uid)] = pwd.getpwuid(uid).pw_name
    for gid in gids:
        with suppress(KeyError):
            groups[str(gid)] = grp.getgrgid(gid).gr_name
    return users, groups


def two_owner_tree(root: Path, account: Account) -> Path:
    write(root / "mine" / "a.txt", 10)
    write(root / "mine" / "b.bin", 20)
    theirs = write(root / "theirs" / "c.txt", 30)
    os.chown(theirs, account.uid, account.gid)
    os.chown(theirs.parent, account.uid, account.gid)
    os.chown(root / "mine" / "b.bin", account.uid, -1)  # their file in my group
    return root


def test_a_scan_records_the_names_of_its_own_owner(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    write(root / "f", 3)
    info = api.scan_root(root, store=store)
    want = names_now(*ids_on_disk(root))
    assert (info.user_names, info.group_names) == want
    assert owner_name(info, os.getuid()) == pwd.getpwuid(os.getuid()).pw_name
    assert group_name(info, os.getgid()) == grp.getgrgid(os.getgid()).gr_name
    assert "owner_ids_dropped" not in info.options


def test_the_names_of_two_owners_are_kept_in_the_index_and_the_footer(
    tmp_path: Path, store: Path, other_account: Account
) -> None:
    root = two_owner_tree(tmp_path / "r", other_account)
    uids, gids = ids_on_disk(root)
    assert {os.getuid(), other_account.uid} <= uids
    info = api.scan_root(root, store=store)

    users, groups = names_now(uids, gids)
    assert (info.user_names, info.group_names) == (users, groups)
    assert info.user_names[str(other_account.uid)] == other_account.name
    assert info.group_names[str(other_account.gid)] == other_account.name  # useradd -U
    assert info.user_names[str(os.getuid())] == pwd.getpwuid(os.getuid()).pw_name
    # reloaded from the index (both ways to find it) and from the Parquet footer
    listed = api.list_snapshots(store=store)[-1]
    found = find_scan(Store(store), scan_id=info.scan_id)
    footer = read_scan_info(snapshot_file(info))
    for again in (listed, found, footer):
        assert (again.user_names, again.group_names) == (users, groups)
    # every row's owner reads by the name lstat's id has in the password database
    for row in api.load(str(root), store=store).to_pylist():
        st = os.lstat(row["path"])
        assert owner_name(listed, row["uid"]) == pwd.getpwuid(st.st_uid).pw_name, row["path"]
        assert group_name(listed, row["gid"]) == grp.getgrgid(st.st_gid).gr_name, row["path"]


def test_an_account_deleted_after_the_scan_keeps_its_name_one_deleted_before_reads_as_its_id(
    tmp_path: Path, store: Path, other_account: Account
) -> None:
    root = two_owner_tree(tmp_path / "r", other_account)
    with added_account() as gone_before, added_account() as gone_after:
        # both made before either is deleted, so neither deleted id is given to the other
        for account, name in ((gone_before, "before.txt"), (gone_after, "after.txt")):
            os.chown(write(root / name, 5), account.uid, account.gid)
        remove_account(gone_before.name)
        with pytest.raises(KeyError):
            pwd.getpwuid(gone_before.uid)
        info = api.scan_root(root, store=store)
        remove_account(gone_after.name)

    listed = api.list_snapshots(store=store)[-1]
    assert str(gone_before.uid) not in listed.user_names
    assert str(gone_before.gid) not in listed.group_names
    assert owner_name(listed, gone_before.uid) == f"uid {gone_before.uid}"
    assert group_name(listed, gone_before.gid) == f"gid {gone_before.gid}"
    # the account is gone now, but the scan says who owned the file then
    assert owner_name(listed, gone_after.uid) == gone_after.name
    assert group_name(listed, gone_after.gid) == gone_after.name
    assert owner_name(listed, other_account.uid) == other_account.name
    rows = {r["name"]: r for r in api.load(str(root), store=store).to_pylist()}
    assert owner_name(info, rows["before.txt"]["uid"]) == f"uid {gone_before.uid}"
    assert owner_name(info, rows["after.txt"]["uid"]) == gone_after.name


def test_past_the_cap_the_lowest_ids_are_named_and_the_rest_counted(
    tmp_path: Path, store: Path, other_account: Account, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = two_owner_tree(tmp_path / "r", other_account)
    uids, gids = ids_on_disk(root)
    monkeypatch.setattr(owners, "MAX_IDS", 1)
    info = api.scan_root(root, store=store)
    users, groups = names_now({min(uids)}, {min(gids)})
    assert (info.user_names, info.group_names) == (users, groups)
    assert info.options["owner_ids_dropped"] == len(uids) - 1 + len(gids) - 1
    assert (
        api.list_snapshots(store=store)[-1].options["owner_ids_dropped"]
        == (info.options["owner_ids_dropped"])
    )


def test_a_scan_recorded_without_owner_names_loads_with_none(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    write(root / "f", 3)
    info = api.scan_root(root, store=store)
    assert info.user_names  # a scan now records them…
    as_format_1(info, store)  # …one written by a format-1 writer did not
    old = api.list_snapshots(store=store)[-1]
    assert (old.format_version, old.user_names, old.group_names) == (1, {}, {})
    assert read_scan_info(snapshot_file(old)).user_names == {}
    table = api.load(str(root), store=store)
    rows = table.to_pylist()
    assert {owner_name(old, r["uid"]) for r in rows} == {"owner unknown"}  # null ids
    collected = OwnerNames()
    for batch in table.to_batches():
        collected.note(batch)  # null ids are no ids
    assert collected.names() == ({}, {})
    assert {group_name(old, r["gid"]) for r in rows} == {"owner unknown"}
    assert owner_name(old, os.getuid()) == f"uid {os.getuid()}"  # an id, but no recorded name
    assert group_name(old, os.getgid()) == f"gid {os.getgid()}"


def test_an_index_record_from_before_owner_names_loads_with_empty_dicts() -> None:
    info = ScanInfo.from_dict({"scan_id": "s1", "root": "/r", "host": "h", "started_at": "t"})
    assert (info.user_names, info.group_names) == ({}, {})
    assert owner_name(info, 1003) == "uid 1003"
