"""What a publish must not do: write into a store, say a scan is published as asked when it is
there in another form, leave a cut-short file standing for a whole one, or refuse only after a
long scan what it could have refused before. Through the CLI, on real trees and stores."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from hygiene_nb import api
from hygiene_nb.checkpoints import CheckpointFault
from hygiene_nb.fleet.publish import publish
from hygiene_nb.scan.index import root_slug
from hygiene_nb.store import FLEET_MARKER, QUARANTINE_NAME
from tests.helpers_fleet_cli import hnb_error, hnb_json, make_tree, tree_state


@pytest.fixture
def host(tmp_path: Path) -> dict[str, Any]:
    """A real tree scanned into its own store, with a plan-ready ledger."""
    root = make_tree(
        tmp_path / "data", {"a.txt": 1500, "sub/b.bin": 30_000, "sub/deeper/c.log": 400}, seed=3
    )
    store = tmp_path / "store"
    info = api.scan_root(root, store=store)
    api.annotate([str(root / "a.txt")], store=store, decision="keep")
    part = f"host=hA/root={root_slug(info.root)}/scan={info.scan_id}"
    return {"root": root, "store": store, "info": info, "part": part, "tmp": tmp_path}


def publish_cli(dest: Path | str, host: dict[str, Any], *extra: str) -> list[str]:
    return [
        "publish", str(dest), str(host["root"]), "--host", "hA", "--store", str(host["store"]),
        *extra,
    ]  # fmt: skip


# -- DEST inside a store -----------------------------------------------------------------------


def _other_store(host: dict[str, Any]) -> Path:
    other = host["tmp"] / "other-store"
    api.scan_root(host["root"], store=other)
    return other


@pytest.mark.parametrize(
    "where",
    ["store", "store/fleet", "store/quarantine", "store/snapshots/fleet", "other/fleet",
     "volume-quarantine/fleet", "link-to-store/fleet"],
)  # fmt: skip
def test_a_dest_inside_a_store_or_a_quarantine_is_refused(host: dict[str, Any], where: str) -> None:
    store: Path = host["store"]
    (store / "quarantine").mkdir(mode=0o700, exist_ok=True)
    tops = {
        "store": store,
        "other": _other_store(host) if where.startswith("other") else store,
        "volume-quarantine": host["tmp"] / "vol" / QUARANTINE_NAME,
        "link-to-store": host["tmp"] / "link",
    }
    tops["volume-quarantine"].mkdir(parents=True, mode=0o700)
    tops["link-to-store"].symlink_to(store)
    first, _, rest = where.partition("/")
    dest = tops[first] / rest if rest else tops[first]
    before = tree_state(host["tmp"])
    code, error, message = hnb_error(*publish_cli(dest, host))
    assert (code, error) == (2, "dest-inside-store"), message
    assert "hygiene-nb publish" in message  # says where to publish instead
    # scan --publish refuses it before scanning: no new scan, nothing written
    code, error, _ = hnb_error(
        "scan", str(host["root"]), "--store", str(store), "--publish", str(dest)
    )
    assert (code, error) == (2, "dest-inside-store")
    assert tree_state(host["tmp"]) == before
    # and the store still works: it did not become a fleet dataset
    code, out, _ = hnb_json("summary", str(host["root"]), "--store", str(store))
    assert code == 0, out


def test_a_dest_beside_the_store_is_published_into(host: dict[str, Any]) -> None:
    dest = host["store"].parent / "fleet"  # the store's parent holds it, not the store
    code, out, _ = hnb_json(*publish_cli(dest, host))
    assert (code, out["status"]) == (0, "published")


# -- the same scan, asked for in another form ------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "said"),
    [
        ((), ("--redact",), "published whole"),
        (("--redact",), (), "published redacted"),
        ((), ("--depth", "5"), "to depth 3"),
    ],
)
def test_a_scan_published_otherwise_is_refused_not_reported_as_asked(
    host: dict[str, Any], first: tuple[str, ...], second: tuple[str, ...], said: str
) -> None:
    dest = host["tmp"] / "fleet"
    code, out, _ = hnb_json(*publish_cli(dest, host, *first))
    assert (code, out["status"]) == (0, "published")
    before = tree_state(dest)
    code, error, message = hnb_error(*publish_cli(dest, host, *second))
    assert (code, error) == (2, "published-differently"), message
    assert said in message and "nothing was written" in message
    assert tree_state(dest) == before
    code, out, _ = hnb_json(*publish_cli(dest, host, *first))  # as before: already there
    assert (code, out["status"], out["redacted"]) == (0, "already-published", "--redact" in first)


def test_a_redacted_publish_removes_what_an_interrupted_whole_one_left(
    host: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    dest = host["tmp"] / "fleet"
    monkeypatch.setenv("HYGIENE_NB_TEST_CHECKPOINT", "publish-before-marker:fail")
    with pytest.raises(CheckpointFault):
        publish(str(dest), str(host["root"]), store=host["store"], host="hA")
    monkeypatch.delenv("HYGIENE_NB_TEST_CHECKPOINT")
    whole = [dest / t / host["part"] / "part-0.parquet" for t in ("snapshots", "classified")]
    assert all(p.is_file() for p in whole)  # the names below the depth are in DEST, unmarked
    code, out, _ = hnb_json(*publish_cli(dest, host, "--redact"))
    assert (code, out["status"], out["redacted"]) == (0, "published", True)
    assert not any(p.exists() for p in whole)
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == sorted(
        [FLEET_MARKER, f"dirs/{host['part']}/part-0.parquet", f"published/{host['part']}.json"]
    )
    names = {p.name for p in Path(host["root"]).rglob("*")}
    assert "c.log" in names and not any(b"c.log" in (dest / f).read_bytes() for f in files)


# -- a file cut short is not a published one -------------------------------------------------


@pytest.mark.parametrize("table", ["snapshots", "classified", "dirs"])
def test_a_cut_short_file_is_published_again_whole(host: dict[str, Any], table: str) -> None:
    dest = host["tmp"] / "fleet"
    code, _, _ = hnb_json(*publish_cli(dest, host))
    assert code == 0
    part = dest / table / host["part"] / "part-0.parquet"
    whole = part.read_bytes()
    rows = pq.read_metadata(pa.BufferReader(whole)).num_rows
    part.write_bytes(whole[: len(whole) // 2])  # what an upload that failed part-way leaves
    code, out, _ = hnb_json(*publish_cli(dest, host))
    assert (code, out["status"]) == (0, "published")
    assert rows > 0 and pq.read_table(part).num_rows == rows
    code, out, _ = hnb_json(*publish_cli(dest, host))  # whole now: nothing more to do
    assert (code, out["status"]) == (0, "already-published")


# -- scan --publish --------------------------------------------------------------------------


def test_scan_publish_takes_the_host_the_redaction_and_the_depth(host: dict[str, Any]) -> None:
    dest = host["tmp"] / "fleet"
    code, out, _ = hnb_json(
        "scan", str(host["root"]), "--store", str(host["store"]), "--publish", str(dest),
        "--publish-host", "lab-7", "--publish-redact", "--publish-depth", "1",
    )  # fmt: skip
    assert code == 0, out
    published = out["published"]
    assert (published["host"], published["redacted"]) == ("lab-7", True)
    marker = json.loads((dest / "published" / f"{published['partition']}.json").read_text())
    assert (marker["redacted"], marker["depth"], marker["host"]) == (True, 1, "lab-7")
    assert not (dest / "snapshots").exists()
    dirs = pq.read_table(dest / f"dirs/{published['partition']}/part-0.parquet")
    assert max(dirs.column("depth").to_pylist()) == 1


@pytest.mark.parametrize(
    ("args", "code_name"),
    [
        (("--publish-host", "lab-7"), "bad-usage"),
        (("--publish-redact",), "bad-usage"),
        (("--publish-depth", "2"), "bad-usage"),
        (("--publish", "{fleet}", "--publish-host", "nan"), "host-invalid"),
        (("--publish", "{data}"), "not-a-fleet-dataset"),
    ],
)
def test_scan_publish_refuses_before_it_scans(
    host: dict[str, Any], args: tuple[str, ...], code_name: str
) -> None:
    fill = {"{fleet}": str(host["tmp"] / "fleet"), "{data}": str(host["root"])}
    given = [fill.get(a, a) for a in args]
    index = (host["store"] / "index.jsonl").read_text()
    code, error, message = hnb_error(
        "scan", str(host["root"]), "--store", str(host["store"]), *given
    )
    assert (code, error) == (2, code_name), message
    assert (host["store"] / "index.jsonl").read_text() == index  # no scan was made
    assert not (host["tmp"] / "fleet").exists()


def test_a_damaged_partition_is_published_again_only_in_its_own_form(
    host: dict[str, Any],
) -> None:
    dest = host["tmp"] / "fleet"
    code, _, _ = hnb_json(*publish_cli(dest, host))
    assert code == 0
    dirs = dest / "dirs" / host["part"] / "part-0.parquet"
    dirs.write_bytes(dirs.read_bytes()[:100])  # cut short: the partition is not whole
    before = tree_state(dest)
    code, error, message = hnb_error(*publish_cli(dest, host, "--redact", "--depth", "1"))
    assert (code, error) == (2, "published-differently"), message
    assert tree_state(dest) == before  # the intact snapshot and verdicts are still there
    code, out, _ = hnb_json(*publish_cli(dest, host))  # its own form: mended
    assert (code, out["status"], out["redacted"]) == (0, "published", False)
    assert pq.read_metadata(dirs).num_rows > 0


def test_a_scan_is_never_published_under_a_second_host_name(host: dict[str, Any]) -> None:
    dest = host["tmp"] / "fleet"
    code, _, _ = hnb_json(*publish_cli(dest, host))
    assert code == 0
    before = tree_state(dest)
    args = ["publish", str(dest), str(host["root"]), "--store", str(host["store"])]
    code, error, message = hnb_error(*args, "--host", "another-name")
    assert (code, error) == (2, "published-differently"), message
    assert "host hA's" in message and "--host hA" in message
    assert tree_state(dest) == before
    code, answer, _ = hnb_json("fleet", str(dest), "summary")
    assert [row["host"] for row in answer["questions"]["summary"]] == ["hA"]


@pytest.mark.parametrize("inside", ["snapshots/nested", "published/x", "new"])
def test_a_dest_inside_a_fleet_dataset_is_refused(host: dict[str, Any], inside: str) -> None:
    dest = host["tmp"] / "fleet"
    code, _, _ = hnb_json(*publish_cli(dest, host))
    assert code == 0
    before = tree_state(dest)
    code, error, message = hnb_error(*publish_cli(dest / inside, host))
    assert (code, error) == (2, "not-a-fleet-dataset"), message
    assert f"publish into {dest} itself" in message
    assert tree_state(dest) == before


def test_scan_publish_refuses_a_machine_name_that_cannot_name_a_partition(
    host: dict[str, Any],
) -> None:
    """The scan records this machine's name: one a partition cannot take (a container's id
    that starts with a digit) is refused before the scan, and the message names the option."""
    import shutil
    import subprocess
    import sys

    if shutil.which("unshare") is None:
        pytest.skip("unshare(1) is not installed: no host name can be set for one process")
    command = [
        "unshare", "--uts", "sh", "-c", 'hostname 9f3a2c && exec "$@"', "sh",
        sys.executable, "-m", "hygiene_nb", "scan", str(host["root"]), "--store",
        str(host["store"]), "--publish", str(host["tmp"] / "fleet"), "--json",
    ]  # fmt: skip
    index = (host["store"] / "index.jsonl").read_text()
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if "Operation not permitted" in done.stderr:
        pytest.skip(f"no UTS namespace here: {done.stderr.strip()}")
    out = json.loads(done.stdout)
    assert (done.returncode, out["error"]["code"]) == (2, "host-invalid"), done
    assert "'9f3a2c'" in out["error"]["message"] and "--publish-host" in out["error"]["message"]
    assert (host["store"] / "index.jsonl").read_text() == index  # no scan was made
    assert not (host["tmp"] / "fleet").exists()
