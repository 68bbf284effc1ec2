"""Architecture checks: only the executor (and the store, for its own files) may destroy."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "hygiene_nb"

# Calls that rename, remove or truncate. The store may use them on its own files only
# (store.py refuses any path outside the store); the executor is where user files move.
DESTRUCTIVE = {
    "remove",
    "unlink",
    "rmdir",
    "rename",
    "replace",
    "renames",
    "removedirs",
    "rmtree",
    "move",
    "truncate",
    "ftruncate",
    "delete_file",  # pyarrow.fs
    "delete_dir",
    "delete_dir_contents",
}
# The fleet dataset's writer likewise renames its own temporary files (under DEST/.staging)
# into place under DEST, which it derives itself, and removes them when a write fails (and a
# partition's own files that a stopped publish left, when the scan is published redacted).
ALLOWED = {PACKAGE / "store.py", PACKAGE / "fleet" / "dataset.py"}


def destructive_calls(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            attr = node.func.attr
            on_os = isinstance(node.func.value, ast.Name) and node.func.value.id in ("os", "shutil")
            # str/bytes.replace take two arguments; os.replace and Path.replace(target) one.
            if attr == "replace" and not on_os and len(node.args) != 1:
                continue
            if attr in DESTRUCTIVE:
                found.append(f"{path.name}:{node.lineno} .{attr}()")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in DESTRUCTIVE
        ):
            found.append(f"{path.name}:{node.lineno} {node.func.id}()")
    return found


def test_no_module_outside_the_executor_renames_or_removes() -> None:
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        if path in ALLOWED or "executor" in path.relative_to(PACKAGE).parts:
            continue
        offenders += destructive_calls(path)
    assert offenders == []


def test_the_checker_catches_a_destructive_call(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import os\nfrom pathlib import Path\nPath('x').unlink()\nos.rename('a', 'b')\n"
    )
    assert len(destructive_calls(sample)) == 2


def test_the_walker_opens_nothing_for_writing() -> None:
    for path in (PACKAGE / "scan" / "walk").glob("*.py"):
        text = path.read_text()
        assert "O_WRONLY" not in text and "O_RDWR" not in text and "O_CREAT" not in text, path


NOTEBOOKS = PACKAGE.parent / "notebooks"


def executor_imports(notebook: Path) -> list[str]:
    """Code cells of ``notebook`` that import the executor (any spelling of the import)."""
    import nbformat

    found = []
    for index, cell in enumerate(nbformat.read(notebook, as_version=4).cells):
        if cell.cell_type != "code":
            continue
        source = "\n".join(
            line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
        )
        for node in ast.walk(ast.parse(source)):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            if any(
                n == "hygiene_nb.executor" or n.startswith("hygiene_nb.executor.") for n in names
            ):
                found.append(f"{notebook.name} cell {index}")
    return found


def all_notebooks() -> list[Path]:
    committed = [NOTEBOOKS, NOTEBOOKS / "golden", PACKAGE / "notebook" / "notebooks"]  # not .build
    return [path for folder in committed for path in sorted(folder.glob("*.ipynb"))]


def test_no_notebook_imports_the_executor() -> None:
    notebooks = all_notebooks()
    assert {p.stem for p in notebooks} >= {"explore", "history", "annotate", "audit_report"}
    assert [hit for nb in notebooks for hit in executor_imports(nb)] == []


def test_the_notebook_checker_catches_an_executor_import(tmp_path: Path) -> None:
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook

    for source in (
        "from hygiene_nb.executor import execute",
        "import hygiene_nb.executor.purge",
        "from hygiene_nb import executor",
    ):
        path = tmp_path / "bad.ipynb"
        nbformat.write(new_notebook(cells=[new_code_cell("x = 1"), new_code_cell(source)]), path)
        assert executor_imports(path) == ["bad.ipynb cell 1"], source


def test_notebooks_are_committed_stripped_with_a_parameters_cell() -> None:
    import nbformat

    for path in all_notebooks():
        notebook = nbformat.read(path, as_version=4)
        code = [c for c in notebook.cells if c.cell_type == "code"]
        assert all(not c.outputs and c.execution_count is None for c in code), path
        assert "widgets" not in notebook.metadata, path
        assert "parameters" in code[0].metadata.get("tags", []), path


def test_the_repository_report_notebook_is_the_packaged_template() -> None:
    assert (NOTEBOOKS / "audit_report.ipynb").resolve() == (
        PACKAGE / "notebook" / "notebooks" / "audit_report.ipynb"
    )
