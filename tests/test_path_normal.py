"""`.` and `..` are never resolved as text: after a symlink the kernel goes elsewhere.

``annotate R/link/../victim`` (link → another directory) names, for the kernel, the victim
beside the link's target; as text it would read ``R/victim``. Such paths are refused
(``path-not-normal``, exit 2) by the CLI and the API, and nothing is written.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hygiene_nb
from hygiene_nb.errors import UsageError
from hygiene_nb.ledger import Ledger
from hygiene_nb.store import Store
from tests.helpers import write


@pytest.fixture
def linked(tmp_path: Path) -> Path:
    """R/victim and elsewhere/victim, with R/link → elsewhere/sub."""
    root = tmp_path / "R"
    write(root / "victim", data=b"in the root")
    write(tmp_path / "elsewhere" / "victim", data=b"beside the link's target")
    (tmp_path / "elsewhere" / "sub").mkdir()
    (root / "link").symlink_to(tmp_path / "elsewhere" / "sub")
    return root


def decided_paths(store: Path) -> list[str]:
    if not Store(store).ledger.exists():
        return []
    with Ledger.open(Store(store)) as ledger:
        return [a.path for a in ledger.annotations()]


@pytest.mark.parametrize("given", ["R/link/../victim", "R/./victim", "R/link/.."])
def test_annotate_refuses_dot_components_and_writes_nothing(
    linked: Path, store: Path, given: str
) -> None:
    hygiene_nb.scan_root(linked, store=store)
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "annotate", given, "--decision", "delete",
         "--store", str(store), "--json"],
        capture_output=True, text=True, cwd=linked.parent, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    error = json.loads(done.stdout)["error"]
    assert error["code"] == "path-not-normal"
    assert given in error["message"] and "Traceback" not in done.stderr
    assert decided_paths(store) == []
    text = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", "annotate", given, "--decision", "delete",
         "--store", str(store)],
        capture_output=True, text=True, cwd=linked.parent, timeout=120,
    )  # fmt: skip
    assert text.returncode == 2 and "[path-not-normal]" in text.stderr
    assert decided_paths(store) == []


def test_the_api_refuses_them_too(linked: Path, store: Path) -> None:
    given = f"{linked}/link/../victim"
    with pytest.raises(UsageError) as info:
        hygiene_nb.annotate([given], store=store, decision="delete")
    assert info.value.code == "path-not-normal" and info.value.exit_code == 2
    with pytest.raises(UsageError) as info:
        hygiene_nb.annotate([os.fsencode(given)], store=store, decision="delete")
    assert info.value.code == "path-not-normal"
    assert decided_paths(store) == []


def test_a_root_given_through_dot_dot_is_refused(linked: Path, store: Path) -> None:
    with pytest.raises(UsageError) as info:
        hygiene_nb.scan_root(f"{linked}/link/..", store=store)
    assert info.value.code == "path-not-normal"


def test_leading_dot_components_of_a_relative_path_still_work(linked: Path, store: Path) -> None:
    """``./x`` and ``../x`` start at the working directory, which the kernel and Python agree
    on (its physical path), so they are not refused."""
    hygiene_nb.scan_root(linked, store=store)
    (linked / "sub").mkdir()
    for given in ("./victim", "../victim"):
        done = subprocess.run(
            [sys.executable, "-m", "hygiene_nb", "annotate", given, "--decision", "keep",
             "--store", str(store), "--json"],
            capture_output=True, text=True, cwd=linked / "sub" if ".." in given else linked,
            timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    assert decided_paths(store) == [str(linked / "victim")]
