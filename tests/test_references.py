"""Reference checks on real trees: what names a candidate, what is never read, and budgets."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from types import FrameType

import pytest

from hygiene_nb.plan import references
from hygiene_nb.plan.references import (
    MAX_LISTED,
    SKIPPED_DIRS,
    ReferenceBudget,
    ReferenceVerdict,
    WorkspaceCheck,
    check_references,
    find_workspace,
)
from tests.helpers import as_nobody, tmpfs, world_readable_tmpdir, write


def put(path: Path, text: str | bytes) -> Path:
    """Write ``text`` to ``path``, making parents."""
    return write(path, data=text.encode() if isinstance(text, str) else text)


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    """A workspace: a directory holding a project marker."""
    root = tmp_path / "proj"
    put(root / "pyproject.toml", "[project]\nname = 'demo'\n")
    return root


def check_one(candidate: Path, **kwargs: object) -> tuple[ReferenceVerdict, list[WorkspaceCheck]]:
    verdicts, checks = check_references([str(candidate)], **kwargs)  # type: ignore[arg-type]
    return verdicts[str(candidate)], checks


def tree_state(root: Path) -> dict[str, tuple[int, int, int]]:
    """(mode, size, mtime) of everything under ``root``, symlinks not followed."""
    state = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            state[os.path.join(dirpath, name)] = (st.st_mode, st.st_size, st.st_mtime_ns)
    return state


# --- what counts as a reference ------------------------------------------------------------


def test_relative_path_mention_is_referenced_with_detail_path(ws: Path) -> None:
    candidate = put(ws / "out" / "log.txt", "old log\n")
    put(ws / "src" / "run.py", 'with open("out/log.txt") as f:\n    pass\n')
    put(ws / "src" / "other.py", "print('nothing here')\n")
    before = tree_state(ws)
    verdict, checks = check_one(candidate)
    assert verdict == ReferenceVerdict(
        str(candidate), "referenced", str(ws), ("src/run.py",), "path"
    )
    assert [c.complete for c in checks] == [True]
    assert tree_state(ws) == before  # read-only


def test_bare_name_mention_is_referenced_with_detail_name(ws: Path) -> None:
    candidate = put(ws / "out" / "log.txt", "old log\n")
    put(ws / "README.md", "The run writes log.txt somewhere.\n")
    verdict, _ = check_one(candidate)
    assert (verdict.status, verdict.referenced_by, verdict.detail) == (
        "referenced",
        ("README.md",),
        "name",
    )


def test_path_match_needs_the_whole_directory_not_a_longer_one(ws: Path) -> None:
    candidate = put(ws / "a" / "log.txt", "")
    put(ws / "notes.txt", "see data/log.txt\n")  # "a/log.txt" only inside "data/log.txt"
    verdict, _ = check_one(candidate)
    assert (verdict.status, verdict.detail) == ("referenced", "name")


@pytest.mark.parametrize(
    "text", ["catalog.txt", "log.txt_old", "log.txt2", "mylog.txt", "_log.txt", "LOG.TXT"]
)
def test_name_inside_a_longer_word_is_not_a_reference(ws: Path, text: str) -> None:
    candidate = put(ws / "log.txt", "")
    put(ws / "doc.md", f"see {text} here\n")
    verdict, _ = check_one(candidate)
    assert verdict.status == "clear"


@pytest.mark.parametrize("text", ["log.txt", "(log.txt)", "'./log.txt'", "log.txt.", "x/log.txt"])
def test_name_between_non_word_bytes_is_a_reference(ws: Path, text: str) -> None:
    candidate = put(ws / "log.txt", "")
    put(ws / "doc.md", text)  # also at the very start and end of the file
    verdict, _ = check_one(candidate)
    assert verdict.status == "referenced"


def test_names_overlapping_at_one_place_are_all_found(ws: Path) -> None:
    data_dir = ws / "data"
    put(data_dir / "part-0", "")
    data_csv = put(ws / "data.csv", "")
    csv = put(ws / "exports" / "csv", "")
    put(ws / "load.py", 'pandas.read_csv("data.csv")\n')
    verdicts, _ = check_references([str(data_dir), str(data_csv), str(csv)])
    assert {p: v.referenced_by for p, v in verdicts.items()} == {
        str(data_dir): ("load.py",),
        str(data_csv): ("load.py",),
        str(csv): ("load.py",),
    }


def test_every_candidate_with_a_mentioned_name_is_referenced(ws: Path) -> None:
    first = put(ws / "a" / "model.bin", "")
    second = put(ws / "b" / "model.bin", "")
    put(ws / "train.py", 'save("b/model.bin")\n')
    verdicts, _ = check_references([str(first), str(second)])
    assert (verdicts[str(first)].status, verdicts[str(first)].detail) == ("referenced", "name")
    assert (verdicts[str(second)].status, verdicts[str(second)].detail) == ("referenced", "path")


def test_referencing_files_are_sorted_and_capped(ws: Path) -> None:
    candidate = put(ws / "old.csv", "")
    mentions = [f"m{i:03d}.md" for i in range(MAX_LISTED + 5)]
    for name in reversed(mentions):
        put(ws / name, "old.csv\n")
    verdict, _ = check_one(candidate)
    assert verdict.referenced_by == tuple(sorted(mentions)[:MAX_LISTED])


def test_unmentioned_candidate_is_clear_and_the_check_complete(ws: Path) -> None:
    candidate = put(ws / "scratch.tmp", "")
    put(ws / "src" / "main.py", "print('hello')\n")
    verdict, checks = check_one(candidate)
    assert verdict == ReferenceVerdict(str(candidate), "clear", str(ws))
    texts = [ws / "pyproject.toml", ws / "src" / "main.py"]
    assert checks == [
        WorkspaceCheck(
            workspace=str(ws),
            complete=True,
            files_seen=len(texts),
            text_files_read=len(texts),
            text_bytes_read=sum(p.stat().st_size for p in texts),
            binary_files_skipped=0,
        )
    ]


# --- what is never read --------------------------------------------------------------------


def test_candidate_file_itself_is_not_read(ws: Path) -> None:
    candidate = put(ws / "notes.txt", "notes.txt mentions itself\n")
    verdict, checks = check_one(candidate)
    assert verdict.status == "clear"
    assert checks[0].files_seen == 1  # only the marker


def test_candidate_directory_own_files_do_not_count(ws: Path) -> None:
    build = ws / "build"
    put(build / "index.txt", "build/ is generated; build/out.o\n")
    put(build / "sub" / "deep.txt", "build\n")
    verdict, checks = check_one(build)
    assert verdict.status == "clear"
    assert checks[0].files_seen == 1
    put(ws / "Makefile", "clean:\n\trm -r build\n")
    assert check_one(build)[0].referenced_by == ("Makefile",)


def test_vcs_dependency_and_skip_dirs_are_not_searched(ws: Path, tmp_path: Path) -> None:
    candidate = put(ws / "weights.pt", "")
    for name in sorted(SKIPPED_DIRS):
        put(ws / "nested" / name / "ref.txt", "weights.pt\n")
    store = ws / "store"
    put(store / "plan.json", '{"path": "weights.pt"}\n')
    verdict, checks = check_one(candidate, skip=[str(store)])
    assert verdict.status == "clear"
    assert (checks[0].complete, checks[0].files_seen) == (True, 1)
    assert check_one(candidate)[0].referenced_by == ("store/plan.json",)


def test_binary_file_is_skipped_and_uses_no_text_budget(ws: Path) -> None:
    candidate = put(ws / "table.parquet", "")
    marker_bytes = (ws / "pyproject.toml").stat().st_size
    blob = b"\0" + b"table.parquet " * (4 * references.BINARY_SNIFF_BYTES)
    put(ws / "cache.bin", blob)
    budget = ReferenceBudget(max_text_bytes=marker_bytes)
    verdict, checks = check_one(candidate, budget=budget)
    assert verdict.status == "clear"
    assert len(blob) > budget.max_text_bytes
    assert checks[0] == WorkspaceCheck(str(ws), True, 2, 1, marker_bytes, 1)


def test_nul_after_the_sniffed_head_still_counts_as_text(ws: Path) -> None:
    candidate = put(ws / "table.parquet", "")
    put(ws / "log.txt", b"x" * references.BINARY_SNIFF_BYTES + b"\0 table.parquet\n")
    verdict, checks = check_one(candidate)
    assert verdict.status == "referenced"
    assert checks[0].binary_files_skipped == 0


def test_symlinks_are_not_followed(ws: Path, tmp_path: Path) -> None:
    candidate = put(ws / "model.ckpt", "")
    outside = tmp_path / "outside"
    put(outside / "train.py", "load('model.ckpt')\n")
    (ws / "link.py").symlink_to(outside / "train.py")
    (ws / "linked-dir").symlink_to(outside)
    verdict, checks = check_one(candidate)
    assert verdict.status == "clear"
    assert (checks[0].complete, checks[0].files_seen) == (True, 1)


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise TimeoutError("the reference check blocked")


@pytest.fixture
def no_hang() -> Iterator[None]:
    """Fail instead of hanging if something blocks (e.g. opening a fifo without O_NONBLOCK)."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(20)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def test_fifo_is_neither_opened_nor_read(ws: Path, no_hang: None) -> None:
    candidate = put(ws / "run.log", "")
    fifo = ws / "pipe"
    os.mkfifo(fifo)
    idle = ws / "idle-pipe"  # no writer at all: a blocking open would hang here
    os.mkfifo(idle)
    writer = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # a writer that has written the name
    try:
        os.write(writer, b"tail -f run.log\n")
        verdict, checks = check_one(candidate)
    finally:
        os.close(writer)
    assert verdict.status == "clear"
    assert (checks[0].complete, checks[0].files_seen) == (True, 1)


