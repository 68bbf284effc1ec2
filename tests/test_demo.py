"""The demo tree and store: deterministic, realistic enough to exercise every stage."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.errors import UsageError
from hygiene_nb.notebook.demo import make_demo_store, make_demo_tree


def listing(root: Path) -> list[tuple[str, int, int, bytes]]:
    out = []
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if path.is_file() else b""
        out.append(
            (str(path.relative_to(root)), st.st_size, st.st_mtime_ns if path.is_file() else 0, data)
        )
    return out


def test_the_same_seed_builds_the_same_tree(tmp_path: Path) -> None:
    make_demo_tree(tmp_path / "a", seed=7)
    make_demo_tree(tmp_path / "b", seed=7)
    make_demo_tree(tmp_path / "c", seed=8)
    assert listing(tmp_path / "a") == listing(tmp_path / "b")
    assert listing(tmp_path / "a") != listing(tmp_path / "c")


def test_the_demo_refuses_a_directory_that_holds_something(tmp_path: Path) -> None:
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "mine.txt").write_text("mine")
    with pytest.raises(UsageError):
        make_demo_tree(tmp_path / "busy")
    assert (tmp_path / "busy" / "mine.txt").read_text() == "mine"


def test_the_demo_store_has_a_growing_history_and_every_kind_of_risk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    demo = make_demo_store(tmp_path / "tree", tmp_path / "store", scans=3)
    assert len(demo.scans) == 3
    totals = [s.tree_bytes or 0 for s in demo.scans]
    assert totals == sorted(totals) and totals[0] < totals[-1]
    # the analyst's own home is elsewhere: the demo store's config.toml names the demo's home
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    summary = api.summarize(str(demo.root), store=demo.store)
    assert {r for r, s in summary.risk.items() if s.entries} == {
        "safe", "caution", "personal", "high", "unknown"
    }  # fmt: skip
    groups = {g.group for g in summary.groups}
    assert {
        "node_modules",
        "python-cache",
        "build-output",
        "package-cache",
        "logs",
        "personal",
    } <= groups


def test_the_demo_tree_is_never_shrunk_between_scans(tmp_path: Path) -> None:
    demo = make_demo_store(tmp_path / "tree", tmp_path / "store", scans=2)
    first = (
        api.load(str(demo.root), store=demo.store, scan_id=demo.scans[0].scan_id, columns=["path"])
        .column("path")
        .to_pylist()
    )
    assert all(os.path.lexists(p) for p in first)


def test_the_shared_demo_refuses_a_directory_others_can_open(tmp_path: Path) -> None:
    from hygiene_nb.notebook.demo import ensure_demo

    base = tmp_path / "demo"
    base.mkdir(mode=0o777)
    base.chmod(0o777)
    with pytest.raises(UsageError, match="not a private directory"):
        ensure_demo(base)
    assert list(base.iterdir()) == []
    (tmp_path / "link").symlink_to(base)
    with pytest.raises(UsageError, match="not a private directory"):
        ensure_demo(tmp_path / "link")
    base.chmod(0o700)
    first = ensure_demo(base, scans=1)
    again = ensure_demo(base, scans=1)  # built once, then reused
    assert [s.scan_id for s in again.scans] == [s.scan_id for s in first.scans]


def test_the_demo_fleet_publishes_every_scan_of_every_host_once(tmp_path: Path) -> None:
    from hygiene_nb import fleet
    from hygiene_nb.notebook.demo import DEMO_HOSTS, ensure_demo_fleet

    base = tmp_path / "demo"
    dest = ensure_demo_fleet(base)
    assert ensure_demo_fleet(base) == dest  # built once, then reused
    history = fleet.history(str(dest))
    counts = history.groupby("host")["scan"].nunique().to_dict()
    assert counts == dict(DEMO_HOSTS)
    # the demo only adds files, its scans a second apart or within one second: every host's
    # scans grow, so the fleet ordered each host's scans as they were taken
    for host, rows in history.groupby("host", sort=False):
        sizes = list(rows["alloc"])  # in the history's own order: by each scan's start
        assert sizes == sorted(sizes) and sizes[-1] > sizes[0], host
    growth = fleet.growth(str(dest))
    assert (growth["growth"] > 0).all()
