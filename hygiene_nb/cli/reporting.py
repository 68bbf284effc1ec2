"""The reporting commands: ``report`` (the audit or fleet notebook), ``suggest`` (automatic mode).

Each imports its stage (the notebooks, the query layer) when it runs.
"""

from __future__ import annotations

import sys

import click

from hygiene_nb import render
from hygiene_nb.cli.app import MAX_CELL_SECONDS, common_options, emit_result

__all__ = ["report", "suggest"]


@click.command()
@click.argument("root", required=False, type=click.Path())
@click.option(
    "--fleet",
    "fleet",
    metavar="DEST",
    help="Report on the fleet dataset DEST (a directory or s3://BUCKET/PREFIX) instead of ROOT.",
)
@click.option(
    "--engine",
    type=click.Choice(["duckdb", "spark"]),
    default=None,
    help="With --fleet: DuckDB (embedded) or Spark SQL (a directory DEST).  [default: duckdb]",
)
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
    type=click.IntRange(min=1, max=MAX_CELL_SECONDS),
    default=900,
    show_default=True,
    help="Seconds any one notebook cell may run, and the classification of the report's "
    "scans before its kernel starts.",
)
@common_options
def report(
    root: str | None,
    fleet: str | None,
    engine: str | None,
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

    With --fleet DEST (and no ROOT) it runs the fleet notebook on a fleet dataset instead and
    writes OUT/fleet/<dest-slug>/<newest-scan>.html and .ipynb: every host's latest scans, how
    they grew, and the commands to run on each host (plans stay on the host).
    """
    from hygiene_nb.errors import UsageError

    if fleet is not None:
        if root is not None:
            raise UsageError(
                "give ROOT or --fleet DEST, not both: a report is of one or the other."
            )
        # a store named on the command line would be ignored: the report reads DEST only
        # ($HYGIENE_NB_STORE, set for every command, is not a request)
        named_store = (
            store is not None
            and click.get_current_context().get_parameter_source("store")
            == click.core.ParameterSource.COMMANDLINE
        )
        given = [
            o
            for o, v in (
                ("--snapshot", scan_id),
                ("--scan", scan_first),
                ("--redact", redact),
                ("--store", named_store),
            )
            if v
        ]
        if given:
            raise UsageError(f"{', '.join(given)} is for a ROOT's report, not with --fleet.")
        from hygiene_nb.notebook.fleet_report import make_fleet_report

        done = make_fleet_report(fleet, engine=engine or "duckdb", out=out, timeout=timeout)
        emit_result(as_json, done, done.text())
        return
    if root is None:
        raise UsageError("give ROOT (a scanned directory) or --fleet DEST (a fleet dataset).")
    if engine is not None:
        raise UsageError("--engine is for a fleet report: give it with --fleet DEST.")
    from hygiene_nb.notebook.report import make_report

    result = make_report(
        root,
        store=store,
        scan_id=scan_id,
        out=out,
        scan=scan_first,
        redact=redact,
        timeout=timeout,
        progress=not as_json and sys.stderr.isatty(),  # what it is doing, on a terminal only
    )
    emit_result(as_json, result, render.report_result(result))


@click.command()
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
    emit_result(as_json, result, result.to_text())
