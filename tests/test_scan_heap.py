"""The scan's C heap (``scan.heap``): bounded to two malloc arenas, and given back.

glibc's own report (``malloc_info``) says how many arenas a process made; threads that each
allocate are made to ask for them, in a fresh interpreter (an arena is never taken back).
"""

from __future__ import annotations

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
        assert heap.bound_arenas()
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
    print("gave back" if heap.give_back() else "kept")
    libc.fopen.restype = ctypes.c_void_p
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    out = libc.fopen(sys.argv[2].encode(), b"w")
    libc.malloc_info(0, out)
    libc.fclose(out)
    """
)


def _arenas(tmp_path: Path, mode: str) -> tuple[int, str]:
    report = tmp_path / f"{mode}.xml"
    done = subprocess.run(
        [sys.executable, "-c", _THREADS, mode, str(report)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return report.read_text().count("<heap nr="), done.stdout.strip()


def test_threads_share_two_arenas_once_bounded(tmp_path: Path) -> None:
    free, _ = _arenas(tmp_path, "free")
    bounded, said = _arenas(tmp_path, "bounded")
    assert free > heap.ARENAS  # without the bound, the threads made arenas of their own
    assert bounded <= heap.ARENAS
    assert said == "gave back"  # what the threads freed went back to the system


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