# --- budgets -------------------------------------------------------------------------------


def _budget_tree(ws: Path) -> tuple[Path, Path, list[Path]]:
    """Candidates ``kept`` (named in the first file searched) and ``other``; all text files."""
    kept = put(ws / "data" / "kept.csv", "")
    other = put(ws / "data" / "other.csv", "")
    put(ws / "a-first.md", "uses kept.csv\n")
    for i in range(3):
        put(ws / f"z{i}.md", f"filler {i}\n")
    texts = [p for p in sorted(ws.iterdir()) if p.is_file()]
    return kept, other, texts


def test_exact_budgets_leave_the_check_complete(ws: Path) -> None:
    kept, other, texts = _budget_tree(ws)
    budget = ReferenceBudget(len(texts), sum(p.stat().st_size for p in texts))
    verdicts, checks = check_references([str(kept), str(other)], budget=budget)
    assert checks[0].complete is True
    assert verdicts[str(other)].status == "clear"


def test_file_budget_leaves_the_rest_unchecked(ws: Path) -> None:
    kept, other, texts = _budget_tree(ws)
    budget = ReferenceBudget(max_files=len(texts) - 1)
    verdicts, checks = check_references([str(kept), str(other)], budget=budget)
    check = checks[0]
    assert (check.complete, check.files_seen) == (False, budget.max_files)
    assert str(budget.max_files) in check.reason and "file budget" in check.reason
    assert verdicts[str(kept)].status == "referenced"
    assert verdicts[str(other)] == ReferenceVerdict(
        str(other), "unchecked", str(ws), detail=check.reason
    )


