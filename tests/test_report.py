"""`hygiene-nb report`: papermill runs the packaged audit notebook; the HTML works offline."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from hygiene_nb import api
from hygiene_nb.cli import main
from hygiene_nb.notebook.demo import DemoStore, make_demo_store
from hygiene_nb.notebook.figures import FIGURE_IDS
from hygiene_nb.notebook.report import classify_ahead
from hygiene_nb.scan.index import classified_dir, list_scans

pytestmark = pytest.mark.slow


@pytest.fixture
def demo(tmp_path: Path) -> DemoStore:
    return make_demo_store(tmp_path / "tree", tmp_path / "store", scans=2)


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, object]]:
    with pytest.raises(SystemExit) as exit_info:
        main([*args, "--json"])
    out = capsys.readouterr().out
    return int(exit_info.value.code or 0), json.loads(out)


def tree_state(root: Path) -> list[tuple[str, int, int]]:
    return sorted((str(p), p.lstat().st_size, p.lstat().st_mtime_ns) for p in root.rglob("*"))


def test_the_report_is_offline_html_without_code_and_with_every_figure(
    demo: DemoStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = tree_state(demo.tree)
    code, doc = run(
        ["report", str(demo.root), "--store", str(demo.store), "--out", str(tmp_path / "reports")],
        capsys,
    )
    assert code == 0 and doc["status"] == "done"
    html_path, nb_path = Path(str(doc["html"])), Path(str(doc["notebook"]))
    scan_id = demo.scans[-1].scan_id
    assert html_path.name == f"{scan_id}.html" and nb_path.name == f"{scan_id}.ipynb"
    assert html_path.parent.parent == tmp_path / "reports"
    html = html_path.read_text()
    for fig_id in FIGURE_IDS:
        assert f'id="hnb-{fig_id}"' in html, fig_id
    assert "Plotly.newPlot" in html and len(html) > 3_000_000  # plotly.js is inlined
    assert not re.search(r"<script[^>]+src=", html)  # nothing fetched from the network
    assert "or_demo" not in html and "injected-parameters" not in html  # no code cells
    assert scan_id in html and "sha256:" in html  # provenance: snapshot, rules, ledger
    executed = nbformat.read(nb_path, as_version=4)
    assert executed.metadata.papermill.parameters["scan_id"] == scan_id
    assert tree_state(demo.tree) == before  # the report wrote nothing in the scanned tree


def test_a_report_says_what_it_is_doing_when_asked_and_nothing_otherwise(
    demo: DemoStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hygiene_nb.notebook.report import make_report

    make_report(str(demo.root), store=demo.store, out=tmp_path / "shown", progress=True)
    err = capsys.readouterr().err
    stages = [line for line in err.splitlines() if line.startswith("report: ")]
    assert stages == [
        f"report: classifying the scans of {demo.root} not classified yet…",
        "report: running the audit notebook…",
        "report: writing the notebook and its HTML…",
    ]
    cells = len(nbformat.read(next((tmp_path / "shown").rglob("*.ipynb")), as_version=4).cells)
    assert f"{cells}/{cells}" in err  # the bar of the cells run, at its end
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(demo.root), "--store", str(demo.store), "--out", str(tmp_path / "q")])
    said = capsys.readouterr()
    assert exit_info.value.code in (0, None) and "report: " in said.out  # its result
    assert said.err == ""  # not a terminal: nothing said on the way


def test_the_report_kernel_leaves_no_temporary_files(
    demo: DemoStore,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The kernel is stopped at once after its last cell: what its queries made to spill in
    goes with the report's scratch directory."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))  # the command's and (but for the report) the kernel's
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    code, _ = run(
        ["report", str(demo.root), "--store", str(demo.store), "--out", str(tmp_path / "reports")],
        capsys,
    )
    assert code == 0
    assert list(temp.iterdir()) == []


def test_two_runs_on_the_same_inputs_give_byte_identical_html(
    demo: DemoStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    api.annotate([str(demo.root / ".cache")], store=demo.store, decision="delete")
    outs = []
    for name in ("one", "two"):
        code, doc = run(
            ["report", str(demo.root), "--store", str(demo.store), "--out", str(tmp_path / name)],
            capsys,
        )
        assert code == 0
        outs.append(Path(str(doc["html"])).read_bytes())
    assert outs[0] == outs[1]
    api.annotate([str(demo.root / "Pictures")], store=demo.store, decision="keep")
    code, doc = run(
        ["report", str(demo.root), "--store", str(demo.store), "--out", str(tmp_path / "three")],
        capsys,
    )
    assert Path(str(doc["html"])).read_bytes() != outs[0]  # the ledger is part of the input


def test_a_failing_cell_exits_1_and_still_writes_both_files(
    demo: DemoStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (demo.store / "rules.toml").write_text("[[rule]]\nname = 'broken'\n")  # no match, no risk
    code, doc = run(
        ["report", str(demo.root), "--store", str(demo.store), "--out", str(tmp_path / "reports")],
        capsys,
    )
    assert code == 1
    error = doc["error"]
    assert isinstance(error, dict) and error["code"] == "report-failed"
    written = sorted(p.suffix for p in (tmp_path / "reports").rglob("*") if p.is_file())
    assert written == [".html", ".ipynb"]
    html = next((tmp_path / "reports").rglob("*.html")).read_text()
    assert "An Exception was encountered" in html and "RuleInvalid" in html


def test_scan_first_reports_on_the_new_scan(
    demo: DemoStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, doc = run(
        [
            "report",
            str(demo.root),
            "--scan",
            "--store",
            str(demo.store),
            "--out",
            str(tmp_path / "reports"),
        ],
        capsys,
    )
    assert code == 0
    latest = api.list_snapshots(store=demo.store)[-1]
    assert len(api.list_snapshots(store=demo.store)) == 3
    assert doc["scan_id"] == latest.scan_id != demo.scans[-1].scan_id


def test_report_refuses_scan_with_a_snapshot_id(
    demo: DemoStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, doc = run(
        [
            "report",
            str(demo.root),
            "--scan",
            "--snapshot",
            demo.scans[0].scan_id,
            "--store",
            str(demo.store),
            "--out",
            str(tmp_path / "r"),
        ],
        capsys,
    )
    error = doc["error"]
    assert code == 2 and isinstance(error, dict) and error["code"] == "bad-usage"
    assert not (tmp_path / "r").exists()
    assert len(api.list_snapshots(store=demo.store)) == 2  # nothing was scanned


def test_report_on_a_root_never_scanned_says_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "never").mkdir()
    code, doc = run(
        [
            "report",
            str(tmp_path / "never"),
            "--store",
            str(tmp_path / "s"),
            "--out",
            str(tmp_path / "r"),
        ],
        capsys,
    )
    error = doc["error"]
    assert code == 2 and isinstance(error, dict) and error["code"] == "snapshot-not-found"
    assert "hygiene-nb scan" in str(error["message"])


SECRETS = ("zebracorn-secret", "quux-confidential", "project-nightingale", "note-xyzzy-private")


@pytest.fixture
def private_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path, Path]:
    """A home whose path, user name, file names and notes are all distinctive."""
    home = tmp_path / "zyxuser-home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("USER", "zyxuser")
    monkeypatch.setenv("LOGNAME", "zyxuser")
    root = home / "work"
    (root / "zebracorn-secret").mkdir(parents=True)
    (root / "zebracorn-secret" / "quux-confidential.txt").write_text("private words")
    (root / "project-nightingale" / "logs").mkdir(parents=True)
    (root / "project-nightingale" / "logs" / "run.log").write_text("x" * 5_000)
    (root / "project-nightingale" / "cache.tmp").write_text("y" * 800)
    (root / "project-nightingale" / "nightingale-plan.txt~").write_text("a backup")  # safe
    store = tmp_path / "hn-store"
    store.mkdir()
    (store / "config.toml").write_text(f'[roots."{root}"]\nautomatic = true\nthreshold = 100\n')
    api.scan_root(root, store=store)
    (root / "project-nightingale" / "logs" / "run2.log").write_text("z" * 300)
    api.scan_root(root, store=store)
    api.annotate(
        [str(root / "project-nightingale" / "cache.tmp")],
        store=store,
        decision="delete",
        note="note-xyzzy-private",
    )
    api.annotate([str(root / "zebracorn-secret")], store=store, decision="unsure")
    api.make_plan(root, store=store)
    return home, root, store


def leaks(data: bytes, home: Path, root: Path, store: Path) -> list[str]:
    needles = [*SECRETS, "zyxuser", str(home), str(root), str(store), "work/"]
    return [n for n in needles if n.encode() in data]


def test_a_redacted_report_holds_no_path_name_user_or_note(
    private_tree: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, root, store = private_tree
    out = tmp_path / "out"
    code, doc = run(
        ["report", str(root), "--redact", "--store", str(store), "--out", str(out)], capsys
    )
    assert code == 0
    html, notebook = Path(str(doc["html"])), Path(str(doc["notebook"]))
    suggested = Path(str(doc["suggested_plan"]))  # automatic mode: counts by group only
    assert html.parent == out / "redacted" == suggested.parent
    assert "temporary" in suggested.read_text()
    for path in (html, notebook, suggested):
        assert leaks(path.read_bytes(), home, root, store) == [], path
    text = html.read_text()
    plan = api.make_plan(root, store=store)  # a second plan: both ids must be listed
    assert "caution" in text and "logs" in text  # categories stay
    assert plan.plan_id not in text  # made after the report
    first_plan = [p.name.removesuffix(".json") for p in (store / "plans").glob("*.json")]
    assert any(pid in text for pid in first_plan)
    # the same inputs unredacted do name them (the test can see a leak)
    code, doc = run(["report", str(root), "--store", str(store), "--out", str(out)], capsys)
    assert "zebracorn-secret" in leaks(Path(str(doc["html"])).read_bytes(), home, root, store)


def test_a_failing_redacted_report_does_not_leak_through_the_error(
    private_tree: tuple[Path, Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home, root, store = private_tree
    (store / "rules.toml").write_text("[[rule]]\nname = 'broken'\n")
    code, _ = run(
        ["report", str(root), "--redact", "--store", str(store), "--out", str(tmp_path / "out")],
        capsys,
    )
    assert code == 1
    for path in (tmp_path / "out").rglob("*.*"):
        assert leaks(path.read_bytes(), home, root, store) == [], path


def test_automatic_mode_adds_a_suggested_plan_to_the_report_and_moves_nothing(
    demo: DemoStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = f'[roots."{demo.root}"]\nautomatic = true\nthreshold = 95\n'
    (demo.store / "config.toml").write_text(config)
    before = tree_state(demo.tree)
    code, doc = run(
        ["report", str(demo.root), "--store", str(demo.store), "--out", str(tmp_path / "reports")],
        capsys,
    )
    assert code == 0 and doc["suggested_plan"]
    suggested = Path(str(doc["suggested_plan"]))
    assert suggested.name == f"{demo.scans[-1].scan_id}.suggested-plan.md"
    text = suggested.read_text()
    assert "nothing has been decided or moved" in text and "--decline" in text
    assert "Suggested plan" in Path(str(doc["html"])).read_text()
    assert tree_state(demo.tree) == before
    assert api.list_snapshots(store=demo.store)[-1].scan_id == demo.scans[-1].scan_id


def test_inside_the_scanned_root_a_report_adds_files_and_never_replaces_one(
    demo: DemoStore, capsys: pytest.CaptureFixture[str]
) -> None:
    out = demo.root / "Documents" / "reports"  # e.g. `make audit` on a home holding a checkout
    before = tree_state(demo.tree)
    code, doc = run(
        ["report", str(demo.root), "--store", str(demo.store), "--out", str(out)], capsys
    )
    assert code == 0
    after = tree_state(demo.tree)
    added = {p for p, *_ in after} - {p for p, *_ in before}
    assert all(p.startswith(str(out)) for p in added) and len(added) == 4  # 2 dirs, 2 files
    assert [e for e in before if not e[0].startswith(str(demo.root / "Documents"))] == [
        e for e in after if not e[0].startswith(str(demo.root / "Documents"))
    ]
    html = Path(str(doc["html"]))
    mine = html.read_bytes()
    code, doc = run(
        ["report", str(demo.root), "--store", str(demo.store), "--out", str(out)], capsys
    )
    error = doc["error"]
    assert code == 2 and isinstance(error, dict) and "never replaces" in str(error["message"])
    assert html.read_bytes() == mine


def test_a_report_on_an_older_snapshot_shows_history_as_it_stood_and_stays_the_same(
    demo: DemoStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    oldest = demo.scans[0].scan_id
    args = ["report", str(demo.root), "--snapshot", oldest, "--store", str(demo.store)]
    code, doc = run([*args, "--out", str(tmp_path / "one")], capsys)
    assert code == 0  # one snapshot up to then: no diff, no failure
    first = Path(str(doc["html"])).read_bytes()
    assert demo.scans[1].scan_id.encode() not in first  # no later scan in its history
    api.scan_root(demo.root, store=demo.store)  # a newer scan changes nothing in this report
    code, doc = run([*args, "--out", str(tmp_path / "two")], capsys)
    assert code == 0 and Path(str(doc["html"])).read_bytes() == first


_QUERY_MEMORY_PROBE = """
from hygiene_nb.scan.snapshot import query_engine
with query_engine() as con:
    print(con.execute("SELECT current_setting('memory_limit')").fetchone()[0])
