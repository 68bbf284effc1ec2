"""Commands that read no snapshot start light: no pyarrow, numpy, pandas or DuckDB.

``hygiene-nb --help``, ``rules list``, ``quarantine list`` and ``verify`` answer from the
ledger, the quarantine manifests and the receipts; each is run here in a fresh interpreter,
the way the console script runs, on a store with a real execution in it, and the modules it
loaded are read back afterwards. ``annotate`` and ``summary`` read snapshots and may load them.
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.classify.protect import KEEP_MARKER
from hygiene_nb.fs.cachedir_tag import SIGNATURE
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


def _loaded(*args: str, heavy: tuple[str, ...] = HEAVY) -> tuple[int, list[str], str]:
    """Run ``hygiene-nb ARGS`` in a fresh interpreter: (exit code, ``heavy`` modules loaded,
    stdout)."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(heavy=heavy), *args],
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


def _tree_for_every_rule(root: Path) -> None:
    """A home with something for each kind of rule and protection classification applies."""
    write(root / ".bashrc", 10)  # a home's dotfile: configuration
    write(root / ".ssh" / "id_ed25519", 400)  # a credential by name
    write(root / "certs" / "server.pem", 300)  # by extension
    write(root / ".cache" / "pip" / "wheel.whl", 2000)
    write(root / "tool-cache" / "CACHEDIR.TAG", data=SIGNATURE + b"\n# made by a tool\n")
    write(root / "tool-cache" / "blob", 500)
    app = root / "app"
    write(app / "package.json", data=b'{"name": "app"}\n')
    write(app / "package-lock.json", data=b"{}\n")
    write(app / "node_modules" / "lib" / "index.js", 1200)
    write(app / "node_modules" / "lib" / "test" / "fixture.pem", 90)  # the package's own
    write(app / "src" / "__pycache__" / "m.cpython-311.pyc", 700)
    write(app / "src" / "m.py", 50)
    write(app / "pyproject.toml", data=b'[project]\nname = "app"\nversion = "0"\n')
    write(app / "build.log", 4000)
    write(root / "paper" / "paper.tex", 100)
    write(root / "paper" / "paper.aux", 30)  # beside its .tex
    write(root / "kept" / KEEP_MARKER)
    write(root / "kept" / "notes.txt", 20)
    write(root / "runs" / "train.py", 10)
    write(root / "runs" / "ckpt" / "weights.bin", 5000)
    write(root / "skipped" / "big.iso", 9000)  # excluded from the scan
    write(root / "data" / "big.bin", 3000)
    os.link(root / "data" / "big.bin", root / "data" / "same.bin")
    (root / "data" / "latest").symlink_to("big.bin")
    repo = root / "repo"
    write(repo / "tracked.txt", 60)
    write(repo / "untracked.tmp", 60)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "tracked.txt"], check=True)


_USER_RULES = """
[[rule]]
id = "big-bins"
name = "*.bin"
kind = "file"
min_bytes = 1000
risk = "caution"
claim = "Large binary dumps"

[[rule]]
id = "checkpoint"
path = "*/runs/*"
kind = "dir"
sibling = "train.py"
risk = "safe"
claim = "Training checkpoints: train.py beside it recreates them"
"""
_AGE_RULE = """
[[rule]]
id = "old-logs"
name = "*.log"
min_age_days = 0
risk = "safe"
claim = "Old logs"
"""


def test_summary_classifying_a_snapshot_loads_no_pandas(tmp_path: Path) -> None:
    """The first ``summary`` after a scan classifies it and keeps the verdicts, without pandas.

    pyarrow imports pandas (0.2-0.4 s) on its first conversion of a Python or numpy value;
    classification builds its Arrow arrays from buffers (``scan.arrays``) instead.
    """
    root, store, rules = tmp_path / "home", tmp_path / "store", tmp_path / "rules.toml"
    _tree_for_every_rule(root)
    rules.write_text(_USER_RULES)
    api.scan_root(root, store=store, excludes=["skipped"])
    assert not (store / "classified").exists()
    args = ("summary", str(root), "--store", str(store), "--rules", str(rules))
    code, heavy, out = _loaded(*args)
    assert code == 0, out
    assert "pyarrow" in heavy and "pandas" not in heavy, heavy
    assert "risk mix" in out
    kept = list((store / "classified").rglob("*.parquet"))
    assert len(kept) == 1  # classified now, and kept
    code, heavy, out = _loaded(*args, "--json")  # the kept verdicts, read back
    assert code == 0 and "pandas" not in heavy, (code, heavy)
    assert list((store / "classified").rglob("*.parquet")) == kept
    assert json.loads(out)["entries"] == _entries_found(root, skipped="skipped")
    rules.write_text(_USER_RULES + _AGE_RULE)  # measured at a time: classified again
    code, heavy, out = _loaded(*args)
    assert code == 0 and "pandas" not in heavy, (code, heavy)
    assert list((store / "classified").rglob("*.parquet")) != kept


