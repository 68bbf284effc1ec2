"""The report's sections that depend on what there is: history, review, suggestions, executions.

Each displays its chart and a compact table, or one sentence when there is nothing to show
(never an empty chart, a header-only table or a raw dict). The notebooks call these.
"""

from __future__ import annotations

import html
import numbers
from collections.abc import Sequence

import pandas as pd

from hygiene_nb import api
from hygiene_nb import formatting as fmt
from hygiene_nb.ledger import Annotation
from hygiene_nb.models import Summary
from hygiene_nb.notebook import figures
from hygiene_nb.notebook.tables import table, table_html
from hygiene_nb.query import suggest, views

__all__ = [
    "REPORT_ROWS",
    "compact_diff",
    "executions",
    "history",
    "provenance",
    "provenance_html",
    "review",
    "tidy_suggestions",
    "totals",
    "totals_html",
]

# The rows a report's long lists show (the largest first): a page a person reads, whatever the
# tree holds; the notebook's views return every row.
REPORT_ROWS = 50

ONE_SCAN = (
    "Only one snapshot so far: after the next scan this section shows how the size, the free "
    "space, the largest directories, the risk mix and the cleanliness score change, and what "
    "changed between the two scans."
)


def _say(text: str) -> None:
    from IPython.display import Markdown, display

    display(Markdown(text))


def history(root: str, *, store: api.StoreArg = None, scan_id: str, redact: bool = False) -> None:
    """Size and free space per scan, growth, risk mix over time, and what changed last."""
    hist = views.history(root, store=store, scan_id=scan_id)
    if len(hist) < 2:
        _say(ONE_SCAN)
        return
    figures.show(figures.history_figure(hist))
    if not redact:
        figures.show(figures.growth_figure(views.child_growth(root, store=store, scan_id=scan_id)))
    figures.show(
        figures.risk_history_figure(views.risk_history(root, store=store, scan_id=scan_id))
    )
    columns = ["scanned_at", "bytes", "alloc", "files", "entries", "errors", "fs_free"]
    table(hist[columns], empty=ONE_SCAN)
    if redact:
        changed = views.diff(root, store=store, new=scan_id, by="risk")
        table(compact_diff(changed), empty="Nothing changed since the previous scan.")
        return
    by_dir = views.diff(root, store=store, new=scan_id)
    changes = [c for c in by_dir.columns if c.endswith("_entries") or c == "delta"]
    by_dir = by_dir[(by_dir[changes] != 0).any(axis=1)]
    if not len(by_dir):
        _say("Nothing changed since the previous scan.")
        return
    figures.show(figures.diff_figure(by_dir))
    table(compact_diff(by_dir), empty="Nothing changed since the previous scan.")


def compact_diff(diff: pd.DataFrame) -> pd.DataFrame:
    """The diff's key, sizes and how many entries came, went, grew and shrank.

    The columns keep the view's names; ``table`` says them in words (``bytes before``,
    ``change``, ``new entries``).
    """
    wanted = [diff.columns[0], "old_bytes", "new_bytes", "delta"]
    counts = ["new_entries", "gone_entries", "grew_entries", "shrank_entries"]
    return diff[[c for c in [*wanted, *counts] if c in diff]].reset_index(drop=True)


def review(
    root: str,
    *,
    store: api.StoreArg = None,
    scan_id: str,
    pending: pd.DataFrame | None = None,
    annotations: Sequence[Annotation] | None = None,
) -> None:
    """How much is reviewed, the decisions still waiting, and what a plan exported now holds.

    ``pending``: ``pending_decisions`` of the same snapshot, when read already (the headline's);
    ``annotations``: the ledger's annotations under the root, when read already (the same).
    """
    coverage = views.review_coverage(root, store=store, scan_id=scan_id, annotations=annotations)
    _say(
        f"Reviewed: {fmt.percent(coverage.share_bytes)} of bytes, "
        f"{fmt.percent(coverage.share_entries)} of entries."
    )
    if pending is None:
        pending = views.pending_decisions(
            root, store=store, scan_id=scan_id, annotations=annotations
        )
    # the largest of each kind: a report lists what a person reads, the notebook the rest
    shown = pending.groupby("decision", sort=False).head(REPORT_ROWS)
    table(
        # when each was decided, said as a date and time (the ledger keeps ISO text)
        shown.assign(at=pd.to_datetime(shown["at"], utc=True, errors="coerce")),
        empty="No decision is waiting: nothing is marked *delete* or *unsure*.",
        root=root,
    )
    rest = pending.drop(index=shown.index)
    if len(rest):
        by = ", ".join(
            f"{fmt.thousands(int(n))} {decision}"
            for decision, n in rest["decision"].value_counts(sort=False).items()
        )
        _say(
            f"Listed: the {REPORT_ROWS} largest waiting decisions of each kind. Not listed: "
            f"{fmt.counted(len(rest), 'more decision')} ({by}; "
            f"{fmt.human_bytes(int(rest['bytes'].sum()))}): `views.pending_decisions(root)` "
            "or the annotation widget lists them all."
        )
    preview = views.plan_preview(root, store=store, scan_id=scan_id, annotations=annotations)
    candidates = int(preview.get("candidates", 0))
    if candidates:
        freed = fmt.human_bytes(int(preview.get("reclaim_bytes", 0)))
        _say(
            f"A plan exported now would hold {fmt.counted(candidates, 'candidate')}, "
            f"reclaiming {freed} "
            "(exporting re-checks the disk)."
        )
    else:
        _say("A plan exported now would be empty: no *delete* decision can become a candidate.")


