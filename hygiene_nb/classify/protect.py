"""Protection: what can never enter a plan, whatever a person or a rule decided (docs/rules.md).

Pure: ``ProtectContext`` (home, store, root, git-tracked files) is built at the edge by
``api``; the predicates here only look at names and paths. Classification applies them, marks
everything under a protected directory, and every ancestor of a protected entry.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cached_property

from hygiene_nb.store import FLEET_MARKER, QUARANTINE_NAME

__all__ = [
    "CONTAINER_HOME_DIRS",
    "CONTAINER_SYSTEM_DIRS",
    "CREDENTIAL_DIRS",
    "CREDENTIAL_EXTENSIONS",
    "CREDENTIAL_FILES",
    "CREDENTIAL_PREFIXES",
    "KEEP_MARKER",
    "KEEP_MARKERS",
    "PASSES_DOWN",
    "SSH_KEY_NAMES",
    "SYSTEM_DIRS",
    "VCS_DIRS",
    "GitInfo",
    "ProtectContext",
    "Protection",
    "account_homes",
    "credential_name",
    "dir_protection_keys",
    "find_git_tracked",
    "key_like",
    "protect_dir",
    "protect_file",
    "protection_above",
]

KEEP_MARKER = ".hygiene-nb-keep"
# The names that keep their directory and everything inside: the keep marker, and the top of a
# fleet dataset (published evidence from many hosts, never planned: docs/fleet.md).
KEEP_MARKERS = (KEEP_MARKER, FLEET_MARKER)
VCS_DIRS = frozenset({".git", ".hg", ".svn", ".bzr"})
CREDENTIAL_DIRS = frozenset(
    {".ssh", ".gnupg", ".aws", ".kube", ".password-store", "keyrings", ".pki", ".docker"}
)
# OpenSSH's default key names (ssh-keygen -t …), each with its public key and certificate
SSH_KEY_NAMES = ("id_rsa", "id_dsa", "id_ecdsa", "id_ed25519", "id_ecdsa_sk", "id_ed25519_sk")
# Credentials by their exact name: protected anywhere, inside a package too.
CREDENTIAL_FILES = frozenset(
    {".netrc", ".git-credentials", ".pgpass", ".npmrc", ".pypirc"}
    | {key + twin for key in SSH_KEY_NAMES for twin in ("", ".pub", "-cert.pub")}
)
CREDENTIAL_PREFIXES = (".env",)  # .env, .env.local, .envrc: secrets by convention
# Key-like by extension: credentials, except inside an evidenced dependency or build directory,
# where packages ship them (certifi's CA bundle, test fixtures): see classification.
CREDENTIAL_EXTENSIONS = (".pem", ".key", ".p12", ".pfx", ".kdbx", ".keystore", ".jks")
SYSTEM_DIRS = frozenset(
    {
        "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/run",
        "/sbin", "/sys", "/usr", "/var", "/srv", "/snap", "/System", "/Library", "/Applications",
        "/private", "/opt",
    }
)  # fmt: skip
HOME_CONFIG = ("Library/Preferences", ".config", ".local/share/keyrings")
# Docker's and Podman's storage: images, layers, volumes, the engine's own database. Rootful
# engines keep it under /var/lib; rootless Podman (and Buildah) under ~/.local/share/containers,
# rootless Docker under ~/.local/share/docker.
CONTAINER_SYSTEM_DIRS = frozenset({"/var/lib/docker", "/var/lib/containers"})
CONTAINER_HOME_DIRS = (".local/share/containers", ".local/share/docker")


@dataclass(frozen=True)
class Protection:
    """Why an entry is protected: a stable rule id and a one-line claim."""

    rule: str
    claim: str


ROOT = Protection("root", "The scanned root itself: never removed as a whole")
FILESYSTEM_ROOT = Protection("filesystem-root", "The filesystem root: never removed")
HOME = Protection("home", "Your home directory: never removed as a whole")
SYSTEM = Protection(
    "system", "Operating-system directory: removing anything here can break the machine"
)
VCS = Protection(
    "vcs", "Version-control history (.git, .hg, .svn): losing it loses the project's history"
)
CREDENTIAL = Protection("credential", "Keys or credentials: losing them can lock you out")
CONFIG = Protection("config", "Configuration: programs and your settings depend on it")
GIT_TRACKED = Protection("git-tracked", "A file git tracks: part of a project's source")
GIT_UNKNOWN = Protection(
    "git-unreadable",
    "Inside a git work tree whose tracked files could "
    "not be listed (git unavailable): protected as a whole",
)
PROJECT_MANIFEST = Protection(
    "project-manifest",
    "A project's manifest or lockfile: it says what the project is and what rebuilds the rest",
)
KEEP = Protection(
    "keep-marker",
    "Marked with .hygiene-nb-keep (or a fleet dataset's hygiene-nb-fleet.json): kept, with "
    "everything inside",
)
STORE = Protection("store", "hygiene-nb's own store or quarantine")
CONTAINER_STORAGE = Protection(
    "container-storage",
    "Container storage (Docker, Podman): only the container engine may change it "
    "(`docker system prune`, `podman system prune`)",
)
CONTAINS = Protection(
    "contains-protected", "Contains something protected, so it cannot be removed as a whole"
)
ALL_PROTECTIONS = (
    ROOT,
    FILESYSTEM_ROOT,
    HOME,
    SYSTEM,
    VCS,
    CREDENTIAL,
    CONFIG,
    GIT_TRACKED,
    GIT_UNKNOWN,
    PROJECT_MANIFEST,
    KEEP,
    STORE,
    CONTAINER_STORAGE,
    CONTAINS,
)


@dataclass(frozen=True)
class GitInfo:
    """What git said about the work trees in a snapshot (built at the edge)."""

    worktrees: tuple[str, ...] = ()  # every git work tree found (listed or not)
    tracked: frozenset[str] = frozenset()  # absolute paths of tracked files
    unreadable: frozenset[str] = frozenset()  # work trees whose files could not be listed
    note: str = ""  # e.g. "git is not installed"


_FEW_HOMES = 16


@dataclass(frozen=True)
class ProtectContext:
    """The facts protection needs, gathered at the edge."""

    root: str
    home: str
    store: str
    git: GitInfo = field(default_factory=GitInfo)
    keep_dirs: frozenset[str] = frozenset()  # directories holding a .hygiene-nb-keep marker
    above_root: Protection | None = None  # the root lies inside something protected
    other_homes: frozenset[str] = frozenset()  # other accounts' homes in or around the root
    # the scan's valid CACHEDIR.TAG files: (directory, tool or ""), sorted (scan.cachedir)
    cache_tags: tuple[tuple[str, str], ...] = ()

    @cached_property
    def homes(self) -> frozenset[str]:
        """Every home directory protection and the home-relative rules apply to."""
        return self.other_homes | {self.home}

    @cached_property
    def config_dirs(self) -> frozenset[str]:
        """The paths ``HOME_CONFIG`` names in every home (a set to test before ``home_rel``)."""
        return frozenset(h.rstrip("/") + "/" + c for h in self.homes for c in HOME_CONFIG)

    @cached_property
    def container_dirs(self) -> frozenset[str]:
        """Where container engines keep their storage, in every home and under /var/lib."""
        homes = (h.rstrip("/") + "/" + c for h in self.homes for c in CONTAINER_HOME_DIRS)
        return CONTAINER_SYSTEM_DIRS | frozenset(homes)

    @cached_property
    def _home_prefixes(self) -> tuple[tuple[str, str], ...]:
        """(home, home + "/"), the deepest first: the nearest home matches first."""
        return tuple((h, h.rstrip("/") + "/") for h in sorted(self.homes, key=len, reverse=True))

    def home_rel(self, path: str) -> str | None:
        """``path`` relative to the nearest home holding it ("" for a home), else None.

        Called for every directory: a few prefix tests for the usual handful of homes; with
        many (auditing ``/`` of a machine with thousands of accounts) a walk up the path.
        """
        if len(self.homes) <= _FEW_HOMES:
            for home, prefix in self._home_prefixes:
                if path == home:
                    return ""
                if path.startswith(prefix):
                    return path[len(prefix) :]
            return None
        homes = self.homes
        current = path
        while True:
            if current in homes:
                return _home_rel(path, current)
            parent = os.path.dirname(current)
            if parent == current:
                return None
            current = parent


PASSES_DOWN = frozenset(
    p.rule for p in ALL_PROTECTIONS if p not in (ROOT, HOME, FILESYSTEM_ROOT, CONTAINS)
)


def protection_above(root: str, ctx: ProtectContext) -> Protection | None:
    """What protects ``root`` from above, if anything.

    A protected ancestor (or the root's own name), or a keep marker in the root or an ancestor.
    Reads the disk (``lexists``), read-only.
    """
    probe = ProtectContext("", ctx.home, ctx.store, ctx.git, other_homes=ctx.other_homes)
    path = root
    while True:
        name = os.path.basename(path) or path
        found = protect_dir(path, name, probe)
        if found is not None and found.rule in PASSES_DOWN:
            return found
        if any(os.path.lexists(os.path.join(path, m)) for m in KEEP_MARKERS):
            return KEEP
        parent = os.path.dirname(path)
        if parent == path:
            return None
        path = parent


def _home_rel(path: str, home: str) -> str | None:
    if path == home:
        return ""
    prefix = home.rstrip("/") + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def protect_dir(path: str, name: str, ctx: ProtectContext) -> Protection | None:
    """Why a directory (and everything inside it, unless it is root/home) is protected."""
    # First: a work tree git cannot list is protected as a whole, even when it holds the root.
    unreadable = ctx.git.unreadable
    if path in unreadable or (
        path == ctx.root and any(path.startswith(t + "/") for t in unreadable)
    ):
        return GIT_UNKNOWN
    if path == ctx.root:
        return ROOT
    if path == "/":
        return FILESYSTEM_ROOT
    if path in ctx.homes:
        return HOME
    if path in SYSTEM_DIRS:
        return SYSTEM
    if name in VCS_DIRS:
        return VCS
    if name in CREDENTIAL_DIRS:
        return CREDENTIAL
    if path == ctx.store or name == QUARANTINE_NAME:
        return STORE
    if path in ctx.container_dirs:
        return CONTAINER_STORAGE
    if path in ctx.keep_dirs:
        return KEEP
    if path in ctx.config_dirs and ctx.home_rel(path) in HOME_CONFIG:
        return CONFIG
    return None


def dir_protection_keys(ctx: ProtectContext) -> tuple[frozenset[str], frozenset[str]]:
    """The paths and the names outside which ``protect_dir`` finds nothing.

    ``protect_dir(path, name, ctx)`` is None unless ``path`` is one of the first or ``name`` one
    of the second: a caller with many directories asks it only about those (each branch of
    ``protect_dir`` has its path or name here, and a test holds the two together).
    """
    paths = frozenset(
        {ctx.root, "/", ctx.store, *ctx.git.unreadable, *ctx.homes, *SYSTEM_DIRS}
        | ctx.container_dirs
        | ctx.keep_dirs
        | ctx.config_dirs
    )
    return paths, frozenset({*VCS_DIRS, *CREDENTIAL_DIRS, QUARANTINE_NAME})


def credential_name(name: str) -> bool:
    """Whether ``name`` is a credential by its exact name (``id_rsa``, ``.netrc``, ``.env*``)."""
    return name in CREDENTIAL_FILES or name.startswith(CREDENTIAL_PREFIXES)


def key_like(name: str) -> bool:
    """Whether ``name`` has a key's extension (``*.pem``, ``*.key``…, in any case)."""
    return name.lower().endswith(CREDENTIAL_EXTENSIONS)


def protect_file(
    name: str, parent: str, ctx: ProtectContext, *, in_package: bool = False
) -> Protection | None:
    """Why a non-directory entry is protected by its own name or place (not git tracking).

    ``in_package``: it lies inside an evidenced dependency or build directory, where a key-like
    name is the package's (a CA bundle, a test key), not a credential of yours.
    """
    if name in VCS_DIRS:  # a gitfile (.git as a file, in submodules and worktrees)
        return VCS
    if name in KEEP_MARKERS:
        return KEEP
    if credential_name(name) or (key_like(name) and not in_package):
        return CREDENTIAL
    if parent in ctx.homes and name.startswith("."):
        return CONFIG
    return None


def account_homes(root: str) -> frozenset[str]:
    """The home directories of this machine's accounts that lie in ``root`` or hold it.

    When root audits ``/home``, every user's home, dotfiles and caches are recognized as such,
    not only root's own. "/" and homes that do not exist are left out.
    """
    try:
        entries = pwd.getpwall()
    except OSError:
        return frozenset()
    out = set()
    for entry in entries:
        if not (entry.pw_dir or "").startswith("/"):
            continue
        # scanned paths never go through a symlink (the root is refused if it is one), so a
        # home given as /home/bob where /home -> /data/home is matched as /data/home/bob
        home = os.path.realpath(entry.pw_dir)
        if home == "/" or not os.path.isdir(home):
            continue
        if _home_rel(home, root) is not None or _home_rel(root, home) is not None:
            out.add(home)
    return frozenset(out)


_GIT_PARALLEL = 4  # git ls-files processes at a time


def _may_be_repository(tree: str) -> bool:
    """Whether git could take ``tree/.git`` for a repository (else it is not asked).

    A ``.git`` directory without ``HEAD`` is no repository to git: listing it would fail, or
    list some enclosing repository instead; either way the work tree is protected whole.
    A ``.git`` file (a submodule's or a linked work tree's pointer) is left to git.
    """
    git = os.path.join(tree, ".git")
    return not os.path.isdir(git) or os.path.lexists(os.path.join(git, "HEAD"))


def find_git_tracked(worktrees: Iterable[str], *, timeout: float = 60.0) -> GitInfo:
    """Ask git which files each work tree tracks (read-only: ``ls-files``, no optional locks).

    A work tree git cannot list is reported in ``unreadable`` and protected as a whole.
    """
    trees = sorted(set(worktrees))
    tracked: set[str] = set()
    unreadable: list[str] = []
    note = ""
    # A scanned repository is untrusted input: its own config could make git run commands
    # (core.fsmonitor, hooks). Command-line config overrides the repository's; no system or
    # global config is read; nothing is written (no optional locks).
    env = {
        **os.environ,
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_TERMINAL_PROMPT": "0",
    }
    safe = [
        "-c",
        "core.fsmonitor=false",
        "-c",
        f"core.hooksPath={os.devnull}",
        "-c",
        "core.untrackedCache=false",
    ]

    def ls_files(tree: str) -> subprocess.CompletedProcess[bytes] | str:
        if not _may_be_repository(tree):
            return "not a repository"  # protected whole, as git's own refusal would be
        try:
            return subprocess.run(
                ["git", *safe, "-C", tree, "ls-files", "-z", "--full-name"],
                capture_output=True,
                timeout=timeout,
                env=env,
                check=False,
            )
        except FileNotFoundError:
            return "git is not installed: every git work tree is protected as a whole"
        except subprocess.TimeoutExpired:
            return "timed out"

    # git start-up dominates for small work trees: a few at a time (485 trees: 1.2 s → 0.4 s)
    with ThreadPoolExecutor(max_workers=min(_GIT_PARALLEL, max(1, len(trees)))) as pool:
        results = list(pool.map(ls_files, trees))
    for tree, result in zip(trees, results, strict=True):
        if isinstance(result, str):
            unreadable.append(tree)
            if result.startswith("git is not installed"):
                note = result
            continue
        if result.returncode != 0:
            unreadable.append(tree)
            continue
        for rel in result.stdout.split(b"\0"):
            if rel:
                # decoded as snapshot paths are, so non-UTF-8 names compare equal
                tracked.add(os.path.join(tree, rel.decode("utf-8", "backslashreplace")))
    return GitInfo(
        worktrees=tuple(trees),
        tracked=frozenset(tracked),
        unreadable=frozenset(unreadable),
        note=note,
    )
