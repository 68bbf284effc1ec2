"""Exclude matching for the pure-Python walker: fnmatch(3) on bytes, as the C walker calls it.

Rules with ``globstar`` (git's ``**`` components) cut the pattern at them and match the
segments between with the same fnmatch, over whole path components, as the C walker does.

The C walker calls glibc's ``fnmatch`` in the C locale (one byte is one character, ranges compare
byte values, no collation names). ``fnmatch_bytes`` gives the same answer for every pattern,
including the odd ones: a trailing backslash matches nothing, an unterminated ``[`` is a literal
``[``, an unknown ``[:class:]`` makes the bracket fail. It translates a pattern into a regular
expression once (cached); a bracket expression is evaluated for each of the 256 byte values the
way glibc reads it, so what it matches is a set of bytes.
"""

from __future__ import annotations

import os
import re
from functools import lru_cache

from hygiene_nb.scan.walk.spec import ExcludeRule

__all__ = ["fnmatch_bytes", "globstar_match", "is_excluded"]

_STAR, _QUESTION, _BACKSLASH = ord("*"), ord("?"), ord("\\")
_OPEN, _CLOSE, _SLASH = ord("["), ord("]"), ord("/")
_COLON, _EQUALS, _DOT, _DASH = ord(":"), ord("="), ord("."), ord("-")
_NOT = frozenset({ord("!")} if os.environ.get("POSIXLY_CORRECT") is not None else b"!^")
_END = -1  # what glibc reads past the pattern's end (its NUL)
_CLASS_NAME_MAX = 2048  # glibc's CHARCLASS_NAME_MAX: a longer [:name: fails
_NEVER = rb"(?!)"


_LOWER, _UPPER = frozenset(range(97, 123)), frozenset(range(65, 91))
_DIGIT = frozenset(range(48, 58))
_PRINT = frozenset(range(32, 127))
_SPACE = frozenset(b" \t\n\v\f\r")
# The character classes of the C locale (ASCII only; bytes >= 0x80 are in none).
_CLASSES: dict[bytes, frozenset[int]] = {
    b"alnum": _LOWER | _UPPER | _DIGIT,
    b"alpha": _LOWER | _UPPER,
    b"blank": frozenset(b" \t"),
    b"cntrl": frozenset(range(32)) | {127},
    b"digit": _DIGIT,
    b"graph": _PRINT - {32},
    b"lower": _LOWER,
    b"print": _PRINT,
    b"punct": _PRINT - {32} - _LOWER - _UPPER - _DIGIT,
    b"space": _SPACE,
    b"upper": _UPPER,
    b"xdigit": _DIGIT | frozenset(b"abcdefABCDEF"),
}

# How reading a bracket expression for one text byte ends.
_HIT, _MISS, _CLOSED, _UNTERMINATED, _FAIL = range(5)
_Step = tuple[int, int]  # (one of the above, the pattern index reading resumes at)


def _at(pattern: bytes, i: int) -> int:
    return pattern[i] if i < len(pattern) else _END


def _collating_symbol(pattern: bytes, i: int) -> tuple[int, int] | None:
    """``[.c.]`` starting at ``pattern[i]``: (c, index after it); None when malformed.

    In the C locale only a one-character name exists.
    """
    close = pattern.find(b".]", i + 2)
    if close != i + 3:
        return None
    return pattern[i + 2], close + 2


def _range_end(pattern: bytes, i: int) -> tuple[int, int] | None:
    """The upper bound of a range read at ``pattern[i]`` (after the ``-``), or None (fail)."""
    end = _at(pattern, i)
    if end == _OPEN and _at(pattern, i + 1) == _DOT:
        return _collating_symbol(pattern, i)
    if end == _BACKSLASH:
        i += 1
        end = _at(pattern, i)
    if end == _END:
        return None
    return end, i + 1


