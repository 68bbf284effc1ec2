"""The one module that moves and removes: no-replace moves, link-safe and fifo-safe removal."""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.executor import fileops, hooks
from hygiene_nb.executor.fileops import LocalFileOps, remove_tree
from hygiene_nb.fs import mounts
from hygiene_nb.fs.mounts import MountInside
from tests.helpers import deadline, files_made_as, world_readable_tmpdir


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


def test_a_directory_is_never_moved_into_itself(tmp_path: Path) -> None:
    (tmp_path / "d" / "inner").mkdir(parents=True)
    with dirfd(tmp_path) as top, dirfd(tmp_path / "d") as d, pytest.raises(OSError):
        # renameat2 refuses (EINVAL); the link fallback has nothing for directories
        LocalFileOps().rename_noreplace(top, b"d", d, b"itself")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == ["inner"]


def test_remove_tree_removes_nothing_where_the_mount_cannot_be_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "batch" / "item" / "sub").mkdir(parents=True)
    (tmp_path / "batch" / "item" / "sub" / "f").write_bytes(b"kept")
    monkeypatch.setattr(mounts, "_STATX", None)  # a kernel that does not say (before 5.8)
    monkeypatch.setattr(mounts, "_fdinfo_mount_id", lambda fd: None)
    with dirfd(tmp_path / "batch") as batch, pytest.raises(MountInside, match="cannot be told"):
        remove_tree(batch, b"item")
    assert (tmp_path / "batch" / "item" / "sub" / "f").read_bytes() == b"kept"


def _with_digest(item: Path) -> dict[bytes, fileops.Verified]:
    """``_identities`` of a file item, with the SHA-256 of its bytes (as a verified copy has)."""
    (dev, ino, size, mtime, ctime, _) = _identities(item)[b""]
    return {b"": (dev, ino, size, mtime, ctime, hashlib.sha256(item.read_bytes()).hexdigest())}


def _staged(parent: Path) -> list[Path]:
    return [p for p in parent.iterdir() if p.name.startswith(fileops.REMOVING_PREFIX.decode())]


def _remove(parent: Path, name: str, verified: dict[bytes, fileops.Verified]) -> int:
    with dirfd(parent) as fd:
        return fileops.remove_original_after_verified_copy(fd, name.encode(), verified)


def _at_checkpoint(monkeypatch: pytest.MonkeyPatch, point: str, act: Callable[[], None]) -> None:
    """Run ``act`` the first time the removal reaches the checkpoint ``point``."""
    done: list[str] = []

    def at(name: str) -> None:
        if name == point and not done:
            done.append(name)
            act()

    monkeypatch.setattr("hygiene_nb.executor.fileops.checkpoint", at)


def test_the_staging_directory_must_be_ours() -> None:
    with world_readable_tmpdir() as base:
        parent = base / "p"
        parent.mkdir(mode=0o777)
        parent.chmod(0o777)
        (parent / "item").write_bytes(b"verified")
        verified = _identities(parent / "item")
        # as root on an NFS export with root_squash: what root makes belongs to nobody
        with files_made_as(4242), pytest.raises(OSError) as info:
            _remove(parent, "item", verified)
        assert info.value.errno == errno.EPERM and "not ours" in str(info.value)
        assert (parent / "item").read_bytes() == b"verified"
        (staging,) = _staged(parent)
        assert os.lstat(staging).st_uid == 4242 and list(staging.iterdir()) == []


def test_a_refusal_after_some_entries_were_removed_puts_back_the_rest_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = tmp_path / "item"
    item.mkdir()
    (item / "a").write_bytes(b"first")
    (item / "b").write_bytes(b"second")
    verified = _identities(item)
    writers: list[int] = []

    def someone_opens_b() -> None:  # in its staging directory, after "a" was unlinked
        (staging,) = _staged(tmp_path)
        writers.append(os.open(staging / "item" / "b", os.O_WRONLY | os.O_APPEND))

    _at_checkpoint(monkeypatch, "between-unlinks", someone_opens_b)
    try:
        with pytest.raises(OSError) as info:
            _remove(tmp_path, "item", verified)
    finally:
        for fd in writers:
            os.close(fd)
    assert writers and info.value.errno == errno.EBUSY
    assert "1 of its entries were removed already and the rest was put back" in str(info.value)
    assert sorted(p.name for p in item.iterdir()) == ["b"]
    assert (item / "b").read_bytes() == b"second"
    assert _staged(tmp_path) == []


class Interrupt(BaseException):
    """Stands for Ctrl-C (or any end of the run) in the middle of the removal."""


def test_an_interrupt_after_the_last_unlink_leaves_nothing_staged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "item").write_bytes(b"copied")
    verified = _with_digest(parent / "item")

    def interrupt() -> None:
        raise Interrupt

    _at_checkpoint(monkeypatch, "between-unlinks", interrupt)
    with pytest.raises(Interrupt):
        _remove(parent, "item", verified)
    assert list(parent.iterdir()) == []  # removed (its copy holds it), and no staging left


