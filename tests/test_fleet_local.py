"""A fleet dataset on a directory: files are written under DEST/.staging and renamed into place.

Two hosts publish at once and one is killed (SIGKILL at a publish checkpoint, or from outside
while a file is being copied): no partial file is ever in the partition tree, readers see only
complete partitions, ``.staging`` is never read, and the killed host publishes again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.checkpoints import PUBLISH
from hygiene_nb.scan.index import root_slug
from hygiene_nb.store import FLEET_MARKER
from tests.helpers_fleet_cli import (
    dirs_to_depth,
    hnb_command,
    hnb_env,
    hnb_json,
    local_listing,
    make_tree,
    walked,
)


def scanned_host(tmp_path: Path, host: str, seed: int, files: int = 6) -> dict[str, Any]:
    """A real tree scanned into a store of its own, as one host would have it."""
    sizes = {f"d{i % 3}/sub{i % 2}/f{i}.bin": 500 + 37 * i + seed for i in range(files)}
    root = make_tree(tmp_path / host / "data", {"top.txt": 100 + seed, **sizes}, seed=seed)
    store = tmp_path / host / "store"
    info = api.scan_root(root, store=store)
    key = f"host={host}/root={root_slug(info.root)}/scan={info.scan_id}"
    return {"root": root, "store": store, "info": info, "key": key, "walk": walked(root)}


def publish_args(dest: Path | str, host: dict[str, Any], name: str) -> list[str]:
    return ["publish", str(dest), str(host["root"]), "--host", name, "--store", str(host["store"])]


def assert_everything_visible_is_whole(dest: Path) -> None:
    """Every file outside ``.staging`` is complete: Parquet files read, markers parse."""
    import pyarrow.parquet as pq

    for path in dest.rglob("*"):
        relative = path.relative_to(dest)
        if relative.parts[0] == ".staging" or not path.is_file():
            continue
        if path.suffix == ".parquet":
            pq.read_table(path)
        else:
            assert path.suffix == ".json", relative
            json.loads(path.read_bytes())


def summary(dest: Path) -> dict[str, Any]:
    code, answer, _ = hnb_json("fleet", str(dest), "summary")
    assert code == 0 and answer["status"] == "ok", answer
    return answer


def assert_rows(answer: dict[str, Any], hosts: dict[str, dict[str, Any]]) -> None:
    """The summary has exactly ``hosts``, each row's figures what os.walk finds in its tree."""
    rows = answer["questions"]["summary"]
    assert sorted(r["host"] for r in rows) == sorted(hosts)
    for row in rows:
        host = hosts[row["host"]]
        assert row["scan"] == host["info"].scan_id
        assert (row["files"], row["alloc"]) == (host["walk"]["files"], host["walk"]["alloc"])
        assert row["entries"] == host["walk"]["files"] + host["walk"]["dirs"]


def plant_in_staging(dest: Path, complete: str, as_host: str) -> None:
    """Put a copy of a complete partition's files, renamed to another host, under .staging
    (with the layout of the tree), and a half-written file: what a reader must never read."""
    staging = dest / ".staging"
    for relative in [p.relative_to(dest) for p in dest.rglob("*") if p.is_file()]:
        text = str(relative)
        if complete not in text:
            continue
        copy = staging / text.replace(complete.split("/", 1)[0], f"host={as_host}")
        copy.parent.mkdir(parents=True, exist_ok=True)
        data = (dest / relative).read_bytes()
        if relative.suffix == ".json":
            data = data.replace(complete.split("/", 1)[0].encode(), f"host={as_host}".encode())
        copy.write_bytes(data)
    (staging / "0123456789abcdef.tmp").write_bytes(b"PAR1 half a file")


