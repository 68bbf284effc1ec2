"""A program that keeps a file open for writing, and a rewrite whose mtime was put back.

``--allow-copy`` must never unlink an original that someone still writes to (the late writes
would go nowhere) nor one rewritten after its copy was verified; the rename path moves such a
file (the writes follow it into the batch) but says so and does not count it as freed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import IO, Any

import pytest

from hygiene_nb.executor import execute_plan, list_store_batches
from hygiene_nb.store import Store
from tests.executor.helpers import (
    confirm_for,
    in_batch,
    make_plan,
    outcomes,
    states,
    volume_unusable,
)
from tests.helpers import write

WRITER = """
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
print("ready", flush=True)
sys.stdin.readline()
os.write(fd, b"late write\\n")
os.close(fd)
print("done", flush=True)
"""


@contextmanager
def writer(path: Path) -> Iterator[Callable[[], None]]:
    """A separate process holding ``path`` open for writing; call the result to make it write
    once more and close it."""
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    stdin, stdout = proc.stdin, proc.stdout
    assert stdin is not None and stdout is not None

    def finish() -> None:
        stdin.write(b"go\n")
        stdin.flush()
        assert stdout.readline() == b"done\n"
        assert proc.wait(timeout=30) == 0

    try:
        assert stdout.readline() == b"ready\n"
        yield finish
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)
        for pipe in (stdin, stdout):
            close(pipe)


def close(pipe: IO[bytes]) -> None:
    with suppress(OSError):
        pipe.close()


@pytest.mark.parametrize("held", ["old.log", "cache/sub/b.bin"])
def test_allow_copy_never_unlinks_a_file_someone_is_writing(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch, held: str
) -> None:
    mnt = xworld["mnt"]
    volume_unusable(monkeypatch)
    item = "old.log" if held == "old.log" else "cache"
    plan = make_plan(xworld, f"mnt/{item}")
    store = Store(xworld["store"])
    before = (mnt / held).read_bytes()
    with writer(mnt / held) as finish:
        result = execute_plan(
            plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True
        )
        assert outcomes(result) == {str(mnt / item): "in-use"}
        (skip,) = result.skipped
        assert "open for writing" in skip.message and "put back" in skip.message
        finish()  # the late write lands in the original, which is in its place
    assert (mnt / held).read_bytes() == before + b"late write\n"
    assert [p.name for p in mnt.iterdir() if p.name.startswith(".hygiene-nb-")] == []
    # the verified copy in the batch is not counted as moved: the original is the item
    (batch,) = list(store.quarantine.iterdir())
    assert states(batch) == {os.fsencode(mnt / item): "returned"}
    (info,) = list_store_batches(store)
    assert info.items == 0
    assert [x["code"] for x in info.leftovers] == ["copy-not-moved"]  # named, a duplicate
    receipt = json.loads(Path(str(result.receipt_path)).read_text())
    assert receipt["moved"] == 0 and receipt["moved_bytes"] == 0


def rewrite_keeping_mtime(path: Path) -> None:
    """New bytes of the same size, then the old mtime put back with `touch -d`."""
    st = os.stat(path)
    data = path.read_bytes()
    path.write_bytes(bytes(b ^ 0x55 for b in data))
    stamp = f"@{st.st_mtime_ns // 10**9}.{st.st_mtime_ns % 10**9:09d}"
    subprocess.run(["touch", "-m", "-d", stamp, str(path)], check=True)
    now = os.stat(path)
    assert (now.st_size, now.st_mtime_ns) == (st.st_size, st.st_mtime_ns)


@pytest.mark.parametrize(
    ("point", "item", "victim"),
    [
        ("before-removal", "old.log", "old.log"),  # the item itself, before its rename
        ("before-removal", "cache", "cache/sub/b.bin"),  # a file inside, before the rename
        ("during-removal", "old.log", "{staging}/old.log"),  # in its staging directory
        ("during-removal", "cache", "{staging}/cache/a.bin"),
    ],
)
def test_allow_copy_keeps_an_original_rewritten_with_its_mtime_put_back(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch, point: str, item: str, victim: str
) -> None:
    from hygiene_nb.executor import hooks

    mnt = xworld["mnt"]
    volume_unusable(monkeypatch)
    plan = make_plan(xworld, f"mnt/{item}")
    store = Store(xworld["store"])
    rewritten: list[bytes] = []
    real = hooks.checkpoint

    def at(name: str) -> None:
        if name == point:
            (staging,) = [
                p for p in mnt.iterdir() if p.name.startswith(".hygiene-nb-removing-")
            ] or [mnt]
            path = mnt / victim.format(staging=staging.name)
            rewrite_keeping_mtime(path)
            rewritten.append(path.read_bytes())
        real(name)

    monkeypatch.setattr("hygiene_nb.executor.moves.checkpoint", at)
    monkeypatch.setattr("hygiene_nb.executor.fileops.checkpoint", at, raising=False)
    result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
    assert len(rewritten) == 1
    assert outcomes(result) == {str(mnt / item): "changed-since-review"}
    at_place = mnt / victim.replace("{staging}/", "")
    assert at_place.read_bytes() == rewritten[0]  # the new bytes are in place, not removed
    assert [p.name for p in mnt.iterdir() if p.name.startswith(".hygiene-nb-")] == []
    (batch,) = list(store.quarantine.iterdir())
    assert states(batch) == {os.fsencode(mnt / item): "returned"}


def test_the_rename_path_records_a_file_open_for_writing_and_does_not_count_it_freed(
    tmp_path: Path,
) -> None:
    world = {"root": tmp_path / "r", "store": tmp_path / "store"}
    write(world["root"] / "live.log", data=b"x" * 5000)
    write(world["root"] / "dir" / "live.txt", data=b"y" * 700)
    write(world["root"] / "dir" / "other", data=b"z" * 11)
    write(world["root"] / "idle.log", data=b"i" * 300)
    plan = make_plan(world, "live.log", "dir", "idle.log")
    store = Store(world["store"])
    live, txt = world["root"] / "live.log", world["root"] / "dir" / "live.txt"
    with writer(live) as finish_log, writer(txt) as finish_txt:
        result = execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan))
        finish_log()
        finish_txt()
    assert result.status == "done" and len(result.moved) == 3
    assert result.bytes == 300  # only the file nobody was writing to counts as freed
    flagged = {Path(m.path).name: m.open_at_move for m in result.moved}
    assert flagged == {"live.log": True, "dir": True, "idle.log": False}
    receipt = json.loads(Path(str(result.receipt_path)).read_text())
    assert receipt["moved_bytes"] == 300
    at_move = {Path(i["path"]).name: i.get("open_at_move", False) for i in receipt["items"]}
    assert at_move == flagged
    # the late writes followed the files into the batch: nothing was lost
    batch = Path(result.batches[0]["batch_path"])
    assert in_batch(batch, world["root"] / "live.log").read_bytes().endswith(b"late write\n")
    late = in_batch(batch, world["root"] / "dir" / "live.txt").read_bytes()
    assert late == b"y" * 700 + b"late write\n"


def test_where_writers_cannot_be_asked_allow_copy_counts_the_file_as_in_use(
    xworld: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading

    mnt = xworld["mnt"]
    volume_unusable(monkeypatch)
    plan = make_plan(xworld, "mnt/old.log")
    store = Store(xworld["store"])
    before = (mnt / "old.log").read_bytes()
    done: list[Any] = []
    # off the main thread SIGIO cannot be set aside, so the lease is not asked: cannot tell
    worker = threading.Thread(
        target=lambda: done.append(
            execute_plan(plan.plan_path, store=store, confirm=confirm_for(plan), allow_copy=True)
        )
    )
    worker.start()
    worker.join(timeout=120)
    (result,) = done
    assert outcomes(result) == {str(mnt / "old.log"): "in-use"}
    assert "cannot be told" in result.skipped[0].message
    assert (mnt / "old.log").read_bytes() == before
