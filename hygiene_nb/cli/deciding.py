"""The deciding commands: ``annotate``, ``rules`` (remember, forget, list) and ``plan``.

Decisions on single entries, remembered decisions for whole pattern groups, and the plan file
exported from the ``delete`` decisions. None of them moves a file.
"""

from __future__ import annotations

import click

from hygiene_nb import api, render
from hygiene_nb.cli.app import common_options, emit, emit_result
from hygiene_nb.plan.schema import DEFAULT_TTL

__all__ = ["annotate", "plan", "rules"]


@click.command()
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
    emit_result(as_json, result, render.annotate_result(result))


@click.group()
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
    emit(
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
    emit(
        as_json,
        render.rule_forgotten_json(group, taken),
        render.render_rule_forgotten(group, taken),
    )


@rules.command("list")
@common_options
def rules_list(store: str | None, as_json: bool) -> None:
    """List remembered rules."""
    found = api.list_rules(store=store)
    emit(as_json, render.rules_json(found), render.render_rules(found))


@click.command()
@click.argument("root", type=click.Path())
@click.option("--out", type=click.Path(dir_okay=False), help="Write the plan here (not in ROOT).")
@click.option(
    "--ttl",
    type=click.IntRange(min=1, max=api.MAX_TTL),
    default=DEFAULT_TTL,
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
    emit_result(as_json, result, render.plan_result(result))
