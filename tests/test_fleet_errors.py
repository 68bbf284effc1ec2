"""Bad input to ``publish`` and ``fleet``, through the CLI with --json: a coded error and its
exit code, no traceback, and nothing changed (DEST as it was, or still absent)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.fleet.publish import publish
from hygiene_nb.scan.index import root_slug
from hygiene_nb.store import FLEET_MARKER
from tests.helpers_fleet_cli import hnb_error, hnb_json, make_tree, tree_state, walked


def scanned_host(tmp_path: Path, host: str, seed: int) -> dict[str, Any]:
    """A real tree scanned into a store of its own."""
    root = make_tree(
        tmp_path / host / "data",
        {"a.txt": 1000 + seed, "sub/b.bin": 20_000 + seed, "sub/deeper/c.log": 300},
        seed=seed,
    )
    store = tmp_path / host / "store"
    info = api.scan_root(root, store=store)
    key = f"host={host}/root={root_slug(info.root)}/scan={info.scan_id}"
    return {"root": root, "store": store, "info": info, "key": key, "walk": walked(root)}


def publish_args(dest: Path | str, host: dict[str, Any], name: str) -> list[str]:
    return ["publish", str(dest), str(host["root"]), "--host", name, "--store", str(host["store"])]


@pytest.fixture
def host_a(tmp_path: Path) -> dict[str, Any]:
    return scanned_host(tmp_path, "hA", 1)


@pytest.fixture
def fleet(tmp_path: Path, host_a: dict[str, Any]) -> dict[str, Any]:
    """A fleet dataset with two hosts (published in this process: the commands are tested
    in tests/test_fleet_local.py)."""
    dest = tmp_path / "fleet"
    host_b = scanned_host(tmp_path, "hB", 2)
    for name, host in (("hA", host_a), ("hB", host_b)):
        done = publish(str(dest), str(host["root"]), store=host["store"], host=name)
        assert done.status == "published"
    return {"dest": dest, "hA": host_a, "hB": host_b}


def marker_of(fleet: dict[str, Any], name: str) -> Path:
    return Path(fleet["dest"]) / "published" / f"{fleet[name]['key']}.json"


# -- DEST is not a fleet dataset -------------------------------------------------------------


def test_a_directory_holding_other_files_is_not_a_fleet_dataset(
    tmp_path: Path, host_a: dict[str, Any]
) -> None:
    dest = tmp_path / "shared"
    (dest / "projects").mkdir(parents=True)
    (dest / "notes.txt").write_text("someone's files")
    before = tree_state(dest)
    for args in (publish_args(dest, host_a, "hA"), ["fleet", str(dest), "summary"]):
        code, error, message = hnb_error(*args)
        assert (code, error) == (2, "not-a-fleet-dataset"), message
        assert str(dest) in message
    assert tree_state(dest) == before  # not even a .staging directory


def test_fleet_refuses_an_empty_or_absent_directory_and_a_file(tmp_path: Path) -> None:
    empty, absent, file = tmp_path / "empty", tmp_path / "absent", tmp_path / "file"
    empty.mkdir()
    file.write_text("x")
    for dest in (empty, absent, file):
        code, error, message = hnb_error("fleet", str(dest), "summary")
        assert (code, error) == (2, "not-a-fleet-dataset"), message
    assert list(empty.iterdir()) == [] and not absent.exists() and file.read_text() == "x"


def test_publish_refuses_a_file_as_dest(tmp_path: Path, host_a: dict[str, Any]) -> None:
    file = tmp_path / "file"
    file.write_text("x")
    code, error, _ = hnb_error(*publish_args(file, host_a, "hA"))
    assert (code, error) == (2, "not-a-fleet-dataset") and file.read_text() == "x"


@pytest.mark.parametrize(
    "dest",
    [
        *("gs://bucket/fleet", "http://example.invalid/fleet", "ftp://host/x", "s3:///prefix"),
        *("s3://[bad/p", "file://[bad/p", "file://otherhost/srv/fleet", "s3://b/a/../c"),
        "s3://b/a//c",
    ],
)
def test_a_dest_that_is_neither_a_directory_nor_s3_is_refused(
    tmp_path: Path, host_a: dict[str, Any], dest: str
) -> None:
    for args in (publish_args(dest, host_a, "hA"), ["fleet", dest, "summary"]):
        code, error, message = hnb_error(*args, timeout=30)
        assert (code, error) == (2, "not-a-fleet-dataset"), message
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hA", "home"]  # no local directory


def test_an_endpoint_that_is_not_http_is_refused(tmp_path: Path, host_a: dict[str, Any]) -> None:
    for args in (publish_args("s3://b/f", host_a, "hA"), ["fleet", "s3://b/f", "summary"]):
        for url in ("ftp://127.0.0.1:9", "http://[::1"):
            code, error, message = hnb_error(*args, "--endpoint-url", url, timeout=30)
            assert code == 2 and error == "bad-usage" and "--endpoint-url" in message


# -- host names --------------------------------------------------------------------------------


BAD_HOSTS = [
    *("", "a/b", "a=b", "two words", "12345", "../up", "-lead", ".hidden", "x" * 64, "t\tab"),
    # read as a number, a boolean or a null by DuckDB's or Spark's partition discovery
    *("1e5", "0x1f", "7host", "nan", "NaN", "inf", "Infinity", "true", "FALSE", "null"),
    *("NA", "NaT", "nil", "undefined"),  # read as missing by pandas and Arrow's CSV reader
]


def test_a_host_name_that_cannot_name_a_partition_is_refused(
    tmp_path: Path, host_a: dict[str, Any], fleet: dict[str, Any]
) -> None:
    before = tree_state(fleet["dest"])
    new = tmp_path / "new-fleet"
    for name in BAD_HOSTS:
        code, error, message = hnb_error(*publish_args(fleet["dest"], host_a, name))
        assert (code, error) == (2, "host-invalid"), (name, message)
        assert "--host NAME" in message
    code, error, _ = hnb_error(*publish_args(new, host_a, "a/b"))
    assert (code, error) == (2, "host-invalid")
    assert tree_state(fleet["dest"]) == before and not new.exists()


# -- formats newer than this code ------------------------------------------------------------


def _newer_in_index(info: Any, store: Path) -> None:
    index = store / "index.jsonl"
    lines = []
    for line in index.read_text().splitlines():
        record = json.loads(line)
        if record["scan_id"] == info.scan_id:
            record["format_version"] = 99
        lines.append(json.dumps(record))
    index.write_text("\n".join(lines) + "\n")


def _newer_in_footer(info: Any, store: Path) -> None:
    import pyarrow.parquet as pq

    part = Path(info.path) / "part-0.parquet"
    table = pq.read_table(part)
    meta = {k: v for k, v in pq.read_metadata(part).metadata.items() if k != b"ARROW:schema"}
    meta[b"hygiene_nb.format_version"] = b"99"
    pq.write_table(table.replace_schema_metadata(meta), part)


@pytest.mark.parametrize("where", [_newer_in_index, _newer_in_footer], ids=["index", "footer"])
def test_a_snapshot_in_a_newer_format_is_not_published(
    tmp_path: Path, fleet: dict[str, Any], where: Any
) -> None:
    host = scanned_host(tmp_path, "hN", 3)
    where(host["info"], host["store"])
    before = tree_state(fleet["dest"])
    new = tmp_path / "new-fleet"
    for dest in (fleet["dest"], new):
        code, error, message = hnb_error(*publish_args(dest, host, "hN"))
        assert (code, error) == (1, "snapshot-too-new"), message
        assert "format 99" in message
    assert tree_state(fleet["dest"]) == before and not new.exists()


def test_a_fleet_marker_of_a_newer_format_is_refused(tmp_path: Path, fleet: dict[str, Any]) -> None:
    top = Path(fleet["dest"]) / FLEET_MARKER
    record = json.loads(top.read_bytes())
    top.write_text(json.dumps({**record, "fleet_format": record["fleet_format"] + 1}))
    before = tree_state(fleet["dest"])
    code, error, message = hnb_error("fleet", str(fleet["dest"]), "summary")
    assert (code, error) == (1, "fleet-too-new") and "upgrade" in message
    host = scanned_host(tmp_path, "hC", 4)
    code, error, _ = hnb_error(*publish_args(fleet["dest"], host, "hC"))
    assert (code, error) == (1, "fleet-too-new")
    assert tree_state(fleet["dest"]) == before


@pytest.mark.parametrize("newer", ["fleet_format", "snapshot_format", "fleet_format_renamed"])
def test_a_partition_published_by_a_newer_version_is_skipped_not_read(
    fleet: dict[str, Any], newer: str
) -> None:
    marker = marker_of(fleet, "hB")
    record = json.loads(marker.read_bytes())
    if newer == "snapshot_format":
        record["scan"]["format_version"] = 99
    else:
        record["fleet_format"] += 1
        if newer == "fleet_format_renamed":  # a later format need not name its figures alike
            record["totals"] = record.pop("figures")
    marker.write_text(json.dumps(record))
    before = tree_state(fleet["dest"])
    # one upgraded host never stops the fleet's questions: its partition is listed, unread
    code, answer, _ = hnb_json("fleet", str(fleet["dest"]), "summary")
    assert code == 0
    assert [r["host"] for r in answer["questions"]["summary"]] == ["hA"]
    ((skip),) = answer["skipped"]
    assert (skip["code"], skip["partition"]) == ("partition-too-new", fleet["hB"]["key"])
    assert (
        "upgrade" in skip["message"] and str(marker.relative_to(fleet["dest"])) in skip["message"]
    )
    assert tree_state(fleet["dest"]) == before


# -- damage ------------------------------------------------------------------------------------


def _truncated(record: dict[str, Any], data: bytes) -> bytes:
    return data[: len(data) // 2]


def _figure_not_a_number(record: dict[str, Any], data: bytes) -> bytes:
    record["figures"]["alloc"] = "a lot"
    return json.dumps(record).encode()


def _names_a_file_elsewhere(record: dict[str, Any], data: bytes) -> bytes:
    record["files"]["dirs"] = "../../elsewhere/part-0.parquet"
    return json.dumps(record).encode()


def _another_partition(record: dict[str, Any], data: bytes) -> bytes:
    record["partition"] = record["partition"].replace("host=hB", "host=hZ")
    return json.dumps(record).encode()


def _not_an_object(record: dict[str, Any], data: bytes) -> bytes:
    return b"[1, 2, 3]\n"


@pytest.mark.parametrize(
    "damage",
    [_truncated, _figure_not_a_number, _names_a_file_elsewhere, _another_partition, _not_an_object],
)
def test_a_damaged_completion_marker_is_skipped_and_published_again(
    fleet: dict[str, Any], damage: Any
) -> None:
    marker = marker_of(fleet, "hB")
    data = marker.read_bytes()
    marker.write_bytes(damage(json.loads(data), data))
    before = tree_state(fleet["dest"])
    code, answer, _ = hnb_json("fleet", str(fleet["dest"]), "summary")
    assert code == 0
    assert [r["host"] for r in answer["questions"]["summary"]] == ["hA"]
    ((skip),) = answer["skipped"]
    assert (skip["code"], skip["partition"]) == ("partition-damaged", fleet["hB"]["key"])
    assert "publish that scan again from host hB" in skip["message"]
    assert tree_state(fleet["dest"]) == before
    # what the message says to do works: the host publishes it again, marker and all
    code, out, _ = hnb_json(*publish_args(fleet["dest"], fleet["hB"], "hB"))
    assert (code, out["status"]) == (0, "published")
    code, answer, _ = hnb_json("fleet", str(fleet["dest"]), "summary")
    assert code == 0 and answer["skipped"] == []
    assert sorted(r["host"] for r in answer["questions"]["summary"]) == ["hA", "hB"]


@pytest.mark.parametrize(
    "damage",
    [
        *(b"{not json", b'{"fleet_format": 1e400}', b'{"fleet_format": NaN}', b"[1]", b"1"),
        *(b'{"fleet_format": true}', b'{"fleet_format": "1"}', b'{"fleet_format": 1.9}'),
        *(b'{"fleet_format": -7}', b'{"fleet_format": 0}', b"[" * 5000),
    ],
)
def test_a_damaged_fleet_marker_is_not_a_fleet_marker(fleet: dict[str, Any], damage: bytes) -> None:
    (Path(fleet["dest"]) / FLEET_MARKER).write_bytes(damage)
    before = tree_state(fleet["dest"])
    code, error, message = hnb_error("fleet", str(fleet["dest"]), "summary")
    assert (code, error) == (2, "not-a-fleet-dataset") and FLEET_MARKER in message
    code, error, _ = hnb_error(*publish_args(fleet["dest"], fleet["hA"], "hA"))
    assert (code, error) == (2, "not-a-fleet-dataset")
    assert tree_state(fleet["dest"]) == before


def test_a_partition_whose_dirs_file_is_gone_is_skipped_and_published_again(
    fleet: dict[str, Any],
) -> None:
    (Path(fleet["dest"]) / "dirs" / fleet["hB"]["key"] / "part-0.parquet").unlink()
    code, answer, _ = hnb_json("fleet", str(fleet["dest"]), "summary")
    assert code == 0
    assert [r["host"] for r in answer["questions"]["summary"]] == ["hA"]
    assert [(s["code"], s["partition"]) for s in answer["skipped"]] == [
        ("partition-damaged", fleet["hB"]["key"])
    ]
    code, out, _ = hnb_json(*publish_args(fleet["dest"], fleet["hB"], "hB"))
    assert (code, out["status"]) == (0, "published")
    code, answer, _ = hnb_json("fleet", str(fleet["dest"]), "summary")
    assert answer["skipped"] == [] and len(answer["questions"]["summary"]) == 2


# -- a partition without its marker ------------------------------------------------------------


def test_a_partition_without_its_marker_is_skipped_and_never_read(fleet: dict[str, Any]) -> None:
    dest = Path(fleet["dest"])
    marker_of(fleet, "hB").unlink()
    # were the partition's files read, these would fail the query: they are not Parquet
    for table in ("dirs", "snapshots", "classified"):
        (dest / table / fleet["hB"]["key"] / "part-0.parquet").write_bytes(b"not parquet")
    before = tree_state(dest)
    for question in ("summary", "history", "growth", "risk", "stale", "owners"):
        code, answer, _ = hnb_json("fleet", str(dest), question)
        assert code == 0, answer
        assert [(s["code"], s["partition"]) for s in answer["skipped"]] == [
            ("partition-incomplete", fleet["hB"]["key"])
        ]
        hosts = {row["host"] for rows in answer["questions"].values() for row in rows}
        assert hosts == {"hA"}, question
    code, answer, _ = hnb_json("fleet", str(dest), "summary")
    (row,) = answer["questions"]["summary"]
    walk = fleet["hA"]["walk"]
    assert (row["files"], row["alloc"], row["entries"]) == (
        walk["files"], walk["alloc"], walk["files"] + walk["dirs"],
    )  # fmt: skip
    code, answer, _ = hnb_json("fleet", str(dest), "summary", "--host", "hB")
    assert code == 0 and answer["questions"]["summary"] == [] and len(answer["skipped"]) == 1
    code, answer, _ = hnb_json("fleet", str(dest), "summary", "--host", "hA")
    assert code == 0 and answer["skipped"] == []  # another host's partition is not this one's
    assert tree_state(dest) == before


def test_a_dest_that_cannot_be_written_is_fleet_unusable(
    tmp_path: Path, host_a: dict[str, Any]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    code, error, message = hnb_error(*publish_args(blocker / "fleet", host_a, "hA"))
    assert (code, error) == (1, "fleet-unusable"), message
    assert "reachable" in message and blocker.read_text() == "x"


def test_scan_publish_into_a_directory_that_is_not_a_fleet_keeps_the_scan(
    tmp_path: Path, store: Path
) -> None:
    root = make_tree(tmp_path / "cron-root", {"x/y.bin": 4321, "z.txt": 12}, seed=5)
    dest = tmp_path / "shared"
    dest.mkdir()
    (dest / "notes.txt").write_text("someone's")
    before = tree_state(dest)
    code, error, _ = hnb_error("scan", str(root), "--store", str(store), "--publish", str(dest))
    assert (code, error) == (2, "not-a-fleet-dataset")
    assert tree_state(dest) == before
    assert not (store / "index.jsonl").exists()  # refused before the scan: none was made
    # a publish that fails only after the scan (its marker cannot be written) keeps the scan
    broken = tmp_path / "broken-fleet"
    broken.mkdir()
    (broken / FLEET_MARKER).write_text(json.dumps({"fleet_format": 1, "made_by": "hygiene-nb"}))
    (broken / "published").write_text("a file where the markers' directory goes")
    code, error, _ = hnb_error("scan", str(root), "--store", str(store), "--publish", str(broken))
    assert (code, error) == (1, "fleet-unusable")
    assert len((store / "index.jsonl").read_text().splitlines()) == 1  # the scan is kept
    fleet_dest = tmp_path / "fleet"
    code, out, _ = hnb_json("scan", str(root), "--store", str(store), "--publish", str(fleet_dest))
    assert code == 0 and out["published"]["status"] == "published"
    code, answer, _ = hnb_json("fleet", str(fleet_dest), "summary")
    (row,) = answer["questions"]["summary"]
    walk = walked(root)
    assert (row["files"], row["alloc"]) == (walk["files"], walk["alloc"])
