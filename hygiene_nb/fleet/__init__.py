"""The fleet: many hosts' scans published into one dataset, and the questions asked of it.

- ``dataset``: the layout on a directory or an object store, the markers, host names.
- ``publish``: one finished scan of this host's store into a fleet dataset.
- ``questions``: the SQL of each question, one text that DuckDB and Spark SQL both run.
- ``reader``: the marked partitions into relations, and the two engines.
- ``answers``: ``ask`` (one command's questions) and the ``FleetAnswer`` it returns.

From Python: ``hygiene_nb.fleet.summary(DEST, engine="duckdb")`` returns a DataFrame (likewise
``history``, ``growth``, ``top_dirs``, ``risk``, ``stale``, ``owners``). A fleet dataset is
evidence, never authority: no store, plan or execution acts in one (``fleet-is-read-only``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from hygiene_nb.fleet.answers import FleetAnswer as FleetAnswer
    from hygiene_nb.fleet.answers import ask as ask
    from hygiene_nb.fleet.publish import PublishResult as PublishResult
    from hygiene_nb.fleet.publish import publish as publish

__all__ = [
    "FleetAnswer",
    "PublishResult",
    "ask",
    "growth",
    "history",
    "owners",
    "publish",
    "risk",
    "stale",
    "summary",
    "top_dirs",
]

_LAZY = {
    "FleetAnswer": "hygiene_nb.fleet.answers",
    "ask": "hygiene_nb.fleet.answers",
    "PublishResult": "hygiene_nb.fleet.publish",
    "publish": "hygiene_nb.fleet.publish",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(name)


def _frame(command: str, question: str, dest: str, options: dict[str, Any]) -> pd.DataFrame:
    from hygiene_nb.fleet.answers import ask

    return ask(dest, command, **options).frame(question)


def summary(dest: str, **options: Any) -> pd.DataFrame:
    """The latest scan of every host and root: size, free space, growth, reclaimable, score."""
    return _frame("summary", "summary", dest, options)


def history(dest: str, **options: Any) -> pd.DataFrame:
    """Every scan of every host and root: size and free space over time."""
    return _frame("history", "history", dest, options)


def growth(dest: str, **options: Any) -> pd.DataFrame:
    """Per host: the growth of its roots from their first to their latest scan."""
    return _frame("growth", "growth", dest, options)


def top_dirs(dest: str, **options: Any) -> pd.DataFrame:
    """The directories that grew most across the fleet (latest scan against the one before)."""
    return _frame("growth", "top_dirs", dest, options)


def risk(dest: str, **options: Any) -> pd.DataFrame:
    """The risk mix of every host and root's latest scan."""
    return _frame("risk", "risk", dest, options)


def stale(dest: str, **options: Any) -> pd.DataFrame:
    """Per host: the bytes of its latest scans no one has modified for a year."""
    return _frame("stale", "stale", dest, options)


def owners(dest: str, **options: Any) -> pd.DataFrame:
    """Bytes by owner and host, from the latest scan of every host and root."""
    return _frame("owners", "owners", dest, options)
