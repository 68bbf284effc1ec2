"""Copies keep extended attributes and ACLs, or refuse: ``--allow-copy`` and its restore.

The originals are on a tmpfs (which keeps ``user.*`` attributes and POSIX ACLs since Linux
6.6), the store on the test directory's filesystem. ACLs are set as the
``system.posix_acl_access`` / ``system.posix_acl_default`` attributes directly (the kernel's
binary format), so no ``setfacl`` is needed.
"""

from __future__ import annotations

import errno
import os
import struct
from pathlib import Path

import pytest

from hygiene_nb.executor import execute_plan, restore_batch
from hygiene_nb.store import Store
from tests.executor.helpers import (
    confirm_for,
    contents,
    in_batch,
    make_plan,
    outcomes,
    volume_unusable,
)
from tests.helpers import write

_USER_OBJ, _USER, _GROUP_OBJ, _MASK, _OTHER = 0x01, 0x02, 0x04, 0x10, 0x20
_UNDEFINED = 0xFFFFFFFF


def acl(*, user: int, perm: int, obj: int = 6, group: int = 4, other: int = 4) -> bytes:
    """A POSIX ACL as the kernel stores it: the owner, one named user, group, mask, other."""
    entries = [
        (_USER_OBJ, obj, _UNDEFINED),
        (_USER, perm, user),
        (_GROUP_OBJ, group, _UNDEFINED),
        (_MASK, perm | group, _UNDEFINED),
        (_OTHER, other, _UNDEFINED),
    ]
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def xattrs(path: Path) -> dict[str, bytes]:
    return {
        n: os.getxattr(path, n, follow_symlinks=False)
        for n in os.listxattr(path, follow_symlinks=False)
    }


def set_on(path: Path, name: str, value: bytes) -> None:
    try:
        os.setxattr(path, name, value, follow_symlinks=False)
    except OSError as exc:
        if exc.errno in (errno.ENOTSUP, errno.EOPNOTSUPP):
            pytest.skip(f"{path}'s filesystem keeps no {name} here ({exc.strerror})")
        raise


def test_a_copy_and_its_restore_keep_extended_attributes_and_acls(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mnt = xworld["mnt"]
    volume_unusable(monkeypatch)
    a_bin, sub, log = mnt / "cache" / "a.bin", mnt / "cache" / "sub", mnt / "old.log"
    set_on(a_bin, "user.origin", b"downloaded from somewhere")  # a read-only file (0440)
    set_on(sub, "user.mime_type", b"inode/directory")
    set_on(sub, "system.posix_acl_default", acl(user=4321, perm=5))  # what new files inherit
    set_on(log, "system.posix_acl_access", acl(user=4321, perm=6))
    set_on(log, "user.empty", b"")
    wanted = {p: xattrs(p) for p in (a_bin, sub, log, mnt / "cache")}
    assert wanted[log].keys() == {"system.posix_acl_access", "user.empty"}
    modes = {p: os.stat(p).st_mode for p in wanted}
    before = contents(mnt / "cache")
    plan = make_plan(xworld, "mnt/cache", "mnt/old.log")
    store = Store(xworld["store"])
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
    assert result.status == "done" and result.batch_id and not log.exists()
    batch = store.quarantine / result.batch_id
    for path, attrs in wanted.items():
        assert xattrs(in_batch(batch, path)) == attrs, path  # the copy in the store keeps them

    back = restore_batch(store, result.batch_id, execute=True)

    assert back.status == "done" and back.blocked == []
    for path, attrs in wanted.items():
        assert xattrs(path) == attrs, path
        assert os.stat(path).st_mode == modes[path], path
    assert contents(mnt / "cache") == before


def test_an_extended_attribute_the_store_cannot_keep_refuses_the_copy(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    mnt = xworld["mnt"]
    volume_unusable(monkeypatch)
    # an attribute value too large for the store's filesystem (ext4 keeps one block's worth;
    # tmpfs up to 64 KiB): found by trying, skipped where the store's filesystem keeps it too
    probe = write(xworld["tmp"] / "probe", 1)
    value = b""
    for size in (8 * 1024, 60 * 1024):
        try:
            os.setxattr(probe, "user.big", b"v" * size)
        except OSError:
            value = b"v" * size
            break
    if not value:
        pytest.skip("the store's filesystem keeps every user.* value a tmpfs does")
    set_on(mnt / "old.log", "user.big", value)
    before = (mnt / "old.log").read_bytes()
    plan = make_plan(xworld, "mnt/old.log")
    store = Store(xworld["store"])
    dry = execute_plan(plan.plan_path, store=store, allow_copy=True)
    assert [m.dest.method for m in dry.moved] == ["copy"]  # only the copy itself can tell
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
    assert outcomes(result) == {str(mnt / "old.log"): "copy-unverifiable"}
    (skip,) = result.skipped
    assert "user.big" in skip.message and "cannot keep" in skip.message
    assert (mnt / "old.log").read_bytes() == before
    assert os.getxattr(mnt / "old.log", "user.big") == value
