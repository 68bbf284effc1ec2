"""The ``hygiene-nb`` group and what every command shares; ``main`` maps errors to exit codes.

Errors are mapped to exit codes in one place (``main``): HygieneError → its ``exit_code``, bad
usage → 2, anything else → 1. With ``--json`` every outcome is one JSON object on stdout.
The commands live by stage beside this module and are added to the group in the package.
"""

from __future__ import annotations

import logging
import sqlite3
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import click

from hygiene_nb import __version__, render
from hygiene_nb.errors import HygieneError
from hygiene_nb.render import shown

__all__ = [
    "MAX_CELL_SECONDS",
    "MAX_DAYS",
    "MAX_KEEP",
    "MAX_TOP",
    "Finite",
    "cli",
    "common_options",
    "emit",
    "emit_result",
    "main",
]

F = TypeVar("F", bound=Callable[..., Any])

# Every number an option takes is bounded (beyond, values overflow C integers or datetimes).
MAX_TOP = 100_000
MAX_KEEP = 1_000_000
MAX_DAYS = 36_500
MAX_CELL_SECONDS = 7 * 86_400


class Finite(click.FloatRange):
    """A bounded float that is a number: ``nan`` passes every comparison, so it is refused."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        """The number, or a usage error naming the option when it is out of range or NaN."""
        number = super().convert(value, param, ctx)
        if number != number:  # NaN
            self.fail(f"{value!r} is not a number.", param, ctx)
        return number


def common_options(func: F) -> F:
    """``--store`` and ``--json``, which every command takes (docs/commands.md)."""
    func = click.option(
        "--json",
        "as_json",
        is_flag=True,
        help="Print one JSON object on stdout and nothing else.",
    )(func)
    func = click.option(
        "--store",
        type=click.Path(file_okay=False),
        envvar="HYGIENE_NB_STORE",
        help="Store directory [default: $HYGIENE_NB_STORE, else "
        "${XDG_DATA_HOME:-~/.local/share}/hygiene-nb].",
    )(func)
    return func


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, prog_name="hygiene-nb")
def cli() -> None:
    """Audit what uses your disk, what changed, and what is safe to remove.

    \b
    scan ROOT        walk a tree (never following symlinks) into a Parquet snapshot
    snapshots        list the scans in the store (and prune old ones)
    summary ROOT     totals, risk mix, groups, score, largest entries
    annotate PATH…   your decisions (keep / delete / unsure) and notes
    rules …          remember a decision for a whole pattern group
    plan ROOT        export the plan file from your delete decisions
    execute PLAN     dry-run a plan, or move its candidates into quarantine
    verify RECEIPT   check an execution's receipt against the disk
    quarantine list  the quarantine batches
    recover          finish the records of an execution that stopped after moving
    restore BATCH    put quarantined items back (never over anything)
    purge BATCH      destroy a quarantine batch (the only command that does)
    report ROOT      run the audit notebook: an offline HTML report
    suggest ROOT     automatic mode's suggested plan (a suggestion only)
    publish DEST     publish a scan into a fleet dataset (a directory or s3://)
    fleet DEST …     ask a fleet dataset: summary, history, growth, risk, stale, owners

    Only `execute --execute` (into quarantine) and `restore --execute` (back) move files, and
    only `purge --execute` destroys them; nothing else changes a file in a scanned tree.
    """  # noqa: D301 - \b is click's "keep these lines as they are" marker


class _Exit(Exception):
    """A finished command whose exit code is not 0 (4: some items skipped)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class _Result(Protocol):
    """A library result: its ``--json`` object and the exit code it means."""

    @property
    def exit_code(self) -> int: ...

    def to_json(self) -> dict[str, Any]: ...


def emit(as_json: bool, payload: dict[str, Any], text: str) -> None:
    """Print ``payload`` as the one JSON object (with ``--json``), else ``text``."""
    if as_json:
        render.emit_json(payload)
    else:
        click.echo(text)


def emit_result(as_json: bool, result: _Result, text: str) -> None:
    """Print ``result`` (its JSON object, or ``text``), then exit with the code it carries."""
    emit(as_json, result.to_json(), text)
    if result.exit_code:
        raise _Exit(result.exit_code)


def _fail(as_json: bool, status: str, code: str, message: str, exit_code: int) -> int:
    if as_json:
        render.emit_json({"status": status, "error": {"code": code, "message": message}})
    else:
        click.echo(f"hygiene-nb: error [{code}]: {shown(message)}", err=True)
    return exit_code


def main(argv: Sequence[str] | None = None) -> None:
    """Run the command line and exit with the contract's exit code."""
    args = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args
    logging.basicConfig(level=logging.WARNING, format="hygiene-nb: %(message)s")
    try:
        cli.main(args=args, prog_name="hygiene-nb", standalone_mode=False)
        code = 0
    except _Exit as exc:
        code = exc.code
    except HygieneError as exc:
        status = "refused" if exc.exit_code == 3 else "error"
        code = _fail(as_json, status, exc.code, exc.message, exc.exit_code)
    except click.exceptions.Abort:  # click turns Ctrl-C into Abort
        code = _fail(as_json, "error", "interrupted", "interrupted; nothing was changed.", 130)
    except click.ClickException as exc:
        if as_json:
            code = _fail(True, "error", "bad-usage", exc.format_message(), exc.exit_code)
        else:
            exc.show()
            code = exc.exit_code
    except OSError as exc:  # the disk said no where nothing above expected it: say so plainly
        where = f" ({exc.filename!r})" if exc.filename else ""
        code = _fail(
            as_json,
            "error",
            "os-error",
            f"{exc.strerror or exc}{where}; nothing more was done. Check the path and its "
            "permissions, then run the command again.",
            1,
        )
    except sqlite3.Error as exc:  # the ledger maps its own; a foreign one still gets a code
        code = _fail(
            as_json,
            "error",
            "store-unusable",
            f"the store's ledger could not be used ({exc}); check the disk holding the store "
            "(free space, permissions), then run the command again.",
            1,
        )
    except KeyboardInterrupt:
        code = _fail(as_json, "error", "interrupted", "interrupted; nothing was changed.", 130)
    except Exception as exc:  # a query over snapshots that ran out of its memory gets a code
        if "duckdb" not in sys.modules:
            raise
        from hygiene_nb.scan.snapshot import query_memory_error

        known = query_memory_error(exc)
        if known is None:
            raise
        code = _fail(as_json, "error", known.code, known.message, known.exit_code)
    sys.exit(code)
