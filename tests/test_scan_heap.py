"""The scan's C heap (``scan.heap``): bounded to two malloc arenas, and given back.

glibc's own report (``malloc_info``) says how many arenas a process made; threads that each
allocate are made to ask for them, in a fresh interpreter (an arena is never taken back).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hygiene_nb.scan import heap

pytestmark = pytest.mark.skipif(heap._glibc() is None, reason="the C library is not glibc")

_THREADS = textwrap.dedent(
    """
    import ctypes, sys, threading
    from hygiene_nb.scan import heap

    if sys.argv[1] == "bounded":
        heap.bound_arenas()
    libc = ctypes.CDLL(None)
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    start = threading.Barrier(8)

    def work():
        start.wait()  # all at once, each with its first malloc
        blocks = [libc.malloc(64 * 1024) for _ in range(64)]
        for block in blocks:
            libc.free(block)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    heap.give_back()
    libc.fopen.restype = ctypes.c_void_p
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    out = libc.fopen(sys.argv[2].encode(), b"w")
    libc.malloc_info(0, out)
    libc.fclose(out)
    """
)


def _arenas(tmp_path: Path, mode: str, **env: str) -> int:
    report = tmp_path / f"{mode}.xml"
    # the machine's own limits left out, then the ones the case sets
    clean = {k: v for k, v in os.environ.items() if k not in ("MALLOC_ARENA_MAX", "GLIBC_TUNABLES")}
    subprocess.run(
        [sys.executable, "-c", _THREADS, mode, str(report)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=clean | env,
    )
    return report.read_text().count("<heap nr=")


def test_threads_share_an_arena_per_core_once_bounded(tmp_path: Path) -> None:
    free = _arenas(tmp_path, "free")
    bounded = _arenas(tmp_path, "bounded")
    wanted = max(heap.ARENAS, len(os.sched_getaffinity(0)))
    assert free > wanted  # without the bound, the threads made arenas of their own
    assert bounded <= wanted


def test_a_limit_the_user_set_is_left_as_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MALLOC_ARENA_MAX", "1")
    assert heap.arenas_wanted() is None and not heap.bound_arenas()
    monkeypatch.delenv("MALLOC_ARENA_MAX")
    monkeypatch.setenv("GLIBC_TUNABLES", "glibc.malloc.arena_max=1")
    assert heap.arenas_wanted() is None
    # a scan under that limit keeps it: one arena, not the two it would allow
    assert _arenas(tmp_path, "bounded", GLIBC_TUNABLES="glibc.malloc.arena_max=1") == 1


def test_the_scan_command_bounds_the_arenas_before_it_walks(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from click.testing import CliRunner

    from hygiene_nb import api
    from hygiene_nb.cli.app import cli

    calls: list[str] = []

    def bound_arenas() -> bool:
        calls.append("bound")
        return True

    monkeypatch.setattr(heap, "bound_arenas", bound_arenas)
    real_scan = api.scan_root

    def scan_root(*args: object, **kwargs: object) -> object:
        calls.append("walk")
        return real_scan(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(api, "scan_root", scan_root)
    (tmp_path / "tree").mkdir()
    result = CliRunner().invoke(cli, ["scan", str(tmp_path / "tree"), "--store", str(store)])
    assert result.exit_code == 0, result.output
    assert calls == ["bound", "walk"]
