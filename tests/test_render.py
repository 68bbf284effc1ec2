"""What a person reads: sizes in human units, nouns in number, every name's controls escaped."""

from __future__ import annotations

import base64
import json
import os
import re
from dataclasses import replace
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.render import (
    counted,
    emit_json,
    human_bytes,
    noun_for,
    render_prune,
    render_scan,
    render_snapshots,
    render_summary,
    scan_json,
    shown,
    summary_json,
    verification_line,
)
from hygiene_nb.scan.index import ScanInfo
from tests.helpers import write

RAW_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # all but the line separator
HOSTILE = "evil\nmoved  passwd\x1b[2J\x9b.log"  # a forged line, a terminal command, C1


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (None, "unknown"),
        (0, "0 B"),
        (1, "1 B"),
        (1023, "1023 B"),
        (1024, "1.0 KiB"),
        (1536, "1.5 KiB"),
        (5 * 1024**2, "5.0 MiB"),
        (3 * 1024**3 + 1024**3 // 2, "3.5 GiB"),
        (1024**4, "1.0 TiB"),
        (1024**5, "1.0 PiB"),
        (1024**7, "1024.0 EiB"),  # no unit past EiB
        (-2048, "-2.0 KiB"),
    ],
)
def test_human_bytes(n: int | None, text: str) -> None:
    assert human_bytes(n) == text


