"""Time one in-process view in a fresh interpreter: ``_views_probe.py MODE ROOT STORE [...]``.

Started by ``bench.views`` through the trampoline (``bench.measure``), one process per measure,
so one view's memory never inflates another's. Prints one JSON object on stdout; RSS figures are
this process's own ``ru_maxrss`` at that point, in KiB.

- ``annotator CLICKS ROUND``: ``import hygiene_nb.notebook.ui``, then ``Annotator(ROOT,
  store=STORE)`` until its first listing and treemap are built; then CLICKS decisions, each a
  click on a listed row's decision button (what the widget's button calls:
  ``Annotator.decide``, which writes the ledger before it returns), and CLICKS drill-ins, each a
  click on a listed directory's name (then back up, untimed). Decisions alternate between
  ``unsure`` and ``keep`` from one round (and one pass over the listing) to the next, so each
  click changes the ledger. Each decision is read back from the ledger afterwards.
- ``diff``: ``views.diff(ROOT, store=STORE, by="risk")`` of the root's two latest snapshots.
- ``by_owner``, ``by_type``, ``age_histogram``: that breakdown of the root's latest snapshot
  (``by_owner`` after the summary has kept the classification it reads).
"""

from __future__ import annotations

import json
import resource
import sys
import time
from typing import Any


def _rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def annotator(root: str, store: str, clicks: int, round_: int) -> dict[str, Any]:
    started = time.perf_counter()
    from hygiene_nb.notebook.ui import Annotator

    import_s = time.perf_counter() - started
    import_rss = _rss_kib()
    started = time.perf_counter()
    panel = Annotator(root, store=store)
    open_s = time.perf_counter() - started
    open_rss = _rss_kib()
    rows = list(panel.rows)
    if not rows:
        raise SystemExit(f"the root {root} lists no entry to decide on")
    decide_s, decided = [], {}
    for i in range(clicks):
        row = rows[i % len(rows)]
        decision = ("unsure", "keep")[(round_ + i // len(rows)) % 2]
        started = time.perf_counter()
        row.buttons[decision].click()
        decide_s.append(time.perf_counter() - started)
        if not panel.status.value.startswith(decision):
            raise SystemExit(f"the decision was not written: {panel.status.value}")
        decided[row.path_raw] = decision
        rows = list(panel.rows)  # a decision redraws the listing
    from hygiene_nb import api

    found = {a.path_raw: a.decision for a in api.annotations_at(list(decided), store=store)}
    if found != decided:
        raise SystemExit(f"the ledger holds {found!r} where the clicks decided {decided!r}")
    dirs = [row.path_raw for row in panel.rows if not row.name.disabled]
    if not dirs:
        raise SystemExit(f"the root {root} lists no directory to drill into")
    drill_s = []
    for i in range(clicks):
        target = dirs[i % len(dirs)]
        row = next(r for r in panel.rows if r.path_raw == target)
        started = time.perf_counter()
        row.name.click()
        drill_s.append(time.perf_counter() - started)
        if panel.cwd_raw != target:
            raise SystemExit(f"the drill-in did not open {target!r}: {panel.status.value}")
        panel.up_button.click()
    return {
        "import_s": import_s,
        "import_rss_kib": import_rss,
        "open_s": open_s,
        "open_rss_kib": open_rss,
        "listed": len(rows),
        "decide_s": decide_s,
        "drill_s": drill_s,
        "rss_kib": _rss_kib(),
    }


BREAKDOWNS = ("by_owner", "by_type", "age_histogram")


def view(mode: str, root: str, store: str) -> dict[str, Any]:
    """``diff`` (by risk) or one of ``BREAKDOWNS``, timed after the import."""
    from hygiene_nb.query import views

    import_rss = _rss_kib()
    started = time.perf_counter()
    if mode == "diff":
        found = views.diff(root, store=store, by="risk")
    else:
        found = getattr(views, mode)(root, store=store)
    seconds = time.perf_counter() - started
    return {
        "seconds": seconds,
        "rows": len(found),
        "import_rss_kib": import_rss,
        "rss_kib": _rss_kib(),
    }


def main() -> int:
    mode, root, store = sys.argv[1:4]
    if mode == "annotator":
        out = annotator(root, store, int(sys.argv[4]), int(sys.argv[5]))
    elif mode == "diff" or mode in BREAKDOWNS:
        out = view(mode, root, store)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
