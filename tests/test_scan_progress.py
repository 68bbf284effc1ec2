"""A scan's progress: entries, bytes so far and the directory being read, on a terminal only."""

from __future__ import annotations

import fcntl
import io
import itertools
import json
import os
import pty
import re
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.formatting import middle_ellipsis
from hygiene_nb.scan.progress import ScanProgress, TerminalLine, progress_bar
from tests.helpers import write

UNIT = re.compile(r"\d+(\.\d)? (B|KiB|MiB|GiB)\b")
COLUMNS = 100
DEEP = "a-directory-being-read"


def _apparent_bytes(root: Path) -> int:
    """Every entry's st_size, the root's included: what the walker's rows add up to."""
    total = os.lstat(root).st_size
    for dirpath, dirnames, filenames in os.walk(root):
        total += sum(os.lstat(os.path.join(dirpath, n)).st_size for n in dirnames + filenames)
    return total


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """More entries than one walk batch holds (16,384), most of them in one directory."""
    root = tmp_path_factory.mktemp("progress") / "tree"
    for i in range(40):
        write(root / "top" / f"small{i}.txt", 100 + i)
    deep = root / "top" / DEEP
    deep.mkdir(parents=True)
    for i in range(20_000):
        (deep / f"f{i:05}").write_bytes(b"x" * (i % 7))
    return root


def _on_a_terminal(*args: str, columns: int = COLUMNS) -> tuple[int, str]:
    """Run ``hygiene-nb ARGS`` with a pseudo-terminal of ``columns`` columns as its stdio."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 30, columns, 0, 0))
    proc = subprocess.Popen(
        [sys.executable, "-m", "hygiene_nb", *args],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return proc.wait(timeout=120), out.decode("utf-8", "replace")


def _progress_lines(text: str) -> list[str]:
    """The progress line's states: what each carriage return redrew, erase codes dropped."""
    return [
        part.split("\x1b[K")[0]
        for part in text.split("\r")
        if part.startswith("scanning ") and "\x1b[K" in part
    ]


def test_a_callable_gets_entries_bytes_and_the_directory_being_read(
    big_tree: Path, tmp_path: Path
) -> None:
    seen: list[ScanProgress] = []
    info = api.scan_root(big_tree, store=tmp_path / "store", progress=seen.append)
    assert len(seen) > 1  # more than one batch
    assert [s.entries for s in seen] == sorted(s.entries for s in seen)
    assert seen[-1] == seen[-1].entries == info.entries  # it is the count itself
    assert seen[-1].bytes == _apparent_bytes(big_tree) == info.tree_bytes  # no hard links here
    assert all(a.bytes <= b.bytes for a, b in itertools.pairwise(seen))
    for s in seen:
        assert Path(s.directory).is_dir() and Path(s.directory).is_relative_to(big_tree)
    assert any(Path(s.directory).name == DEEP for s in seen[:-1])


def test_the_terminal_line_shows_entries_bytes_and_directory(
    big_tree: Path, tmp_path: Path
) -> None:
    code, text = _on_a_terminal("scan", str(big_tree), "--store", str(tmp_path / "store"))
    assert code == 0, text
    states = _progress_lines(text)
    root = middle_ellipsis(str(big_tree), COLUMNS - 1 - len("scanning  …"))
    assert states[0] == f"scanning {root} …"  # at once, before the first batch
    counting = [s for s in states[1:] if " entries, " in s]
    assert counting, text
    assert all(UNIT.search(s) for s in counting)
    assert any(DEEP in s for s in counting), counting
    assert all(len(s) <= COLUMNS - 1 for s in states)  # never wraps
    counts = [int(re.sub(r"\D", "", s.split(" entries")[0])) for s in counting]
    assert counts == sorted(counts) and counts[0] > 0
    # erased before the result is printed, which is there in full
    after = text.rsplit("\r\x1b[K", 1)[1]
    assert after.startswith(f"scanned {big_tree}: ")
    assert "entries, " not in after


def test_no_progress_text_through_a_pipe_or_with_json(big_tree: Path, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    piped = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "scan", str(big_tree), "--store", store],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == "" and "\r" not in piped.stdout and "scanning " not in piped.stdout
    code, text = _on_a_terminal("scan", str(big_tree), "--store", store, "--json")
    assert code == 0, text
    assert "\r" not in text.replace("\r\n", "\n") and "scanning " not in text
    assert json.loads(text)["entries"] > 20_000


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_the_line_is_redrawn_a_few_times_a_second_at_most() -> None:
    stream, clock = io.StringIO(), _Clock()
    line = TerminalLine("/srv", stream, interval=0.2, clock=clock)
    line(ScanProgress(10, 2048, "/srv/a"))
    line(ScanProgress(20, 4096, "/srv/b"))  # 0 s later: skipped
    clock.now += 0.25
    line(ScanProgress(30, 8192, "/srv/c"))
    line(40)  # a bare count, as older callers pass it
    clock.now += 0.25
    line(50)
    states = [p.split("\x1b[K")[0] for p in stream.getvalue().split("\r") if p]
    assert states == [
        "scanning 10 entries, 2.0 KiB  a",
        "scanning 30 entries, 8.0 KiB  c",
        "scanning 50 entries, 0 B  /srv",
    ]
    line.close()
    assert stream.getvalue().endswith("\r\x1b[K")
    line.close()  # twice: nothing more
    assert stream.getvalue().count("\r\x1b[K") == 1


def test_in_a_notebook_the_tqdm_bar_carries_bytes_and_directory(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("hygiene_nb.scan.progress._in_notebook", lambda: True)
    update, close = progress_bar("/srv")
    update(ScanProgress(5, 2048, "/srv/a"))
    time.sleep(0.25)  # past the bar's redraw interval
    update(ScanProgress(1234, 3 * 1024**2, "/srv/pandas/tests"))
    close()
    drawn = capsys.readouterr().err
    assert "1234 entries" in drawn and "3.0 MiB, pandas/tests" in drawn
    assert "0.00" not in drawn  # a count, not a scaled figure


@pytest.mark.parametrize("columns", [10, 40])
def test_wide_and_undecodable_names_never_wrap_the_line(tmp_path: Path, columns: int) -> None:
    root = tmp_path / "漢字の木"
    wide = root / ("長い名前のディレクトリ" * 3)
    wide.mkdir(parents=True)
    bad = Path(os.fsdecode(os.fsencode(str(root)) + b"/bad-\xff\xfe-dir"))
    bad.mkdir()
    for i in range(20_000):  # more than one walk batch, so the line is redrawn mid-walk
        (wide if i % 2 else bad).joinpath(f"f{i:05}").write_bytes(b"")
    code, text = _on_a_terminal(
        "scan", str(root), "--store", str(tmp_path / "store"), "--walker", "python", columns=columns
    )
    assert code == 0, text
    states = [p.split("\x1b[K")[0] for p in text.split("\r") if "\x1b[K" in p]
    assert any(s.startswith("scanning") for s in states), text
    assert all(columns_of(s) <= columns - 1 for s in states), states
    assert not any(r"\udc" in s or "\N{REPLACEMENT CHARACTER}" in s for s in states), states


def columns_of(text: str) -> int:
    """Terminal columns, counted independently of the code: east-asian wide characters two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def test_the_directory_of_a_batch_reads_bytes_as_snapshots_show_them() -> None:
    import pyarrow as pa

    from hygiene_nb.scan.progress import batch_directory

    rows = pa.record_batch(
        {"parent": pa.array([b"/r/bad\xff"], pa.binary()), "name": pa.array([b"f"], pa.binary())}
    )
    assert batch_directory(rows) == "/r/bad\\xff"
