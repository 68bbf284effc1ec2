"""What a verified copy refuses: trees it cannot verify, races while copying, copies that differ.

``inventory``, ``copy_verified`` and ``verify_copy`` are called as the executor, restore and
recover call them, on real trees. Races are acted out between two steps of the copy through
the ``FileOps`` it is given (the copy makes each directory of its copy just before it opens the
original's), or, where no step of the copy can be hooked, just before the step that must see
them.
"""

from __future__ import annotations

import errno
import os
import stat
from contextlib import ExitStack
from pathlib import Path

import pytest

from hygiene_nb.executor import crossdev
from hygiene_nb.executor.crossdev import CopyMismatch, copy_verified, verify_copy
from hygiene_nb.executor.fileops import LocalFileOps
from hygiene_nb.executor.inventory import Entry, Unverifiable, inventory
from tests.executor.helpers import RaceAfterMkdir, contents, dir_handle
from tests.helpers import (
    acting_as,
    bind_mount,
    deadline,
    fuse_mount,
    tmpfs,
    world_readable_tmpdir,
    write,
)


def tree(at: Path) -> Path:
    """An item to copy: files at two levels, an empty file, an empty directory."""
    write(at / "a.bin", data=b"a" * 1000)
    write(at / "sub" / "b.bin", data=os.urandom(5000))
    write(at / "sub" / "empty")
    (at / "emptydir").mkdir()
    return at


def inventory_of(path: Path) -> dict[bytes, Entry]:
    with dir_handle(path.parent) as fd:
        return inventory(fd, os.fsencode(path.name), os.fstat(fd).st_dev)


def copy(item: Path, into: Path, ops: LocalFileOps | None = None) -> dict[bytes, Entry]:
    """``copy_verified`` of ``item`` into the directory ``into``, as the executor calls it."""
    planned = inventory_of(item)
    with dir_handle(item.parent) as src, dir_handle(into) as dst:
        return copy_verified(src, os.fsencode(item.name), dst, planned, ops or LocalFileOps())


def verify(item: Path, copied: Path, planned: dict[bytes, Entry]) -> dict[bytes, Entry]:
    with dir_handle(item.parent) as src, dir_handle(copied.parent) as dst:
        name, dst_name = os.fsencode(item.name), os.fsencode(copied.name)
        return verify_copy(src, name, dst, dst_name, planned)


# -- what cannot be verified -------------------------------------------------------------------


def test_a_special_file_inside_makes_a_tree_unverifiable(tmp_path: Path) -> None:
    item = tree(tmp_path / "item")
    os.mkfifo(item / "sub" / "pipe")
    with deadline(10), pytest.raises(Unverifiable, match="sub/pipe is a special file"):
        inventory_of(item)  # never opened: a fifo would block


def test_another_filesystem_inside_makes_a_tree_unverifiable(tmp_path: Path) -> None:
    item = tree(tmp_path / "item")
    with tmpfs(item / "sub"):
        write(item / "sub" / "on-the-tmpfs", data=b"not part of the item's filesystem")
        with pytest.raises(Unverifiable, match="sub is on another filesystem"):
            inventory_of(item)


def test_as_another_user_an_entry_that_is_not_theirs_makes_a_tree_unverifiable() -> None:
    with world_readable_tmpdir() as base:
        item = tree(base / "item")
        for path in [item, *item.rglob("*")]:
            os.chown(path, 65534, 65534)
        os.chown(item / "sub" / "b.bin", 0, 0)  # root's: a copy by nobody would be nobody's
        with acting_as(65534, 65534):
            with pytest.raises(Unverifiable, match=r"sub/b\.bin belongs to another user"):
                inventory_of(item)
            os.unlink(item / "sub" / "b.bin")  # nobody may: the directory is theirs
            assert set(inventory_of(item)) == {b"", b"a.bin", b"sub", b"sub/empty", b"emptydir"}


def test_extended_attributes_that_cannot_be_listed_make_a_tree_unverifiable(
    tmp_path: Path,
) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with tmpfs(mnt):  # a tmpfs keeps as many trusted.* attributes as memory allows
        item = tree(mnt / "item")
        target = item / "a.bin"
        # more attribute names than listxattr can return at once (64 KiB): none can be read
        for i in range(300):
            os.setxattr(target, f"trusted.{i:04d}-" + "n" * 230, b"")
        with pytest.raises(OSError) as listed:
            os.listxattr(target)
        assert listed.value.errno in (errno.E2BIG, errno.ERANGE)
        with pytest.raises(Unverifiable, match=r"extended attributes of a\.bin cannot be read"):
            inventory_of(item)


def test_on_a_filesystem_without_extended_attributes_entries_have_none(tmp_path: Path) -> None:
    mnt = tmp_path / "fuse"
    mnt.mkdir()
    with fuse_mount(mnt, {b"f": b"fuse bytes"}):
        with pytest.raises(OSError) as listed:
            os.listxattr(mnt / "f")
        assert listed.value.errno in (errno.ENOTSUP, errno.EOPNOTSUPP)
        (entry,) = inventory_of(mnt / "f").values()
        assert (entry.is_dir, entry.size, entry.xattrs) == (False, 10, ())


# -- races while copying -----------------------------------------------------------------------


def test_an_original_that_changes_while_it_is_copied_is_refused(tmp_path: Path) -> None:
    item, into = tree(tmp_path / "item"), tmp_path / "into"
    into.mkdir()

    def grow() -> None:
        with (item / "sub" / "b.bin").open("ab") as handle:
            handle.write(b"more")

    with pytest.raises(CopyMismatch, match="original changed while it was copied"):
        copy(item, into, RaceAfterMkdir(b"sub", grow))
    assert (into / "item" / "sub" / "b.bin").exists()  # the partial copy stays


