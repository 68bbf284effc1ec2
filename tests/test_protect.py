"""Protection: what can never enter a plan, by name, place, marker, account or git tracking."""

from __future__ import annotations

import os
import pwd
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb.classify.protect import (
    CREDENTIAL_DIRS,
    CREDENTIAL_FILES,
    KEEP_MARKER,
    PASSES_DOWN,
    SSH_KEY_NAMES,
    SYSTEM_DIRS,
    VCS_DIRS,
    GitInfo,
    ProtectContext,
    account_homes,
    dir_protection_keys,
    find_git_tracked,
    protect_dir,
    protect_file,
    protection_above,
)
from tests.helpers import write

CTX = ProtectContext(root="/scan", home="/home/u", store="/srv/store")


def rule_of_dir(path: str, ctx: ProtectContext = CTX) -> str | None:
    found = protect_dir(path, os.path.basename(path) or path, ctx)
    return found.rule if found else None


def rule_of_file(path: str, ctx: ProtectContext = CTX) -> str | None:
    found = protect_file(os.path.basename(path), os.path.dirname(path), ctx)
    return found.rule if found else None


# -- directories -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/scan", "root"),
        ("/", "filesystem-root"),
        ("/home/u", "home"),
        ("/usr", "system"),
        ("/etc", "system"),
        ("/var", "system"),
        ("/Library", "system"),
        ("/srv/store", "store"),
        ("/mnt/disk/.hygiene-nb-quarantine", "store"),  # a quarantine on another filesystem
        ("/scan/project/.git", "vcs"),
        ("/scan/project/.hg", "vcs"),
        ("/scan/.ssh", "credential"),  # by name, anywhere
        ("/home/u/.gnupg", "credential"),
        ("/home/u/.local/share/keyrings", "credential"),
        ("/home/u/.config", "config"),
        ("/home/u/Library/Preferences", "config"),
        ("/var/lib/docker", "container-storage"),
        ("/var/lib/containers", "container-storage"),
        ("/home/u/.local/share/containers", "container-storage"),  # rootless Podman
        ("/home/u/.local/share/docker", "container-storage"),  # rootless Docker
    ],
)
def test_protected_directories_by_place_and_name(path: str, rule: str) -> None:
    assert rule_of_dir(path) == rule


@pytest.mark.parametrize(
    "path",
    [
        "/scan/project",
        "/scan/git",  # not a VCS directory: only the dotted names are
        "/scan/project/.config",  # configuration only at the top of a home
        "/home/u/projects/.config",
        "/home/user2/.config",  # a look-alike of the home, not inside it
        "/usr2",
        "/usr/local/lib/node_modules",  # under a system directory: classification passes it down
        "/scan/.hygiene-nb-quarantine-not",
        "/scan/project/.local/share/containers",  # container storage only in a home
        "/home/u/.local/share/containers-old",
        "/srv/lib/docker",
    ],
)
def test_ordinary_directories_are_not_protected(path: str) -> None:
    assert rule_of_dir(path) is None


def test_every_listed_vcs_system_and_credential_directory_is_protected() -> None:
    assert {rule_of_dir(f"/scan/x/{name}") for name in VCS_DIRS} == {"vcs"}
    assert {rule_of_dir(f"/scan/x/{name}") for name in CREDENTIAL_DIRS} == {"credential"}
    assert {rule_of_dir(path) for path in SYSTEM_DIRS} == {"system"}


def test_a_directory_holding_a_keep_marker_and_other_homes_are_protected() -> None:
    ctx = ProtectContext(
        root="/scan",
        home="/home/u",
        store="/srv/store",
        keep_dirs=frozenset({"/scan/thesis"}),
        other_homes=frozenset({"/scan/alice"}),
    )
    assert rule_of_dir("/scan/thesis", ctx) == "keep-marker"
    assert rule_of_dir("/scan/thesis/chapters", ctx) is None  # classification passes it down
    assert rule_of_dir("/scan/alice", ctx) == "home"
    assert rule_of_dir("/scan/alice/.config", ctx) == "config"
    assert rule_of_dir("/scan/bob/.config", ctx) is None


