"""The report's headline: one screen that says how big, how free, what changed, what to do.

``headline`` gathers it through the views (sizes, free space and growth from the scan history,
reclaimable bytes and the largest reclaimable places from the classified snapshot, bytes still
held in quarantine from the executions' receipts, the pending decisions and the cleanliness
score); ``headline_html`` draws it as a small block of HTML. Every figure is as of the scan,
so a report rerun later says the same.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from hygiene_nb import api
from hygiene_nb import formatting as fmt
from hygiene_nb.classify.summary import NO_SCORE
from hygiene_nb.ledger import Annotation, Ledger
from hygiene_nb.models import Summary
from hygiene_nb.notebook.figures import risk_badge_css
from hygiene_nb.query import views
from hygiene_nb.scan.snapshot import query_engine

__all__ = ["Growth", "Headline", "Place", "headline", "headline_html", "show_headline"]

_PLACES = """
    WITH rows AS (
        SELECT CASE WHEN parent IS NULL THEN name ELSE parent || '/' || name END AS path,
               parent, risk, rule, CAST(coalesce(tree_bytes, size) AS BIGINT) AS bytes
        FROM entries
    ),
    -- a parent is a directory: the join's other side holds only those (a tenth of the rows)
    dirs AS (
        SELECT CASE WHEN parent IS NULL THEN name ELSE parent || '/' || name END AS path, risk
        FROM entries WHERE kind = 'dir'
    )
    SELECT e.path, e.risk, e.rule, e.bytes
    FROM rows e LEFT JOIN dirs p ON p.path = e.parent
    WHERE e.risk IN ('safe', 'caution')
      AND (p.risk IS NULL OR p.risk NOT IN ('safe', 'caution'))
      AND e.bytes > 0
    ORDER BY CASE e.risk WHEN 'safe' THEN 0 ELSE 1 END, e.bytes DESC, e.path
    LIMIT ?
"""


@dataclass(frozen=True)
class Place:
    """One of the largest reclaimable places: the outermost entry of its risk."""

    path: str  # relative to the root
    risk: str  # safe or caution
    rule: str | None
    bytes: int


@dataclass(frozen=True)
class Growth:
    """How the root's bytes changed since an earlier scan."""

    label: str  # "the previous scan", or how long before this one the earlier scan ran
    since: pd.Timestamp
    delta: int
    span: str = ""  # the real interval between the two scans: "5 weeks", "under a day"


@dataclass(frozen=True)
class Headline:
    """What the top of the report says."""

    root: str
    scan_id: str
    scanned_at: pd.Timestamp
    scans: int  # scans of the root up to this one
    bytes: int | None
    alloc: int | None
    files: int | None
    partial: bool
    fs_free: int
    fs_total: int
    free_change: int | None  # free space now minus at the previous scan
    # what the report's sections read again otherwise; never compared, never printed (their
    # paths would show in a redacted report's repr)
    summary: Summary = field(compare=False, repr=False)  # the snapshot's, as of its scan
    waiting: pd.DataFrame = field(compare=False, repr=False)  # ``pending_decisions``'s frame
    # the ledger's annotations under the root, read once for every section of a report
    annotations: list[Annotation] = field(default_factory=list, compare=False, repr=False)
    growth: list[Growth] = field(default_factory=list)
    reclaim_safe: int = 0
    reclaim_caution: int = 0  # safe + caution
    places: list[Place] = field(default_factory=list)
    quarantined_bytes: int = 0
    quarantined_batches: int = 0
    pending_delete: int = 0
    pending_delete_bytes: int = 0
    pending_unsure: int = 0
    score: int | None = None
    score_previous: int | None = None


def _span(now: pd.Timestamp, then: pd.Timestamp) -> str:
    """How long before ``now`` the scan of ``then`` ran, for people (``formatting.human_age``)."""
    return fmt.human_age((now - then) / pd.Timedelta(days=1))


def _growth(hist: pd.DataFrame) -> list[Growth]:
    """Growth since the previous scan, and since scans at least 7 and 30 days before.

    Each says the real interval between the two scans: the scan "7 days" before may have run
    40 days before (then it says so). A scan already compared with is not listed again.
    """
    if len(hist) < 2 or pd.isna(hist["bytes"].iloc[-1]):
        return []
    now, at = int(hist["bytes"].iloc[-1]), hist["scanned_at"].iloc[-1]
    out = []
    earlier = hist.iloc[:-1]
    previous = earlier.iloc[-1]
    used = set()
    if not pd.isna(previous["bytes"]):
        when = previous["scanned_at"]
        out.append(Growth("the previous scan", when, now - int(previous["bytes"]), _span(at, when)))
        used.add(previous["scan_id"])
    for days in (7, 30):
        before = earlier[earlier["scanned_at"] <= at - pd.Timedelta(days=days)]
        if len(before) and not pd.isna(before["bytes"].iloc[-1]):
            then = before.iloc[-1]
            if then["scan_id"] in used:
                continue
            used.add(then["scan_id"])
            span = _span(at, then["scanned_at"])
            out.append(Growth(span, then["scanned_at"], now - int(then["bytes"]), span))
    return out


