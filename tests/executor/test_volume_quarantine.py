"""The quarantine at the top of another filesystem: found, made, trusted or refused.

``open_volume_quarantine`` (execute) and ``predict_volume_quarantine`` (the dry run) are asked
from a directory handle deep inside a tmpfs; each test builds the situation for real (a top
anyone may write, a read-only or immutable filesystem, another user's quarantine, a mount on
the quarantine, a path that no longer leads to it) and checks that nothing is trusted that
should not be, and that the dry run changes nothing.
"""

from __future__ import annotations

import errno
import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from hygiene_nb.executor.batches import QUARANTINE_NAME
from hygiene_nb.executor.fileops import LocalFileOps
from hygiene_nb.executor.volume import (
    QuarantineUntrusted,
    open_volume_quarantine,
    predict_volume_quarantine,
)
from hygiene_nb.fs import mounts
from hygiene_nb.fs.mounts import MountInside
from tests.executor.helpers import RaceAfterMkdir, dir_handle
from tests.helpers import acting_as, bind_mount, tmpfs, world_readable_tmpdir


def names(path: Path) -> list[str]:
    return sorted(p.name for p in path.iterdir())


def opened(parent: Path, ops: LocalFileOps | None = None) -> Path:
    """The path of the volume quarantine ``open_volume_quarantine`` opens from ``parent``."""
    with dir_handle(parent) as fd:
        quarantine = open_volume_quarantine(fd, os.fsencode(parent), ops or LocalFileOps())
        try:
            st, by_path = os.fstat(quarantine.fd), os.lstat(quarantine.path)
            assert (st.st_dev, st.st_ino) == (by_path.st_dev, by_path.st_ino)
            assert quarantine.dev == st.st_dev
        finally:
            quarantine.close()
        return quarantine.path


def predicted(parent: Path) -> Path:
    with dir_handle(parent) as fd:
        return predict_volume_quarantine(fd, os.fsencode(parent))


def errno_of(call: Callable[[], object]) -> str:
    """The errno name an ``OSError`` from ``call()`` carries ("" when none is raised)."""
    try:
        call()
    except OSError as exc:
        return errno.errorcode[exc.errno or 0]
    return ""


