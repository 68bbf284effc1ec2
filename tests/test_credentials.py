"""Credentials by evidence, not by name fragments, on trees made by real tools.

Exact credential names (OpenSSH keys, ``.netrc``…) are protected anywhere. Key-like names
(``*.pem``, ``*.key``…) are protected too, except inside a dependency or build directory whose
evidence stands beside it: there a CA bundle or a test key is the package's
(``package-key-material``, caution) and protects no ancestor.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.classify.classification import PACKAGE_KEY_CLAIM, PACKAGE_KEY_MATERIAL
from hygiene_nb.scan.snapshot import entry_paths
from tests.helpers import project_with_venv, ssh_keygen, write

PACKAGE_KEY = ("caution", "package-key-material")


def classified(root: Path, store: Path) -> dict[str, dict[str, Any]]:
    api.scan_root(root, store=store)
    table = api.classify_snapshot(str(root), store=store)
    rows = table.append_column("path", entry_paths(table)).to_pylist()
    return {r["path"]: r for r in rows}


def verdict(rows: dict[str, dict[str, Any]], path: Path) -> tuple[str, str]:
    row = rows[str(path)]
    return row["risk"], row["rule"]


# -- a real virtualenv -------------------------------------------------------------------------


def test_a_real_virtualenv_beside_its_project_file_is_safe_whole(
    tmp_path: Path, store: Path, real_venv: Path
) -> None:
    root = tmp_path / "r"
    site = project_with_venv(real_venv, root / "proj")
    venv = root / "proj" / ".venv"
    test_key = site / "tornado" / "test" / "test.key"
    assert test_key.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")  # content can't tell
    bundles = sorted(venv.rglob("cacert.pem"))  # certifi's, and the one pip vendors
    assert site / "certifi" / "cacert.pem" in bundles
    locale = site / "babel" / "locale-data" / "id_ID.dat"
    assert locale.is_file()

    rows = classified(root, store)

    assert verdict(rows, venv) == ("safe", "venv") and not rows[str(venv)]["protected"]
    inside = [r for p, r in rows.items() if p.startswith(f"{venv}/")]
    assert len(inside) > 1000  # the installed packages, all of them
    assert [r["path"] for r in inside if r["risk"] == "high" or r["protected"]] == []
    for key in [test_key, *bundles]:
        assert verdict(rows, key) == PACKAGE_KEY, key
        assert rows[str(key)]["group"] == "virtualenv"  # counted with the venv it belongs to
    assert verdict(rows, locale) == ("safe", "venv")
    # the project is protected by its manifest alone (a venv's key material protects nothing)
    assert verdict(rows, root / "proj" / "pyproject.toml") == ("high", "project-manifest")
    assert verdict(rows, root / "proj") == ("high", "contains-protected")


def test_an_exact_credential_name_inside_a_real_virtualenv_stays_protected(
    tmp_path: Path, store: Path, real_venv: Path
) -> None:
    root = tmp_path / "r"
    site = project_with_venv(real_venv, root / "proj")
    planted = ssh_keygen(site / "tornado" / "test" / "id_ed25519")

    rows = classified(root, store)

    assert verdict(rows, planted) == ("high", "credential")
    assert verdict(rows, Path(f"{planted}.pub")) == ("high", "credential")
    assert verdict(rows, root / "proj" / ".venv") == ("high", "contains-protected")
    assert verdict(rows, site / "tornado" / "test" / "test.key") == PACKAGE_KEY


# -- OpenSSH keys made by ssh-keygen ------------------------------------------------------------


def test_openssh_keys_are_protected_in_a_home_in_a_project_and_inside_node_modules(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "r"
    home = root / "home"
    os.environ["HOME"] = str(home)
    in_ssh = ssh_keygen(home / ".ssh" / "id_ed25519")
    # a certificate for it, signed by a CA key: the -cert.pub twin
    ca = ssh_keygen(home / "ca" / "ca_key")
    subprocess.run(
        ["ssh-keygen", "-q", "-s", str(ca), "-I", "test", "-n", "u", f"{in_ssh}.pub"], check=True
    )
    project = home / "proj"
    write(project / "pyproject.toml", 10)
    in_project = ssh_keygen(project / "deploy" / "id_ed25519")
    web = home / "web"
    write(web / "package.json", 2)
    write(web / "package-lock.json", 2)
    in_modules = ssh_keygen(web / "node_modules" / "pkg" / "id_ed25519")
    shutil.move(home / "ca" / "ca_key", home / "ca" / "id_ed25519_sk")  # an exact name too

    rows = classified(root, store)

    for key in (in_ssh, in_project, in_modules):
        for twin in ("", ".pub"):
            assert verdict(rows, Path(f"{key}{twin}")) == ("high", "credential"), key
    assert verdict(rows, Path(f"{in_ssh}-cert.pub")) == ("high", "credential")
    assert verdict(rows, home / "ca" / "id_ed25519_sk") == ("high", "credential")
    assert verdict(rows, home / ".ssh") == ("high", "credential")
    assert verdict(rows, project / "deploy") == ("high", "contains-protected")
    assert verdict(rows, web / "node_modules") == ("high", "contains-protected")


# -- key-like names, with and without a package's evidence -----------------------------------------

NODE_EVIDENCE = ["package.json", "package-lock.json"]


def _tree(root: Path, files: list[str]) -> None:
    for rel in files:
        if rel.endswith("/"):
            (root / rel).mkdir(parents=True)
        else:
            write(root / rel, 10)


@pytest.mark.parametrize(
    ("files", "key", "expected"),
    [
        # outside any dependency directory: a credential, whatever the project
        (["srv/server.key"], "srv/server.key", ("high", "credential")),
        (["srv/pyproject.toml", "srv/cert.pem"], "srv/cert.pem", ("high", "credential")),
        # inside one with its evidence: the package's
        ([*[f"w/{n}" for n in NODE_EVIDENCE], "w/node_modules/p/test/fixture.key"],
         "w/node_modules/p/test/fixture.key", PACKAGE_KEY),
        (["rs/Cargo.toml", "rs/target/debug/build/x/out/test.pem"],
         "rs/target/debug/build/x/out/test.pem", PACKAGE_KEY),
        (["js/Makefile", "js/dist/ca.PEM"], "js/dist/ca.PEM", PACKAGE_KEY),
        (["p/.tox/py311/lib/k.p12"], "p/.tox/py311/lib/k.p12", PACKAGE_KEY),
        (["p/__pycache__/k.jks"], "p/__pycache__/k.jks", PACKAGE_KEY),
        # without the evidence, or with something that is no evidence: a credential
        (["w/node_modules/p/test/fixture.key"], "w/node_modules/p/test/fixture.key",
         ("high", "credential")),
        (["w/package.json", "w/node_modules/p/k.pem"], "w/node_modules/p/k.pem",
         ("high", "credential")),  # a manifest without its lockfile
        (["w/package.json", "w/package-lock.json/", "w/node_modules/p/k.pem"],
         "w/node_modules/p/k.pem", ("high", "credential")),  # a lockfile that is a directory
        (["x/target/k.pem"], "x/target/k.pem", ("high", "credential")),
        # a whole-subtree rule that is no package covers it first: a credential
        (["w/logs/package.json", "w/logs/yarn.lock", "w/logs/node_modules/k.pem"],
         "w/logs/node_modules/k.pem", ("high", "credential")),
        # exact names are credentials inside a package too
        ([*[f"w/{n}" for n in NODE_EVIDENCE], "w/node_modules/p/.env"], "w/node_modules/p/.env",
         ("high", "credential")),
        (["p/pyproject.toml", "p/.venv/lib/.netrc"], "p/.venv/lib/.netrc", ("high", "credential")),
        (["p/pyproject.toml", "p/.venv/.hg/store/data"], "p/.venv/.hg", ("high", "vcs")),
        (["home/.aws/credentials"], "home/.aws/credentials", ("high", "credential")),
        # names that only begin like a key's are not credentials
        (["loc/id_ID.dat"], "loc/id_ID.dat", ("unknown", "no-rule")),
        (["loc/identity.txt"], "loc/identity.txt", ("unknown", "no-rule")),
    ],
)  # fmt: skip
def test_key_like_files_are_credentials_unless_a_package_is_evidenced(
    tmp_path: Path, store: Path, files: list[str], key: str, expected: tuple[str, str]
) -> None:
    root = tmp_path / "r"
    os.environ["HOME"] = str(root / "home")
    _tree(root, files)

    rows = classified(root, store)

    assert verdict(rows, root / key) == expected
    above = [str(p) for p in (root / key).parents if str(p).startswith(f"{root}/")]
    # a protected entry protects every ancestor (contains-protected, or more); the package's
    # key material protects none: an ancestor is protected only by something else in it
    others = [p for p, r in rows.items() if r["protected"] and r["kind"] != "dir"]
    others = [p for p in others if p != str(root / key)]
    assert [rows[p]["protected"] for p in above] == [
        expected[0] == "high" or any(o.startswith(f"{p}/") for o in others) for p in above
    ]


def test_a_manifest_that_is_a_symlink_is_no_evidence_for_key_material(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "r"
    write(root / "elsewhere" / "package.json", 2)
    write(root / "w" / "package-lock.json", 2)
    (root / "w" / "package.json").symlink_to(root / "elsewhere" / "package.json")
    key = write(root / "w" / "node_modules" / "p" / "k.pem", 5)

    rows = classified(root, store)

    assert verdict(rows, root / "w" / "node_modules") == ("high", "contains-protected")
    assert verdict(rows, key) == ("high", "credential")


def test_the_package_key_material_rule_and_its_claim_are_documented() -> None:
    doc = " ".join((Path(__file__).parent.parent / "docs" / "rules.md").read_text().split())
    assert f"rule `{PACKAGE_KEY_MATERIAL}`" in doc
    assert PACKAGE_KEY_CLAIM in doc
