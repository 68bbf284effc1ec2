"""`hygiene-nb report --fleet DEST`: the fleet notebook as offline HTML, on a real fleet.

The fleet is three hosts' real trees, each root scanned twice and published by the CLI
(``tests.helpers.published_fleet``); the figures expected in the report are what du said.
"""

from __future__ import annotations

import html as htmllib
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import fleet as fleet_questions
from hygiene_nb.cli import main
from hygiene_nb.formatting import human_bytes, signed_bytes
from hygiene_nb.notebook import fleet
from tests.helpers import FleetHost, hnb, published_fleet, write

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[FleetHost]]:
    return published_fleet(tmp_path_factory.mktemp("fleet"))


def run(capsys: pytest.CaptureFixture[str], *args: str | Path) -> tuple[int, dict[str, Any]]:
    """The CLI's exit code and JSON object (in this process), whatever the code."""
    with pytest.raises(SystemExit) as done:
        main([*map(str, args), "--json"])
    return int(done.value.code or 0), json.loads(capsys.readouterr().out)


def figures_in(page: str) -> dict[str, list[dict[str, Any]]]:
    """Every ``Plotly.newPlot`` of the page: its div id and its traces."""
    decoder = json.JSONDecoder()
    found = {}
    for match in re.finditer(r'Plotly\.newPlot\(\s*"([^"]+)",\s*', page):
        traces, _ = decoder.raw_decode(page, match.end())
        found[match.group(1)] = traces
    return found


def drawn(trace: dict[str, Any]) -> bool:
    """Whether a trace has a value above zero to draw (plotly may pack numbers as base64)."""
    for axis in ("x", "y"):
        values = trace.get(axis)
        if isinstance(values, dict):  # {"dtype": …, "bdata": …}
            return bool(values.get("bdata"))
        if isinstance(values, list) and any(isinstance(v, int | float) and v > 0 for v in values):
            return True
    return False


def card(page: str, title: str) -> str:
    """The text of one headline card."""
    match = re.search(rf"<h3>{re.escape(title)}</h3>(.*?)</div>\s*</div>|<h3>{title}</h3>(.*?)"
                      r'<div class="hnb-card">', page, re.S)  # fmt: skip
    assert match, title
    return re.sub(r"<[^>]+>", " ", match.group(0))


def test_the_fleet_dataset_agrees_with_du(published: tuple[Path, list[FleetHost]]) -> None:
    dest, hosts = published
    summary = fleet_questions.summary(str(dest))
    by_root = dict(zip(summary["root"], summary["alloc"], strict=True))
    for host in hosts:
        for root, size in host.du[-1].items():
            assert by_root[root] == size, root
    view = fleet.load(str(dest))
    sizes = fleet.host_sizes(view.history)
    for host in hosts:  # every root of a host at its latest scan, summed
        assert sizes[host.name][-1][1] == host.latest
        assert len(sizes[host.name]) == 2 * len(host.roots)


def test_the_fleet_report_shows_every_host_in_human_units_with_every_chart_drawn(
    published: tuple[Path, list[FleetHost]], tmp_path: Path
) -> None:
    dest, hosts = published
    doc = hnb("report", "--fleet", dest, "--out", tmp_path / "reports")
    assert doc["status"] == "done" and doc["hosts"] == len(hosts)
    assert doc["scans"] == sum(2 * len(h.roots) for h in hosts)
    page = Path(doc["html"]).read_text()
    assert Path(doc["html"]).parent.parent == tmp_path / "reports" / "fleet"

    for host in hosts:
        assert f"<h3>{host.name}</h3>" in page
        for root, size in host.du[-1].items():
            assert human_bytes(size) in page, (host.name, root)
            assert htmllib.escape(f"hygiene-nb plan {root}") in page
            assert htmllib.escape(f"hygiene-nb report {root} --out reports") in page
    total = card(page, "Total size")
    assert human_bytes(sum(h.latest for h in hosts)) in total
    grew = max(hosts, key=lambda h: h.growth)
    most = card(page, "Grew most")
    assert grew.name in most and signed_bytes(grew.growth) in most
    assert "-" in signed_bytes(min(h.growth for h in hosts))  # one host shrank: it is no winner
    assert signed_bytes(min(h.growth for h in hosts)) in page

    assert page.count("* plotly.js v") == 1  # inlined once
    assert not re.search(r"<script[^>]+src=", page)  # nothing fetched
    charts = figures_in(page)
    assert sorted(charts) == sorted(f"hnb-{i}" for i in fleet.FLEET_FIGURE_IDS)
    for fig_id, traces in charts.items():
        assert traces and any(drawn(t) for t in traces), fig_id
    for word in ("<NA>", "nan B", ">None<", "Traceback", "or_demo_fleet"):
        assert word not in page, word


