"""The ``hygiene-nb`` command: parse options, call one library function, render the result.

Errors are mapped to exit codes in one place (``main``): HygieneError → its ``exit_code``, bad
usage → 2, anything else → 1. With ``--json`` every outcome is one JSON object on stdout.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import sys
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

import click

# _process before api: it sets the environment numpy reads when it loads
from hygiene_nb import __version__, _process, api, render  # noqa: F401
from hygiene_nb.errors import HygieneError
from hygiene_nb.render import shown

__all__ = ["cli", "main"]

F = TypeVar("F", bound=Callable[..., Any])

# Every number an option takes is bounded (beyond, values overflow C integers or datetimes).
_MAX_TOP = 100_000
_MAX_KEEP = 1_000_000
_MAX_DAYS = 36_500
_MAX_CELL_SECONDS = 7 * 86_400


class _Finite(click.FloatRange):
    """A bounded float that is a number: ``nan`` passes every comparison, so it is refused."""

    name = "finite float range"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
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

    Only `execute --execute` (into quarantine) and `restore --execute` (back) move files, and
    only `purge --execute` destroys them; nothing else changes a file in a scanned tree.
    """  # noqa: D301 - \b is click's "keep these lines as they are" marker


@cli.command()
@click.argument("root", type=click.Path())
@click.option(
    "--exclude",
    "excludes",
    multiple=True,
    metavar="GLOB",
    help="Skip what matches (gitignore syntax; repeatable). Skipped entries are recorded as "
    "excluded. ROOT/.hygieneignore is read too.",
)
@click.option("--one-file-system", "-x", is_flag=True, help="Do not cross into other filesystems.")
@click.option(
    "--max-entries",
    type=click.IntRange(min=0, max=api.MAX_ENTRIES),
    default=0,
    help="Stop after N entries (0: none).",
)
@click.option(
    "--max-seconds",
    type=_Finite(min=0, max=api.MAX_SECONDS),
    default=0,
    help="Stop listing new directories after S seconds (0: none).",
)
@click.option(
    "--threads", type=click.IntRange(min=0, max=256), default=0, help="Walker threads (0: auto)."
)
@click.option(
    "--walker",
    type=click.Choice(["auto", "c", "python"]),
    default="auto",
    help="The compiled walker, or the pure-Python fallback.",
)
@common_options
def scan(
    root: str,
    excludes: tuple[str, ...],
    one_file_system: bool,
    max_entries: int,
    max_seconds: float,
    threads: int,
    walker: str,
    store: str | None,
    as_json: bool,
) -> None:
    """Scan ROOT into a new snapshot in the store.

    Symlinks are recorded, never followed; fifos, sockets and devices are recorded, never opened.
    Budgets are shared fairly by ROOT's direct children; what a budget or an unreadable
    directory leaves out is marked partial (unknown), never counted as empty.
    """
    info = api.scan_root(
        root,
        store=store,
        excludes=excludes,
        one_file_system=one_file_system,
        max_entries=max_entries,
        max_seconds=max_seconds,
        threads=threads,
        walker=walker,  # type: ignore[arg-type]  # click.Choice guarantees the literal
        progress=not as_json and sys.stderr.isatty(),  # a live line on a terminal only
    )
    _out(as_json, render.scan_json(info), render.render_scan(info))


