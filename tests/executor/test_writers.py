"""Asking whether another program writes to a file: every answer ``Probe`` and ``tree_writer`` give.

Files are held open for writing by this process (a read lease is refused to anyone while a
writer exists, its own process included); a file that is not ours is probed as another user
(no ``CAP_LEASE`` then); a filesystem is mounted inside a tree, or on it just before it is
opened.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.executor.writers import Probe, tree_writer
from tests.helpers import acting_as, deadline, tmpfs, world_readable_tmpdir, write


@contextmanager
def handle(path: Path) -> Iterator[int]:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


@contextmanager
def held_for_writing(path: Path) -> Iterator[None]:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC)
    try:
        yield
    finally:
        os.close(fd)


def probed(path: Path, expect: os.stat_result | None = None) -> str:
    with handle(path.parent) as fd, Probe() as probe:
        return probe.file(fd, os.fsencode(path.name), expect)


def test_a_file_nobody_writes_to_is_free_and_one_held_open_for_writing_is_not(
    tmp_path: Path,
) -> None:
    f = write(tmp_path / "f", data=b"x")
    assert probed(f) == probed(f, os.stat(f)) == ""
    with held_for_writing(f):
        assert probed(f) == "another program has it open for writing"
    assert probed(f) == ""


def test_off_the_main_thread_nothing_can_be_told(tmp_path: Path) -> None:
    f = write(tmp_path / "f", data=b"x")
    handler = signal.getsignal(signal.SIGIO)
    answers: list[str] = []
    worker = threading.Thread(target=lambda: answers.append(probed(f)))
    worker.start()
    worker.join(timeout=30)
    # SIGIO can be set aside only on the main thread: without that, no lease is asked
    assert answers == ["whether another program writes to it cannot be told off the main thread"]
    assert signal.getsignal(signal.SIGIO) == handler


def test_what_cannot_be_probed_says_why(tmp_path: Path) -> None:
    f = write(tmp_path / "f", data=b"x")
    (tmp_path / "link").symlink_to(f)
    os.mkfifo(tmp_path / "pipe")
    assert probed(tmp_path / "link").startswith("it cannot be opened to ask whether it is in use")
    with deadline(10):  # opened without blocking, never read
        assert probed(tmp_path / "pipe") == "it is not a regular file any more"
    before = os.stat(f)
    f.write_bytes(b"changed")
    assert probed(f, before) == "it changed while it was checked"


def test_a_file_that_is_not_ours_cannot_be_probed_without_cap_lease() -> None:
    with world_readable_tmpdir() as base:
        f = write(base / "roots", data=b"x")  # root's, readable by anyone
        f.chmod(0o644)
        with acting_as(65534, 65534):
            why = probed(f)
            whole = tree_writer_of(base)
    assert why == "whether another program writes to it cannot be told (Permission denied)"
    assert whole == f"roots: {why}"


def tree_writer_of(path: Path) -> str:
    with handle(path.parent) as fd:
        return tree_writer(fd, os.fsencode(path.name))


def test_tree_writer_names_the_file_written_to_and_skips_what_is_not_a_file(
    tmp_path: Path,
) -> None:
    item = tmp_path / "item"
    write(item / "a" / "quiet", data=b"q")
    live = write(item / "a" / "live.log", data=b"l")
    (item / "link").symlink_to(live)
    os.mkfifo(item / "pipe")
    with deadline(10):
        assert tree_writer_of(item) == tree_writer_of(live) == ""
        with held_for_writing(live):
            assert tree_writer_of(item) == "live.log: another program has it open for writing"
            assert tree_writer_of(live) == "another program has it open for writing"
        assert tree_writer_of(item / "link") == tree_writer_of(item / "pipe") == ""


def test_tree_writer_does_not_enter_another_filesystem(tmp_path: Path) -> None:
    item = tmp_path / "item"
    (item / "mnt").mkdir(parents=True)
    write(item / "here", data=b"h")
    with tmpfs(item / "mnt"):
        inside = write(item / "mnt" / "written", data=b"w")
        with held_for_writing(inside):
            assert tree_writer_of(item) == ""  # the mount is another filesystem's business
            with held_for_writing(item / "here"):
                assert tree_writer_of(item) == "here: another program has it open for writing"


def test_a_filesystem_mounted_on_a_directory_just_before_it_is_opened_is_not_entered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    item = tmp_path / "item"
    write(item / "sub" / "f", data=b"f")
    real_open = os.open
    with ExitStack() as stack:

        def mount_then_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            if path == b"sub" and flags & os.O_DIRECTORY and not stack_holds:
                stack_holds.append(stack.enter_context(tmpfs(item / "sub")))
                written = write(item / "sub" / "g", data=b"on the new mount")
                stack.enter_context(held_for_writing(written))
            return real_open(path, flags, *args, **kwargs)

        stack_holds: list[Path] = []
        monkeypatch.setattr(os, "open", mount_then_open)
        found = tree_writer_of(item)
        monkeypatch.undo()
        assert stack_holds, "the directory was never opened"
        assert found == ""  # between its lstat and its open it became another filesystem


def test_a_tree_that_cannot_be_read_cannot_be_told_free() -> None:
    with world_readable_tmpdir() as base:
        item = base / "item"
        write(item / "f", data=b"x")
        item.chmod(0o700)  # root's: another user may not list it
        with acting_as(65534, 65534):
            why = tree_writer_of(item)
    assert why == "whether another program writes to it cannot be told (Permission denied)"
