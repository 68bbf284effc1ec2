"""Publishing into a fleet dataset on a directory: what a partition holds, checked against the
store it came from, against du and os.walk, and against `hygiene-nb summary` of the same scan."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest

from tests.helpers import du_bytes, write

YEAR = 365 * 86_400


def hnb(*args: str, code: int = 0) -> dict[str, Any]:
    """Run the real command with --json; its one JSON object."""
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", *args, "--json"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == code, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout
    result: dict[str, Any] = json.loads(lines[0])
    return result


def make_tree(root: Path) -> None:
    write(root / "src" / "main.py", 3_000)
    write(root / "data" / "big.bin", 700_000)
    write(root / "data" / "deep" / "er" / "still" / "secret-name.txt", 12_345)
    old = write(root / "archive" / "old.log", 250_000)
    os.utime(old, (time.time() - 2 * YEAR, time.time() - 2 * YEAR))
    os.link(root / "data" / "big.bin", root / "archive" / "big-link.bin")  # counted once
    write(root / "node_modules" / "pkg" / "index.js", 40_000)
    write(root / "package-lock.json", 100)


@pytest.fixture
def published(tmp_path: Path, store: Path) -> tuple[Path, Path, dict[str, Any], dict[str, Any]]:
    root = tmp_path / "tree"
    make_tree(root)
    scan = hnb("scan", str(root), "--store", str(store))
    dest = tmp_path / "fleet"
    result = hnb("publish", str(dest), str(root), "--store", str(store), "--host", "ws1")
    assert result["status"] == "published" and result["scan_id"] == scan["scan_id"]
    return root, dest, scan, result


def marker_of(dest: Path, result: dict[str, Any]) -> dict[str, Any]:
    path = dest / "published" / f"{result['partition']}.json"
    loaded: dict[str, Any] = json.loads(path.read_text())
    return loaded


def test_a_partition_holds_the_snapshot_and_verdicts_row_for_row(
    published: tuple[Path, Path, dict[str, Any], dict[str, Any]], store: Path
) -> None:
    root, dest, _scan, result = published
    marker = marker_of(dest, result)
    assert (dest / "hygiene-nb-fleet.json").is_file()
    named = set(marker["files"].values())
    on_disk = {
        str(p.relative_to(dest))
        for p in dest.rglob("*")
        if p.is_file() and p.parts[len(dest.parts)] in ("snapshots", "classified", "dirs")
    }
    assert on_disk == named  # the marker names every data file, nothing else is there

    original = next((store / "snapshots").rglob("part-0.parquet"))
    copy = dest / marker["files"]["snapshots"]
    kept = pq.read_table(original)
    shipped = pq.read_table(copy)
    assert shipped.column("row_no").to_pylist() == list(range(kept.num_rows))
    assert shipped.drop_columns(["row_no"]).equals(kept)
    footer = pq.read_metadata(original).metadata
    assert {b"hygiene_nb.scan", b"hygiene_nb.format_version"} <= set(footer)
    shipped_footer = pq.read_metadata(copy).metadata
    assert {k: shipped_footer[k] for k in footer if k != b"ARROW:schema"} == {
        k: v for k, v in footer.items() if k != b"ARROW:schema"
    }

    # any engine can join the verdicts by row_no: the risk mix equals the summary's
    summary = hnb("summary", str(root), "--store", str(store))
    mix = dict(
        duckdb.connect()
        .execute(
            f"""
            SELECT risk, CAST(sum(size) AS BIGINT) FROM (
              SELECT c.risk, s.size,
                     row_number() OVER (PARTITION BY s.dev, s.inode ORDER BY s.row_no) AS nth
              FROM read_parquet('{copy}') s
              JOIN read_parquet('{dest / marker["files"]["classified"]}') c ON c.row_no = s.row_no)
            WHERE nth = 1 GROUP BY risk
            """
        )
        .fetchall()
    )
    for risk, stats in summary["risk"].items():
        assert mix.get(risk, 0) == stats["bytes"], risk


def test_the_markers_figures_are_the_summarys(
    published: tuple[Path, Path, dict[str, Any], dict[str, Any]], store: Path
) -> None:
    root, dest, _scan, result = published
    fig = marker_of(dest, result)["figures"]
    summary = hnb("summary", str(root), "--store", str(store))
    assert fig["alloc"] == summary["tree_alloc"] == du_bytes(root, apparent=False)
    assert fig["bytes"] == summary["tree_bytes"] == du_bytes(root, apparent=True)
    assert fig["risk_alloc"] == {r: s["alloc"] for r, s in summary["risk"].items()}
    assert fig["reclaimable_alloc"] == summary["reclaimable"]["safe"]["alloc"]
    assert fig["cleanliness"] == summary["cleanliness"]
    # untouched for a year: the files os.walk finds older than a year, each inode once
    seen, stale = set(), 0
    for top, _, files in os.walk(root):
        for name in files:
            st = os.lstat(os.path.join(top, name))
            if st.st_mtime < time.time() - YEAR and (st.st_dev, st.st_ino) not in seen:
                seen.add((st.st_dev, st.st_ino))
                stale += st.st_blocks * 512
    assert stale > 0 and fig["stale_alloc"] == stale


def test_the_directory_sums_are_dus_down_to_the_depth(
    published: tuple[Path, Path, dict[str, Any], dict[str, Any]],
) -> None:
    root, dest, _, result = published
    marker = marker_of(dest, result)
    rows = pq.read_table(dest / marker["files"]["dirs"]).to_pylist()
    expected = {str(root)}
    for top, dirs, _ in os.walk(root):
        for name in dirs:
            path = Path(top) / name
            if len(path.relative_to(root).parts) <= 3:
                expected.add(str(path))
    assert {r["path"] for r in rows} == expected
    for row in rows:
        assert row["alloc"] == du_bytes(Path(row["path"]), apparent=False), row["path"]
        assert (row["host"], row["scan"]) == ("ws1", result["scan_id"])


def test_redacted_publishes_no_name_below_the_depth_and_no_owner(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "tree"
    make_tree(root)
    hnb("scan", str(root), "--store", str(store))
    dest = tmp_path / "fleet"
    result = hnb("publish", str(dest), str(root), "--store", str(store), "--redact", "--depth", "2")
    assert result["redacted"] is True
    marker = marker_of(dest, result)
    assert set(marker["files"]) == {"dirs"}
    assert not (dest / "snapshots").exists() and not (dest / "classified").exists()
    assert marker["owners"] == []
    for private in ("user_names", "group_names", "cache_tags", "options", "root_inode"):
        assert private not in marker["scan"]
    depths = pq.read_table(dest / marker["files"]["dirs"]).column("depth").to_pylist()
    assert max(depths) == 2
    for path in dest.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            for name in (b"secret-name", b"still", b"main.py", b"old.log", b"index.js"):
                assert name not in data, (path, name)
    owners = hnb("fleet", str(dest), "owners")
    assert owners["questions"]["owners"] == []


def test_publishing_the_same_scan_again_changes_nothing(
    published: tuple[Path, Path, dict[str, Any], dict[str, Any]], store: Path
) -> None:
    root, dest, _, _result = published

    def listing() -> dict[str, tuple[int, int]]:
        return {
            str(p.relative_to(dest)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in dest.rglob("*")
            if p.is_file()
        }

    before = listing()
    again = hnb("publish", str(dest), str(root), "--store", str(store), "--host", "ws1")
    assert again["status"] == "already-published" and again["files"] == {}
    assert listing() == before


def test_scan_publish_does_both_and_the_fleet_sees_the_growth(
    published: tuple[Path, Path, dict[str, Any], dict[str, Any]], store: Path
) -> None:
    root, dest, _first, _ = published
    write(root / "data" / "new.bin", 1_000_000)
    args = ["scan", str(root), "--store", str(store), "--publish", str(dest)]
    scanned = hnb(*args, "--publish-host", "ws1")  # the host the first scan is published as
    second = scanned["published"]
    assert second["status"] == "published" and second["scan_id"] == scanned["scan_id"]
    assert second["host"] == "ws1"
    answer = hnb("fleet", str(dest), "growth", "--host", "ws1")
    grown = {row["path"]: row["growth"] for row in answer["questions"]["top_dirs"]}
    data = str(root / "data")
    assert grown[data] == du_bytes(root / "data" / "new.bin", apparent=False)
    (row,) = hnb("fleet", str(dest), "summary")["questions"]["summary"]
    assert (row["host"], row["scan"]) == ("ws1", scanned["scan_id"])
    assert row["growth"] == du_bytes(root / "data" / "new.bin", apparent=False)
    # without --publish-host, the scan's own host name (this machine's)
    write(root / "data" / "newer.bin", 5000)
    third = hnb(*args)["published"]
    assert third["host"] == socket.gethostname() and third["status"] == "published"
    hosts = {r["host"]: r for r in hnb("fleet", str(dest), "summary")["questions"]["summary"]}
    assert set(hosts) == {"ws1", socket.gethostname()}
    assert hosts[socket.gethostname()]["growth"] is None  # one scan: nothing to compare with


def test_the_python_calls_return_the_commands_rows_as_dataframes(
    published: tuple[Path, Path, dict[str, Any], dict[str, Any]],
) -> None:
    import hygiene_nb.fleet as fleet

    _, dest, _, _ = published
    for name in ("summary", "history", "growth", "top_dirs", "risk", "stale", "owners"):
        frame = getattr(fleet, name)(str(dest), engine="duckdb")
        command = "growth" if name == "top_dirs" else name
        rows = hnb("fleet", str(dest), command)["questions"][name]
        assert frame.to_dict("records") == rows, name
    assert list(fleet.summary(str(dest))["host"]) == ["ws1"]


def _scan_and_publish(root: Path, store: Path, dest: Path, *extra: str) -> dict[str, Any]:
    scan = hnb("scan", str(root), "--store", str(store), *extra)
    hnb("publish", str(dest), "--snapshot", scan["scan_id"], "--store", str(store), "--host", "h")
    return scan


def test_growth_pairs_directories_by_their_exact_bytes(tmp_path: Path, store: Path) -> None:
    root, dest = tmp_path / "tree", tmp_path / "fleet"
    raw = os.fsencode(str(root)) + b"/d\xff"  # not UTF-8: its text reads "d\xff"
    lookalike = root / "d\\xff"  # a name whose text is the same six characters
    os.makedirs(raw)
    write(lookalike / "same.bin", 50_000)
    _scan_and_publish(root, store, dest)
    with open(raw + b"/new.bin", "wb") as handle:
        handle.write(b"x" * 80_000)
    _scan_and_publish(root, store, dest)
    rows = hnb("fleet", str(dest), "growth")["questions"]["top_dirs"]
    grown = [(r["path"], r["growth"]) for r in rows if r["depth"] == 1]
    # one directory grew, by what du says of its new file; its look-alike is not listed
    assert grown == [(str(lookalike), du_bytes(raw + b"/new.bin", apparent=False))]


def test_growth_compares_only_what_the_scan_before_could_publish(
    tmp_path: Path, store: Path
) -> None:
    root, dest = tmp_path / "tree", tmp_path / "fleet"
    write(root / "a" / "b" / "c" / "old.bin", 10_000)
    first = hnb("scan", str(root), "--store", str(store))
    hnb("publish", str(dest), "--snapshot", first["scan_id"], "--store", str(store),
        "--host", "h", "--depth", "1")  # fmt: skip
    write(root / "a" / "b" / "c" / "new.bin", 30_000)
    _scan_and_publish(root, store, dest)
    rows = hnb("fleet", str(dest), "growth")["questions"]["top_dirs"]
    # a/b and a/b/c were not in the scan before (depth 1): never shown as new, whole
    assert [(r["path"], r["growth"]) for r in rows] == [
        (str(root / "a"), du_bytes(root / "a" / "b" / "c" / "new.bin", apparent=False))
    ]


def test_a_scan_whose_dirs_file_is_gone_leaves_growth_to_the_two_before(
    tmp_path: Path, store: Path
) -> None:
    root, dest = tmp_path / "tree", tmp_path / "fleet"
    write(root / "a" / "one.bin", 10_000)
    _scan_and_publish(root, store, dest)
    write(root / "a" / "two.bin", 20_000)
    _scan_and_publish(root, store, dest)
    write(root / "a" / "three.bin", 40_000)
    third = _scan_and_publish(root, store, dest)
    (next((dest / "dirs").rglob(f"scan={third['scan_id']}/part-0.parquet"))).unlink()
    answer = hnb("fleet", str(dest), "growth")
    assert [s["code"] for s in answer["skipped"]] == ["partition-damaged"]
    rows = {r["path"]: r["growth"] for r in answer["questions"]["top_dirs"]}
    assert rows == {str(root / "a"): du_bytes(root / "a" / "two.bin", apparent=False)}


def test_a_partial_scan_has_no_growth(tmp_path: Path, store: Path) -> None:
    root, dest = tmp_path / "tree", tmp_path / "fleet"
    for i in range(6):
        write(root / f"d{i}" / "f.bin", 10_000)
    _scan_and_publish(root, store, dest)
    _scan_and_publish(root, store, dest, "--max-entries", "4")  # sums are lower bounds
    (row,) = hnb("fleet", str(dest), "summary")["questions"]["summary"]
    assert row["partial"] is True and row["growth"] is None
    growth = hnb("fleet", str(dest), "growth")["questions"]
    assert growth["growth"][0]["partial_roots"] == 1 and growth["growth"][0]["growth"] == 0
    for r in growth["top_dirs"]:  # only complete sums are compared
        assert r["alloc"] == du_bytes(Path(r["path"]), apparent=False), r
