"""The formatting rules people read everywhere: units, counts, ages, dates, paths."""

from __future__ import annotations

import unicodedata
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from hygiene_nb import formatting, render
from hygiene_nb.formatting import (
    ELLIPSIS,
    bytes_html,
    bytes_with_exact,
    counted,
    display_path,
    exact_bytes,
    human_age,
    human_bytes,
    human_date,
    human_datetime,
    middle_ellipsis,
    percent,
    plural,
    progress_line,
    relative_to_root,
    signed_bytes,
    signed_count,
    signed_exact_bytes,
    thousands,
)
from hygiene_nb.pathnames import shown

KIB, MIB, GIB, TIB = 1024, 1024**2, 1024**3, 1024**4


@pytest.mark.parametrize(
    ("n", "text"),
    [
        (None, "unknown"),
        (0, "0 B"),
        (512, "512 B"),
        (1023, "1023 B"),
        (KIB, "1.0 KiB"),
        (KIB + 51, "1.0 KiB"),  # 1.0498 KiB
        (KIB + 52, "1.1 KiB"),  # 1.0508 KiB
        (MIB - 52, "1023.9 KiB"),
        (MIB - 51, "1.0 MiB"),  # would round to 1024.0 KiB: the next unit instead
        (MIB, "1.0 MiB"),
        (int(1.4 * GIB), "1.4 GiB"),
        (TIB, "1.0 TiB"),
        (1024 * TIB, "1.0 PiB"),
        (1024**7, "1024.0 EiB"),  # no unit past EiB
        (-3 * MIB, "-3.0 MiB"),
        (-1023, "-1023 B"),
    ],
)
def test_bytes_read_in_binary_units_at_every_boundary(n: int | None, text: str) -> None:
    assert human_bytes(n) == text


def test_a_change_in_bytes_carries_its_sign() -> None:
    assert signed_bytes(3 * MIB) == "+3.0 MiB"
    assert signed_bytes(-3 * MIB) == "-3.0 MiB"
    assert signed_bytes(0) == "0 B"
    assert signed_bytes(None) == "unknown"


def test_exact_bytes_and_thousands_give_every_digit() -> None:
    assert exact_bytes(1234567) == "1,234,567 bytes"
    assert exact_bytes(1) == "1 byte"
    assert thousands(1234567) == "1,234,567"
    assert thousands(0) == "0"
    assert thousands(None) == "unknown" == exact_bytes(None)
    assert percent(0.1234) == "12.3%" and percent(None) == "-"


def test_a_hover_gives_both_sizes_and_html_puts_every_byte_in_the_title() -> None:
    n = int(1.4 * GIB)
    assert bytes_with_exact(n) == f"{human_bytes(n)} ({exact_bytes(n)})"
    assert bytes_with_exact(n) == "1.4 GiB (1,503,238,553 bytes)"
    assert bytes_with_exact(None) == "unknown" == bytes_html(None)
    assert bytes_html(n) == '<span title="1,503,238,553 bytes">1.4 GiB</span>'
    assert bytes_html(3 * MIB, signed=True) == '<span title="+3,145,728 bytes">+3.0 MiB</span>'
    assert bytes_html(-1, signed=True) == '<span title="-1 bytes">-1 B</span>'
    assert bytes_html(0, signed=True) == '<span title="0 bytes">0 B</span>'


def test_a_change_in_every_byte_carries_the_same_sign() -> None:
    for n in (3 * MIB, -12, 0, 1):
        said = signed_exact_bytes(n)
        assert said.replace("+", "", 1) == exact_bytes(n)
        assert said[0] == ("+" if n > 0 else "-" if n < 0 else "0")
        assert signed_bytes(n)[0] == said[0]  # the short and the exact form agree on the sign
    assert signed_exact_bytes(None) == "unknown"


def test_a_change_in_a_count_carries_its_sign() -> None:
    assert signed_count(3) == "+3" and signed_count(-1200) == "-1,200"
    assert signed_count(0) == "0" and signed_count(None) == "unknown"


@pytest.mark.parametrize(
    ("share", "text"),
    [
        (0, "0.0%"),
        (0.0004, "< 0.1%"),  # something is never nothing
        (0.0005, "0.1%"),
        (0.9994, "99.9%"),
        (0.99996, "99.9%"),  # short of the whole is never the whole
        (1, "100.0%"),
    ],
)
def test_a_share_reads_nothing_or_all_only_when_it_is(share: float, text: str) -> None:
    assert percent(share) == text


