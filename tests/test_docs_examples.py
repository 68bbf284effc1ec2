"""The docs' command examples run, and print what the docs show.

The convention (docs/commands.md, "Examples on these pages", says it for writers):

- A ```` ```console ```` block in README.md or docs/*.md is runnable; ```` ```sh ```` and other
  blocks are not.
- A line starting with ``$ `` is a command (a trailing ``\\`` continues it on the next line);
  the lines after it, up to the next command or the end of the block, are an excerpt of what
  it prints (stdout and stderr together).
- The excerpt must appear in the output as consecutive lines, compared after trailing blanks
  are dropped. A line ``...`` stands for any number of lines, and ``...`` inside a line for any
  text (an id, a time, free space: what changes from run to run).
- A command exits 0 unless it ends with a comment ``# exit N``.
- Each page runs as one bash script, its blocks in order, in a fresh directory that is also
  ``$HOME`` (shown as ``~`` in the output), with the ``hygiene-nb`` of this checkout first on
  ``PATH`` and no store set: ``cd`` and ``export`` carry over from one command to the next.
"""

from __future__ import annotations

import functools
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from hygiene_nb.cli import cli

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_EXIT = re.compile(r"#\s*exit (\d+)\s*$")


@dataclass(frozen=True)
class Example:
    """One ``$ `` command of a page, where it is, and what the page says it does."""

    page: str
    line: int
    command: str
    shown: tuple[str, ...]

    @property
    def exit_code(self) -> int:
        found = _EXIT.search(self.command)
        return int(found.group(1)) if found else 0


def examples(text: str, page: str = "page") -> list[Example]:
    """Every command of the page's ```` ```console ```` blocks, in order."""
    found: list[Example] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        i += 1
        while i < len(lines) and lines[i].strip() != "```":
            if not lines[i].startswith("$ "):
                i += 1  # output before any command: nothing to check it against
                continue
            start, command = i + 1, lines[i][2:]
            while command.endswith("\\") and i + 1 < len(lines):
                i += 1
                command = command[:-1] + " " + lines[i].strip()
            shown: list[str] = []
            i += 1
            while i < len(lines) and lines[i].strip() != "```" and not lines[i].startswith("$ "):
                shown.append(lines[i].rstrip())
                i += 1
            while shown and not shown[-1]:
                shown.pop()
            found.append(Example(page, start, command, tuple(shown)))
        i += 1
    return found


def _line_matches(shown: str, printed: str) -> bool:
    if "..." not in shown:
        return shown == printed
    pattern = ".*?".join(re.escape(part) for part in shown.split("..."))
    return re.fullmatch(pattern, printed) is not None


def shows(shown: tuple[str, ...], printed: list[str]) -> bool:
    """Whether the excerpt ``shown`` appears in ``printed`` (the convention above)."""

    @functools.cache
    def match(s: int, p: int) -> bool:
        if s == len(shown):
            return True
        if shown[s] == "...":
            return any(match(s + 1, q) for q in range(p, len(printed) + 1))
        return p < len(printed) and _line_matches(shown[s], printed[p]) and match(s + 1, p + 1)

    return any(match(0, start) for start in range(len(printed) + 1))


@dataclass(frozen=True)
class Outcome:
    example: Example
    exit_code: int
    printed: list[str]

    def problem(self) -> str | None:
        """What is wrong with this example's run, or None."""
        ex = self.example
        if self.exit_code == ex.exit_code and shows(ex.shown, self.printed):
            return None
        return (
            f"{ex.page}:{ex.line}: $ {ex.command}\n"
            f"  exit {self.exit_code} (the page says {ex.exit_code})\n"
            "  the page shows:\n" + "".join(f"    | {s}\n" for s in ex.shown)
            + "  it printed:\n" + "".join(f"    | {p}\n" for p in self.printed)
        )  # fmt: skip