@contextmanager
def immutable(path: Path) -> Iterator[None]:
    """``chattr +i`` on ``path`` for the block (even root may not write into it then)."""
    done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot make {path} immutable here: {done.stderr.strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_the_quarantine_is_found_at_the_top_from_deep_below_and_made_once(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with tmpfs(mnt, "size=1m,mode=755"):
        deep = mnt / "a" / "b"
        deep.mkdir(parents=True)
        quarantine = mnt / QUARANTINE_NAME
        assert predicted(deep) == quarantine and not quarantine.exists()  # creatable, not made
        assert opened(deep) == quarantine
        st = os.lstat(quarantine)
        assert stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o700
        assert st.st_dev == os.stat(mnt).st_dev and st.st_uid == os.geteuid()
        before = names(mnt)
        assert predicted(deep) == quarantine == opened(mnt / "a")  # exists: used as it is
        assert names(mnt) == before and os.lstat(quarantine).st_ino == st.st_ino


def test_a_top_anyone_may_write_without_the_sticky_bit_is_untrusted(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with tmpfs(mnt, "size=1m,mode=777"):
        (mnt / "data").mkdir()
        # anyone could have put a quarantine there, or replace it later
        with pytest.raises(QuarantineUntrusted, match="writable by anyone"):
            predicted(mnt / "data")
        with pytest.raises(QuarantineUntrusted, match="writable by anyone"):
            opened(mnt / "data")
        assert names(mnt) == ["data"]


def test_no_quarantine_is_predicted_or_made_on_a_read_only_filesystem(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with tmpfs(mnt, "size=1m,mode=755"):
        (mnt / "data").mkdir()
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        assert errno_of(lambda: predicted(mnt / "data")) == "EROFS"
        assert errno_of(lambda: opened(mnt / "data")) == "EROFS"
        assert names(mnt) == ["data"]


def test_a_quarantine_removed_just_after_it_was_made_is_not_used(tmp_path: Path) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with tmpfs(mnt, "size=1m,mode=755"):
        (mnt / "data").mkdir()
        ops = RaceAfterMkdir(QUARANTINE_NAME.encode(), lambda: (mnt / QUARANTINE_NAME).rmdir())
        assert errno_of(lambda: opened(mnt / "data", ops)) == "ENOENT"
        assert ops.raced and names(mnt) == ["data"]


@pytest.mark.parametrize("frozen", ["top", "quarantine"])
def test_an_immutable_top_or_quarantine_holds_no_batch_in_the_dry_run(
    tmp_path: Path, frozen: str
) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with tmpfs(mnt, "size=1m,mode=755"):
        (mnt / "data").mkdir()
        if frozen == "quarantine":
            (mnt / QUARANTINE_NAME).mkdir(mode=0o700)
        before = names(mnt)
        with immutable(mnt / QUARANTINE_NAME if frozen == "quarantine" else mnt):
            # even root may not make a quarantine in an immutable top, nor a batch in an
            # immutable quarantine: the dry run says so instead of promising a move
            assert errno_of(lambda: predicted(mnt / "data")) == "EACCES"
        assert names(mnt) == before


def test_another_users_quarantine_cannot_be_used() -> None:
    with world_readable_tmpdir() as base:
        mnt = base / "mnt"
        mnt.mkdir()
        with tmpfs(mnt, "size=1m,mode=1777"):  # sticky: others may write, not replace
            (mnt / "data").mkdir()
            os.chown(mnt / "data", 65534, 65534)
            (mnt / QUARANTINE_NAME).mkdir(mode=0o700)  # root's
            with acting_as(65534, 65534):
                dry = errno_of(lambda: predicted(mnt / "data"))
                done = errno_of(lambda: opened(mnt / "data"))
            assert dry == done == "EACCES"
            assert names(mnt) == sorted(["data", QUARANTINE_NAME])
            assert list((mnt / QUARANTINE_NAME).iterdir()) == []


@pytest.mark.parametrize("mounted", ["tmpfs", "bind-mount"])
def test_a_quarantine_on_another_mount_than_its_top_is_untrusted(
    tmp_path: Path, mounted: str
) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with tmpfs(mnt, "size=1m,mode=755"), ExitStack() as stack:
        (mnt / "data").mkdir()
        quarantine = mnt / QUARANTINE_NAME
        quarantine.mkdir(mode=0o700)
        if mounted == "tmpfs":
            stack.enter_context(tmpfs(quarantine, "size=1m,mode=700"))
        else:  # the same filesystem (same st_dev): only the mount id tells
            elsewhere = mnt / "elsewhere"
            elsewhere.mkdir(mode=0o700)
            stack.enter_context(bind_mount(elsewhere, quarantine))
        for ask in (predicted, opened):
            with pytest.raises(QuarantineUntrusted, match="another filesystem or mount"):
                ask(mnt / "data")
        assert list(quarantine.iterdir()) == []


def test_a_quarantine_its_path_no_longer_leads_to_is_untrusted() -> None:
    with world_readable_tmpdir() as base:
        mnt = base / "x" / "mnt"
        mnt.mkdir(parents=True)
        with tmpfs(mnt, "size=1m,mode=755"):
            (mnt / "data").mkdir()
            with dir_handle(mnt / "data") as fd:
                given = os.fsencode(mnt / "data")
                (base / "x").rename(base / "y")  # the mount goes along: the path is stale
                moved = base / "y" / "mnt"
                with pytest.raises(QuarantineUntrusted, match="cannot be reached by its path"):
                    open_volume_quarantine(fd, given, LocalFileOps())
                # made through the handle, where the filesystem is now
                assert names(moved) == sorted(["data", QUARANTINE_NAME])
                (mnt / QUARANTINE_NAME).mkdir(parents=True, mode=0o700)  # a decoy at the path
                with pytest.raises(QuarantineUntrusted, match="does not lead"):
                    predict_volume_quarantine(fd, given)
                with pytest.raises(QuarantineUntrusted, match="does not lead"):
                    open_volume_quarantine(fd, given, LocalFileOps())
            assert list((moved / QUARANTINE_NAME).iterdir()) == []
            assert list((mnt / QUARANTINE_NAME).iterdir()) == []


def test_where_the_mount_cannot_be_told_no_volume_quarantine_is_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    with tmpfs(mnt, "size=1m,mode=755"):
        (mnt / "data").mkdir()
        monkeypatch.setattr(mounts, "_STATX", None)  # a kernel that does not say (before 5.8)
        monkeypatch.setattr(mounts, "_fdinfo_mount_id", lambda fd: None)
        fds_before = len(os.listdir("/proc/self/fd"))
        for ask in (predicted, opened):
            with pytest.raises(MountInside, match="cannot be told"):
                ask(mnt / "data")
        assert len(os.listdir("/proc/self/fd")) == fds_before  # the handles climbed are closed
        monkeypatch.undo()
        assert names(mnt) == ["data"]
