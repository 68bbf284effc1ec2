"""The scanning commands: ``scan``, ``snapshots`` (list, prune) and ``summary``.

``scan`` walks a tree into a new snapshot; ``snapshots`` lists and prunes the store's scans;
``summary`` reads one snapshot, with no rescan.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from hygiene_nb import api, render
from hygiene_nb.cli.app import MAX_DAYS, MAX_KEEP, MAX_TOP, Finite, common_options, emit
from hygiene_nb.errors import UsageError

if TYPE_CHECKING:  # the frame's type for the checker; pandas loads with the views
    import pandas as pd

__all__ = ["scan", "snapshots", "summary"]


@click.command()
@click.argument("root", type=click.Path())
@click.option(
    "--exclude",
    "excludes",
    multiple=True,
    metavar="GLOB",
    help="Skip what matches (gitignore syntax; repeatable). Skipped entries are recorded as "
    "excluded and counted nowhere. ROOT/.hygieneignore is read too.",
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
    type=Finite(min=0, max=api.MAX_SECONDS),
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
@click.option(
    "--publish",
    "publish_to",
    metavar="DEST",
    help="Then publish the new scan into the fleet dataset DEST (a directory or "
    "s3://BUCKET/PREFIX; the endpoint from $AWS_ENDPOINT_URL), as `hygiene-nb publish` does.",
)
@click.option(
    "--publish-host", metavar="NAME", help="With --publish: the host name to publish under."
)
@click.option(
    "--publish-redact",
    is_flag=True,
    help="With --publish: aggregates only, as `hygiene-nb publish --redact`.",
)
@click.option(
    "--publish-depth",
    type=click.IntRange(min=0, max=64),
    default=None,
    help="With --publish: how many levels below the root the directory sums reach [default: 3].",
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
    publish_to: str | None,
    publish_host: str | None,
    publish_redact: bool,
    publish_depth: int | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Scan ROOT into a new snapshot in the store.

    Symlinks are recorded, never followed; fifos, sockets and devices are recorded, never opened.
    Budgets are shared fairly by ROOT's direct children; what a budget or an unreadable
    directory leaves out is marked partial (unknown), never counted as empty.
    """
    if publish_to is None:
        given = [
            name
            for name, value in (
                ("--publish-host", publish_host),
                ("--publish-redact", publish_redact or None),
                ("--publish-depth", publish_depth),
            )
            if value is not None
        ]
        if given:
            raise UsageError(f"{', '.join(given)} needs --publish DEST: give the fleet dataset.")
    else:  # what would refuse the publish is found before the scan, not after it
        from hygiene_nb.fleet.publish import check_publish

        check_publish(publish_to, store=store, host=publish_host)
    from hygiene_nb.scan.heap import bound_arenas

    bound_arenas()  # the walker's threads share an arena per core (see ``scan.heap``)
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
    if publish_to is None:
        emit(as_json, render.scan_json(info), render.render_scan(info))
        return
    from hygiene_nb.fleet.publish import DEFAULT_DEPTH, publish

    published = publish(
        publish_to,
        store=store,
        scan_id=info.scan_id,
        host=publish_host,
        redact=publish_redact,
        depth=DEFAULT_DEPTH if publish_depth is None else publish_depth,
    )
    payload = render.scan_json(info)
    payload["published"] = published.to_json()
    emit(as_json, payload, render.render_scan(info) + "\n" + published.text())