class _ListByDefault(click.Group):
    """``snapshots [ROOT]`` lists; ``snapshots prune …`` prunes."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args = ["list", *args]
        return super().parse_args(ctx, args)


@cli.group(cls=_ListByDefault)
def snapshots() -> None:
    """List the scans in the store (`snapshots [ROOT]`), or prune old ones.

    `hygiene-nb snapshots [ROOT]` is `hygiene-nb snapshots list [ROOT]`; both take --store
    and --json, as `snapshots prune` does.
    """


@snapshots.command("list")
@click.argument("root", required=False)
@common_options
def snapshots_list(root: str | None, store: str | None, as_json: bool) -> None:
    """List scans, oldest first (only ROOT's if given)."""
    scans = api.list_snapshots(store=store, root=root)
    _out(as_json, render.snapshots_json(scans), render.render_snapshots(scans))


@snapshots.command("prune")
@click.option(
    "--keep",
    type=click.IntRange(min=1, max=_MAX_KEEP),
    help="Keep the N newest scans of each root.",
)
@click.option(
    "--older-than",
    "older_than",
    type=_Finite(min=0, max=_MAX_DAYS),
    metavar="DAYS",
    help="Remove scans older than this.",
)
@click.option("--dry-run", is_flag=True, help="Only say what would be removed.")
@common_options
def snapshots_prune(
    keep: int | None, older_than: float | None, dry_run: bool, store: str | None, as_json: bool
) -> None:
    """Remove old snapshots from the store; the latest of every root always stays.

    This removes hygiene-nb's own snapshot files, never anything in a scanned tree.
    """
    removed = api.prune_snapshots(
        store=store, keep=keep, older_than_days=older_than, dry_run=dry_run
    )
    _out(
        as_json,
        render.prune_json(removed, dry_run=dry_run),
        render.render_prune(removed, dry_run=dry_run),
    )


@cli.command()
@click.argument("root", type=click.Path())
@click.option("--snapshot", "scan_id", metavar="ID", help="A given scan (default: the latest).")
@click.option(
    "--top",
    type=click.IntRange(min=0, max=_MAX_TOP),
    default=20,
    show_default=True,
    help="How many largest entries.",
)
@click.option(
    "--rules",
    type=click.Path(dir_okay=False),
    help="A rules file (TOML) on top of the store's rules.toml.",
)
@common_options
def summary(
    root: str, scan_id: str | None, top: int, rules: str | None, store: str | None, as_json: bool
) -> None:
    """Summarize ROOT's latest snapshot (or --snapshot ID).

    Totals, risk mix, pattern groups, staleness, the cleanliness score and the largest entries.

    Computed from the snapshot: no rescan. Changing rules re-classifies at once.
    """
    result = api.summarize(root, store=store, scan_id=scan_id, top=top, rules=rules)
    _out(as_json, render.summary_json(result), render.render_summary(result))


@cli.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option(
    "--decision",
    type=click.Choice(["keep", "delete", "unsure", "none"]),
    help="Your decision; `none` clears it (the note stays).",
)
@click.option("--note", help="A note; an empty string clears it (the decision stays).")
@common_options
def annotate(
    paths: tuple[str, ...], decision: str | None, note: str | None, store: str | None, as_json: bool
) -> None:
    """Write your decision and/or note on each PATH (relative paths are taken from here).

    Deciding is not deleting: only `hygiene-nb plan` then `hygiene-nb execute` act on `delete`.
    """
    if decision is None and note is None:
        raise click.UsageError("give --decision, --note, or both.")
    result = api.annotate_paths(paths, store=store, decision=decision, note=note)
    _show(as_json, result, render.annotate_result(result))


@cli.group()
def rules() -> None:
    """Remembered rules: a decision for every unannotated entry of a pattern group."""


@rules.command("remember")
@click.argument("group")
@click.option(
    "--decision", type=click.Choice(["keep", "delete", "unsure"]), required=True, help="Decision."
)
@common_options
def rules_remember(group: str, decision: str, store: str | None, as_json: bool) -> None:
    """After each scan, give DECISION to every unannotated entry of pattern GROUP.

    Decisions people made are never overwritten.
    """
    filled = api.remember_rule(group, decision, store=store)
    _out(
        as_json,
        render.rule_remembered_json(group, decision, filled),
        render.render_rule_remembered(group, decision, filled),
    )


@rules.command("forget")
@click.argument("group")
@common_options
def rules_forget(group: str, store: str | None, as_json: bool) -> None:
    """Forget GROUP's rule and take back the decisions it made that nobody changed."""
    taken = api.forget_rule(group, store=store)
    _out(
        as_json,
        render.rule_forgotten_json(group, taken),
        render.render_rule_forgotten(group, taken),
    )


@rules.command("list")
@common_options
def rules_list(store: str | None, as_json: bool) -> None:
    """List remembered rules."""
    found = api.list_rules(store=store)
    _out(as_json, render.rules_json(found), render.render_rules(found))


@cli.command()
@click.argument("root", type=click.Path())
@click.option("--out", type=click.Path(dir_okay=False), help="Write the plan here (not in ROOT).")
@click.option(
    "--ttl",
    type=click.IntRange(min=1, max=api.MAX_TTL),
    default=1800,
    show_default=True,
    help="Seconds valid.",
)
@click.option("--snapshot", "scan_id", metavar="ID", help="Plan against this scan.")
@click.option("--rules", "rules_file", type=click.Path(dir_okay=False), help="Extra rules file.")
@common_options
def plan(
    root: str,
    out: str | None,
    ttl: int,
    scan_id: str | None,
    rules_file: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Export a plan file from the `delete` decisions under ROOT (moves nothing).

    Each candidate is checked against the disk as it is now; what changed since the snapshot
    you reviewed, and everything protected or incomplete, is listed as excluded with a reason.
    A Markdown list is written beside the plan.
    """
    result = api.make_plan(root, store=store, scan_id=scan_id, out=out, ttl=ttl, rules=rules_file)
    _show(as_json, result, render.plan_result(result))


@cli.command()
@click.argument("plan_file", metavar="PLAN", type=click.Path(dir_okay=False))
@click.option("--execute", "do_execute", is_flag=True, help="Really move (default: dry run).")
@click.option("--confirm-plan-id", metavar="ID", help="The plan id you reviewed.")
@click.option("--plan-digest", metavar="DIGEST", help="The plan digest you reviewed.")
@click.option("--acknowledge-risk", metavar="quarantine", help="Must be `quarantine`.")
@click.option(
    "--allow-copy",
    is_flag=True,
    help="For items on another filesystem whose own quarantine cannot be used: copy them into "
    "the store's quarantine, verify, then remove the original (default: skip them).",
)
@common_options
def execute(
    plan_file: str,
    do_execute: bool,
    confirm_plan_id: str | None,
    plan_digest: str | None,
    acknowledge_risk: str | None,
    allow_copy: bool,
    store: str | None,
    as_json: bool,
) -> None:
    """Dry-run a plan, or with --execute move its candidates into a quarantine batch.

    Every candidate is checked again at the moment of acting; what changed is skipped with a
    reason. The dry run says which quarantine each item would go to. Moved items stay
    restorable (`hygiene-nb restore BATCH`) until you purge the batch.
    """
    from hygiene_nb.executor import Confirmation, execute_plan

    confirm = None
    if do_execute:
        confirm = Confirmation(confirm_plan_id, plan_digest, acknowledge_risk)
    # never created here: with no ledger there, the plan is refused before anything is made
    result = execute_plan(
        plan_file, store=api.existing_store(store), confirm=confirm, allow_copy=allow_copy
    )
    _show(as_json, result, render.execute_result(result))


@cli.command()
@click.argument("receipt", type=click.Path(dir_okay=False))
@common_options
def verify(receipt: str, store: str | None, as_json: bool) -> None:
    """Check a receipt against the disk: nothing reappeared, everything is in its batch."""
    from hygiene_nb.executor import verify_receipt

    result = verify_receipt(receipt)
    _show(as_json, result, render.verify_result(result))


@cli.command()
@common_options
def recover(store: str | None, as_json: bool) -> None:
    """Finish the records of executions that stopped after moving (receipt, log, plan state).

    For every plan still `executing` whose run is not alive: the receipt, the execution log row,
    the cleanup.log line and the state `executed`, from its batches' manifests. An original an
    interrupted --allow-copy removal left in `.hygiene-nb-removing-*` goes back in its place
    when nothing is there (else `removal-interrupted` says where it is). Nothing else moves.
    """
    from hygiene_nb.executor import recover_store

    result = recover_store(api.existing_store(store))
    _show(as_json, result, render.recover_result(result))


@cli.group()
def quarantine() -> None:
    """Quarantine batches (`quarantine list`)."""


@quarantine.command("list")
@common_options
def quarantine_list(store: str | None, as_json: bool) -> None:
    """Every batch: id, created, items, bytes, manifest state (ok, incomplete, invalid)."""
    from hygiene_nb.executor import list_store_batches

    found = list_store_batches(api.existing_store(store))
    _out(as_json, render.batches_json(found), render.batches(found))


@cli.command()
@click.argument("batch_id", metavar="BATCH")
@click.option(
    "--item",
    "items",
    multiple=True,
    metavar="ORIGINAL_PATH",
    help="Restore only this item (its original path; repeatable).",
)
@click.option("--execute", "do_execute", is_flag=True, help="Really restore (default: dry run).")
@common_options
def restore(
    batch_id: str, items: tuple[str, ...], do_execute: bool, store: str | None, as_json: bool
) -> None:
    """Put a batch's items back where they were; never overwrites anything.

    An occupied target (a file, an empty directory, even a dangling link) is reported
    `target-occupied` and the item stays in the batch. An item that crossed filesystems comes
    back by a verified copy; the batch's copy is removed only after that.
    """
    from hygiene_nb.executor import restore_batch

    result = restore_batch(
        api.existing_store(store) if not do_execute else api.open_store(store),
        batch_id,
        items=[os.fsencode(i) for i in items] or None,
        execute=do_execute,
    )
    _show(as_json, result, render.restore_result(result))


@cli.command()
@click.argument("batch_id", metavar="BATCH")
@click.option("--execute", "do_execute", is_flag=True, help="Really destroy (default: show).")
@click.option("--confirm-batch-id", metavar="ID", help="The batch id, typed again.")
@click.option("--acknowledge-risk", metavar="permanent-delete", help="Must be `permanent-delete`.")
@click.option(
    "--include-incomplete", is_flag=True, help="Also purge a batch whose manifest is incomplete."
)
@click.option(
    "--include-changed",
    is_flag=True,
    help="Also purge items that changed after they were quarantined (a writer kept them open).",
)
@common_options
def purge(
    batch_id: str,
    do_execute: bool,
    confirm_batch_id: str | None,
    acknowledge_risk: str | None,
    include_incomplete: bool,
    include_changed: bool,
    store: str | None,
    as_json: bool,
) -> None:
    """Show what destroying a quarantine batch would destroy; with every confirmation, do it.

    This is the only command that destroys data. Nothing purges automatically, ever.
    """
    from hygiene_nb.executor import purge_batch

    result = purge_batch(
        api.existing_store(store) if not do_execute else api.open_store(store),
        batch_id,
        execute=do_execute,
        confirm_batch_id=confirm_batch_id,
        acknowledge_risk=acknowledge_risk,
        include_incomplete=include_incomplete,
        include_changed=include_changed,
    )
    _show(as_json, result, render.purge_result(result))


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


def _out(as_json: bool, payload: dict[str, Any], text: str) -> None:
    if as_json:
        render.emit_json(payload)
    else:
        click.echo(text)


def _show(as_json: bool, result: _Result, text: str) -> None:
    """Print ``result`` (its JSON object, or ``text``), then exit with the code it carries."""
    _out(as_json, result.to_json(), text)
    if result.exit_code:
        raise _Exit(result.exit_code)


def _fail(as_json: bool, status: str, code: str, message: str, exit_code: int) -> int:
    if as_json:
        render.emit_json({"status": status, "error": {"code": code, "message": message}})
    else:
        click.echo(f"hygiene-nb: error [{code}]: {shown(message)}", err=True)
    return exit_code


@cli.command()
@click.argument("root", type=click.Path())
@click.option(
    "--snapshot", "scan_id", metavar="ID", help="Report on this snapshot [default: latest]."
)
@click.option("--scan", "scan_first", is_flag=True, help="Scan ROOT first and report on that scan.")
@click.option(
    "--out",
    type=click.Path(file_okay=False),
    default="reports",
    show_default=True,
    help="Reports directory; the report goes to OUT/<root-slug>/<snapshot>.html and .ipynb.",
)
@click.option(
    "--redact",
    is_flag=True,
    help="Categories, counts, bytes, scores, plan ids and expiry only: no path, file name, user "
    "name or note (written to OUT/redacted/).",
)
@click.option(
    "--timeout",
    type=click.IntRange(min=1, max=_MAX_CELL_SECONDS),
    default=900,
    show_default=True,
    help="Seconds any one notebook cell may run.",
)
@common_options
def report(
    root: str,
    scan_id: str | None,
    scan_first: bool,
    out: str,
    redact: bool,
    timeout: int,
    store: str | None,
    as_json: bool,
) -> None:
    """Run the audit notebook on ROOT's latest snapshot; write its .ipynb and offline .html.

    The HTML has no code and draws every chart without a network. Running it again on the same
    snapshot, rules and decisions gives the same bytes. A failing cell exits 1 and still writes
    both files, marked where it failed. Reads the store; writes only the two report files.
    """
    from hygiene_nb.notebook.report import make_report

    result = make_report(
        root, store=store, scan_id=scan_id, out=out, scan=scan_first, redact=redact,
        timeout=timeout,
    )  # fmt: skip
    _show(as_json, result, render.report_result(result))


@cli.command()
@click.argument("root", type=click.Path())
@click.option("--decline", metavar="DIGEST", help="Dismiss the suggestion shown with this digest.")
@common_options
def suggest(root: str, decline: str | None, store: str | None, as_json: bool) -> None:
    """Show automatic mode's suggested plan for ROOT's latest scan, or --decline it.

    Only a suggestion: it decides and moves nothing. A declined suggestion is not shown again
    while its candidates stay the same. Turn automatic mode on per root in the store's
    config.toml (`[roots."/abs/root"]` with `automatic = true`, `threshold = 80`).
    """
    from hygiene_nb.query import suggest as suggestions

    result = suggestions.suggestion_for(root, store=store, decline_digest=decline)
    _show(as_json, result, result.to_text())


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
    sys.exit(code)
