"""Helpers the tests share (fixtures live in conftest.py).

Files made with a size, what du says, a scratch directory and a child process as another user,
tmpfs and bind mounts that are always unmounted, an immutable file, and a deadline for what
could hang.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


def write(path: Path, size: int = 0, data: bytes | None = None) -> Path:
    """Create a file with ``size`` bytes (or ``data``), making parents."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if data is not None else b"x" * size)
    return path


def du_bytes(path: Path | bytes, *, apparent: bool) -> int:
    """What GNU du says of a path: ``-sb --apparent-size`` or ``-sB1``."""
    args = ["du", "-sb", "--apparent-size"] if apparent else ["du", "-sB1"]
    out = subprocess.run([*args, os.fsdecode(path)], check=True, capture_output=True).stdout
    return int(out.split()[0])


@contextmanager
def world_readable_tmpdir() -> Iterator[Path]:
    """A scratch directory another user can reach (pytest's tmp_path is under a 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="hygiene-nb-nobody-", dir="/tmp"))
    try:
        path.chmod(0o755)
        yield path
    finally:
        for dirpath, dirnames, _ in os.walk(path):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o755)
        shutil.rmtree(path)


def as_nobody(work: Callable[[], Any]) -> Any:
    """Run ``work`` in a forked child as user 'nobody' (permissions apply); return its JSON result.

    Root bypasses permissions, so tests of unreadable entries drop to 'nobody' in a child.
    ``work`` must return something ``json.dumps`` can write.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, work, report, exit without cleanup
        code = 1
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            result = work()
            with os.fdopen(write_fd, "w") as out:
                json.dump(result, out)
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(data)


@contextmanager
def acting_as_nobody() -> Iterator[None]:
    """Act as user 'nobody' in this very process for the block: its effective ids only, so
    root's come back after (skips where the test does not run as root).

    Permissions apply to what the block does, as with ``as_nobody``; unlike a forked child, the
    code it runs is measured by coverage and raises in the test itself. Whatever the block makes
    belongs to nobody: make it in a ``world_readable_tmpdir``.
    """
    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root")
    os.setegid(65534)
    os.seteuid(65534)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)


@contextmanager
def tmpfs(where: Path, options: str = "size=1m") -> Iterator[Path]:
    """A small tmpfs mounted on ``where`` for the block; skips the test where that is impossible.

    Another filesystem inside a tree is what mount-point handling is about; only root can make
    one here.
    """
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "hygiene-nb-test", str(where)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"mount is not usable here ({exc})")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    mounted = None
    try:
        mounted = _mount_id(where)
        yield where
    finally:
        _unmount(where, mounted)


@contextmanager
def bind_mount(source: Path, where: Path, *, read_only: bool = False) -> Iterator[Path]:
    """``source`` bind-mounted on ``where`` for the block (the same filesystem: same ``st_dev``).

    Skips the test where mounting is impossible (not root, no mount permission); unmounts in
    any case, lazily as a last resort.
    """
    if os.geteuid() != 0:
        pytest.skip("a bind mount needs root")
    try:
        done = subprocess.run(
            ["mount", "--bind", str(source), str(where)], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"mount is not usable here ({exc})")
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.strip()}")
    mounted = None
    try:
        mounted = _mount_id(where)
        if read_only:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], check=True)
        yield where
    finally:
        _unmount(where, mounted)


@contextmanager
def immutable(path: Path) -> Iterator[Path]:
    """``path`` immutable (``chattr +i``) for the block: not even root may unlink or rename it.

    Skips the test where that is impossible (not root, no chattr, a filesystem without the
    attribute); the attribute is always cleared afterwards.
    """
    if os.geteuid() != 0:
        pytest.skip("making a file immutable needs root")
    try:
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    except OSError as exc:
        pytest.skip(f"chattr is not usable here ({exc})")
    if done.returncode != 0:
        pytest.skip(f"cannot make a file immutable here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True, capture_output=True)


def _mount_id(where: Path) -> int | None:
    from hygiene_nb.fs.mounts import mount_id

    fd = os.open(where, os.O_PATH | os.O_CLOEXEC)  # a directory or a file mounted on one
    try:
        return mount_id(fd)
    finally:
        os.close(fd)


def _unmount(where: Path, mounted: int | None) -> None:
    """Unmount what a test mounted on ``where``, wherever it is now (a move takes it along)."""
    points = []
    if mounted is not None:
        with open("/proc/self/mountinfo", "rb") as info:
            fields = [line.split(b" ") for line in info]
        points = [
            Path(os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), f[4])))
            for f in fields
            if int(f[0]) == mounted
        ]
    points = points or [where]
    if subprocess.run(["umount", str(points[0])], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(points[0])], capture_output=True)


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail with TimeoutError instead of hanging (a fifo that was opened would block)."""

    def fail(*_: object) -> None:
        raise TimeoutError("hung (was a fifo opened?)")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
