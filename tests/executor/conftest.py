"""Fixtures and helpers the executor tests share: a store, a root, a deadline for fifo tests."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hygiene_nb.store import Store
from tests.conftest import write


@pytest.fixture
def qstore(tmp_path: Path) -> Store:
    return Store(tmp_path / "store").ensure()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    return path


@contextmanager
def deadline(seconds: int) -> Iterator[None]:
    """Fail with TimeoutError instead of hanging (a fifo that was opened would block)."""

    def fail(*_: object) -> None:
        raise TimeoutError("hung (was a fifo opened?)")

    old = signal.signal(signal.SIGALRM, fail)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


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