"""


@pytest.mark.parametrize(("given", "seen"), [(None, "190.7 MiB"), ("1GB", "953.6 MiB")])
def test_the_report_kernel_queries_with_less_query_memory_unless_one_is_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str | None, seen: str
) -> None:
    """A report's views share one kernel beside the command: 200MB each (the default is
    512MB), or the user's."""
    from hygiene_nb.notebook import report

    if given is None:
        monkeypatch.delenv("HYGIENE_NB_QUERY_MEMORY", raising=False)
    else:
        monkeypatch.setenv("HYGIENE_NB_QUERY_MEMORY", given)
    source, running = tmp_path / "probe.ipynb", tmp_path / "ran.ipynb"
    cell = nbformat.v4.new_code_cell(_QUERY_MEMORY_PROBE)
    nbformat.write(nbformat.v4.new_notebook(cells=[cell]), source)
    env = report.kernel_environment()
    assert report._run(source, running, {}, env, cwd=tmp_path, timeout=120) is None
    (ran,) = nbformat.read(running, as_version=4).cells
    assert [o.get("text", "").strip() for o in ran.outputs] == [seen]


def test_the_report_classifies_its_scans_ahead_and_its_views_read_those(
    demo: DemoStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before the kernel starts, a process of its own classifies every scan the report reads;
    the kernel's views find them kept under the same key and classify nothing again."""
    st = api.open_store(demo.store)
    shutil.rmtree(st.root / "classified", ignore_errors=True)
    scans = list_scans(st, root=str(demo.root))
    assert len(scans) == 2
    assert classify_ahead(st, scans[-1], timeout=300)
    kept = [p for info in scans for p in classified_dir(st, info).glob("*.parquet")]
    assert len(kept) == 2  # one per scan
    before = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in kept}
    code, doc = run(
        ["report", str(demo.root), "--store", str(demo.store), "--out", str(tmp_path / "out")],
        capsys,
    )
    assert code == 0 and doc["status"] == "done"
    now = [p for info in scans for p in classified_dir(st, info).glob("*.parquet")]
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in now} == before


