"""Helpers the executor tests share (fixtures live in conftest.py).

Plans and confirmations from a world, plans forged and registered by editing the ledger,
children that execute a plan and are killed, runs stopped in this process at a checkpoint,
where the bytes of each file are after it, a batch's manifest and layout, batches filled
directly the way the executor fills them, and a rename that fails.
"""

from __future__ import annotations

import base64
import dataclasses
import errno
import hashlib
import json
import os
import secrets
import signal
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.executor import Confirmation, batches, changes, restore
from hygiene_nb.executor.batches import (
    TREE_NAME,
    Batch,
    ManifestItem,
    claim_batch,
    read_manifest,
    write_manifest,
)
from hygiene_nb.executor.fileops import DIR_FLAGS, REMOVING_PREFIX, LocalFileOps
from hygiene_nb.fs.fingerprint import fingerprint, kind_of_mode, signed64, walk_subtree
from hygiene_nb.plan.schema import plan_digest
from hygiene_nb.recheck import Reviewed
from hygiene_nb.store import Store

# -- plans, and executions killed in a child -------------------------------------------------------


def snapshot_of(*roots: Path) -> dict[bytes, tuple[int, int, int, str]]:
    """Every entry under ``roots``: inode, size, mode and a content hash for files."""
    out: dict[bytes, tuple[int, int, int, str]] = {}
    for root in roots:
        for dirpath, dirnames, filenames in os.walk(os.fsencode(root)):
            for name in dirnames + filenames:
                p = os.path.join(dirpath, name)
                st = os.lstat(p)
                digest = ""
                if os.path.isfile(p) and not os.path.islink(p):
                    digest = hashlib.sha256(Path(os.fsdecode(p)).read_bytes()).hexdigest()
                out[p] = (st.st_ino, st.st_size, st.st_mode, digest)
    return out


def make_plan(world: dict[str, Path], *rels: str, ttl: int = 1800) -> api.PlanResult:
    root, store = world["root"], world["store"]
    api.scan_root(root, store=store)
    api.annotate([str(root / r) for r in rels], store=store, decision="delete")
    return api.make_plan(root, store=store, ttl=ttl)


def confirm_for(result: api.PlanResult, ack: str | None = "quarantine") -> Confirmation:
    return Confirmation(result.plan_id, result.plan_digest, ack)


# a verify command that passes while web/app.log is in place and fails once it moved
NEEDS_LOG = f"""[[{sys.executable!r}, "-c",
  "import pathlib, sys; sys.exit(0 if pathlib.Path('web/app.log').exists() else 3)"]]"""


def configure(world: dict[str, Path], verify: str, timeout: float = 60) -> None:
    """Give the world's root these verify commands (a TOML array of argv arrays)."""
    store = world["store"]
    store.mkdir(parents=True, exist_ok=True)
    (store / "config.toml").write_text(
        f'[roots."{world["root"]}"]\nverify = {verify}\nverify_timeout = {timeout}\n'
    )