def test_a_directory_replaced_while_it_is_copied_is_refused(tmp_path: Path) -> None:
    item, into = tree(tmp_path / "item"), tmp_path / "into"
    into.mkdir()

    def replace() -> None:
        (item / "sub").rename(tmp_path / "old-sub")
        write(item / "sub" / "b.bin", data=b"an impostor")

    with pytest.raises(CopyMismatch, match="directory was replaced"):
        copy(item, into, RaceAfterMkdir(b"sub", replace))
    assert list((into / "item" / "sub").iterdir()) == []  # nothing of the impostor copied


def test_a_directory_that_becomes_a_mount_point_while_it_is_copied_is_refused(
    tmp_path: Path,
) -> None:
    item, into = tree(tmp_path / "item"), tmp_path / "into"
    into.mkdir()
    with ExitStack() as stack:
        # the directory bound onto itself: the same inode, on another mount
        mount = lambda: stack.enter_context(bind_mount(item / "sub", item / "sub"))  # noqa: E731
        with pytest.raises(Unverifiable, match="sub is a mount point now"):
            copy(item, into, RaceAfterMkdir(b"sub", mount))
    assert list((into / "item" / "sub").iterdir()) == []


def test_a_file_replaced_while_it_is_copied_is_refused(tmp_path: Path) -> None:
    item, into = tree(tmp_path / "item"), tmp_path / "into"
    into.mkdir()

    def replace() -> None:
        write(tmp_path / "impostor", data=b"b" * 5000)
        os.replace(tmp_path / "impostor", item / "sub" / "b.bin")

    with pytest.raises(CopyMismatch, match="file was replaced"):
        copy(item, into, RaceAfterMkdir(b"sub", replace))
    assert not (into / "item" / "sub" / "b.bin").exists()


def test_a_copy_made_by_another_user_is_theirs_and_verified() -> None:
    with world_readable_tmpdir() as base:
        item, into = tree(base / "item"), base / "into"
        into.mkdir()
        (item / "a.bin").chmod(0o440)
        (item / "emptydir").chmod(0o750)
        for path in [into, item, *item.rglob("*")]:
            os.chown(path, 65534, 65534)
        before = contents(item)
        with acting_as(65534, 65534):
            verified = copy(item, into)
        assert contents(into / "item") == before  # bytes and modes
        copied = [into / "item", *(into / "item").rglob("*")]
        assert {(os.lstat(p).st_uid, os.lstat(p).st_gid) for p in copied} == {(65534, 65534)}
        assert all(e.digest for e in verified.values() if not e.is_dir)


# -- copies that differ from their original ----------------------------------------------------


@pytest.fixture
def copied(tmp_path: Path) -> tuple[Path, Path, dict[bytes, Entry]]:
    """An item, its verified copy, and the inventory it was copied by."""
    item, into = tree(tmp_path / "item"), tmp_path / "into"
    into.mkdir()
    planned = inventory_of(item)
    copy(item, into)
    assert set(verify(item, into / "item", planned)) == set(planned)
    return item, into / "item", planned


def test_a_copy_holding_an_entry_more_does_not_verify(
    copied: tuple[Path, Path, dict[bytes, Entry]],
) -> None:
    item, copy_path, planned = copied
    write(copy_path / "sub" / "stray", data=b"")
    with pytest.raises(CopyMismatch, match="does not hold the same entries"):
        verify(item, copy_path, planned)


@pytest.mark.parametrize("change", ["lost", "value"])
def test_a_copy_whose_extended_attributes_differ_does_not_verify(
    tmp_path: Path, change: str
) -> None:
    item, into = tree(tmp_path / "item"), tmp_path / "into"
    into.mkdir()
    os.setxattr(item / "sub", "user.note", b"kept")
    planned = inventory_of(item)
    copy(item, into)
    if change == "lost":
        os.removexattr(into / "item" / "sub", "user.note")
        why = r"extended attributes of sub could not be kept by its copy \(user.note\)"
    else:
        os.setxattr(into / "item" / "sub", "user.note", b"other")
        why = r"extended attributes of sub could not be kept by its copy \(their values differ\)"
    with pytest.raises(Unverifiable, match=why):
        verify(item, into / "item", planned)


def test_a_copy_with_other_bytes_does_not_verify(
    copied: tuple[Path, Path, dict[bytes, Entry]],
) -> None:
    item, copy_path, planned = copied
    b_bin = copy_path / "sub" / "b.bin"
    data = b_bin.read_bytes()
    b_bin.chmod(0o600)
    b_bin.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))  # same size, one bit
    with pytest.raises(CopyMismatch, match=r"sub/b\.bin differs from its copy"):
        verify(item, copy_path, planned)
    b_bin.write_bytes(data + b"!")
    with pytest.raises(CopyMismatch, match="same number of bytes"):
        verify(item, copy_path, planned)


def test_a_copied_file_replaced_by_a_directory_before_it_is_read_does_not_verify(
    copied: tuple[Path, Path, dict[bytes, Entry]], monkeypatch: pytest.MonkeyPatch
) -> None:
    item, copy_path, planned = copied
    real = crossdev._hash

    def replaced_then_read(dir_fd: int, name: bytes, rel: bytes) -> str:
        if rel == b"a.bin" and (copy_path / "a.bin").is_file():  # after both inventories
            (copy_path / "a.bin").unlink()
            (copy_path / "a.bin").mkdir()
        return real(dir_fd, name, rel)

    monkeypatch.setattr(crossdev, "_hash", replaced_then_read)
    with pytest.raises(CopyMismatch, match="not a regular file"):
        verify(item, copy_path, planned)
    assert stat.S_ISDIR(os.lstat(copy_path / "a.bin").st_mode)