def test_two_fleet_reports_of_the_same_fleet_are_byte_identical(
    published: tuple[Path, list[FleetHost]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    dest, _ = published
    first = hnb("report", "--fleet", dest, "--out", tmp_path / "a")
    code, again = run(capsys, "report", "--fleet", dest, "--out", tmp_path / "b")  # in process
    assert code == 0 and again["status"] == "done"
    assert Path(first["html"]).name == Path(again["html"]).name == f"{first['newest_scan']}.html"
    assert Path(first["html"]).read_bytes() == Path(again["html"]).read_bytes()


def test_a_fleet_of_one_redacted_scan_says_so_and_draws_no_empty_chart(tmp_path: Path) -> None:
    root = tmp_path / "root"
    write(root / "a" / "file.bin", 50_000)
    scan = hnb("scan", root, "--store", tmp_path / "store", home=tmp_path / "home")
    hnb("publish", tmp_path / "fleet", root, "--snapshot", scan["scan_id"], "--host", "lone",
        "--store", tmp_path / "store", "--redact", home=tmp_path / "home")  # fmt: skip
    doc = hnb("report", "--fleet", tmp_path / "fleet", "--out", tmp_path / "reports")
    page = Path(doc["html"]).read_text()
    charts = figures_in(page)
    assert sorted(charts) == ["hnb-fleet-size"]  # history, growth, stale and owners: sentences
    assert all(drawn(t) for t in charts["hnb-fleet-size"])
    assert "Every host has one scan so far" in page
    assert "No directory grew" in page
    assert "No owner to show" in page
    assert "Nothing on any host has gone unmodified for a year" in page
    assert "<h3>lone</h3>" in page and page.count("* plotly.js v") == 1


@pytest.mark.parametrize(
    ("args", "code"),
    [
        ([], "bad-usage"),  # neither ROOT nor --fleet
        (["ROOT", "--fleet", "DEST"], "bad-usage"),  # both
        (["--fleet", "DEST", "--snapshot", "s1"], "bad-usage"),
        (["--fleet", "DEST", "--redact"], "bad-usage"),
        (["--fleet", "DEST", "--store", "DEST"], "bad-usage"),  # the report reads DEST only
        (["ROOT", "--engine", "spark"], "bad-usage"),  # --engine is for a fleet
        (["--fleet", "NOT_A_FLEET"], "not-a-fleet-dataset"),
    ],
)
def test_report_says_what_to_give_when_root_and_fleet_are_wrong(
    args: list[str], code: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "plain").mkdir()
    (tmp_path / "dest").mkdir()
    subst = {
        "ROOT": str(tmp_path),
        "DEST": str(tmp_path / "dest"),
        "NOT_A_FLEET": str(tmp_path / "plain"),
    }
    rc, doc = run(capsys, "report", *[subst.get(a, a) for a in args], "--out", tmp_path / "reports")
    assert rc == 2 and doc["error"]["code"] == code, doc
    assert not (tmp_path / "reports").exists() or not any((tmp_path / "reports").rglob("*.html"))
    assert os.listdir(tmp_path / "plain") == []  # nothing was written into it


def test_a_directory_growing_only_through_one_below_it_is_named_by_the_deeper_one() -> None:
    import pandas as pd

    rows = [
        ("h", "/r", "/r/.cache", 300),
        ("h", "/r", "/r/.cache/pip", 300),
        ("h", "/r", "/r/projects", 200),  # grew through two places: itself, then each
        ("h", "/r", "/r/projects/a", 120),
        ("h", "/r", "/r/projects/b", 80),
        ("g", "/r", "/r/.cache", 300),  # another host's same path is its own place
    ]
    frame = pd.DataFrame(rows, columns=["host", "root", "path", "growth"])
    assert list(fleet.distinct_dirs(frame.iloc[0:0]).columns) == list(frame.columns)
    kept = fleet.distinct_dirs(frame)
    assert list(zip(kept["host"], kept["path"], strict=True)) == [
        ("h", "/r/.cache/pip"),
        ("h", "/r/projects"),
        ("h", "/r/projects/a"),
        ("h", "/r/projects/b"),
        ("g", "/r/.cache"),
    ]


def test_a_fleet_report_read_with_spark_shows_what_duckdb_reads(
    published: tuple[Path, list[FleetHost]], tmp_path: Path
) -> None:
    dest, _ = published
    duck = hnb("report", "--fleet", dest, "--out", tmp_path / "duck")
    spark = hnb("report", "--fleet", dest, "--engine", "spark", "--out", tmp_path / "spark")
    read = Path(spark["html"]).read_text()
    assert "read with spark" in read
    assert 'data-mime-type="application/vnd.jupyter.stderr"' not in read  # no JVM logging
    assert read.replace("read with spark", "read with duckdb") == Path(duck["html"]).read_text()


class Shown:
    """What the notebook's cells display, collected in this process (no kernel)."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def display(self, *objs: Any, **_: Any) -> None:
        self.items.extend(objs)

    def figures(self) -> list[str]:
        return [
            str(i["application/vnd.plotly.v1+json"]["layout"]["meta"]["id"])
            for i in self.items
            if isinstance(i, dict) and "application/vnd.plotly.v1+json" in i
        ]

    def text(self) -> str:
        return "\n".join(
            str(getattr(i, "data", "")) if not isinstance(i, dict) else str(i.get("text/html"))
            for i in self.items
        )


SECTIONS = (
    fleet.show_headline,
    fleet.show_latest,
    fleet.show_size,
    fleet.show_history,
    fleet.show_top_dirs,
    fleet.show_stale,
    fleet.show_owners,
    fleet.show_hosts,
    fleet.show_skipped,
)


@pytest.fixture
def shown(monkeypatch: pytest.MonkeyPatch) -> Shown:
    import IPython.display

    collected = Shown()
    monkeypatch.setattr(IPython.display, "display", collected.display)
    return collected


def test_every_section_draws_its_chart_from_the_fleet(
    published: tuple[Path, list[FleetHost]], shown: Shown
) -> None:
    dest, hosts = published
    view = fleet.load(str(dest))
    for section in SECTIONS:
        section(view)
    assert sorted(shown.figures()) == sorted(fleet.FLEET_FIGURE_IDS)
    said = shown.text()
    for host in hosts:
        assert f"<h3>{host.name}</h3>" in said
        assert human_bytes(host.latest) in said or len(host.roots) > 1
    assert f"Every published partition was read ({len(view.history)} scans)." in said


def test_an_empty_fleet_is_sentences_and_no_chart(
    published: tuple[Path, list[FleetHost]], shown: Shown
) -> None:
    import dataclasses

    from hygiene_nb.fleet.reader import Skipped

    dest, _ = published
    full = fleet.load(str(dest))
    frames = {
        f.name: getattr(full, f.name).iloc[0:0]
        for f in dataclasses.fields(full)
        if f.name not in ("dest", "engine", "scans", "skipped")
    }
    broken = Skipped("partition-incomplete", "host=x/root=y/scan=z", "no completion marker")
    empty = dataclasses.replace(full, scans=0, skipped=[broken], **frames)
    for section in SECTIONS:
        section(empty)
    assert shown.figures() == []
    said = shown.text()
    assert said.count(fleet.NO_SCANS) >= 7  # every section says it, the headline among them
    assert "partition-incomplete" in said and "host=x/root=y/scan=z" in said
