"""A redacted report names no owner: no account name, no uid or gid, only how many owners."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from hygiene_nb.cli import main
from hygiene_nb.scan.index import ScanInfo
from tests.helpers import Account, added_account, write

pytestmark = pytest.mark.slow


@pytest.fixture
def account() -> Iterator[Account]:
    """A real account with a distinctive name, removed afterwards."""
    with added_account("qzowner") as made:
        yield made


def report(root: Path, store: Path, out: Path, *redact: str) -> tuple[bytes, bytes]:
    """Run ``hygiene-nb report`` and return its HTML and notebook."""
    with pytest.raises(SystemExit) as exit_info:
        main(["report", str(root), "--store", str(store), "--out", str(out), *redact, "--json"])
    assert exit_info.value.code in (0, None)
    html = next(out.rglob("*.html"))
    return html.read_bytes(), html.with_suffix(".ipynb").read_bytes()


def without_plotly_js(page: bytes) -> str:
    """The page without the inlined plotly.js library (megabytes of unrelated words)."""
    text = page.decode()
    return re.sub(r"<script[^>]*>(?:(?!</script>).){100000,}</script>", "", text, flags=re.S)


def owner_mentions(text: str, number: int) -> list[str]:
    """Where ``number`` is written beside words that say owner, user, uid, group or gid."""
    near = rf"(?i)\b(?:owner|owners|user|uid|group|gid)\b[^0-9<]{{0,12}}\b{number}\b"
    return re.findall(near, text)


def test_a_redacted_report_counts_owners_and_names_none(
    account: Account, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name, uid, gid = account
    root = tmp_path / "shared"
    for path, size in [
        (root / "theirs" / "data.csv", 40_000),
        (root / "theirs" / "sub" / "photo.jpg", 25_000),
        (root / "theirs" / "run.log", 3_000),
    ]:
        write(path, size)
    for entry in [root / "theirs", *(root / "theirs").rglob("*")]:
        os.chown(entry, uid, gid)
    write(root / "mine" / "notes.txt", 2_000)  # root's own
    store = tmp_path / "store"
    main_args = [str(root), "--store", str(store)]
    with pytest.raises(SystemExit):
        main(["scan", *main_args, "--json"])
    capsys.readouterr()
    owners = {p.lstat().st_uid for p in [root, *root.rglob("*")]}
    assert uid in owners and len(owners) == 2

    html, notebook = report(root, store, tmp_path / "redacted-out", "--redact")
    capsys.readouterr()
    for data in (html, notebook):
        text = without_plotly_js(data)
        assert name not in text
        assert f"uid {uid}" not in text and f"gid {gid}" not in text
        assert owner_mentions(text, uid) == [] and owner_mentions(text, gid) == []
    assert f"{len(owners)} owners hold these files" in without_plotly_js(html)

    # the same snapshot unredacted names the owner (so the test above can see a leak)
    html, _ = report(root, store, tmp_path / "plain-out")
    capsys.readouterr()
    text = without_plotly_js(html)
    records_names = "user_names" in {f.name for f in dataclasses.fields(ScanInfo)}
    if records_names:
        assert name in text
    else:
        assert f"uid {uid}" in text
