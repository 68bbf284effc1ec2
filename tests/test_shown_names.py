"""Names are shown with their control characters escaped; a dry run creates nothing.

A name can hold a newline, a carriage return or an escape sequence: printed raw, it forges
lines of the dry run or drives the terminal. Text output and the Markdown plan show them as
``\\n``, ``\\r``, ``\\x1b``; JSON keeps the exact string (JSON escapes it).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from hygiene_nb import api
from hygiene_nb.render import shown
from tests.helpers import write

_RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # all but the line separator


def hostile_plan(tmp_path: Path) -> tuple[Path, Path, api.PlanResult, list[Path]]:
    root, store = tmp_path / "r", tmp_path / "store"
    names = ["two\nmoved  /etc/passwd", "back\rspace.tmp", "bell\x1b[2Jclear.tmp", "c1\x9bx.tmp"]
    files = [write(root / name, 10) for name in names]
    api.scan_root(root, store=store)
    api.annotate([str(f) for f in files], store=store, decision="delete")
    return root, store, api.make_plan(root, store=store), files


def test_the_dry_run_shows_control_characters_escaped(tmp_path: Path) -> None:
    _, store, plan, files = hostile_plan(tmp_path)
    assert plan.candidates == len(files)
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "execute", plan.plan_path, "--store", str(store)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not _RAW_CONTROL.search(done.stdout)
    lines = done.stdout.splitlines()
    for f in files:
        (line,) = [m for m in lines if shown(str(f)) in m]
        assert "would move" in line
    assert not any(m.startswith("moved") for m in lines)  # no forged line
    as_json = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "execute", plan.plan_path, "--store", str(store),
         "--json"], capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    moved = {m["path"] for m in json.loads(as_json.stdout)["moved"]}
    assert moved == {str(f) for f in files}  # JSON keeps the exact names


def test_the_markdown_plan_has_no_raw_control_characters(tmp_path: Path) -> None:
    _, _, plan, files = hostile_plan(tmp_path)
    markdown = Path(plan.markdown_path).read_text()
    assert not _RAW_CONTROL.search(markdown)
    for f in files:
        assert f"`{shown(str(f))}`" in markdown


def test_annotate_and_errors_show_names_escaped(tmp_path: Path, store: Path) -> None:
    target = write(tmp_path / "r" / "x\x1b[31mred", 1)
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "annotate", str(target), "--decision", "keep",
         "--note", "n\x1bote", "--store", str(store)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0 and not _RAW_CONTROL.search(done.stdout), done.stdout
    assert "x\\x1b[31mred" in done.stdout and "n\\x1bote" in done.stdout
    bad = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "scan", str(tmp_path / "no\x1b[2Jroot"),
         "--store", str(store)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 2 and not _RAW_CONTROL.search(bad.stderr), bad.stderr


def test_a_dry_run_with_a_store_that_does_not_exist_creates_nothing(tmp_path: Path) -> None:
    _, _, plan, files = hostile_plan(tmp_path)
    nowhere = tmp_path / "nonexistent" / "x"
    for command in (
        ["execute", plan.plan_path],
        ["restore", "batch-20260101T000000Z-00000000"],
        ["purge", "batch-20260101T000000Z-00000000"],
        ["quarantine", "list"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "hygiene_nb", *command, "--store", str(nowhere), "--json"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode in (0, 2, 3), done.stdout
        assert not (tmp_path / "nonexistent").exists(), command
    assert all(f.exists() for f in files)
