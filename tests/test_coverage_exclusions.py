"""Every line kept out of the coverage count says why, and docs/testing.md lists them all.

`make test` fails below the coverage floors (the Makefile's SAFETY_FLOOR and PACKAGE_FLOOR).
A line may be left out of the count only with ``# pragma: no cover -- <reason>`` (or
``no branch``) on it; this test finds each one, checks that it carries a reason and that the
table in docs/testing.md is the one built here, so an exclusion cannot be added unseen.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "hygiene_nb"
DOC = ROOT / "docs" / "testing.md"

_PRAGMA = re.compile(r"pragma:\s*no\s*(cover|branch)", re.IGNORECASE)
_WITH_REASON = re.compile(r"#\s*pragma: no (cover|branch) -- (\S.*\S)$")
_BEGIN = "<!-- exclusions: built by tests/test_coverage_exclusions.py -->"
_END = "<!-- end of exclusions -->"


def _enclosing(tree: ast.Module, line: int) -> str:
    """The dotted name of the innermost function or class holding ``line``."""
    best: list[str] = []

    def visit(node: ast.AST, names: list[str]) -> None:
        nonlocal best
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                end = child.end_lineno or child.lineno
                if child.lineno <= line <= end:
                    best = [*names, child.name]
                    visit(child, best)
                    return
            elif hasattr(child, "body"):
                visit(child, names)

    visit(tree, [])
    return ".".join(best) or "(module)"


def exclusions() -> list[tuple[str, str, str, str]]:
    """(module path, enclosing name, cover|branch, reason) for every pragma, in file order.

    A pragma without a reason in the required form gives the reason ``""``.
    """
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        text = path.read_text()
        tree = ast.parse(text)
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type != tokenize.COMMENT or not _PRAGMA.search(tok.string):
                continue
            match = _WITH_REASON.search(tok.string)
            kind = match.group(1) if match else "?"
            reason = match.group(2) if match else ""
            where = f"{path.relative_to(ROOT)}:{tok.start[0]}"
            found.append((where, _enclosing(tree, tok.start[0]), kind, reason))
    return found


def exclusions_markdown() -> str:
    rows = [
        "| module | in | excluded | why |",
        "|---|---|---|---|",
        *(
            f"| `{where.split(':')[0]}` | `{name}` | {kind} | {reason} |"
            for where, name, kind, reason in exclusions()
        ),
    ]
    return "\n".join([_BEGIN, *rows, _END])


def test_every_exclusion_says_why() -> None:
    bare = [where for where, _, _, reason in exclusions() if not reason]
    assert not bare, f"write '# pragma: no cover -- <reason>' at {bare}"


def test_the_docs_list_every_exclusion() -> None:
    doc = DOC.read_text()
    assert _BEGIN in doc and _END in doc
    shown = doc[doc.index(_BEGIN) : doc.index(_END) + len(_END)]
    assert shown == exclusions_markdown(), (
        "regenerate the table in docs/testing.md:\n" + exclusions_markdown()
    )


def test_the_reason_form_is_enforced() -> None:
    """The pattern the two tests above rely on tells a reasoned pragma from a bare one."""
    assert _WITH_REASON.search("x  # pragma: no cover -- the kernel never says EINTR here")
    assert _WITH_REASON.search("x  # pragma: no branch -- both arms return")
    assert not _WITH_REASON.search("x  # pragma: no cover")
    assert not _WITH_REASON.search("x  # pragma: no cover - one dash")
    tree = ast.parse("class A:\n    def f(self):\n        return 1\n\ndef g():\n    pass\n")
    assert _enclosing(tree, 3) == "A.f"
    assert _enclosing(tree, 6) == "g"
    assert _enclosing(tree, 4) == "(module)"


if __name__ == "__main__":  # python tests/test_coverage_exclusions.py: rewrite the table
    doc = DOC.read_text()
    start, end = doc.index(_BEGIN), doc.index(_END) + len(_END)
    DOC.write_text(doc[:start] + exclusions_markdown() + doc[end:])