def test_classifying_ahead_that_fails_changes_nothing(demo: DemoStore) -> None:
    """A scan the store does not hold: the process says so and ends; nothing is written (the
    report's kernel would then classify what it reads, as without it)."""
    st = api.open_store(demo.store)
    shutil.rmtree(st.root / "classified", ignore_errors=True)
    latest = list_scans(st, root=str(demo.root))[-1]
    assert not classify_ahead(st, dataclasses.replace(latest, scan_id="s-not-there"), timeout=60)
    assert not (st.root / "classified").exists()


def test_the_classifying_process_takes_a_store_and_a_scan(
    demo: DemoStore, capsys: pytest.CaptureFixture[str]
) -> None:
    from hygiene_nb.notebook import ahead

    st = api.open_store(demo.store)
    shutil.rmtree(st.root / "classified", ignore_errors=True)
    scans = list_scans(st, root=str(demo.root))
    assert ahead.main([str(st.root)]) == 2
    assert "usage:" in capsys.readouterr().err
    assert ahead.main([str(st.root), "s-not-there"]) == 2
    assert capsys.readouterr().err.startswith("snapshot-not-found: ")
    assert ahead.main([str(st.root), scans[0].scan_id]) == 0  # up to the first scan: only it
    assert [len(list(classified_dir(st, s).glob("*.parquet"))) for s in scans] == [1, 0]