def forge_plan(base: api.PlanResult, store: Path, targets: list[Path]) -> dict[str, Any]:
    """A plan for ``targets`` (files or directories, each exactly as it is on disk now) sealed
    with a fresh digest and registered by editing the ledger, as no ``hygiene-nb plan`` would.

    Returns ``path`` (the plan file) and ``doc`` (its content).
    """
    doc = json.loads(Path(base.plan_path).read_text())
    template = doc["candidates"][0]
    root = os.fsencode(doc["root"]["path"])
    doc["candidates"] = []
    for target in targets:
        st = os.lstat(target)
        cand = {
            **template,
            "path": str(target),
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "ctime_ns": st.st_ctime_ns,
            "inode": st.st_ino,
            "dev": st.st_dev,
            "nlink": st.st_nlink,
            "kind": "file",
            "tree_bytes": None,
            "tree_alloc": None,
            "tree_files": None,
            "fingerprint": None,
        }
        if stat.S_ISDIR(st.st_mode):
            found = fingerprint(walk_subtree(root, os.fsencode(target)))
            cand.update(
                kind="dir",
                tree_bytes=found.bytes,
                tree_alloc=found.bytes,
                tree_files=found.count,
                fingerprint=dataclasses.asdict(found),
            )
        doc["candidates"].append(cand)
    doc["summary"]["candidates"] = len(targets)
    doc["folded"], doc["summary"]["folded"] = [], 0
    doc["plan_id"] = "plan-20260101T000000Z-0b0b0b0b"
    doc["plan_digest"] = plan_digest(doc)
    forged = Path(doc["root"]["path"]).parent / "forged.json"
    forged.write_text(json.dumps(doc))
    forged.chmod(0o600)
    db = sqlite3.connect(Store(store).ledger)  # registered by hand, not by `hygiene-nb plan`
    with db:
        db.execute(
            "INSERT INTO plans (plan_id, plan_digest, root, scan_id, path, created_at,"
            " expires_at, candidates, reclaim_bytes, state)"
            " VALUES (?, ?, ?, 's', ?, ?, ?, ?, 0, 'issued')",
            (
                doc["plan_id"],
                doc["plan_digest"],
                doc["root"]["path"],
                str(forged),
                doc["created_at"],
                doc["expires_at"],
                len(targets),
            ),
        )
    db.close()
    return {"path": str(forged), "doc": doc}


KILLER = """
import sys
from hygiene_nb.executor import Confirmation, execute_plan
from hygiene_nb.store import resolve_store
execute_plan(sys.argv[1], store=resolve_store(sys.argv[2]),
             confirm=Confirmation(sys.argv[3], sys.argv[4], "quarantine"))
"""


def read_bytes(path: bytes) -> bytes:
    with open(path, "rb") as handle:
        return handle.read()


def located(store: Path, files: dict[bytes, bytes]) -> dict[bytes, int]:
    """For each original file: how many places hold its bytes (origin or a batch recording it)."""
    counts = dict.fromkeys(files, 0)
    batches = list((store / "quarantine").iterdir()) if (store / "quarantine").exists() else []
    recorded: set[bytes] = set()
    for batch in batches:
        fd = os.open(batch, DIR_FLAGS)
        try:
            doc = read_manifest(fd)
        finally:
            os.close(fd)
        if doc:
            recorded |= {base64.b64decode(i["original_b64"]) for i in doc["items"]}
    for path, data in files.items():
        if os.path.exists(path) and read_bytes(path) == data:
            counts[path] += 1
        for batch in batches:
            inside = os.fsencode(batch) + b"/" + TREE_NAME + path
            if os.path.exists(inside) and read_bytes(inside) == data:
                # the batch must record the item (or an ancestor of it) as its origin
                assert any(path == r or path.startswith(r + b"/") for r in recorded), path
                counts[path] += 1
    return counts