def test_text_budget_leaves_the_rest_unchecked(ws: Path) -> None:
    kept, other, texts = _budget_tree(ws)
    allowed = sum(p.stat().st_size for p in texts) - 1
    verdicts, checks = check_references(
        [str(kept), str(other)], budget=ReferenceBudget(max_text_bytes=allowed)
    )
    check = checks[0]
    assert check.complete is False
    assert check.text_bytes_read <= allowed
    assert check.text_files_read == len(texts) - 1
    assert str(allowed) in check.reason and "text budget" in check.reason
    assert verdicts[str(kept)].status == "referenced"
    assert (verdicts[str(other)].status, verdicts[str(other)].detail) == ("unchecked", check.reason)


# --- unreadable entries --------------------------------------------------------------------


def _check_as_nobody(candidates: list[str]) -> dict[str, dict[str, object]]:
    """Run ``check_references`` where permissions apply: a child as 'nobody' when root."""
    if os.geteuid() != 0:
        return {p: asdict(v) for p, v in check_references(candidates)[0].items()}
    found: dict[str, dict[str, object]] = as_nobody(
        lambda: {p: asdict(v) for p, v in check_references(candidates)[0].items()}
    )
    for verdict in found.values():
        verdict["referenced_by"] = tuple(verdict["referenced_by"])  # type: ignore[arg-type]
    return found


