"""The fleet's answers: each question asked of a dataset, as rows, JSON, text or a DataFrame."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hygiene_nb.errors import UsageError
from hygiene_nb.fleet.dataset import open_dest
from hygiene_nb.fleet.questions import render_sql
from hygiene_nb.fleet.reader import ENGINES, Skipped, read_fleet, run_sql, spark_can_read

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["COMMANDS", "FleetAnswer", "ask", "ask_many"]

# what ``hygiene-nb fleet DEST COMMAND`` answers: its questions, in the order printed
COMMANDS: dict[str, tuple[str, ...]] = {
    "summary": ("summary",),
    "history": ("history",),
    "growth": ("growth", "top_dirs"),
    "risk": ("risk",),
    "stale": ("stale",),
    "owners": ("owners",),
}
DEFAULT_TOP = 20
MAX_TOP = 100_000


@dataclass(frozen=True)
class FleetAnswer:
    """The rows of one or more questions asked of a fleet dataset."""

    dest: str
    engine: str
    command: str
    since_s: int
    tables: dict[str, tuple[list[str], list[tuple[Any, ...]]]]
    skipped: list[Skipped] = field(default_factory=list)
    scans: int = 0
    exit_code: int = 0

    def frame(self, question: str | None = None) -> pd.DataFrame:
        """One question's rows as a DataFrame (the command's first question by default)."""
        import pandas as pd

        columns, rows = self.tables[question or COMMANDS[self.command][0]]
        return pd.DataFrame.from_records(rows, columns=columns)

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` object: every question's rows as objects, and what was not read."""
        return {
            "status": "ok",
            "dest": self.dest,
            "engine": self.engine,
            "command": self.command,
            "since": self.since_s or None,
            "scans": self.scans,
            "questions": {
                name: [dict(zip(cols, row, strict=True)) for row in rows]
                for name, (cols, rows) in self.tables.items()
            },
            "skipped": [
                {"code": s.code, "partition": s.partition, "message": s.message}
                for s in self.skipped
            ],
        }

    def text(self) -> str:
        """The tables ``hygiene-nb fleet`` prints, numbers in human units."""
        from hygiene_nb.fleet.text import render_answer

        return render_answer(self)


def ask(
    dest: str,
    command: str = "summary",
    *,
    engine: str = "duckdb",
    hosts: str | None = None,
    since_days: float | None = None,
    top: int = DEFAULT_TOP,
    spark_master: str | None = None,
    endpoint_url: str | None = None,
    now: float | None = None,
) -> FleetAnswer:
    """Ask ``command``'s questions of the fleet dataset ``dest``.

    Args:
        dest: a directory, ``file://…`` or ``s3://bucket/prefix``.
        command: one of ``COMMANDS``.
        engine: ``duckdb`` (embedded) or ``spark`` (a directory DEST only).
        hosts: a glob of host names (default: every host).
        since_days: only scans that started within this many days of ``now``.
        top: how many directories the growth question lists.
        spark_master: Spark's master URL (default ``local[*]``).
        endpoint_url: the object store's endpoint (default ``$AWS_ENDPOINT_URL``).
        now: the time ``since_days`` counts back from (default: now).

    Raises:
        UsageError: an unknown command or engine, or bounds out of range.
        NotAFleet, FleetTooNew, FleetUnusable: the dataset cannot be read.
    """
    if command not in COMMANDS:
        raise UsageError(f"unknown fleet question {command!r}: one of {', '.join(COMMANDS)}.")
    if engine not in ENGINES:
        raise UsageError(f"--engine {engine!r}: choose one of {', '.join(ENGINES)}.")
    if not 0 <= top <= MAX_TOP:
        raise UsageError(f"--top must be from 0 to {MAX_TOP}.")
    since = 0
    if since_days is not None:
        if not 0 <= since_days <= 36_500:
            raise UsageError("--since must be from 0 to 36500 days.")
        since = int((time.time() if now is None else now) - since_days * 86_400)
    target = open_dest(dest, endpoint_url=endpoint_url)
    if engine == "spark":
        spark_can_read(target)  # before any request: an unreachable store is not the problem
    fleet = read_fleet(target, hosts=hosts, since_s=since)
    sqls = {q: render_sql(q, since=since, top=top) for q in COMMANDS[command]}
    tables = run_sql(fleet, sqls, engine=engine, spark_master=spark_master)
    return FleetAnswer(dest, engine, command, since, tables, fleet.skipped, len(fleet.markers))


def ask_many(dest: str, **options: Any) -> dict[str, FleetAnswer]:
    """Every command's answer (what the fleet report shows), reading the markers once each."""
    return {command: ask(dest, command, **options) for command in COMMANDS}
