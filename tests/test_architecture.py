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
}
ALLOWED = {PACKAGE / "store.py"}


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


def test_store_refuses_paths_outside_itself(tmp_path: Path) -> None:
    import pytest

    from hygiene_nb.errors import StoreError
    from hygiene_nb.store import Store, remove_store_path

    victim = tmp_path / "user-file"
    victim.write_text("precious")
    store = Store(tmp_path / "store").ensure()
    for path in (victim, store.root / ".." / "user-file", store.root):
        with pytest.raises(StoreError):
            remove_store_path(store, path)
    assert victim.read_text() == "precious"


def test_the_walker_opens_nothing_for_writing() -> None:
    for path in (PACKAGE / "walk").glob("*.py"):
        text = path.read_text()
        assert "O_WRONLY" not in text and "O_RDWR" not in text and "O_CREAT" not in text, path