def _int(value: Any) -> int:
    return int(value)


def _places(info: api.ScanInfo, store: api.StoreArg, top: int) -> list[Place]:
    prefix = info.root.rstrip("/") + "/"
    with query_engine() as con:
        api.open_entries(con, info, store=store, now_ns=api.scan_time_ns(info))
        rows = con.execute(_PLACES, [top]).fetchall()
    return [
        Place(p[len(prefix) :] if p.startswith(prefix) else p, r, rule, int(b))
        for p, r, rule, b in rows
    ]


def headline(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    top: int = 10,
) -> Headline:
    """The headline of a snapshot (the latest of ``root`` by default), as of its scan."""
    info = views.resolve_scan(root, store=store, scan_id=scan_id)
    summary = api.summarize(info.root, store=store, scan_id=info.scan_id, as_of_scan=True)
    hist = views.history(info.root, store=store, scan_id=info.scan_id)
    last = hist.iloc[-1]
    free_change = int(last["fs_free"] - hist["fs_free"].iloc[-2]) if len(hist) > 1 else None
    scores = views.risk_history(info.root, store=store, scan_id=info.scan_id).drop_duplicates(
        "scan_id"
    )["score"]
    # what this root's executions before the scan moved and no purge has removed since (a
    # move after the scan is still on disk in the snapshot: it would count twice)
    ours = set(views.plans(info.root, store=store)["plan_id"])
    executions = views.executions(store=store, limit=10_000)
    finished = pd.to_datetime(executions["finished_at"], utc=True, errors="coerce")
    held = executions[
        (executions["in_quarantine"] == True)  # noqa: E712 (None stays out)
        & executions["plan_id"].isin(ours)
        & (finished <= last["scanned_at"])
    ]
    with Ledger.open(api.open_store(store)) as ledger:
        annotations = ledger.annotations(under=info.root)
    waiting = views.pending_decisions(
        info.root, store=store, scan_id=info.scan_id, annotations=annotations
    )
    pending = views.pending_counts(pending=waiting).set_index("decision")
    reclaim = summary.reclaimable
    clean = summary.cleanliness
    score = clean.score if clean is not None and clean.no_score is None else None
    # the scan just before this one, and only when it had a score (never an older one)
    before = scores.iloc[-2] if len(scores) > 1 else None
    score_previous = None if before is None or pd.isna(before) else int(before)
    return Headline(
        root=info.root,
        scan_id=info.scan_id,
        scanned_at=last["scanned_at"],
        scans=len(hist),
        bytes=summary.tree_bytes,
        alloc=summary.tree_alloc,
        files=summary.tree_files,
        partial=summary.partial,
        fs_free=summary.fs_free,
        fs_total=summary.fs_total,
        free_change=free_change,
        summary=summary,
        waiting=waiting,
        annotations=annotations,
        growth=_growth(hist),
        reclaim_safe=reclaim["safe"].bytes if "safe" in reclaim else 0,
        reclaim_caution=reclaim["caution"].bytes if "caution" in reclaim else 0,
        places=_places(info, store, top),
        quarantined_bytes=int(held["moved_bytes"].fillna(0).sum()),
        quarantined_batches=int(held["batch_id"].nunique()),
        pending_delete=_int(pending.loc["delete", "entries"]),
        pending_delete_bytes=_int(pending.loc["delete", "bytes"]),
        pending_unsure=_int(pending.loc["unsure", "entries"]),
        score=score,
        score_previous=score_previous,
    )


# -- drawing ---------------------------------------------------------------------------------


def _date(at: pd.Timestamp) -> str:
    return f"{fmt.human_datetime(at)} UTC"


_STYLE = """<style>
.hnb-headline{font-family:system-ui,sans-serif;max-width:1200px}
.hnb-cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(220px,1fr));gap:10px}
.hnb-card{border:1px solid #ddd;border-radius:6px;padding:8px 12px;background:#fafafa}
.hnb-card h3{margin:0 0 4px;font-size:0.85em;font-weight:600;color:#555;text-transform:uppercase}
.hnb-card .big{font-size:1.6em;font-weight:600}
.hnb-card p{margin:2px 0;font-size:0.9em;color:#333}
.hnb-places{border-collapse:collapse;margin-top:10px;font-size:0.9em}
.hnb-headline .hnb-places td,.hnb-headline .hnb-places th{
  padding:2px 10px;text-align:left;border-bottom:1px solid #eee}
.hnb-headline .hnb-places td.num,.hnb-headline .hnb-places th.num{
  text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums}
</style>"""
# the risk badges in the figures' colours (figures.RISK_COLORS, their ink chosen for contrast)
_STYLE = _STYLE.replace("</style>", risk_badge_css() + "</style>")


