"""Every command prints its result's ``to_json()`` (or render's text) and exits with its code.

The library call is replaced by one returning a known result, so what is checked is the command
line's part alone: it adds nothing to the JSON, leaves nothing out, and takes the exit code from
the result.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api, cli, render
from hygiene_nb.executor import (
    BatchInfo,
    ExecuteResult,
    PurgeResult,
    RecoverResult,
    RestoreResult,
    VerifyResult,
)
from hygiene_nb.executor.records import Destination, Moved, Skip
from hygiene_nb.executor.recover import RecoveredPlan
from hygiene_nb.executor.restore import Blocked
from hygiene_nb.ledger import Annotation
from hygiene_nb.notebook.report import ReportResult
from hygiene_nb.query.suggest import Suggestion, SuggestResult

_MOVED = Moved("/r/a.log", 10, "rule", Destination("rename", quarantine="/s/quarantine"))
_SKIP = Skip("/r/b.tmp", "changed-since-review", "It changed.")
_VERIFICATION = {"mode": "static-only"}


def _execute(status: str, **fields: Any) -> ExecuteResult:
    return ExecuteResult(
        status=status,  # type: ignore[arg-type]
        plan_id="plan-1",
        candidates=2,
        bytes=10,
        verification=_VERIFICATION,
        **fields,
    )


_PLAN = {"summary": {"delete_count": 1}}
_CANDIDATE: dict[str, object] = {
    "path": "/r/x",
    "kind": "dir",
    "bytes": 10,
    "group": "logs",
    "claim": "c",
}
# (command line after the command's name, the library function replaced, the result, its text)
CASES: list[tuple[list[str], str, Any, Callable[[Any], str]]] = [
    (["execute", "p.json"], "hygiene_nb.executor.execute_plan",
     _execute("dry-run", moved=[_MOVED], skipped=[_SKIP]), render.execute_result),
    (["execute", "p.json"], "hygiene_nb.executor.execute_plan",
     _execute("partial", moved=[_MOVED], skipped=[_SKIP], batch_id="b", plan_state="executed"),
     render.execute_result),
    (["execute", "p.json"], "hygiene_nb.executor.execute_plan",
     _execute("rolled-back", rolled_back=[_MOVED], plan_state="rolled-back"),
     render.execute_result),
    (["execute", "p.json"], "hygiene_nb.executor.execute_plan",
     _execute("done", moved=[_MOVED], batch_id="b", plan_state="executed"),
     render.execute_result),
    (["verify", "r.json"], "hygiene_nb.executor.verify_receipt",
     VerifyResult("verified", "r", moved=1), render.verify_result),
    (["verify", "r.json"], "hygiene_nb.executor.verify_receipt",
     VerifyResult("mismatch", "r", reappeared=["/r/a.log"], moved=1), render.verify_result),
    (["verify", "r.json"], "hygiene_nb.executor.verify_receipt",
     VerifyResult("changed", "r", changed_in_quarantine=["/r/a.log"]), render.verify_result),
    (["recover"], "hygiene_nb.executor.recover_store",
     RecoverResult("done", [RecoveredPlan("plan-1", "recovered", moved=1)]),
     render.recover_result),
    (["recover"], "hygiene_nb.executor.recover_store",
     RecoverResult("partial", [RecoveredPlan("plan-2", "running", "pid 7 is alive")]),
     render.recover_result),
    (["restore", "b"], "hygiene_nb.executor.restore_batch",
     RestoreResult("dry-run", "b", ["/r/a.log"], [], [None]), render.restore_result),
    (["restore", "b"], "hygiene_nb.executor.restore_batch",
     RestoreResult("partial", "b", ["/r/\\xff"], [Blocked("/r/c", "target-occupied", "Busy.")],
                   ["L3Iv/w=="]), render.restore_result),
    (["purge", "b"], "hygiene_nb.executor.purge_batch",
     PurgeResult("dry-run", "b", {"items": 1, "files": 1, "bytes": 10}, "ok", changed=["/r/a"]),
     render.purge_result),
    (["purge", "b"], "hygiene_nb.executor.purge_batch",
     PurgeResult("done", "b", {"items": 1, "files": 1, "bytes": 10}, "ok"), render.purge_result),
    (["plan", "/r"], "hygiene_nb.api.make_plan",
     api.PlanResult("plan-1", "sha256:0", "/s/p.json", "/s/p.md", "2030-01-01T00:00:00+00:00",
                    1, 10, 2, "hygiene-nb execute /s/p.json", "hygiene-nb execute … --execute",
                    _PLAN), render.plan_result),
    (["annotate", "/r/a.log", "--decision", "keep"], "hygiene_nb.api.annotate_paths",
     api.AnnotateResult([Annotation("/r/\\xff", b"/r/\xff", "keep", None, "human", None, "t")],
                        1, ["/r/\\xff"]), render.annotate_result),
    (["report", "/r"], "hygiene_nb.notebook.report.make_report",
     ReportResult("s1", "/r", "/o/s1.ipynb", "/o/s1.html", "# Suggested plan"),
     render.report_result),
    (["suggest", "/r"], "hygiene_nb.query.suggest.suggestion_for",
     SuggestResult("/r", None, "/s/config.toml", None), SuggestResult.to_text),
    (["suggest", "/r"], "hygiene_nb.query.suggest.suggestion_for",
     SuggestResult("/r", Suggestion("/r", "s1", 40, 80, "sha256:1", [_CANDIDATE], 10)),
     SuggestResult.to_text),
]  # fmt: skip


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as done:
        cli.main(argv)
    code = done.value.code
    assert isinstance(code, int)
    return code, capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "target", "result", "text"),
    CASES,
    ids=[f"{c[0][0]}-{getattr(c[2], 'status', type(c[2]).__name__)}" for c in CASES],
)
def test_a_command_prints_its_result_and_exits_with_its_code(
    argv: list[str],
    target: str,
    result: Any,
    text: Callable[[Any], str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(target, lambda *_, **__: result)
    store = ["--store", str(tmp_path / "store")]
    code, out = _run([*argv, *store, "--json"], capsys)
    assert json.loads(out) == json.loads(json.dumps(result.to_json()))
    assert code == result.exit_code
    code, out = _run([*argv, *store], capsys)
    assert out == text(result) + "\n" and code == result.exit_code


def test_exit_4_is_what_the_result_says() -> None:
    assert [_execute(s).exit_code for s in ("dry-run", "done", "partial", "rolled-back")] == [
        0, 0, 0, 4,
    ]  # fmt: skip
    assert _execute("dry-run", skipped=[_SKIP]).exit_code == 0  # a dry run only shows
    assert _execute("partial", skipped=[_SKIP]).exit_code == 4
    assert [VerifyResult(s, "r").exit_code for s in ("verified", "changed", "mismatch")] == [
        0, 4, 4,
    ]  # fmt: skip
    assert [RecoverResult(s).exit_code for s in ("done", "partial")] == [0, 4]
    assert [RestoreResult(s, "b", [], []).exit_code for s in ("dry-run", "done", "partial")] == [
        0, 0, 4,
    ]  # fmt: skip


def test_quarantine_list_prints_each_batch_as_it_gives_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    found = [
        BatchInfo("b1", "/s/q/b1", "2030-01-01T00:00:00", 1, 10, "ok"),
        BatchInfo("b2", "/s/q/b2", "", 0, 0, "invalid", problems=["no manifest"]),
    ]
    monkeypatch.setattr("hygiene_nb.executor.list_store_batches", lambda *_: found)
    store = ["--store", str(tmp_path / "store")]
    code, out = _run(["quarantine", "list", *store, "--json"], capsys)
    assert code == 0 and json.loads(out) == {
        "status": "done",
        "batches": [b.to_json() for b in found],
    }
    assert "problems" not in found[0].to_json() and found[1].to_json()["problems"]
    code, out = _run(["quarantine", "list", *store], capsys)
    assert code == 0 and out == render.batches(found) + "\n"
