"""Numbers, ages, dates and paths made readable: the one place the CLI, notebooks and report share.

Pure Python, nothing heavy imported (the CLI's light commands load this module). The rules:

* **Bytes** in binary units, one decimal past bytes: ``512 B``, ``1.0 KiB``, ``1.4 GiB``, up to
  EiB. A value that would round to 1024 of a unit is shown in the next (``1.0 MiB``, never
  ``1024.0 KiB``). Unknown (``None``) reads ``unknown``, never ``0 B``. ``signed_bytes`` marks a
  change (``+1.2 MiB``, ``-3.0 MiB``, ``0 B``; ``signed_exact_bytes`` every byte of one), the
  one sign every surface writes (tables, charts, the headline, the CLI); ``exact_bytes``
  gives every byte for a hover or a title (``1,234,567 bytes``), ``bytes_with_exact`` both
  (``1.4 GiB (1,503,238,553 bytes)``) and ``bytes_html`` the short form with every byte in its
  ``title`` (HTML).
* **Counts** with thousands separators (``1,234,567``) and their noun in the right number
  (``1 file``, ``2 files``, ``1,234 entries``); an unknown count reads ``unknown``. A change in a
  count carries its sign (``+3``, ``-2``, ``0``).
* **Shares** as percentages with one decimal (``12.3%``): a share above 0 never reads ``0.0%``
  (``< 0.1%``), one below all never ``100.0%`` (``99.9%``).
* **Ages** from a number of days: under 1 day ``under a day``; under 14 days whole days
  (``1 day``, ``13 days``); under 61 days whole weeks (``2 weeks`` … ``8 weeks``); under 365
  days whole months of 30.44 days (``2 months`` … ``11 months``); from 365 days years with one
  decimal, the decimal dropped when it is 0 (``1 year``, ``2.4 years``). A negative age (an
  mtime in the future) reads ``in the future``.
* **Dates** as ``2026-12-02`` (``human_datetime``: ``2026-12-02 01:12``, UTC); a missing
  date reads ``-``.
* **Paths** relative to the root they were scanned under, their control characters escaped
  (``pathnames.shown``: a name cannot forge a line or drive the terminal) and, to fit a width,
  shortened in the middle: the tail, the most specific part, is kept in whole components, then
  as many whole leading components as still fit (``/usr/…/site-packages/pandas/tests``). A width
  counts characters (code points); a cut never splits an escape or a combining mark from its
  base character.
"""

from __future__ import annotations

import html
import math
import unicodedata
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

from hygiene_nb.pathnames import shown

__all__ = [
    "ELLIPSIS",
    "bytes_html",
    "bytes_with_exact",
    "counted",
    "display_path",
    "exact_bytes",
    "human_age",
    "human_bytes",
    "human_date",
    "human_datetime",
    "middle_ellipsis",
    "noun_for",
    "percent",
    "plural",
    "progress_line",
    "relative_to_root",
    "shown",
    "signed_bytes",
    "signed_count",
    "signed_exact_bytes",
    "thousands",
]

ELLIPSIS = "…"
_UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")


def _missing(value: Any) -> bool:
    """None, NaN, or a pandas NA/NaT (told apart without importing pandas)."""
    if value is None:
        return True
    if isinstance(value, float):
        return math.isnan(value)
    return type(value).__name__ in ("NAType", "NaTType")


def human_bytes(n: int | float | None) -> str:
    """``1536`` → ``1.5 KiB``; ``512`` → ``512 B``; ``None`` (unknown) → ``unknown``."""
    if _missing(n):
        return "unknown"
    assert n is not None
    if abs(n) < 1024:
        return f"{int(n)} B"
    value = float(n)
    for unit in _UNITS:
        value /= 1024
        if abs(round(value, 1)) < 1024 or unit == _UNITS[-1]:
            return f"{value:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover -- the last unit always returns


def signed_bytes(n: int | float | None) -> str:
    """A change in bytes: ``+1.2 MiB``, ``-3.0 MiB``; no change is ``0 B``."""
    if _missing(n):
        return "unknown"
    assert n is not None
    return ("+" if n > 0 else "") + human_bytes(n)


def signed_exact_bytes(n: int | float | None) -> str:
    """A change in every byte, for a hover: ``+1,234,567 bytes``, ``-12 bytes``, ``0 bytes``."""
    if _missing(n):
        return "unknown"
    assert n is not None
    return ("+" if n > 0 else "") + exact_bytes(n)


def thousands(n: int | float | None) -> str:
    """``1234567`` → ``1,234,567``; ``None`` → ``unknown``."""
    if _missing(n):
        return "unknown"
    assert n is not None
    return f"{int(n):,}"


def exact_bytes(n: int | float | None) -> str:
    """Every byte, for a hover or a title: ``1,234,567 bytes``, ``1 byte``."""
    if _missing(n):
        return "unknown"
    assert n is not None
    return counted(int(n), "byte")