def test_an_unknown_count_is_unknown_not_zero() -> None:
    assert counted(None, "file") == "unknown" == counted(float("nan"), "file")
    assert counted(2.0, "file") == "2 files"


def test_missing_values_from_a_frame_read_unknown_not_zero() -> None:
    pd = pytest.importorskip("pandas")
    assert human_bytes(pd.NA) == "unknown" == human_bytes(float("nan"))
    assert human_date(pd.NaT) == "-"
    assert human_date(pd.Timestamp("2026-12-02 23:59", tz="UTC")) == "2026-12-02"


def test_nouns_agree_with_their_number_and_render_shares_them() -> None:
    assert [counted(n, "file") for n in (0, 1, 2)] == ["0 files", "1 file", "2 files"]
    assert counted(1234, "entry") == "1,234 entries"  # "entry" knows its plural
    assert counted(1, "entry") == "1 entry"
    assert counted(2, "directory", "directories") == "2 directories"
    assert plural(1, "file") == "file" and plural(3, "file") == "files"
    assert plural(2, "child", "children") == "children"
    # one implementation: render's names are formatting's
    assert render.counted is counted and render.human_bytes is human_bytes
    assert render.noun_for is formatting.noun_for and render.shown is shown


@pytest.mark.parametrize(
    ("days", "text"),
    [
        (None, "unknown"),
        (-0.5, "in the future"),
        (0, "under a day"),
        (0.99, "under a day"),
        (1, "1 day"),
        (1.99, "1 day"),
        (2, "2 days"),
        (13.9, "13 days"),
        (14, "2 weeks"),
        (20.9, "2 weeks"),
        (21, "3 weeks"),
        (60.9, "8 weeks"),
        (61, "2 months"),
        (364.9, "11 months"),
        (365, "1 year"),
        (365.25 * 1.44, "1.4 years"),
        (365.25 * 2.4, "2.4 years"),
        (365.25 * 10, "10 years"),
    ],
)
def test_ages_at_their_thresholds(days: float | None, text: str) -> None:
    assert human_age(days) == text


def test_dates_are_days_and_times_in_utc() -> None:
    moment = datetime(2026, 12, 2, 1, 12, 20, 123000, tzinfo=UTC)
    assert human_date(moment) == "2026-12-02"
    assert human_date(moment.isoformat()) == "2026-12-02"
    assert human_datetime(moment) == "2026-12-02 01:12"
    assert human_datetime(moment, seconds=True) == "2026-12-02 01:12:20"
    # another zone is shown in UTC; a bare time is taken as UTC
    east = moment.astimezone(timezone(timedelta(hours=5)))
    assert human_datetime(east) == "2026-12-02 01:12"
    assert human_datetime("2026-12-02T01:12:20") == "2026-12-02 01:12"
    assert human_date(moment.timestamp()) == "2026-12-02"
    assert human_date(None) == "-" == human_datetime(None) == human_date("")
    # a damaged record is shown as it is, escaped, never an exception
    assert human_datetime("yesterday\x1b[2J") == "yesterday\\x1b[2J"


LONG = "/usr/lib/python3/dist-packages/site-packages/pandas/tests"


def test_a_path_that_fits_is_untouched() -> None:
    assert middle_ellipsis(LONG, len(LONG)) == LONG
    assert middle_ellipsis("a/b", 80) == "a/b"
    assert middle_ellipsis("", 5) == ""


def test_a_long_path_keeps_its_tail_then_as_much_head_as_fits() -> None:
    assert middle_ellipsis(LONG, 28) == "…/site-packages/pandas/tests"
    assert middle_ellipsis(LONG, 20) == "/usr/…/pandas/tests"
    assert middle_ellipsis(LONG, 40) == "/usr/lib/…/site-packages/pandas/tests"
    # a last name longer than the width keeps its end, where an extension is
    assert middle_ellipsis("/d/a-very-long-name.txt", 10) == "…-name.txt"
    assert middle_ellipsis(LONG, 1) == ELLIPSIS
    assert middle_ellipsis(LONG, 0) == ""


