"""The report's headline and its tables for people, on real demo trees."""

from __future__ import annotations

import os
from pathlib import Path

import pandas as pd
import pytest

from hygiene_nb import api
from hygiene_nb.cli import main
from hygiene_nb.notebook import headline as hl
from hygiene_nb.notebook.demo import DemoStore, make_demo_store
from hygiene_nb.notebook.report import make_report
from hygiene_nb.notebook.tables import table_html
from hygiene_nb.query import views
from hygiene_nb.render import human_bytes
from tests.helpers import confirmed_execute


def walked_bytes(top: Path) -> int:
    """Apparent bytes of ``top`` and everything below it (directories too), as lstat says."""
    total = top.lstat().st_size
    for here, dirs, files in os.walk(top):
        for name in dirs + files:
            total += (Path(here) / name).lstat().st_size
    return total


@pytest.fixture
def one_scan(tmp_path: Path) -> DemoStore:
    return make_demo_store(tmp_path / "tree", tmp_path / "store", scans=1)


def test_a_first_scan_says_what_history_will_show_and_sizes_match_the_disk(
    one_scan: DemoStore,
) -> None:
    found = hl.headline(str(one_scan.root), store=one_scan.store)
    assert found.scans == 1 and found.growth == [] and found.free_change is None
    assert found.bytes == walked_bytes(one_scan.root)
    page = hl.headline_html(found)
    assert "after the next scan" in page
    assert human_bytes(walked_bytes(one_scan.root)) in page
    assert found.places and len(found.places) <= 10
    for place in found.places:  # each is a real place, with its bytes as the disk says
        assert place.risk in ("safe", "caution")
        assert place.bytes == walked_bytes(one_scan.root / place.path)
    risks = [p.risk for p in found.places]
    assert risks == sorted(risks, key=("safe", "caution").index)  # safe first
    assert found.quarantined_bytes == 0 and "Nothing is held in quarantine" in page
    assert found.pending_delete == found.pending_unsure == 0


def test_growth_and_pending_decisions_follow_the_tree_and_the_ledger(
    one_scan: DemoStore,
) -> None:
    before = walked_bytes(one_scan.root)
    added = one_scan.root / "Downloads" / "new-video.bin"
    added.write_bytes(b"\0" * 12_345)
    api.scan_root(one_scan.root, store=one_scan.store)
    api.annotate([str(one_scan.root / ".cache")], store=one_scan.store, decision="delete")
    found = hl.headline(str(one_scan.root), store=one_scan.store)
    assert found.scans == 2
    assert [g.label for g in found.growth] == ["the previous scan"]  # no scan 7 days ago
    assert found.growth[0].delta == walked_bytes(one_scan.root) - before
    assert found.pending_delete == 1
    assert found.pending_delete_bytes == walked_bytes(one_scan.root / ".cache")
    page = hl.headline_html(found)
    assert "since the previous scan" in page and "1 delete still on disk" in page
    # what the report's sections read from the headline instead of reading it again
    assert list(found.waiting["path"]) == [str(one_scan.root / ".cache")]
    assert found.waiting.equals(views.pending_decisions(str(one_scan.root), store=one_scan.store))
    assert found.summary == api.summarize(str(one_scan.root), store=one_scan.store, as_of_scan=True)


def test_the_ledger_read_once_gives_every_section_what_it_reads_itself(
    one_scan: DemoStore,
) -> None:
    """A report reads the ledger once (the headline's ``annotations``) for all its sections."""
    from hygiene_nb.ledger import Ledger
    from hygiene_nb.query import suggest
    from hygiene_nb.store import Store

    root, store = str(one_scan.root), one_scan.store
    cache, downloads = one_scan.root / ".cache", one_scan.root / "Downloads"
    api.annotate([str(cache)], store=store, decision="delete", note="rebuilt on use")
    api.annotate([str(downloads)], store=store, decision="keep")
    api.annotate([str(one_scan.root / "gone.txt")], store=store, decision="delete")  # not on disk
    some = sorted(p for p in downloads.rglob("*") if p.is_file())[:2]
    api.annotate([str(p) for p in some], store=store, decision="unsure")
    api.annotate([str(one_scan.root / "notes-only")], store=store, note="a note alone")
    with Ledger.open(Store(store)) as ledger:  # proposals: no person's decisions
        ledger.annotate([str(cache / "x")], decision="delete", by="agent")
        ledger.annotate([str(cache / "y")], decision="delete", by="rule", rule="python-cache")
    found = hl.headline(root, store=store)
    anns = found.annotations
    assert {a.decision for a in anns} == {"delete", "keep", "unsure", None}
    assert found.waiting.equals(views.pending_decisions(root, store=store, annotations=anns))
    assert found.waiting.equals(views.pending_decisions(root, store=store))
    assert views.review_coverage(root, store=store, annotations=anns) == views.review_coverage(
        root, store=store
    )
    assert views.plan_preview(root, store=store, annotations=anns) == views.plan_preview(
        root, store=store
    )
    assert views.ledger_state(store=store, root=root, annotations=anns) == views.ledger_state(
        store=store, root=root
    )
    tidy = suggest.organization_suggestions(root, store=store, annotations=anns)
    assert tidy.equals(suggest.organization_suggestions(root, store=store))


