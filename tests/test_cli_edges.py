"""Bad numbers, fifos and a full disk: a coded error and the right exit code, never a
traceback or a hang."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from tests.helpers import confirmed_execute, tmpfs, write


def run(*args: str, timeout: float = 120) -> tuple[int, dict[str, Any], str]:
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", *args, "--json"],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout + done.stderr
    return done.returncode, json.loads(lines[0]), done.stderr


@pytest.fixture
def scanned(tmp_path: Path, store: Path) -> Path:
    root = tmp_path / "r"
    write(root / "f", 10)
    api.scan_root(root, store=store)
    return root


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "{root}", "--ttl", "99999999999999999"],
        ["scan", "{root}", "--max-entries", "99999999999999999999999"],
        ["scan", "{root}", "--max-seconds", "1e19"],
        ["scan", "{root}", "--max-seconds", "nan"],
        ["scan", "{root}", "--max-seconds", "inf"],
        ["summary", "{root}", "--top", "99999999999999999999999"],
        ["snapshots", "prune", "--older-than", "nan"],
        ["snapshots", "prune", "--older-than", "-1"],
        ["snapshots", "prune", "--older-than", "1e308"],
        ["snapshots", "prune", "--keep", "99999999999999999999999"],
        ["report", "{root}", "--timeout", "99999999999999999999999"],
    ],
    ids=lambda a: " ".join(a[::2] if a[0] != "snapshots" else a[1:]),
)
def test_every_number_is_bounded_at_the_command_line(
    scanned: Path, store: Path, args: list[str]
) -> None:
    before = sorted(p.name for p in store.rglob("*"))
    given = [a.replace("{root}", str(scanned)) for a in args]
    code, obj, err = run(*given, "--store", str(store))
    assert code == 2, obj
    assert obj["status"] == "error" and obj["error"]["code"] == "bad-usage"
    assert "Traceback" not in err
    assert sorted(p.name for p in store.rglob("*")) == before  # nothing was done


def test_the_library_bounds_them_too(scanned: Path, store: Path) -> None:
    from hygiene_nb.errors import UsageError

    for call in (
        lambda: api.make_plan(scanned, store=store, ttl=99999999999999999),
        lambda: api.scan_root(scanned, store=store, max_entries=10**23),
        lambda: api.scan_root(scanned, store=store, max_seconds=1e19),
        lambda: api.scan_root(scanned, store=store, max_seconds=float("nan")),
    ):
        with pytest.raises(UsageError):
            call()


def test_verify_on_a_fifo_returns_at_once_with_a_clear_error(tmp_path: Path) -> None:
    fifo = tmp_path / "receipt.json"
    os.mkfifo(fifo)
    started = time.monotonic()
    code, obj, err = run("verify", str(fifo), timeout=20)
    assert time.monotonic() - started < 20
    assert code == 2 and "not a regular file" in obj["error"]["message"]
    assert "Traceback" not in err


def test_a_rules_file_that_is_a_fifo_is_refused_without_hanging(
    scanned: Path, store: Path, tmp_path: Path
) -> None:
    fifo = tmp_path / "rules.toml"
    os.mkfifo(fifo)
    code, obj, err = run(
        "summary", str(scanned), "--rules", str(fifo), "--store", str(store), timeout=20
    )
    assert code == 2 and "not a regular file" in obj["error"]["message"], obj
    assert "Traceback" not in err


@pytest.mark.parametrize("left_kib", [0, 24, 32, 48])
def test_execute_on_a_nearly_full_store_is_a_coded_error(tmp_path: Path, left_kib: int) -> None:
    """Whichever write the full disk refuses first (the ledger's header, its claim of the plan,
    the receipt, the plan's final state), the answer is a coded error, never a traceback."""
    where = tmp_path / "disk"
    where.mkdir()
    with tmpfs(where, "size=2m"):
        root, store = where / "r", where / "store"  # one filesystem: moves stay on it
        write(root / "junk.tmp", 10)
        api.scan_root(root, store=store)
        api.annotate([str(root / "junk.tmp")], store=store, decision="delete")
        plan = api.make_plan(root, store=store)
        filler = where / "filler"
        fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
        try:  # fill the disk to the last block, then give back what the case leaves free
            while os.write(fd, b"\0" * 4096):
                pass
        except OSError:
            pass
        finally:
            os.close(fd)
        os.truncate(filler, max(0, filler.stat().st_size - left_kib * 1024))
        code, obj, err = run(*confirmed_execute(plan, store))
        assert "Traceback" not in err, err
        assert code == 1 and obj["status"] == "error", obj
        assert obj["error"]["code"] in ("store-full", "store-unusable")
        assert "space" in obj["error"]["message"], obj