def _char_or_range(pattern: bytes, low: int, i: int, byte: int, *, direct: bool) -> _Step:
    """A character ``low`` read before ``pattern[i]``, possibly the start of ``low-high``."""
    if direct and byte == low:
        return _HIT, i
    if _at(pattern, i) != _DASH or _at(pattern, i + 1) == _CLOSE:
        return _MISS, i
    bound = _range_end(pattern, i + 1)
    if bound is None:
        return _FAIL, i
    high, after = bound
    return (_HIT if low <= byte <= high else _MISS), after


def _plain(pattern: bytes, low: int, i: int, byte: int) -> _Step:
    """A character in a bracket; it matches by itself unless a range starts after it."""
    is_range = _at(pattern, i) == _DASH and _at(pattern, i + 1) not in (_END, _CLOSE)
    return _char_or_range(pattern, low, i, byte, direct=not is_range)


def _char_class(pattern: bytes, i: int, byte: int) -> _Step:
    """``[:name:]`` at ``pattern[i]``; a ``[:`` that cannot be a name is a plain ``[``."""
    j = i + 2
    while not (_at(pattern, j) == _COLON and _at(pattern, j + 1) == _CLOSE):
        if j - i - 2 == _CLASS_NAME_MAX:
            return _FAIL, j
        if not ord("a") <= _at(pattern, j) < ord("z"):
            return _plain(pattern, _OPEN, i + 1, byte)
        j += 1
    members = _CLASSES.get(pattern[i + 2 : j])
    if members is None:
        return _FAIL, j
    return (_HIT if byte in members else _MISS), j + 2


def _equivalence_class(pattern: bytes, i: int, byte: int) -> _Step:
    """``[=c=]`` at ``pattern[i]`` (in the C locale: c itself); else a plain ``[``."""
    if i + 2 >= len(pattern) or pattern[i + 3 : i + 5] != b"=]":
        return _plain(pattern, _OPEN, i + 1, byte)
    return (_HIT if byte == pattern[i + 2] else _MISS), i + 5


def _collating_item(pattern: bytes, i: int, byte: int) -> _Step:
    symbol = _collating_symbol(pattern, i)
    if symbol is None:
        return _FAIL, i
    low, after = symbol
    is_range = _at(pattern, after) == _DASH and _at(pattern, after + 1) != _END
    return _char_or_range(pattern, low, after, byte, direct=not is_range)


def _item(pattern: bytes, i: int, byte: int) -> _Step:
    """Read one item of a bracket expression at ``pattern[i]`` against ``byte``."""
    c, following = pattern[i], _at(pattern, i + 1)
    if c == _BACKSLASH:
        if following == _END:
            return _FAIL, i
        return _plain(pattern, following, i + 2, byte)
    if c == _OPEN and following == _COLON:
        return _char_class(pattern, i, byte)
    if c == _OPEN and following == _EQUALS:
        return _equivalence_class(pattern, i, byte)
    if c == _OPEN and following == _DOT:
        return _collating_item(pattern, i, byte)
    return _plain(pattern, c, i + 1, byte)


def _items(pattern: bytes, i: int, byte: int) -> _Step:
    """Read items from ``pattern[i]`` until one matches ``byte``, the ``]``, or the end."""
    while i < len(pattern):
        state, i = _item(pattern, i, byte)
        if state != _MISS:
            return state, i
        if _at(pattern, i) == _CLOSE:
            return _CLOSED, i + 1
    return _UNTERMINATED, i


def _skip_class_name(pattern: bytes, i: int) -> int | None:
    """Skip ``[:name:]`` after a match (``pattern[i]`` is the ``:``); None when it fails."""
    j = i + 1
    while j - i < _CLASS_NAME_MAX:
        if _at(pattern, j) == _COLON and _at(pattern, j + 1) == _CLOSE:
            return j + 2
        if not ord("a") <= _at(pattern, j) < ord("z"):
            return i
        j += 1
    return None


def _skip_bracketed(pattern: bytes, i: int) -> int | None:
    """Skip ``[:…:]``, ``[=…=]`` or ``[.….]`` after a match (``pattern[i]`` follows the ``[``)."""
    kind = pattern[i]
    if kind == _COLON:
        return _skip_class_name(pattern, i)
    if kind == _EQUALS:
        return i + 4 if i + 1 < len(pattern) and pattern[i + 2 : i + 4] == b"=]" else None
    close = pattern.find(b".]", i + 1)
    return None if close < 0 else close + 2


