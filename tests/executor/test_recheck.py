"""Plan and execute run one re-check: the same change gives the same code at either stage.

Each case changes a real tree, once between the scan and the plan (the plan leaves the entry
out) and once between the plan and the execution (the executor skips it), and both must name
it with the same code from the table's ``check`` stage.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.codes import ITEM_CODES
from hygiene_nb.executor import execute_plan
from hygiene_nb.store import Store
from tests.helpers import write

Change = Callable[[Path], None]


def _gone(root: Path) -> None:
    (root / "data" / "scratch.bin").unlink()


def _grew(root: Path) -> None:
    with open(root / "data" / "scratch.bin", "ab") as out:
        out.write(b"more")


def _rewritten_mtime_put_back(root: Path) -> None:
    path = root / "data" / "scratch.bin"
    before = path.stat()
    path.write_bytes(b"y" * before.st_size)  # same size, new bytes
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # as `touch -d` would


def _dir_gained_a_file(root: Path) -> None:
    write(root / "web" / "node_modules" / "pkg" / "thesis.tex", 5)


def _symlink_on_path(root: Path) -> None:
    shutil.copytree(root / "data", root / "elsewhere", symlinks=True)
    shutil.rmtree(root / "data")
    (root / "data").symlink_to(root / "elsewhere")


def _replaced_by_fifo(root: Path) -> None:
    path = root / "data" / "scratch.bin"
    path.unlink()
    os.mkfifo(path)


def _keep_marker_above(root: Path) -> None:
    write(root / "data" / ".hygiene-nb-keep")


def _git_tracks_it(root: Path) -> None:
    subprocess.run(["git", "init", "-q", str(root / "data")], check=True)
    subprocess.run(["git", "-C", str(root / "data"), "add", "scratch.bin"], check=True)


@pytest.fixture
def tmpfs_inside(world: dict[str, Path]) -> Iterator[Change]:
    """A tmpfs mounted inside the candidate directory (unmounted afterwards)."""
    mounted: list[Path] = []

    def mount(root: Path) -> None:
        target = root / "web" / "node_modules" / "pkg"
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(target)], check=True)
        mounted.append(target)

    yield mount
    for target in mounted:
        subprocess.run(["umount", str(target)], check=True)


CASES: list[tuple[str, str, Change | None, str]] = [
    ("gone", "data/scratch.bin", _gone, "gone"),
    ("grew", "data/scratch.bin", _grew, "changed-since-review"),
    ("ctime only", "data/scratch.bin", _rewritten_mtime_put_back, "changed-since-review"),
    ("subtree", "web/node_modules", _dir_gained_a_file, "changed-since-review"),
    ("symlink on path", "data/scratch.bin", _symlink_on_path, "symlink-on-path"),
    ("fifo", "data/scratch.bin", _replaced_by_fifo, "special-file"),
    ("keep marker", "data/scratch.bin", _keep_marker_above, "now-protected"),
    ("git", "data/scratch.bin", _git_tracks_it, "now-protected"),
    ("mount", "web/node_modules", None, "contains-mount"),  # the tmpfs_inside fixture
]


def _code_at_plan(world: dict[str, Path], rel: str, change: Change) -> list[str]:
    root, store = world["root"], world["store"]
    api.scan_root(root, store=store)
    api.annotate([str(root / rel)], store=store, decision="delete")
    change(root)
    plan = api.make_plan(root, store=store).plan
    assert plan["candidates"] == []
    return [e["code"] for e in plan["excluded"]]


def _code_at_execute(world: dict[str, Path], rel: str, change: Change) -> list[str]:
    root, store = world["root"], world["store"]
    api.scan_root(root, store=store)
    api.annotate([str(root / rel)], store=store, decision="delete")
    issued = api.make_plan(root, store=store)
    assert [c["path"] for c in issued.plan["candidates"]] == [str(root / rel)]
    change(root)
    result = execute_plan(issued.plan_path, store=Store(store))  # the dry run checks as execute
    assert result.moved == []
    return [s.code for s in result.skipped]


@pytest.mark.parametrize("stage", ["plan", "execute"])
@pytest.mark.parametrize(("case", "rel", "change", "code"), CASES, ids=[c[0] for c in CASES])
def test_the_same_change_gives_the_same_code_at_plan_and_at_execute(
    world: dict[str, Path],
    tmpfs_inside: Change,
    stage: str,
    case: str,
    rel: str,
    change: Change | None,
    code: str,
) -> None:
    assert ("check", code) in ITEM_CODES, case
    act = change if change is not None else tmpfs_inside
    at = _code_at_plan if stage == "plan" else _code_at_execute
    assert at(world, rel, act) == [code]
    assert (world["canary"] / "precious").read_bytes() == b"do not touch"
