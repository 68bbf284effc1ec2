"""nbval runs these notebooks on a demo tree and store that the test run builds for itself.

Each notebook's parameters default to the demo (``root = None``, ``store = None``), found through
``HYGIENE_NB_DEMO_DIR``: set here to a fresh temporary directory, which the kernels inherit.
"""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest

_made: list[str] = []


def pytest_configure(config: pytest.Config) -> None:
    """Point the kernels at a fresh demo directory (built on first use, under a lock)."""
    if "HYGIENE_NB_DEMO_DIR" not in os.environ:
        made = tempfile.mkdtemp(prefix="hygiene-nb-nbval-")
        _made.append(made)
        os.environ["HYGIENE_NB_DEMO_DIR"] = made
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")


def pytest_unconfigure(config: pytest.Config) -> None:
    """Remove the demo this run made (a temporary directory of its own)."""
    for made in _made:
        shutil.rmtree(made, ignore_errors=True)
