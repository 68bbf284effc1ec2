"""Shared fixtures: an isolated environment, a store, real trees, each available walker, and a
second user.

Helpers that are not fixtures are in tests/helpers.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hygiene_nb.scan.walk import available_walkers
from tests.helpers import Account, added_account, write


@pytest.fixture(autouse=True)
def clean_environ(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No test sees the developer's home, XDG dirs or store."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.delenv("HYGIENE_NB_STORE", raising=False)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    """An empty store directory path (created on first use)."""
    return tmp_path / "store"


@pytest.fixture(params=available_walkers())
def walker(request: pytest.FixtureRequest) -> str:
    """Each walker built here: the C core (when compiled) and the pure-Python fallback."""
    return str(request.param)


@pytest.fixture
def tricky_tree(tmp_path: Path) -> Iterator[Path]:
    """Hard links (same dir, siblings, cousins), sparse and empty files, symlinks, a fifo,
    unicode and invalid-UTF-8 names, an empty directory and deep nesting."""
    root = tmp_path / "tree"
    write(root / "a" / "f1", 5000)
    (root / "a" / "b" / "c").mkdir(parents=True)
    os.link(root / "a" / "f1", root / "a" / "f1-same-dir")
    os.link(root / "a" / "f1", root / "a" / "b" / "f1-nested")
    (root / "d" / "e").mkdir(parents=True)
    os.link(root / "a" / "f1", root / "d" / "e" / "f1-cousin")
    write(root / "d" / "e" / "g", 123)
    os.link(root / "d" / "e" / "g", root / "a" / "b" / "c" / "g-link")
    with (root / "d" / "sparse").open("wb") as handle:
        handle.truncate(10 * 1024 * 1024)
    write(root / "d" / "empty-file")
    (root / "empty-dir").mkdir()
    (root / "a" / "b" / "c" / "dangling").symlink_to("/nowhere/at/all")
    (root / "a" / "to-dir").symlink_to(root / "d")
    os.mkfifo(root / "d" / "fifo")
    write(root / "uni" / "ünïcödé-名前", 77)
    write(Path(os.fsdecode(os.fsencode(str(root / "bad")) + b"/name-\xff\xfe")), 9)
    deep = root / "deep"
    for i in range(40):
        deep = deep / f"level{i:02d}"
    write(deep / "bottom", 11)
    yield root


@pytest.fixture
def other_user() -> Iterator[tuple[int, int]]:
    """A real second user (uid, gid), removed afterwards."""
    with added_account() as account:
        yield account.uid, account.gid


@pytest.fixture
def other_account() -> Iterator[Account]:
    """A real second user (name, uid, gid) with its own group, removed afterwards."""
    with added_account() as account:
        yield account


WHEELHOUSE_ENV = "HYGIENE_NB_WHEELHOUSE"
VENV_PACKAGES = ("requests", "babel", "tornado")


@pytest.fixture(scope="session")
def real_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv made by ``python -m venv`` with requests, babel and tornado installed by pip
    from the wheelhouse ``make wheelhouse`` fills (offline). Built once: copy it, never change it.

    Without a wheelhouse the tests that need it skip, except under ``CI=true``, where they fail.
    """
    wheelhouse = os.environ.get(WHEELHOUSE_ENV, "")
    if not wheelhouse or not any(Path(wheelhouse).glob("*.whl")):
        reason = (
            f"no wheelhouse in ${WHEELHOUSE_ENV}: run `make test`, or `make wheelhouse` and "
            f"{WHEELHOUSE_ENV}=$PWD/.cache/wheelhouse"
        )
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    venv = tmp_path_factory.mktemp("real-venv") / ".venv"
    env = {**os.environ, "PIP_CONFIG_FILE": os.devnull, "PIP_NO_INPUT": "1"}
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, env=env)
    subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index",
         "--no-cache-dir", "--disable-pip-version-check", "--find-links", wheelhouse,
         *VENV_PACKAGES],
        check=True,
        env=env,
    )  # fmt: skip
    return venv