def _entries_found(root: Path, *, skipped: str) -> int:
    """What ``find ROOT`` lists, with the excluded directory listed but not what it holds."""
    count = 1
    for top, dirs, files in os.walk(root):
        count += len(dirs) + len(files)
        if Path(top) == root:
            dirs.remove(skipped)
    return count


_IRI_PROBE = """
import importlib.util, sys
{first}
import nbformat
nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1")])
nbformat.validate(nb)  # the notebook schema still checks what a report's notebook holds
print(sys.modules.get("rfc3987_syntax", "absent") is None)
"""


@pytest.mark.skipif(
    importlib.util.find_spec("rfc3987_syntax") is None,
    reason="rfc3987_syntax is not installed here (it comes with jupyter_server's jsonschema)",
)
def test_the_command_skips_the_iri_grammar_a_library_user_keeps() -> None:
    """The command records rfc3987_syntax as absent (0.9 s of each report).

    ``import hygiene_nb`` in a notebook leaves it importable.
    """

    def probe(first: str) -> str:
        code = _IRI_PROBE.format(first=first)
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    assert probe("import hygiene_nb.cli") == "True"
    assert probe("import hygiene_nb, hygiene_nb.api") == "False"


@pytest.mark.skipif(
    importlib.util.find_spec("rfc3987_syntax") is None,
    reason="rfc3987_syntax is not installed here (it comes with jupyter_server's jsonschema)",
)
def test_the_kernel_a_report_starts_skips_the_iri_grammar_too(tmp_path: Path) -> None:
    """The report's kernel takes the command's settings before its first cell (plotly's
    notebook renderer imports nbformat there: about 1 s more per report)."""
    import nbformat

    from hygiene_nb.notebook.report import _run

    probe = _IRI_PROBE.format(first="")
    source, running = tmp_path / "probe.ipynb", tmp_path / "ran.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(probe)]), source)
    assert _run(source, running, {}, {}, cwd=tmp_path, timeout=120) is None
    (cell,) = nbformat.read(running, as_version=4).cells
    assert [o.get("text", "").strip() for o in cell.outputs] == ["True"]


def test_a_report_in_manual_mode_loads_no_data_library_in_the_command(tmp_path: Path) -> None:
    """The notebook's kernel loads the data libraries; the command that runs it needs none
    (pandas 0.3 s and ~50 MB; pyarrow and DuckDB ~80 MB more, held while the kernel runs).

    Only automatic mode's suggestion, made beside the report, loads them in the command. Nor
    does papermill load its remote storage clients (boto3, or pyarrow for HDFS): a report's
    paths are local.
    """
    root, store, out = tmp_path / "r", tmp_path / "store", tmp_path / "out"
    write(root / "a" / "junk.tmp", 10)
    api.scan_root(root, store=store)
    code, heavy, text = _loaded(
        "report", str(root), "--store", str(store), "--out", str(out), heavy=(*HEAVY, "boto3")
    )
    assert code == 0, text
    assert heavy == [], heavy
    assert list(out.rglob("*.html"))  # the report was made


def test_papermill_loads_without_remote_clients_and_leaves_them_importable() -> None:
    probe = (
        "import sys\n"
        "from hygiene_nb.notebook.report import _papermill\n"
        "pm = _papermill()\n"
        "print(pm.execute_notebook is not None, 'boto3' in sys.modules, 'pyarrow' in sys.modules)\n"
        "import pyarrow\n"
        "print(sys.modules.get('boto3', 'absent'), pyarrow.__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "False", "False", "absent", "pyarrow"]


_WIDGET_OPEN = """
import sys
from hygiene_nb import api
root, store = sys.argv[1], sys.argv[2]
api.scan_root(root, store=store)
from hygiene_nb.notebook.ui import Annotator
panel = Annotator(root, store=store)
assert panel.fig.data, "the treemap has no trace"
loaded = "jsonschema" in sys.modules
left = sys.modules.get("rfc3987_syntax", "absent")
import rfc3987_syntax  # importable as before the widget opened
print(loaded, left)
"""


@pytest.mark.skipif(
    importlib.util.find_spec("rfc3987_syntax") is None, reason="rfc3987_syntax is not installed"
)
def test_the_widget_opens_without_compiling_the_iri_grammar_and_leaves_it_importable(
    tmp_path: Path,
) -> None:
    write(tmp_path / "tree" / "a" / "notes.txt", 100)
    done = subprocess.run(
        [sys.executable, "-c", _WIDGET_OPEN, str(tmp_path / "tree"), str(tmp_path / "store")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    # the figure widget's imports loaded jsonschema, and the grammar's module was neither
    # imported then nor left recorded as absent
    assert done.stdout.split() == ["True", "absent"]
