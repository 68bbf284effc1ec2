"""Plan and execute run one re-check: the same change gives the same code at either stage.

Each case changes a real tree, once between the scan and the plan (the plan leaves the entry
out) and once between the plan and the execution (the executor skips it), and both must name
it with the same code from the table's ``check`` stage.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.codes import ITEM_CODES
from hygiene_nb.executor import Confirmation, execute_plan
from hygiene_nb.fs.fingerprint import signed64
from hygiene_nb.fs.mounts import mounted_inside
from hygiene_nb.recheck import Rechecker, Reviewed
from hygiene_nb.store import Store
from tests.executor.helpers import confirm_for, forge_plan
from tests.helpers import tmpfs, write

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


# -- what the table above cannot show -------------------------------------------------------

BAD_DIR = b"d\xff"  # not UTF-8: its text form names another path


@pytest.mark.parametrize("stage", ["plan", "execute"])
def test_a_keep_marker_in_a_directory_whose_name_is_not_utf8_protects_what_it_holds(
    world: dict[str, Path], stage: str
) -> None:
    root, store = world["root"], world["store"]
    folder = os.fsencode(root) + b"/" + BAD_DIR
    target = folder + b"/old.bin"
    write(Path(os.fsdecode(target)), 10)
    api.scan_root(root, store=store)
    api.annotate([target], store=store, decision="delete")

    def mark() -> None:
        write(Path(os.fsdecode(folder + b"/.hygiene-nb-keep")))

    if stage == "plan":
        mark()
        plan = api.make_plan(root, store=store).plan
        assert plan["candidates"] == []
        (left_out,) = plan["excluded"]
        code, message = left_out["code"], left_out["message"]
    else:
        issued = api.make_plan(root, store=store)
        assert len(issued.plan["candidates"]) == 1
        mark()
        result = execute_plan(issued.plan_path, store=Store(store), confirm=confirm_for(issued))
        assert result.moved == []
        (skip,) = result.skipped
        code, message = skip.code, skip.message
    assert code == "now-protected"
    assert f"{os.fsencode(root).decode()}/d\\xff holds a .hygiene-nb-keep marker" in message
    assert os.path.exists(target)


def test_files_git_does_not_track_in_its_work_tree_are_planned_and_moved(
    world: dict[str, Path],
) -> None:
    root, store = world["root"], world["store"]
    subprocess.run(["git", "init", "-q", str(root / "data")], check=True)  # tracks nothing
    api.scan_root(root, store=store)
    rels = ["data/scratch.bin", "data/keep.txt"]  # one work tree: git is asked once
    api.annotate([str(root / r) for r in rels], store=store, decision="delete")

    issued = api.make_plan(root, store=store)
    assert sorted(c["path"] for c in issued.plan["candidates"]) == sorted(
        str(root / r) for r in rels
    )
    result = execute_plan(issued.plan_path, store=Store(store), confirm=confirm_for(issued))

    assert sorted(m.path for m in result.moved) == sorted(str(root / r) for r in rels)
    assert result.skipped == [] and not any((root / r).exists() for r in rels)


@pytest.mark.parametrize("stage", ["plan", "execute"])
def test_a_mount_made_right_after_the_mount_check_is_found_by_the_walk(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, stage: str
) -> None:
    """The mount table said nothing is mounted inside; a mount made just then is met by the
    subtree walk, which checks the mount of every directory it opens."""
    root, store = world["root"], world["store"]
    inside = root / "web" / "node_modules" / "pkg"
    api.scan_root(root, store=store)
    api.annotate([str(root / "web" / "node_modules")], store=store, decision="delete")
    with contextlib.ExitStack() as mounts:

        def then_mounted(dir_fd: int, name: bytes) -> str:
            found = mounted_inside(dir_fd, name)
            mounts.enter_context(tmpfs(inside))
            return found

        if stage == "plan":
            monkeypatch.setattr("hygiene_nb.recheck.mounted_inside", then_mounted)
            plan = api.make_plan(root, store=store).plan
            assert plan["candidates"] == []
            found = [(e["code"], e["message"]) for e in plan["excluded"]]
        else:
            issued = api.make_plan(root, store=store)
            monkeypatch.setattr("hygiene_nb.recheck.mounted_inside", then_mounted)
            result = execute_plan(issued.plan_path, store=Store(store))
            assert result.moved == []
            found = [(s.code, s.message) for s in result.skipped]
        ((code, message),) = found
        assert code == "contains-mount"
        assert "pkg: another filesystem is mounted there" in message.lower()
    assert (inside / "index.js").stat().st_size == 3000


def test_a_home_named_in_the_config_after_the_plan_is_protected_when_acting(
    world: dict[str, Path],
) -> None:
    root, store = world["root"], world["store"]
    home = root / "backups" / "alice"
    write(home / ".profile", data=b"umask 077\n")
    write(home / "notes.txt", data=b"mine")
    api.scan_root(root, store=store)
    api.annotate([str(root / "backups")], store=store, decision="delete")
    issued = api.make_plan(root, store=store)
    assert [c["path"] for c in issued.plan["candidates"]] == [str(root / "backups")]
    (store / "config.toml").write_text(f'[roots."{root}"]\nhomes = ["{home}"]\n')

    result = execute_plan(issued.plan_path, store=Store(store), confirm=confirm_for(issued))

    assert result.moved == []
    assert [(s.path, s.code) for s in result.skipped] == [(str(root / "backups"), "now-protected")]
    assert "home" in result.skipped[0].message.lower()
    assert (home / ".profile").read_bytes() == b"umask 077\n"


def test_a_registered_plan_naming_a_directory_that_holds_vcs_data_moves_nothing(
    world: dict[str, Path],
) -> None:
    root, store = world["root"], world["store"]
    write(root / "vendor" / "lib" / "lib.c", 20)
    write(root / "vendor" / ".git" / "HEAD", data=b"ref: refs/heads/main\n")
    api.scan_root(root, store=store)
    api.annotate([str(root / "data" / "scratch.bin")], store=store, decision="delete")
    base = api.make_plan(root, store=store)
    forged = forge_plan(base, store, [root / "vendor"])  # no `hygiene-nb plan` would hold it
    doc = forged["doc"]
    confirm = Confirmation(doc["plan_id"], doc["plan_digest"], "quarantine")

    result = execute_plan(forged["path"], store=Store(store), confirm=confirm)

    assert result.moved == []
    assert [(s.path, s.code) for s in result.skipped] == [(str(root / "vendor"), "now-protected")]
    assert "VCS data" in result.skipped[0].message
    assert (root / "vendor" / ".git" / "HEAD").exists()


def test_a_directory_reviewed_without_a_fingerprint_is_never_unchanged(tmp_path: Path) -> None:
    root = tmp_path / "r"
    write(root / "d" / "f", 3)
    st = os.lstat(root / "d")
    item = Reviewed(
        str(root / "d"),
        os.fsencode(root / "d"),
        "dir",
        signed64(st.st_dev),
        signed64(st.st_ino),
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
    )
    with Rechecker(str(root)) as checker:
        found = checker.check(item)
        checker.close()  # closing again, as leaving the block does, is harmless
        assert checker.fd == -1
    assert found is not None and found.code == "changed-since-review"
    assert "not fingerprinted" in found.detail


@pytest.mark.parametrize(
    "rel",
    [
        "home/.local/share",  # holds the storage
        "home/.local/share/containers",  # is it
        "home/.local/share/containers/storage/overlay/abc/diff/layer.bin",  # is inside it
    ],
)
def test_a_plan_naming_container_storage_moves_nothing(
    world: dict[str, Path], monkeypatch: pytest.MonkeyPatch, rel: str
) -> None:
    root, store = world["root"], world["store"]
    monkeypatch.setenv("HOME", str(root / "home"))
    storage = root / "home" / ".local" / "share" / "containers" / "storage"
    write(storage / "overlay" / "abc" / "diff" / "layer.bin", 500)
    write(storage / "libpod" / "bolt_state.db", 20)
    api.scan_root(root, store=store)
    api.annotate([str(root / "data" / "scratch.bin")], store=store, decision="delete")
    base = api.make_plan(root, store=store)
    forged = forge_plan(base, store, [root / rel])  # classification would never plan it
    doc = forged["doc"]
    confirm = Confirmation(doc["plan_id"], doc["plan_digest"], "quarantine")

    result = execute_plan(forged["path"], store=Store(store), confirm=confirm)

    assert result.moved == []
    assert [(s.path, s.code) for s in result.skipped] == [(str(root / rel), "now-protected")]
    assert "(container-storage)" in result.skipped[0].message
    assert (storage / "overlay" / "abc" / "diff" / "layer.bin").stat().st_size == 500