def _skip_rest(pattern: bytes, i: int) -> _Step:
    """Skip to the ``]`` of a bracket expression that already matched."""
    while i < len(pattern):
        c = pattern[i]
        i += 1
        if c == _CLOSE:
            return _CLOSED, i
        if c == _BACKSLASH:
            if i >= len(pattern):
                return _FAIL, i
            i += 1
        elif c == _OPEN and _at(pattern, i) in (_COLON, _EQUALS, _DOT):
            skipped = _skip_bracketed(pattern, i)
            if skipped is None:
                return _FAIL, i
            i = skipped
    return _UNTERMINATED, i


def _after_bracket(pattern: bytes, i: int, byte: int, *, pathname: bool) -> int | None:
    """Where matching goes on after the ``[`` at ``pattern[i]`` consumed ``byte`` (None: no)."""
    if pathname and byte == _SLASH:
        return None
    negate = _at(pattern, i + 1) in _NOT
    state, j = _items(pattern, i + 1 + negate, byte)
    if state == _HIT:
        state, j = _skip_rest(pattern, j)
        state = _FAIL if state == _CLOSED and negate else state
    elif state == _CLOSED and not negate:
        state = _FAIL
    if state == _UNTERMINATED:  # the '[' is an ordinary character
        return i + 1 if byte == _OPEN else None
    return None if state == _FAIL else j


def _byte_class(members: list[int]) -> bytes:
    """A regex character class of exactly ``members`` (sorted bytes)."""
    spans: list[list[int]] = []
    for b in members:
        if spans and spans[-1][1] == b - 1:
            spans[-1][1] = b
        else:
            spans.append([b, b])
    body = b"".join(
        b"\\x%02x" % low if low == high else b"\\x%02x-\\x%02x" % (low, high) for low, high in spans
    )
    return b"[" + body + b"]"


def _bracket(pattern: bytes, i: int, pathname: bool) -> tuple[bytes, int]:
    """The regex of the bracket expression at ``pattern[i]`` and the index after it.

    Almost always every matching byte resumes at the same index; when glibc's reading makes
    them resume at different places, the rest of the pattern is translated once for each.
    """
    resumes: dict[int, list[int]] = {}
    for byte in range(256):
        after = _after_bracket(pattern, i, byte, pathname=pathname)
        if after is not None:
            resumes.setdefault(after, []).append(byte)
    if not resumes:
        return _NEVER, len(pattern)
    if len(resumes) == 1:
        ((after, members),) = resumes.items()
        return _byte_class(members), after
    branches = [_byte_class(m) + _translate(pattern, a, pathname) for a, m in resumes.items()]
    return b"(?:" + b"|".join(branches) + b")", len(pattern)


def _star(pattern: bytes, i: int, pathname: bool) -> tuple[bytes, int]:
    r"""The ``*`` at ``pattern[i]``.

    With ``FNM_PATHNAME``, glibc looks for an escaped character after a ``*`` only before the
    text's next ``/``, so ``*\/`` (after any ``*`` and ``?``) never matches.
    """
    if not pathname:
        return rb".*", i + 1
    j = i + 1
    while _at(pattern, j) in (_STAR, _QUESTION):
        j += 1
    if pattern[j : j + 2] == b"\\/":
        return _NEVER, len(pattern)
    return rb"[^/]*", i + 1


def _piece(pattern: bytes, i: int, pathname: bool) -> tuple[bytes, int]:
    """The regex of the pattern element at ``pattern[i]`` and the index after it."""
    c = pattern[i]
    if c == _STAR:
        return _star(pattern, i, pathname)
    if c == _QUESTION:
        return (rb"[^/]" if pathname else rb"."), i + 1
    if c == _OPEN:
        return _bracket(pattern, i, pathname)
    if c != _BACKSLASH:
        return re.escape(pattern[i : i + 1]), i + 1
    if i + 1 == len(pattern):  # a trailing backslash matches nothing
        return _NEVER, i + 1
    return re.escape(pattern[i + 1 : i + 2]), i + 2


