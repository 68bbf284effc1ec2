"""The ledger: annotation semantics, history, claims, remembered rules, migrations, concurrency."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.errors import LedgerTooNew, UsageError
from hygiene_nb.ledger import SCHEMA_VERSION, Annotation, Ledger
from hygiene_nb.store import Store
from tests.helpers import write


@pytest.fixture
def ledger(store: Path) -> Ledger:
    return Ledger.open(Store(store))


def test_a_note_without_a_decision_is_kept_but_not_reviewed(ledger: Ledger) -> None:
    (a,) = ledger.annotate(["/x/a"], note="look later")
    assert (a.decision, a.note, a.is_reviewed) == (None, "look later", False)


def test_decision_none_clears_the_decision_and_keeps_the_note(ledger: Ledger) -> None:
    ledger.annotate(["/x/a"], decision="delete", note="old build")
    (a,) = ledger.annotate(["/x/a"], decision="none")
    assert (a.decision, a.note) == (None, "old build")


def test_decision_and_note_are_independent(ledger: Ledger) -> None:
    ledger.annotate(["/x/a"], note="n")
    ledger.annotate(["/x/a"], decision="keep")
    (a,) = ledger.annotations()
    assert (a.decision, a.note, a.is_reviewed) == ("keep", "n", True)


def test_both_empty_removes_the_annotation_and_history_says_so(ledger: Ledger) -> None:
    ledger.annotate(["/x/a"], decision="unsure", note="n")
    assert ledger.annotate(["/x/a"], decision=None, note="") == []
    assert ledger.annotations() == []
    assert [h["action"] for h in ledger.history("/x/a")] == ["set", "removed"]


def test_clearing_what_was_never_annotated_writes_no_history(ledger: Ledger) -> None:
    ledger.annotate(["/x/a"], decision="keep")
    assert ledger.annotate(["/x/a", "/x/never"], decision=None, note="") == []
    assert [h["path"] for h in ledger.history()] == ["/x/a", "/x/a"]  # set, removed
    assert ledger.history("/x/never") == []


def test_every_change_is_appended_to_the_history(ledger: Ledger) -> None:
    ledger.annotate(["/x/a"], decision="delete")
    ledger.annotate(["/x/a"], note="because")
    ledger.annotate(["/x/a"], decision="keep")
    history = ledger.history("/x/a")
    assert [(h["decision"], h["note"]) for h in history] == [
        ("delete", None),
        ("delete", "because"),
        ("keep", "because"),
    ]


def test_batch_deduplicates_paths(ledger: Ledger) -> None:
    written = ledger.annotate(["/x/a", "/x/b", "/x/a"], decision="delete")
    assert [a.path for a in written] == ["/x/a", "/x/b"]
    assert len(ledger.history()) == 2


def test_batch_with_a_relative_path_writes_nothing(ledger: Ledger) -> None:
    with pytest.raises(UsageError, match="absolute"):
        ledger.annotate(["/x/a", "relative/b"], decision="delete")
    assert ledger.annotations() == [] and ledger.history() == []


def test_unknown_decision_is_refused(ledger: Ledger) -> None:
    with pytest.raises(UsageError):
        ledger.annotate(["/x/a"], decision="burn")


def test_non_utf8_paths_are_kept_byte_for_byte(ledger: Ledger) -> None:
    raw = b"/x/caf\xe9"
    (a,) = ledger.annotate([raw], decision="delete")
    assert a.path_raw == raw and a.path == "/x/caf\\xe9"
    assert ledger.annotations()[0].path_raw == raw


def test_claims_are_kept_apart_and_never_become_decisions(ledger: Ledger) -> None:
    ledger.annotate(["/x/a"], decision="keep")
    ledger.put_claim("/x/a", risk="safe", claim="an agent thinks it is a cache", confidence=0.7)
    ledger.put_claim("/x/b", risk="safe", claim="also", confidence=0.7)
    assert [(a.path, a.decision) for a in ledger.annotations()] == [("/x/a", "keep")]
    assert [c.path for c in ledger.claims()] == ["/x/a", "/x/b"]
    with pytest.raises(UsageError):
        ledger.put_claim("/x/a", risk="safe", claim="x", confidence=1, by="human")


def test_schema_is_created_at_the_current_version(ledger: Ledger, store: Path) -> None:
    assert ledger.schema_version == SCHEMA_VERSION
    ledger.close()
    again = Ledger.open(Store(store))  # migrating an up-to-date file changes nothing
    assert again.schema_version == SCHEMA_VERSION


def test_an_older_empty_ledger_is_migrated(store: Path) -> None:
    Store(store).ensure()
    sqlite3.connect(Store(store).ledger).close()  # a file at schema 0
    opened = Ledger.open(Store(store))
    assert opened.schema_version == SCHEMA_VERSION
    opened.annotate(["/x/a"], decision="keep")


def test_a_ledger_newer_than_the_code_is_refused_and_left_unchanged(store: Path) -> None:
    Store(store).ensure()
    path = Store(store).ledger
    db = sqlite3.connect(path)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    before = path.read_bytes()
    with pytest.raises(LedgerTooNew, match="upgrade hygiene-nb"):
        Ledger.open(Store(store))
    assert path.read_bytes() == before


WRITER = """
import sys
from hygiene_nb.ledger import Ledger
from hygiene_nb.store import resolve_store
ledger = Ledger.open(resolve_store(sys.argv[1]))
for i in range(int(sys.argv[3])):
    ledger.annotate([f"/w/{sys.argv[2]}/{i}"], decision="delete", note=str(i))
