"""Project verification around an execution: baseline, change, verify, roll back.

See docs/executor.md. ``planned_verification`` is what the receipt says before anything runs;
``baseline`` runs the commands before the first move (a failure refuses the whole plan, nothing
moved); ``verify_after`` runs them again once the items moved and, if they fail, restores every
batch of the run (never over anything) and counts what came back as rolled back, not moved.

The commands come from the store's ``config.toml`` (``verify = [["pytest", "-q"]]``), never from
the scanned tree. Each is an argv array run without a shell, in the root, with no input, in its
own process group (a timeout kills the whole group), and its output's tail is kept for the
receipt. A command that cannot even start (not installed) fails like any other. When the command
ends (or times out), whatever it left running in its process group is killed too.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import tempfile
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hygiene_nb.config import RootConfig
from hygiene_nb.errors import BaselineFailed, HygieneError
from hygiene_nb.executor.hooks import checkpoint
from hygiene_nb.executor.restore import restore_batch
from hygiene_nb.plan.records import Plan
from hygiene_nb.store import Store

if TYPE_CHECKING:
    from hygiene_nb.executor.execute import ExecuteResult
    from hygiene_nb.executor.moves import Run

__all__ = [
    "OUTPUT_TAIL",
    "baseline",
    "failed",
    "planned_verification",
    "run_commands",
    "verify_after",
]

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


def planned_verification(config: RootConfig) -> dict[str, Any]:
    """What the receipt will say about project verification, before anything runs."""
    if not config.verify:
        return {
            "mode": "static-only",
            "note": "no verify command is configured for this root: only the per-item checks ran",
        }
    return {
        "mode": "commands",
        "commands": [list(c) for c in config.verify],
        "timeout_seconds": config.verify_timeout,
    }


def baseline(config: RootConfig, p: Plan) -> list[dict[str, Any]]:
    """Run the verify commands before anything moves; a failure refuses the whole plan."""
    records = run_commands(config.verify, cwd=p.root.path, timeout=config.verify_timeout)
    if failed(records):
        last = records[-1]
        if last["timed_out"]:
            why = "timed out"
        elif last["returncode"] is None:  # it never ran: not installed, not executable
            why = "could not start"
        else:
            why = f"exited {last['returncode']}"
        raise BaselineFailed(
            f"the baseline check `{shlex.join(last['argv'])}` {why} before anything moved, so "
            f"plan {p.plan_id} was not carried out and nothing moved; fix the project (or "
            f"the verify setting in the store's config.toml), then execute again. Output "
            f"ends: {last['output'][-400:]!r}"
        )
    return records


def verify_after(
    store: Store, config: RootConfig, p: Plan, result: ExecuteResult, run: Run
) -> None:
    """Run the verify commands again; if they fail, put every moved item back (never over)."""
    after = run_commands(config.verify, cwd=p.root.path, timeout=config.verify_timeout)
    result.verification["after"] = after
    if not failed(after):
        result.verification["outcome"] = "passed"
        return
    checkpoint("before-rollback")
    restored: list[str] = []
    blocked: list[dict[str, str]] = []
    for batch in run.batches:
        try:
            back = restore_batch(store, batch.batch_id, execute=True)
        except (OSError, HygieneError) as exc:
            blocked.append(
                {
                    "batch_id": batch.batch_id,
                    "code": getattr(exc, "code", "os-error"),
                    "message": str(exc),
                }
            )
            continue
        restored += back.restored
        blocked += [{"path": b.path, "code": b.code, "message": b.message} for b in back.blocked]
    result.verification["outcome"] = "failed"
    result.verification["rollback"] = {"restored": len(restored), "blocked": blocked}
    result.status = "rolled-back"
    # what came back is no longer "moved": the receipt, the ledger and the log count net moves
    back_home = set(restored)
    for outcome in run.outcomes:
        if outcome.outcome == "moved" and outcome.path in back_home:
            outcome.outcome = "rolled-back"
    result.rolled_back = [m for m in result.moved if m.path in back_home]
    result.moved = [m for m in result.moved if m.path not in back_home]
    result.bytes -= sum(m.bytes for m in result.rolled_back if not m.open_at_move)
