"""Paths are taken as the kernel reads them: never ``.`` or ``..`` resolved as text.

After a symlink, ``link/..`` is the parent of the link's *target* for the kernel, while
``os.path.normpath`` makes it the directory holding the link. A path a person or a program
gives is therefore refused when it has such a component (``path-not-normal``), except at the
start of a relative path: those start at the working directory, whose physical path Python and
the kernel agree on.

A path is shown to people through ``shown``: its control characters escaped, so a name cannot
forge a line of output or drive the terminal.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from typing import Any

from hygiene_nb.errors import PathNotNormal

__all__ = [
    "has_dot_components",
    "path_b64",
    "raw_path",
    "require_no_dot_components",
    "shown",
    "within",
]

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")  # C0, DEL and C1
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def shown(text: str) -> str:
    r"""``text`` with every control character (C0, DEL, C1) escaped visibly, for people.

    A name with a newline could forge a line of output, an escape sequence drive the terminal;
    shown, they read ``\n``, ``\r``, ``\t``, ``\x1b``. Everything a name is printed through
    in text (the CLI, the Markdown plan) goes through here; JSON keeps the exact string.
    """
    return _CONTROL.sub(lambda m: _NAMED.get(m.group(), f"\\x{ord(m.group()):02x}"), text)


def has_dot_components(path: str | bytes) -> bool:
    """Whether ``path`` has a ``.`` or ``..`` component (past a relative path's leading ones)."""
    raw = path if isinstance(path, bytes) else os.fsencode(path)
    parts = raw.split(b"/")
    if not raw.startswith(b"/"):
        while parts and parts[0] in (b".", b".."):
            parts.pop(0)
    return any(part in (b".", b"..") for part in parts)


def require_no_dot_components(paths: list[str | bytes] | tuple[str | bytes, ...]) -> None:
    """Refuse the whole batch when one path has a ``.`` or ``..`` component.

    Raises:
        PathNotNormal: names up to three such paths and what to give instead.
    """
    bad = [p for p in paths if has_dot_components(p)]
    if bad:
        shown = (
            ", ".join(os.fsdecode(p) if isinstance(p, bytes) else p for p in bad[:3])
            .encode("utf-8", "backslashreplace")
            .decode("utf-8")
        )
        raise PathNotNormal(
            f"{shown}: a path with a '.' or '..' component is not taken as text, because after "
            "a symlink the kernel resolves it elsewhere; give the path without them (`realpath "
            "PATH` prints the one the kernel means); nothing was written."
        )


def raw_path(row: Mapping[str, Any]) -> bytes:
    """The exact path bytes of one snapshot row (non-UTF-8 names kept byte for byte)."""
    name = bytes(row["name_raw"] if row.get("name_raw") is not None else row["name"].encode())
    if row.get("parent") is None:
        return name
    parent = bytes(
        row["parent_raw"] if row.get("parent_raw") is not None else row["parent"].encode()
    )
    return parent + name if parent.endswith(b"/") else parent + b"/" + name


def path_b64(text: str, raw: bytes | None) -> str | None:
    """``raw`` in base64 when the path's ``text`` does not give back those exact bytes, else None.

    A name that is not valid UTF-8 shows as text with backslash escapes; scripts that act on
    the entry need its bytes, so ``--json`` gives them in an extra field, ``path_b64``
    (docs/commands.md), and this is that field's value.
    """
    if not raw or raw == text.encode("utf-8", "surrogatepass"):
        return None
    return base64.b64encode(raw).decode("ascii")


def within(path: str | os.PathLike[str], root: str) -> bool:
    """Whether ``path`` (existing or not) lies in ``root`` once links on the way are resolved."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip("/") + "/")
