"""What the report, its tables and its charts show a person, on real temporary trees.

Every figure a cell shows is checked against the tree itself (``os.walk``, ``lstat``) or the
ledger as written here, never against a figure typed into the test.
"""

from __future__ import annotations

import html
import json
import os
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from hygiene_nb import api
from hygiene_nb import formatting as fmt
from hygiene_nb.classify.summary import RISKS
from hygiene_nb.notebook import figures, sections
from hygiene_nb.notebook import headline as hl
from hygiene_nb.notebook.tables import table_html
from hygiene_nb.query import suggest, views
from tests.helpers import LONG_NAME, report_tree, write

LONG = LONG_NAME


def walked(top: Path) -> tuple[int, int]:
    """Apparent bytes of ``top`` and everything below (directories too), and the files below."""
    total, files = top.lstat().st_size, 0
    for here, dirs, names in os.walk(top):
        for name in dirs + names:
            total += (Path(here) / name).lstat().st_size
        files += len(names)
    return total, files


def rows(page: str) -> list[list[str]]:
    """The body rows of the HTML tables in ``page``, each a list of its cells' inner HTML."""
    body = "".join(re.findall(r"<tbody>(.*?)</tbody>", page, re.S))
    return [
        re.findall(r"<td[^>]*>(.*?)</td>", row, re.S)
        for row in re.findall(r"<tr>(.*?)</tr>", body, re.S)
    ]


def text_of(cell: str) -> str:
    """A cell's text as a person reads it (tags dropped, entities decoded)."""
    return html.unescape(re.sub(r"<[^>]+>", "", cell))


def titled(cell: str) -> str | None:
    found = re.search(r'title="([^"]*)"', cell)
    return html.unescape(found.group(1)) if found else None


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return report_tree(tmp_path / "tree")


def test_totals_say_bytes_in_binary_units_with_every_byte_on_hover_and_counts_grouped(
    tree: Path, store: Path
) -> None:
    api.scan_root(tree, store=store)
    summary = api.summarize(str(tree), store=store, as_of_scan=True)
    page = sections.totals_html(summary)
    shown = {text_of(r[0]): r[1] for r in rows(page)}
    size, files = walked(tree)
    assert text_of(shown["apparent bytes"]) == fmt.human_bytes(size)
    assert titled(shown["apparent bytes"]) == fmt.exact_bytes(size)
    assert text_of(shown["files"]) == f"{files:,}" and "," in text_of(shown["files"])
    assert text_of(shown["filesystem free bytes"]).endswith("iB")
    assert titled(shown["filesystem free bytes"]) == fmt.exact_bytes(summary.fs_free)
    at = text_of(shown["scanned at"])
    assert at.endswith(" UTC") and "T" not in at[:-4] and at.startswith(summary.scanned_at[:10])
    raw = [str(v) for v in (size, summary.fs_free, summary.tree_alloc) if v]
    assert not any(f">{n}<" in page for n in raw)  # no raw integer anywhere


def test_provenance_is_readable_rows_with_the_ledger_counted_by_decision(
    tree: Path, store: Path
) -> None:
    info = api.scan_root(tree, store=store)
    deleted = [tree / "src" / "__pycache__", tree / LONG / "film.bin"]
    api.annotate([str(p) for p in deleted], store=store, decision="delete")
    api.annotate([str(tree / "src" / "m0001.py")], store=store, decision="keep")
    frame = views.provenance(
        str(tree), store=store, parameters={"root": str(tree), "store": None, "scan_id": None}
    )
    page = sections.provenance_html(frame)
    shown = {text_of(r[0]): text_of(r[1]) for r in rows(page)}
    assert "{" not in page and "}" not in page  # no raw dict, no JSON
    total = len(deleted) + 1
    assert shown["ledger"].startswith(f"{fmt.counted(total, 'annotation')}: ")
    assert f"{len(deleted)} delete" in shown["ledger"] and "1 keep" in shown["ledger"]
    assert "0 unsure" in shown["ledger"]
    assert shown["ledger digest"].startswith("sha256:") and len(shown["ledger digest"]) == 71
    assert shown["snapshot"] == info.scan_id
    assert shown["parameter root"] == str(tree) and shown["parameter store"] == "none"
    started = fmt.human_datetime(info.started_at, seconds=True)
    assert shown["scanned"].startswith(started + " UTC \u2192 ")


