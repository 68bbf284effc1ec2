"""Running one command for the benchmark: its wall time, its own peak RSS, and its process tree's.

``measure`` starts the command through ``bench/_trampoline.py`` (see its docstring for why), so
``ru_maxrss`` is the command's own. With ``sample_every``, it also reads ``/proc`` while the
command runs and keeps the largest sum of RSS over the command and every process it started (a
report runs a Jupyter kernel beside itself), and the largest sum of PSS (each shared page split
between the processes that map it). A child vfork() started shares its parent's address space
until it calls exec, and is counted once, in its parent. A peak shorter than the interval can
be missed, so ``tree_peak_kib`` is never below the command's own ``ru_maxrss``.
"""

from __future__ import annotations

import ctypes
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

__all__ = [
    "TRAMPOLINE",
    "MeasureError",
    "Measurement",
    "Member",
    "measure",
    "tail",
    "tree_members",
    "tree_rss_kib",
]

TRAMPOLINE = Path(__file__).resolve().with_name("_trampoline.py")
_PAGE_KIB = os.sysconf("SC_PAGE_SIZE") // 1024


class MeasureError(RuntimeError):
    """A command could not be run or measured (not found, timed out, trampoline failed)."""


@dataclass
class Measurement:
    """One run of one command: wall seconds, peak RSS of the command itself, its exit code.

    With ``sample_every`` (else None, empty, 0): ``tree_peak_kib`` is the largest sampled sum
    of RSS over the command's process tree, ``tree_peak_members`` each process in that sample,
    ``tree_peak_pss_kib`` the largest sampled sum of PSS, ``samples`` how many were taken.
    """

    seconds: float
    maxrss_kib: int
    returncode: int
    stdout: bytes
    stderr: bytes
    tree_peak_kib: int | None = None
    tree_peak_members: list[Member] = field(default_factory=list)
    tree_peak_pss_kib: int | None = None
    samples: int = 0


def tail(data: bytes, lines: int = 8) -> str:
    """The last ``lines`` lines of a command's output, on one line."""
    text = data.decode(errors="replace").strip()
    return " | ".join(text.splitlines()[-lines:]) or "(no stderr)"


def _parents() -> dict[int, int]:
    """pid → parent pid of every process /proc lists now (one that ends meanwhile is left out)."""
    found: dict[int, int] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and ')', so split after the last
        fields = stat[stat.rfind(b")") + 2 :].split()
        found[int(name)] = int(fields[1])
    return found


# kcmp(2) tells whether two processes share one address space: a child that vfork() started
# shares its parent's until it calls exec, and /proc shows it with all of its parent's memory.
_SYS_KCMP = {"x86_64": 312, "aarch64": 272, "riscv64": 272, "i686": 349, "armv7l": 378}
_KCMP_VM = 1
_LIBC = ctypes.CDLL(None, use_errno=True)


def _shares_vm(a: int, b: int) -> bool:
    """Whether processes ``a`` and ``b`` share one address space (False where kcmp is absent)."""
    number = _SYS_KCMP.get(platform.machine())
    return number is not None and _LIBC.syscall(number, a, b, _KCMP_VM, 0, 0) == 0


@dataclass(frozen=True)
class Member:
    """One process of a sampled tree: its name, RSS and PSS (shared pages split), in KiB."""

    name: str
    rss_kib: int
    pss_kib: int


def _pss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
        for line in fh:
            if line.startswith(b"Pss:"):
                return int(line.split()[1])
    return 0