def test_a_redacted_headline_names_no_path(one_scan: DemoStore) -> None:
    found = hl.headline(str(one_scan.root), store=one_scan.store)
    page = hl.headline_html(found, redact=True)
    assert str(one_scan.root) not in page
    assert all(p.path not in page for p in found.places)
    assert all(p.rule in page for p in found.places if p.rule)


def test_tables_say_bytes_in_binary_units_with_no_index_and_no_na() -> None:
    frame = pd.DataFrame(
        {
            "path": ["/r/a/b", "/elsewhere/c"],
            "bytes": pd.array([1_503_238_553, None], dtype="Int64"),
            "at": pd.to_datetime(pd.Series(["2026-01-02T03:04:05Z", None]), utc=True),
        }
    )
    page = table_html(frame, root="/r")
    assert human_bytes(1_503_238_553) in page and 'title="1,503,238,553 bytes"' in page
    assert "<NA>" not in page and "NaT" not in page and "\u2014" in page
    assert "2026-01-02 03:04 UTC" in page
    assert ">a/b<" in page and 'title="/r/a/b"' in page and "/elsewhere/c" in page
    assert "<th></th>" not in page  # no index column


@pytest.mark.slow
def test_the_report_opens_with_the_headline_and_ends_with_provenance(
    one_scan: DemoStore, tmp_path: Path
) -> None:
    done = make_report(str(one_scan.root), store=one_scan.store, out=tmp_path / "out")
    page = Path(done.html).read_text()
    head = page.index('class="hnb-headline"')
    assert head < page.index(">Risk mix<") < page.index(">Executions and quarantine<")
    assert page.index(">Executions and quarantine<") < page.index(">Totals and provenance<")
    assert "Only one snapshot so far" in page
    for fig_id in ("history", "growth", "risk-history", "diff"):  # no history lines
        assert f'id="hnb-{fig_id}"' not in page
    assert "No decision is waiting" in page and "No plan has been executed" in page
    assert "{'" not in page.split('class="hnb-headline"')[1].split(">Totals and provenance<")[0]
    assert "&lt;NA&gt;" not in page and "<NA>" not in page


def test_bytes_moved_to_quarantine_are_held_until_a_purge(
    one_scan: DemoStore, capsys: pytest.CaptureFixture[str]
) -> None:
    target = one_scan.root / "Downloads" / "installer.tmp"
    size = target.lstat().st_size
    api.annotate([str(target)], store=one_scan.store, decision="delete")
    plan = api.make_plan(str(one_scan.root), store=one_scan.store)
    with pytest.raises(SystemExit) as done:
        main([*confirmed_execute(plan, one_scan.store), "--json"])
    capsys.readouterr()
    assert done.value.code in (0, None) and not target.exists()
    # the scan before the move still holds the file: counted there, never in quarantine too
    before = hl.headline(str(one_scan.root), store=one_scan.store)
    assert before.quarantined_bytes == 0
    api.scan_root(one_scan.root, store=one_scan.store)
    found = hl.headline(str(one_scan.root), store=one_scan.store)
    assert found.quarantined_bytes == size and found.quarantined_batches == 1
    page = hl.headline_html(found)
    assert human_bytes(size) in page and "frees nothing until the batch is purged" in page
    # another root of the same store moved nothing
    other = one_scan.root.parent / "other-root"
    (other / "d").mkdir(parents=True)
    api.scan_root(other, store=one_scan.store)
    assert hl.headline(str(other), store=one_scan.store).quarantined_bytes == 0


def test_nothing_to_score_says_so_instead_of_a_perfect_score(tmp_path: Path) -> None:
    root = tmp_path / "empty"
    (root / "only-dirs").mkdir(parents=True)
    api.scan_root(root, store=tmp_path / "s")
    found = hl.headline(str(root), store=tmp_path / "s")
    assert found.score is None
    page = hl.headline_html(found)
    assert "100 / 100" not in page and "No score" in page


def test_a_cell_that_is_not_a_path_is_escaped_and_cut_too() -> None:
    page = table_html(pd.DataFrame({"name": ["a\x1b[31mR\nx", "y" * 150]}))
    assert "\x1b" not in page and "\\x1b" in page and "\\n" in page
    assert "y" * 150 not in page.split("title=")[0] and "\u2026" in page
