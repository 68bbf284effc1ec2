"""Commands that read no snapshot start light: no pyarrow, numpy, pandas or DuckDB.

``hygiene-nb --help``, ``rules list``, ``quarantine list`` and ``verify`` answer from the
ledger, the quarantine manifests and the receipts; each is run here in a fresh interpreter,
the way the console script runs, on a store with a real execution in it, and the modules it
loaded are read back afterwards. ``annotate`` and ``summary`` read snapshots and may load them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hygiene_nb import api
from tests.helpers import confirmed_execute, write

HEAVY = ("pyarrow", "numpy", "pandas", "duckdb")

_PROBE = """
import json, sys
from hygiene_nb.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
else:
    code = 0
heavy = sorted(m for m in {heavy!r} if m in sys.modules)
print(json.dumps({{"code": code, "heavy": heavy}}), file=sys.stderr)
"""


def _loaded(*args: str) -> tuple[int, list[str], str]:
    """Run ``hygiene-nb ARGS`` in a fresh interpreter: (exit code, heavy modules, stdout)."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=HEAVY), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ},
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return report["code"], report["heavy"], done.stdout


@pytest.fixture
def executed(tmp_path: Path) -> tuple[Path, str]:
    """A store with one execution: (store, receipt path)."""
    root, store = tmp_path / "r", tmp_path / "store"
    write(root / "junk.tmp", 10)
    api.scan_root(root, store=store)
    api.annotate([str(root / "junk.tmp")], store=store, decision="delete")
    api.remember_rule("python-cache", "delete", store=store)
    plan = api.make_plan(root, store=store)
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", *confirmed_execute(plan, store), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    result = json.loads(done.stdout)
    assert done.returncode == 0 and result["moved"], done.stdout + done.stderr
    return store, result["receipt_path"]


def test_help_loads_no_data_library() -> None:
    code, heavy, out = _loaded("--help")
    assert code == 0 and "quarantine list" in out
    assert heavy == []


def test_rules_quarantine_list_and_verify_load_no_data_library(
    executed: tuple[Path, str],
) -> None:
    store, receipt = executed
    for args in (["rules", "list"], ["quarantine", "list"], ["verify", receipt]):
        code, heavy, out = _loaded(*args, "--store", str(store), "--json")
        assert code == 0, (args, out)
        assert heavy == [], f"hygiene-nb {' '.join(args)} loaded {heavy}"
    _, _, rules = _loaded("rules", "list", "--store", str(store), "--json")
    assert json.loads(rules)["rules"] == {"python-cache": "delete"}
    _, _, listing = _loaded("quarantine", "list", "--store", str(store), "--json")
    assert len(json.loads(listing)["batches"]) == 1


def test_a_command_that_reads_a_snapshot_still_loads_it(executed: tuple[Path, str]) -> None:
    """The probe can tell: ``summary`` reads Parquet, so pyarrow is loaded."""
    store, _ = executed
    code, heavy, _ = _loaded("summary", str(Path(store).parent / "r"), "--store", str(store))
    assert code == 0
    assert "pyarrow" in heavy
