"""The ``hygiene-nb`` command: parse options, call one library function, render the result.

``app`` holds the click group, the options every command takes, and ``main``, which maps errors
to exit codes in one place. The commands are grouped by stage: ``scanning`` (scan, snapshots,
summary), ``deciding`` (annotate, rules, plan), ``executing`` (execute, verify, recover,
quarantine, restore, purge; the only commands that reach the executor) and ``reporting``
(report, suggest: the HTML report and the tidying suggestions; ``summary`` is in ``scanning``)
and ``fleet`` (publish, fleet: a scan into a fleet dataset, and the questions asked of it).
The text and JSON each command prints come from ``hygiene_nb.render``. Each command imports the
executor, the notebooks or the query layer when it runs, so a command that needs none of them
starts without the data libraries.
"""

from __future__ import annotations

# _process before api: it sets the environment numpy reads when it loads
from hygiene_nb import _process  # noqa: F401
from hygiene_nb.cli.app import cli, main
from hygiene_nb.cli.deciding import annotate, plan, rules
from hygiene_nb.cli.executing import execute, purge, quarantine, recover, restore, verify
from hygiene_nb.cli.fleet import fleet, publish
from hygiene_nb.cli.reporting import report, suggest
from hygiene_nb.cli.scanning import scan, snapshots, summary

__all__ = ["cli", "main"]

# in the order `hygiene-nb --help` tells them
for _command in (
    scan,
    snapshots,
    summary,
    annotate,
    rules,
    plan,
    execute,
    verify,
    recover,
    quarantine,
    restore,
    purge,
    report,
    suggest,
    publish,
    fleet,
):
    cli.add_command(_command)