def tree_members(pid: int, *, include_self: bool = True) -> list[Member]:
    """``pid`` and each of its descendants, as /proc shows them now.

    A child that shares its parent's address space (started by vfork, not yet exec'd) is
    left out: its memory is its parent's, counted there.
    """
    parents = _parents()
    children: dict[int, list[int]] = {}
    for child, parent in parents.items():
        children.setdefault(parent, []).append(child)
    todo = list(children.get(pid, []))
    tree = [pid] if include_self else []
    while todo:
        current = todo.pop()
        todo.extend(children.get(current, []))
        if not _shares_vm(current, parents[current]):
            tree.append(current)
    found = []
    for member in tree:
        try:
            with open(f"/proc/{member}/statm", "rb") as fh:
                rss = int(fh.read().split()[1]) * _PAGE_KIB
            with open(f"/proc/{member}/comm", "rb") as fh:
                name = fh.read().decode(errors="replace").strip()
            pss = _pss_kib(member)
        except (OSError, IndexError, ValueError):
            continue  # it ended between the listing and now
        found.append(Member(name, rss, pss))
    return found


def tree_rss_kib(pid: int, *, include_self: bool = True) -> int:
    """The summed RSS (KiB) of ``pid`` and all its descendants, read from /proc.

    Pages two processes share (the same libraries, pages a fork left shared) count in each, so
    the sum is an upper bound of what the tree holds together; the sum of PSS is not.
    """
    return sum(m.rss_kib for m in tree_members(pid, include_self=include_self))


def measure(
    argv: Sequence[str | os.PathLike[str]],
    *,
    capture_stdout: bool = False,
    timeout: float | None = None,
    sample_every: float | None = None,
    env: dict[str, str] | None = None,
) -> Measurement:
    """Run ``argv`` (no shell) through the trampoline; return its wall time and ``ru_maxrss``.

    The trampoline (``bench/_trampoline.py``) forks the command and reads its rusage with
    ``os.wait4``; see its docstring for why the benchmark process does not spawn it directly.
    stdout goes to /dev/null unless ``capture_stdout``; stderr is always captured. With
    ``sample_every`` (seconds), the command's process tree (the trampoline left out) is sampled
    at that interval for ``tree_peak_kib``. ``env`` replaces the environment.

    Raises:
        MeasureError: the trampoline failed or the command timed out.
    """
    cmd = [os.fspath(a) for a in argv]
    read_fd, write_fd = os.pipe()
    peak, pss_peak, samples = 0, 0, 0
    members: list[Member] = []
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                [sys.executable, "-I", "-S", str(TRAMPOLINE), str(write_fd), *cmd],
                stdin=subprocess.DEVNULL,
                stdout=out if capture_stdout else subprocess.DEVNULL,
                stderr=err,
                pass_fds=(write_fd,),
                start_new_session=True,
                env=env,
            )
        except OSError:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        deadline = None if timeout is None else time.monotonic() + timeout
        with os.fdopen(read_fd, "rb") as result:
            while True:
                left = None if deadline is None else deadline - time.monotonic()
                wait = sample_every if left is None else min(sample_every or left, left)
                try:
                    proc.wait(timeout=None if wait is None else max(0.0, wait))
                    break
                except subprocess.TimeoutExpired:
                    if deadline is not None and time.monotonic() >= deadline:
                        os.killpg(proc.pid, signal.SIGKILL)
                        proc.wait()
                        raise MeasureError(f"{cmd[0]} timed out after {timeout:.0f} s") from None
                    if sample_every is not None:
                        now = tree_members(proc.pid, include_self=False)
                        if sum(m.rss_kib for m in now) > peak:
                            peak, members = sum(m.rss_kib for m in now), now
                        pss_peak = max(pss_peak, sum(m.pss_kib for m in now))
                        samples += 1
            line = result.read().decode()
        out.seek(0)
        err.seek(0)
        stdout = out.read() if capture_stdout else b""
        stderr = err.read()
    fields = line.split()
    if proc.returncode != 0 or len(fields) != 3:
        raise MeasureError(f"trampoline failed (exit {proc.returncode}): {tail(stderr)}")
    maxrss = int(fields[1])
    sampled = sample_every is not None
    return Measurement(
        float(fields[0]),
        maxrss,
        int(fields[2]),
        stdout,
        stderr,
        tree_peak_kib=max(peak, maxrss) if sampled else None,
        tree_peak_members=members,
        tree_peak_pss_kib=pss_peak if sampled else None,
        samples=samples,
    )