def test_unicode_names_are_counted_and_cut_in_characters() -> None:
    path = "/données/名前/ファイル名がとても長い.txt"
    cut = middle_ellipsis(path, 12)
    assert len(cut) <= 12 and cut.endswith(".txt") and path.endswith(cut[1:])
    assert middle_ellipsis("/données/名前", 20) == "/données/名前"
    # a combining accent is never separated from its letter
    combining = unicodedata.normalize("NFD", "/x/aé" + "é" * 6)
    for width in range(2, len(combining)):
        fitted = middle_ellipsis(combining, width)
        assert not unicodedata.combining(fitted.lstrip(ELLIPSIS)[:1] or "x")


def _columns(text: str) -> int:
    """Terminal columns: a wide or fullwidth character two, a combining mark none."""
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in ("W", "F") else 1
        for c in text
    )


def test_wide_characters_take_two_columns() -> None:
    assert middle_ellipsis("/données/名前", 20) == "/données/名前"
    assert _columns(middle_ellipsis("/a/" + "漢" * 30 + "/字字", 11)) <= 11
    assert middle_ellipsis("/a/" + "漢" * 30 + "/字字", 11).endswith("/字字")


def _name() -> st.SearchStrategy[str]:
    return st.text(st.characters(blacklist_characters="/"), min_size=1, max_size=12)


@settings(max_examples=500, deadline=None)
@given(st.lists(_name(), min_size=1, max_size=8), st.booleans(), st.integers(0, 80))
@example(["abc"], True, 1)
@example(["a" * 12, "b"], False, 2)
def test_middle_ellipsis_respects_the_width_and_keeps_the_tail(
    names: list[str], absolute: bool, width: int
) -> None:
    path = ("/" if absolute else "") + "/".join(names)
    fitted = middle_ellipsis(path, width)
    assert _columns(fitted) <= width
    if _columns(path) <= width:
        assert fitted == path
    elif width:
        head, sep, tail = fitted.partition(ELLIPSIS)
        assert sep and path.endswith(tail) and path.startswith(head)
        # never only an ellipsis once there is room for more: a last character wider than
        # the room beside the ellipsis is the one case with nothing to keep
        assert tail or width == 1 or _columns(path[-1]) > width - len(ELLIPSIS)


@given(st.lists(st.text(min_size=1, max_size=10).map(lambda t: t.strip("/") or "n"), min_size=1,
                max_size=6), st.integers(1, 60))  # fmt: skip
def test_display_paths_never_show_a_raw_control_character(names: list[str], width: int) -> None:
    fitted = display_path("/root/" + "/".join(names), "/root", width)
    assert len(fitted) <= width
    assert fitted == shown(fitted)  # nothing left to escape


def test_display_path_is_relative_escaped_and_fitted() -> None:
    root = "/srv/data"
    assert relative_to_root("/srv/data/a/b", root) == "a/b"
    assert relative_to_root("/srv/data", root) == "." == relative_to_root("/srv/data", "/srv/data/")
    assert relative_to_root("/srv/database", root) == "/srv/database"  # a sibling, not under it
    assert relative_to_root("/etc", "/") == "etc"
    assert relative_to_root("/etc", None) == "/etc"
    assert display_path(b"/srv/data/caf\xe9\n", root) == "caf\\xe9\\n"  # exact bytes, as shown
    hostile = "/srv/data/logs/evil\nline\x1b[2J.log"
    assert display_path(hostile, root) == "logs/evil\\nline\\x1b[2J.log"
    # the escape is measured, and never cut through
    for width in range(1, 30):
        fitted = display_path(hostile, root, width)
        assert len(fitted) <= width
        assert "\x1b" not in fitted and "\n" not in fitted
        assert not fitted.startswith(ELLIPSIS + "x1b") and not fitted.endswith("\\")


def test_the_progress_line_never_outgrows_the_terminal() -> None:
    for width in (10, 40, 80, 200):
        line = progress_line(1234567, 3 * GIB, "/srv/data/" + "deep/" * 30 + "leaf", width,
                             root="/srv/data")  # fmt: skip
        assert len(line) <= width - 1
    line = progress_line(1234567, 3 * GIB, "/srv/data/a/leaf", 80, root="/srv/data")
    assert line == "scanning 1,234,567 entries, 3.0 GiB  a/leaf"
    assert progress_line(1, 0, "/srv/data", 80, root="/srv/data").endswith("  /srv/data")
