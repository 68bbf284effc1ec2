"""Tables for people: binary units, thousands separators, dates, no index column, no ``<NA>``.

``table`` displays a frame as HTML (the same bytes every run: no random ids) or, when it has
no rows, the one sentence given for that case instead of a header-only table.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable, Mapping
from typing import Any

import pandas as pd

from hygiene_nb import formatting as fmt

__all__ = [
    "BYTE_COLUMNS",
    "HEADERS",
    "NUMBER_STYLE",
    "SIGNED_COLUMNS",
    "header",
    "table",
    "table_html",
]

# columns holding byte counts, by name (also any column whose name ends in "bytes")
BYTE_COLUMNS = frozenset(
    {
        "alloc",
        "fs_free",
        "fs_total",
        "delta",
        "size",
        "tree_alloc",
        "free",
        "reclaim",
        "reclaimable_cumulative",
    }
)
# byte columns that hold a change between two scans: written with their sign, + or -
SIGNED_COLUMNS = frozenset({"delta"})
# what the views' columns are called for people; any other snake_case name reads with spaces
HEADERS = {
    "alloc": "allocated",
    "tree_alloc": "allocated",
    "fs_free": "free space",
    "fs_total": "filesystem size",
    "scanned_at": "scanned at",
    "old_bytes": "bytes before",
    "new_bytes": "bytes after",
    "delta": "change",
    "reclaimable_cumulative": "reclaimable up to this level",
}
_MISSING = "—"
_PATH_WIDTH = 64  # characters of a path in a cell; the whole path is on hover


def _is_missing(value: Any) -> bool:
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def _bytes(value: Any) -> str:
    if _is_missing(value):
        return _MISSING
    if isinstance(value, str):  # already said for people (a view's own formatting)
        return html.escape(value)
    return fmt.bytes_html(int(value))


def _signed_bytes(value: Any) -> str:
    if _is_missing(value):
        return _MISSING
    if isinstance(value, str):
        return html.escape(value)
    return fmt.bytes_html(int(value), signed=True)


def _number(value: Any) -> str:
    if _is_missing(value):
        return _MISSING
    if isinstance(value, str):
        return html.escape(value)
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return fmt.thousands(value)


def _date(value: Any) -> str:
    if _is_missing(value):
        return _MISSING
    at = pd.Timestamp(value)
    return fmt.human_datetime(at) + (" UTC" if at.tzinfo is not None else "")


def _text(value: Any, root: str | None = None) -> str:
    if value is None or _is_missing(value):
        return _MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    text = str(value)
    under = root is not None and fmt.relative_to_root(text, root) != text
    if under or (len(text) > 80 and "/" in text and " " not in text):  # a path: its ends tell
        said = fmt.display_path(text, root, _PATH_WIDTH)
        return f'<span title="{html.escape(fmt.shown(text))}">{html.escape(said)}</span>'
    # any other text: control characters escaped as in paths; a long one cut in the middle
    said = fmt.shown(text)
    if fmt.columns(said) > _PATH_WIDTH:
        cut = fmt.middle_ellipsis(said, _PATH_WIDTH)
        return f'<span title="{html.escape(said)}">{html.escape(cut)}</span>'
    return html.escape(said)


# a cell holding a number, a size or a share: right-aligned, never broken across lines, its
# digits of one width so that a column of them lines up (a narrow window wraps the text
# columns instead)
NUMBER_STYLE = "text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums"
_TEXT_CELL = '<td style="text-align:left">'
# what a cell said for people looks like when it is a number: 1,234 / +1.2 MiB / 12.3% / < 0.1%
_NUMBER_TEXT = re.compile(r"^(< )?[+-]?[\d,]+(\.\d+)?( ([KMGTPE]i)?B|%)?$")


def _number_column(name: str, column: pd.Series) -> bool:
    """Whether ``column`` holds numbers: by its type, its name (bytes), or every value's text."""
    if pd.api.types.is_bool_dtype(column):
        return False
    if pd.api.types.is_numeric_dtype(column):
        return True
    if name in SIGNED_COLUMNS or name.endswith("bytes") or name in BYTE_COLUMNS:
        return True
    said = [v for v in column if isinstance(v, str) and v]
    return bool(said) and all(_NUMBER_TEXT.match(v) for v in said)


def header(name: str) -> str:
    """A column's header for people: ``HEADERS``, else its name with spaces for underscores."""
    return HEADERS.get(name, name.replace("_", " "))


def _formatter(name: str, column: pd.Series, root: str | None) -> Callable[[Any], str]:
    if name in SIGNED_COLUMNS:
        return _signed_bytes
    if name.endswith("bytes") or name in BYTE_COLUMNS:
        return _bytes
    if pd.api.types.is_datetime64_any_dtype(column):
        return _date
    if pd.api.types.is_bool_dtype(column):
        return _text
    if pd.api.types.is_numeric_dtype(column):
        return _number
    return lambda value: _text(value, root)


def table_html(
    frame: pd.DataFrame,
    formats: Mapping[str, Callable[[Any], str]] | None = None,
    *,
    root: str | None = None,
) -> str:
    """``frame`` as an HTML table: no index, bytes in binary units (exact on hover).

    Headers are said in words (``header``: ``fs_free`` reads ``free space``); ``formats``
    maps a column's name to how its cells are written.

    With ``root`` (by default the frame's ``attrs["root"]``, when it has one), paths under it
    are shown relative to it, shortened in the middle (the full path on hover).
    """
    formats = formats or {}
    if root is None and isinstance(frame.attrs.get("root"), str):
        root = frame.attrs["root"]  # a frame that knows its root (``views.owners_frame``)
    columns = [str(c) for c in frame.columns]
    cells = {
        name: formats.get(name) or _formatter(name, frame[column], root)
        for name, column in zip(columns, frame.columns, strict=True)
    }
    numeric = {
        name
        for name, column in zip(columns, frame.columns, strict=True)
        if _number_column(name, frame[column])
    }
    head = "".join(
        f'<th style="text-align:{"right" if n in numeric else "left"}">'
        f"{html.escape(header(n))}</th>"
        for n in columns
    )
    body = "".join(
        "<tr>"
        + "".join(
            (f'<td class="num" style="{NUMBER_STYLE}">' if n in numeric else _TEXT_CELL)
            + f"{cells[n](v)}</td>"
            for n, v in zip(columns, row, strict=True)
        )
        + "</tr>"
        for row in frame.itertuples(index=False, name=None)
    )
    return (
        '<table class="dataframe hnb-table"><thead><tr>'
        f"{head}</tr></thead><tbody>{body}</tbody></table>"
    )


def table(
    frame: pd.DataFrame,
    *,
    empty: str,
    formats: Mapping[str, Callable[[Any], str]] | None = None,
    root: str | None = None,
) -> None:
    """Display ``frame`` as a table, or the sentence ``empty`` when it has no rows.

    With ``root``, paths under it are shown relative to it (the full path on hover).
    """
    from IPython.display import HTML, Markdown, display

    if not len(frame):
        display(Markdown(empty))
    else:
        display(HTML(table_html(frame, formats, root=root)))