def test_a_work_tree_git_cannot_list_is_protected_whole_even_when_it_holds_the_root() -> None:
    git = GitInfo(
        worktrees=("/scan/repo", "/outer"), unreadable=frozenset({"/scan/repo", "/outer"})
    )
    ctx = ProtectContext(root="/scan", home="/home/u", store="/srv/store", git=git)
    assert rule_of_dir("/scan/repo", ctx) == "git-unreadable"
    inside = ProtectContext(root="/outer/src", home="/home/u", store="/srv/store", git=git)
    assert rule_of_dir("/outer/src", inside) == "git-unreadable"  # not merely "root"
    assert rule_of_dir("/scan", ctx) == "root"


def test_protect_dir_finds_something_only_at_the_paths_and_names_its_keys_list() -> None:
    # classification asks protect_dir only about directories whose path or name is a key
    git = GitInfo(worktrees=("/scan/repo",), unreadable=frozenset({"/scan/repo"}))
    contexts = [
        CTX,
        ProtectContext(
            root="/scan",
            home="/home/u",
            store="/srv/store",
            git=git,
            keep_dirs=frozenset({"/scan/thesis"}),
            other_homes=frozenset({"/scan/alice"}),
        ),
        ProtectContext(root="/outer/src", home="/home/u", store="/srv/store", git=git),
    ]
    found: set[str] = set()
    for ctx in contexts:
        paths, names = dir_protection_keys(ctx)
        seeds = {*paths, *(f"/scan/x/{n}" for n in names), "/scan/x", "/home/u/x", "/outer"}
        # each seed, its parents and some children: look-alikes next to every key
        near = {
            p
            for seed in seeds
            for p in (seed, os.path.dirname(seed), seed + "/x", seed + "-x", seed + "/.config")
        }
        for path in sorted(near):
            protection = protect_dir(path, os.path.basename(path) or path, ctx)
            if protection is not None:
                found.add(protection.rule)
                assert path in paths or os.path.basename(path) in names, path
    assert found == {
        "git-unreadable", "root", "filesystem-root", "home", "system", "vcs", "credential",
        "store", "container-storage", "keep-marker", "config",
    }  # fmt: skip


def test_the_home_and_root_protections_do_not_pass_down_but_the_others_do() -> None:
    assert {"root", "home", "filesystem-root", "contains-protected"}.isdisjoint(PASSES_DOWN)
    assert {"vcs", "credential", "system", "keep-marker", "store", "config"} <= PASSES_DOWN
    assert "container-storage" in PASSES_DOWN  # everything inside is the engine's


# -- files -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/scan/sub/.git", "vcs"),  # a gitfile: submodules and worktrees
        ("/scan/thesis/" + KEEP_MARKER, "keep-marker"),
        ("/scan/deploy/id_ed25519", "credential"),
        ("/scan/deploy/id_rsa.pub", "credential"),
        ("/scan/deploy/id_ecdsa_sk-cert.pub", "credential"),
        ("/scan/.envrc", "credential"),
        ("/scan/app/.env", "credential"),
        ("/scan/app/.env.local", "credential"),
        ("/scan/certs/server.pem", "credential"),
        ("/scan/certs/SERVER.KEY", "credential"),  # extensions in any case
        ("/scan/vault.kdbx", "credential"),
        ("/scan/keystore.p12", "credential"),
        ("/home/u/.bashrc", "config"),  # a dot-file at the top of a home
        ("/home/u/.gitconfig", "config"),
    ],
)
def test_protected_files_by_name_and_place(path: str, rule: str) -> None:
    assert rule_of_file(path) == rule


def test_every_listed_credential_file_is_protected_anywhere() -> None:
    assert {rule_of_file(f"/scan/deep/down/{name}") for name in CREDENTIAL_FILES} == {"credential"}


@pytest.mark.parametrize(
    "path",
    [
        "/scan/notes.txt",
        "/home/u/notes.txt",
        "/home/u/projects/.bashrc",  # a dot-file below the top of a home is an ordinary file
        "/scan/.bashrc",
        "/scan/keys.txt",
        "/scan/turkey",  # ".key" only as the extension
        "/scan/paid_invoice.csv",
        "/scan/babel/locale-data/id_ID.dat",  # a locale file: no name fragment makes a key
        "/scan/id_rsa.txt",
        "/scan/deploy/identity",
    ],
)
def test_ordinary_files_are_not_protected(path: str) -> None:
    assert rule_of_file(path) is None


