"""Project verification around an execution: baseline, change, verify, roll back.

See docs/executor.md.

The commands come from the store's ``config.toml`` (``verify = [["pytest", "-q"]]``), never from
the scanned tree. Each is an argv array run without a shell, in the root, with no input, in its
own process group (a timeout kills the whole group), and its output's tail is kept for the
receipt. A command that cannot even start (not installed) fails like any other. When the command
ends (or times out), whatever it left running in its process group is killed too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from typing import Any

__all__ = ["OUTPUT_TAIL", "failed", "run_commands"]

OUTPUT_TAIL = 4000  # characters of combined output kept per command


def _run(argv: Sequence[str], cwd: str, timeout: float) -> dict[str, Any]:
    started = time.monotonic()
    record: dict[str, Any] = {"argv": list(argv), "returncode": None, "timed_out": False}
    # Output goes to an unnamed temporary file, not a pipe: a child that outlives the command
    # (a server started by a test) would hold a pipe open and make the wait unbounded.
    with tempfile.TemporaryFile() as output:
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so a timeout stops all of it
            )
        except OSError as exc:
            record.update(seconds=0.0, output=f"could not start {argv[0]!r}: {exc.strerror or exc}")
            return record
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            record["timed_out"] = True
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # also what it left running in its group
        proc.wait()
        record["returncode"] = proc.returncode
        record["seconds"] = round(time.monotonic() - started, 3)
        output.seek(0, os.SEEK_END)
        output.seek(max(0, output.tell() - 4 * OUTPUT_TAIL))
        record["output"] = output.read().decode("utf-8", "replace")[-OUTPUT_TAIL:]
    return record


def run_commands(
    commands: Sequence[Sequence[str]], *, cwd: str, timeout: float
) -> list[dict[str, Any]]:
    """Run each command in order, stopping at the first failure; one record per command run.

    A record holds ``argv``, ``returncode`` (None if it never started), ``timed_out``,
    ``seconds`` and the tail of its combined ``output``.
    """
    records = []
    for argv in commands:
        records.append(_run(argv, cwd, timeout))
        if failed(records[-1:]):
            break
    return records


def failed(records: Sequence[dict[str, Any]]) -> bool:
    """Whether any command failed: a non-zero exit, a timeout, or it could not start."""
    return any(r["returncode"] != 0 or r["timed_out"] for r in records)
