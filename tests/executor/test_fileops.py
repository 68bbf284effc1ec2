"""The one module that moves and removes: no-replace moves, link-safe and fifo-safe removal."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hygiene_nb.executor import fileops, hooks
from hygiene_nb.executor.fileops import LocalFileOps, remove_tree
from tests.helpers import deadline


@contextmanager
def dirfd(path: Path) -> Iterator[int]:
    fd = os.open(path, fileops.DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


@pytest.mark.parametrize("occupant", ["file", "empty-dir", "dangling-link"])
@pytest.mark.parametrize("moving", ["file", "dir"])
def test_rename_never_replaces_anything_at_the_target(
    tmp_path: Path, occupant: str, moving: str
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    dst.mkdir()
    if moving == "file":
        (src / "item").write_bytes(b"moving")
    else:
        (src / "item").mkdir()
        (src / "item" / "inner").write_bytes(b"moving")
    target = dst / "item"
    if occupant == "file":
        target.write_bytes(b"occupant")
    elif occupant == "empty-dir":
        target.mkdir()
    else:
        target.symlink_to(tmp_path / "nowhere")
    before = os.lstat(target)
    with dirfd(src) as s, dirfd(dst) as d, pytest.raises(OSError) as info:
        LocalFileOps().rename_noreplace(s, b"item", d, b"item")
    assert info.value.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR)
    after = os.lstat(target)
    assert (after.st_ino, after.st_mode) == (before.st_ino, before.st_mode)
    assert (src / "item").exists()


def test_rename_moves_when_the_target_is_free(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x")
    ino = os.lstat(tmp_path / "a" / "f").st_ino
    with dirfd(tmp_path / "a") as s, dirfd(tmp_path / "b") as d:
        LocalFileOps().rename_noreplace(s, b"f", d, b"f")
    assert not (tmp_path / "a" / "f").exists()
    assert os.lstat(tmp_path / "b" / "f").st_ino == ino


def test_link_fallback_moves_files_without_replacing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fileops, "_RENAMEAT2", None)  # a libc without renameat2
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x")
    (tmp_path / "a" / "d").mkdir()
    (tmp_path / "b" / "taken").write_bytes(b"keep me")
    (tmp_path / "a" / "taken").write_bytes(b"y")
    ops = LocalFileOps()
    with dirfd(tmp_path / "a") as s, dirfd(tmp_path / "b") as d:
        ops.rename_noreplace(s, b"f", d, b"f")
        with pytest.raises(OSError) as info:
            ops.rename_noreplace(s, b"taken", d, b"taken")
        assert info.value.errno == errno.EEXIST
        with pytest.raises(OSError):
            ops.rename_noreplace(s, b"d", d, b"d")  # no safe fallback for directories
    assert (tmp_path / "b" / "f").read_bytes() == b"x"
    assert (tmp_path / "b" / "taken").read_bytes() == b"keep me"
    assert (tmp_path / "a" / "taken").exists() and (tmp_path / "a" / "d").is_dir()


def test_remove_tree_never_follows_a_link_or_opens_a_fifo(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "canary").write_bytes(b"alive")
    doomed = tmp_path / "batch" / "item"
    (doomed / "sub").mkdir(parents=True)
    (doomed / "sub" / "f").write_bytes(b"12345")
    (doomed / "link-to-outside").symlink_to(outside)
    (doomed / "sub" / "file-link").symlink_to(outside / "canary")
    os.mkfifo(doomed / "pipe")
    with deadline(10), dirfd(tmp_path / "batch") as batch:
        count, size = remove_tree(batch, b"item")
    assert not doomed.exists()
    assert (outside / "canary").read_bytes() == b"alive"
    assert (count, size) == (6, 5)  # item, sub, f, 2 links, pipe; 5 bytes of regular data


def test_remove_tree_of_a_symlink_removes_only_the_link(tmp_path: Path) -> None:
    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "f").write_bytes(b"x")
    (tmp_path / "batch").mkdir()
    (tmp_path / "batch" / "link").symlink_to(tmp_path / "target")
    with dirfd(tmp_path / "batch") as batch:
        remove_tree(batch, b"link")
    assert (tmp_path / "target" / "f").read_bytes() == b"x"


def test_open_dir_at_refuses_a_symlink(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with dirfd(tmp_path) as fd, pytest.raises(OSError) as info:
        fileops.open_dir_at(fd, b"link")
    assert info.value.errno in (errno.ELOOP, errno.ENOTDIR)


def test_dry_run_ops_touch_nothing(tmp_path: Path) -> None:
    (tmp_path / "f").write_bytes(b"x")
    ops = fileops.DryRunFileOps()
    with dirfd(tmp_path) as fd:
        ops.rename_noreplace(fd, b"f", fd, b"g")
        ops.make_dir(fd, b"d")
    assert (tmp_path / "f").exists() and not (tmp_path / "g").exists()
    assert not (tmp_path / "d").exists()
    assert ops.calls == [("rename", b"f", b"g"), ("mkdir", b"d", b"")]


def _identities(item: Path) -> dict[bytes, fileops.Verified]:
    out: dict[bytes, fileops.Verified] = {}
    for path in [item, *item.rglob("*")]:
        st = os.lstat(path)
        rel = os.fsencode(path.relative_to(item)) if path != item else b""
        rel = b"" if rel == b"." else rel
        sized = (st.st_size, st.st_mtime_ns) if path.is_file() else (-1, -1)
        out[rel] = (st.st_dev, st.st_ino, *sized, st.st_ctime_ns, "")
    return out


def test_removal_after_a_verified_copy_cannot_be_raced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = tmp_path / "item"
    (item / "f").parent.mkdir(parents=True)
    (item / "f").write_bytes(b"copied and verified")
    (tmp_path / "victim").write_bytes(b"never copied")
    verified = _identities(item)
    real_checkpoint = hooks.checkpoint

    def attacker_then_check(name: str) -> None:
        # The swap the review acted out: put an unverified file where a verified one was
        # (between the rename into staging and the checks).
        if name == "during-removal":
            with contextlib.suppress(OSError):  # the item is staged where the attacker cannot go
                os.rename(tmp_path / "victim", item / "f")
        real_checkpoint(name)

    monkeypatch.setattr("hygiene_nb.executor.fileops.checkpoint", attacker_then_check)
    with dirfd(tmp_path) as parent:
        fileops.remove_original_after_verified_copy(parent, b"item", verified)
    assert (tmp_path / "victim").read_bytes() == b"never copied"
    assert not item.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".hygiene-nb-removing")]


def test_removal_puts_back_what_differs_from_the_verified_copy(tmp_path: Path) -> None:
    item = tmp_path / "item"
    (item / "f").parent.mkdir(parents=True)
    (item / "f").write_bytes(b"v1")
    verified = _identities(item)
    (item / "g").write_bytes(b"added after the copy")
    with dirfd(tmp_path) as parent, pytest.raises(OSError):
        fileops.remove_original_after_verified_copy(parent, b"item", verified)
    assert (item / "g").read_bytes() == b"added after the copy"
    assert (item / "f").read_bytes() == b"v1"
