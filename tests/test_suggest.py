"""Per-root settings, automatic mode's suggested plan, and organization suggestions."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hygiene_nb import api
from hygiene_nb.cli import main
from hygiene_nb.config import load_root_config
from hygiene_nb.errors import ConfigInvalid, UsageError
from hygiene_nb.plan.references import PROJECT_MARKERS
from hygiene_nb.query import suggest, views
from hygiene_nb.store import Store
from tests.helpers import write


def configure(store: Path, root: Path, body: str) -> None:
    store.mkdir(parents=True, exist_ok=True)
    (store / "config.toml").write_text(f'[roots."{root}"]\n{body}\n')


def tree_state(root: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p), p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*"))


@pytest.fixture
def messy(tmp_path: Path, store: Path) -> Path:
    """A project whose files are mostly caches and backups: a low cleanliness score."""
    root = tmp_path / "proj"
    write(root / "pyproject.toml", 100)
    write(root / "src" / "main.py", 2_000)
    for i in range(6):
        write(root / "src" / "__pycache__" / f"m{i}.cpython-311.pyc", 500)
        write(root / "notes" / f"draft{i}.txt~", 300)
    api.scan_root(root, store=store)
    return root


def test_config_defaults_and_per_root_values(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    assert load_root_config(Store(store), str(root)).automatic is False
    configure(store, root, 'verify = [["pytest", "-q"]]\nautomatic = true\nthreshold = 70')
    config = load_root_config(Store(store), str(root))
    assert config.verify == (("pytest", "-q"),) and config.automatic and config.threshold == 70
    assert load_root_config(Store(store), str(tmp_path / "other")).automatic is False
    configure(store, root, 'homes = ["/backup/alice/", "/backup/bob"]')
    assert load_root_config(Store(store), str(root)).homes == ("/backup/alice", "/backup/bob")


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ('verify = "pytest -q"', "wrong type"),
        ('verify = ["pytest", "-q"]', "argv arrays"),
        ("verify = [[]]", "argv arrays"),
        ("automatic = 1", "wrong type"),
        ("threshold = 0", "positive"),
        ("threshold = 101", "1 to 100"),
        ("shell = true", "unknown key"),
        ("verify = [[", "not valid TOML"),
        ('homes = ["relative/home"]', "absolute paths"),
        ('homes = "/backup/alice"', "wrong type"),
        ('homes = ["/"]', "other than"),
    ],
)
def test_a_malformed_setting_is_refused_with_its_reason(
    tmp_path: Path, store: Path, body: str, says: str
) -> None:
    configure(store, tmp_path / "r", body)
    with pytest.raises(ConfigInvalid, match=says):
        load_root_config(Store(store), str(tmp_path / "r"))


def test_manual_mode_suggests_nothing(messy: Path, store: Path) -> None:
    assert suggest.suggested_plan(str(messy), store=store) is None


def test_automatic_mode_suggests_safe_entries_but_never_acts(messy: Path, store: Path) -> None:
    configure(store, messy, "automatic = true")
    before = tree_state(messy)
    found = suggest.suggested_plan(str(messy), store=store)
    assert found is not None and found.shown
    assert found.score < found.threshold == 80
    paths = {str(c["path"]) for c in found.candidates}
    assert str(messy / "src" / "__pycache__") in paths  # outermost: not each .pyc in it
    assert not any(p.startswith(str(messy / "src" / "__pycache__") + "/") for p in paths)
    assert str(messy / "src" / "main.py") not in paths
    assert found.reclaim_bytes >= 6 * 500
    text = suggest.suggestion_markdown(found)
    assert str(messy / "src" / "__pycache__") in text and "--decline" in text
    assert tree_state(messy) == before
    assert not (store / "plans").exists() or not list((store / "plans").iterdir())


def test_a_declined_suggestion_is_not_repeated_until_its_candidates_change(
    messy: Path, store: Path
) -> None:
    configure(store, messy, "automatic = true")
    first = suggest.suggested_plan(str(messy), store=store)
    assert first is not None
    with pytest.raises(UsageError, match="not the current suggestion"):
        suggest.decline(str(messy), "sha256:" + "0" * 64, store=store)
    declined = suggest.decline(str(messy), first.digest, store=store)
    assert not declined.shown and declined.declined_at
    api.scan_root(messy, store=store)  # a new scan of the same tree: the same suggestion
    again = suggest.suggested_plan(str(messy), store=store)
    assert again is not None and again.digest == first.digest and not again.shown
    write(messy / "notes" / "another.txt~", 50)  # a new safe entry: a new suggestion
    api.scan_root(messy, store=store)
    changed = suggest.suggested_plan(str(messy), store=store)
    assert changed is not None and changed.shown and changed.digest != first.digest


def test_no_suggestion_above_the_threshold_or_on_a_partial_scan(messy: Path, store: Path) -> None:
    configure(store, messy, "automatic = true\nthreshold = 1")
    calm = suggest.suggested_plan(str(messy), store=store)
    assert calm is not None and not calm.candidates and "not below 1" in calm.reason
    configure(store, messy, "automatic = true")
    api.scan_root(messy, store=store, max_entries=3)
    partial = suggest.suggested_plan(str(messy), store=store)
    assert partial is not None and not partial.candidates and "partial" in partial.reason


def test_entries_a_person_decided_on_are_not_suggested(messy: Path, store: Path) -> None:
    configure(store, messy, "automatic = true")
    api.annotate([str(messy / "notes")], store=store, decision="keep")
    found = suggest.suggested_plan(str(messy), store=store)
    assert found is not None
    assert not any(str(c["path"]).startswith(str(messy / "notes")) for c in found.candidates)


def test_the_suggest_command_shows_and_declines(
    messy: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configure(store, messy, "automatic = true")
    with pytest.raises(SystemExit) as done:
        main(["suggest", str(messy), "--store", str(store), "--json"])
    shown = json.loads(capsys.readouterr().out)
    assert done.value.code == 0 and shown["shown"] and shown["candidates"]
    with pytest.raises(SystemExit) as done:
        main(["suggest", str(messy), "--store", str(store), "--decline", shown["digest"], "--json"])
    declined = json.loads(capsys.readouterr().out)
    assert done.value.code == 0 and not declined["shown"] and declined["declined_at"]


def test_manual_mode_says_how_to_turn_automatic_mode_on_and_that_works(
    messy: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["suggest", str(messy), "--store", str(store)])
    said = capsys.readouterr().out
    assert done.value.code == 0 and "manual mode" in said
    where, lines = said.split(", add to ", 1)[1].split(":\n", 1)
    assert where.startswith(str(store / "config.toml") + " ")
    with open(store / "config.toml", "a") as config:  # what it says, as it says it
        config.write("".join(line.strip() + "\n" for line in lines.splitlines()))
    with pytest.raises(SystemExit) as done:
        main(["suggest", str(messy), "--store", str(store), "--json"])
    shown = json.loads(capsys.readouterr().out)
    assert done.value.code == 0 and shown["automatic"] and shown["candidates"]


def test_manual_mode_with_a_table_for_the_root_says_to_set_the_line_not_add_a_table(
    messy: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    configure(store, messy, "verify_timeout = 60")  # a table for this root, no automatic key
    with pytest.raises(SystemExit):
        main(["suggest", str(messy), "--store", str(store)])
    said = capsys.readouterr().out
    assert "set `automatic = true` in its" in said and "add to" not in said
    with open(store / "config.toml", "a") as config:  # set it in the table (the file's last)
        config.write("automatic = true\n")
    with pytest.raises(SystemExit) as done:
        main(["suggest", str(messy), "--store", str(store), "--json"])
    assert done.value.code == 0 and json.loads(capsys.readouterr().out)["automatic"]


def test_manual_mode_names_the_roots_table_as_the_file_spells_it(
    messy: Path, store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A table keyed ``/root/`` is the root's table: adding ``[roots."/root"]`` beside it would
    make the file name the root twice, so the hint says to set the line in the table it has."""
    store.mkdir(parents=True, exist_ok=True)
    (store / "config.toml").write_text(f'[roots."{messy}/"]\nverify_timeout = 60\n')
    with pytest.raises(SystemExit):
        main(["suggest", str(messy), "--store", str(store)])
    said = capsys.readouterr().out
    assert f'set `automatic = true` in its [roots."{messy}/"] table' in said, said
    with open(store / "config.toml", "a") as config:  # set it in that table (the file's last)
        config.write("automatic = true\n")
    with pytest.raises(SystemExit) as done:
        main(["suggest", str(messy), "--store", str(store), "--json"])
    assert done.value.code == 0 and json.loads(capsys.readouterr().out)["automatic"]


