"""Mount ids: statx, the /proc fallback, and "cannot tell" (which always refuses)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.fs import mounts
from tests.helpers import bind_mount, tmpfs, write


def _ids(path: Path) -> tuple[int | None, int | None]:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        return mounts.mount_id(fd), mounts.mount_id_at(fd, b"inner")
    finally:
        os.close(fd)


def test_statx_and_the_proc_fallback_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "d" / "inner").mkdir(parents=True)
    (tmp_path / "other").mkdir()
    with bind_mount(tmp_path / "other", tmp_path / "d" / "inner"):
        by_statx = _ids(tmp_path / "d")
        monkeypatch.setattr(mounts, "_STATX", None)  # a libc or kernel without it
        by_proc = _ids(tmp_path / "d")
    assert by_statx == by_proc
    outer, inner = by_statx
    assert outer is not None and inner is not None and outer != inner


def test_a_mount_that_cannot_be_told_keeps_every_entry_out_of_a_plan(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "r"
    write(root / "cache" / "a.bin", 10)
    write(root / "f.log", 3)
    store = tmp_path / "store"
    api.scan_root(root, store=store)
    api.annotate([str(root / "cache"), str(root / "f.log")], store=store, decision="delete")
    monkeypatch.setattr(mounts, "_STATX", None)
    monkeypatch.setattr(mounts, "_fdinfo_mount_id", lambda fd: None)
    plan = api.make_plan(root, store=store)
    # a file can be a mount point too (a file bind-mounted over it): unknown is never safe
    assert {e["path"]: e["code"] for e in plan.plan["excluded"]} == {
        str(root / "cache"): "contains-mount",
        str(root / "f.log"): "contains-mount",
    }
    assert all("cannot be told" in e["message"] for e in plan.plan["excluded"])


def test_mountinfo_escapes_are_undone() -> None:
    assert mounts._unescape(rb"/a\040b\011c\134d") == b"/a b\tc\\d"


def test_the_mount_table_is_read_again_as_soon_as_a_mount_changes(tmp_path: Path) -> None:
    """Kept between questions, but a mount or unmount made meanwhile is always seen."""
    from hygiene_nb.fs.mounts import mount_table

    where = tmp_path / "m"
    where.mkdir()
    first = mount_table()
    assert first is not None and mount_table() is first  # unchanged: not read again
    assert mounts.mount_points_below(os.fsencode(where)) == []
    with tmpfs(where):
        assert mounts.mount_points_below(os.fsencode(where)) == [os.fsencode(where)]
    assert mounts.mount_points_below(os.fsencode(where)) == []
