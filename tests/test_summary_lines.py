"""The summary's lines agree with each other: no score from nothing, what the score counts, and
"largest directories" that is not "largest direct children" again (CLI text, JSON and API)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from hygiene_nb import api
from hygiene_nb.query import views
from tests.helpers import du_bytes, write

WHAT_IT_COUNTS = "files outside protected and dependency directories"


def cli(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def summary_of(root: Path, store: Path) -> tuple[str, dict[str, Any], Any]:
    cli("scan", str(root), "--store", str(store))
    text = cli("summary", str(root), "--store", str(store), "--top", "10")
    doc = json.loads(cli("summary", str(root), "--store", str(store), "--top", "10", "--json"))
    return text, doc, api.summarize(str(root), store=store, top=10)


def test_nothing_to_count_gives_no_score_rather_than_100(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    write(root / ".ssh" / "known_hosts", 300)  # protected: counted by no score
    write(root / ".ssh" / "config", 40)
    text, doc, s = summary_of(root, store)
    reason = f"no {WHAT_IT_COUNTS}"
    assert f"  no score: {reason}" in text.splitlines()
    assert "/100" not in text
    assert doc["cleanliness"] is None
    assert doc["cleanliness_reason"] == reason
    assert doc["cleanliness_detail"]["score"] is None
    assert doc["cleanliness_detail"]["counted"] == 0
    assert s.cleanliness.no_score == reason
    totals: dict[str, object] = dict(views.totals_frame(s).itertuples(index=False))
    assert totals["cleanliness score (0-100)"] is None


def test_the_score_line_says_what_it_counts(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    write(root / "notes.txt", 10)
    write(root / "__pycache__" / "m.pyc", 5000)
    write(root / "__pycache__" / "n.pyc", 5000)
    write(root / ".ssh" / "known_hosts", 300)  # protected: not counted
    text, doc, s = summary_of(root, store)
    counted = 3  # notes.txt and the two .pyc files: the ones outside .ssh
    score = doc["cleanliness"]
    assert isinstance(score, int) and doc["cleanliness_reason"] is None
    assert doc["cleanliness_detail"]["counted"] == counted == s.cleanliness.counted
    line = [ln for ln in text.splitlines() if ln.startswith(f"  cleanliness {score}/100")]
    assert len(line) == 1
    assert line[0].endswith(f"pending of {counted} {WHAT_IT_COUNTS}")
    assert f"{doc['cleanliness_detail']['cleanable']} cleanable" in line[0]


def _expected_largest_dirs(root: Path) -> set[str]:
    """Directories below the root whose largest child holds less than half of their bytes."""
    out = set()
    for here, dirs, files in os.walk(root):
        if Path(here) == root:
            continue
        total = du_bytes(Path(here), apparent=True)
        children = [du_bytes(Path(here) / d, apparent=True) for d in dirs]
        children += [os.lstat(Path(here) / f).st_size for f in files]
        if not children or 2 * max(children) < total:
            out.add(here)
    return out


def test_largest_directories_skip_a_directory_its_largest_child_fills_half_of(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "r"
    write(root / "chain" / "one" / "two" / "big.bin", 1_000_000)  # a chain: one, two, chain
    write(root / "chain" / "small", 10)
    for name in ("p", "q", "r"):
        write(root / "mixed" / name / "part.bin", 300_000)  # mixed is shown, p, q, r are not
    for name in ("x1", "x2", "x3"):
        write(root / "wide" / name, 200_000)
    text, doc, s = summary_of(root, store)
    expected = _expected_largest_dirs(root)
    assert expected == {str(root / "mixed"), str(root / "wide")}  # the tree has the shapes meant
    assert {e["path"] for e in doc["largest_dirs"]} == expected
    assert {e.path for e in s.largest_dirs} == expected
    assert {e.path for e in s.children} == {str(root / n) for n in ("chain", "mixed", "wide")}
    section = text.split("largest directories:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(section) == len(expected)
    assert {line.split()[-1] for line in section} == expected