def test_what_cannot_be_put_back_stays_staged_and_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = tmp_path / "item"
    item.mkdir()
    (item / "f").write_bytes(b"verified")
    verified = _identities(item)

    def change_and_take_the_place() -> None:
        (staging,) = _staged(tmp_path)
        with (staging / "item" / "f").open("ab") as handle:
            handle.write(b" and more")
        item.write_bytes(b"someone else's, at the item's place")

    _at_checkpoint(monkeypatch, "during-removal", change_and_take_the_place)
    with pytest.raises(OSError) as info:
        _remove(tmp_path, "item", verified)
    (staging,) = _staged(tmp_path)
    assert info.value.errno == errno.EEXIST
    assert "could not be put back" in str(info.value)
    assert f"stays at {staging.name}/item" in str(info.value)
    assert (staging / "item" / "f").read_bytes() == b"verified and more"
    assert item.read_bytes() == b"someone else's, at the item's place"


def test_an_item_replaced_by_a_special_file_is_not_removed(tmp_path: Path) -> None:
    (tmp_path / "item").write_bytes(b"copied")
    verified = _with_digest(tmp_path / "item")
    (tmp_path / "item").unlink()
    os.mkfifo(tmp_path / "item")
    with deadline(10), pytest.raises(fileops.RemovalRefused) as info:
        _remove(tmp_path, "item", verified)
    assert info.value.code == "changed-since-review"
    assert stat.S_ISFIFO(os.lstat(tmp_path / "item").st_mode) and _staged(tmp_path) == []


def test_a_record_that_does_not_describe_the_item_itself_removes_nothing(tmp_path: Path) -> None:
    item = tmp_path / "item"
    item.mkdir()
    (item / "f").write_bytes(b"copied")
    verified = {rel: v for rel, v in _identities(item).items() if rel}
    with pytest.raises(fileops.RemovalRefused) as info:
        _remove(tmp_path, "item", verified)
    assert info.value.code == "changed-since-review"
    assert (item / "f").read_bytes() == b"copied"


def test_entries_removed_after_the_verification_keep_the_item(tmp_path: Path) -> None:
    item = tmp_path / "item"
    item.mkdir()
    (item / "f").write_bytes(b"copied")
    (item / "g").write_bytes(b"copied too")
    verified = _identities(item)
    (item / "g").unlink()
    with pytest.raises(fileops.RemovalRefused, match="entries were removed") as info:
        _remove(tmp_path, "item", verified)
    assert info.value.code == "changed-since-review"
    assert (item / "f").read_bytes() == b"copied" and _staged(tmp_path) == []


def test_an_item_rewritten_just_before_its_rename_is_put_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = tmp_path / "item"
    item.write_bytes(b"verified")
    verified = _with_digest(item)
    real = LocalFileOps.rename_noreplace

    def rewrite_then_rename(self: LocalFileOps, *args: Any) -> None:
        if item.exists() and item.read_bytes() == b"verified":
            st = os.stat(item)
            item.write_bytes(b"REWRITES")  # the same size, its mtime put back
            os.utime(item, ns=(st.st_atime_ns, st.st_mtime_ns))
        real(self, *args)

    # the item's own ctime changes with the rename into staging, so only its bytes can tell
    monkeypatch.setattr(LocalFileOps, "rename_noreplace", rewrite_then_rename)
    with pytest.raises(fileops.RemovalRefused, match="bytes changed") as info:
        _remove(tmp_path, "item", verified)
    assert info.value.code == "changed-since-review"
    assert item.read_bytes() == b"REWRITES" and _staged(tmp_path) == []


def test_a_file_that_changes_between_its_stat_and_its_read_is_not_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = tmp_path / "item"
    item.write_bytes(b"verified")
    verified = _with_digest(item)
    real = fileops._sha256

    def touched_then_read(dir_fd: int, name: bytes, expect: Any) -> str:
        os.utime(name, ns=(0, 0), dir_fd=dir_fd)  # after it was read again, before the hash
        return real(dir_fd, name, expect)

    monkeypatch.setattr(fileops, "_sha256", touched_then_read)
    with pytest.raises(fileops.RemovalRefused, match="bytes changed"):
        _remove(tmp_path, "item", verified)
    assert item.read_bytes() == b"verified" and os.stat(item).st_mtime_ns == 0


def test_a_directory_swapped_between_its_stat_and_its_opening_is_not_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = tmp_path / "item"
    (item / "sub").mkdir(parents=True)
    (item / "sub" / "f").write_bytes(b"copied")
    verified = _identities(item)
    real = fileops.open_dir_at
    swapped: list[bytes] = []

    def swap_then_open(dir_fd: int, name: bytes) -> int:
        if name == b"sub" and not swapped:
            swapped.append(name)
            os.rename(b"sub", b"sub-before", src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            os.mkdir(b"sub", dir_fd=dir_fd)
        return real(dir_fd, name)

    monkeypatch.setattr(fileops, "open_dir_at", swap_then_open)
    with pytest.raises(OSError) as info:
        _remove(tmp_path, "item", verified)
    assert swapped and info.value.errno == errno.ESTALE
    assert sorted(p.name for p in item.iterdir()) == ["sub", "sub-before"]
    assert (item / "sub-before" / "f").read_bytes() == b"copied" and _staged(tmp_path) == []
