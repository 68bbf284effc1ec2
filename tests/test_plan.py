"""Plans: exclusion reasons, folding, disk re-checks, digest, permissions, Markdown, CLI."""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.errors import RootChanged, UsageError
from hygiene_nb.plan.schema import canonical_json, plan_digest
from tests.helpers import write


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A project with rebuildable parts, a key, a link, a fifo and kept data."""
    root = tmp_path / "r"
    write(root / "web" / "package.json", 2)
    write(root / "web" / "package-lock.json", 2)
    write(root / "web" / "node_modules" / "pkg" / "index.js", 3000)
    write(root / "web" / "node_modules" / "pkg" / "dist" / "bundle.js", 500)
    write(root / "web" / "app.log", 40)
    write(root / "web" / "server.pem", 5)
    (root / "web" / "link").symlink_to("/etc")
    os.mkfifo(root / "web" / "pipe")
    write(root / "data" / "keep" / "thesis.csv", 100)
    write(root / "data" / "scratch.bin", 100)
    write(root / "cache" / "a" / "deep" / "x.tmp", 10)
    return root


def decide(store: Path, *paths: Path | bytes, decision: str = "delete") -> None:
    api.annotate(
        [p if isinstance(p, bytes) else str(p) for p in paths], store=store, decision=decision
    )


def plan_of(root: Path, store: Path, **kwargs: Any) -> dict[str, Any]:
    return api.make_plan(root, store=store, **kwargs).plan


def excluded(plan: dict[str, Any]) -> dict[str, str]:
    return {e["path"]: e["code"] for e in plan["excluded"]}


def test_candidates_and_every_static_exclusion_reason(tree: Path, store: Path) -> None:
    api.scan_root(tree, store=store)
    web = tree / "web"
    decide(
        store,
        web / "node_modules",
        web / "server.pem",
        web,
        web / "link",
        web / "pipe",
        tree / "data",
        tree / "nothere",
    )
    # The ledger refuses '..' paths; a hand-edited ledger could still hold one.
    sneaky = str(tree) + "/web/../../outside"
    db = sqlite3.connect(store / "ledger.sqlite")
    db.execute(
        "INSERT INTO annotations (path_raw, path, decision, by, at) VALUES (?, ?, 'delete',"
        " 'human', '2026-01-01T00:00:00+00:00')",
        (sneaky.encode(), sneaky),
    )
    db.commit()
    db.close()
    decide(store, tree / "data" / "keep", decision="keep")
    plan = plan_of(tree, store)
    assert [c["path"] for c in plan["candidates"]] == [str(tree / "web" / "node_modules")]
    assert excluded(plan) == {
        str(tree / "web" / "server.pem"): "protected",
        str(tree / "web"): "protected",  # contains server.pem
        str(tree / "web" / "link"): "symlink",
        str(tree / "web" / "pipe"): "special-file",
        str(tree / "data"): "contains-kept-entry",
        str(tree / "nothere"): "not-in-snapshot",
        str(tree) + "/web/../../outside": "outside-root",
    }
    assert all(e["message"].endswith(".") for e in plan["excluded"])


def test_incomplete_scan_excludes_what_was_not_fully_read(tree: Path, store: Path) -> None:
    api.scan_root(tree, store=store, excludes=["deep"])
    decide(store, tree / "cache")
    assert excluded(plan_of(tree, store)) == {str(tree / "cache"): "incomplete-scan"}


def test_a_delete_inside_another_delete_is_folded(tree: Path, store: Path) -> None:
    api.scan_root(tree, store=store)
    inner = tree / "web" / "node_modules" / "pkg" / "dist"
    decide(store, tree / "web" / "node_modules", inner)
    plan = plan_of(tree, store)
    assert [c["path"] for c in plan["candidates"]] == [str(tree / "web" / "node_modules")]
    assert plan["folded"] == [{"path": str(inner), "into": str(tree / "web" / "node_modules")}]
    assert plan["summary"]["reclaim_bytes"] == sum(
        os.lstat(p).st_size
        for p in [tree / "web" / "node_modules", *(tree / "web" / "node_modules").rglob("*")]
    )


def change_touch(target: Path) -> None:
    os.utime(target, ns=(1, 1))


def change_add(target: Path) -> None:
    write(target.parent / "new-file", 1)


def change_remove(target: Path) -> None:
    target.unlink()


def change_symlink(target: Path) -> None:
    target.unlink()
    target.symlink_to("/etc/hostname")


@pytest.mark.parametrize("change", [change_touch, change_add, change_remove, change_symlink])
def test_a_change_deep_inside_a_directory_is_changed_since_review(
    tree: Path, store: Path, change: Any
) -> None:
    api.scan_root(tree, store=store)
    decide(store, tree / "cache")
    change(tree / "cache" / "a" / "deep" / "x.tmp")
    plan = plan_of(tree, store)
    assert excluded(plan) == {str(tree / "cache"): "changed-since-review"}
    assert plan["candidates"] == []


def test_a_file_that_grew_or_vanished_is_excluded(tree: Path, store: Path) -> None:
    api.scan_root(tree, store=store)
    decide(store, tree / "web" / "app.log", tree / "data" / "scratch.bin")
    (tree / "web" / "app.log").write_text("grew since the scan")
    (tree / "data" / "scratch.bin").unlink()
    plan = plan_of(tree, store)
    assert excluded(plan) == {
        str(tree / "web" / "app.log"): "changed-since-review",
        str(tree / "data" / "scratch.bin"): "gone",
    }
    messages = {e["path"]: e["message"] for e in plan["excluded"]}
    assert messages[str(tree / "web" / "app.log")].startswith("Size 40 → 19")


def test_a_parent_replaced_by_a_symlink_is_symlink_on_path(tree: Path, store: Path) -> None:
    api.scan_root(tree, store=store)
    decide(store, tree / "cache" / "a" / "deep" / "x.tmp")
    os.rename(tree / "cache" / "a", tree / "moved")
    (tree / "cache" / "a").symlink_to(tree / "moved")
    plan = plan_of(tree, store)
    assert excluded(plan) == {str(tree / "cache" / "a" / "deep" / "x.tmp"): "symlink-on-path"}


def test_plan_and_markdown_are_private_and_agree(tree: Path, store: Path) -> None:
    api.scan_root(tree, store=store)
    decide(store, tree / "web" / "node_modules", tree / "web" / "link", tree / "web" / "app.log")
    result = api.make_plan(tree, store=store)
    for path in (result.plan_path, result.markdown_path):
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    on_disk = json.loads(Path(result.plan_path).read_text())
    assert on_disk == result.plan and on_disk["plan_digest"] == plan_digest(on_disk)
    markdown = Path(result.markdown_path).read_text()
    for cand in on_disk["candidates"]:
        assert f"`{cand['path']}`" in markdown
    for exc in on_disk["excluded"]:
        assert f"`{exc['path']}` | `{exc['code']}`" in markdown
    assert result.confirm_command in markdown
    assert (
        f"| {on_disk['summary']['candidates']} | {on_disk['summary']['reclaim_bytes']} |"
        in markdown
    )


def test_digest_is_stable_and_changes_with_any_byte(tree: Path, store: Path) -> None:
    api.scan_root(tree, store=store)
    decide(store, tree / "web" / "node_modules")
    plan = plan_of(tree, store)
    assert plan_digest(plan) == plan["plan_digest"]
    assert plan_digest(json.loads(canonical_json(plan))) == plan["plan_digest"]
    body = canonical_json({k: v for k, v in plan.items() if k != "plan_digest"})
    seen = set()
    for i in range(0, len(body), max(1, len(body) // 40)):
        tampered = bytearray(body)
        tampered[i] = ord("0") if tampered[i] != ord("0") else ord("1")
        try:
            obj = json.loads(bytes(tampered))
        except (ValueError, UnicodeDecodeError):
            continue  # not JSON any more: a strict parser refuses it anyway
        seen.add(plan_digest(obj))
        assert plan_digest(obj) != plan["plan_digest"], i


def test_the_plan_is_registered_in_the_ledger(tree: Path, store: Path) -> None:
    from hygiene_nb.ledger import Ledger
    from hygiene_nb.store import Store

    api.scan_root(tree, store=store)
    decide(store, tree / "web" / "node_modules")
    result = api.make_plan(tree, store=store, ttl=60)
    issued = Ledger.open(Store(store)).issued_plan(result.plan_id)
    assert issued is not None and issued.plan_digest == result.plan_digest
    assert issued.candidates == 1 and issued.state == "issued"


def test_plan_out_inside_the_root_is_refused(tree: Path, store: Path) -> None:
    api.scan_root(tree, store=store)
    with pytest.raises(UsageError, match="outside the tree"):
        api.make_plan(tree, store=store, out=tree / "plan.json")
    assert not (tree / "plan.json").exists()


def test_a_replaced_root_is_refused(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    write(root / "f", 1)
    api.scan_root(root, store=store)
    os.rename(root, tmp_path / "old")
    write(root / "f", 1)
    with pytest.raises(RootChanged):
        api.make_plan(root, store=store)


def test_plan_json_prints_the_confirming_command(tree: Path, store: Path) -> None:
    api.scan_root(tree, store=store)
    decide(store, tree / "web" / "node_modules")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "hygiene_nb",
            "plan",
            str(tree),
            "--store",
            str(store),
            "--json",
            "--ttl",
            "120",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    obj = json.loads(out)
    for key in (
        "plan_id",
        "plan_digest",
        "plan_path",
        "markdown_path",
        "expires_at",
        "candidates",
        "reclaim_bytes",
        "excluded",
        "confirm_command",
    ):
        assert key in obj
    assert obj["candidates"] == 1
    assert f"--confirm-plan-id {obj['plan_id']}" in obj["confirm_command"]
    assert f"--plan-digest {obj['plan_digest']}" in obj["confirm_command"]
    assert "--acknowledge-risk quarantine" in obj["confirm_command"]


def test_annotate_cli_takes_relative_paths_from_here(tree: Path, store: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "hygiene_nb",
            "annotate",
            "web/app.log",
            "--decision",
            "delete",
            "--note",
            "rotated",
            "--store",
            str(store),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=True,
        cwd=tree,
    ).stdout
    (row,) = json.loads(out)["annotations"]
    assert (row["path"], row["decision"], row["note"]) == (
        str(tree / "web" / "app.log"),
        "delete",
        "rotated",
    )


def test_planning_changes_nothing_in_the_tree(tree: Path, store: Path) -> None:
    def state() -> list[tuple[str, int, int]]:
        return sorted((str(p), p.lstat().st_ino, p.lstat().st_mtime_ns) for p in tree.rglob("*"))

    api.scan_root(tree, store=store)
    decide(store, tree / "web" / "node_modules", tree / "web" / "app.log")
    before = state()
    api.make_plan(tree, store=store)
    assert state() == before


def test_plan_out_cannot_reach_the_tree_through_a_link_or_dotdot(
    tree: Path, store: Path, tmp_path: Path
) -> None:
    api.scan_root(tree, store=store)
    (tmp_path / "lnk").symlink_to(tree)
    (tmp_path / "other").mkdir()
    write(tree / "data" / "notes.md", data=b"mine")
    for out in (
        tmp_path / "lnk" / "data" / "notes.json",
        tmp_path / "other" / ".." / "r" / "x.json",
    ):
        with pytest.raises(UsageError):
            api.make_plan(tree, store=store, out=out)
    assert (tree / "data" / "notes.md").read_bytes() == b"mine"
    assert not (tree / "x.json").exists()


def test_plan_out_never_replaces_a_file(tree: Path, store: Path, tmp_path: Path) -> None:
    api.scan_root(tree, store=store)
    write(tmp_path / "plan.md", data=b"precious")
    with pytest.raises(UsageError, match="exists"):
        api.make_plan(tree, store=store, out=tmp_path / "plan.json")
    with pytest.raises(UsageError, match="Markdown"):
        api.make_plan(tree, store=store, out=tmp_path / "p.md")
    assert (tmp_path / "plan.md").read_bytes() == b"precious"
    result = api.make_plan(tree, store=store, out=tmp_path / "fresh.json")
    assert result.plan_path == str(tmp_path / "fresh.json")


@pytest.mark.parametrize("appears", ["keep-marker", "git-init"])
def test_protection_that_appears_above_a_candidate_after_the_scan_excludes_it(
    tree: Path, store: Path, appears: str
) -> None:
    api.scan_root(tree, store=store)
    target = tree / "cache" / "a" / "deep" / "x.tmp"
    decide(store, target)
    if appears == "keep-marker":
        write(tree / "cache" / ".hygiene-nb-keep", 0)
    else:
        (tree / "cache" / ".git").mkdir()
    plan = plan_of(tree, store)
    assert excluded(plan) == {str(target): "now-protected"}


def test_a_very_wide_directory_is_rechecked_within_a_small_fd_limit(
    tree: Path, store: Path
) -> None:
    import resource

    wide = tree / "wide"
    for i in range(1100):
        (wide / f"d{i:04d}").mkdir(parents=True)
    api.scan_root(tree, store=store)
    decide(store, wide)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
    try:
        plan = plan_of(tree, store)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert [c["path"] for c in plan["candidates"]] == [str(wide)]


def test_keep_bytes_count_a_hard_link_shared_by_two_kept_directories_once(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "r"
    write(root / "a" / "big", 10_000)
    (root / "b").mkdir()
    os.link(root / "a" / "big", root / "b" / "big")
    api.scan_root(root, store=store)
    decide(store, root / "a", root / "b", decision="keep")
    plan = plan_of(root, store)
    assert plan["summary"]["keep_bytes"] == own_bytes(root / "a", root / "b") + 10_000


def own_bytes(*paths: Path) -> int:
    return sum(os.lstat(p).st_size for p in paths)


def test_an_entry_that_cannot_be_read_now_is_excluded(
    tree: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno as errno_mod

    from hygiene_nb.fs import fingerprint

    api.scan_root(tree, store=store)
    decide(store, tree / "web" / "app.log", tree / "data" / "scratch.bin", tree / "cache")
    real = fingerprint.open_dir_at  # the seam every walk from the root's handle goes through

    def denied(fd: int, name: bytes) -> int:
        if name == b"web":
            raise PermissionError(errno_mod.EACCES, "Permission denied")
        if name == b"cache":
            raise OSError(errno_mod.EIO, "Input/output error")
        return real(fd, name)

    monkeypatch.setattr(fingerprint, "open_dir_at", denied)
    assert excluded(plan_of(tree, store)) == {
        str(tree / "web" / "app.log"): "permission-denied",
        str(tree / "cache"): "unreadable-now",
    }


def test_names_that_read_alike_but_differ_in_bytes_are_planned_apart(
    tmp_path: Path, store: Path
) -> None:
    from hygiene_nb.executor import Confirmation, execute_plan
    from hygiene_nb.store import Store

    root = os.fsencode(tmp_path / "r")
    binary, literal = root + b"/d\xff", root + b"/d\\xff"  # both read "d\xff" as text
    for base, tag in ((binary, b"b"), (literal, b"l")):
        os.makedirs(base + b"/sub")
        for name in (b"/a", b"/sub/c"):
            with open(base + name, "wb") as handle:
                handle.write(tag * 10)
    api.scan_root(os.fsdecode(root), store=store)
    decide(store, literal, decision="delete")
    decide(store, binary + b"/a", decision="keep")  # inside the other one only by its text

    plan = api.make_plan(os.fsdecode(root), store=store)

    assert plan.candidates == 1 and plan.excluded == 0
    doc = json.loads(Path(plan.plan_path).read_text())
    (cand,) = doc["candidates"]
    assert "path_b64" not in cand and os.fsencode(cand["path"]) == literal
    result = execute_plan(
        plan.plan_path,
        store=Store(store),
        confirm=Confirmation(plan.plan_id, plan.plan_digest, "quarantine"),
    )
    assert result.skipped == [] and [m.path for m in result.moved] == [cand["path"]]
    assert not os.path.lexists(literal)
    for name in (b"/a", b"/sub/c"):  # the look-alike is untouched
        assert Path(os.fsdecode(binary + name)).read_bytes() == b"b" * 10


def test_look_alike_directories_are_never_folded_into_each_other(
    tmp_path: Path, store: Path
) -> None:
    root = os.fsencode(tmp_path / "r")
    binary, literal = root + b"/d\xff", root + b"/d\\xff"
    for base in (binary, literal):
        os.makedirs(base)
        with open(base + b"/a", "wb") as handle:
            handle.write(b"x")
    api.scan_root(os.fsdecode(root), store=store)
    decide(store, binary, literal + b"/a", decision="delete")

    plan = api.make_plan(os.fsdecode(root), store=store)

    doc = json.loads(Path(plan.plan_path).read_text())
    assert doc["folded"] == []
    planned = {
        base64.b64decode(c["path_b64"]) if "path_b64" in c else os.fsencode(c["path"])
        for c in doc["candidates"]
    }
    assert planned == {binary, literal + b"/a"}


def _entries_below(root: Path) -> set[str]:
    found: set[str] = set()
    for top, dirs, files in os.walk(root):
        found.update(os.path.join(top, name) for name in dirs + files)
    return found


def test_unreviewed_counts_each_entry_below_the_root_without_a_decision(
    tree: Path, store: Path
) -> None:
    api.scan_root(tree, store=store)
    decide(store, tree / "web" / "node_modules", tree / "data" / "scratch.bin")
    decide(store, tree / "data" / "keep", decision="keep")
    decide(store, tree / "web" / "app.log", decision="unsure")
    decide(store, tree, tree / "gone.txt", decision="unsure")  # the root; not in the snapshot
    api.annotate([str(tree / "cache")], store=store, note="only a note")  # no decision
    below = _entries_below(tree)
    reviewed = {
        str(tree / p) for p in ("web/node_modules", "data/scratch.bin", "data/keep", "web/app.log")
    }
    summary = plan_of(tree, store)["summary"]
    assert summary["unreviewed_count"] == len(below - reviewed) == len(below) - 4
    assert (summary["delete_count"], summary["keep_count"], summary["unsure_count"]) == (2, 1, 3)


def test_a_kept_snapshot_index_gives_the_same_selection(tree: Path, store: Path) -> None:
    from hygiene_nb.ledger import Ledger
    from hygiene_nb.plan.document import SnapshotIndex, select_candidates, selection_summary

    api.scan_root(tree, store=store)
    decide(store, tree / "web" / "node_modules", tree / "data", tree / "cache" / "a")
    decide(store, tree / "data" / "keep", decision="keep")
    table = api.classify_snapshot(str(tree), store=store)
    with Ledger.open(api.open_store(store)) as ledger:
        annotations = ledger.annotations(under=str(tree))
    index = SnapshotIndex(table)
    fresh = select_candidates(table, annotations, root=str(tree))
    for _ in range(2):  # the index is only read
        kept = select_candidates(table, annotations, root=str(tree), index=index)
        assert selection_summary(kept, table) == selection_summary(fresh, table)
        assert [c["path"] for c in kept.candidates] == [c["path"] for c in fresh.candidates]
        assert kept.excluded == fresh.excluded
    same_rows = api.classify_snapshot(str(tree), store=store)  # equal, but not the table indexed
    with pytest.raises(ValueError, match="another table"):
        select_candidates(same_rows, annotations, root=str(tree), index=index)
    # every path once, in the order of their UTF-8 bytes (what the binary searches assume)
    from hygiene_nb.scan.snapshot import entry_paths

    assert list(index.sorted) == sorted(entry_paths(table).to_pylist())
    assert [index.sorted[i] for i in range(len(index.sorted))] == [
        entry_paths(table)[int(row)].as_py() for row in index.order
    ]


def _mark(table: Any, path: Path, column: str) -> Any:
    """``table`` with ``path``'s row marked as not read completely in ``column``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from hygiene_nb.scan.snapshot import entry_paths

    hit = pc.equal(entry_paths(table), str(path))
    old = table.column(column)
    if column == "error":
        new = pc.if_else(hit, pa.scalar("EACCES"), old.cast(pa.string()))
        new = new.dictionary_encode()
    else:
        new = pc.or_(pc.fill_null(old, False), hit)
    return table.set_column(table.schema.get_field_index(column), column, new)