def tidy_suggestions(
    root: str,
    *,
    store: api.StoreArg = None,
    scan_id: str,
    annotations: Sequence[Annotation] | None = None,
) -> None:
    """Files that could be organised (suggestions only); ``annotations`` as for ``review``."""
    tidy = suggest.organization_suggestions(
        root, store=store, scan_id=scan_id, annotations=annotations
    )
    table(tidy.head(REPORT_ROWS), empty="No file looks out of place: nothing to tidy.", root=root)
    if len(tidy) > REPORT_ROWS:
        _say(
            f"Listed: the first {REPORT_ROWS} of {fmt.counted(len(tidy), 'suggestion')}; "
            "`suggest.organization_suggestions(root)` lists them all."
        )


def executions(*, store: api.StoreArg = None, redact: bool = False) -> None:
    """The latest executions, and whether each batch is still in quarantine."""
    done = views.executions(store=store, redact=redact)
    done = done.drop(columns=[c for c in ("plan_digest", "authorization_id") if c in done])
    table(done, empty="No plan has been executed: nothing was moved, nothing is in quarantine.")


def totals(summary: Summary, *, redact: bool = False) -> None:
    """The snapshot's totals, each value said for people (bytes in binary units, exact on hover).

    Bytes read ``1.4 GiB`` with every byte in the cell's ``title``, counts carry thousands
    separators, the scan's time is a date and time (UTC), an unknown value is a dash.
    """
    from IPython.display import HTML, display

    display(HTML(totals_html(summary, redact=redact)))


def totals_html(summary: Summary, *, redact: bool = False) -> str:
    """The totals table of ``totals`` as HTML: one readable row per figure."""
    frame = views.totals_frame(summary, redact=redact)
    said = [
        _total(str(what), value) for what, value in zip(frame["what"], frame["value"], strict=True)
    ]
    return table_html(frame.assign(value=said), {"value": _said_cell})


def provenance(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    parameters: dict[str, object] | None = None,
    redact: bool = False,
    annotations: Sequence[Annotation] | None = None,
) -> None:
    """What the report was made from, one readable row per fact (``views.provenance``).

    ``annotations``: as for ``review``.
    """
    from IPython.display import HTML, display

    frame = views.provenance(
        root,
        store=store,
        scan_id=scan_id,
        parameters=parameters,
        redact=redact,
        annotations=annotations,
    )
    display(HTML(provenance_html(frame)))


def provenance_html(frame: pd.DataFrame) -> str:
    """``views.provenance`` as an HTML table: every value in full, escaped (digests are long)."""
    return table_html(frame, {"value": _whole})


def _total(what: str, value: object) -> str:
    """One total for people: bytes, a count, the scan's time, yes/no, or a dash if unknown."""
    if value is None or value is pd.NA:
        return "\u2014"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if "bytes" in what and _integer(value):
        return fmt.bytes_html(int(value))  # type: ignore[call-overload]
    if _integer(value):
        return html.escape(fmt.thousands(value))  # type: ignore[arg-type]
    if what == "scanned at":
        return html.escape(fmt.human_datetime(value, seconds=True) + " UTC")
    return html.escape(fmt.shown(str(value)))


def _integer(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _said_cell(value: object) -> str:
    return str(value)  # already HTML (``_total``)


def _whole(value: object) -> str:
    if value is None or value is pd.NA:
        return "\u2014"
    return f'<span style="overflow-wrap:anywhere">{html.escape(fmt.shown(str(value)))}</span>'