def bytes_with_exact(n: int | float | None) -> str:
    """Both sizes, for a hover: ``1.4 GiB (1,503,238,553 bytes)``; ``None`` → ``unknown``."""
    if _missing(n):
        return "unknown"
    return f"{human_bytes(n)} ({exact_bytes(n)})"


def bytes_html(n: int | float | None, *, signed: bool = False) -> str:
    """HTML: ``1.4 GiB`` (``+1.4 GiB`` with ``signed``), every byte in its ``title``.

    ``<span title="1,503,238,553 bytes">1.4 GiB</span>``; unknown reads ``unknown``, no title.
    """
    if _missing(n):
        return "unknown"
    assert n is not None
    said = signed_bytes(n) if signed else human_bytes(n)
    exact = signed_exact_bytes(n) if signed else exact_bytes(n)
    return f'<span title="{html.escape(exact)}">{html.escape(said)}</span>'


def signed_count(n: int | float | None) -> str:
    """A change in a count: ``+3``, ``-1,200``; no change is ``0``."""
    if _missing(n):
        return "unknown"
    assert n is not None
    return ("+" if n > 0 else "") + thousands(n)


def noun_for(n: int, noun: str, plural: str = "") -> str:
    """The noun for ``n`` things: ``noun`` for one, else ``plural`` (default: ``noun`` + s)."""
    return noun if n == 1 else plural or noun + "s"


def plural(n: int, noun: str, plural: str | None = None) -> str:
    """The noun alone, in the number ``n`` calls for (``plural`` default: ``noun`` + s)."""
    return noun_for(n, noun, plural or "")


def counted(n: int | float | None, noun: str, plural: str = "") -> str:
    """``n`` with its noun in the right number: ``1 file``, ``2 files``, ``1,234 entries``.

    An unknown count (``None``, NaN, NA) reads ``unknown``: never ``0 files``.
    """
    if _missing(n):
        return "unknown"
    assert n is not None
    if not plural and noun == "entry":
        plural = "entries"
    return f"{int(n):,} {noun_for(int(n), noun, plural)}"


def percent(share: float | None, digits: int = 1) -> str:
    """A share of 1 as a percentage: ``0.1234`` → ``12.3%``; unknown → ``-``.

    A share that would round to nothing or to the whole says so only when it is: above 0 it
    reads at least ``< 0.1%``, below 1 at most ``99.9%``.
    """
    if _missing(share):
        return "-"
    assert share is not None
    value, step = float(share) * 100, 10.0**-digits
    if 0 < value < step / 2:
        return f"< {step:.{digits}f}%"
    if value < 100 and round(value, digits) >= 100:
        value = 100 - step
    return f"{value:.{digits}f}%"