def headline_html(h: Headline, *, redact: bool = False) -> str:
    """The headline as one block of HTML: cards, then the largest reclaimable places.

    With ``redact`` no path appears: the root is left out, and each place is its rule only.
    """
    cards: list[tuple[str, str, list[str]]] = []
    size = fmt.bytes_html(h.bytes)
    size_lines = [f"{fmt.bytes_html(h.alloc)} allocated on disk"] if h.alloc is not None else []
    if h.files is not None:
        size_lines.append(fmt.counted(h.files, "file"))
    if h.partial:
        size_lines.append("Some entries could not be read: these are lower bounds.")
    cards.append(("Size", size, size_lines))
    free_lines = [f"of {fmt.bytes_html(h.fs_total)} on this filesystem"] if h.fs_total else []
    if h.free_change is not None:
        free_lines.append(f"{fmt.bytes_html(h.free_change, signed=True)} since the previous scan")
    cards.append(("Free space", fmt.bytes_html(h.fs_free), free_lines))
    if h.growth:
        first, *rest = h.growth
        ago = f"{first.span} before, " if first.span else ""
        lines = [f"since {first.label} ({ago}{_date(first.since)})"]
        lines += [
            f"{fmt.bytes_html(g.delta, signed=True)} in {g.span or g.label} "
            f"(since {_date(g.since)})"
            for g in rest
        ]
        cards.append(("Growth", fmt.bytes_html(first.delta, signed=True), lines))
    else:
        cards.append(
            (
                "Growth",
                "—",
                [
                    "The first scan of this root: after the next scan this says how much it "
                    "grew, and the history charts show the trend."
                ],
            )
        )
    caution_only = h.reclaim_caution - h.reclaim_safe
    cards.append(
        (
            "Reclaimable now",
            fmt.bytes_html(h.reclaim_safe) + " safe",
            [
                f"{fmt.bytes_html(caution_only)} more with caution "
                f"({fmt.bytes_html(h.reclaim_caution)} in all)"
            ],
        )
    )
    if h.quarantined_batches:
        quarantine = [
            f"in {fmt.counted(h.quarantined_batches, 'batch', 'batches')}. "
            "A move on the same filesystem frees nothing until the batch is purged."
        ]
    else:
        quarantine = ["Nothing is held in quarantine."]
    cards.append(("Quarantine", fmt.bytes_html(h.quarantined_bytes), quarantine))
    pending = h.pending_delete + h.pending_unsure
    pending_lines = (
        [
            f"{fmt.counted(h.pending_delete, 'delete')} still on disk "
            f"({fmt.bytes_html(h.pending_delete_bytes)})",
            f"{fmt.thousands(h.pending_unsure)} unsure",
        ]
        if pending
        else ["No decision is waiting."]
    )
    cards.append(("Decisions pending", fmt.thousands(pending), pending_lines))
    if h.score is not None:
        trend = (
            [
                f"{fmt.signed_count(h.score - h.score_previous)} since the previous scan "
                f"({h.score_previous})"
            ]
            if h.score_previous is not None
            else ["Its trend shows after the next scan."]
        )
        cards.append(("Cleanliness", f"{h.score} / 100", trend))
    else:
        cards.append(("Cleanliness", "\u2014", [f"No score: {NO_SCORE}."]))
    body = "".join(
        f'<div class="hnb-card"><h3>{html.escape(title)}</h3><div class="big">{big}</div>'
        + "".join(f"<p>{line}</p>" for line in lines)
        + "</div>"
        for title, big, lines in cards
    )
    if h.places:

        def row(p: Place) -> str:
            where = (
                ""
                if redact
                else (
                    f'<td title="{html.escape(p.path)}">'
                    f"{html.escape(fmt.display_path(p.path, width=60))}</td>"
                )
            )
            return (
                f'<tr><td><span class="hnb-risk-{p.risk}">{p.risk}</span></td>{where}'
                f"<td>{html.escape(p.rule or '')}</td>"
                f'<td class="num">{fmt.bytes_html(p.bytes)}</td></tr>'
            )

        n = len(h.places)
        title = "The largest reclaimable place" if n == 1 else f"The {n} largest reclaimable places"
        header = "<th>risk</th>" + ("" if redact else "<th>path</th>") + "<th>rule</th>"
        places = (
            f"<h4>{title}</h4>"
            f'<table class="hnb-places"><thead><tr>{header}<th class="num">bytes</th></tr>'
            f"</thead><tbody>{''.join(row(p) for p in h.places)}</tbody></table>"
        )
    else:
        places = "<p>Nothing here is safe or cautious to delete: no place to reclaim.</p>"
    when = f"Scan {html.escape(h.scan_id)}, {_date(h.scanned_at)}"
    where = "" if redact else f"{html.escape(h.root)} · "
    return (
        f'{_STYLE}<div class="hnb-headline"><p>{where}{when} · '
        f"{fmt.counted(h.scans, 'scan')} so far</p>"
        f'<div class="hnb-cards">{body}</div>{places}</div>'
    )


def show_headline(
    root: str | None = None,
    *,
    store: api.StoreArg = None,
    scan_id: str | None = None,
    redact: bool = False,
) -> Headline:
    """Display the headline in a notebook (and return it)."""
    from IPython.display import HTML, display

    found = headline(root, store=store, scan_id=scan_id)
    display(HTML(headline_html(found, redact=redact)))
    return found