@pytest.mark.parametrize("point", PUBLISH)
def test_a_killed_publish_leaves_nothing_a_reader_sees(tmp_path: Path, point: str) -> None:
    hosts = {"hA": scanned_host(tmp_path, "hA", 1), "hB": scanned_host(tmp_path, "hB", 2)}
    dest = tmp_path / "fleet"
    running = {
        name: subprocess.Popen(
            hnb_command(*publish_args(dest, host, name), "--json"),
            env=hnb_env({"HYGIENE_NB_TEST_CHECKPOINT": f"{point}:kill"} if name == "hB" else {}),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for name, host in hosts.items()
    }  # fmt: skip
    outputs = {name: proc.communicate(timeout=180) for name, proc in running.items()}
    assert running["hA"].returncode == 0, outputs["hA"]
    assert running["hB"].returncode == -signal.SIGKILL, outputs["hB"]

    assert (dest / "dirs" / hosts["hB"]["key"] / "part-0.parquet").is_file()
    assert not (dest / "published" / f"{hosts['hB']['key']}.json").exists()
    assert_everything_visible_is_whole(dest)
    plant_in_staging(dest, hosts["hA"]["key"], "hX")

    answer = summary(dest)
    assert answer["scans"] == 1
    assert_rows(answer, {"hA": hosts["hA"]})
    assert [(s["code"], s["partition"]) for s in answer["skipped"]] == [
        ("partition-incomplete", hosts["hB"]["key"])
    ]  # and nothing of hX, which is only under .staging
    code, history, _ = hnb_json("fleet", str(dest), "history")
    assert code == 0 and {r["host"] for r in history["questions"]["history"]} == {"hA"}

    code, again, _ = hnb_json(*publish_args(dest, hosts["hB"], "hB"))
    assert (code, again["status"]) == (0, "published")
    answer = summary(dest)
    assert answer["scans"] == 2 and answer["skipped"] == []
    assert_rows(answer, hosts)
    assert_everything_visible_is_whole(dest)

    before = local_listing(dest)
    for name, host in hosts.items():
        code, same, _ = hnb_json(*publish_args(dest, host, name))
        assert (code, same["status"]) == (0, "already-published")
    assert local_listing(dest) == before


def test_a_publish_killed_while_copying_a_file_leaves_it_only_in_staging(tmp_path: Path) -> None:
    """SIGKILL from outside the moment a temporary file is in .staging (a file being copied):
    the partition tree holds only whole files, the reader skips the partition or does not see
    it, and the host publishes again."""
    host = scanned_host(tmp_path, "hK", 3, files=3000)  # a snapshot file that takes a while
    dest = tmp_path / "fleet"
    code, _, _ = hnb_json(*publish_args(dest, scanned_host(tmp_path, "hA", 4), "hA"))
    assert code == 0
    staging = dest / ".staging"
    proc = subprocess.Popen(
        hnb_command(*publish_args(dest, host, "hK"), "--json"),
        env=hnb_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    caught = None
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:
        with os.scandir(staging) as entries:
            names = [e.name for e in entries if e.name.endswith(".tmp")]
        if names:
            os.kill(proc.pid, signal.SIGKILL)
            caught = names
            break
    proc.wait(60)
    assert caught, "the publish finished before a temporary file was seen in .staging"
    assert proc.returncode == -signal.SIGKILL
    assert any(p.name.endswith(".tmp") for p in staging.iterdir())  # left behind, never read
    assert_everything_visible_is_whole(dest)

    answer = summary(dest)
    assert [r["host"] for r in answer["questions"]["summary"]] == ["hA"]
    assert {s["partition"] for s in answer["skipped"]} <= {host["key"]}
    assert {s["code"] for s in answer["skipped"]} <= {"partition-incomplete"}

    code, again, _ = hnb_json(*publish_args(dest, host, "hK"))
    assert (code, again["status"]) == (0, "published")
    answer = summary(dest)
    assert sorted(r["host"] for r in answer["questions"]["summary"]) == ["hA", "hK"]
    assert answer["skipped"] == []
    import pyarrow.parquet as pq

    dirs = pq.read_table(dest / "dirs" / host["key"] / "part-0.parquet")
    assert dirs.num_rows == dirs_to_depth(host["root"], 3)
    snapshot = pq.read_table(dest / "snapshots" / host["key"] / "part-0.parquet")
    assert snapshot.num_rows == host["walk"]["files"] + host["walk"]["dirs"]
    assert snapshot.column("row_no").to_pylist() == list(range(snapshot.num_rows))


def test_a_dest_holding_only_a_stopped_first_publish_can_be_published_to(tmp_path: Path) -> None:
    """The first publish into a new directory was stopped while writing the fleet marker:
    ``.staging`` holds its temporary file and nothing else is there."""
    host = scanned_host(tmp_path, "hA", 5)
    dest = tmp_path / "fleet"
    (dest / ".staging").mkdir(parents=True)
    (dest / ".staging" / "fedcba9876543210.tmp").write_bytes(b'{"fleet_fo')
    code, out, _ = hnb_json(*publish_args(dest, host, "hA"))
    assert (code, out["status"]) == (0, "published")
    assert json.loads((dest / FLEET_MARKER).read_bytes())["fleet_format"] >= 1
    assert_rows(summary(dest), {"hA": host})


def test_many_hosts_publishing_into_a_new_directory_at_once_all_succeed(tmp_path: Path) -> None:
    """No lock and no shared file but the fleet marker (the same bytes from every publisher):
    each publish that races the others onto a new DEST succeeds."""
    hosts = {f"h{i}": scanned_host(tmp_path, f"h{i}", 10 + i, files=2) for i in range(3)}
    dest = tmp_path / "fleet"
    running = {
        name: subprocess.Popen(
            hnb_command(*publish_args(dest, host, name), "--json"),
            env=hnb_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for name, host in hosts.items()
    }  # fmt: skip
    for proc in running.values():
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, out + err
        assert json.loads(out)["status"] == "published"
    answer = summary(dest)
    assert answer["skipped"] == []
    assert_rows(answer, hosts)
    assert not [p for p in (dest / ".staging").iterdir()]  # every temporary file was renamed
    shutil.rmtree(dest / ".staging")  # not needed to read the dataset
    assert_rows(summary(dest), hosts)


def test_the_same_scan_published_twice_at_once_is_one_partition(tmp_path: Path) -> None:
    """Two cron runs overlapping: both succeed, the dataset holds the scan once."""
    host = scanned_host(tmp_path, "hA", 21)
    dest = tmp_path / "fleet"
    url = f"file://{dest}"  # the same directory, named as a URL by one of them
    running = [
        subprocess.Popen(
            hnb_command(*publish_args(where, host, "hA"), "--json"),
            env=hnb_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for where in (dest, url)
    ]  # fmt: skip
    statuses = []
    for proc in running:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, out + err
        statuses.append(json.loads(out)["status"])
    assert set(statuses) <= {"published", "already-published"} and "published" in statuses
    markers = [p for p in (dest / "published").rglob("*") if p.is_file()]
    assert [str(p.relative_to(dest / "published")) for p in markers] == [f"{host['key']}.json"]
    for name in (str(dest), url):
        code, answer, _ = hnb_json("fleet", name, "summary")
        assert code == 0 and answer["skipped"] == []
        assert_rows(answer, {"hA": host})
    before = local_listing(dest)
    code, again, _ = hnb_json(*publish_args(url, host, "hA"))
    assert (code, again["status"]) == (0, "already-published")
    assert local_listing(dest) == before
