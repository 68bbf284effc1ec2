"""The docs tell the truth: the README opens with the two set-up commands and stays a newcomer's
page, docs/commands.md names every command and option, the rules and format pages match the
code, and every link points at a file and heading of this repository."""

from __future__ import annotations

import re
from pathlib import Path

import click

from hygiene_nb.cli import cli

README = Path(__file__).resolve().parent.parent / "README.md"
DOCS = README.parent / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md")), README.parent / "bench" / "README.md"]


def test_readme_opens_with_make_audit_and_make_test() -> None:
    text = README.read_text()
    first_block = re.search(r"```(?:sh|bash|console)?\n(.*?)```", text, re.S)
    assert first_block is not None
    assert text[: first_block.start()].strip() == "# hygiene-nb"  # the title, then the commands
    commands = [line.strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["make audit", "make test"]


def test_the_readme_stays_a_newcomers_page() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 150, "the reference goes in docs/, the README links it"
    for image in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text):
        path = README.parent / image
        assert path.suffix == ".png" and 0 < path.stat().st_size < 300_000, image
    for page in sorted(DOCS.glob("*.md")):
        assert f"docs/{page.name}" in text, f"the README links {page.name}"


def _commands(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
    found = []
    for name, command in group.commands.items():
        found.append((f"{prefix} {name}", command))
        if isinstance(command, click.Group):
            found += _commands(command, f"{prefix} {name}")
    return found


def test_the_commands_page_names_every_command_and_option() -> None:
    text = (DOCS / "commands.md").read_text()
    for path, command in _commands(cli, "hygiene-nb"):
        top, *rest = path.split(" ", 2)[1:]
        assert f"hygiene-nb {top}" in text, path
        assert all(word in text for word in rest), path
        for param in command.params:
            if isinstance(param, click.Option):
                longest = max(param.opts, key=len)
                assert longest in text, f"{path} {longest}"
                for short in (o for o in param.opts if not o.startswith("--")):
                    assert re.search(rf"`{short}/{longest}`|{short}/{longest}", text), short


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """The anchor GitHub gives a Markdown heading."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {_anchor(m) for m in re.findall(r"^#+ (.+)$", text, re.M)}


def test_every_link_points_inside_the_repository_at_something_there() -> None:
    for page in PAGES:
        for target in _LINK.findall(page.read_text()):
            assert not re.match(r"[a-z]+:", target), f"{page.name}: {target} is outside the repo"
            file, _, anchor = target.partition("#")
            linked = (page.parent / file).resolve() if file else page
            assert linked.exists(), f"{page.name}: {target}"
            if anchor:
                assert anchor in _anchors(linked), f"{page.name}: {target}"


def test_the_docs_describe_the_product_not_its_making() -> None:
    for page in PAGES:
        text = page.read_text().lower()
        for phrase in ("this release", "previously", "session", "seed 0", "contract §"):
            assert phrase not in text, f"{page.name}: {phrase!r}"


def test_rules_doc_holds_the_builtin_rule_table() -> None:
    from hygiene_nb.classify.protect import ALL_PROTECTIONS
    from hygiene_nb.classify.rules import rules_table_markdown

    doc = (DOCS / "rules.md").read_text()
    assert rules_table_markdown() in doc, "regenerate the table in docs/rules.md"
    for protection in ALL_PROTECTIONS:
        assert f"| `{protection.rule}` | {protection.claim} |" in doc


def test_breakdowns_doc_lists_every_category_with_every_extension() -> None:
    from hygiene_nb.classify.filetypes import CATEGORIES
    from hygiene_nb.query.breakdowns import AGE_BUCKETS

    doc = (DOCS / "breakdowns.md").read_text()
    rows = {
        cells[1].strip(): cells[2]
        for line in doc.splitlines()
        if line.startswith("| ") and len(cells := line.split("|")) == 4
    }
    for category, extensions in CATEGORIES.items():
        assert category in rows, f"docs/breakdowns.md has no row for {category!r}"
        listed = re.findall(r"`([^`]+)`", rows[category])
        assert listed == list(extensions), f"regenerate the {category!r} row of the table"
    assert "other" in rows
    for label in AGE_BUCKETS:
        assert f"`{label}`" in doc, label


def test_the_format_doc_describes_every_snapshot_column_and_the_current_version() -> None:
    from hygiene_nb.plan.document import _CANDIDATE_KEYS
    from hygiene_nb.scan.index import ScanInfo
    from hygiene_nb.scan.snapshot import FORMAT_VERSION, SNAPSHOT_SCHEMA

    doc = (DOCS / "format.md").read_text()
    table = {
        cell.strip("` ")
        for line in doc.splitlines()
        if line.startswith("| `")
        for cell in line.split("|")[1].split(",")
    }
    assert set(SNAPSHOT_SCHEMA.names) <= table
    assert f"Format version **{FORMAT_VERSION}**" in doc
    for key in ScanInfo.__dataclass_fields__:
        if key != "path":  # derived on load, not recorded
            assert f"`{key}`" in doc, key
    for key in _CANDIDATE_KEYS:
        assert f"`{key}`" in doc, key


def test_the_format_doc_lists_every_file_of_a_store(tmp_path: Path) -> None:
    from hygiene_nb.notebook.demo import make_demo_store

    demo = make_demo_store(tmp_path / "tree", tmp_path / "store", scans=1)
    doc = (DOCS / "format.md").read_text()
    for child in demo.store.iterdir():
        name = child.name + ("/" if child.is_dir() else "")
        assert f"`{name}`" in doc or f"`{child.name}" in doc, name


# Documents outside the repository that comments once cited; what they said is in docs/.
_OUTSIDE = re.compile(r"CONTRACT|SAFETY\b|\bseed 0\d\d\b|seeds/|/work/shared|shared/[A-Z]")


def test_comments_cite_nothing_outside_the_repository() -> None:
    repo = README.parent
    sources = [
        p
        for d in ("hygiene_nb", "tests", "bench", "notebooks")
        for p in (repo / d).rglob("*")
        if p.suffix in {".py", ".ipynb", ".toml", ".cfg", ".c"}
    ]
    sources += [repo / "Makefile", repo / "pyproject.toml"]
    found = {
        f"{path.relative_to(repo)}:{n}"
        for path in sources
        if path != Path(__file__)
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if _OUTSIDE.search(line)
    }
    assert found == set()
