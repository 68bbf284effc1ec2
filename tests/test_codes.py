"""One table of per-item codes: every code the package gives is in it, and the docs show it."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import get_args

from hygiene_nb.codes import ITEM_CODES, codes_markdown

PACKAGE = Path(__file__).resolve().parent.parent / "hygiene_nb"
DOCS = PACKAGE.parent / "docs"

# Where a per-item code is given: the callable's name and the argument that holds the code.
_CODE_ARGUMENT = {
    "of": 1,  # Skip.of(path, code, …) (Exclusion.of is handled below)
    "Skip": 1,
    "crossdev_skip": 1,
    "_exclude": 2,
    "Block": 0,  # a restore refusal (hygiene_nb.executor.restore_outcomes)
    "Blocked": 1,
    "RemovalRefused": 0,
    "Finding": 0,  # the re-check's verdict (hygiene_nb.recheck)
}
_KEBAB = re.compile(r"^[a-z]+(-[a-z]+)*$")


def _constants(tree: ast.Module) -> dict[str, str]:
    return {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in node.targets
        if isinstance(target, ast.Name)
    }  # fmt: skip


def _value(node: ast.expr, consts: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return consts.get(node.id)
    return None


def emitted_codes() -> dict[str, set[str]]:
    """Every code literal the package passes where a per-item code goes, by module."""
    found: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "codes.py":
            continue
        tree = ast.parse(path.read_text())
        consts = _constants(tree)
        here = found.setdefault(str(path.relative_to(PACKAGE)), set())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
                index = _CODE_ARGUMENT.get(name)
                if name == "of" and isinstance(func, ast.Attribute):
                    owner = getattr(func.value, "id", "")
                    index = 2 if owner == "Exclusion" else 1 if owner == "Skip" else None
                if index is not None and len(node.args) > index:
                    value = _value(node.args[index], consts)
                    if value is not None:
                        here.add(value)
                for keyword in node.keywords:  # _Dest(skip=("code", detail))
                    if keyword.arg == "skip" and isinstance(keyword.value, ast.Tuple):
                        value = _value(keyword.value.elts[0], consts)
                        if value is not None:
                            here.add(value)
            if (  # return "code", detail  (a check that hands its verdict to Exclusion.of)
                isinstance(node, ast.Return)
                and isinstance(node.value, ast.Tuple)
                and node.value.elts
            ):
                value = _value(node.value.elts[0], consts)
                if value is not None and "-" in value:  # not a state such as "same"
                    here.add(value)
            if isinstance(node, ast.Dict):  # {"code": …} in receipts, listings, reports
                for key, val in zip(node.keys, node.values, strict=True):
                    if isinstance(key, ast.Constant) and key.value == "code" and val is not None:
                        value = _value(val, consts)
                        if value is not None:
                            here.add(value)
    return {module: codes for module, codes in found.items() if codes}


def test_the_collector_finds_the_codes_it_should() -> None:
    found = set().union(*emitted_codes().values())
    # one of each way a code is given, so the collector cannot silently find nothing
    for known in (
        "changed-since-review",
        "gone",
        "cross-device",
        "target-occupied",
        "removal-interrupted",
        "in-use",
        "contains-mount",
        "changed-since-decision",
    ):
        assert known in found, known


def test_every_code_the_package_gives_is_in_the_one_table() -> None:
    table = {code for _, code in ITEM_CODES}
    missing = {
        module: sorted(c for c in codes if _KEBAB.match(c) and c not in table)
        for module, codes in emitted_codes().items()
    }
    assert {m: c for m, c in missing.items() if c} == {}


def test_the_plan_and_the_executor_draw_their_texts_from_the_table() -> None:
    from hygiene_nb.executor.crossdev import CROSSDEV_HINTS
    from hygiene_nb.executor.guards import SKIP_HINTS
    from hygiene_nb.plan.schema import EXCLUSIONS
    from hygiene_nb.recheck import CheckCode

    rechecked = {c: t for (stage, c), t in ITEM_CODES.items() if stage == "check"}
    assert set(rechecked) == set(get_args(CheckCode))  # the re-check gives exactly these
    for stage, texts in (("plan", EXCLUSIONS), ("execute", SKIP_HINTS)):
        own = {c: t for (where, c), t in ITEM_CODES.items() if where == stage}
        assert texts == {**own, **rechecked}, stage
        assert not own.keys() & rechecked.keys(), f"{stage} restates a re-check code"
    assert CROSSDEV_HINTS.items() <= SKIP_HINTS.items()


def test_docs_codes_holds_the_generated_table_and_the_readme_and_executor_page_link_it() -> None:
    doc = (DOCS / "codes.md").read_text()
    assert codes_markdown() in doc, "regenerate the table in docs/codes.md from codes_markdown()"
    assert "docs/codes.md" in (PACKAGE.parent / "README.md").read_text()
    assert "(codes.md)" in (DOCS / "executor.md").read_text()
