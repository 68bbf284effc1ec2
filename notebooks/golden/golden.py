"""The golden notebook's reference outputs, kept beside it instead of inside it.

Committed notebooks carry no outputs (a test refuses any that do), yet strict nbval needs an
executed notebook to compare with. So ``history.ipynb`` is committed stripped, its reference
outputs live in ``history.outputs.json``, and ``make test`` assembles the executed notebook into
``.build/`` (ignored by git) just before ``pytest --nbval`` compares a fresh run against it.

    python notebooks/golden/golden.py build     # stripped notebook + outputs → .build/
    python notebooks/golden/golden.py record F  # after a deliberate change: F executed → outputs
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat

HERE = Path(__file__).resolve().parent
NOTEBOOK = HERE / "history.ipynb"
OUTPUTS = HERE / "history.outputs.json"
BUILD = HERE / ".build"


def build() -> Path:
    """Write the executed golden notebook (reference outputs filled in) into ``.build/``."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    recorded = json.loads(OUTPUTS.read_text())
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    if len(code) != len(recorded):
        sys.exit(
            f"{OUTPUTS.name} has {len(recorded)} cells' outputs for {len(code)} code cells: "
            "record them again (see this file's docstring)"
        )
    for cell, ref in zip(code, recorded, strict=True):
        cell.execution_count = ref["execution_count"]
        cell.outputs = [nbformat.from_dict(o) for o in ref["outputs"]]
    BUILD.mkdir(exist_ok=True)
    target = BUILD / NOTEBOOK.name
    nbformat.write(notebook, target)
    return target


def record(executed: Path) -> None:
    """Take the reference outputs from an executed copy of the golden notebook."""
    notebook = nbformat.read(executed, as_version=4)
    outputs = [  # one entry per code cell, in order
        {"execution_count": cell.execution_count, "outputs": cell.outputs}
        for cell in notebook.cells
        if cell.cell_type == "code"
    ]
    OUTPUTS.write_text(json.dumps(outputs, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    if sys.argv[1:] == ["build"]:
        print(build())
    elif len(sys.argv) == 3 and sys.argv[1] == "record":
        record(Path(sys.argv[2]))
    else:
        sys.exit(__doc__)