def test_every_openssh_key_name_and_its_twins_are_credentials() -> None:
    names = [key + twin for key in SSH_KEY_NAMES for twin in ("", ".pub", "-cert.pub")]
    assert len(names) == 18 and set(names) <= CREDENTIAL_FILES
    assert {rule_of_file(f"/scan/p/{name}") for name in names} == {"credential"}


@pytest.mark.parametrize("name", ["cacert.pem", "test.key", "store.P12", "vault.kdbx"])
def test_a_key_like_name_in_a_package_is_no_credential_an_exact_name_is(name: str) -> None:
    assert protect_file(name, "/scan/p/.venv/lib", CTX, in_package=True) is None
    assert protect_file(name, "/scan/p/.venv/lib", CTX) is not None
    for exact in ("id_ed25519", ".netrc", ".env.local", ".git"):
        assert protect_file(exact, "/scan/p/.venv/lib", CTX, in_package=True) is not None


# -- from above: what the root lies in (reads the disk) ------------------------------------------


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    home, store = tmp_path / "home", tmp_path / "store"
    for rel in (
        "repo/.git/objects/ab",
        "home/.ssh/sub",
        "home/.config/app/cache",
        "home/projects/web",
        "store/snapshots/x",
        "kept/a/b",
        "plain/a",
    ):
        (tmp_path / rel).mkdir(parents=True, exist_ok=True)
    write(tmp_path / "kept" / KEEP_MARKER)
    return {"tmp": tmp_path, "home": home, "store": store}


def above(tree: dict[str, Path], rel: str) -> str | None:
    ctx = ProtectContext(root="", home=str(tree["home"]), store=str(tree["store"]))
    found = protection_above(str(tree["tmp"] / rel), ctx)
    return found.rule if found else None


@pytest.mark.parametrize(
    ("rel", "rule"),
    [
        ("repo/.git/objects/ab", "vcs"),
        ("repo/.git", "vcs"),  # the root's own name counts
        ("home/.ssh/sub", "credential"),
        ("home/.config/app/cache", "config"),
        ("store/snapshots/x", "store"),
        ("kept/a/b", "keep-marker"),  # a marker in an ancestor
        ("kept", "keep-marker"),  # a marker in the root itself
        ("home/projects/web", None),  # a home protects itself, not what is below it
        ("home", None),
        ("plain/a", None),
        ("repo", None),
    ],
)
def test_protection_above_the_root(tree: dict[str, Path], rel: str, rule: str | None) -> None:
    assert above(tree, rel) == rule


def test_a_keep_marker_added_later_is_seen_from_above(tree: dict[str, Path]) -> None:
    assert above(tree, "plain/a") is None
    write(tree["tmp"] / "plain" / KEEP_MARKER)
    assert above(tree, "plain/a") == "keep-marker"


def test_home_rel_and_homes() -> None:
    ctx = ProtectContext(root="/", home="/root", store="/store", other_homes=frozenset({"/h/a"}))
    assert ctx.homes == {"/root", "/h/a"}
    assert ctx.home_rel("/root") == "" and ctx.home_rel("/h/a/x/y") == "x/y"
    assert ctx.home_rel("/h/ab") is None and ctx.home_rel("/") is None


@pytest.mark.parametrize("others", [0, 40])  # few homes: prefix tests; many: a walk up
def test_home_rel_finds_the_nearest_home_with_few_or_many_homes(others: int) -> None:
    homes = frozenset({"/home/a", "/home/a/nested", *(f"/srv/u{i}" for i in range(others))})
    ctx = ProtectContext(root="/", home="/root", store="/store", other_homes=homes)
    assert ctx.home_rel("/home/a") == ""
    assert ctx.home_rel("/home/a/.cache") == ".cache"
    assert ctx.home_rel("/home/a/nested/.cache/x") == ".cache/x"  # the nearer home wins
    assert ctx.home_rel("/home/ab/.cache") is None
    assert ctx.home_rel("/root/.config") == ".config"
    assert ctx.home_rel("/elsewhere") is None


# -- accounts ----------------------------------------------------------------------------------