def run_page(found: list[Example], home: Path, *, timeout: float = 600) -> list[Outcome]:
    """Run a page's commands as one bash script in ``home``; each one's exit code and output."""
    out = home / ".docs-examples"
    out.mkdir(parents=True)
    script = ["set +e", f"cd {shlex.quote(str(home))}"]
    for n, ex in enumerate(found):
        target = shlex.quote(str(out / str(n)))
        script.append(f"{{\n{ex.command}\n}} > {target} 2>&1 < /dev/null; echo $? > {target}.rc")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HYGIENE_NB_", "XDG_"))}
    env |= {
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        "COLUMNS": "100",
    }
    subprocess.run(
        ["bash", "-c", "\n".join(script)],
        env=env,
        cwd=home,
        timeout=timeout,
        check=True,
        stdin=subprocess.DEVNULL,
    )
    outcomes = []
    for n, ex in enumerate(found):
        text = (out / str(n)).read_text(errors="replace").replace(str(home), "~")
        code = int((out / f"{n}.rc").read_text())
        outcomes.append(Outcome(ex, code, [line.rstrip() for line in text.splitlines()]))
    return outcomes


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "docs-home"
    home.mkdir()
    return home


RUNNABLE = [page for page in PAGES if examples(page.read_text())]


@pytest.mark.slow
@pytest.mark.parametrize("page", RUNNABLE, ids=lambda p: str(p.relative_to(REPO)))
def test_the_examples_of_each_page_run_as_shown(page: Path, tmp_path: Path) -> None:
    found = examples(page.read_text(), str(page.relative_to(REPO)))
    problems = [o.problem() for o in run_page(found, _home(tmp_path))]
    assert [p for p in problems if p] == []


def test_every_command_has_a_runnable_example() -> None:
    run = [ex.command for page in PAGES for ex in examples(page.read_text())]
    for name in cli.commands:
        assert any(re.search(rf"\bhygiene-nb {name}\b", c) for c in run), name


def test_the_readme_tour_is_runnable() -> None:
    tour = examples((REPO / "README.md").read_text())
    assert len(tour) >= 5
    assert all(ex.shown for ex in tour if ex.command.startswith("hygiene-nb summary"))


def test_the_convention_parses_commands_output_and_exit_codes() -> None:
    page = "\n".join(
        [
            "```sh",
            "$ not run",
            "```",
            "```console",
            "$ echo one \\",
            "  two",
            "one two",
            "$ false  # exit 1",
            "```",
        ]
    )
    found = examples(page)
    assert [(e.command, e.shown, e.exit_code) for e in found] == [
        ("echo one  two", ("one two",), 0),
        ("false  # exit 1", (), 1),
    ]


def test_the_comparison_is_tolerant_only_where_the_page_says_so() -> None:
    printed = ["scanned ~/x: 58 entries in 0.0 s", "  4.4 MiB apparent", "  snapshot s1-ab", "end"]
    assert shows(("scanned ~/x: 58 entries in ... s", "  4.4 MiB apparent"), printed)
    assert shows(("  4.4 MiB apparent", "...", "end"), printed)
    assert shows((), printed)
    assert not shows(("scanned ~/x: 59 entries in ... s",), printed)  # a number that is wrong
    assert not shows(("  4.4 MiB apparent", "end"), printed)  # lines left out without `...`
    assert not shows(("end", "scanned ~/x: 58 entries in 0.0 s"), printed)  # out of order


def test_a_renamed_command_or_changed_output_fails_its_example(tmp_path: Path) -> None:
    page = "\n".join(
        [
            "```console",
            "$ hygiene-nb snapshots",
            "...o snapshots yet: run `hygiene-nb scan ROOT`.",
            "$ hygiene-nb snapshot",  # no such command: the CLI has `snapshots`
            "$ hygiene-nb snapshots",
            "2 snapshots",  # not what it prints
            "$ hygiene-nb snapshot  # exit 2",
            "```",
        ]
    )
    outcomes = run_page(examples(page), _home(tmp_path))
    assert [o.problem() is None for o in outcomes] == [True, False, False, True]
