"""Reading a cache directory tag (https://bford.info/cachedir/) from a directory handle.

A tool that keeps a cache (cargo's ``target``, pytest, mypy, ccache, borg, uv…) may write a
file named ``CACHEDIR.TAG`` in it whose first 43 bytes are the specification's signature. The
scan records the valid tags it meets (``scan.cachedir``); the executor's re-check reads a tag
again when one decides what a directory is at the moment of acting. Either way the tag is
opened without following a symlink, without blocking on a fifo, without becoming a terminal's
controlling process and, where permitted, without touching its atime; at most
``_READ_BYTES`` are read. A tag that cannot be read is simply not valid.
"""

from __future__ import annotations

import os
import re
import stat

__all__ = ["MAX_TOOL_CHARS", "SIGNATURE", "TAG_NAME", "read_tag", "tool_named"]

TAG_NAME = "CACHEDIR.TAG"
SIGNATURE = b"Signature: 8a477f597d28d172789f06886806bc55"
MAX_TOOL_CHARS = 64
_READ_BYTES = 512  # the signature and the comment lines tools write after it
_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_NOATIME = getattr(os, "O_NOATIME", 0)
# "# This file is a cache directory tag created by cargo." (pytest, Borg and ccache say the
# same; the type checker says "automatically created by mypy.")
_TOOL = re.compile(rb"created\s+by\s+(?:the\s+)?([A-Za-z0-9][A-Za-z0-9_+-]*(?:\.[A-Za-z0-9_+-]+)*)")


def tool_named(text: bytes) -> str:
    """The tool a tag's text after the signature names ("" when it names none)."""
    found = _TOOL.search(text)
    return found.group(1).decode("ascii")[:MAX_TOOL_CHARS] if found else ""


def _open_tag(dir_fd: int) -> int:
    try:
        return os.open(TAG_NAME, _FLAGS | _NOATIME, dir_fd=dir_fd)
    except PermissionError:  # O_NOATIME needs the file's owner (or CAP_FOWNER): without it
        return os.open(TAG_NAME, _FLAGS, dir_fd=dir_fd)


def read_tag(dir_fd: int) -> str | None:
    """Whether the directory ``dir_fd`` holds a valid tag: the tool it names ("" if none), or None.

    None when there is no tag, it is not a regular file (a symlink, a fifo…), it cannot be read,
    or its first 43 bytes are not the signature.
    """
    try:
        fd = _open_tag(dir_fd)
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        data = os.read(fd, _READ_BYTES)
    except OSError:
        return None
    finally:
        os.close(fd)
    if not data.startswith(SIGNATURE):
        return None
    return tool_named(data[len(SIGNATURE) :])