class _ListByDefault(click.Group):
    """``snapshots [ROOT]`` lists; ``snapshots prune …`` prunes."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ("-h", "--help")):
            args = ["list", *args]
        return super().parse_args(ctx, args)


@click.group(cls=_ListByDefault)
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
    emit(as_json, render.snapshots_json(scans), render.render_snapshots(scans))


@snapshots.command("prune")
@click.option(
    "--keep",
    type=click.IntRange(min=1, max=MAX_KEEP),
    help="Keep the N newest scans of each root.",
)
@click.option(
    "--older-than",
    "older_than",
    type=Finite(min=0, max=MAX_DAYS),
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
    emit(
        as_json,
        render.prune_json(removed, dry_run=dry_run),
        render.render_prune(removed, dry_run=dry_run),
    )


_BY_HELP = (
    "Break the snapshot down instead: owner (bytes per user, with the top directories each "
    "holds bytes in and what deleting safe / caution entries would free), group (the same per "
    "group), type (regular files per extension), category (per file-type category: image, "
    "code, archive, …), age (regular files per modification age at the scan's finish: under 1 "
    "day … 3 years or more; every bucket is listed). --top caps the rows."
)


@click.command()
@click.argument("root", type=click.Path())
@click.option("--snapshot", "scan_id", metavar="ID", help="A given scan (default: the latest).")
@click.option(
    "--top",
    type=click.IntRange(min=0, max=MAX_TOP),
    default=20,
    show_default=True,
    help="How many largest entries (with --by: how many rows).",
)
@click.option(
    "--rules",
    type=click.Path(dir_okay=False),
    help="A rules file (TOML) on top of the store's rules.toml.",
)
@click.option("--by", type=click.Choice(render.BREAKDOWNS), help=_BY_HELP)
@click.option(
    "--age-by",
    type=click.Choice(["user", "group", "extension", "category"]),
    help="With --by age: one histogram per user, group, extension or category (--top caps "
    "how many, largest first).",
)
@common_options
def summary(
    root: str,
    scan_id: str | None,
    top: int,
    rules: str | None,
    by: str | None,
    age_by: str | None,
    store: str | None,
    as_json: bool,
) -> None:
    """Summarize ROOT's latest snapshot (or --snapshot ID).

    Totals, risk mix, pattern groups, staleness, the cleanliness score and the largest entries;
    or, with --by, one breakdown of it (docs/breakdowns.md).

    Computed from the snapshot: no rescan. Changing rules re-classifies at once.
    """
    if age_by and by != "age":
        raise click.UsageError("--age-by goes with --by age only.")
    if by is not None:
        frame = _breakdown(
            root, scan_id=scan_id, top=top, rules=rules, by=by, age_by=age_by, store=store
        )
        emit(
            as_json,
            render.breakdown_json(frame, by),
            render.render_breakdown(frame, by, age_by=age_by),
        )
        return
    result = api.summarize(root, store=store, scan_id=scan_id, top=top, rules=rules)
    emit(as_json, render.summary_json(result), render.render_summary(result))


def _breakdown(
    root: str,
    *,
    scan_id: str | None,
    top: int,
    rules: str | None,
    by: str,
    age_by: str | None,
    store: str | None,
) -> pd.DataFrame:
    """The view ``--by`` names, its rows capped at ``top`` (the age buckets of ``top`` keys)."""
    from hygiene_nb.query import views  # loads the data libraries: only when asked

    if by in ("owner", "group"):
        frame = views.by_owner(
            root, store=store, scan_id=scan_id, by="user" if by == "owner" else "group", rules=rules
        )
    elif by in ("type", "category"):
        frame = views.by_type(
            root, store=store, scan_id=scan_id, by="extension" if by == "type" else "category"
        )
    elif age_by is None:
        return views.age_histogram(root, store=store, scan_id=scan_id)
    else:
        # click.Choice guarantees the literal
        frame = views.age_histogram(root, store=store, scan_id=scan_id, by=age_by)  # type: ignore[arg-type]
        totals = frame.groupby(age_by, sort=False)["bytes"].sum()
        order = totals.sort_index().sort_values(ascending=False, kind="stable")
        rank = {key: n for n, key in enumerate(order.index[:top])}
        capped = frame[frame[age_by].isin(rank)]
        capped = capped.iloc[capped[age_by].map(rank).argsort(kind="stable")]
        capped = capped.reset_index(drop=True)
        capped.attrs.update(frame.attrs)
        return capped
    capped = frame.head(top).reset_index(drop=True)
    capped.attrs.update(frame.attrs)
    return capped
