"""The fleet commands: ``publish`` (a scan into a fleet dataset) and ``fleet`` (its questions).

A fleet dataset is evidence, never authority: these commands read this host's store and write
only the dataset; ``plan``, ``execute`` and ``--store`` refuse a fleet dataset.
"""

from __future__ import annotations

import sys

import click

from hygiene_nb.cli.app import MAX_DAYS, Finite, common_options, emit_result

__all__ = ["fleet", "publish"]

_ENDPOINT = click.option(
    "--endpoint-url",
    metavar="URL",
    envvar="AWS_ENDPOINT_URL",
    help="The object store's endpoint for s3:// DESTs [default: $AWS_ENDPOINT_URL, else AWS].",
)


def _say(text: str) -> None:
    if sys.stderr.isatty():
        click.echo(f"hygiene-nb: {text}…", err=True)


@click.command()
@click.argument("dest")
@click.argument("root", required=False, type=click.Path())
@click.option("--snapshot", "scan_id", metavar="ID", help="A given scan (default: ROOT's latest).")
@click.option(
    "--host", metavar="NAME", help="The host name to publish under [default: the scan's]."
)
@click.option(
    "--redact",
    is_flag=True,
    help="Publish aggregates only: directories down to --depth with their sums, no names "
    "below it, no owner names or ids, no snapshot.",
)
@click.option(
    "--depth",
    type=click.IntRange(min=0, max=64),
    default=3,
    show_default=True,
    help="How many levels below the root the published directory sums reach.",
)
@_ENDPOINT
@common_options
def publish(
    dest: str,
    root: str | None,
    scan_id: str | None,
    host: str | None,
    redact: bool,
    depth: int,
    endpoint_url: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Publish a finished scan (ROOT's latest, or --snapshot) into the fleet dataset DEST.

    DEST is a directory or s3://BUCKET/PREFIX. A partition becomes visible only when complete
    (its marker is written last); publishing the same scan again changes nothing.
    """
    from hygiene_nb.fleet.publish import publish as publish_scan

    result = publish_scan(
        dest,
        root,
        store=store,
        scan_id=scan_id,
        host=host,
        redact=redact,
        depth=depth,
        endpoint_url=endpoint_url,
        progress=None if as_json else _say,
    )
    emit_result(as_json, result, result.text())


@click.command()
@click.argument("dest")
@click.argument(
    "question",
    type=click.Choice(["summary", "history", "growth", "risk", "stale", "owners"]),
    default="summary",
)
@click.option("--host", "hosts", metavar="GLOB", help="Only hosts whose name matches.")
@click.option(
    "--since",
    type=Finite(min=0, max=MAX_DAYS),
    metavar="DAYS",
    help="Only scans that started in the last DAYS days.",
)
@click.option(
    "--engine",
    type=click.Choice(["duckdb", "spark"]),
    default="duckdb",
    show_default=True,
    help="DuckDB (embedded), or Spark SQL (pip install 'hygiene-nb[spark]'; a directory DEST).",
)
@click.option(
    "--spark-master",
    metavar="URL",
    default="local[*]",
    show_default=True,
    help="With --engine spark: local[N] or a cluster's master URL.",
)
@click.option(
    "--top",
    type=click.IntRange(min=0, max=100_000),
    default=20,
    show_default=True,
    help="How many directories `growth` lists.",
)
@_ENDPOINT
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object on stdout.")
def fleet(
    dest: str,
    question: str,
    hosts: str | None,
    since: float | None,
    engine: str,
    spark_master: str,
    top: int,
    endpoint_url: str | None,
    as_json: bool,
) -> None:
    """Ask the fleet dataset DEST one question (default: summary).

    \b
    summary   the latest scan of every host and root: size, free, growth, safe to remove, score
    history   every scan: size and free space over time
    growth    per host, growth from first to latest scan; the directories that grew most
    risk      the risk mix of the latest scans
    stale     per host, what no one has modified for a year
    owners    bytes by owner across hosts
    """  # noqa: D301 - \b is click's "keep these lines as they are" marker
    from hygiene_nb.fleet.answers import ask

    answer = ask(
        dest,
        question,
        engine=engine,
        hosts=hosts,
        since_days=since,
        top=top,
        spark_master=spark_master,
        endpoint_url=endpoint_url,
    )
    emit_result(as_json, answer, answer.text())
