"""Who decided: an agent proposes, never decides; rule-made decisions say so; protection of
configuration and home dot-files is checked again at the moment of acting, whatever the
ledger says."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from hygiene_nb import api
from hygiene_nb.executor import Confirmation, execute_plan
from hygiene_nb.ledger import Ledger, display_path
from hygiene_nb.plan.schema import plan_digest
from hygiene_nb.plan.tally import PlanTally
from hygiene_nb.store import Store
from tests.executor.helpers import forge_plan
from tests.helpers import write


def confirm_for(plan: api.PlanResult) -> Confirmation:
    return Confirmation(plan.plan_id, plan.plan_digest, "quarantine")


def test_a_decision_written_by_an_agent_never_becomes_a_candidate(
    world: dict[str, Path],
) -> None:
    root, store = world["root"], world["store"]
    api.scan_root(root, store=store)
    log, scratch = root / "web" / "app.log", root / "data" / "scratch.bin"
    with Ledger.open(Store(store)) as ledger:  # through the ledger's own API
        ledger.annotate([str(log)], decision="delete", by="agent")
    raw = os.fsencode(scratch)
    db = sqlite3.connect(Store(store).ledger)  # or straight into the file, as an agent could
    with db:
        db.execute(
            "INSERT INTO annotations (path_raw, path, decision, note, by, rule, at)"
            " VALUES (?, ?, 'delete', NULL, 'agent', NULL, '2026-01-01T00:00:00+00:00')",
            (raw, display_path(raw)),
        )
    db.close()

    plan = api.make_plan(root, store=store)

    assert plan.candidates == 0
    left_out = {e["path"]: e for e in plan.plan["excluded"]}
    assert {p: e["code"] for p, e in left_out.items()} == {
        str(log): "decided-by-agent",
        str(scratch): "decided-by-agent",
    }
    assert "decide it yourself" in left_out[str(log)]["message"]
    markdown = Path(plan.markdown_path).read_text()
    assert f"`{log}` | `decided-by-agent`" in markdown
    assert log.exists() and scratch.exists()


def test_a_rule_made_decision_is_marked_in_the_plan_its_markdown_and_the_dry_run(
    world: dict[str, Path],
) -> None:
    root, store = world["root"], world["store"]
    api.scan_root(root, store=store)
    assert api.remember_rule("node_modules", "delete", store=store) == 1
    api.annotate([str(root / "web" / "app.log")], store=store, decision="delete")

    plan = api.make_plan(root, store=store)

    by = {c["path"]: c["decided_by"] for c in plan.plan["candidates"]}
    modules, log = str(root / "web" / "node_modules"), str(root / "web" / "app.log")
    assert by == {modules: "rule", log: "human"}
    markdown = Path(plan.markdown_path).read_text()
    (line,) = [m for m in markdown.splitlines() if f"`{modules}`" in m]
    assert "remembered rule" in line
    (line,) = [m for m in markdown.splitlines() if f"`{log}`" in m]
    assert "remembered rule" not in line and "you" in line
    shown = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "execute", plan.plan_path, "--store", str(store)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert shown.returncode == 0, shown.stderr
    (line,) = [m for m in shown.stdout.splitlines() if modules in m and "would move" in m]
    assert "decided by a remembered rule" in line
    (line,) = [m for m in shown.stdout.splitlines() if log in m and "would move" in m]
    assert "remembered rule" not in line
    dry = execute_plan(plan.plan_path, store=Store(store))
    assert {m.path: m.decided_by for m in dry.moved} == by


def test_a_plan_registered_by_editing_the_ledger_cannot_move_home_dot_files(
    tmp_path: Path,
) -> None:
    home = Path(os.environ["HOME"])  # a fake home under tmp_path (tests/conftest.py)
    store = tmp_path / "store"
    bashrc = write(home / ".bashrc", data=b"export PATH=$HOME/bin:$PATH\n")
    settings = write(home / ".config" / "app" / "settings.ini", data=b"[ui]\ndark = 1\n")
    junk = write(home / "junk.tmp", 10)
    api.scan_root(home, store=store)
    api.annotate([str(junk)], store=store, decision="delete")
    base = api.make_plan(home, store=store)
    assert base.candidates == 1  # the person's decision; .bashrc was never planned
    forged = forge_plan(base, store, [bashrc, settings])
    doc = forged["doc"]
    confirm = Confirmation(doc["plan_id"], doc["plan_digest"], "quarantine")

    dry = execute_plan(forged["path"], store=Store(store))
    result = execute_plan(forged["path"], store=Store(store), confirm=confirm)

    for run in (dry, result):
        assert run.moved == []
        assert {s.path: s.code for s in run.skipped} == {
            str(bashrc): "now-protected",
            str(settings): "now-protected",
        }
    assert bashrc.read_bytes() == b"export PATH=$HOME/bin:$PATH\n"
    assert settings.read_bytes() == b"[ui]\ndark = 1\n"
    message = {s.path: s.message for s in result.skipped}[str(bashrc)]
    assert "home" in message.lower() or "config" in message.lower()


def test_a_registered_plan_whose_candidate_an_agent_decided_moves_nothing(
    world: dict[str, Path],
) -> None:
    root, store = world["root"], world["store"]
    api.scan_root(root, store=store)
    log = root / "web" / "app.log"
    api.annotate([str(log)], store=store, decision="delete")
    base = api.make_plan(root, store=store)
    forged = forge_plan(base, store, [log])
    doc = forged["doc"]
    doc["candidates"][0]["decided_by"] = "agent"
    doc["plan_digest"] = plan_digest(doc)
    Path(forged["path"]).write_text(json.dumps(doc))
    db = sqlite3.connect(Store(store).ledger)
    with db:
        db.execute(
            "UPDATE plans SET plan_digest = ? WHERE plan_id = ?",
            (doc["plan_digest"], doc["plan_id"]),
        )
    db.close()
    confirm = Confirmation(doc["plan_id"], doc["plan_digest"], "quarantine")
    result = execute_plan(forged["path"], store=Store(store), confirm=confirm)
    assert result.moved == [] and [s.code for s in result.skipped] == ["decided-by-agent"]
    assert log.exists()


def test_a_note_alone_leaves_who_decided_as_it_was(world: dict[str, Path]) -> None:
    """A person's note on an agent's proposal does not make it the person's decision."""
    root, store = world["root"], world["store"]
    api.scan_root(root, store=store)
    log, scratch = root / "web" / "app.log", root / "data" / "scratch.bin"
    (first,) = api.annotate([str(log)], store=store, decision="delete")
    assert first.digest is not None  # made on the snapshot: plannable as far as that goes
    with Ledger.open(Store(store)) as ledger:  # an agent proposes the same, on the same rows
        ledger.annotate(
            [str(log)],
            decision="delete",
            by="agent",
            made_on={os.fsencode(log): (str(first.snapshot_id), first.digest)},
        )
        ledger.annotate([str(scratch)], note="an agent's remark")
    api.annotate([str(scratch)], store=store, decision="delete")
    api.annotate([str(log)], store=store, set_decision=False, note="looked at it")
    with Ledger.open(Store(store)) as ledger:
        (ann,) = ledger.annotations_at([str(log)])
        history = ledger.history(str(log))
    assert (ann.decision, ann.note, ann.by, ann.digest) == (
        "delete",
        "looked at it",
        "agent",
        first.digest,
    )
    assert [h["by"] for h in history] == ["human", "agent", "human"]  # who wrote each change

    plan = api.make_plan(root, store=store)

    assert {c["path"]: c["decided_by"] for c in plan.plan["candidates"]} == {str(scratch): "human"}
    assert {e["path"]: e["code"] for e in plan.plan["excluded"]} == {str(log): "decided-by-agent"}
    table = api.classify_snapshot(str(root), store=store)
    with Ledger.open(Store(store)) as ledger:
        tally = PlanTally(table, ledger.annotations(), root=str(root))
    assert tally.summary()["candidates"] == plan.candidates == 1
