"""The text ``hygiene-nb fleet`` prints: each question's rows as an aligned table."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hygiene_nb.formatting import (
    columns,
    display_path,
    human_bytes,
    human_datetime,
    signed_bytes,
    thousands,
)

if TYPE_CHECKING:
    from hygiene_nb.fleet.answers import FleetAnswer

__all__ = ["TITLES", "cell", "render_answer"]

TITLES = {
    "summary": "Latest scan of every host and root",
    "history": "Every scan",
    "growth": "Growth per host (first to latest scan)",
    "top_dirs": "Directories that grew most (latest scan against the one before)",
    "risk": "Risk mix of the latest scans (allocated bytes)",
    "stale": "Not modified for a year, per host (latest scans)",
    "owners": "Bytes by owner across hosts (latest scans)",
}
HEADERS = {
    "started_s": "scanned",
    "previous_s": "previous",
    "since_s": "since",
    "latest_s": "latest",
    "alloc": "size",
    "fs_free": "free",
    "fs_total": "filesystem",
    "before_alloc": "before",
    "reclaimable": "safe to remove",
    "stale": "untouched 1 y+",
    "cleanliness": "score",
    "partial_roots": "partial",
    "partial": "complete",
}
_BYTES = {"alloc", "fs_free", "fs_total", "before_alloc", "reclaimable", "stale"}
_SIGNED = {"growth"}
_TIMES = {"started_s", "previous_s", "since_s", "latest_s"}
_COUNTS = {"entries", "files", "roots", "depth", "partial_roots"}
_HIDDEN = {"scan", "redacted"}
_PATH_WIDTH = 48


def cell(column: str, value: Any, root: str | None = None) -> str:
    """One value as a person reads it: bytes in binary units, times in UTC, counts grouped."""
    if value is None:
        return "-"
    if column in _BYTES:
        return human_bytes(value)
    if column in _SIGNED:
        return signed_bytes(value)
    if column in _TIMES:
        return human_datetime(datetime.fromtimestamp(int(value), UTC))
    if column in _COUNTS:
        return thousands(value)
    if column == "path":
        return display_path(str(value), root, width=_PATH_WIDTH)
    if column == "partial":  # a partial scan's sums are lower bounds: its growth is unknown
        return "partial" if value else "yes"
    if column == "cleanliness":
        return f"{int(value)}/100"
    return str(value)


def _table(cols: list[str], rows: list[tuple[Any, ...]]) -> list[str]:
    keep = [i for i, c in enumerate(cols) if c not in _HIDDEN]
    head = [HEADERS.get(cols[i], cols[i]) for i in keep]
    at = cols.index("root") if "root" in cols else None
    body = [[cell(cols[i], row[i], None if at is None else row[at]) for i in keep] for row in rows]
    widths = [max(columns(x) for x in [h, *(r[j] for r in body)]) for j, h in enumerate(head)]
    right = [cols[i] in _BYTES | _SIGNED | _COUNTS or cols[i] == "cleanliness" for i in keep]

    def line(values: list[str]) -> str:
        cells = []
        for value, width, r in zip(values, widths, right, strict=True):
            pad = " " * (width - columns(value))
            cells.append(pad + value if r else value + pad)
        return "  ".join(cells).rstrip()

    return [line(head), *(line(r) for r in body)]


def render_answer(answer: FleetAnswer) -> str:
    """Every question of ``answer`` as a titled table, then what was not read."""
    out = []
    for name, (cols, rows) in answer.tables.items():
        out.append(f"{TITLES.get(name, name)} — {answer.dest} ({answer.engine})")
        out.extend(_table(cols, rows) if rows else ["  (none)"])
        out.append("")
    for s in answer.skipped:
        out.append(f"not read [{s.code}]: {s.partition}: {s.message}")
    return "\n".join(out).rstrip()
