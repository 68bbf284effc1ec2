"""Per-root settings, kept in the store (``config.toml``), never in a scanned tree.

A setting that runs commands (``verify``) must not come from a file anyone with write access to
the tree could plant, so the only place it is read is the store (0700, the user's own)::

    [roots."/home/me/project"]
    verify = [["pytest", "-q"], ["ruff", "check", "."]]   # argv arrays, run without a shell
    verify_timeout = 600                                   # seconds, per command
    automatic = true                                       # suggest plans after scans
    threshold = 80                                         # ... when the score is below this
    reference_max_files = 10000                            # reference-check budgets
    reference_max_text_bytes = 134217728

Every key is optional; an unknown key or a wrong type is an error that names the line's table.
"""

from __future__ import annotations

import math
import os
import stat
import tomllib
from dataclasses import dataclass
from typing import Any

from hygiene_nb.errors import ConfigInvalid
from hygiene_nb.store import Store

__all__ = ["DEFAULTS", "RootConfig", "load_root_config"]


@dataclass(frozen=True)
class RootConfig:
    """The settings of one root (defaults where the store's ``config.toml`` says nothing)."""

    root: str
    verify: tuple[tuple[str, ...], ...] = ()
    verify_timeout: float = 600.0
    automatic: bool = False
    threshold: int = 80
    reference_max_files: int = 10_000
    reference_max_text_bytes: int = 128 * 1024**2
    homes: tuple[str, ...] = ()  # more home directories (e.g. a backup of one, or the demo's)
    table_key: str | None = None  # the key of this root's table in config.toml, as written


DEFAULTS = RootConfig(root="")
_KEYS: dict[str, type | tuple[type, ...]] = {
    "verify": list,
    "verify_timeout": (int, float),
    "automatic": bool,
    "threshold": int,
    "reference_max_files": int,
    "reference_max_text_bytes": int,
    "homes": list,
}


def _check(table: dict[str, Any], where: str) -> dict[str, Any]:
    unknown = sorted(set(table) - set(_KEYS))
    if unknown:
        raise ConfigInvalid(
            f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(_KEYS)}."
        )
    for key, kind in _KEYS.items():
        if key in table and (
            not isinstance(table[key], kind) or (kind is int and isinstance(table[key], bool))
        ):
            raise ConfigInvalid(f"{where}: {key} has the wrong type ({type(table[key]).__name__}).")
    out = dict(table)
    if "verify" in table:
        commands = table["verify"]
        if not all(
            isinstance(c, list) and c and all(isinstance(a, str) and a for a in c) for c in commands
        ):
            raise ConfigInvalid(
                f'{where}: verify must be a list of argv arrays, e.g. [["pytest", "-q"]] '
                "(no shell: each command is its program and arguments)."
            )
        out["verify"] = tuple(tuple(c) for c in commands)
    if "homes" in table:
        homes = table["homes"]
        if not all(
            isinstance(h, str) and os.path.isabs(h) and os.path.normpath(h) != "/" for h in homes
        ):
            raise ConfigInvalid(
                f'{where}: homes must be a list of absolute paths other than "/", '
                'e.g. ["/backup/alice"].'
            )
        out["homes"] = tuple(os.path.normpath(h) for h in homes)
    for key in ("verify_timeout", "threshold", "reference_max_files", "reference_max_text_bytes"):
        if key in table and not (math.isfinite(table[key]) and table[key] > 0):
            raise ConfigInvalid(f"{where}: {key} must be a positive, finite number.")
    if "threshold" in table and table["threshold"] > 100:
        raise ConfigInvalid(f"{where}: threshold is a score from 1 to 100.")
    return out


def load_root_config(store: Store, root: str) -> RootConfig:
    """The settings for ``root`` from ``<store>/config.toml`` (defaults if it says nothing).

    Raises:
        ConfigInvalid: the file is unreadable, not TOML, or a setting is unknown or malformed.
    """
    path = store.root / "config.toml"
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return RootConfig(root=root)
    except OSError as exc:
        raise ConfigInvalid(f"cannot read {path}: {exc}; fix or remove it.") from exc
    # it names commands to run: trust it only as the store's own private file
    if not stat.S_ISREG(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o022:
        raise ConfigInvalid(
            f"{path} is not a regular file of yours that only you can write (a link, another "
            f"owner, or writable by others); it can name commands to run, so it is not read. "
            f"Fix it: chmod 600 {path}."
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigInvalid(f"cannot read {path}: {exc}; fix or remove it.") from exc
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigInvalid(f"{path} is not valid TOML ({exc}); fix it.") from exc
    extra = sorted(set(data) - {"roots"})
    if extra:
        raise ConfigInvalid(
            f"{path}: unknown top-level key(s) {', '.join(extra)}; "
            'settings go in [roots."/absolute/root"] tables.'
        )
    roots = data.get("roots", {})
    if not isinstance(roots, dict):
        raise ConfigInvalid(f'{path}: roots must be tables: [roots."/absolute/root"].')
    tables: dict[str, Any] = {}
    keys: dict[str, str] = {}
    for key, table in roots.items():
        if not os.path.isabs(key):
            raise ConfigInvalid(f'{path}: roots."{key}" is not an absolute path.')
        normal = os.path.normpath(key)
        if normal in tables:
            raise ConfigInvalid(f"{path}: two tables name the root {normal}.")
        if not isinstance(table, dict):
            raise ConfigInvalid(f'{path}: roots."{key}" must be a table.')
        tables[normal] = table
        keys[normal] = key
    normal = os.path.normpath(root)
    table = tables.get(normal, {})
    return RootConfig(
        root=root, table_key=keys.get(normal), **_check(table, f'{path} [roots."{root}"]')
    )