def assert_a_kill_at_loses_nothing(
    world: dict[str, Path], plan: api.PlanResult, point: str
) -> None:
    """Execute ``plan`` in a child killed at ``point``; every file is in one place after."""
    files = {}
    for dirpath, _, names in os.walk(os.fsencode(world["root"])):
        for name in names:
            p = os.path.join(dirpath, name)
            files[p] = read_bytes(p)
    env = {**os.environ, "HYGIENE_NB_TEST_CHECKPOINT": f"{point}:kill"}
    done = subprocess.run(
        [sys.executable, "-c", KILLER, plan.plan_path, str(world["store"]), plan.plan_id,
         plan.plan_digest], env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == -9, done.stderr
    assert set(located(world["store"], files).values()) == {1}


# execute with --allow-copy where the volume quarantine cannot be used (as volume_unusable)
COPY_KILLER = """
import errno, os, sys
import hygiene_nb.executor.moves as moves
from hygiene_nb.executor import Confirmation, execute_plan
from hygiene_nb.store import resolve_store

def refuse(*_):
    raise OSError(errno.EACCES, os.strerror(errno.EACCES))

moves.open_volume_quarantine = refuse
execute_plan(sys.argv[1], store=resolve_store(sys.argv[2]),
             confirm=Confirmation(sys.argv[3], sys.argv[4], "quarantine"), allow_copy=True)
"""


def kill_during_removal(
    world: dict[str, Path], *rels: str, at: str = "during-removal"
) -> tuple[str, Path]:
    """Plan ``rels``, execute with --allow-copy in a child killed inside the removal step."""
    plan = make_plan(world, *rels)
    env = {**os.environ, "HYGIENE_NB_TEST_CHECKPOINT": f"{at}:kill"}
    done = subprocess.run(
        [sys.executable, "-c", COPY_KILLER, plan.plan_path, str(world["store"]), plan.plan_id,
         plan.plan_digest], env=env, capture_output=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == -9, done.stderr
    (staging,) = [p for p in world["mnt"].iterdir() if p.name.startswith(".hygiene-nb-removing-")]
    return plan.plan_path, staging


# -- executions stopped in this process -----------------------------------------------------------


class Stopped(BaseException):
    """The SIGKILL a checkpoint sent, raised in this process instead (``stopped_at``)."""


def stopped_at(point: str, run: Callable[[], object]) -> None:
    """Call ``run`` (an execution) with checkpoint ``point`` set to kill, in this process.

    The checkpoint's SIGKILL to this process is raised as ``Stopped``, which nothing in the
    executor catches: the run writes nothing more, as after a kill. Unlike a kill, its
    ``finally`` blocks still run: they let go of its locks and remove its reserve (the kernel
    and ``recover`` do that after a kill). In-process, as ``assert_a_kill_at_loses_nothing``
    is in a child.
    """
    real_kill = os.kill

    def kill(pid: int, sig: int) -> None:
        if (pid, sig) == (os.getpid(), signal.SIGKILL):
            raise Stopped(point)
        real_kill(pid, sig)

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HYGIENE_NB_TEST_CHECKPOINT", f"{point}:kill")
        mp.setattr(os, "kill", kill)
        with pytest.raises(Stopped):
            run()


def stage_for_removal(original: Path) -> Path:
    """What a removal after a verified copy does first: ``original`` into a new private
    ``.hygiene-nb-removing-*`` directory beside it (a run killed then leaves it there).

    Returns the staging directory.
    """
    staging = original.parent / os.fsdecode(REMOVING_PREFIX + secrets.token_hex(6).encode())
    staging.mkdir(mode=0o700)
    original.rename(staging / original.name)
    return staging


# -- batches and their manifests -------------------------------------------------------------------


def contents(path: Path) -> dict[str, tuple[str, int]]:
    """Every entry below ``path`` (and itself): a hash for files, the kind and mode bits."""
    out: dict[str, tuple[str, int]] = {}
    for dirpath, dirnames, filenames in os.walk(path):
        for name in ["", *dirnames, *filenames]:
            p = Path(dirpath) / name if name else Path(dirpath)
            st = os.lstat(p)
            rel = str(p.relative_to(path))
            if stat.S_ISREG(st.st_mode):
                out[rel] = (hashlib.sha256(p.read_bytes()).hexdigest(), stat.S_IMODE(st.st_mode))
            elif stat.S_ISDIR(st.st_mode):
                out.setdefault(rel, ("dir", 0))
            else:
                out[rel] = ("other", 0)
    return out


def manifest_of(batch: Path) -> dict[str, Any]:
    fd = os.open(batch, DIR_FLAGS)
    try:
        doc = read_manifest(fd)
    finally:
        os.close(fd)
    assert doc is not None
    return doc


def states(batch: Path) -> dict[bytes, str]:
    return {base64.b64decode(i["original_b64"]): i["state"] for i in manifest_of(batch)["items"]}


def edit_manifest(batch: Path, edit: Callable[[dict[str, Any]], None]) -> None:
    """Rewrite the manifest of ``batch`` through ``edit`` (as someone altering it by hand)."""
    path = batch / "manifest.json"
    doc = json.loads(path.read_bytes())
    edit(doc)
    path.write_text(json.dumps(doc))


def in_batch(batch: Path, original: Path) -> Path:
    return batch / TREE_NAME.decode() / str(original).lstrip("/")


def volume_unusable(
    monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[], None] | None = None
) -> None:
    """The quarantine at the top of the other filesystem cannot be made (a top we may not write:
    only root can be refused that way here, and root is never refused). ``meanwhile`` runs
    as it is refused: between an item's check and its inventory for a copy."""

    def refuse(*_: object) -> None:
        if meanwhile is not None:
            meanwhile()
        raise OSError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr("hygiene_nb.executor.moves.open_volume_quarantine", refuse)
    monkeypatch.setattr("hygiene_nb.executor.destinations.predict_volume_quarantine", refuse)


class RaceAfterMkdir(LocalFileOps):
    """Real operations, with a race acted out just after the directory ``name`` is made.

    A copy makes each directory of its copy before it opens the original's: what the race
    does there happens between two steps of the copy (or of opening a quarantine).
    """

    def __init__(self, name: bytes, race: Callable[[], object]) -> None:
        self.name, self.race = name, race
        self.raced = False

    def make_dir(self, dir_fd: int, name: bytes) -> None:
        super().make_dir(dir_fd, name)
        if name == self.name and not self.raced:
            self.raced = True
            self.race()


def outcomes(result: Any) -> dict[str, str]:
    """Each candidate's fate: ``moved`` or its skip code."""
    return {**{m.path: "moved" for m in result.moved}, **{s.path: s.code for s in result.skipped}}


# -- batches filled directly, as the executor fills them -------------------------------------------


PLAN_ID = "plan-20250101T000000Z-0badc0de"
PLAN_DIGEST = "sha256:" + "0" * 64


def new_batch(quarantine: Path) -> Batch:
    """A new batch claimed under ``quarantine`` for the tests' plan (left open)."""
    return claim_batch(quarantine, plan_id=PLAN_ID, plan_digest=PLAN_DIGEST, ops=LocalFileOps())


@contextmanager
def dir_handle(path: Path) -> Iterator[int]:
    """A directory handle on ``path`` (never through a final symlink), closed after the block."""
    fd = os.open(path, DIR_FLAGS)
    try:
        yield fd
    finally:
        os.close(fd)


def made_up_item(raw: bytes, state: str = "pending") -> ManifestItem:
    """A manifest record of a file at ``raw`` that need not exist (its numbers made up)."""
    return ManifestItem(
        original=os.fsdecode(raw),
        original_b64=base64.b64encode(raw).decode(),
        kind="file",
        size=1,
        tree_bytes=None,
        dev=1,
        inode=2,
        mtime_ns=3,
        plan_id=PLAN_ID,
        state=state,
    )


def open_fds() -> set[str]:
    """The file descriptors this process has open (to tell that none was left behind)."""
    return set(os.listdir("/proc/self/fd"))


def quarantine_items(store: Store, paths: Sequence[Path | bytes]) -> str:
    """Move ``paths`` into a new batch the way the executor does; return the batch id."""
    ops = LocalFileOps()
    batch = claim_batch(store.quarantine, plan_id=PLAN_ID, plan_digest=PLAN_DIGEST, ops=ops)
    batch.root = _root_of(store, paths)  # as the executor records the plan's root
    try:
        for path in paths:
            raw = os.fsencode(path)
            item = _item_for(raw)
            batch.items[raw] = item
            target = batches.mirror_parent(batch, raw, ops)
            parent = os.open(os.path.dirname(raw), DIR_FLAGS)
            try:
                changes.note_origin(batch, item, parent)  # what the executor records (v2)
                write_manifest(batch)
                name = os.path.basename(raw)
                ops.rename_noreplace(parent, name, target, name)
                changes.note_arrival(item, target, name)
            finally:
                os.close(parent)
                os.close(target)
            item.state = "moved"
            write_manifest(batch)
    finally:
        batch.close()
    return batch.batch_id


def _root_of(store: Store, paths: Sequence[Path | bytes]) -> dict[str, object]:
    """The tests' plan root: ``<tmp>/root`` beside the store, else the items' common parent."""
    raws = [os.fsencode(p) for p in paths]
    conventional = os.fsencode(store.root.parent / "root")
    if all(r.startswith(conventional + b"/") for r in raws):
        root = conventional
    else:
        root = os.path.commonpath([os.path.dirname(r) for r in raws])
    st = os.lstat(root)
    return {"path": os.fsdecode(root), "dev": signed64(st.st_dev), "inode": signed64(st.st_ino)}


def _item_for(raw: bytes) -> ManifestItem:
    st = os.lstat(raw)
    return ManifestItem(
        original=raw.decode("utf-8", "backslashreplace"),
        original_b64=base64.b64encode(raw).decode("ascii"),
        kind=kind_of_mode(st.st_mode),
        size=st.st_size,
        tree_bytes=None,
        dev=signed64(st.st_dev),
        inode=signed64(st.st_ino),
        mtime_ns=st.st_mtime_ns,
        plan_id=PLAN_ID,
        state="pending",
        at="2025-01-01T00:00:00+00:00",
    )


def in_store_batch(store: Store, batch_id: str, original: Path | bytes) -> bytes:
    """Where ``original`` lives inside the store's batch ``batch_id`` (exact bytes)."""
    return os.fsencode(store.quarantine / batch_id / "tree") + os.fsencode(original)


def snapshot(*roots: Path) -> dict[bytes, tuple[Any, ...]]:
    """Every entry below ``roots`` (links not followed, special files not opened)."""
    out: dict[bytes, tuple[Any, ...]] = {}
    for root in roots:
        top = os.fsencode(root)
        paths = [top]
        for dirpath, dirnames, filenames in os.walk(top):
            paths += [os.path.join(dirpath, n) for n in dirnames + filenames]
        for path in paths:
            st = os.lstat(path)
            data: bytes | None = None
            if stat.S_ISREG(st.st_mode):
                data = Path(os.fsdecode(path)).read_bytes()
            elif stat.S_ISLNK(st.st_mode):
                data = os.readlink(path)
            out[path] = (st.st_mode, st.st_size, st.st_ino, st.st_mtime_ns, st.st_nlink, data)
    return out


def codes(result: restore.RestoreResult) -> list[str]:
    return [b.code for b in result.blocked]


# -- faults ----------------------------------------------------------------------------------------


def first_rename_fails(monkeypatch: pytest.MonkeyPatch, code: int) -> None:
    """The first ``rename_noreplace`` fails with ``code`` (``EXDEV``: the target is on another
    filesystem); later ones are real."""
    real = LocalFileOps.rename_noreplace
    calls: list[bytes] = []

    def rename(self: LocalFileOps, src_dir: int, src: bytes, dst_dir: int, dst: bytes) -> None:
        calls.append(src)
        if len(calls) == 1:
            raise OSError(code, os.strerror(code))
        real(self, src_dir, src, dst_dir, dst)

    monkeypatch.setattr(LocalFileOps, "rename_noreplace", rename)


def reviewed_now(root: Path, target: Path) -> Reviewed:
    """``target`` as a re-check would find it unchanged: what the disk holds now."""
    st = os.lstat(target)
    found = None
    if stat.S_ISDIR(st.st_mode):
        found = fingerprint(walk_subtree(os.fsencode(root), os.fsencode(target)))
    return Reviewed(
        str(target),
        os.fsencode(target),
        kind_of_mode(st.st_mode),
        signed64(st.st_dev),
        signed64(st.st_ino),
        st.st_size,
        st.st_mtime_ns,
        st.st_ctime_ns,
        found,
    )
