"""The curated public API: ``__all__`` complete, sorted and importable."""

from __future__ import annotations

import importlib
import pkgutil

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
