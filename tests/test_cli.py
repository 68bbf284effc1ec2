"""The command line: one JSON object with --json, the contract's exit codes, help everywhere."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import cli
from tests.helpers import write


def run(*args: str) -> tuple[int, str, str]:
    result = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", *args], capture_output=True, text=True, timeout=120
    )
    return result.returncode, result.stdout, result.stderr


def run_json(*args: str) -> tuple[int, dict[str, Any]]:
    code, out, _ = run(*args, "--json")
    lines = out.splitlines()
    assert len(lines) == 1, out  # one object, nothing else on stdout
    return code, json.loads(lines[0])


def test_scan_json_has_the_contract_keys(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "r" / "f", 7)
    code, obj = run_json("scan", str(tmp_path / "r"), "--store", str(store))
    assert code == 0
    for key in (
        "scan_id",
        "root",
        "entries",
        "tree_bytes",
        "tree_alloc",
        "partial",
        "errors",
        "snapshot_path",
        "seconds",
    ):
        assert key in obj
    assert obj["entries"] == 2 and obj["partial"] is False


def test_scan_and_summary_say_one_file_not_one_files(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "r" / "only", 3)
    code, scanned, _ = run("scan", str(tmp_path / "r"), "--store", str(store))
    assert code == 0
    assert ": 2 entries in " in scanned and scanned.splitlines()[1].endswith(", 1 file")
    code, summary, _ = run("summary", str(tmp_path / "r"), "--store", str(store))
    assert code == 0
    assert "2 entries: 1 file, 1 directory, 0 symlinks, 0 other" in summary


def test_summary_json_lists_largest_entries(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "r" / "big", 5000)
    write(tmp_path / "r" / "d" / "small", 10)
    run("scan", str(tmp_path / "r"), "--store", str(store), "--json")
    code, obj = run_json("summary", str(tmp_path / "r"), "--store", str(store), "--top", "2")
    assert code == 0
    assert obj["root"] == str(tmp_path / "r")
    assert [e["path"] for e in obj["largest"]] == [
        str(tmp_path / "r" / "big"),
        str(tmp_path / "r" / "d"),
    ]
    assert obj["largest"][0]["bytes"] == 5000


def test_summary_before_any_scan_is_exit_2_with_a_next_step(tmp_path: Path, store: Path) -> None:
    code, obj = run_json("summary", str(tmp_path), "--store", str(store))
    assert code == 2
    assert obj["status"] == "error"
    assert obj["error"]["code"] == "snapshot-not-found"
    assert "hygiene-nb scan" in obj["error"]["message"]


def test_scanning_a_file_is_refused_as_bad_input(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "f", 1)
    code, obj = run_json("scan", str(tmp_path / "f"), "--store", str(store))
    assert code == 2 and obj["error"]["code"] == "root-invalid"


def test_bad_usage_is_exit_2_even_with_json(store: Path) -> None:
    code, obj = run_json("scan", "--max-entries", "lots", "--store", str(store))
    assert code == 2 and obj["error"]["code"] == "bad-usage"


def test_snapshots_lists_and_prunes(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "r" / "f", 1)
    for _ in range(2):
        run("scan", str(tmp_path / "r"), "--store", str(store), "--json")
    code, obj = run_json("snapshots", str(tmp_path / "r"), "--store", str(store))
    assert code == 0 and len(obj["snapshots"]) == 2
    code, obj = run_json("snapshots", "prune", "--keep", "1", "--store", str(store))
    assert code == 0 and len(obj["removed"]) == 1
    code, text, _ = run("snapshots", "--store", str(store))
    assert code == 0 and str(tmp_path / "r") in text


def test_human_summary_reads_well(tmp_path: Path, store: Path) -> None:
    write(tmp_path / "r" / "big", 3 * 1024 * 1024)
    run("scan", str(tmp_path / "r"), "--store", str(store))
    code, text, _ = run("summary", str(tmp_path / "r"), "--store", str(store))
    assert code == 0
    assert "3.0 MiB" in text and "largest files:" in text


@pytest.mark.parametrize(
    "command",
    [["scan"], ["snapshots", "list"], ["snapshots", "prune"], ["summary"]],
)
def test_every_command_has_help_with_store_and_json(command: list[str]) -> None:
    code, text, _ = run(*command, "--help")
    assert code == 0
    assert "--store" in text and "--json" in text


def test_an_os_error_is_a_coded_error_not_a_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def boom(*_: object, **__: object) -> None:
        raise PermissionError(13, "Permission denied", "/somewhere")

    monkeypatch.setattr("hygiene_nb.api.list_snapshots", boom)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["snapshots", "--json"])
    assert exit_info.value.code == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["code"] == "os-error" and "/somewhere" in error["message"]


def test_unexpected_errors_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*_: object, **__: object) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr("hygiene_nb.api.list_snapshots", boom)
    with pytest.raises(RuntimeError):
        cli.main(["snapshots"])


def test_a_query_out_of_memory_is_a_coded_error_and_writes_nothing(
    tmp_path: Path, store: Path
) -> None:
    """A limit no query fits in: every command that queries says so, with what to do next."""
    root = tmp_path / "r"
    write(root / "a" / "f", 7)
    assert run_json("scan", str(root), "--store", str(store))[0] == 0
    env = {**os.environ, "HYGIENE_NB_QUERY_MEMORY": "1MB"}
    for command in (
        ["summary", str(root)],
        ["annotate", str(root / "a"), "--decision", "keep"],
    ):
        result = subprocess.run(
            [sys.executable, "-m", "hygiene_nb", *command, "--store", str(store), "--json"],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        assert result.returncode == 1, result.stderr
        assert "Traceback" not in result.stderr
        error = json.loads(result.stdout)["error"]
        assert error["code"] == "query-memory-exceeded"
        assert "HYGIENE_NB_QUERY_MEMORY=1MB" in error["message"]
        assert "larger" in error["message"]
    from hygiene_nb import api

    assert api.annotations_at([str(root / "a")], store=store) == []  # nothing was written


def test_cli_maps_hygiene_errors_to_their_exit_code(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from hygiene_nb.errors import StoreError

    def refuse(*_: object, **__: object) -> None:
        raise StoreError("the store is read-only; choose another with --store.")

    monkeypatch.setattr("hygiene_nb.api.list_snapshots", refuse)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["snapshots", "--json"])
    assert exit_info.value.code == 1
    assert json.loads(capsys.readouterr().out)["error"]["code"] == "store-unusable"


def test_the_top_level_help_lists_every_command_one_per_line() -> None:
    from click.testing import CliRunner

    from hygiene_nb.cli import cli

    text = CliRunner().invoke(cli, ["--help"]).output
    listed = text.split("Options:")[0]
    for name in cli.commands:
        assert any(line.strip().startswith(name + " ") for line in listed.splitlines()), name
    assert "\\b" not in text  # click's no-rewrap marker is a control character, not "\b"


def test_annotate_notes_a_path_that_does_not_exist_but_keeps_the_decision(
    tmp_path: Path, store: Path
) -> None:
    write(tmp_path / "r" / "here", 1)
    there, typo = tmp_path / "r" / "here", tmp_path / "r" / "hree"
    code, out, _ = run(
        "annotate", str(there), str(typo), "--decision", "delete", "--store", str(store)
    )
    assert code == 0
    assert f"note: {typo} does not exist now" in out and f"note: {there} " not in out
    code, obj = run_json("annotate", str(typo), "--note", "check", "--store", str(store))
    assert code == 0 and obj["missing"] == [str(typo)]
    assert [a["decision"] for a in obj["annotations"]] == ["delete"]  # kept all the same
    code, obj = run_json(
        "annotate", str(typo), "--decision", "none", "--note", "", "--store", str(store)
    )
    assert code == 0 and obj["removed"] == 1 and obj["missing"] == []  # clearing: no note
    never = tmp_path / "r" / "never-annotated"
    code, obj = run_json(
        "annotate", str(never), "--decision", "none", "--note", "", "--store", str(store)
    )
    assert code == 0 and obj["removed"] == 0  # nothing was there to remove


def test_a_plan_without_candidates_says_why_instead_of_how_to_execute(
    tmp_path: Path, store: Path
) -> None:
    write(tmp_path / "r" / "f", 1)
    run("scan", str(tmp_path / "r"), "--store", str(store), "--json")
    code, out, _ = run("plan", str(tmp_path / "r"), "--store", str(store))
    assert code == 0 and "there is no delete decision under the root" in out
    assert "--execute" not in out
    listed = Path(out.split("  list: ", 1)[1].split("\n", 1)[0]).read_text()
    assert "Nothing to execute" in listed and "--execute" not in listed
    run("annotate", str(tmp_path / "r" / "gone"), "--decision", "delete", "--store", str(store))
    code, out, _ = run("plan", str(tmp_path / "r"), "--store", str(store))
    assert code == 0 and "every delete decision under the root was left out" in out
    assert "--execute" not in out
    run("annotate", str(tmp_path / "r" / "f"), "--decision", "delete", "--store", str(store))
    code, out, _ = run("plan", str(tmp_path / "r"), "--store", str(store))
    assert code == 0 and "Dry run, then confirm" in out and "--execute" in out


def test_json_gives_the_exact_bytes_of_a_name_that_is_not_utf8(tmp_path: Path, store: Path) -> None:
    """``--json`` paths are text; a non-UTF-8 name's exact bytes go in ``path_b64``."""
    root = tmp_path / "r"
    write(root / "plain", 10)
    bad = os.fsencode(root) + b"/bad\xff\xfename"
    with open(bad, "wb") as handle:
        handle.write(b"x" * 5000)
    run("scan", str(root), "--store", str(store), "--json")

    def exact(entry: dict[str, Any]) -> bytes:
        return base64.b64decode(entry["path_b64"])

    code, summary = run_json("summary", str(root), "--store", str(store))
    assert code == 0
    by_text = {e["path"]: e for e in summary["largest"]}
    odd = next(e for text, e in by_text.items() if "bad" in text)
    assert exact(odd) == bad and "path_b64" not in by_text[str(root / "plain")]
    assert [exact(e) for e in summary["largest_files"] if "path_b64" in e] == [bad]

    code, annotated = run_json(
        "annotate", os.fsdecode(bad), "--decision", "delete", "--store", str(store)
    )
    assert code == 0 and [exact(a) for a in annotated["annotations"]] == [bad]
    code, plan = run_json("plan", str(root), "--store", str(store))
    assert code == 0 and plan["candidates"] == 1
    code, dry = run_json("execute", plan["plan_path"], "--store", str(store))
    assert code == 0 and [exact(m) for m in dry["moved"]] == [bad]
    assert os.path.exists(bad)  # a dry run
    code, done = run_json(*dry["confirm_command"].split()[1:], "--store", str(store))
    assert code == 0 and [exact(m) for m in done["moved"]] == [bad]
    assert not os.path.lexists(bad)  # in the quarantine now
    code, back = run_json("restore", done["batch_id"], "--store", str(store))
    assert code == 0 and [exact(r) for r in back["restored"]] == [bad]
    other = bad.replace(b"\xfe", b"\xfd")  # no such item in the batch
    code, back = run_json(
        "restore", done["batch_id"], "--item", os.fsdecode(other), "--store", str(store)
    )
    assert [(b["code"], exact(b)) for b in back["blocked"]] == [("not-in-batch", other)]


def test_json_stays_valid_utf8_when_an_argument_is_not(tmp_path: Path, store: Path) -> None:
    odd = os.fsencode(tmp_path) + b"/x\xff"
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "summary", odd, "--store", str(store), "--json"],
        capture_output=True,
        timeout=120,
    )
    obj = json.loads(done.stdout.decode("utf-8"))  # strict: no raw 0xff byte
    assert done.returncode == 2 and obj["error"]["code"] == "snapshot-not-found"
    assert odd in obj["error"]["message"].encode("utf-8", "surrogateescape")
