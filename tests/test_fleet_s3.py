"""A fleet dataset on an object store: moto's S3 server on 127.0.0.1 as the endpoint.

Two hosts publish at once, one is killed (SIGKILL at a publish checkpoint) and readers see only
the complete partition; the killed one publishes again; publishing a scan twice changes
nothing; Spark is refused an s3:// DEST before any request.
"""

from __future__ import annotations

import json
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.checkpoints import PUBLISH
from hygiene_nb.scan.index import root_slug
from tests.helpers_fleet_cli import (
    S3_ENV,
    dirs_to_depth,
    hnb_command,
    hnb_env,
    hnb_error,
    hnb_json,
    make_tree,
    moto_server,
    s3_filesystem,
    s3_listing,
    walked,
)


@pytest.fixture(scope="module")
def endpoint(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """moto's S3 server for this module's tests."""
    with moto_server(tmp_path_factory.mktemp("moto") / "server.log") as url:
        yield url


@pytest.fixture(autouse=True)
def s3_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's credentials and region for this process and the commands it runs; no endpoint
    or profile from the developer's environment."""
    for name, value in S3_ENV.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def bucket(endpoint: str) -> str:
    """A new, empty bucket of its own for the test."""
    name = f"fleet-{uuid.uuid4().hex[:12]}"
    s3_filesystem(endpoint).create_dir(name)
    return name


def scanned_host(tmp_path: Path, host: str, seed: int) -> dict[str, Any]:
    """A real tree scanned into a store of its own, as one host would have it."""
    root = make_tree(
        tmp_path / host / "data",
        {
            "top.bin": 3000 + seed,
            "a/one.txt": 1200,
            "a/b/two.log": 70_000 + seed,
            "a/b/c/d/deep.dat": 5000,
            "cache/x.tmp": 900,
        },
        seed=seed,
    )
    store = tmp_path / host / "store"
    info = api.scan_root(root, store=store)
    key = f"host={host}/root={root_slug(info.root)}/scan={info.scan_id}"
    return {"root": root, "store": store, "info": info, "key": key, "walk": walked(root)}


def publish_argv(dest: str, host: dict[str, Any], name: str, endpoint: str) -> list[str]:
    return hnb_command(
        "publish", dest, str(host["root"]), "--host", name, "--store", str(host["store"]),
        "--endpoint-url", endpoint, "--json",
    )  # fmt: skip


def assert_summary_rows(rows: list[dict[str, Any]], hosts: dict[str, dict[str, Any]]) -> None:
    """The summary has exactly ``hosts``, each row's figures what os.walk finds in its tree."""
    assert sorted(r["host"] for r in rows) == sorted(hosts)
    for row in rows:
        host = hosts[row["host"]]
        assert row["scan"] == host["info"].scan_id
        assert row["files"] == host["walk"]["files"]
        assert row["entries"] == host["walk"]["files"] + host["walk"]["dirs"]
        assert row["alloc"] == host["walk"]["alloc"]


@pytest.mark.parametrize("point", PUBLISH)
def test_two_hosts_publish_at_once_and_a_killed_publish_is_never_read(
    tmp_path: Path, endpoint: str, bucket: str, point: str
) -> None:
    hosts = {"hA": scanned_host(tmp_path, "hA", 1), "hB": scanned_host(tmp_path, "hB", 2)}
    dest = f"s3://{bucket}/fleet"
    # both start on an empty prefix at once: both make it a fleet dataset, neither waits
    running = {
        "hA": subprocess.Popen(
            publish_argv(dest, hosts["hA"], "hA", endpoint),
            env=hnb_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ),
        "hB": subprocess.Popen(
            publish_argv(dest, hosts["hB"], "hB", endpoint),
            env=hnb_env({"HYGIENE_NB_TEST_CHECKPOINT": f"{point}:kill"}),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        ),
    }  # fmt: skip
    outputs = {name: proc.communicate(timeout=180) for name, proc in running.items()}
    assert running["hA"].returncode == 0, outputs["hA"]
    assert json.loads(outputs["hA"][0])["status"] == "published"
    assert running["hB"].returncode == -signal.SIGKILL, outputs["hB"]

    fs = s3_filesystem(endpoint)
    objects = s3_listing(fs, f"{bucket}/fleet")
    b_dirs = f"{bucket}/fleet/dirs/{hosts['hB']['key']}/part-0.parquet"
    assert b_dirs in objects  # the killed publish got as far as its first data file
    assert not any("published/host=hB" in key for key in objects)  # but not its marker

    code, answer, _ = hnb_json("fleet", dest, "summary", "--endpoint-url", endpoint)
    assert code == 0 and answer["scans"] == 1
    assert_summary_rows(answer["questions"]["summary"], {"hA": hosts["hA"]})
    assert [(s["code"], s["partition"]) for s in answer["skipped"]] == [
        ("partition-incomplete", hosts["hB"]["key"])
    ]
    code, growth, _ = hnb_json("fleet", dest, "growth", "--endpoint-url", endpoint)
    assert code == 0
    assert {r["host"] for r in growth["questions"]["growth"]} == {"hA"}
    assert {r["host"] for r in growth["questions"]["top_dirs"]} <= {"hA"}

    # the killed host publishes again: its partition is complete and read
    code, again, _ = hnb_json(*publish_argv(dest, hosts["hB"], "hB", endpoint)[3:-1])
    assert (code, again["status"], again["partition"]) == (0, "published", hosts["hB"]["key"])
    code, answer, _ = hnb_json("fleet", dest, "summary", "--endpoint-url", endpoint)
    assert code == 0 and answer["scans"] == 2 and answer["skipped"] == []
    assert_summary_rows(answer["questions"]["summary"], hosts)

    # publishing the same scan again changes nothing, object for object
    import pyarrow.parquet as pq

    before = s3_listing(fs, f"{bucket}/fleet")
    for name, host in hosts.items():
        code, same, _ = hnb_json(*publish_argv(dest, host, name, endpoint)[3:-1])
        assert (code, same["status"], same["files"]) == (0, "already-published", {})
    assert s3_listing(fs, f"{bucket}/fleet") == before
    # each partition's dirs file holds the tree's directories to the default depth (3)
    for name, host in hosts.items():
        with fs.open_input_file(f"{bucket}/fleet/dirs/{host['key']}/part-0.parquet") as handle:
            table = pq.read_table(handle)
        assert table.num_rows == dirs_to_depth(host["root"], 3)
        assert set(table.column("host").to_pylist()) == {name}


def test_a_redacted_publish_to_s3_holds_aggregates_only(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    host = scanned_host(tmp_path, "hR", 3)
    dest = f"s3://{bucket}/private"
    code, out, _ = hnb_json(*publish_argv(dest, host, "hR", endpoint)[3:-1], "--redact")
    assert (code, out["status"], out["redacted"]) == (0, "published", True)
    objects = s3_listing(s3_filesystem(endpoint), f"{bucket}/private")
    prefix = f"{bucket}/private/"
    tops = {key.removeprefix(prefix).split("/", 1)[0] for key in objects}
    assert tops == {"hygiene-nb-fleet.json", "dirs", "published"}  # no snapshot, no verdicts
    code, answer, _ = hnb_json("fleet", dest, "summary", "--endpoint-url", endpoint)
    assert code == 0
    assert_summary_rows(answer["questions"]["summary"], {"hR": host})


def test_spark_is_refused_an_object_store_before_any_request(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    host = scanned_host(tmp_path, "hS", 4)
    dest = f"s3://{bucket}/fleet"
    assert hnb_json(*publish_argv(dest, host, "hS", endpoint)[3:-1])[0] == 0
    before = s3_listing(s3_filesystem(endpoint), f"{bucket}/fleet")
    for url in (endpoint, "http://127.0.0.1:9"):  # reachable, and a port nothing listens on
        code, error, message = hnb_error(
            "fleet", dest, "summary", "--engine", "spark", "--endpoint-url", url, timeout=60
        )
        assert (code, error) == (2, "bad-usage"), message
        assert "directory only" in message and "--engine duckdb" in message
    assert s3_listing(s3_filesystem(endpoint), f"{bucket}/fleet") == before


def test_an_s3_prefix_holding_other_objects_is_not_a_fleet(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    host = scanned_host(tmp_path, "hN", 5)
    fs = s3_filesystem(endpoint)
    with fs.open_output_stream(f"{bucket}/other/notes.txt") as stream:
        stream.write(b"not a fleet")
    before = s3_listing(fs, bucket)
    dest = f"s3://{bucket}/other"
    code, error, message = hnb_error(*publish_argv(dest, host, "hN", endpoint)[3:-1])
    assert (code, error) == (2, "not-a-fleet-dataset"), message
    code, error, message = hnb_error("fleet", dest, "summary", "--endpoint-url", endpoint)
    assert (code, error) == (2, "not-a-fleet-dataset"), message
    assert s3_listing(fs, bucket) == before


def test_a_publish_killed_at_any_moment_leaves_only_whole_objects_and_complete_partitions(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    """SIGKILL from outside at fractions of a publish's own duration: whatever moment it hits,
    every object is whole, the reader sees complete partitions only, and a publish after it
    completes the partition."""
    import time

    import pyarrow.parquet as pq

    dest = f"s3://{bucket}/fleet"
    first = scanned_host(tmp_path, "hA", 6)
    started = time.monotonic()
    assert hnb_json(*publish_argv(dest, first, "hA", endpoint)[3:-1])[0] == 0
    whole = time.monotonic() - started  # one publish, start to end, as a process
    host = scanned_host(tmp_path, "hK", 7)
    fs = s3_filesystem(endpoint)
    for fraction in (0.5, 0.75, 0.9, 1.0):
        proc = subprocess.Popen(
            publish_argv(dest, host, "hK", endpoint), env=hnb_env(),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        time.sleep(whole * fraction)
        proc.kill()
        proc.wait(60)
        for key in s3_listing(fs, f"{bucket}/fleet"):
            if "/.staging/" in key:  # an upload it was killed in: never read, never in place
                continue
            with fs.open_input_file(key) as handle:
                if key.endswith(".parquet"):
                    pq.read_table(handle)
                else:
                    json.loads(handle.read())
        code, answer, _ = hnb_json("fleet", dest, "summary", "--endpoint-url", endpoint)
        assert code == 0
        marked = any("published/host=hK" in key for key in s3_listing(fs, f"{bucket}/fleet"))
        expected = {"hA": first, "hK": host} if marked else {"hA": first}
        assert_summary_rows(answer["questions"]["summary"], expected)
        assert {s["code"] for s in answer["skipped"]} <= {"partition-incomplete"}
        if marked:
            break  # it completed before the kill: later moments would find it published
    code, out, _ = hnb_json(*publish_argv(dest, host, "hK", endpoint)[3:-1])
    assert code == 0 and out["status"] in ("published", "already-published")
    code, answer, _ = hnb_json("fleet", dest, "summary", "--endpoint-url", endpoint)
    assert answer["skipped"] == []
    assert_summary_rows(answer["questions"]["summary"], {"hA": first, "hK": host})


def test_an_upload_that_fails_part_way_leaves_no_object_in_place(
    tmp_path: Path, endpoint: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The stream completes what it was given when it closes: the short object it leaves is a
    staging one, removed, and nothing appears at the partition's key."""
    import shutil

    from hygiene_nb.errors import FleetUnusable
    from hygiene_nb.fleet.dataset import open_dest

    source = tmp_path / "part.parquet"
    source.write_bytes(bytes(range(256)) * 4096)  # 1 MiB
    dest = open_dest(f"s3://{bucket}/fleet", endpoint_url=endpoint)
    real_copy = shutil.copyfileobj

    def half_then_fail(src: Any, dst: Any, length: int = 0) -> None:
        dst.write(src.read(300_000))
        raise OSError("the network went away")

    monkeypatch.setattr("hygiene_nb.fleet.dataset.shutil.copyfileobj", half_then_fail)
    with pytest.raises(FleetUnusable, match="the network went away"):
        dest.put_file("snapshots/x/part-0.parquet", source)
    assert s3_listing(s3_filesystem(endpoint), bucket) == {}  # no short object, anywhere
    monkeypatch.setattr("hygiene_nb.fleet.dataset.shutil.copyfileobj", real_copy)
    dest.put_file("snapshots/x/part-0.parquet", source)
    (key,) = s3_listing(s3_filesystem(endpoint), bucket)
    assert key == f"{bucket}/fleet/snapshots/x/part-0.parquet"
    with s3_filesystem(endpoint).open_input_stream(key) as stream:
        assert stream.read() == source.read_bytes()


def test_a_cut_short_object_is_published_again_whole(
    tmp_path: Path, endpoint: str, bucket: str
) -> None:
    import pyarrow.parquet as pq

    host = scanned_host(tmp_path, "hT", 8)
    dest = f"s3://{bucket}/fleet"
    assert hnb_json(*publish_argv(dest, host, "hT", endpoint)[3:-1])[0] == 0
    fs = s3_filesystem(endpoint)
    key = f"{bucket}/fleet/snapshots/{host['key']}/part-0.parquet"
    with fs.open_input_stream(key) as stream:
        whole = stream.read()
    with fs.open_output_stream(key) as stream:  # what an earlier, unstaged upload could leave
        stream.write(whole[: len(whole) // 3])
    code, out, _ = hnb_json(*publish_argv(dest, host, "hT", endpoint)[3:-1])
    assert (code, out["status"]) == (0, "published")
    with fs.open_input_file(key) as handle:
        assert pq.read_table(handle).num_rows == host["walk"]["files"] + host["walk"]["dirs"]
    assert not [k for k in s3_listing(fs, bucket) if "/.staging/" in k]


def test_a_redacted_publish_to_s3_removes_what_an_interrupted_whole_one_left(
    tmp_path: Path, endpoint: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from hygiene_nb.checkpoints import CheckpointFault
    from hygiene_nb.fleet.publish import publish

    host = scanned_host(tmp_path, "hU", 9)
    dest = f"s3://{bucket}/fleet"
    monkeypatch.setenv("HYGIENE_NB_TEST_CHECKPOINT", "publish-before-marker:fail")
    with pytest.raises(CheckpointFault):
        publish(dest, str(host["root"]), store=host["store"], host="hU", endpoint_url=endpoint)
    monkeypatch.delenv("HYGIENE_NB_TEST_CHECKPOINT")
    fs = s3_filesystem(endpoint)
    tops = {k.split("/")[2] for k in s3_listing(fs, f"{bucket}/fleet")}
    assert {"snapshots", "classified", "dirs"} <= tops  # the whole scan's files, unmarked
    done = publish(
        dest, str(host["root"]), store=host["store"], host="hU", redact=True, endpoint_url=endpoint
    )
    assert (done.status, done.redacted) == ("published", True)
    tops = {k.split("/")[2] for k in s3_listing(fs, f"{bucket}/fleet")}
    assert tops == {"hygiene-nb-fleet.json", "dirs", "published"}
