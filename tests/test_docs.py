"""The README tells the truth: its first commands are the two set-up commands, and every CLI
command it should mention is there."""

from __future__ import annotations

import re
from pathlib import Path

from hygiene_nb.cli import cli

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_opens_with_make_audit_and_make_test() -> None:
    first_block = re.search(r"```(?:sh|bash|console)?\n(.*?)```", README.read_text(), re.S)
    assert first_block is not None
    commands = [line.strip() for line in first_block.group(1).splitlines() if line.strip()]
    assert commands == ["make audit", "make test"]


def test_every_cli_command_appears_in_the_readme() -> None:
    text = README.read_text()
    for name in cli.commands:
        assert f"hygiene-nb {name}" in text, name


def test_rules_doc_holds_the_builtin_rule_table() -> None:
    from hygiene_nb.protect import ALL_PROTECTIONS
    from hygiene_nb.rules import rules_table_markdown

    doc = (README.parent / "docs" / "rules.md").read_text()
    assert rules_table_markdown() in doc, "regenerate the table in docs/rules.md"
    for protection in ALL_PROTECTIONS:
        assert f"| `{protection.rule}` | {protection.claim} |" in doc


def test_the_format_doc_describes_every_snapshot_column_and_the_current_version() -> None:
    from hygiene_nb.plan import _CANDIDATE_KEYS
    from hygiene_nb.snapshot import FORMAT_VERSION, SNAPSHOT_SCHEMA, ScanInfo

    doc = (README.parent / "docs" / "format.md").read_text()
    table = {cell.strip("` ") for line in doc.splitlines() if line.startswith("| `")
             for cell in line.split("|")[1].split(",")}  # fmt: skip
    assert set(SNAPSHOT_SCHEMA.names) <= table
    assert f"Format version **{FORMAT_VERSION}**" in doc
    for key in ScanInfo.__dataclass_fields__:
        if key != "path":  # derived on load, not recorded
            assert f"`{key}`" in doc, key
    for key in _CANDIDATE_KEYS:
        assert f"`{key}`" in doc, key


def test_the_readme_links_the_format_doc() -> None:
    assert "docs/format.md" in README.read_text()