def human_age(days: float | None) -> str:
    """An age in days for people (thresholds in the module docstring): ``3 days``, ``2.4 years``."""
    if _missing(days):
        return "unknown"
    assert days is not None
    if days < 0:
        return "in the future"
    if days < 1:
        return "under a day"
    if days < 14:
        return counted(int(days), "day")
    if days < 61:
        return counted(int(days // 7), "week")
    if days < 365:
        return counted(min(int(days / 30.44), 11), "month")
    years = round(days / 365.25, 1)
    text = f"{years:.0f}" if years == int(years) else f"{years:.1f}"
    return f"{text} {'year' if text == '1' else 'years'}"


def _as_datetime(ts: Any) -> datetime | str | None:
    """A datetime (UTC) from a datetime, a date, an ISO-8601 string or epoch seconds.

    A string that is not ISO-8601 (a damaged record) comes back as it is, to be shown escaped:
    formatting never fails on what it is given to show.
    """
    if _missing(ts) or ts == "":
        return None
    if isinstance(ts, datetime):
        moment = ts
    elif isinstance(ts, date):
        moment = datetime(ts.year, ts.month, ts.day, tzinfo=UTC)
    elif isinstance(ts, int | float):
        moment = datetime.fromtimestamp(ts, UTC)
    elif isinstance(ts, str):
        try:
            moment = datetime.fromisoformat(ts)
        except ValueError:
            return ts
    else:
        raise TypeError(f"not a date: {ts!r}")
    return moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)


def human_date(ts: Any) -> str:
    """The day of ``ts`` (UTC): ``2026-12-02``; a missing date is ``-``."""
    moment = _as_datetime(ts)
    if moment is None or isinstance(moment, str):
        return shown(moment or "-")
    return f"{moment:%Y-%m-%d}"


def human_datetime(ts: Any, *, seconds: bool = False) -> str:
    """The day and time of ``ts`` (UTC): ``2026-12-02 01:12`` (``:20`` more with ``seconds``)."""
    moment = _as_datetime(ts)
    if moment is None or isinstance(moment, str):
        return shown(moment or "-")
    return f"{moment:%Y-%m-%d %H:%M:%S}" if seconds else f"{moment:%Y-%m-%d %H:%M}"


def relative_to_root(path: str, root: str | None) -> str:
    """``path`` as it lies under ``root`` (``.`` for the root; the whole path when not under it)."""
    if not root:
        return path
    base = root.rstrip("/") + "/"
    if path in (root, base) or path + "/" == base:
        return "."
    return path[len(base) :] if path.startswith(base) else path


def columns(text: str) -> int:
    """How many terminal columns ``text`` takes.

    A wide (CJK) character two, a combining mark none, every other character one: what
    ``wcwidth`` says for printable text, which is all a shown path holds.
    """
    return sum(
        0 if unicodedata.combining(ch) else 2 if unicodedata.east_asian_width(ch) in "WF" else 1
        for ch in text
    )


def _tail(text: str, width: int) -> str:
    """The last ``width`` characters of ``text`` or fewer: a cut never strands a combining mark."""
    start = max(len(text) - width, 0)
    while 0 < start < len(text) and unicodedata.combining(text[start]):
        start += 1
    return text[start:]


def _same(text: str) -> str:
    return text


def _cut_name(name: str, room: int, show: Callable[[str], str]) -> str:
    """The end of one name, shown, in at most ``room`` characters (an escape is never split)."""
    for keep in range(min(len(name), room), -1, -1):
        piece = show(_tail(name, keep))
        if columns(piece) <= room:
            return piece
    return ""  # pragma: no cover -- the empty tail always fits


def _fit(parts: list[str], width: int, show: Callable[[str], str] = _same) -> str:
    """``parts`` (names and ``/`` of a path) shown, shortened in the middle to ``width`` columns."""
    shown_parts = [show(p) for p in parts]
    whole = "".join(shown_parts)
    if columns(whole) <= width:
        return whole
    if width <= len(ELLIPSIS):
        return ELLIPSIS[:width]
    room = width - len(ELLIPSIS)
    # the tail: whole pieces from the end, as many as fit, starting at a separator
    first, used = len(parts), 0
    while first > 0 and used + columns(shown_parts[first - 1]) <= room:
        first -= 1
        used += columns(shown_parts[first])
    while first < len(parts) and parts[first] != "/":
        used -= columns(shown_parts[first])
        first += 1
    if first >= len(parts) - 1:  # not even the last name fits whole: keep its end
        names = [p for p in parts if p != "/"]
        return ELLIPSIS + _cut_name(names[-1] if names else "", room, show)
    # the head: the longest run of leading pieces that ends at a separator after a name
    head, size = 0, 0
    for i in range(first):
        size += columns(shown_parts[i])
        if used + size > room:
            break
        if parts[i] == "/" and i > 0:
            head = i + 1
    # "/usr/" + "…" + "/lib/x": the head's last separator is the tail's first one
    head_text = "".join(shown_parts[: head - 1]) + "/" if head else ""
    if head and used + columns(head_text) > room:  # pragma: no cover -- checked in the loop
        head_text = ""
    return head_text + ELLIPSIS + "".join(shown_parts[first:])


def _split(path: str) -> list[str]:
    """``/a/bc`` → ``["/", "a", "/", "bc"]``: names and separators, in order."""
    parts: list[str] = []
    for i, name in enumerate(path.split("/")):
        if i:
            parts.append("/")
        if name:
            parts.append(name)
    return parts


def middle_ellipsis(path: str, width: int) -> str:
    """``path`` in at most ``width`` characters, shortened in the middle (module docstring).

    A path that fits comes back untouched. Otherwise the tail is kept in whole names
    (``…/site-packages/pandas/tests``), then leading names that still fit
    (``/usr/…/pandas/tests``); a last name longer than the width keeps its end
    (``…ery-long-name.txt``).
    """
    return _fit(_split(path), width)


def display_path(path: str | bytes, root: str | None = None, width: int | None = None) -> str:
    r"""``path`` for people: relative to ``root``, control characters escaped, fit to ``width``.

    Each name is escaped before it is measured, and a cut falls between names or, in a name
    too long for the width, never inside an escape such as ``\x1b``. Exact path bytes are
    read as snapshots show them (a byte that is not UTF-8 as ``\xe9``).
    """
    if isinstance(path, bytes):
        path = path.decode("utf-8", "backslashreplace")
    relative = relative_to_root(path, root)
    if width is None:
        return shown(relative)
    return _fit(_split(relative), width, shown)


def progress_line(
    entries: int, nbytes: int, directory: str, width: int, *, root: str | None = None
) -> str:
    """The scan's terminal line: ``scanning 12,345 entries, 1.4 GiB  …/pandas/tests``.

    ``width`` is the terminal's; the line stays one column short of it, so that it never
    wraps, the directory (escaped, relative to ``root``) shortened in the middle to fit.
    """
    head = f"scanning {counted(entries, 'entry')}, {human_bytes(nbytes)}  "
    room = width - 1 - columns(head)
    if room < 8:
        return head.rstrip()[: max(width - 1, 0)]  # ASCII: a character is a column
    if root and relative_to_root(directory, root) == ".":
        return head + display_path(directory, None, room)  # the root itself, not "."
    return head + display_path(directory, root, room)
