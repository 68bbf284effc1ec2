"""Helpers the tests share (fixtures live in conftest.py).

Files made with a size, what du says, a scratch directory and a child process as another user,
this process acting as another user, tmpfs, bind and FUSE mounts that are always unmounted, a
filesystem filled to the last byte, an immutable file, real accounts made and removed, a scan
rewritten as format 1, a deadline for what could hang, and a tree for the report's surface.
"""

from __future__ import annotations

import ctypes
import dataclasses
import errno
import json
import os
import pwd
import re
import secrets
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from hypothesis import strategies as st


def write(path: Path, size: int = 0, data: bytes | None = None) -> Path:
    """Create a file with ``size`` bytes (or ``data``), making parents."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if data is not None else b"x" * size)
    return path


def du_bytes(path: Path | bytes, *, apparent: bool, excludes: Sequence[str] = ()) -> int:
    """What GNU du says of a path: ``-sb --apparent-size`` or ``-sB1``, with ``--exclude``s."""
    args = ["du", "-sb", "--apparent-size"] if apparent else ["du", "-sB1"]
    args += [f"--exclude={pattern}" for pattern in excludes]
    out = subprocess.run([*args, os.fsdecode(path)], check=True, capture_output=True).stdout
    return int(out.split()[0])


def confirmed_execute(plan: Any, store: Path | str) -> list[str]:
    """``hygiene-nb execute``'s arguments that move ``plan``'s candidates, fully confirmed (the
    plan id, its digest and the acknowledged risk, as a person would type them)."""
    return [
        "execute", plan.plan_path, "--store", str(store), "--execute",
        "--confirm-plan-id", plan.plan_id, "--plan-digest", plan.plan_digest,
        "--acknowledge-risk", "quarantine",
    ]  # fmt: skip


@contextmanager
def world_readable_tmpdir() -> Iterator[Path]:
    """A scratch directory another user can reach (pytest's tmp_path is under a 0700 one)."""
    path = Path(tempfile.mkdtemp(prefix="hygiene-nb-nobody-", dir="/tmp"))
    try:
        path.chmod(0o755)
        yield path
    finally:
        for dirpath, dirnames, _ in os.walk(path):
            for name in dirnames:
                os.chmod(os.path.join(dirpath, name), 0o755)
        shutil.rmtree(path)


def as_nobody(work: Callable[[], Any]) -> Any:
    """Run ``work`` in a forked child as user 'nobody' (permissions apply); return its JSON result.

    Root bypasses permissions, so tests of unreadable entries drop to 'nobody' in a child.
    ``work`` must return something ``json.dumps`` can write.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop to nobody, work, report, exit without cleanup
        code = 1
        try:
            os.close(read_fd)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            result = work()
            with os.fdopen(write_fd, "w") as out:
                json.dump(result, out)
            code = 0
        finally:
            os._exit(code)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return json.loads(data)


@contextmanager
def tmpfs(where: Path, options: str = "size=1m") -> Iterator[Path]:
    """A small tmpfs mounted on ``where`` for the block; skips the test where that is impossible.

    Another filesystem inside a tree is what mount-point handling is about; only root can make
    one here.
    """
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    try:
        done = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", options, "hygiene-nb-test", str(where)],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"mount is not usable here ({exc})")
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    mounted = None
    try:
        mounted = _mount_id(where)
        yield where
    finally:
        _unmount(where, mounted)


def fill(fs: Path) -> Path:
    """Take every free byte of the filesystem at ``fs`` (the file that holds them)."""
    filler = fs / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for chunk in (1 << 20, 1 << 12, 1):
            while True:
                try:
                    os.write(fd, b"\0" * chunk)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC
                    break
    finally:
        os.close(fd)
    return filler


@contextmanager
def bind_mount(source: Path, where: Path, *, read_only: bool = False) -> Iterator[Path]:
    """``source`` bind-mounted on ``where`` for the block (the same filesystem: same ``st_dev``).

    Skips the test where mounting is impossible (not root, no mount permission); unmounts in
    any case, lazily as a last resort.
    """
    if os.geteuid() != 0:
        pytest.skip("a bind mount needs root")
    try:
        done = subprocess.run(
            ["mount", "--bind", str(source), str(where)], capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        pytest.skip(f"mount is not usable here ({exc})")
    if done.returncode != 0:
        pytest.skip(f"cannot bind-mount here: {done.stderr.strip()}")
    mounted = None
    try:
        mounted = _mount_id(where)
        if read_only:
            subprocess.run(["mount", "-o", "remount,bind,ro", str(where)], check=True)
        yield where
    finally:
        _unmount(where, mounted)


@contextmanager
def immutable(path: Path) -> Iterator[Path]:
    """``path`` immutable (``chattr +i``) for the block: not even root may unlink or rename it.

    Skips the test where that is impossible (not root, no chattr, a filesystem without the
    attribute); the attribute is always cleared afterwards.
    """
    if os.geteuid() != 0:
        pytest.skip("making a file immutable needs root")
    try:
        done = subprocess.run(["chattr", "+i", str(path)], capture_output=True, text=True)
    except OSError as exc:
        pytest.skip(f"chattr is not usable here ({exc})")
    if done.returncode != 0:
        pytest.skip(f"cannot make a file immutable here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True, capture_output=True)


def _mount_id(where: Path) -> int | None:
    from hygiene_nb.fs.mounts import mount_id

    fd = os.open(where, os.O_PATH | os.O_CLOEXEC)  # a directory or a file mounted on one
    try:
        return mount_id(fd)
    finally:
        os.close(fd)


def _unmount(where: Path, mounted: int | None) -> None:
    """Unmount what a test mounted on ``where``, wherever it is now (a move takes it along)."""
    points = []
    if mounted is not None:
        with open("/proc/self/mountinfo", "rb") as info:
            fields = [line.split(b" ") for line in info]
        points = [
            Path(os.fsdecode(re.sub(rb"\\([0-7]{3})", lambda m: bytes([int(m[1], 8)]), f[4])))
            for f in fields
            if int(f[0]) == mounted
        ]
    points = points or [where]
    if subprocess.run(["umount", str(points[0])], capture_output=True).returncode != 0:
        subprocess.run(["umount", "-l", str(points[0])], capture_output=True)


class Account(NamedTuple):
    """A real account made by ``useradd`` (with a group of its name)."""

    name: str
    uid: int
    gid: int


@contextmanager
def added_account(prefix: str = "hnbt_") -> Iterator[Account]:
    """A real user with its own group, removed afterwards (skips unless root with useradd).

    Its name is ``prefix`` and six random hex digits (a distinctive one to search output for).
    """
    if os.geteuid() != 0:
        pytest.skip("this case needs root (a second user)")
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not available")
    name = f"{prefix}{secrets.token_hex(3)}"
    done = subprocess.run(["useradd", "-M", "-U", name], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot add a user here: {done.stderr.strip()}")
    try:
        entry = pwd.getpwnam(name)
        yield Account(name, entry.pw_uid, entry.pw_gid)
    finally:
        remove_account(name)


def remove_account(name: str) -> None:
    """``userdel`` the account ``name`` and its group (nothing if it is gone already)."""
    subprocess.run(["userdel", "-r", name], capture_output=True)


def as_format_1(info: Any, store: Path) -> None:
    """Rewrite a scan (a ``ScanInfo``) the way a format-1 writer left it: no format-2 columns, no
    format key, and none of the metadata fields added since (``format_version``, owner names)."""
    import pyarrow.parquet as pq

    later = ("format_version", "user_names", "group_names")
    part = Path(info.path) / "part-0.parquet"
    table = pq.read_table(part)
    meta = {k: v for k, v in pq.read_metadata(part).metadata.items() if k != b"ARROW:schema"}
    footer = json.loads(meta.pop(b"hygiene_nb.scan"))
    for key in later:
        footer.pop(key)
    meta.pop(b"hygiene_nb.format_version")
    meta[b"hygiene_nb.scan"] = json.dumps(footer).encode()
    old = table.drop_columns(["ctime_ns", "uid", "gid", "mode"]).replace_schema_metadata(meta)
    pq.write_table(old, part)
    index = store / "index.jsonl"
    lines = []
    for line in index.read_text().splitlines():
        record = json.loads(line)
        if record["scan_id"] == info.scan_id:
            for key in later:
                record.pop(key)
        lines.append(json.dumps(record))
    index.write_text("\n".join(lines) + "\n")


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


@contextmanager
def acting_as(uid: int = 65534, gid: int = 65534) -> Iterator[None]:
    """This process with the effective user and group ``uid``/``gid`` for the block (root only).

    Unlike ``as_nobody`` it stays in this process (so what runs is measured), keeps the real
    and saved ids root and so gives root back afterwards; permissions and capabilities are those
    of ``uid`` meanwhile (a non-zero effective uid has no capabilities).
    """
    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root")
    groups = os.getgroups()
    os.setgroups([])
    os.setegid(gid)
    os.seteuid(uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(0)
        os.setgroups(groups)


@contextmanager
def files_made_as(uid: int) -> Iterator[None]:
    """Files and directories this thread makes belong to ``uid`` for the block (root only).

    What an NFS export with ``root_squash`` does to root: the kernel's filesystem uid
    (``setfsuid``) is ``uid`` while the effective uid stays root. Permissions are checked as
    ``uid`` meanwhile.
    """
    if os.geteuid() != 0:
        pytest.skip("setting the filesystem uid needs root")
    libc = ctypes.CDLL(None, use_errno=True)
    libc.setfsuid(uid)
    try:
        yield
    finally:
        libc.setfsuid(0)


_FUSE_IN = struct.Struct("<IIQQIIIHH")  # len, opcode, unique, node, uid, gid, pid, extlen, pad
_FUSE_OUT = struct.Struct("<IiQ")  # len, error, unique
_FUSE_ATTR = struct.Struct("<6Q10I")  # ino size blocks atime mtime ctime, 3 nsec, mode nlink...
_LOOKUP, _GETATTR, _STATFS, _INIT, _OPENDIR, _RELEASEDIR = 1, 3, 17, 26, 27, 29
_NO_REPLY = {2, 36, 42}  # FORGET, INTERRUPT, BATCH_FORGET


@contextmanager
def fuse_mount(where: Path, files: dict[bytes, bytes]) -> Iterator[Path]:
    """A tiny read-only FUSE filesystem on ``where`` for the block: a root holding ``files``.

    Served by a thread of this process over ``/dev/fuse``. It answers what a user-space
    filesystem without extended attributes or birth times answers: every other request (list
    or read attributes, ``statx``, open a file…) gets ``ENOSYS``, and its ``statfs`` gives no
    ``f_fsid`` (zero), as FUSE filesystems do. Skips the test where FUSE cannot be mounted.
    """
    if os.geteuid() != 0:
        pytest.skip("mounting a FUSE filesystem needs root")
    try:
        dev = os.open("/dev/fuse", os.O_RDWR | os.O_CLOEXEC)
    except OSError as exc:
        pytest.skip(f"no FUSE here ({exc.strerror})")
    libc = ctypes.CDLL(None, use_errno=True)
    options = f"fd={dev},rootmode=40000,user_id=0,group_id=0".encode()
    if libc.mount(b"hygiene-nb-fuse", os.fsencode(where), b"fuse", 0, options) != 0:
        err = ctypes.get_errno()
        os.close(dev)
        pytest.skip(f"cannot mount a FUSE filesystem here ({os.strerror(err)})")
    nodes = {name: node for node, name in enumerate(files, start=2)}
    names = {node: name for name, node in nodes.items()}

    def attr(node: int) -> bytes:
        when = 1_700_000_000
        if node == 1:
            kind, size, nlink = stat.S_IFDIR | 0o755, 0, 2
        else:
            kind, size, nlink = stat.S_IFREG | 0o644, len(files[names[node]]), 1
        return _FUSE_ATTR.pack(
            node, size, 1, when, when, when, 0, 0, 0, kind, nlink, 0, 0, 0, 4096, 0
        )

    def answer(op: int, node: int, body: bytes) -> bytes:
        if op == _INIT:
            minor = min(struct.unpack_from("<II", body)[1], 31)
            return struct.pack("<IIIIHHIIHHII24x", 7, minor, 0, 0, 0, 0, 4096, 1, 0, 0, 0, 0)
        if op == _GETATTR:
            return struct.pack("<QII", 0, 0, 0) + attr(node)
        if op == _LOOKUP:
            found = nodes.get(body.rstrip(b"\0")) if node == 1 else None
            if found is None:
                raise FileNotFoundError(errno.ENOENT, "no such entry")
            return struct.pack("<QQQQII", found, 0, 0, 0, 0, 0) + attr(found)
        if op == _STATFS:
            return struct.pack("<5Q4I24x", 100, 50, 50, 10, 5, 4096, 255, 4096, 0)
        if op == _OPENDIR:
            return struct.pack("<QII", 0, 0, 0)
        if op == _RELEASEDIR:
            return b""
        raise OSError(errno.ENOSYS, "not served")

    def serve() -> None:
        while True:
            try:
                request = os.read(dev, (1 << 20) + 8192)
            except InterruptedError:
                continue
            except OSError:
                return  # unmounted: the connection is gone
            size, op, unique, node, *_ = _FUSE_IN.unpack_from(request)
            if op in _NO_REPLY:
                continue
            try:
                out, err = answer(op, node, request[_FUSE_IN.size : size]), 0
            except OSError as exc:
                out, err = b"", -(exc.errno or errno.EIO)
            except Exception:  # noqa: BLE001 - never unanswered: its caller would hang
                out, err = b"", -errno.EIO
            with suppress(OSError):  # ENOENT: the request was interrupted meanwhile
                os.write(dev, _FUSE_OUT.pack(_FUSE_OUT.size + len(out), err, unique) + out)

    server = threading.Thread(target=serve, name="fuse", daemon=True)
    server.start()
    try:
        yield where
    finally:
        libc.umount2(os.fsencode(where), 2)  # MNT_DETACH: handles still open keep it alive
        server.join(timeout=30)  # it ends once the last handle on the filesystem is closed
        os.close(dev)


# -- random real trees (hypothesis) ---------------------------------------------------------

_TREE_NAMES = st.sampled_from(
    [
        "node_modules", "__pycache__", ".cache", "build", "Documents", "src", "a", "b",
        "app.log", "m.pyc", "key.pem", "notes.txt", "package.json", ".git", "x.tmp", "é",
    ]
)  # fmt: skip


@dataclasses.dataclass(frozen=True)
class TreeEntry:
    """One file of a random tree (``TREE_ENTRIES``)."""

    path: tuple[str, ...]
    size: int
    age_days: int
    link_to: int | None  # a hard link to an earlier file


TREE_ENTRIES = st.lists(
    st.builds(
        TreeEntry,
        path=st.lists(_TREE_NAMES, min_size=1, max_size=4).map(tuple),
        size=st.integers(0, 5000),
        age_days=st.sampled_from([0, 10, 45, 200, 400, 800, -3]),
        link_to=st.one_of(st.none(), st.integers(0, 40)),
    ),
    min_size=1,
    max_size=40,
)


# excluded entries are recorded and counted nowhere, in the queries as in the definition
TREE_EXCLUDES = st.sampled_from([[], ["*.log"], ["a", "*.pyc"], ["build/", "é"]])


def build_tree(root: Path, entries: list[TreeEntry]) -> None:
    """Files at each path (a name already a directory is skipped), some hard-linked, aged."""
    root.mkdir(parents=True)
    made: list[Path] = []
    now = time.time()
    for entry in entries:
        path = root.joinpath(*entry.path)
        if any(p.exists() and not p.is_dir() for p in path.parents if root in p.parents) or (
            path.exists()
        ):
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        if entry.link_to is not None and entry.link_to < len(made):
            os.link(made[entry.link_to], path)
        else:
            path.write_bytes(b"x" * entry.size)
            made.append(path)
        stamp = now - entry.age_days * 86_400
        os.utime(path, (stamp, stamp))


def project_with_venv(venv: Path, project: Path) -> Path:
    """``project`` with a ``pyproject.toml`` and a copy of the virtualenv ``venv`` as ``.venv``.

    Returns the copy's ``site-packages``.
    """
    write(project / "pyproject.toml", data=b'[project]\nname = "demo"\nversion = "0"\n')
    shutil.copytree(venv, project / ".venv", symlinks=True)
    (found,) = (project / ".venv").glob("lib/python*/site-packages")
    return found


def ssh_keygen(path: Path, *args: str) -> Path:
    """An OpenSSH key pair made by ``ssh-keygen`` at ``path`` (no passphrase); skips without it."""
    if shutil.which("ssh-keygen") is None:
        pytest.skip("ssh-keygen is not installed")
    path.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(path), *args],
        check=True,
    )
    return path


# a direct child of the root whose name is longer than any table cell or chart label is wide
LONG_NAME = "recordings-of-the-quarterly-meetings-and-workshops-held-in-2025-and-2026-by-the-team"
SMALL_FILES = 1_203  # past a thousand: a count with a separator


def report_tree(root: Path) -> Path:
    """A tree for the report's surface: over a thousand small files, a long name, bytecode."""
    for i in range(SMALL_FILES):
        write(root / "src" / f"m{i:04d}.py", 10 + i % 7)
    write(root / LONG_NAME / "film.bin", 3_500_000)
    write(root / "src" / "__pycache__" / "m0000.cpython-312.pyc", 1_200_000)  # safe
    return root


# -- a fleet: real trees on three "hosts", each scanned twice and published by the CLI --------


@dataclasses.dataclass
class FleetHost:
    """One host of ``published_fleet``: its roots, its store, and what du said at each scan."""

    name: str
    store: Path
    roots: list[Path]
    du: list[dict[str, int]] = dataclasses.field(default_factory=list)  # per round: root → bytes

    @property
    def latest(self) -> int:
        """The allocated bytes of its roots at their latest scan (``du -sB1``)."""
        return sum(self.du[-1].values())

    @property
    def growth(self) -> int:
        """What its roots grew from the first scan to the latest, by du."""
        return self.latest - sum(self.du[0].values())


def hnb(*args: str | Path, home: Path | None = None) -> dict[str, Any]:
    """Run the real ``hygiene-nb`` command (``--json``) in a child process; its JSON object.

    With ``home``, the child's ``HOME`` (and XDG data directory) is that directory.
    """
    env = dict(os.environ)
    env.pop("HYGIENE_NB_STORE", None)
    if home is not None:
        env |= {"HOME": str(home), "XDG_DATA_HOME": str(home / ".local" / "share")}
    done = subprocess.run(
        [sys.executable, "-m", "hygiene_nb", *map(str, args), "--json"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    found: dict[str, Any] = json.loads(done.stdout)
    return found


# (host, roots, bytes per root in the first scan, bytes each root adds before the second)
FLEET_HOSTS = (
    ("web-01", 1, 300_000, 120_000),
    ("db-02", 2, 500_000, 700_000),
    ("ci-03", 1, 900_000, -400_000),  # shrinks: a build output removed between the scans
)


def _fleet_tree(root: Path, size: int) -> None:
    write(root / "project" / "node_modules" / "lib" / "index.js", size // 2)
    write(root / "project" / "src" / "main.py", 4_000)
    write(root / "Documents" / "notes.txt", 6_000)
    old = write(root / "archive" / "2019.tar", size // 2)
    stamp = time.time() - 2 * 365 * 86_400  # untouched for two years
    os.utime(old, (stamp, stamp))


def _next_second() -> None:
    """Start the next round of scans in another second: the history shows them apart."""
    time.sleep(1.01 - time.time() % 1)


def published_fleet(base: Path) -> tuple[Path, list[FleetHost]]:
    """A fleet dataset at ``base/fleet``: ``FLEET_HOSTS``, each root scanned twice, all published.

    Every scan and publish is the real CLI; each host has a store of its own, and du is asked
    for every root's allocated bytes right after each scan.
    """
    dest = base / "fleet"
    hosts = []
    scans: list[tuple[FleetHost, Path, str]] = []
    home = base / "home"
    home.mkdir(parents=True, exist_ok=True)
    for name, roots, _size, _ in FLEET_HOSTS:
        paths = [base / name / f"root{i}" for i in range(roots)]
        hosts.append(FleetHost(name, base / name / "store", paths))
    for round_no in range(2):
        if round_no:
            _next_second()
        for host, (_, _, size, change) in zip(hosts, FLEET_HOSTS, strict=True):
            sizes = {}
            for root in host.roots:
                if round_no == 0:
                    _fleet_tree(root, size)
                elif change > 0:
                    write(root / "project" / "build" / "out.bin", change)
                else:
                    (root / "project" / "node_modules" / "lib" / "index.js").unlink()
                    write(
                        root / "project" / "node_modules" / "lib" / "index.js", size // 2 + change
                    )
                scan = hnb("scan", root, "--store", host.store, home=home)
                sizes[str(root)] = du_bytes(root, apparent=False)
                scans.append((host, root, str(scan["scan_id"])))
            host.du.append(sizes)
    for host, root, scan_id in scans:
        hnb("publish", dest, root, "--snapshot", scan_id, "--host", host.name,
            "--store", host.store, home=home)  # fmt: skip
    return dest, hosts
