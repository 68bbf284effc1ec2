"""Fixtures the executor tests share: a store, a root, a world with a canary, a tmpfs inside
(the second user, ``other_user``, is in tests/conftest.py).

Helpers that are not fixtures are in tests/executor/helpers.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from hygiene_nb.store import Store
from tests.helpers import tmpfs, write


@pytest.fixture
def qstore(tmp_path: Path) -> Store:
    return Store(tmp_path / "store").ensure()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@pytest.fixture
def world(tmp_path: Path) -> dict[str, Path]:
    """A root with candidates, a canary outside it, and a store."""
    root = tmp_path / "r"
    write(root / "web" / "package.json", 2)
    write(root / "web" / "package-lock.json", 2)
    write(root / "web" / "node_modules" / "pkg" / "index.js", 3000)
    write(root / "web" / "app.log", 40)
    write(root / "data" / "scratch.bin", 100)
    write(root / "data" / "keep.txt", 7)
    write(tmp_path / "canary" / "precious", data=b"do not touch")
    return {"root": root, "store": tmp_path / "store", "canary": tmp_path / "canary"}


@pytest.fixture
def xworld(tmp_path: Path) -> Iterator[dict[str, Path]]:
    """A root on the store's filesystem with a tmpfs mounted at ``root/mnt``."""
    root = tmp_path / "r"
    mnt = root / "mnt"
    mnt.mkdir(parents=True)
    write(root / "local.log", 30)
    with tmpfs(mnt, "size=32m,mode=1777"):
        write(mnt / "cache" / "a.bin", data=b"a" * 1000)
        write(mnt / "cache" / "sub" / "b.bin", data=os.urandom(70_000))
        write(mnt / "cache" / "sub" / "empty", 0)
        (mnt / "cache" / "emptydir").mkdir()
        os.chmod(mnt / "cache" / "a.bin", 0o440)  # read-only: copies must keep it so
        os.utime(mnt / "cache" / "a.bin", ns=(1_600_000_000_000_000_000,) * 2)
        write(mnt / "old.log", data=b"old log line\n" * 10)
        assert os.stat(mnt / "cache").st_dev != os.stat(root).st_dev
        yield {"root": root, "mnt": mnt, "store": tmp_path / "store", "tmp": tmp_path}