def test_nouns_agree_with_their_number() -> None:
    assert [counted(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert counted(1, "entry", "entries") == "1 entry"
    assert counted(1234567, "entry", "entries") == "1,234,567 entries"
    assert noun_for(1, "directory", "directories") == "directory"
    assert noun_for(-1, "item") == "items"


def test_the_escape_helper_shows_every_control_character() -> None:
    assert shown("a\nb\rc\td\x1be\x7ff\x9bg\x00") == "a\\nb\\rc\\td\\x1be\\x7ff\\x9bg\\x00"
    assert shown("café/名前 ok") == "café/名前 ok"
    assert all(not RAW_CONTROL.search(shown(chr(c))) for c in range(0xA0))
    assert shown("\x85") == "\\x85" and shown("\xa0") == "\xa0"  # C1 ends at 0x9f


def test_emit_json_writes_one_valid_utf8_line_that_gives_the_same_strings_back(
    capsys: pytest.CaptureFixture[str],
) -> None:
    odd = os.fsdecode(b"/tmp/name-\xff")  # a name that is not UTF-8 reaches Python like this
    emit_json({"path": odd, "note": "line\nbreak", "b": 1})
    out = capsys.readouterr().out
    assert out.endswith("\n") and out.count("\n") == 1
    out.encode("utf-8")  # valid UTF-8: no raw 0xff on stdout
    assert json.loads(out) == {"path": odd, "note": "line\nbreak", "b": 1}


# -- scans and snapshots, from a real scan ----------------------------------------------------


@pytest.fixture
def scanned(tmp_path: Path, store: Path) -> ScanInfo:
    root = tmp_path / ("root-" + HOSTILE)
    write(root / HOSTILE, 3000)
    write(root / "big.bin", 5 * 1024**2)
    write(Path(os.fsdecode(os.fsencode(root) + b"/bad-\xff")), 10)
    write(root / "sub" / "a.txt", 10)
    return api.scan_root(root, store=store)


def test_render_scan_tells_what_was_found_with_the_root_escaped(scanned: ScanInfo) -> None:
    text = render_scan(scanned)
    assert not RAW_CONTROL.search(text)
    first, sizes, where = text.splitlines()  # a name's newline forges no line
    assert first.startswith(f"scanned {shown(scanned.root)}: 6 entries in ")
    assert sizes.startswith(f"  {human_bytes(scanned.tree_bytes)} apparent,")
    assert sizes.endswith(", 4 files")
    assert where == f"  snapshot {scanned.scan_id} → {shown(scanned.path)}"


def test_render_scan_says_when_sizes_are_unknown_or_partial(scanned: ScanInfo) -> None:
    text = render_scan(replace(scanned, errors=1, partial=True, tree_bytes=None))
    assert "unknown apparent" in text
    assert "1 entry could not be read: sizes unknown, not zero" in text
    assert "partial: part of the tree was not read" in text
    assert "could not be read" not in render_scan(scanned)


def test_scan_json_keeps_the_exact_root(scanned: ScanInfo) -> None:
    doc = scan_json(scanned)
    assert doc["root"] == scanned.root and doc["entries"] == 6 and doc["status"] == "done"
    assert json.loads(json.dumps(doc)) == doc


def test_render_snapshots_and_prune(scanned: ScanInfo) -> None:
    assert render_snapshots([]) == "no snapshots yet: run `hygiene-nb scan ROOT`."
    table = render_snapshots([scanned, replace(scanned, scan_id="scan-2", partial=True)])
    header, one, two = table.splitlines()
    assert header.split()[:2] == ["scan", "id"]
    assert one.startswith(scanned.scan_id) and one.endswith(shown(scanned.root))
    assert two.startswith("scan-2") and two.endswith(" (partial)")
    assert not RAW_CONTROL.search(table)
    assert render_prune([], dry_run=False).startswith("nothing to prune")
    assert render_prune([scanned], dry_run=True).splitlines()[0] == "would remove 1 snapshot:"
    pruned = render_prune([scanned, scanned], dry_run=False)
    assert pruned.splitlines()[0] == "removed 2 snapshots:" and not RAW_CONTROL.search(pruned)


# -- summaries ---------------------------------------------------------------------------------


def test_render_summary_escapes_every_name_and_counts_in_human_units(
    scanned: ScanInfo, store: Path
) -> None:
    summary = api.summarize(scanned.root, store=store)
    text = render_summary(summary)
    assert not RAW_CONTROL.search(text)
    assert text.splitlines()[0].startswith(f"{shown(scanned.root)} — snapshot {scanned.scan_id}")
    assert "6 entries: 4 files, 2 directories, 0 symlinks, 0 other" in text
    assert "5.0 MiB" in text  # big.bin, in the largest files
    assert shown(HOSTILE) in text and "/bad-\\xff" in text
    assert not any(line.startswith("moved") for line in text.splitlines())  # no forged line


def test_summary_json_keeps_exact_names_and_is_json(scanned: ScanInfo, store: Path) -> None:
    summary = api.summarize(scanned.root, store=store)
    doc = summary_json(summary)
    assert doc["status"] == "done" and doc["root"] == scanned.root
    assert doc["cleanliness"] is None or isinstance(doc["cleanliness"], int)
    names = {Path(e["path"]).name: e for e in doc["largest_files"]}
    assert HOSTILE in names and "path_b64" not in names[HOSTILE]  # text gives it back exactly
    (bad,) = [e for n, e in names.items() if n.startswith("bad-")]
    exact = base64.b64decode(bad["path_b64"])  # where the text cannot give the bytes back
    assert exact == os.fsencode(scanned.root) + b"/bad-\xff"
    assert json.loads(json.dumps(doc, ensure_ascii=False)) == doc


def test_verification_lines() -> None:
    assert verification_line({}, "done").startswith("verification: static-only")
    commands = {"mode": "commands", "commands": [["make", "test"], ["pytest", "-q"]]}
    assert "`make test; pytest -q` runs before" in verification_line(commands, "dry-run")
    assert verification_line(commands, "done") == (
        "verification: `make test; pytest -q` passed before and after"
    )
    back = {**commands, "rollback": {"restored": 1, "blocked": ["/r/x"]}}
    line = verification_line(back, "rolled-back")
    assert line.startswith("verification FAILED after the move: rolled back, 1 item restored")
    assert "1 blocked (still in quarantine" in line
    assert "blocked" not in verification_line(
        {**commands, "rollback": {"restored": 2}}, "rolled-back"
    )