def headers(page: str) -> list[str]:
    return [text_of(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", page, re.S)]


def test_the_risk_mix_table_says_its_headers_in_words_and_reclaimable_bytes_in_units(
    tree: Path, store: Path
) -> None:
    api.scan_root(tree, store=store)
    summary = api.summarize(str(tree), store=store, as_of_scan=True)
    page = table_html(views.risk_frame(summary))
    said = headers(page)
    assert all("_" not in h for h in said) and "reclaimable up to this level" in said
    column = said.index("reclaimable up to this level")
    by_risk = {text_of(r[0]): r for r in rows(page)}
    cache, _ = walked(tree / "src" / "__pycache__")  # bytecode: the only safe bytes here
    safe = by_risk["safe"][column]
    assert text_of(safe) == fmt.human_bytes(cache) and titled(safe) == fmt.exact_bytes(cache)
    assert summary.reclaimable["safe"].bytes == cache
    assert str(cache) not in page.replace(fmt.exact_bytes(cache), "")


def test_the_diff_table_says_its_headers_in_words_and_every_change_with_its_sign(
    tree: Path, store: Path
) -> None:
    api.scan_root(tree, store=store)
    before = {p.name: walked(p)[0] for p in tree.iterdir()}
    write(tree / LONG / "second.bin", 250_000)
    for old in sorted((tree / "src").glob("m00[0-4]?.py")):
        old.unlink()
    api.scan_root(tree, store=store)
    after = {p.name: walked(p)[0] for p in tree.iterdir()}
    change = {name: after[name] - before[name] for name in before}
    assert change[LONG] > 0 > change["src"]
    for by in ("risk", "dir"):
        page = table_html(sections.compact_diff(views.diff(str(tree), store=store, by=by)))
        said = headers(page)
        assert said[1:4] == ["bytes before", "bytes after", "change"], by
        assert all("_" not in h for h in said), said
        for row in rows(page):
            delta = row[said.index("change")]
            if text_of(delta) != "0 B":
                assert text_of(delta)[0] in "+-" and (titled(delta) or "?")[0] in "+-", delta
        if by == "dir":
            shown = {titled(r[0]) or text_of(r[0]): r[said.index("change")] for r in rows(page)}
            grown = shown[LONG]  # the key is the child's name, the whole of it on hover
            assert text_of(grown) == fmt.signed_bytes(change[LONG]) and text_of(grown)[0] == "+"
            assert titled(grown) == fmt.signed_exact_bytes(change[LONG])
            assert text_of(shown["src"]) == fmt.signed_bytes(change["src"])
    fig = figures.diff_figure(views.diff(str(tree), store=store))
    written = [t for bar in fig.data for t in bar.text] + list(fig.layout.xaxis.ticktext)
    assert "\u2212" not in "".join(written) + fig.layout.title.text  # one minus sign: "-"
    assert fmt.signed_bytes(change["src"]) in written and fmt.signed_bytes(change[LONG]) in written


def test_the_owners_table_names_where_each_holds_most_relative_to_the_root(
    tree: Path, store: Path
) -> None:
    api.scan_root(tree, store=store)
    owners = views.by_owner(str(tree), store=store, as_of_scan=True)
    page = table_html(views.owners_frame(owners))
    said = headers(page)
    first = rows(page)[0]
    cell = first[said.index("largest in")]
    largest = max(tree.iterdir(), key=lambda p: walked(p)[0])  # one owner here: this process
    assert largest.name == LONG
    assert titled(cell) == str(largest)  # the exact path on hover
    shown = text_of(cell)
    assert str(tree) not in shown and len(shown) < len(LONG)
    assert shown == fmt.display_path(str(largest), str(tree), 64) and fmt.ELLIPSIS in shown
    assert text_of(first[said.index("held there")]) == fmt.human_bytes(walked(largest)[0])


def test_long_names_are_shortened_in_the_middle_in_legends_and_axes_whole_on_hover(
    tree: Path, store: Path
) -> None:
    api.scan_root(tree, store=store)
    write(tree / LONG / "second.bin", 250_000)
    api.scan_root(tree, store=store)
    growth = figures.growth_figure(views.child_growth(str(tree), store=store))
    trace = next(t for t in growth.data if LONG in str(t.customdata[0][0]))
    assert trace.name == fmt.middle_ellipsis(LONG, figures.NAME_WIDTH)
    assert len(trace.name) <= figures.NAME_WIDTH < len(LONG) and trace.name.endswith("team")
    assert all(row[0] == LONG for row in trace.customdata)  # the whole name on hover
    legend = [t.name for t in growth.data]
    assert all(len(n) <= figures.NAME_WIDTH for n in legend)

    diff = figures.diff_figure(views.diff(str(tree), store=store))
    grew = next(t for t in diff.data if t.name == "grew")
    labels = list(grew.y)
    assert fmt.middle_ellipsis(LONG, figures.NAME_WIDTH) in labels
    assert LONG not in labels
    hover = grew.customdata[labels.index(fmt.middle_ellipsis(LONG, figures.NAME_WIDTH))]
    assert hover.startswith(LONG + ": ")
    assert list(diff.layout.yaxis.categoryarray).count(labels[0]) == 1


def test_two_long_names_alike_at_their_ends_keep_a_bar_each(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "alike"
    ends = "-and-a-long-tail-that-both-names-share-to-the-very-end"
    names = ["first" + ends, "second" + ends]
    for name in names:
        write(root / name / "a.bin", 10)
    api.scan_root(root, store=store)
    for i, name in enumerate(names):
        write(root / name / "b.bin", 1000 * (i + 1))
    api.scan_root(root, store=store)
    fig = figures.diff_figure(views.diff(str(root), store=store))
    grew = next(t for t in fig.data if t.name == "grew")
    assert len(set(grew.y)) == 2 and all(len(y) <= figures.NAME_WIDTH + 4 for y in grew.y)
    whole = sorted(h.split(": ")[0] for h in grew.customdata)
    assert whole == sorted(names)


def said(fig: object) -> str:
    """The sentence a figure with nothing to draw shows instead (``""``: it draws something)."""
    layout = fig.layout  # type: ignore[attr-defined]
    if fig.data or not layout.annotations:  # type: ignore[attr-defined]
        return ""
    return str(layout.annotations[0].text)


def test_an_empty_directory_gets_sentences_not_a_bare_treemap_or_an_empty_chart(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "nothing-here"
    root.mkdir()
    api.scan_root(root, store=store)
    summary = api.summarize(str(root), store=store, as_of_scan=True)
    treemap = figures.treemap_figure(views.treemap_of(str(root), store=store))
    assert "empty" in said(treemap) and treemap.layout.meta["id"] == "treemap"
    staleness = figures.staleness_figure(summary.stale)
    assert (
        said(staleness).startswith("No file bytes") and staleness.layout.meta["id"] == "staleness"
    )


def test_the_staleness_legend_lists_only_the_risks_that_hold_bytes(tree: Path, store: Path) -> None:
    api.scan_root(tree, store=store)
    summary = api.summarize(str(tree), store=store, as_of_scan=True)
    fig = figures.staleness_figure(summary.stale)
    file_bytes = sum(
        (Path(here) / n).lstat().st_size for here, _, names in os.walk(tree) for n in names
    )
    assert sum(sum(t.y) for t in fig.data) == file_bytes
    assert all(sum(t.y) > 0 for t in fig.data)  # no legend entry for a level with no bytes
    assert len(fig.data) < len(RISKS) and {t.name for t in fig.data} <= set(RISKS)


def test_the_risk_history_legend_lists_only_the_risks_that_hold_bytes(
    tree: Path, store: Path
) -> None:
    api.scan_root(tree, store=store)
    write(tree / LONG / "second.bin", 250_000)
    api.scan_root(tree, store=store)
    history = views.risk_history(str(tree), store=store)
    fig = figures.risk_history_figure(history)
    bars = [t for t in fig.data if t.type == "bar"]
    held = {r for r in RISKS if history.loc[history["risk"] == r, "bytes"].fillna(0).sum() > 0}
    assert {t.name for t in bars} == held and len(held) < len(RISKS)
    size, _ = walked(tree)
    last = fig.data[-1].x[-1]  # the latest scan, where the score line ends
    # the stacked bars of the latest scan add up to the whole tree, as os.walk sees it
    assert sum(y for t in bars for x, y in zip(t.x, t.y, strict=True) if x == last) == size


def moved_back(store: Path, scan_id: str, days: float) -> None:
    """Record ``scan_id`` in the store's index as run ``days`` earlier than it did."""
    index = store / "index.jsonl"
    lines = []
    for line in index.read_text().splitlines():
        record = json.loads(line)
        if record["scan_id"] == scan_id:
            for key in ("started_at", "finished_at"):
                at = datetime.fromisoformat(record[key]) - timedelta(days=days)
                record[key] = at.isoformat()
        lines.append(json.dumps(record))
    index.write_text("\n".join(lines) + "\n")


def test_growth_says_the_real_interval_between_the_two_scans(tree: Path, store: Path) -> None:
    sizes = []
    infos = []
    for extra in (0, 100_000, 300_000):
        if extra:
            write(tree / LONG / f"more-{extra}.bin", extra)
        infos.append(api.scan_root(tree, store=store))
        sizes.append(walked(tree)[0])
    moved_back(store, infos[0].scan_id, 40)  # the oldest: 40 days before the latest
    moved_back(store, infos[1].scan_id, 10)  # the previous: 10 days before
    times = {
        json.loads(line)["scan_id"]: datetime.fromisoformat(json.loads(line)["finished_at"])
        for line in (store / "index.jsonl").read_text().splitlines()
    }
    latest = times[infos[2].scan_id]

    def days_before(info: api.ScanInfo) -> float:
        return (latest - times[info.scan_id]) / timedelta(days=1)

    found = hl.headline(str(tree), store=store)
    assert [g.delta for g in found.growth] == [sizes[2] - sizes[1], sizes[2] - sizes[0]]
    assert [g.span for g in found.growth] == [
        fmt.human_age(days_before(infos[1])),
        fmt.human_age(days_before(infos[0])),
    ]
    page = hl.headline_html(found)
    assert "in 7 days" not in page and "in 30 days" not in page
    assert f"({fmt.human_age(days_before(infos[1]))} before, " in page
    month = fmt.human_age(days_before(infos[0]))
    assert (
        month != "30 days"
        and f"{fmt.bytes_html(sizes[2] - sizes[0], signed=True)} in {month} " in page
    )


def test_one_scan_40_days_before_is_compared_with_once_and_said_as_it_is(
    tree: Path, store: Path
) -> None:
    first = api.scan_root(tree, store=store)
    write(tree / LONG / "more.bin", 100_000)
    api.scan_root(tree, store=store)
    moved_back(store, first.scan_id, 40)
    found = hl.headline(str(tree), store=store)
    assert len(found.growth) == 1  # the previous scan is also the one 7 and 30 days before
    assert found.growth[0].span == fmt.human_age(40) != "7 days"
    page = hl.headline_html(found)
    assert f"({fmt.human_age(40)} before, " in page and " in 7 days" not in page


def cells_of(page: str, column: int) -> list[str]:
    """The opening ``<td …>`` tags of one column of ``page``'s table."""
    body = page.split("<tbody>", 1)[1]
    return [re.findall(r"<td[^>]*>", row)[column] for row in re.findall(r"<tr>(.*?)</tr>", body)]


def test_number_columns_never_wrap_and_line_up(tree: Path, store: Path) -> None:
    api.scan_root(tree, store=store)
    summary = api.summarize(str(tree), store=store, as_of_scan=True)
    page = table_html(views.entries_frame(summary.largest), root=str(tree))
    said = headers(page)
    for name in ("bytes", "files"):
        for td in cells_of(page, said.index(name)):
            assert "white-space:nowrap" in td and "tabular-nums" in td, (name, td)
    for name in ("path", "claim"):  # text may wrap in a narrow window
        assert all("nowrap" not in td for td in cells_of(page, said.index(name))), name
    owners = table_html(views.owners_frame(views.by_owner(str(tree), store=store)))
    said = headers(owners)
    for name in ("size", "files", "share", "reclaimable (safe + caution)", "held there"):
        assert all("nowrap" in td for td in cells_of(owners, said.index(name))), name
    assert all("nowrap" not in td for td in cells_of(owners, said.index("largest in")))


def wcag_contrast(one: str, two: str) -> float:
    """The WCAG 2 contrast ratio of two ``#rrggbb`` colours, worked out here from the spec."""

    def luminance(colour: str) -> float:
        channels = []
        for i in (1, 3, 5):
            c = int(colour[i : i + 2], 16) / 255
            channels.append(c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4)
        red, green, blue = channels
        return 0.2126 * red + 0.7152 * green + 0.0722 * blue

    high, low = sorted((luminance(one), luminance(two)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_risk_badges_take_the_figures_colours_and_their_text_stays_readable(
    tree: Path, store: Path
) -> None:
    from hygiene_nb.notebook.ui import Annotator

    api.scan_root(tree, store=store)
    for risk, colour in figures.RISK_COLORS.items():
        ink = figures.RISK_INK[risk]
        assert wcag_contrast(ink, colour) >= 4.5, (risk, colour, ink)
    assert wcag_contrast(figures.RISK_INK["unknown"], figures.RISK_COLORS["unknown"]) >= 4.5
    # the headline's badges: one rule per risk, in the figures' colours (no colour of its own)
    page = hl.headline_html(hl.headline(str(tree), store=store))
    rules = {
        r: (bg, ink)
        for r, bg, ink in re.findall(
            r"\.hnb-risk-(\w+)\{background:(#[0-9a-f]{6});color:(#[0-9a-f]{6})", page
        )
    }
    assert {r: bg for r, (bg, _) in rules.items()} == {
        r: c for r, c in figures.RISK_COLORS.items() if r
    }
    assert all(wcag_contrast(bg, ink) >= 4.5 for bg, ink in rules.values())
    used = set(re.findall(r'class="hnb-risk-(\w+)"', page))
    assert used and used <= set(rules)
    colours = set(re.findall(r"#[0-9a-fA-F]{6}", page.split("</style>")[0]))
    others = colours - {c for pair in rules.values() for c in pair}
    hued = [c for c in others if len({c[1:3], c[3:5], c[5:7]}) > 1]
    assert hued == []  # every other colour of the headline's style is a grey: no risk of its own
    # the widget's rows: a grey "unknown" badge with dark text
    panel = Annotator(str(tree), store=store)
    badges = [
        re.search(r"background:(#[0-9a-f]{6});color:(#[0-9a-f]{6})", r.info.value)
        for r in panel.rows
    ]
    found = {(b.group(1), b.group(2)) for b in badges if b}
    assert (figures.RISK_COLORS["unknown"], figures.RISK_INK["unknown"]) in found
    assert all(wcag_contrast(bg, ink) >= 4.5 for bg, ink in found)


def _shown(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """What the sections display, in order (IPython's display, as the notebook calls it)."""
    import IPython.display

    shown: list[Any] = []
    monkeypatch.setattr(IPython.display, "display", lambda *objs, **_kw: shown.extend(objs))
    return shown


def test_the_review_lists_the_largest_decisions_of_each_kind_and_counts_the_rest(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "many"
    sizes = {f"d/f{i:03}.bin": 1000 + 37 * i for i in range(130)}
    for relative, size in sizes.items():
        write(root / relative, size)
    api.scan_root(root, store=store)
    names = sorted(sizes)
    deletes, unsures = names[:120], names[120:]
    api.annotate([str(root / n) for n in deletes], store=store, decision="delete")
    api.annotate([str(root / n) for n in unsures], store=store, decision="unsure")
    shown = _shown(monkeypatch)
    info = views.resolve_scan(str(root), store=store)
    sections.review(str(root), store=store, scan_id=info.scan_id)
    (page,) = [o.data for o in shown if type(o).__name__ == "HTML"]
    listed = [text_of(cells[0]) for cells in rows(page)]
    by_size = sorted(deletes, key=lambda n: -(root / n).lstat().st_size)
    assert listed == by_size[: sections.REPORT_ROWS] + sorted(
        unsures, key=lambda n: -(root / n).lstat().st_size
    )
    rest = by_size[sections.REPORT_ROWS :]
    said = " ".join(str(o.data) for o in shown if type(o).__name__ == "Markdown")
    rest_bytes = sum((root / n).lstat().st_size for n in rest)
    assert f"{len(rest)} more decisions ({len(rest)} delete; {fmt.human_bytes(rest_bytes)})" in said
    every = views.pending_decisions(str(root), store=store)
    assert len(every) == 130  # the view keeps all
    # when each was decided reads as a date and time, not the ledger's ISO text
    first = str(every.set_index("path").loc[str(root / listed[0]), "at"])
    said_at = fmt.human_datetime(pd.Timestamp(first)) + " UTC"
    assert text_of(rows(page)[0][3]) == said_at
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", said_at)


def test_the_tidy_suggestions_list_the_first_ones_and_say_how_many_there_are(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "logs-everywhere"
    logs = [f"run-{i:03}.log" for i in range(sections.REPORT_ROWS + 12)]
    for name in logs:
        write(root / name, 200)
    write(root / "pyproject.toml", 30)
    info = api.scan_root(root, store=store)
    shown = _shown(monkeypatch)
    sections.tidy_suggestions(str(root), store=store, scan_id=info.scan_id)
    (page,) = [o.data for o in shown if type(o).__name__ == "HTML"]
    assert len(rows(page)) == sections.REPORT_ROWS
    every = suggest.organization_suggestions(str(root), store=store)
    assert sorted(Path(p).name for p in every["path"]) == logs
    said = " ".join(str(o.data) for o in shown if type(o).__name__ == "Markdown")
    assert f"the first {sections.REPORT_ROWS} of {len(logs)} suggestions" in said