"""


def test_concurrent_writers_lose_nothing(store: Path) -> None:
    Ledger.open(Store(store)).close()
    writers = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(store), name, "150"])
        for name in ("notebook", "report", "cron")
    ]
    assert [w.wait(timeout=120) for w in writers] == [0, 0, 0]
    ledger = Ledger.open(Store(store))
    assert len(ledger.annotations()) == 450
    assert len(ledger.history()) == 450


def test_remembered_rule_fills_only_unannotated_entries(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    for proj in ("a", "b", "c"):
        write(root / proj / "node_modules" / "x.js", 10)
        write(root / proj / "package.json", 2)
        write(root / proj / "package-lock.json", 2)
    write(root / "a" / "node_modules" / "inner" / "node_modules" / "y.js", 10)  # nested
    api.scan_root(root, store=store)
    api.annotate([str(root / "a" / "node_modules")], store=store, decision="keep")
    api.annotate(
        [str(root / "b" / "node_modules")], store=store, note="ask Ann", set_decision=False
    )
    filled = api.remember_rule("node_modules", "delete", store=store)
    assert filled == 1  # only c: a has a human decision, b a human note, the nested one is inside a
    by_path = {a.path: a for a in Ledger.open(Store(store)).annotations()}
    assert by_path[str(root / "a" / "node_modules")].decision == "keep"
    assert by_path[str(root / "b" / "node_modules")].decision is None
    made = by_path[str(root / "c" / "node_modules")]
    assert (made.decision, made.by, made.rule) == ("delete", "rule", "node_modules")
    # after the next scan, a new node_modules is filled too
    write(root / "d" / "node_modules" / "z.js", 1)
    api.scan_root(root, store=store)
    assert Ledger.open(Store(store)).annotations(under=str(root / "d"))[0].by == "rule"


def test_forget_takes_back_only_unchanged_rule_made_decisions(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    for proj in ("a", "b"):
        write(root / proj / "__pycache__" / "m.pyc", 10)
    api.scan_root(root, store=store)
    assert api.remember_rule("python-cache", "delete", store=store) == 2
    api.annotate([str(root / "a" / "__pycache__")], store=store, decision="keep")  # a human
    assert api.forget_rule("python-cache", store=store) == 1
    left = Ledger.open(Store(store)).annotations()
    assert [(a.path, a.decision, a.by) for a in left] == [
        (str(root / "a" / "__pycache__"), "keep", "human")
    ]
    assert api.list_rules(store=store) == {}


def test_remembering_an_unknown_group_says_which_exist(store: Path) -> None:
    with pytest.raises(UsageError, match="node_modules"):
        api.remember_rule("node-modulez", "delete", store=store)


@pytest.mark.parametrize("path", ["/x/./a", "/x/../a", "/x//a", "/x/a/"])
def test_unnormalized_paths_are_refused(ledger: Ledger, path: str) -> None:
    with pytest.raises(UsageError, match="normalized"):
        ledger.annotate([path], decision="keep")
    assert ledger.annotations() == []


def test_annotations_under_a_root_are_matched_case_sensitively(ledger: Ledger) -> None:
    ledger.annotate(["/tmp/R/a", "/tmp/r/b", "/tmp/r_x/c", "/tmp/r"], decision="delete")
    assert [a.path for a in ledger.annotations(under="/tmp/r")] == ["/tmp/r", "/tmp/r/b"]


def test_decisions_are_the_reviewed_annotations_of_one_author_in_path_order(
    ledger: Ledger,
) -> None:
    ledger.annotate(["/tmp/r/b", "/tmp/r/a%"], decision="delete")
    ledger.annotate(["/tmp/r"], decision="keep")
    ledger.annotate(["/tmp/r/n"], note="only a note")  # not reviewed
    ledger.annotate(["/tmp/r/u"], decision="unsure", by="rule", rule="python-cache")
    ledger.annotate(["/tmp/R/a", "/tmp/r_x/c", "/tmp/rr"], decision="keep")  # not under /tmp/r
    expected = {
        a.path: a.decision
        for a in ledger.annotations(under="/tmp/r")
        if a.is_reviewed and a.by == "human"
    }
    found = ledger.decisions(under="/tmp/r", by="human")
    assert found == {"/tmp/r": "keep", "/tmp/r/a%": "delete", "/tmp/r/b": "delete"}
    assert list(found.items()) == list(expected.items())
    assert ledger.decisions(under="/tmp/r", by="rule") == {"/tmp/r/u": "unsure"}


def test_waiting_is_what_a_person_marked_delete_or_unsure_in_path_order(ledger: Ledger) -> None:
    ledger.annotate(["/tmp/r/b", "/tmp/r/a%"], decision="delete", note="old logs")
    ledger.annotate(["/tmp/r/c"], decision="unsure")
    ledger.annotate(["/tmp/r"], decision="keep")
    ledger.annotate(["/tmp/r/n"], note="only a note")
    ledger.annotate(["/tmp/r/u"], decision="unsure", by="rule", rule="python-cache")
    ledger.annotate(["/tmp/R/a", "/tmp/r_x/c", "/tmp/rr"], decision="delete")  # not under /tmp/r
    expected = [
        (a.path, a.decision, a.note, a.at)
        for a in ledger.annotations(under="/tmp/r")
        if a.decision in ("delete", "unsure") and a.by == "human"
    ]
    found = ledger.waiting(under="/tmp/r")
    assert [(p, d, n) for p, d, n, _ in found] == [
        ("/tmp/r/a%", "delete", "old logs"),
        ("/tmp/r/b", "delete", "old logs"),
        ("/tmp/r/c", "unsure", None),
    ]
    assert found == expected


def test_a_damaged_ledger_is_a_clear_store_error(store: Path) -> None:
    from hygiene_nb.errors import StoreError

    Store(store).ensure()
    db = sqlite3.connect(Store(store).ledger)
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")  # claims the schema, has no tables
    db.close()
    with pytest.raises(StoreError, match="damaged"):
        Ledger.open(Store(store))


def test_data_version_changes_only_when_another_connection_writes(store: Path) -> None:
    watching = Ledger.open(Store(store))
    seen = watching.data_version()
    watching.annotate(["/r/mine"], decision="keep")
    assert watching.data_version() == seen  # its own write: what it read plus what it wrote
    with Ledger.open(Store(store)) as other:
        other.annotate(["/r/theirs"], decision="delete")
    assert watching.data_version() != seen
    again = watching.data_version()
    assert watching.data_version() == again  # nothing more was written
    watching.close()


def test_columns_read_some_fields_of_the_annotations_under_a_path(ledger: Ledger) -> None:
    ledger.annotate(["/tmp/r/b", "/tmp/r/a%"], decision="delete", note="old logs")
    ledger.annotate(["/tmp/r/n"], note="only a note")
    ledger.annotate(["/tmp/R/a", "/tmp/rr"], decision="keep")  # not under /tmp/r
    names = ("path_raw", "decision", "note", "by", "at")
    found = ledger.columns(names, under="/tmp/r")
    assert found == [
        (a.path_raw, a.decision, a.note, a.by, a.at) for a in ledger.annotations(under="/tmp/r")
    ]
    assert [row[0] for row in found] == [b"/tmp/r/a%", b"/tmp/r/b", b"/tmp/r/n"]
    for bad in (("path; DROP TABLE annotations",), ()):
        with pytest.raises(ValueError, match="not columns"):
            ledger.columns(bad, under="/tmp/r")


def test_a_ledger_damaged_past_its_first_rows_is_a_clear_store_error(store: Path) -> None:
    """``annotations`` reads its rows a batch at a time: damage met after the first batch
    is the same clear error as damage met at once."""
    from hygiene_nb.errors import StoreError

    with Ledger.open(Store(store)) as ledger:
        ledger.annotate([f"/r/{n:06d}" for n in range(20_000)], decision="delete")
        assert len(ledger.annotations(under="/r")) == 20_000
    path = Store(store).ledger
    data = bytearray(path.read_bytes())
    page = 4096
    # the table's last pages (the rows read last), keeping the file's header and first pages
    start = len(data) // 2 // page * page
    data[start : start + 8 * page] = b"\xa5" * (8 * page)
    path.write_bytes(bytes(data))
    with Ledger.open(Store(store)) as ledger, pytest.raises(StoreError, match="damaged"):
        ledger.annotations(under="/r")


def test_an_interrupted_read_leaves_the_connection_free(store: Path) -> None:
    """A read stopped halfway (a notebook's interrupt, its traceback kept) closes its cursor:
    the connection then sees others' writes, writes itself, and lets the log be checkpointed."""
    from unittest import mock

    import hygiene_nb.ledger.annotations as module

    with Ledger.open(Store(store)) as ledger:
        ledger.annotate([f"/r/{n:06d}" for n in range(20_000)], decision="delete")
    made, real = 0, Annotation  # the class the module makes its records with

    def interrupted(*fields: Any) -> object:
        nonlocal made
        made += 1
        if made == 5_000:
            raise KeyboardInterrupt
        return real(*fields)

    watching = Ledger.open(Store(store))
    with mock.patch.object(module, "Annotation", interrupted):
        try:
            watching.annotations(under="/r")
        except KeyboardInterrupt as exc:
            kept = exc  # the traceback and its frames stay alive, as in a notebook
    assert kept.__traceback__ is not None and made == 5_000
    with Ledger.open(Store(store)) as other:
        other.annotate(["/r/theirs"], decision="keep")
    assert any(a.path == "/r/theirs" for a in watching.annotations(under="/r"))
    watching.annotate(["/r/mine"], decision="unsure")  # its own write is not refused
    db = sqlite3.connect(Store(store).ledger)
    assert db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0] == 0  # not busy
    db.close()
    watching.close()
