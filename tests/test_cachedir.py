"""Cache directory tags (CACHEDIR.TAG): read at scan time, recorded, and classified as caches.

On real trees: a tag cargo writes, hand-written valid and invalid ones, a symlink and a fifo
named CACHEDIR.TAG, an unreadable tag met by another user's scan, and tags planted where
protection decides.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hygiene_nb import api
from hygiene_nb.classify.protect import ProtectContext
from hygiene_nb.classify.stored import classification_key
from hygiene_nb.scan.cachedir import SIGNATURE, TagReader, read_tag, tool_named
from hygiene_nb.scan.index import ScanInfo
from hygiene_nb.scan.request import ScanRequest, walk_options
from hygiene_nb.scan.snapshot import entry_paths, read_scan_info, snapshot_file
from hygiene_nb.scan.walk import open_walker
from hygiene_nb.store import Store
from tests.helpers import acting_as, bind_mount, deadline, world_readable_tmpdir, write

CARGO_TEXT = (
    b"\n# This file is a cache directory tag created by cargo.\n"
    b"# For information about cache directory tags see https://bford.info/cachedir/\n"
)


def tag(directory: Path, text: bytes = SIGNATURE + b"\n") -> Path:
    return write(directory / "CACHEDIR.TAG", data=text)


def scanned(root: Path, store: Path, **kwargs: Any) -> tuple[ScanInfo, dict[str, dict[str, Any]]]:
    info = api.scan_root(root, store=store, **kwargs)
    table = api.classify_snapshot(str(root), store=store)
    rows = table.append_column("path", entry_paths(table)).to_pylist()
    return info, {r["path"]: r for r in rows}


def verdict(rows: dict[str, dict[str, Any]], path: Path) -> tuple[str, str]:
    row = rows[str(path)]
    return row["risk"], row["rule"]


def test_tool_named_reads_what_tools_write() -> None:
    assert tool_named(CARGO_TEXT) == "cargo"
    assert tool_named(b"\n# This file is a cache directory tag automatically created by mypy.\n")
    assert tool_named(b"# This file is a cache directory tag created by Borg.\n") == "Borg"
    assert tool_named(b"created by the  ccache.\n") == "ccache"
    assert tool_named(b"\n") == ""
    assert tool_named(b"created by <script>alert(1)</script>") == ""  # a name, or nothing
    assert len(tool_named(b"created by " + b"x" * 500)) == 64  # bounded


def test_a_real_cargo_build_tags_its_target_which_is_safe(tmp_path: Path, store: Path) -> None:
    cargo = shutil.which("cargo")
    if cargo is None:
        pytest.skip("cargo is not installed here")
    root = tmp_path / "work"
    root.mkdir()
    real_home = pwd.getpwuid(os.getuid()).pw_dir
    env = {
        **os.environ,
        # the test's HOME is empty: the toolchain rustup installed is found where it is
        "RUSTUP_HOME": os.environ.get("RUSTUP_HOME", os.path.join(real_home, ".rustup")),
        "CARGO_HOME": str(tmp_path / "cargo-home"),
    }
    env.pop("CARGO_TARGET_DIR", None)
    subprocess.run([cargo, "new", "-q", "p"], cwd=root, env=env, check=True)
    subprocess.run([cargo, "build", "-q", "--offline"], cwd=root / "p", env=env, check=True)
    target = root / "p" / "target"
    assert (target / "CACHEDIR.TAG").read_bytes().startswith(SIGNATURE)

    info, rows = scanned(root, store)

    assert info.cache_tags == [{"dir": str(target), "tool": "cargo"}]
    # beside its Cargo.toml the Rust rule, which is more specific, decides: safe either way
    assert verdict(rows, target) == ("safe", "rust-target")
    assert verdict(rows, target / "debug") == ("safe", "rust-target")
    # the metadata is kept in the store's index and in the snapshot's footer alike
    assert api.list_snapshots(store=store)[-1].cache_tags == info.cache_tags
    assert read_scan_info(snapshot_file(info)).cache_tags == info.cache_tags


def test_valid_tags_are_recorded_and_others_are_not(
    tmp_path: Path, store: Path, walker: str
) -> None:
    root = tmp_path / "r"
    tag(root / "plain")
    write(root / "plain" / "sub" / "blob.bin", 100)
    tag(root / "ccache", SIGNATURE + b"\n# This file is a cache directory tag created by ccache.\n")
    tag(root / "exact", SIGNATURE)  # the 43 bytes and nothing else
    tag(root / "off-by-one", SIGNATURE[:-1] + b"6\n")
    tag(root / "short", SIGNATURE[:-1])
    tag(root / "lower", SIGNATURE.replace(b"Signature", b"signature"))
    write(root / "empty" / "CACHEDIR.TAG")
    (root / "linked").mkdir()
    (root / "linked" / "CACHEDIR.TAG").symlink_to(root / "plain" / "CACHEDIR.TAG")
    (root / "fifo").mkdir()
    os.mkfifo(root / "fifo" / "CACHEDIR.TAG")
    (root / "dir-named" / "CACHEDIR.TAG").mkdir(parents=True)
    tag(root / "case", SIGNATURE)
    (root / "case" / "CACHEDIR.TAG").rename(root / "case" / "cachedir.tag")

    with deadline(60):  # a fifo that was opened would hang the scan
        info, rows = scanned(root, store, walker=walker)

    assert sorted(info.cache_tags, key=lambda t: t["dir"]) == [
        {"dir": str(root / "ccache"), "tool": "ccache"},
        {"dir": str(root / "exact")},
        {"dir": str(root / "plain")},
    ]
    assert verdict(rows, root / "plain") == ("safe", "cachedir-tag")
    assert verdict(rows, root / "plain" / "sub" / "blob.bin") == ("safe", "cachedir-tag")
    assert rows[str(root / "plain")]["group_root"] is True
    assert rows[str(root / "plain" / "sub")]["group_root"] is False  # absorbed
    claim = rows[str(root / "ccache")]["claim"]
    assert claim == "Cache directory tagged by ccache (CACHEDIR.TAG): the tool recreates it"
    assert "tagged by the tool" in rows[str(root / "plain")]["claim"]
    for name in ("off-by-one", "short", "lower", "empty", "linked", "fifo", "dir-named", "case"):
        assert verdict(rows, root / name) == ("unknown", "no-rule"), name


def test_a_tag_read_directly_is_never_read_through_a_symlink_or_a_fifo(tmp_path: Path) -> None:
    tag(tmp_path / "real", SIGNATURE + CARGO_TEXT)
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "CACHEDIR.TAG").symlink_to(tmp_path / "real" / "CACHEDIR.TAG")
    (tmp_path / "fifo").mkdir()
    os.mkfifo(tmp_path / "fifo" / "CACHEDIR.TAG")
    (tmp_path / "none").mkdir()
    found = {}
    with deadline(10):
        for name in ("real", "link", "fifo", "none"):
            fd = os.open(tmp_path / name, os.O_RDONLY | os.O_DIRECTORY)
            try:
                found[name] = read_tag(fd)
            finally:
                os.close(fd)
    assert found == {"real": "cargo", "link": None, "fifo": None, "none": None}


def test_a_directory_replaced_by_a_symlink_after_its_listing_is_not_read_through(
    tmp_path: Path,
) -> None:
    root = tmp_path / "r"
    write(root / "cache" / "CACHEDIR.TAG", data=b"not a tag")
    tag(tmp_path / "elsewhere")  # a valid tag outside the root
    batches = list(open_walker(walk_options(ScanRequest(str(root)), str(root))).batches())
    shutil.rmtree(root / "cache")
    (root / "cache").symlink_to(tmp_path / "elsewhere")

    reader = TagReader(os.fsencode(root))
    for batch in batches:
        reader.note(batch)
    reader.close()
    assert reader.tags == []


def test_tags_past_the_bound_are_counted_not_recorded(
    tmp_path: Path, store: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hygiene_nb.scan.cachedir.MAX_TAGS", 2)
    root = tmp_path / "r"
    for i in range(5):
        tag(root / f"c{i}")
    info = api.scan_root(root, store=store)
    assert len(info.cache_tags) == 2
    assert info.options["cache_tags_dropped"] == 3
    plain = api.scan_root(tmp_path / "r" / "c0", store=store)
    assert "cache_tags_dropped" not in plain.options


def test_a_tag_whose_read_fails_is_not_valid_and_the_scan_goes_on(
    tmp_path: Path, store: Path
) -> None:
    root = tmp_path / "r"
    write(root / "failing" / "CACHEDIR.TAG")
    tag(root / "fine")
    # this process's memory at offset 0 is unmapped: reading it gives EIO, as a bad disk would
    with bind_mount(Path(f"/proc/{os.getpid()}/mem"), root / "failing" / "CACHEDIR.TAG"):
        with pytest.raises(OSError, match="Input/output error"):
            (root / "failing" / "CACHEDIR.TAG").read_bytes()
        info = api.scan_root(root, store=store)
    assert info.cache_tags == [{"dir": str(root / "fine")}]


def test_an_unreadable_tag_is_not_valid_for_the_user_who_scans(
    other_user: tuple[int, int],
) -> None:
    uid, gid = other_user
    with world_readable_tmpdir() as base:
        root = base / "tree"
        tag(root / "locked")
        os.chmod(root / "locked" / "CACHEDIR.TAG", 0o000)
        tag(root / "theirs")  # root's, readable: opened without O_NOATIME, which needs the owner
        store = base / "store"
        store.mkdir()
        os.chown(store, uid, gid)
        with acting_as(uid, gid):
            info = api.scan_root(root, store=store)
    assert info.cache_tags == [{"dir": str(root / "theirs")}]


def test_protection_wins_over_a_tag(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    home = root / "home"
    os.environ["HOME"] = str(home)
    repo = root / "proj"
    tag(repo / "src")
    write(repo / "src" / "main.c", 10)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}  # fmt: skip
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "."], check=True, env=env)
    subprocess.run(["git", "-C", str(repo), "commit", "-qm", "x"], check=True, env=env)
    tag(home / ".ssh")  # in ~/.ssh itself
    write(home / ".ssh" / "id_ed25519", 10)
    tag(home / ".ssh" / "old")  # below it
    tag(root / "kept")
    write(root / "kept" / ".hygiene-nb-keep")
    tag(root / "certs")
    write(root / "certs" / "server.pem", 10)
    tag(home)  # the home is protected, not its content: the tag must not cover it
    write(home / "Documents" / "thesis.pdf", 10)
    write(home / "stuff" / "random.bin", 10)

    info, rows = scanned(root, store)

    assert len(info.cache_tags) == 6  # each tag is valid: protection decides, not the scan
    assert verdict(rows, home) == ("high", "home")
    assert verdict(rows, home / "Documents" / "thesis.pdf") == ("personal", "office-file")
    assert verdict(rows, home / "stuff" / "random.bin") == ("unknown", "no-rule")
    assert verdict(rows, repo / "src") == ("high", "contains-protected")
    assert verdict(rows, repo / "src" / "CACHEDIR.TAG") == ("high", "git-tracked")
    assert verdict(rows, home / ".ssh") == ("high", "credential")
    assert verdict(rows, home / ".ssh" / "old") == ("high", "credential")
    assert verdict(rows, root / "kept") == ("high", "keep-marker")
    assert verdict(rows, root / "kept" / "CACHEDIR.TAG") == ("high", "keep-marker")
    assert verdict(rows, root / "certs") == ("high", "contains-protected")
    assert verdict(rows, root / "certs" / "CACHEDIR.TAG") == ("safe", "cachedir-tag")


def test_a_tag_beside_more_specific_rules(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    home = root / "home"
    os.environ["HOME"] = str(home)
    write(root / "rs" / "Cargo.toml", 10)
    tag(root / "rs" / "target", SIGNATURE + CARGO_TEXT)
    tag(root / "elsewhere" / "target", SIGNATURE + CARGO_TEXT)  # cargo --target-dir
    tag(home / ".cache" / "someapp")
    tag(home / ".cache" / "huggingface")
    tag(home / "Documents")
    write(root / "web" / "package.json", 2)
    write(root / "web" / "package-lock.json", 2)
    tag(root / "web" / "node_modules" / ".cache")

    _, rows = scanned(root, store)

    assert verdict(rows, root / "rs" / "target") == ("safe", "rust-target")
    # no Cargo.toml beside it: the tag is the evidence the Rust rule lacks
    assert verdict(rows, root / "elsewhere" / "target") == ("safe", "cachedir-tag")
    assert "tagged by cargo" in rows[str(root / "elsewhere" / "target")]["claim"]
    assert verdict(rows, home / ".cache" / "someapp") == ("safe", "cachedir-tag")
    assert verdict(rows, home / ".cache" / "huggingface") == ("caution", "huggingface-cache")
    assert verdict(rows, home / "Documents") == ("personal", "personal-dir")
    assert verdict(rows, root / "web" / "node_modules" / ".cache") == ("safe", "node-modules")


def test_the_kept_classification_follows_the_scans_tags(tmp_path: Path, store: Path) -> None:
    root = tmp_path / "r"
    write(root / "c" / "CACHEDIR.TAG", data=b"not yet")
    first = api.scan_root(root, store=store)
    tag(root / "c")
    second = api.scan_root(root, store=store)

    def rule_at(scan: ScanInfo) -> str:
        table = api.classify_snapshot(store=store, scan_id=scan.scan_id)
        paths, rules = entry_paths(table).to_pylist(), table.column("rule").to_pylist()
        return str(dict(zip(paths, rules, strict=True))[str(root / "c")])

    computed = (rule_at(first), rule_at(second))
    assert len(list((Store(store).root / "classified").rglob("*.parquet"))) == 2
    assert (rule_at(first), rule_at(second)) == computed == ("no-rule", "cachedir-tag")


def test_the_key_of_a_kept_classification_covers_the_tags() -> None:
    plain = ProtectContext("/r", "/home/u", "/s")
    tagged = ProtectContext("/r", "/home/u", "/s", cache_tags=(("/r/c", ""),))
    named = ProtectContext("/r", "/home/u", "/s", cache_tags=(("/r/c", "cargo"),))
    keys = {classification_key(ctx, (), None) for ctx in (plain, tagged, named)}
    assert len(keys) == 3


def test_a_snapshot_recorded_without_tags_has_none() -> None:
    old = ScanInfo.from_dict({"scan_id": "s1", "root": "/r", "host": "h", "started_at": "t"})
    assert old.cache_tags == []