@pytest.fixture
def account(tmp_path: Path) -> Iterator[Path]:
    """A real account whose home is ``tmp_path/homes/NAME`` (removed afterwards)."""
    if os.geteuid() != 0 or shutil.which("useradd") is None:
        pytest.skip("adding an account needs root and useradd")
    name = f"hnbp_{secrets.token_hex(3)}"
    home = tmp_path / "homes" / name
    home.mkdir(parents=True)
    done = subprocess.run(["useradd", "-M", "-d", str(home), name], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot add an account here: {done.stderr.strip()}")
    try:
        assert pwd.getpwnam(name).pw_dir == str(home)
        yield home
    finally:
        subprocess.run(["userdel", name], capture_output=True)


def test_account_homes_in_or_around_the_root(account: Path, tmp_path: Path) -> None:
    assert str(account) in account_homes(str(tmp_path / "homes"))  # a home inside the root
    assert str(account) in account_homes(str(account / "projects"))  # a home holding the root
    assert str(account) in account_homes(str(account))
    (tmp_path / "elsewhere").mkdir()
    assert str(account) not in account_homes(str(tmp_path / "elsewhere"))
    assert str(account) not in account_homes(str(account) + "-twin")  # a look-alike name


def test_account_homes_through_a_link_and_never_a_missing_one(
    account: Path, tmp_path: Path
) -> None:
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "homes")
    name = account.name
    subprocess.run(["usermod", "-d", str(link / name), name], check=True, capture_output=True)
    assert str(account) in account_homes(str(tmp_path / "homes"))  # matched as the real path
    shutil.rmtree(account)
    assert str(account) not in account_homes(str(tmp_path / "homes"))
    assert "/" not in account_homes("/")


# -- git ---------------------------------------------------------------------------------------


def git(*args: str, cwd: Path) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    write(repo / "src" / "main.py", 10)
    write(repo / "notes.tmp", 10)
    write(Path(os.fsdecode(os.fsencode(repo) + b"/caf\xe9.txt")), 3)  # not valid UTF-8
    git("init", "-q", cwd=repo)
    git("add", "src/main.py", os.fsdecode(b"caf\xe9.txt"), cwd=repo)
    return repo


def test_find_git_tracked_lists_the_tracked_files_only(repo: Path, tmp_path: Path) -> None:
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    info = find_git_tracked([str(repo), str(plain), str(repo)])
    assert info.worktrees == (str(plain), str(repo))  # each once, sorted
    assert str(repo / "src" / "main.py") in info.tracked
    assert str(repo / "caf\\xe9.txt") in info.tracked  # decoded as snapshot paths are
    assert str(repo / "notes.tmp") not in info.tracked
    assert info.unreadable == {str(plain)} and info.note == ""


def test_find_git_tracked_runs_nothing_a_scanned_repository_configures(
    repo: Path, tmp_path: Path
) -> None:
    ran = tmp_path / "ran"  # plain `git ls-files` runs a configured fsmonitor command
    with (repo / ".git" / "config").open("a") as config:
        config.write(f'[core]\n\tfsmonitor = "touch {ran}"\n')
    info = find_git_tracked([str(repo)])
    assert str(repo / "src" / "main.py") in info.tracked
    assert not ran.exists()


def test_without_git_every_work_tree_is_protected_whole(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "no-programs"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    info = find_git_tracked([str(repo)])
    assert info.tracked == frozenset() and info.unreadable == {str(repo)}
    assert "git is not installed" in info.note
    ctx = ProtectContext(root=str(tmp_path), home="/nonexistent", store="/nonexistent", git=info)
    assert rule_of_dir(str(repo), ctx) == "git-unreadable"


def test_no_work_trees_no_git() -> None:
    assert find_git_tracked([]) == GitInfo()


def test_a_git_directory_without_head_is_protected_whole_without_asking_git(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = repo / "vendor" / "copied"
    write(fake / ".git" / "config", 10)  # a copied .git directory with no HEAD
    write(fake / "lib.py", 10)
    asked: list[str] = []
    real_run = subprocess.run

    def run(argv: list[str], **kwargs: Any) -> Any:
        asked.append(argv[argv.index("-C") + 1])
        return real_run(argv, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)
    info = find_git_tracked([str(repo), str(fake)])
    assert asked == [str(repo)]
    assert info.unreadable == {str(fake)}
    assert str(repo / "src" / "main.py") in info.tracked
    ctx = ProtectContext(root=str(tmp_path), home="/nonexistent", store="/nonexistent", git=info)
    assert rule_of_dir(str(fake), ctx) == "git-unreadable"