@pytest.mark.parametrize("column", ["error", "partial", "budget_cut", "excluded", "mount_point"])
@pytest.mark.parametrize("where", ["the entry", "inside it"])
def test_an_entry_not_read_completely_is_never_a_candidate(
    tree: Path, store: Path, column: str, where: str
) -> None:
    from hygiene_nb.ledger import Ledger
    from hygiene_nb.plan.document import select_candidates

    api.scan_root(tree, store=store)
    decided = [tree / "data" / "scratch.bin", tree / "web" / "node_modules"]  # in path order
    decide(store, *decided)
    table = api.classify_snapshot(str(tree), store=store)
    with Ledger.open(api.open_store(store)) as ledger:
        annotations = ledger.annotations(under=str(tree))
    clean = select_candidates(table, annotations, root=str(tree))
    assert [c["path"] for c in clean.candidates] == [str(p) for p in decided]

    gone = decided[0] if where == "the entry" else decided[1]
    table = _mark(
        table, gone if where == "the entry" else gone / "pkg" / "dist" / "bundle.js", column
    )
    sel = select_candidates(table, annotations, root=str(tree))
    assert [c["path"] for c in sel.candidates] == [str(p) for p in decided if p != gone]
    code = "contains-mount" if column == "mount_point" else "incomplete-scan"
    assert [(e.path, e.code) for e in sel.excluded] == [(str(gone), code)]
