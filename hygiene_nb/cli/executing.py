"""The executing commands: execute, verify, recover, quarantine, restore and purge.

The only commands that reach the executor, each importing it when it runs: a plan moved into
quarantine, its receipt checked, a stopped run's records finished, and batches listed, put back
or destroyed.
"""

from __future__ import annotations

import os

import click

from hygiene_nb import api, render
from hygiene_nb.cli.app import common_options, emit, emit_result

__all__ = ["execute", "purge", "quarantine", "recover", "restore", "verify"]


@click.command()
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
    emit_result(as_json, result, render.execute_result(result))


@click.command()
@click.argument("receipt", type=click.Path(dir_okay=False))
@common_options
def verify(receipt: str, store: str | None, as_json: bool) -> None:
    """Check a receipt against the disk: nothing reappeared, everything is in its batch."""
    from hygiene_nb.executor import verify_receipt

    result = verify_receipt(receipt)
    emit_result(as_json, result, render.verify_result(result))


@click.command()
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
    emit_result(as_json, result, render.recover_result(result))


@click.group()
def quarantine() -> None:
    """Quarantine batches (`quarantine list`)."""


@quarantine.command("list")
@common_options
def quarantine_list(store: str | None, as_json: bool) -> None:
    """Every batch: id, created, items, bytes, manifest state (ok, incomplete, invalid)."""
    from hygiene_nb.executor import list_store_batches

    found = list_store_batches(api.existing_store(store))
    emit(as_json, render.batches_json(found), render.batches(found))


@click.command()
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
    emit_result(as_json, result, render.restore_result(result))


@click.command()
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
    emit_result(as_json, result, render.purge_result(result))
