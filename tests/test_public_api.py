"""The curated public API: ``__all__`` complete, sorted and importable."""

from __future__ import annotations

import importlib
import os
import pkgutil
import subprocess
import sys
from pathlib import Path

import hygiene_nb


def isort_key(name: str) -> tuple[int, str]:
    """Ruff's RUF022 order: CONSTANTS, then Classes, then functions."""
    rank = 0 if name.isupper() or name.startswith("__") else 1 if name[:1].isupper() else 2
    return rank, name


def test_all_is_sorted_and_every_name_exists() -> None:
    for info in pkgutil.walk_packages(hygiene_nb.__path__, "hygiene_nb."):
        if info.name.endswith("__main__") or info.name.endswith("_cwalk"):
            continue
        module = importlib.import_module(info.name)
        names = getattr(module, "__all__", None)
        assert names is not None, f"{info.name} has no __all__"
        assert list(names) == sorted(names, key=isort_key), info.name
        for name in names:
            assert hasattr(module, name), f"{info.name}.{name}"


def test_package_exports_the_use_cases() -> None:
    assert {"scan_root", "summarize", "load", "list_snapshots"} <= set(hygiene_nb.__all__)


_PROCESS_SETTINGS = ("OPENBLAS_NUM_THREADS", "ARROW_DEFAULT_MEMORY_POOL")


def _python(code: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in _PROCESS_SETTINGS}
    done = subprocess.run(
        [sys.executable, "-c", code], env={**clean, **env}, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_importing_the_package_loads_the_library_only_on_first_use() -> None:
    code = (
        "import sys, hygiene_nb\n"
        "print('pyarrow' in sys.modules, 'numpy' in sys.modules)\n"
        "print(hygiene_nb.scan_root.__module__, 'pyarrow' in sys.modules)\n"
    )
    assert _python(code).splitlines() == ["False False", "hygiene_nb.api True"]


def test_api_within_loads_no_data_library_and_stays_a_function_of_pathnames() -> None:
    code = (
        "import sys\n"
        "from hygiene_nb import api, pathnames\n"
        "print(api.within('/a/b', '/a'), api.within is pathnames.within)\n"
        "print(pathnames.within.__module__, 'pyarrow' in sys.modules, 'duckdb' in sys.modules)\n"
    )
    assert _python(code).splitlines() == ["True True", "hygiene_nb.pathnames False False"]


def test_the_command_keeps_openblas_to_one_thread_unless_the_user_chose() -> None:
    code = (
        "import os, sys, hygiene_nb.cli, hygiene_nb.api.scan\n"  # the CLI loads numpy lazily
        "loaded = list(sys.modules)\n"  # in the order the modules were imported
        "first = loaded.index('hygiene_nb._process') < loaded.index('numpy')\n"
        "print(os.environ['OPENBLAS_NUM_THREADS'], first)\n"
    )
    assert _python(code) == "1 True"
    assert _python(code, OPENBLAS_NUM_THREADS="2") == "2 True"


def _scan_pool(tmp_path: Path, **env: str) -> str:
    """Run ``hygiene-nb scan`` in a fresh interpreter; return Arrow's pool afterwards."""
    (tmp_path / "tree").mkdir(exist_ok=True)
    (tmp_path / "tree" / "f").write_bytes(b"x")
    code = (
        "from hygiene_nb.cli import cli\n"  # first, as in the console script
        "import pyarrow as pa\n"
        f"cli.main(['scan', {str(tmp_path / 'tree')!r}, '--store', {str(tmp_path / 'store')!r},"
        " '--json'], standalone_mode=False)\n"
        "print(pa.default_memory_pool().backend_name)\n"
    )
    return _python(code, **env).splitlines()[-1]


def _pyarrow_has_jemalloc() -> bool:
    import pyarrow as pa

    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        return False
    return True


def test_the_command_reads_whether_pyarrow_has_jemalloc_without_loading_it() -> None:
    code = (
        "import sys\n"
        "from hygiene_nb import _process\n"
        "print(_process._arrow_has_jemalloc(), 'pyarrow' in sys.modules)\n"
    )
    assert _python(code) == f"{_pyarrow_has_jemalloc()} False"


def test_the_scan_command_allocates_through_jemalloc_unless_the_user_chose(
    tmp_path: Path,
) -> None:
    if sys.platform.startswith("linux") and _pyarrow_has_jemalloc():
        expected = "jemalloc"
    else:  # the command leaves Arrow's own default
        expected = _python("import pyarrow as pa; print(pa.default_memory_pool().backend_name)")
    assert _scan_pool(tmp_path) == expected
    assert _scan_pool(tmp_path, ARROW_DEFAULT_MEMORY_POOL="system") == "system"


def test_a_missing_name_is_an_attribute_error() -> None:
    assert not hasattr(hygiene_nb, "no_such_function")


def test_the_lazy_package_still_names_its_functions_and_submodules() -> None:
    code = (
        "import hygiene_nb\n"
        "print('scan_root' in dir(hygiene_nb), hygiene_nb.codes.texts_for.__name__)\n"
    )
    assert _python(code) == "True texts_for"


def test_the_python_example_runs_in_its_order(tmp_path: Path) -> None:
    """The Python example of docs/commands.md runs, in its order."""
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "f").write_bytes(b"x")
    readme = Path(__file__).resolve().parents[1] / "docs" / "commands.md"
    example = readme.read_text().split("```python\n", 1)[1].split("```", 1)[0]
    assert "hn.classify_snapshot(" in example and "hn.scan_root(" in example  # still the one meant
    code = (
        "import os\n"
        f"os.environ['HYGIENE_NB_STORE'] = {str(tmp_path / 'store')!r}\n"
        + example.replace('"/data"', repr(str(tmp_path / "data")))
        + "\nimport hygiene_nb.classify.classification, sys\n"  # the submodule, by name
        "print(type(hn.classify_snapshot(" + repr(str(tmp_path / "data")) + ")).__name__,"
        " sys.modules['hygiene_nb.classify.classification'].__name__)\n"
    )
    assert _python(code).splitlines()[-1] == "Table hygiene_nb.classify.classification"