def test_classifying_ahead_stops_at_a_store_that_cannot_keep_it(
    demo: DemoStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing kept (``classified`` is a file): the first scan's classification is not kept,
    the process says so and classifies no other; the kernel would classify what it reads."""
    from hygiene_nb.notebook import ahead

    st = api.open_store(demo.store)
    shutil.rmtree(st.root / "classified", ignore_errors=True)
    (st.root / "classified").write_text("not a directory")
    latest = list_scans(st, root=str(demo.root))[-1]
    assert not api.keep_classifications(store=st, until=latest.scan_id)
    assert ahead.main([str(st.root), latest.scan_id]) == 1
    assert capsys.readouterr().err.startswith("store-unusable: ")
    assert not classify_ahead(st, latest, timeout=300)
    assert (st.root / "classified").read_text() == "not a directory"


def test_classifying_ahead_past_its_time_is_stopped_and_leaves_nothing(demo: DemoStore) -> None:
    st = api.open_store(demo.store)
    shutil.rmtree(st.root / "classified", ignore_errors=True)
    latest = list_scans(st, root=str(demo.root))[-1]
    assert not classify_ahead(st, latest, timeout=0)  # stopped at once: SIGTERM
    assert [p for p in st.root.rglob("*") if p.name.endswith(".tmp")] == []


def test_the_classifying_process_ends_when_its_command_has(demo: DemoStore) -> None:
    """Started for a command that is no longer its parent: it ends before reading anything."""
    from hygiene_nb.notebook.ahead import PARENT_VARIABLE

    st = api.open_store(demo.store)
    shutil.rmtree(st.root / "classified", ignore_errors=True)
    latest = list_scans(st, root=str(demo.root))[-1]
    argv = [sys.executable, "-P", "-m", "hygiene_nb.notebook.ahead", str(st.root), latest.scan_id]
    env = os.environ | {PARENT_VARIABLE: "1"}  # not this test's pid
    done = subprocess.run(argv, env=env, capture_output=True, timeout=120, check=False)
    assert done.returncode == 1
    assert not (st.root / "classified").exists()


def test_classifying_ahead_imports_nothing_from_the_current_directory(
    demo: DemoStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = tmp_path / "workspace"
    (here / "hygiene_nb").mkdir(parents=True)
    marker = tmp_path / "imported"
    (here / "hygiene_nb" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    monkeypatch.chdir(here)
    st = api.open_store(demo.store)
    assert classify_ahead(st, list_scans(st, root=str(demo.root))[-1], timeout=300)
    assert not marker.exists()
