"""Build a deterministic synthetic tree for the benchmark (outside the repository).

The tree looks like a data-science home directory at scale: about 90% small files (most empty or
a few hundred bytes, some up to 8 KiB, a few up to a few MiB, a handful of sparse files), about
10% directories (depth up to 9, including ``node_modules``/``__pycache__``-style names), about
0.5% hard links and 0.5% symlinks (some dangling, some pointing at ancestors), and some long
(up to 200 bytes) and unicode names. Names recur across directories and are numbered within
their directory; mtimes come in per-directory write bursts with nanosecond steps, as on real
disks. Everything is drawn from ``random.Random(seed)``, so the same ``(entries, seed)`` always
gives the same names, sizes, contents and mtimes.

``entries`` is the number of lines ``find ROOT | wc -l`` prints: the root, every directory, file,
hard link (each name counts) and symlink, and the marker file. The marker
(``.hygiene-nb-bench-tree.json`` at the top of the tree) records the parameters; a complete tree
with the same parameters is reused instead of regenerated.

Run alone: ``python -m bench.gen_tree ROOT --entries 20000 --seed 42``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["GENERATOR_VERSION", "MARKER_NAME", "generate_tree"]

# 3: mtimes in write bursts; 4: names recur and are numbered per directory, later edits come in
# sessions, a directory's mtime follows its entries
GENERATOR_VERSION = 4
MARKER_NAME = ".hygiene-nb-bench-tree.json"
MAX_DEPTH = 9  # deepest entry below the root; directories go down to MAX_DEPTH - 1
MIN_ENTRIES = 100

DIR_FRACTION = 0.10
HARDLINK_FRACTION = 0.005
SYMLINK_FRACTION = 0.005

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB
CONTENT_BYTES = 8 * MIB  # files are slices of one random buffer (distinct contents, no copying)

# mtimes: 2021-01-01 .. 2025-01-01 UTC, skewed towards recent (fixed, so the tree is reproducible).
# As on real disks, a directory's entries are mostly written in one burst (a checkout, an unpack, a
# program's output): consecutive entries get mtimes microseconds apart (files written in a loop on
# this kernel land 25-40 us apart). A share of files was edited again later, in one later session
# per directory, seconds to a minute apart. A directory's own mtime is the time its last entry
# was created, or later (something was deleted or renamed since).
# Independent nanosecond-random mtimes for every file would be ~57 bits of entropy per entry,
# which no real tree holds and no encoding can store in under ~7 bytes.
MTIME_END_NS = 1_735_689_600 * 10**9
MTIME_SPAN_NS = 4 * 365 * 86_400 * 10**9
MTIME_TOUCHED_LATER = 0.15
BURST_STEP_NS = (5_000, 200_000)  # 5 us .. 205 us between consecutive writes of a burst
EDIT_STEP_NS = (10**6, 60 * 10**9)  # 1 ms .. 60 s between edits of one later session
DIR_CHANGED_LATER = 0.3  # directories whose mtime is after their last entry's creation

# Names: as in real trees, many names recur across directories (a project's README.md, a
# package's __init__.py) and numbered names are numbered within their directory (part-00000,
# img_0001), not across the whole tree. Kept a little harder than real trees: on this machine
# 43% (/root) and 58% (/usr) of file names are distinct, here 65% (1M entries, seed 42).
COMMON_NAME_FRACTION = 0.10
NUMBER_BASE_FRACTION = 0.7  # directories whose numbering starts at a random offset
DIR_WORDS = (
    "src", "data", "notebooks", "results", "models", "lib", "docs", "tmp", "runs", "exp",
    "raw", "processed", "figures", "logs", "scripts", "tests", "assets", "archive", "old",
    "project", "analysis", "shared", "downloads", "outputs",
)  # fmt: skip
SPECIAL_DIRS = (
    "node_modules", "__pycache__", ".ipynb_checkpoints", ".git", ".venv", "site-packages",
    ".cache", "build", "dist", "checkpoints", ".pytest_cache", ".mypy_cache", "wandb",
    "mlruns", ".tox", "Trash",
)  # fmt: skip
# files inside these directories get matching extensions
SPECIAL_EXTS: dict[str, tuple[str, ...]] = {
    "node_modules": (".js", ".js", ".json", ".d.ts", ".map", ".md"),
    "__pycache__": (".cpython-311.pyc",),
    ".ipynb_checkpoints": ("-checkpoint.ipynb",),
    ".git": ("", ".pack", ".idx", ""),
    "site-packages": (".py", ".py", ".pyc", ".so", ".pyi"),
    ".pytest_cache": ("",),
    ".mypy_cache": (".json", ".data.json", ".meta.json"),
    "checkpoints": (".pt", ".ckpt", ".safetensors"),
    "wandb": (".wandb", ".log", ".json"),
    "mlruns": (".yaml", "", ".json"),
}
FILE_WORDS = (
    "data", "model", "run", "notebook", "report", "test", "util", "config", "output", "sample",
    "img", "log", "train", "eval", "part", "chunk", "summary", "draft", "final", "copy",
    "backup", "index", "features", "weights",
)  # fmt: skip
# (extension, weight); expanded into a 100-slot table for a cheap weighted pick
EXT_WEIGHTS = (
    (".py", 12), (".ipynb", 8), (".csv", 8), (".json", 8), (".txt", 8), (".log", 6),
    (".md", 5), (".parquet", 4), (".pyc", 6), (".npy", 4), (".png", 6), (".tmp", 3),
    (".h5", 2), (".pt", 2), (".pkl", 3), (".gz", 3), (".zip", 2), ("", 5), (".so", 1),
    (".js", 4),
)  # fmt: skip
UNICODE_WORDS = (
    "données", "résumé", "日本語のノート", "Ελληνικά", "русский_текст", "naïve café",
    "中文资料", "한국어", "Übergröße", "emoji_🙂🚀", "ñandú", "עברית", "ملف", "cafe\u0301_nfd",
)  # fmt: skip
COMMON_FILES = (
    "README.md", "__init__.py", "setup.py", "requirements.txt", "config.yaml", "config.json",
    ".gitignore", "LICENSE", "Makefile", "main.py", "utils.py", "index.js", "package.json",
    "train.py", "model.py", "data.csv", "results.json", "notes.md", "metadata.json", "log.txt",
)  # fmt: skip
LONG_FILL = "a_rather_long_and_descriptive_name_for_an_experiment_output_" * 4


def _ext_table() -> tuple[str, ...]:
    table: list[str] = []
    for ext, weight in EXT_WEIGHTS:
        table.extend([ext] * weight)
    return tuple(table)


def _read_marker(root: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((root / MARKER_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _write_marker(root: Path, data: dict[str, Any]) -> None:
    fd = os.open(root / MARKER_NAME, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, (json.dumps(data, indent=1, ensure_ascii=False) + "\n").encode())
    finally:
        os.close(fd)


def _log(msg: str) -> None:
    print(f"gen_tree: {msg}", file=sys.stderr, flush=True)


def generate_tree(root: Path, entries: int = 1_000_000, seed: int = 42) -> dict[str, Any]:
    """Build (or reuse) the benchmark tree at ``root``; return its counts.

    Returns:
        ``root``, ``entries`` (as ``find ROOT | wc -l`` counts), ``files`` (regular-file inodes,
        marker included), ``dirs`` (root included), ``hardlinks`` (extra names), ``symlinks``,
        ``dangling_symlinks``, ``sparse_files``, ``long_names``, ``unicode_names``,
        ``apparent_bytes`` (sum of regular-file sizes, each inode once), ``seconds`` and
        ``reused``.

    Raises:
        ValueError: ``entries`` is below the minimum.
        RuntimeError: ``root`` exists, is not empty and is not a generated tree.
    """
    if entries < MIN_ENTRIES:
        raise ValueError(f"entries must be >= {MIN_ENTRIES}, got {entries}")
    root = Path(os.path.abspath(root))
    params = {"entries": entries, "seed": seed, "version": GENERATOR_VERSION}

    if root.exists():
        marker = _read_marker(root)
        if marker is not None and marker.get("complete") and marker.get("params") == params:
            counts = dict(marker["counts"])
            counts.update(root=str(root), seconds=0.0, reused=True)
            _log(f"reusing existing tree at {root} ({entries:,} entries, seed {seed})")
            return counts
        if marker is None and any(root.iterdir()):
            raise RuntimeError(f"{root} exists, is not empty and has no {MARKER_NAME}; refusing")
        why = "incomplete" if marker and marker.get("params") == params else "different parameters"
        _log(f"removing stale tree at {root} ({why})")
        shutil.rmtree(root)

    t0 = time.perf_counter()
    root.mkdir(parents=True)
    _write_marker(root, {"complete": False, "params": params})
    counts = _build(str(root), entries, seed, t0)
    _log("syncing to disk")
    os.sync()
    seconds = time.perf_counter() - t0
    _write_marker(root, {"complete": True, "params": params, "counts": counts})
    os.utime(root / MARKER_NAME, ns=(MTIME_END_NS, MTIME_END_NS))
    counts.update(root=str(root), seconds=round(seconds, 3), reused=False)
    _log(f"generated {entries:,} entries at {root} in {seconds:.1f} s")
    return counts


def _build(root: str, entries: int, seed: int, t0: float) -> dict[str, Any]:
    rng = random.Random(seed)
    rnd = rng.random
    n_dirs = max(2, round(entries * DIR_FRACTION))  # root included
    n_hard = round(entries * HARDLINK_FRACTION)
    n_sym = round(entries * SYMLINK_FRACTION)
    n_files = entries - n_dirs - n_hard - n_sym  # marker included
    n_slots = n_files - 1 + n_hard + n_sym  # non-directory entries the loop creates
    n_sparse = min(8, max(1, n_files // 2000))
    ext_table = _ext_table()
    n_ext = len(ext_table)
    content = memoryview(rng.randbytes(CONTENT_BYTES))

    # -- directories: a random recursive tree, biased towards recent dirs for deep chains
    dir_paths = [root]
    dir_names = [""]
    dir_depth = [0]
    eligible = [0]  # directories that may still get child directories
    subdir_names: dict[int, set[str]] = {}  # names taken in each directory by its subdirectories
    long_names = unicode_names = 0
    for k in range(1, n_dirs):
        if rnd() < 0.3:  # a recent directory: deep chains
            parent = eligible[-1 - int(rnd() * min(16, len(eligible)))]
        else:  # the shallower of two random directories: a bushy top
            a = eligible[int(rnd() * len(eligible))]
            b = eligible[int(rnd() * len(eligible))]
            parent = a if dir_depth[a] <= dir_depth[b] else b
        r = rnd()
        if r < 0.08:
            name = SPECIAL_DIRS[int(rnd() * len(SPECIAL_DIRS))]
            if parent == 0 and name == ".git":  # the root itself is not a repository
                name = "archive"
        elif r < 0.085:
            name = f"{UNICODE_WORDS[int(rnd() * len(UNICODE_WORDS))]}-{k}"
            unicode_names += 1
        elif r < 0.09:
            suffix = f"-{k}"
            name = LONG_FILL[: rng.randint(100, 200) - len(suffix)] + suffix
            long_names += 1
        elif r < 0.5:  # src, tests, data: the same few names in many places
            name = DIR_WORDS[int(rnd() * len(DIR_WORDS))]
        else:  # run-417, exp-12: numbered, but not unique across the tree
            name = f"{DIR_WORDS[int(rnd() * len(DIR_WORDS))]}-{int(rnd() * 1000)}"
        taken = subdir_names.setdefault(parent, set())
        while name in taken:  # "runs" twice, or "runs-17" drawn where "runs" became "runs-17"
            name = f"{name}-{k}"
        taken.add(name)
        path = f"{dir_paths[parent]}/{name}"
        os.mkdir(path)
        depth = dir_depth[parent] + 1
        dir_paths.append(path)
        dir_names.append(name)
        dir_depth.append(depth)
        if depth < MAX_DEPTH - 1:
            eligible.append(k)
    _log(f"{n_dirs:,} directories ({time.perf_counter() - t0:.1f} s)")

    # -- how many non-directory entries each directory gets (heavy-tailed), and of which kind
    cum: list[float] = []
    total = 0.0
    for _ in range(n_dirs):
        total += min(rng.paretovariate(1.5), 500.0)
        cum.append(total)
    per_dir = [0] * n_dirs
    for d in rng.choices(range(n_dirs), cum_weights=cum, k=n_slots):
        per_dir[d] += 1
    kinds = [0] * (n_files - 1) + [1] * n_hard + [2] * n_sym  # 0 file, 1 hard link, 2 symlink
    rng.shuffle(kinds)
    if kinds and kinds[0] != 0:  # the first entry must be a file so hard links have a target
        j = kinds.index(0)
        kinds[0], kinds[j] = kinds[j], kinds[0]
    sparse_at = set(rng.sample(range(n_files - 1), n_sparse))

    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC
    dir_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
    reservoir: list[str] = []  # absolute paths of some regular files (hard/symlink targets)
    last_created = [0] * n_dirs  # mtime of the last entry created in each directory
    slot = file_no = dangling = 0
    apparent = 0
    report_every = max(1, entries // 10)
    next_report = report_every
    for d in range(n_dirs):
        count = per_dir[d]
        if not count:
            continue
        dpath = dir_paths[d]
        exts = SPECIAL_EXTS.get(dir_names[d])
        last_file = ""
        burst = MTIME_END_NS - int(MTIME_SPAN_NS * rnd() ** 2)
        session = 0  # this directory's later editing session, once it has begun
        # numbered names count from 0 here, or from an offset (checkpoint-1000, run ids)
        number = int(rnd() * 10_000) if rnd() < NUMBER_BASE_FRACTION else 0
        common_taken: set[str] = set()
        dfd = os.open(dpath, dir_flags)
        try:
            for _ in range(count):
                kind = kinds[slot]
                slot += 1
                # the name: the number is unique within this directory, and the few unnumbered
                # names are taken once each, so names never collide (subdirectories use "-")
                number += 1
                ext = exts[int(rnd() * len(exts))] if exts else ext_table[int(rnd() * n_ext)]
                r = rnd()
                if r < 0.005:
                    suffix = f"_{number}{ext}"
                    name = LONG_FILL[: rng.randint(100, 200) - len(suffix)] + suffix
                    long_names += 1
                elif r < 0.015:
                    name = f"{UNICODE_WORDS[int(rnd() * len(UNICODE_WORDS))]}_{number}{ext}"
                    unicode_names += 1
                elif r < 0.015 + COMMON_NAME_FRACTION and (
                    (name := COMMON_FILES[int(rnd() * len(COMMON_FILES))]) not in common_taken
                ):
                    common_taken.add(name)
                else:
                    name = f"{FILE_WORDS[int(rnd() * len(FILE_WORDS))]}_{number}{ext}"
                burst += BURST_STEP_NS[0] + int(rnd() * BURST_STEP_NS[1])

                if kind == 0:
                    fd = os.open(name, flags, 0o644, dir_fd=dfd)
                    try:
                        if file_no in sparse_at:
                            size = int(256 * MIB * 32 ** rnd())  # 256 MiB .. 8 GiB apparent
                            os.ftruncate(fd, size)
                            os.pwrite(fd, content[: 64 * KIB], size // 2)
                        else:
                            r = rnd()
                            if r < 0.30:
                                size = 0
                            elif r < 0.85:
                                size = 1 + int(rnd() * 1023)
                            elif r < 0.999:
                                size = KIB + int(rnd() * 7 * KIB)
                            elif r < 0.99995:
                                size = int(8 * KIB * 128 ** rnd())  # 8 KiB .. 1 MiB
                            else:
                                size = int(MIB * 4 ** rnd())  # 1 .. 4 MiB
                            if size:
                                off = int(rnd() * (CONTENT_BYTES - size))
                                written = 0
                                while written < size:
                                    written += os.write(fd, content[off + written : off + size])
                        mtime = burst
                        if rnd() < MTIME_TOUCHED_LATER:  # edited again, in a later session
                            if not session:
                                later = MTIME_END_NS - int(MTIME_SPAN_NS * rnd() ** 2)
                                session = max(burst, later)
                            session += EDIT_STEP_NS[0] + int(rnd() * EDIT_STEP_NS[1])
                            mtime = session
                        os.utime(fd, ns=(mtime, mtime))
                    finally:
                        os.close(fd)
                    apparent += size
                    file_no += 1
                    last_file = name
                    if len(reservoir) < 2048:
                        reservoir.append(f"{dpath}/{name}")
                    elif rnd() < 0.01:
                        reservoir[int(rnd() * 2048)] = f"{dpath}/{name}"
                elif kind == 1:
                    os.link(reservoir[int(rnd() * len(reservoir))], name, dst_dir_fd=dfd)
                else:
                    r = rnd()
                    if r < 0.30:
                        target = f"missing/{name}.orig" if r < 0.2 else f"/nonexistent/{slot}"
                        dangling += 1
                    elif r < 0.55 and last_file:
                        target = last_file
                    elif r < 0.70:
                        target = dir_paths[int(rnd() * n_dirs)]
                    elif r < 0.80:
                        target = "/".join([".."] * (1 + int(rnd() * max(1, dir_depth[d]))))
                    else:
                        target = reservoir[int(rnd() * len(reservoir))]
                    os.symlink(target, name, dir_fd=dfd)
                    os.utime(name, ns=(burst, burst), dir_fd=dfd, follow_symlinks=False)
                if slot >= next_report:
                    next_report += report_every
                    elapsed = time.perf_counter() - t0
                    _log(f"{slot + n_dirs:,}/{entries:,} entries ({elapsed:.1f} s)")
        finally:
            os.close(dfd)
        last_created[d] = burst

    # directory mtimes last (creating children moved them), so they are reproducible too: the
    # last entry's creation, or a later change
    for d, path in enumerate(dir_paths):
        mtime = MTIME_END_NS - int(MTIME_SPAN_NS * rnd() ** 2)
        if last_created[d] and rnd() >= DIR_CHANGED_LATER:
            mtime = last_created[d]
        elif last_created[d]:
            mtime = max(mtime, last_created[d])
        os.utime(path, ns=(mtime, mtime))

    return {
        "entries": entries,
        "files": n_files,
        "dirs": n_dirs,
        "hardlinks": n_hard,
        "symlinks": n_sym,
        "dangling_symlinks": dangling,
        "sparse_files": n_sparse,
        "long_names": long_names,
        "unicode_names": unicode_names,
        "apparent_bytes": apparent,  # regular files, marker excluded
        "max_depth": max(dir_depth[d] + (per_dir[d] > 0) for d in range(n_dirs)),
        "seed": seed,
    }


def main(argv: list[str] | None = None) -> int:
    """Command line: generate (or reuse) a tree and print its counts as JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("root", type=Path)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    print(json.dumps(generate_tree(args.root, args.entries, args.seed), ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
