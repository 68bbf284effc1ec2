"""The store: private directories and files, atomic writes, and nothing touched outside it."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from hygiene_nb.errors import StoreError
from hygiene_nb.store import (
    NotRegularFile,
    Store,
    make_private_dir,
    publish_dir,
    read_regular_file,
    remove_store_path,
    resolve_store,
    write_private_file,
)
from tests.helpers import as_nobody, deadline, tmpfs, world_readable_tmpdir, write


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def leftovers(directory: Path) -> list[str]:
    """Temporary files a write left behind."""
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


# -- where the store is ------------------------------------------------------------------------


def test_resolve_store_from_the_argument_the_environment_or_xdg(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = Path(os.environ["HOME"])
    assert resolve_store().root == home / ".local" / "share" / "hygiene-nb"  # XDG_DATA_HOME
    monkeypatch.delenv("XDG_DATA_HOME")
    assert resolve_store().root == home / ".local" / "share" / "hygiene-nb"  # its default
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert resolve_store().root == tmp_path / "xdg" / "hygiene-nb"
    monkeypatch.setenv("HYGIENE_NB_STORE", str(tmp_path / "env-store"))
    assert resolve_store().root == tmp_path / "env-store"
    assert resolve_store(tmp_path / "given").root == tmp_path / "given"
    monkeypatch.setenv("HYGIENE_NB_STORE", "")  # set but empty: as if unset
    assert resolve_store().root == tmp_path / "xdg" / "hygiene-nb"


def test_resolve_store_is_absolute_and_expands_the_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert resolve_store("rel/store").root == tmp_path / "rel" / "store"
    assert resolve_store("~/s").root == Path(os.environ["HOME"]) / "s"
    assert not (tmp_path / "rel").exists()  # resolving creates nothing


# -- creating it -------------------------------------------------------------------------------


def test_ensure_creates_every_directory_private_and_is_idempotent(tmp_path: Path) -> None:
    store = Store(tmp_path / "a" / "b" / "store")
    with umask(0):
        assert store.ensure() is store
    for path in (
        tmp_path / "a",
        tmp_path / "a" / "b",
        store.root,
        store.snapshots,
        store.plans,
        store.receipts,
        store.quarantine,
    ):
        assert path.is_dir() and mode(path) == 0o700, path
    write(store.plans / "p.json", 1)
    store.ensure()
    assert (store.plans / "p.json").exists()
    assert {p.name for p in store.root.iterdir()} == {
        "snapshots",
        "plans",
        "receipts",
        "quarantine",
    }


def test_an_existing_directory_of_ours_is_made_private(tmp_path: Path) -> None:
    (tmp_path / "open").mkdir(mode=0o755)
    (tmp_path / "open").chmod(0o777)
    make_private_dir(tmp_path / "open")
    assert mode(tmp_path / "open") == 0o700


def test_make_private_dir_refuses_what_is_not_a_directory(tmp_path: Path) -> None:
    write(tmp_path / "file", data=b"precious")
    (tmp_path / "real").mkdir(mode=0o755)
    (tmp_path / "link").symlink_to(tmp_path / "real")
    with pytest.raises(StoreError, match=r"cannot create the store directory .*/file:"):
        make_private_dir(tmp_path / "file")
    with pytest.raises(StoreError, match="not a directory"):
        make_private_dir(tmp_path / "link")  # never a directory through a link
    with pytest.raises(StoreError, match="cannot create"):
        make_private_dir(tmp_path / "file" / "below")
    assert (tmp_path / "file").read_bytes() == b"precious"
    assert mode(tmp_path / "real") == 0o755  # the link's target was not tightened


def test_a_store_where_one_may_not_write_is_refused_with_a_store_error() -> None:
    with world_readable_tmpdir() as shared:
        (shared / "locked").mkdir(mode=0o755)

        def attempt() -> str:
            try:
                Store(shared / "locked" / "store").ensure()
            except StoreError as exc:
                return exc.message
            return "created"

        message = as_nobody(attempt)
        assert "cannot create the store directory" in message and "--store" in message
        assert not (shared / "locked" / "store").exists()


# -- writing its files -------------------------------------------------------------------------


def test_a_private_file_is_written_0600_whole_and_leaves_no_temporary(tmp_path: Path) -> None:
    with umask(0):
        write_private_file(tmp_path / "f.json", b"first")
    assert (tmp_path / "f.json").read_bytes() == b"first" and mode(tmp_path / "f.json") == 0o600
    inode = os.stat(tmp_path / "f.json").st_ino
    write_private_file(tmp_path / "f.json", b"second")
    assert (tmp_path / "f.json").read_bytes() == b"second"
    assert os.stat(tmp_path / "f.json").st_ino != inode  # a new file renamed over, not rewritten
    assert leftovers(tmp_path) == []


def test_a_write_that_fails_keeps_the_old_file_whole_and_leaves_no_temporary(
    tmp_path: Path,
) -> None:
    small = tmp_path / "small"
    small.mkdir()
    with tmpfs(small, "size=64k"):
        write_private_file(small / "index.jsonl", b"old line\n")
        with pytest.raises(StoreError, match="cannot write"):
            write_private_file(small / "index.jsonl", b"x" * (1024 * 1024))  # no room
        assert (small / "index.jsonl").read_bytes() == b"old line\n"
        assert leftovers(small) == []


def test_an_exclusive_write_never_replaces_anything(tmp_path: Path) -> None:
    write_private_file(tmp_path / "receipt.json", b"original", exclusive=True)
    with pytest.raises(StoreError):
        write_private_file(tmp_path / "receipt.json", b"forged", exclusive=True)
    assert (tmp_path / "receipt.json").read_bytes() == b"original"
    victim = write(tmp_path / "victim", data=b"precious")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "to-victim").symlink_to(victim)
    for link in ("dangling", "to-victim"):
        with pytest.raises(StoreError):
            write_private_file(tmp_path / link, b"x", exclusive=True)
    assert victim.read_bytes() == b"precious" and not (tmp_path / "nowhere").exists()
    assert leftovers(tmp_path) == []


def test_replacing_a_symlink_replaces_the_link_never_its_target(tmp_path: Path) -> None:
    victim = write(tmp_path / "victim", data=b"precious")
    (tmp_path / "config.toml").symlink_to(victim)
    write_private_file(tmp_path / "config.toml", b"mine")
    assert not (tmp_path / "config.toml").is_symlink()
    assert (tmp_path / "config.toml").read_bytes() == b"mine"
    assert victim.read_bytes() == b"precious"


# -- reading files it is given -----------------------------------------------------------------


def test_read_regular_file_reads_at_most_one_byte_past_the_limit(tmp_path: Path) -> None:
    path = write(tmp_path / "f", data=b"0123456789" * 300_000)
    assert read_regular_file(path, 10) == b"01234567890"
    assert read_regular_file(path, 10**9) == path.read_bytes()
    assert read_regular_file(write(tmp_path / "empty"), 10) == b""


def test_read_regular_file_never_reads_a_fifo_a_device_or_a_directory(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "fifo")
    with deadline(10):  # opening a fifo to read must not wait for a writer
        for path in (tmp_path / "fifo", Path("/dev/zero"), tmp_path):
            with pytest.raises(NotRegularFile):
                read_regular_file(path, 10)
    with pytest.raises(FileNotFoundError):
        read_regular_file(tmp_path / "missing", 10)


# -- its own files only ------------------------------------------------------------------------


@pytest.fixture
def own(tmp_path: Path) -> Store:
    """A store, created."""
    return Store(tmp_path / "store").ensure()


def test_publish_moves_a_finished_directory_into_place_and_never_over_one(own: Store) -> None:
    staging = own.root / ".incoming" / "scan-1"
    write(staging / "part-0.parquet", 5)
    final = own.snapshots / "scan-1"
    publish_dir(own, staging, final)
    assert (final / "part-0.parquet").exists() and not staging.exists()
    write(staging / "part-0.parquet", 7)
    with pytest.raises(StoreError, match="already exists"):
        publish_dir(own, staging, final)
    assert (final / "part-0.parquet").stat().st_size == 5 and staging.exists()


def test_publish_refuses_paths_outside_the_store(own: Store, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    write(outside / "x", 1)
    with pytest.raises(StoreError, match="not inside the store"):
        publish_dir(own, outside, own.snapshots / "taken")
    with pytest.raises(StoreError, match="not inside the store"):
        publish_dir(own, own.root / ".incoming", tmp_path / "escaped")
    assert (outside / "x").exists() and not (tmp_path / "escaped").exists()


def test_remove_store_path_removes_its_own_files_and_directories(own: Store) -> None:
    write(own.snapshots / "old" / "part-0.parquet", 5)
    write(own.root / ".incoming" / "aborted.tmp", 1)
    remove_store_path(own, own.snapshots / "old")
    remove_store_path(own, own.root / ".incoming" / "aborted.tmp")
    remove_store_path(own, own.snapshots / "never-there")  # nothing to do
    assert not (own.snapshots / "old").exists()
    assert not (own.root / ".incoming" / "aborted.tmp").exists()


def test_store_refuses_paths_outside_itself(tmp_path: Path, own: Store) -> None:
    victim = tmp_path / "user-file"
    victim.write_text("precious")
    for path in (victim, own.root / ".." / "user-file", own.root):
        with pytest.raises(StoreError):
            remove_store_path(own, path)
    assert victim.read_text() == "precious"


def test_remove_store_path_follows_no_symlink_out_of_the_store(tmp_path: Path, own: Store) -> None:
    outside = tmp_path / "outside"
    write(outside / "precious", data=b"do not touch")
    (own.snapshots / "link-to-dir").symlink_to(outside)
    (own.snapshots / "link-to-file").symlink_to(outside / "precious")
    for path in (
        own.snapshots / "link-to-dir",
        own.snapshots / "link-to-file",
        own.snapshots / "link-to-dir" / "precious",
    ):
        with pytest.raises(StoreError, match="not inside the store"):
            remove_store_path(own, path)
    assert (outside / "precious").read_bytes() == b"do not touch"


def test_a_store_path_with_dotdot_after_a_symlink_is_the_one_the_kernel_takes(
    tmp_path: Path,
) -> None:
    """``lnk/../store`` is beside where ``lnk`` leads, as every open() finds it; read as text
    it would be beside ``lnk``, and a store's readers and writers would disagree."""
    from hygiene_nb import api

    (tmp_path / "far" / "away").mkdir(parents=True)
    (tmp_path / "lnk").symlink_to(tmp_path / "far" / "away")
    given = tmp_path / "lnk" / ".." / "store"
    assert resolve_store(given).root == tmp_path / "far" / "store"
    root = tmp_path / "data"
    write(root / "a.log", 5000)
    info = api.scan_root(root, store=given)
    api.annotate([str(root / "a.log")], store=given, decision="delete")
    assert (tmp_path / "far" / "store" / "index.jsonl").is_file()
    assert (tmp_path / "far" / "store" / "ledger.sqlite").is_file()
    assert not (tmp_path / "store").exists()
    assert api.summarize(store=given, scan_id=info.scan_id).files == 1