def _translate(pattern: bytes, i: int, pathname: bool) -> bytes:
    out: list[bytes] = []
    while i < len(pattern):
        piece, i = _piece(pattern, i, pathname)
        out.append(piece)
    return b"".join(out)


@lru_cache(maxsize=1024)
def _compile(pattern: bytes, pathname: bool) -> re.Pattern[bytes]:
    """Translate an fnmatch(3) pattern into a regex (``FNM_PATHNAME`` when ``pathname``)."""
    return re.compile(_translate(pattern, 0, pathname), re.DOTALL)


def fnmatch_bytes(pattern: bytes, text: bytes, *, pathname: bool) -> bool:
    """Match ``text`` against an fnmatch(3) ``pattern`` (no ``FNM_PERIOD``, C locale)."""
    return _compile(pattern, pathname).fullmatch(text) is not None


def _is_globstar(component: bytes) -> bool:
    return len(component) >= 2 and not component.strip(b"*")


@lru_cache(maxsize=1024)
def _globstar_parts(pattern: bytes) -> tuple[bool, tuple[bytes, ...], bool]:
    """Cut a pattern at its ``**`` components: (leading ``**``, segments, trailing ``**``).

    A segment is a run of other components joined by ``/``; consecutive ``**`` count as one.
    """
    components = pattern.split(b"/")
    segments: list[list[bytes]] = []
    opened = False
    for component in components:
        if _is_globstar(component):
            opened = False
        elif opened:
            segments[-1].append(component)
        else:
            segments.append([component])
            opened = True
    joined = tuple(b"/".join(segment) for segment in segments)
    return _is_globstar(components[0]), joined, _is_globstar(components[-1])


def _segment_ends(
    segment: bytes, parts: list[bytes], starts: set[int], *, pathname: bool
) -> set[int]:
    """The component indexes a segment can end at (exclusive), starting at any of ``starts``.

    With ``FNM_PATHNAME`` only a ``/`` of the pattern matches a ``/``, so a segment spans at
    most one component more than it has ``/``.
    """
    most = segment.count(b"/") + 1 if pathname else len(parts)
    return {
        end
        for start in starts
        for end in range(start + 1, min(start + most, len(parts)) + 1)
        if fnmatch_bytes(segment, b"/".join(parts[start:end]), pathname=pathname)
    }


def globstar_match(pattern: bytes, text: bytes, *, pathname: bool) -> bool:
    """Match ``text`` with git's ``**``: a ``**`` component spans zero or more components.

    A trailing ``**`` spans one or more; the segments between match runs of whole components
    with ``fnmatch_bytes`` (see ``spec``).
    """
    lead, segments, trail = _globstar_parts(pattern)
    parts = text.split(b"/")
    count = len(parts)
    if not segments:
        return count > 0
    starts = set(range(count)) if lead else {0}
    for index, segment in enumerate(segments):
        if index:  # an inner "**": any number of components in between
            starts = set(range(min(starts), count))
        starts = _segment_ends(segment, parts, starts, pathname=pathname)
        if not starts:
            return False
    if trail:
        return min(starts) < count
    return count in starts


def _rule_matches(rule: ExcludeRule, name: bytes, rel: bytes, is_dir: bool) -> bool:
    if rule.dir_only and not is_dir:
        return False
    target = rel if rule.anchored else name
    if rule.globstar:
        return globstar_match(rule.pattern, target, pathname=rule.pathname)
    return fnmatch_bytes(rule.pattern, target, pathname=rule.pathname)


def is_excluded(rules: tuple[ExcludeRule, ...], name: bytes, rel: bytes, is_dir: bool) -> bool:
    """Whether the last of ``rules`` that matches the entry excludes it (see ``spec``)."""
    for rule in reversed(rules):
        if _rule_matches(rule, name, rel, is_dir):
            return not rule.negate
    return False