@pytest.fixture
def shared_ws() -> Iterator[Path]:
    """A workspace 'nobody' can reach (pytest's tmp_path is private to its owner)."""
    with world_readable_tmpdir() as base:
        root = base / "proj"
        put(root / "pyproject.toml", "[project]\n")
        yield root


@pytest.mark.parametrize("locked", ["file", "dir"])
def test_unreadable_entry_leaves_the_check_unchecked_not_clear(
    shared_ws: Path, locked: str
) -> None:
    kept = put(shared_ws / "kept.csv", "")
    other = put(shared_ws / "other.csv", "")
    put(shared_ws / "a.md", "kept.csv\n")
    secret = put(shared_ws / "secret" / "s.md", "other.csv\n")
    (secret if locked == "file" else secret.parent).chmod(0)
    verdicts = _check_as_nobody([str(kept), str(other)])
    assert verdicts[str(kept)]["status"] == "referenced"
    assert verdicts[str(other)]["status"] == "unchecked"
    shown = "secret/s.md" if locked == "file" else "secret"
    assert shown in str(verdicts[str(other)]["detail"])


# --- chunks --------------------------------------------------------------------------------


@pytest.mark.parametrize("chunk", [16, 64])
def test_matches_across_chunk_boundaries_are_found(
    ws: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(references, "CHUNK_SIZE", chunk)
    rel = "results/2024-06-01/run-a/f.csv"  # a directory longer than the name
    candidate = put(ws / rel, "")
    boundary = 3 * chunk  # well past the first chunk
    for start in range(boundary - len(rel) - 1, boundary + 2):
        put(ws / "doc.md", "x" * (start - 1) + " " + rel + " " + "y" * (2 * chunk))
        verdict, _ = check_one(candidate)
        assert (verdict.status, verdict.detail) == ("referenced", "path"), start


@pytest.mark.parametrize("chunk", [16, 64])
def test_word_boundaries_hold_across_chunk_boundaries(
    ws: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(references, "CHUNK_SIZE", chunk)
    candidate = put(ws / "log.txt", "")
    boundary = 2 * chunk
    for start in range(boundary - len("log.txt") - 1, boundary + 2):
        put(ws / "doc.md", "x" * (start - 1) + "catalog.txt_old" + "y" * chunk)
        assert check_one(candidate)[0].status == "clear", start


def test_match_across_the_default_chunk_size_is_found(ws: Path) -> None:
    candidate = put(ws / "final.csv", "")
    name = b"final.csv"
    before = references.CHUNK_SIZE - len(name) // 2
    put(ws / "big.txt", b"x" * (before - 1) + b" " + name + b" " + b"y" * len(name))
    verdict, _ = check_one(candidate)
    assert verdict.status == "referenced"


# --- workspaces ----------------------------------------------------------------------------


def test_find_workspace_returns_the_nearest_marked_ancestor(tmp_path: Path) -> None:
    outer = tmp_path / "outer"
    inner = outer / "pkg"
    put(outer / "setup.py", "")
    (inner / "node").mkdir(parents=True)
    (inner / "Cargo.toml").symlink_to(tmp_path / "nowhere")  # a dangling marker still counts
    assert find_workspace(str(inner / "node" / "f")) == str(inner)
    assert find_workspace(str(inner)) == str(outer)  # never the path itself


def test_find_workspace_stops_at_stop_at(tmp_path: Path) -> None:
    proj = tmp_path / "proj"
    put(proj / "go.mod", "")
    candidate = proj / "a" / "b" / "f"
    assert find_workspace(str(candidate), stop_at=str(proj)) == str(proj)
    assert find_workspace(str(candidate), stop_at=str(proj / "a")) is None
    assert find_workspace(str(candidate), stop_at=str(tmp_path / "elsewhere")) is None


def test_find_workspace_never_returns_home(tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    put(home / ".git" / "HEAD", "ref: refs/heads/main\n")
    put(home / "Makefile", "")
    put(tmp_path / "package.json", "{}")  # above the home: not a project either
    assert find_workspace(str(home / "scratch" / "f")) is None
    put(home / "code" / "Gemfile", "")
    assert find_workspace(str(home / "code" / "f")) == str(home / "code")


def test_candidate_without_workspace_is_no_workspace(tmp_path: Path) -> None:
    loose = put(tmp_path / "loose" / "f.txt", "")
    put(tmp_path / "loose" / "mentions.txt", "f.txt\n")
    verdicts, checks = check_references([str(loose)], stop_at=str(tmp_path / "loose"))
    assert verdicts == {str(loose): ReferenceVerdict(str(loose), "no-workspace", None)}
    assert checks == []


def test_candidates_are_grouped_and_each_workspace_searched_once(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    for root in (one, two):
        put(root / "package.json", "{}")
    a = put(one / "dist" / "a.js", "")
    b = put(one / "dist" / "b.js", "")
    c = put(two / "dist" / "a.js", "")
    put(two / "index.html", '<script src="dist/a.js"></script>')
    verdicts, checks = check_references([str(a), str(b), str(c)])
    assert [c.workspace for c in checks] == [str(one), str(two)]
    assert {p: v.status for p, v in verdicts.items()} == {
        str(a): "clear",
        str(b): "clear",
        str(c): "referenced",
    }


def test_another_filesystem_inside_is_not_entered_and_leaves_the_check_incomplete(
    ws: Path,
) -> None:
    candidate = put(ws / "model.pt", "")
    mnt = ws / "mnt"
    mnt.mkdir()
    with tmpfs(mnt):
        put(mnt / "uses.txt", "model.pt\n")
        verdict, _ = check_one(candidate)
        assert verdict.status == "unchecked" and "another filesystem" in verdict.detail


# -- what a plan and an execution do with the verdicts -----------------------------------------


def _project(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "proj"
    write(root / "pyproject.toml", data=b"[project]\nname = 'p'\n")
    write(root / "train.py", data=b"CONFIG = 'conf/settings.yaml'\n")
    write(root / "conf" / "settings.yaml", 40)
    write(root / "old" / "unused.csv", 300)
    write(root / "node_modules" / "x" / "index.js", 100)
    write(root / "README.md", data=b"Install, then delete node_modules/ and *.log when done.\n")
    write(root / ".gitignore", data=b"unused.csv\n")
    return root, tmp_path / "store"


def test_a_plan_leaves_out_what_the_project_names_and_records_the_search(tmp_path: Path) -> None:
    from hygiene_nb import api

    root, store = _project(tmp_path)
    api.scan_root(root, store=store)
    chosen = ("conf/settings.yaml", "old/unused.csv", "node_modules")
    api.annotate([str(root / r) for r in chosen], store=store, decision="delete")
    plan = api.make_plan(root, store=store).plan
    assert {c["path"] for c in plan["candidates"]} == {
        str(root / "old" / "unused.csv"),  # named only in .gitignore: not a reference
        str(root / "node_modules"),  # regenerable: named in the README all the same
    }
    (excluded,) = plan["excluded"]
    assert excluded["code"] == "referenced-by" and "train.py" in excluded["message"]
    assert "path" in excluded["message"]  # conf/settings.yaml matched as a relative path
    (check,) = plan["reference_check"]
    assert check["workspace"] == str(root) and check["complete"] is True


def test_an_incomplete_search_keeps_its_candidates_out_and_says_so(tmp_path: Path) -> None:
    from hygiene_nb import api

    root, store = _project(tmp_path)
    store.mkdir()
    (store / "config.toml").write_text(f'[roots."{root}"]\nreference_max_files = 2\n')
    api.scan_root(root, store=store)
    api.annotate([str(root / "old" / "unused.csv")], store=store, decision="delete")
    plan = api.make_plan(root, store=store).plan
    assert plan["candidates"] == []
    assert [e["code"] for e in plan["excluded"]] == ["references-unchecked"]
    assert "file budget of 2 files" in plan["excluded"][0]["message"]
    assert plan["reference_check"][0]["complete"] is False


def test_the_executor_searches_again_and_keeps_what_is_named_now(tmp_path: Path) -> None:
    from hygiene_nb import api
    from hygiene_nb.executor import Confirmation, execute_plan
    from hygiene_nb.store import Store

    root, store = _project(tmp_path)
    api.scan_root(root, store=store)
    api.annotate([str(root / "old")], store=store, decision="delete")
    plan = api.make_plan(root, store=store)
    assert plan.candidates == 1
    (root / "load.py").write_text("import pandas; pandas.read_csv('old/unused.csv')\n")
    dry = execute_plan(plan.plan_path, store=Store(store))
    assert [s.code for s in dry.skipped] == ["referenced-by"]
    confirm = Confirmation(plan.plan_id, plan.plan_digest, "quarantine")
    done = execute_plan(plan.plan_path, store=Store(store), confirm=confirm)
    assert done.moved == [] and [s.code for s in done.skipped] == ["referenced-by"]
    assert (root / "old" / "unused.csv").exists()
    receipt = json.loads(Path(str(done.receipt_path)).read_text())
    assert receipt["reference_check"][0]["workspace"] == str(root)


def test_names_that_are_not_utf8_are_searched_as_bytes_and_reported_safely(
    tmp_path: Path,
) -> None:
    from hygiene_nb import api
    from hygiene_nb.executor import Confirmation, execute_plan
    from hygiene_nb.store import Store

    root, store = _project(tmp_path)
    raw_root = os.fsencode(root)
    with open(raw_root + b"/bad\xff.log", "wb") as handle:
        handle.write(b"x" * 50)
    with open(raw_root + b"/good.log", "wb") as handle:
        handle.write(b"y" * 50)
    with open(raw_root + b"/notes.md", "wb") as handle:
        handle.write(b"see bad\xff.log for details\n")  # names the non-UTF-8 file exactly
    api.scan_root(root, store=store)
    api.annotate(
        [raw_root + b"/bad\xff.log", raw_root + b"/good.log"], store=store, decision="delete"
    )
    plan = api.make_plan(root, store=store)
    codes = {e["path"]: e["code"] for e in plan.plan["excluded"]}
    assert list(codes.values()) == ["referenced-by"] and "bad" in next(iter(codes))
    assert plan.candidates == 1  # good.log
    with open(raw_root + b"/ref\xfe.txt", "wb") as handle:  # a non-UTF-8 referencing file
        handle.write(b"tail good.log\n")
    confirm = Confirmation(plan.plan_id, plan.plan_digest, "quarantine")
    done = execute_plan(plan.plan_path, store=Store(store), confirm=confirm)
    assert done.moved == [] and [s.code for s in done.skipped] == ["referenced-by"]
    assert "ref\\xfe.txt" in done.skipped[0].message
    assert Path(str(done.receipt_path)).exists()  # the receipt could be written
    assert os.path.exists(raw_root + b"/good.log")
