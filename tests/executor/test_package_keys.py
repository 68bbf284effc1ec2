"""Key-like files inside packages at the moment of acting: the re-check agrees with
classification.

A virtualenv that classification calls safe (its CA bundles and test keys are the packages')
is planned and moved; with its evidence gone, replaced by a symlink or a directory between the
plan and the act, it is refused ``now-protected``, and so is one that holds an exact
credential name. Where a re-check is asked directly, classification is asked the same.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from hygiene_nb import api
from hygiene_nb.executor import Confirmation, execute_plan
from hygiene_nb.recheck import Finding, Rechecker
from hygiene_nb.scan.snapshot import entry_paths
from hygiene_nb.store import Store
from tests.executor.helpers import confirm_for, forge_plan, reviewed_now
from tests.helpers import project_with_venv, ssh_keygen, write


@pytest.fixture
def project(tmp_path: Path, real_venv: Path) -> dict[str, Path]:
    """A root holding a project with a real virtualenv, and a store."""
    root = tmp_path / "r"
    site = project_with_venv(real_venv, root / "proj")
    return {"root": root, "venv": root / "proj" / ".venv", "site": site, "store": tmp_path / "s"}


def _plan(world: dict[str, Path], target: Path) -> api.PlanResult:
    root, store = world["root"], world["store"]
    api.scan_root(root, store=store)
    api.annotate([str(target)], store=store, decision="delete")
    issued = api.make_plan(root, store=store)
    assert [c["path"] for c in issued.plan["candidates"]] == [str(target)], issued.plan["excluded"]
    return issued


def _skips(world: dict[str, Path], issued: api.PlanResult) -> list[tuple[str, str]]:
    result = execute_plan(
        issued.plan_path, store=Store(world["store"]), confirm=confirm_for(issued)
    )
    assert result.moved == []
    return [(s.path, s.code) for s in result.skipped]


def test_a_real_virtualenv_is_planned_and_moved_into_quarantine(project: dict[str, Path]) -> None:
    venv, store = project["venv"], Store(project["store"])
    issued = _plan(project, venv)

    result = execute_plan(issued.plan_path, store=store, confirm=confirm_for(issued))

    assert [m.path for m in result.moved] == [str(venv)] and result.skipped == []
    assert not venv.exists()
    assert [p.parent.name for p in store.quarantine.rglob("test.key")] == ["test"]
    assert (project["root"] / "proj" / "pyproject.toml").exists()


def test_one_ca_bundle_inside_a_real_virtualenv_is_planned_and_moved(
    project: dict[str, Path],
) -> None:
    bundle = project["site"] / "certifi" / "cacert.pem"
    issued = _plan(project, bundle)

    result = execute_plan(
        issued.plan_path, store=Store(project["store"]), confirm=confirm_for(issued)
    )

    assert [m.path for m in result.moved] == [str(bundle)] and not bundle.exists()


def _removed(evidence: Path) -> None:
    evidence.unlink()


def _symlink(evidence: Path) -> None:
    moved = evidence.parent.parent / "elsewhere.toml"
    shutil.move(evidence, moved)
    evidence.symlink_to(moved)


def _directory(evidence: Path) -> None:
    evidence.unlink()
    evidence.mkdir()
    write(evidence / "pyproject.toml", 5)


@pytest.mark.parametrize("change", [_removed, _symlink, _directory])
@pytest.mark.parametrize("whole", [True, False], ids=["the venv", "a CA bundle in it"])
def test_a_virtualenv_whose_project_file_is_no_longer_a_file_is_refused_when_acting(
    project: dict[str, Path], change: Callable[[Path], None], whole: bool
) -> None:
    target = project["venv"] if whole else project["site"] / "certifi" / "cacert.pem"
    issued = _plan(project, target)
    change(project["root"] / "proj" / "pyproject.toml")

    assert _skips(project, issued) == [(str(target), "now-protected")]
    assert target.exists()


def test_an_openssh_key_planted_in_a_planned_virtualenv_is_refused(
    project: dict[str, Path],
) -> None:
    venv = project["venv"]
    issued = _plan(project, venv)
    ssh_keygen(project["site"] / "requests" / "id_ed25519")

    assert _skips(project, issued) == [(str(venv), "changed-since-review")]

    # a plan naming the venv exactly as it is now (no review would allow it): still refused
    forged = forge_plan(issued, project["store"], [venv])
    doc = forged["doc"]
    confirm = Confirmation(doc["plan_id"], doc["plan_digest"], "quarantine")
    result = execute_plan(forged["path"], store=Store(project["store"]), confirm=confirm)
    assert result.moved == []
    assert [(s.path, s.code) for s in result.skipped] == [(str(venv), "now-protected")]
    assert "keys" in result.skipped[0].message
    assert (project["site"] / "requests" / "id_ed25519").exists()


# -- the re-check asked directly, and classification asked the same ------------------------------


def _recheck_and_classify(root: Path, store: Path, target: Path) -> tuple[Finding | None, bool]:
    with Rechecker(str(root)) as checker:
        found = checker.check(reviewed_now(root, target))
    api.scan_root(root, store=store)
    table = api.classify_snapshot(str(root), store=store)
    paths = entry_paths(table).to_pylist()
    protected = table.column("protected").to_pylist()[paths.index(str(target))]
    return found, protected


NODE = ["package.json", "package-lock.json"]

CASES = [
    # (files to make, what is re-checked, whether it is refused now-protected)
    (["p/pyproject.toml", "p/src/main.py", "p/.venv/lib/site-packages/certifi/cacert.pem",
      "p/.venv/lib/site-packages/certifi/core.py"], "p/.venv", False),
    # a project's manifests protect its directory, whatever the keys
    (["p/pyproject.toml", "p/src/main.py", "p/.venv/lib/site-packages/certifi/cacert.pem",
      "p/.venv/lib/site-packages/certifi/core.py"], "p", True),
    (["p/pyproject.toml"], "p/pyproject.toml", True),
    (["p/__pycache__/k.pem"], "p", False),
    (["p/.tox/py/lib/t.key"], "p/.tox/py", False),
    ([*[f"p/w/{n}" for n in NODE], "p/w/node_modules/x/test/k.key"], "p/w/node_modules", False),
    ([*[f"p/w/{n}" for n in NODE], "p/w/node_modules/x/test/k.key"], "p", True),
    ([*[f"p/w/{n}" for n in NODE], "p/w/node_modules/x/package.json"], "p/w/node_modules", False),
    ([*[f"p/w/{n}" for n in NODE], "p/w/node_modules/x/test/k.key"], "p/w/node_modules/x", False),
    (["p/w/package.json", "p/w/node_modules/x/k.key"], "p", True),  # no lockfile
    (["p/w/package.json", "p/w/yarn.lock/", "p/w/node_modules/x/k.key"], "p", True),
    (["p/logs/package.json", "p/logs/yarn.lock", "p/logs/node_modules/x/k.key"], "p", True),
    (["p/logs/package.json", "p/logs/yarn.lock", "p/logs/node_modules/x/k.key"],
     "p/logs/node_modules", True),
    (["p/certs/server.pem"], "p/certs", True),
    (["p/certs/server.pem"], "p/certs/server.pem", True),
    (["p/pyproject.toml", "p/.venv/lib/id_rsa"], "p/.venv", True),
    (["p/pyproject.toml", "p/.venv/lib/id_ID.dat"], "p/.venv", False),
]  # fmt: skip


@pytest.mark.parametrize(("files", "target", "refused"), CASES)
def test_the_recheck_refuses_key_like_files_exactly_where_classification_protects_them(
    tmp_path: Path, files: list[str], target: str, refused: bool
) -> None:
    root = tmp_path / "r"
    for rel in files:
        if rel.endswith("/"):
            (root / rel).mkdir(parents=True)
        else:
            write(root / rel, 10)

    found, protected = _recheck_and_classify(root, tmp_path / "s", root / target)

    assert (found.code if found else None) == ("now-protected" if refused else None)
    assert protected == refused


def test_when_acting_a_manifest_outside_dependencies_refuses_even_outside_a_project(
    tmp_path: Path,
) -> None:
    """Stricter than classification: a lockfile alone makes no project there, but still stops."""
    root = tmp_path / "r"
    write(root / "scratch" / "requirements.txt", 10)
    write(root / "scratch" / "notes.txt", 10)

    found, protected = _recheck_and_classify(root, tmp_path / "s", root / "scratch")

    assert not protected
    assert found is not None and found.code == "now-protected"
    assert "manifest" in found.detail


def test_a_manifest_that_is_a_symlink_is_no_evidence_when_acting(tmp_path: Path) -> None:
    root = tmp_path / "r"
    write(root / "elsewhere" / "package.json", 2)
    write(root / "p" / "w" / "package-lock.json", 2)
    os.symlink(root / "elsewhere" / "package.json", root / "p" / "w" / "package.json")
    write(root / "p" / "w" / "node_modules" / "x" / "k.key", 5)

    for target in ("p", "p/w/node_modules", "p/w/node_modules/x/k.key"):
        found, protected = _recheck_and_classify(root, tmp_path / "s", root / target)
        assert found is not None and found.code == "now-protected", target
        assert protected, target


# -- a cache directory tag decides at act time as it does in classification -------------------

TAG = b"Signature: 8a477f597d28d172789f06886806bc55\n# created by cargo.\n"
NOT_A_TAG = b"Signature: 8a477f597d28d172789f06886806bc56\n"  # one digit off


@pytest.mark.parametrize(
    ("tag", "files", "target", "refused"),
    [
        # a tagged cache holding a node_modules: the cache decides, its keys stay credentials
        (TAG, [*[f"p/cache/{n}" for n in NODE], "p/cache/node_modules/x/k.pem"],
         "p/cache/node_modules", True),
        (TAG, [*[f"p/cache/{n}" for n in NODE], "p/cache/node_modules/x/k.pem"],
         "p/cache/node_modules/x", True),
        (TAG, [*[f"p/cache/{n}" for n in NODE], "p/cache/node_modules/x/k.pem"], "p", True),
        # a tagged cache holding a manifest: a cache, the manifest no project's
        (TAG, ["p/cache/package.json", "p/cache/blob"], "p/cache", False),
        (TAG, ["p/cache/package.json", "p/cache/blob"], "p", False),
        # a file that is no valid tag changes nothing
        (NOT_A_TAG, ["p/cache/package.json", "p/cache/blob"], "p/cache", True),
        (NOT_A_TAG, [*[f"p/cache/{n}" for n in NODE], "p/cache/node_modules/x/k.pem"],
         "p/cache/node_modules", False),
    ],
)  # fmt: skip
def test_a_cache_directory_tag_decides_when_acting_as_it_does_in_classification(
    tmp_path: Path, tag: bytes, files: list[str], target: str, refused: bool
) -> None:
    root = tmp_path / "r"
    for rel in files:
        write(root / rel, 10)
    write(root / "p" / "cache" / "CACHEDIR.TAG", data=tag)

    found, protected = _recheck_and_classify(root, tmp_path / "s", root / target)

    assert (found.code if found else None) == ("now-protected" if refused else None)
    assert protected == refused


def test_a_tag_written_after_the_plan_makes_a_package_key_a_credential_again(
    tmp_path: Path,
) -> None:
    root = tmp_path / "r"
    for rel in [*[f"p/cache/{n}" for n in NODE], "p/cache/node_modules/x/k.pem"]:
        write(root / rel, 10)
    target = root / "p" / "cache" / "node_modules"
    reviewed = reviewed_now(root, target)
    with Rechecker(str(root)) as checker:
        assert checker.check(reviewed) is None  # the package's key material, as planned
    write(root / "p" / "cache" / "CACHEDIR.TAG", data=TAG)  # outside the candidate
    with Rechecker(str(root)) as checker:
        found = checker.check(reviewed)
    assert found is not None and found.code == "now-protected"


def test_a_symlink_git_tracks_inside_a_candidate_refuses_it(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    root = tmp_path / "r"
    write(root / "proj" / "Makefile", 10)
    write(root / "proj" / "build" / "out.o", 10)
    (root / "proj" / "build" / "link").symlink_to("out.o")
    git = ["git", "-C", str(root / "proj"), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-f", "build/link", "Makefile"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "x"], check=True)

    found, protected = _recheck_and_classify(root, tmp_path / "s", root / "proj" / "build")

    assert protected
    assert found is not None and found.code == "now-protected" and "git" in found.detail