def test_organization_suggestions_name_a_place_and_a_reason(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "ws"
    write(root / "package.json", 10)
    write(root / "train.log", 1_000)
    write(root / "src" / "debug.log", 500)
    write(root / "logs" / "kept.log", 500)  # already where it belongs
    write(root / "export_sales.csv", 800)
    write(root / "untitled3.ipynb", 300)
    write(root / "readme.md", 100)
    write(root / "other" / "pyproject.toml", 10)
    write(root / "other" / "run.log", 100)  # its own workspace
    api.scan_root(root, store=store)
    api.annotate([str(root / "src" / "debug.log")], store=store, decision="delete")
    before = tree_state(root)
    frame = suggest.organization_suggestions(str(root), store=store)
    tidy = dict(zip(frame["path"], frame["suggested"], strict=True))
    assert set(tidy) == {
        str(root / "train.log"), str(root / "export_sales.csv"), str(root / "untitled3.ipynb"),
        str(root / "other" / "run.log"),
    }  # fmt: skip
    month = datetime.fromtimestamp((root / "train.log").stat().st_mtime, UTC).strftime("%Y-%m")
    assert tidy[str(root / "train.log")] == str(root / "logs" / month / "train.log")
    assert tidy[str(root / "other" / "run.log")].startswith(str(root / "other" / "logs") + "/")
    assert tidy[str(root / "untitled3.ipynb")] == str(root / "scratch" / "untitled3.ipynb")
    assert tidy[str(root / "export_sales.csv")].startswith(str(root / "exports") + "/")
    assert all("outside" in reason for reason in frame["reason"])
    assert tree_state(root) == before  # suggestions only


def test_a_hostile_file_name_cannot_inject_markup_into_the_suggestion(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "proj"
    write(root / "pyproject.toml", 10)
    hostile = "evil`<img src=x onerror=alert(1)>|x.txt~"
    write(root / hostile, 300)
    api.scan_root(root, store=store)
    configure(store, root, "automatic = true\nthreshold = 100")
    found = suggest.suggested_plan(str(root), store=store)
    assert found is not None and found.shown
    text = suggest.suggestion_markdown(found)
    assert "<img" not in text and "`<" not in text and "&lt;img" in text
    row = next(line for line in text.splitlines() if "evil" in line)
    assert row.count("|") == 6  # the name's "|" does not split the table row


def test_a_config_others_can_write_or_a_linked_config_is_not_trusted(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "r"
    configure(store, root, 'verify = [["pytest"]]')
    (store / "config.toml").chmod(0o666)
    with pytest.raises(ConfigInvalid, match="only you can write"):
        load_root_config(Store(store), str(root))
    (store / "config.toml").chmod(0o600)
    assert load_root_config(Store(store), str(root) + "/").verify == (("pytest",),)  # normalized
    real = tmp_path / "elsewhere.toml"
    (store / "config.toml").rename(real)
    (store / "config.toml").symlink_to(real)
    with pytest.raises(ConfigInvalid, match="a link"):
        load_root_config(Store(store), str(root))


def test_roots_must_be_tables_of_absolute_paths(tmp_path: Path, store: Path) -> None:
    store.mkdir(parents=True)
    for body, says in (
        ('roots = "x"', "must be tables"),
        ('[roots."relative/dir"]\nautomatic = true', "not an absolute"),
        ('[roots."/a/"]\nautomatic = true\n[roots."/a"]\nautomatic = false', "two tables"),
    ):
        (store / "config.toml").write_text(body)
        (store / "config.toml").chmod(0o600)
        with pytest.raises(ConfigInvalid, match=says):
            load_root_config(Store(store), str(tmp_path))


def test_the_tidy_query_suggests_what_the_whole_table_does(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "w_s%!x"  # LIKE's wildcards and the escape character in the root itself
    write(root / "pyproject.toml", 10)
    for name in ("TRAIN.LOG", "results_a.csv", "resultsXa.csv", "Scratch_1.txt", "a_%.log"):
        write(root / name, 100)
    write(root / "sub" / "draft.txt", 10)
    write(root / "sub" / "run.log", 10)
    write(root / "sub" / "logs" / "x.log", 10)
    write(root / ".ssh" / "agent.log", 10)  # protected: never moved
    write(root / "w_sX" / "temp_1.json", 10)
    write(root / "a_b" / "one.log", 10)
    write(root / "aXb" / "two.log", 10)  # "a_b" taken as a LIKE pattern would match it
    api.scan_root(root, store=store)
    api.annotate([str(root / "a_%.log")], store=store, decision="delete")
    info = views.resolve_scan(str(root), store=store)
    table = views.classified_as_of_scan(info, store=store)
    decisions = views.human_decisions(store, info.root)
    for under in (None, str(root / "sub"), str(root / "a_b")):
        expected = suggest.organize(
            table, views.browse_frame(table), decisions, info.root, under=under
        )
        got = suggest.organization_suggestions(str(root), store=store, under=under)
        assert got.sort_values("path").to_dict("records") == expected.sort_values("path").to_dict(
            "records"
        )
        assert len(expected) > 0


def test_nothing_inside_a_virtualenv_or_a_package_directory_is_tidied(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "proj"
    write(root / "pyproject.toml", 10)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root / ".venv")], check=True)
    write(root / ".venv" / "lib" / "site" / "temp_dir.py", 30)  # a package's own "temp" module
    write(root / "package.json", 2)
    write(root / "node_modules" / "a" / "debug.log", 40)
    write(root / "build" / "out.log", 50)
    write(root / "run.log", 60)
    api.scan_root(root, store=store)
    found = suggest.organization_suggestions(str(root), store=store)
    assert list(found["path"]) == [str(root / "run.log")]


def _reference_tidy(root: Path, store: Path) -> list[tuple[str, str]]:
    """The tidy suggestions by their definition, a file at a time from the snapshot's rows."""
    info = views.resolve_scan(str(root), store=store)
    table = views.classified_as_of_scan(info, store=store)
    rows = table.to_pylist()
    markers = {r["parent"] for r in rows if r["name"] in PROJECT_MARKERS}
    decisions = views.human_decisions(store, info.root)
    out = []
    for r in rows:
        if r["kind"] != "file" or r["protected"] or (r["group"] and not r["group_root"]):
            continue
        path = f"{r['parent']}/{r['name']}"
        covering = [p for p in decisions if path == p or path.startswith(p.rstrip("/") + "/")]
        if covering and decisions[max(covering, key=len)] == "delete":
            continue
        stem, ext = os.path.splitext(r["name"].lower())
        if ext == ".log":
            category = "logs"
        elif ext in suggest._EXPORT_EXTS and stem.startswith(suggest.ORGANIZE["exports"][2]):
            category = "exports"
        elif stem.startswith(suggest.ORGANIZE["scratch"][2]):
            category = "scratch"
        else:
            continue
        _, target, _, homes = suggest.ORGANIZE[category]
        if os.path.basename(r["parent"]) in homes:
            continue
        workspace = r["parent"]
        while workspace not in markers and workspace != info.root:
            workspace = os.path.dirname(workspace)
        seconds = r["mtime_ns"] // 10**9  # whole seconds: the last second of a month is in it
        month = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m")
        suggested = os.path.join(workspace, target.format(month=month), r["name"])
        if suggested != path:
            out.append((path, suggested))
    return sorted(out)


_TIDY_NAMES = ("run.log", "A.LOG", ".log", "x..log", "export_1.csv", "output.TXT", "dump",
               "results_x.json", "scratch.py", "Untitled.ipynb", "draft", "notes.md")  # fmt: skip
_TIDY_DIRS = ("", "logs", "exports", "scratch", "proj", "proj/logs", "proj/src", "a/b/c")
# a month's last second, its last nanosecond, and the first instant of the next
_MONTH_END_NS = (1_735_689_599 * 10**9, 1_735_689_600 * 10**9 - 1, 1_735_689_600 * 10**9)


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    files=st.lists(
        st.tuples(st.sampled_from(_TIDY_DIRS), st.sampled_from(_TIDY_NAMES),
                  st.sampled_from(_MONTH_END_NS)),
        min_size=1, max_size=12, unique_by=lambda f: (f[0], f[1]),
    ),
    deleted=st.sets(st.sampled_from(_TIDY_DIRS[1:]), max_size=2),
)  # fmt: skip
def test_tidy_suggestions_agree_with_their_definition(
    tmp_path_factory: pytest.TempPathFactory,
    files: list[tuple[str, str, int]],
    deleted: set[str],
) -> None:
    base = tmp_path_factory.mktemp("tidy")
    root, store = base / "ws", base / "store"
    write(root / "proj" / "pyproject.toml", 10)
    write(root / "skipped" / "x.bin", 10)  # excluded: a directory with no newest time
    for directory, name, mtime_ns in files:
        path = root / directory / name
        write(path, 10)
        os.utime(path, ns=(mtime_ns, mtime_ns))
    api.scan_root(root, store=store, excludes=["skipped"])
    for directory in deleted:
        if (root / directory).exists():
            api.annotate([str(root / directory)], store=store, decision="delete")
    expected = _reference_tidy(root, store)
    found = suggest.organization_suggestions(str(root), store=store)
    assert sorted(zip(found["path"], found["suggested"], strict=True)) == expected
    # the widget's way, from the whole table and its browse frame (whose times are float here)
    info = views.resolve_scan(str(root), store=store)
    table = views.classified_as_of_scan(info, store=store)
    frame = views.browse_frame(table)
    assert frame["latest_mtime_ns"].dtype.kind == "f"
    decisions = views.human_decisions(store, info.root)
    found = suggest.organize(table, frame, decisions, info.root)
    assert sorted(zip(found["path"], found["suggested"], strict=True)) == expected
